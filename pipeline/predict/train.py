"""Nightly retraining on a sliding window, with a drift check before promotion.

Reads ``features`` (labelled GPU-days). Writes a model and its card under
``paths.models``, one ``model_runs`` row, and the evaluation as DVC metrics and plot data
(``OUT/metrics/predict.json``, ``OUT/plots/predict_pr.csv``, ``OUT/plots/predict_calibration.csv``).

The candidate is trained on the training period, calibrated on the next and tested on the
last (never shuffled across time). It is promoted only when its test PR-AUC is at least
the rule baseline's and the current model's on the same test days: a drifting or broken
candidate leaves the current model (or the rules) in place. Too little history or too few
failures is not an error: the rules are used, with a note saying why.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import sklearn
from threadpoolctl import threadpool_limits

from pipeline.config import Config
from pipeline.predict import evaluate, model
from pipeline.predict.features import CATEGORICAL, FEATURES, NUMERIC
from pipeline.predict.rules import RuleBaseline, rule_alert
from pipeline.warehouse import Warehouse

log = logging.getLogger(__name__)

#: Fewest positive GPU-days needed in the training and in the calibration period.
MIN_TRAIN_POSITIVES = 20
MIN_CAL_POSITIVES = 5


@dataclass
class TrainResult:
    """What a training attempt did: the version trained (if any), promoted or not, and why."""

    version: str | None = None
    promoted: bool = False
    notes: list[str] = field(default_factory=list)
    metrics: dict | None = None


def labelled_frame(wh: Warehouse, start: date, end: date) -> pd.DataFrame:
    """Labelled GPU-days between two days (inclusive), in time order; numbers as float32
    (half the memory of a year of a large fleet, and what the trees bin anyway)."""
    cols = ", ".join(["serial", "day", "label", "days_to_failure", *(f'CAST("{c}" AS FLOAT) AS "{c}"' for c in NUMERIC),
                      *(f'"{c}"' for c in CATEGORICAL)])
    return wh.df(f"SELECT {cols} FROM features WHERE label IS NOT NULL AND day BETWEEN ? AND ? "
                 "ORDER BY day, serial", [start, end], step="predict: labelled features")


def train(wh: Warehouse, cfg: Config, models_dir: Path, out_dir: Path | None = None, *,
          run_id: int | None = None, seed: int = 0, force: bool = False) -> TrainResult:
    """Train, evaluate and maybe promote a candidate; never raises for lack of data.

    Skips training when the current model was already tested up to the same day (a rerun
    of the night), unless ``force``.
    """
    with threadpool_limits(cfg.predict.threads, "openmp"):
        return _train(wh, cfg, models_dir, out_dir, run_id=run_id, seed=seed, force=force)


def _train(wh: Warehouse, cfg: Config, models_dir: Path, out_dir: Path | None, *,
           run_id: int | None, seed: int, force: bool) -> TrainResult:
    res = TrainResult()
    p = cfg.predict
    span = wh.sql("SELECT min(day), max(day), count(*) FILTER (WHERE label) FROM features WHERE label IS NOT NULL",
                  step="predict: labelled range")[0]
    if span[0] is None:
        res.notes.append("no labelled GPU-days yet (need more than horizon_days of data): using the rule baseline")
        return res
    split = model.choose_split(span[0], span[1], p.train_days, p.calibration_days, p.test_days, p.horizon_days)
    if split is None:
        res.notes.append(f"only {(span[1] - span[0]).days + 1} labelled days: too little history to train, "
                         "using the rule baseline")
        return res
    current = model.current_version(models_dir)
    if current and not force and _covers(models_dir, current, split):
        res.notes.append(f"current model {current} already covers the labelled data to {split.test[1]}: not retrained")
        if out_dir is not None and not (out_dir / "metrics" / "predict.json").exists():
            _write_metrics(out_dir, json.loads((models_dir / f"{current}.json").read_text(encoding="utf-8")))
        return res
    fitted = fit_split(labelled_frame(wh, split.train[0], split.test[1]), split, p, seed=seed)
    if isinstance(fitted, str):
        res.notes.append(fitted)
        return res
    est, test, risk, base_risk, metrics, n_pos = (fitted.est, fitted.test, fitted.risk, fitted.base_risk,
                                                  fitted.metrics, fitted.n_pos)

    current_auc = None
    if current:
        try:
            cur_est, cur_card = model.load(models_dir, current)
            if cur_card.get("features") == list(FEATURES):
                cur_X = model.design_matrix(test, cur_card["levels"])
                from sklearn.metrics import average_precision_score
                current_auc = float(average_precision_score(test["label"].astype(int), cur_est.predict_proba(cur_X)[:, 1]))
        except Exception as exc:  # a broken or foreign current model must not stop the night
            res.notes.append(f"current model {current} could not be scored ({exc}); the candidate competes with the rules only")
    auc, base_auc = metrics["model"]["pr_auc"], metrics["baseline"]["pr_auc"]
    if auc is None or base_auc is None or auc < base_auc:
        promoted, reason = False, f"test PR-AUC {_f(auc)} below the rule baseline's {_f(base_auc)}"
    elif current_auc is not None and auc < current_auc:
        promoted, reason = False, f"test PR-AUC {_f(auc)} below the current model's {_f(current_auc)} (drift check)"
    else:
        promoted, reason = True, (f"test PR-AUC {_f(auc)} vs baseline {_f(base_auc)}"
                                  + (f" and current {_f(current_auc)}" if current_auc is not None else ""))

    now = datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)
    version = f"predict-{split.test[1]:%Y%m%d}-{now:%Y%m%dT%H%M%S}"
    card = {
        "version": version, "trained_at": now.isoformat(), "horizon_days": p.horizon_days,
        "split": split.to_dict(), "train_rows": fitted.train_rows, "train_failures": n_pos["train"],
        "calibration": est.method, "features": list(FEATURES), "levels": fitted.levels,
        "reference": fitted.reference, "baseline": fitted.rules.to_dict(),
        "metrics": metrics, "current_version": current, "current_pr_auc": current_auc,
        "promoted": promoted, "reason": reason, "sklearn": sklearn.__version__,
    }
    model.save(models_dir, version, est, card)
    if promoted:
        model.promote(models_dir, version)
    res.version, res.promoted, res.metrics = version, promoted, metrics
    res.notes.append(f"trained {version}: {'promoted' if promoted else 'not promoted'} ({reason})")
    wh.insert("model_runs", pl.DataFrame([{
        "version": version, "trained_at": now, "run_id": run_id,
        "train_start": split.train[0], "train_end": split.train[1],
        "calibrate_start": split.calibrate[0], "calibrate_end": split.calibrate[1],
        "test_start": split.test[0], "test_end": split.test[1],
        "train_rows": fitted.train_rows, "train_failures": n_pos["train"], "test_failures": n_pos["test"],
        "pr_auc": auc, "baseline_pr_auc": base_auc, "current_pr_auc": current_auc,
        "brier": metrics["model"]["brier"], "ece": metrics["model"]["ece"],
        "promoted": promoted, "reason": reason,
    }], schema_overrides={"run_id": pl.Int64, "current_pr_auc": pl.Float64, "pr_auc": pl.Float64,
                          "baseline_pr_auc": pl.Float64}))
    if out_dir is not None:
        write_evaluation(out_dir, card, test, risk, base_risk)
    return res


@dataclass
class Fitted:
    """A candidate fitted on one split and scored, next to the rules, on its test period."""

    est: object
    levels: dict[str, list[str]]
    reference: dict
    rules: RuleBaseline
    test: pd.DataFrame
    risk: np.ndarray
    base_risk: np.ndarray
    metrics: dict
    train_rows: int
    n_pos: dict[str, int]


def fit_split(frame: pd.DataFrame, split: model.Split, p, *, seed: int = 0) -> Fitted | str:
    """Train on ``split.train``, calibrate on ``split.calibrate``, score on ``split.test``.

    ``frame`` holds labelled GPU-days covering the split. Returns a sentence saying why
    not (the rules stay) when a period has too few failures to learn or judge.
    """
    days = pd.to_datetime(frame["day"]).dt.date
    part = {k: ((days >= a) & (days <= b)).to_numpy() for k, (a, b) in
            (("train", split.train), ("cal", split.calibrate), ("test", split.test))}
    y = frame["label"].astype(bool).to_numpy().astype(int)
    n_pos = {k: int(y[m].sum()) for k, m in part.items()}
    if n_pos["train"] < MIN_TRAIN_POSITIVES or n_pos["cal"] < MIN_CAL_POSITIVES or n_pos["test"] < 1:
        return (f"too few failures to train (positive GPU-days: train {n_pos['train']}, calibrate {n_pos['cal']}, "
                f"test {n_pos['test']}; need {MIN_TRAIN_POSITIVES}/{MIN_CAL_POSITIVES}/1): using the rule baseline")
    levels = model.category_levels(frame[part["train"]])
    X = model.design_matrix(frame, levels)
    est = model.fit(X[part["train"]], y[part["train"]], X[part["cal"]], y[part["cal"]], seed=seed, threads=p.threads)
    rules = RuleBaseline().fit(frame[part["train"] | part["cal"]], y[part["train"] | part["cal"]])
    test = frame[part["test"]].reset_index(drop=True)
    risk = est.predict_proba(X[part["test"]])[:, 1]
    base_risk = rules.predict_proba(test)[:, 1]
    return Fitted(est, levels, model.reference_values(frame[part["train"]]), rules, test, risk, base_risk,
                  evaluate.compare(test, risk, base_risk, rule_alert(test), p), int(part["train"].sum()), n_pos)


def _covers(models_dir: Path, version: str, split: model.Split) -> bool:
    """Whether the current model was tested on the same last day with today's features."""
    card = models_dir / f"{version}.json"
    if not card.exists():
        return False
    c = json.loads(card.read_text(encoding="utf-8"))
    return c.get("split", {}).get("test", [None, None])[1] == str(split.test[1]) and c.get("features") == list(FEATURES)


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def write_evaluation(out_dir: Path, card: dict, test: pd.DataFrame, risk: np.ndarray, base_risk: np.ndarray) -> None:
    """DVC metrics (``metrics/predict.json``) and plots (PR and calibration curves as CSV)."""
    _write_metrics(out_dir, card)
    y = test["label"].astype(bool).to_numpy().astype(int)
    pr = pd.concat([evaluate.pr_curve(y, risk).assign(scorer="model"),
                    evaluate.pr_curve(y, base_risk).assign(scorer="baseline")])
    pr.to_csv(out_dir / "plots" / "predict_pr.csv", index=False)
    cal = pd.concat([evaluate.calibration_table(y, risk).assign(scorer="model"),
                     evaluate.calibration_table(y, base_risk).assign(scorer="baseline")])
    cal.to_csv(out_dir / "plots" / "predict_calibration.csv", index=False)


def _write_metrics(out_dir: Path, card: dict) -> None:
    """``metrics/predict.json`` from a model card (the plots folder is created too)."""
    m = card["metrics"]
    flat = {"version": card["version"], "promoted": card["promoted"], "test_start": card["split"]["test"][0],
            "test_end": card["split"]["test"][1], "horizon_days": card["horizon_days"],
            "model": m["model"], "baseline": m["baseline"],
            "model_recall_at_baseline_precision": m["model_recall_at_baseline_precision"],
            "baseline_precision": m["baseline_precision"], "baseline_recall": m["baseline_recall"],
            "recall_ratio_vs_baseline": m["recall_ratio_vs_baseline"], "alert_threshold": m["alert_threshold"]}
    (out_dir / "metrics").mkdir(parents=True, exist_ok=True)
    (out_dir / "plots").mkdir(parents=True, exist_ok=True)
    (out_dir / "metrics" / "predict.json").write_text(json.dumps(flat, indent=2) + "\n", encoding="utf-8")


def write_placeholder(out_dir: Path, notes: list[str]) -> None:
    """Any missing metrics or plot file, saying no model was evaluated (DVC expects them every night)."""
    files = {
        out_dir / "metrics" / "predict.json":
            json.dumps({"version": "rules", "model": None, "baseline": None, "notes": notes}, indent=2) + "\n",
        out_dir / "plots" / "predict_pr.csv": "recall,precision,threshold,scorer\n",
        out_dir / "plots" / "predict_calibration.csv": "mean_risk,observed_rate,count,scorer\n",
    }
    for path, text in files.items():
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
