"""Nightly retraining, judged against the evidence score by time-ordered cross-validation.

Reads ``features`` (labelled GPU-days). Writes a model and its card under
``paths.models``, one ``model_runs`` row, and the evaluation as DVC metrics and plot data
(``OUT/metrics/predict.json``, ``OUT/plots/predict_pr.csv``, ``OUT/plots/predict_calibration.csv``).

The labelled history is cut into up to ``predict.cv_folds`` consecutive test periods
(:func:`pipeline.predict.model.cv_folds`; never shuffled), each scored by a model trained
only on the days before it (a horizon earlier) and by the evidence score calibrated on the
same days. The periods are pooled: the model's pooled out-of-fold scores calibrate the final
model (trained on the whole window), and the model is promoted only when it clears the bar
of :func:`promotion` (enough folds and failures to judge, a higher pooled PR-AUC than the
evidence score's on the same GPU-days, and in most resamples of the GPUs). Otherwise the evidence score ranks (a previously promoted model is
retired: it no longer shows it does better), and the note says why. Too little history or
too few failures is not an error.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import sklearn
from threadpoolctl import threadpool_limits

from pipeline.config import Config, Predict
from pipeline.predict import evaluate, evidence, model
from pipeline.predict.features import CATEGORICAL, FEATURES, NUMERIC
from pipeline.predict.rules import RuleBaseline, rule_alert
from pipeline.vocab.sql import literal
from pipeline.warehouse import Warehouse

log = logging.getLogger(__name__)

#: Fewest positive GPU-days a fold's training period needs for the trees to learn anything.
MIN_TRAIN_POSITIVES = 10


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
    cols = ", ".join(["serial", "day", "host", "label", "days_to_failure",
                      *(f'CAST("{c}" AS FLOAT) AS "{c}"' for c in NUMERIC), *(f'"{c}"' for c in CATEGORICAL)])
    return wh.engine.pandas(f"SELECT {cols} FROM features WHERE label IS NOT NULL "
                            f"AND day BETWEEN {literal(start)} AND {literal(end)} ORDER BY day, serial",
                            step="predict: labelled features")


def new_evidence(p: Predict, weights_file: str | None = None) -> evidence.EvidenceScore:
    return evidence.EvidenceScore(horizon_days=p.horizon_days, min_failures=p.min_failures, weights_file=weights_file)


@dataclass
class CrossValidation:
    """Pooled out-of-fold GPU-days with the model's raw and calibrated risk, the evidence
    score's risk (calibrated on each fold's own past) and the evaluation of both."""

    folds: list[model.Fold]
    test: pd.DataFrame
    raw: np.ndarray
    risk: np.ndarray
    evidence_risk: np.ndarray
    calibration: dict
    metrics: dict
    notes: list[str]


def cross_validate(frame: pd.DataFrame, folds: list[model.Fold], p: Predict, *, seed: int = 0,
                   weights_file: str | None = None, fits: dict | None = None) -> CrossValidation | str:
    """Score each fold's test days with a model and an evidence score fitted on its past only.

    Returns a sentence saying why not when no fold has enough failures to learn from.
    ``fits`` (fold -> raw scores of its test days) reuses the trees of a fold already
    scored on the same ``frame`` rows: the walk-forward's consecutive nights share most folds.
    """
    day = pd.to_datetime(frame["day"]).dt.date.to_numpy()
    y = frame["label"].astype(bool).to_numpy().astype(int)
    tests, raws, evs, used, notes = [], [], [], [], []
    for f in folds:
        tr = (day >= f.train[0]) & (day <= f.train[1])
        te = (day >= f.test[0]) & (day <= f.test[1])
        if y[tr].sum() < MIN_TRAIN_POSITIVES or not te.any():
            notes.append(f"fold {f.test[0]}..{f.test[1]}: {int(y[tr].sum())} positive training GPU-days "
                         f"(need {MIN_TRAIN_POSITIVES}), skipped")
            continue
        test = frame[te].reset_index(drop=True)
        if fits is None or f not in fits:
            levels = model.category_levels(frame[tr])
            est = model.fit_raw(model.design_matrix(frame[tr], levels), y[tr], seed=seed, threads=p.threads)
            raw = est.predict_proba(model.design_matrix(test, levels))[:, 1]
            if fits is not None:
                fits[f] = raw
        raws.append(raw if fits is None else fits[f])
        ev = new_evidence(p, weights_file).fit(frame[tr], y[tr])
        evs.append(ev.predict_proba(test)[:, 1])
        tests.append(test)
        used.append(f)
    if not used:
        return (f"too few failures to train: no time-ordered fold had {MIN_TRAIN_POSITIVES} positive GPU-days "
                f"before it ({len(folds)} fold{'s' if len(folds) != 1 else ''} tried)")
    test = pd.concat(tests, ignore_index=True)
    raw, ev_risk = np.concatenate(raws), np.concatenate(evs)
    yt = test["label"].astype(bool).to_numpy().astype(int)
    if yt.sum() == 0:
        return f"no failure fell in the {len(used)} out-of-fold period(s): nothing to judge a model on"
    cal = model.fit_calibration(raw, yt)
    risk = model.calibrate(raw, cal)
    threshold = p.cost_needless_drain / p.cost_missed_failure
    metrics = evaluate.compare(test, risk, ev_risk, ev_risk >= threshold, p)
    rules = RuleBaseline().fit(frame[day < used[0].test[0]], y[day < used[0].test[0]])
    metrics["rules"] = evaluate.score(test, rules.predict_proba(test)[:, 1], rule_alert(test), p)
    return CrossValidation(used, test, raw, risk, ev_risk, cal, metrics, notes)


@dataclass(frozen=True)
class BarCheck:
    """One condition of the promotion bar: what this night had, what it needs, met or not."""

    check: str
    value: float | int | None
    need: str
    met: bool
    #: What the reason says when the check is not met.
    why: str = ""


def promotion_bar(cv: CrossValidation, p: Predict) -> list[BarCheck]:
    """The promotion bar, in order; a check after the first one not met is not evaluated.

    1. At least ``predict.promotion_min_folds`` time-ordered folds scored: the resamples of
       check 4 draw GPUs, not periods, so they say which GPUs happened to fail, not whether
       the gain holds as the fleet moves on; only more test periods replicate over time.
    2. At least ``predict.promotion_min_failures`` failed GPUs among the pooled days: the
       PR-AUC is set by where the failures rank, so they are the clusters the resamples
       draw, and with few of them a percentile bootstrap is too narrow (an equally good
       ranker "wins in 90% of resamples" more often than 1 time in 10:
       ``bench/bench_predict_bar.py``, docs/predict.md).
    3. A higher pooled out-of-fold PR-AUC than the evidence score's on the same GPU-days.
    4. Higher in at least :data:`PROMOTION_SHARE` of :data:`PROMOTION_RESAMPLES` resamples of
       the out-of-fold GPUs.
    """
    m = cv.metrics
    auc, ev_auc, fails = m["model"]["pr_auc"], m["baseline"]["pr_auc"], int(m["model"]["failures"])
    need_fails = max(p.min_failures, p.promotion_min_failures)
    checks = [BarCheck("time-ordered folds", len(cv.folds), f">= {p.promotion_min_folds}",
                       len(cv.folds) >= p.promotion_min_folds,
                       f"need {p.promotion_min_folds} folds to judge a model over time")]
    checks.append(BarCheck("failed GPUs in the folds", fails, f">= {need_fails}", fails >= need_fails,
                           f"need {need_fails} failures to judge a model"))
    if not all(c.met for c in checks):
        return checks
    checks.append(BarCheck("PR-AUC above the evidence score's", auc, f"> {_f(ev_auc)}",
                           auc is not None and ev_auc is not None and auc > ev_auc, "the model does not beat it"))
    if not checks[-1].met:
        return checks
    share = bootstrap_wins(cv.test, cv.risk, cv.evidence_risk)
    checks.append(BarCheck(f"share of {PROMOTION_RESAMPLES} GPU resamples won", round(share, 3),
                           f">= {PROMOTION_SHARE:.2f}", share >= PROMOTION_SHARE))
    return checks


def promotion(cv: CrossValidation, p: Predict) -> tuple[bool, str]:
    """Whether the model clears the bar of :func:`promotion_bar`, and why, in words."""
    return _promotion(cv, promotion_bar(cv, p))


def _promotion(cv: CrossValidation, checks: list[BarCheck]) -> tuple[bool, str]:
    m = cv.metrics
    auc, ev_auc, fails, folds = m["model"]["pr_auc"], m["baseline"]["pr_auc"], m["model"]["failures"], len(cv.folds)
    what = (f"pooled out-of-fold PR-AUC {_f(auc)} vs the evidence score's {_f(ev_auc)} over {folds} "
            f"time-ordered fold{'s' if folds != 1 else ''}, {fails} failures")
    short = next((c for c in checks if not c.met), None)
    if len(checks) == 4:  # the resamples were drawn: say how many it won, met or not
        what += (f"; it wins in {checks[3].value:.0%} of {PROMOTION_RESAMPLES} resamples of the GPUs "
                 f"(need {PROMOTION_SHARE:.0%})")
    elif short is not None:
        what += f" ({short.why})"
    return short is None, what


#: Resamples of the out-of-fold GPUs, and the share the model must win, before it is promoted.
#: With 20-odd failures a pooled PR-AUC a few points above the evidence score's is within
#: the noise of which GPUs happened to fail (bench/RESULTS.md: a model promoted on such a
#: margin then lost to the evidence score on the next period).
PROMOTION_RESAMPLES = 200
PROMOTION_SHARE = 0.9


def bootstrap_wins(test: pd.DataFrame, risk: np.ndarray, other: np.ndarray, *, draws: int = PROMOTION_RESAMPLES,
                   seed: int = 0) -> float:
    """Share of resamples of ``test``'s GPUs (whole histories, drawn with replacement: a
    GPU's days are not independent) in which ``risk`` has the higher PR-AUC than ``other``."""
    from sklearn.metrics import average_precision_score

    y = test["label"].astype(bool).to_numpy()
    codes, uniques = pd.factorize(test["serial"])
    rng = np.random.default_rng(seed)
    wins = valid = 0
    for _ in range(draws):
        weight = np.bincount(rng.integers(0, len(uniques), len(uniques)), minlength=len(uniques))[codes]
        if not (weight * y).any():
            continue
        valid += 1
        wins += average_precision_score(y, risk, sample_weight=weight) > average_precision_score(y, other, sample_weight=weight)
    return wins / valid if valid else 0.0


def train(wh: Warehouse, cfg: Config, models_dir: Path, out_dir: Path | None = None, *,
          run_id: int | None = None, seed: int = 0, force: bool = False) -> TrainResult:
    """Cross-validate, fit and maybe promote a candidate; never raises for lack of data.

    Skips training when the current card already covers the same last labelled day with
    today's features (a rerun of the night), unless ``force``.
    """
    with threadpool_limits(cfg.predict.threads, "openmp"):
        return _train(wh, cfg, models_dir, out_dir, run_id=run_id, seed=seed, force=force)


def _train(wh: Warehouse, cfg: Config, models_dir: Path, out_dir: Path | None, *,
           run_id: int | None, seed: int, force: bool) -> TrainResult:
    res = TrainResult()
    p = cfg.predict
    span = wh.engine.rows("SELECT min(day), max(day) FROM features WHERE label IS NOT NULL", step="predict: labelled range")[0]
    if span[0] is None:
        res.notes.append("no labelled GPU-days yet (need more than horizon_days of data): the evidence score ranks")
        return res
    folds = model.cv_folds(span[0], span[1], p.train_days, p.test_days, p.horizon_days, p.cv_folds)
    if not folds:
        res.notes.append(f"only {(span[1] - span[0]).days + 1} labelled days: too little history for a time-ordered "
                         f"fold (need {model.MIN_TRAIN_DAYS + p.horizon_days + 7}); the evidence score ranks")
        return res
    last_card = _last_card(models_dir)
    if last_card and not force and last_card.get("labelled_to") == str(span[1]) \
            and last_card.get("features") == list(FEATURES):
        res.notes.append(f"model {last_card['version']} already judged on the labelled data to {span[1]}: not retrained")
        if out_dir is not None and not (out_dir / "metrics" / "predict.json").exists():
            _write_metrics(out_dir, last_card)
        return res
    start = min(folds[0].train[0], span[1] - timedelta(days=p.train_days - 1))
    frame = labelled_frame(wh, max(span[0], start), span[1])
    weights_file = str(cfg.resolve(p.evidence_file)) if p.evidence_file else None
    cv = cross_validate(frame, folds, p, seed=seed, weights_file=weights_file)
    if isinstance(cv, str):
        res.notes.append(cv + ": the evidence score ranks")
        _retire(models_dir, res)
        return res
    bar = promotion_bar(cv, p)
    promoted, reason = _promotion(cv, bar)
    final = frame[pd.to_datetime(frame["day"]).dt.date >= span[1] - timedelta(days=p.train_days - 1)]
    y = final["label"].astype(bool).to_numpy().astype(int)
    levels = model.category_levels(final)
    est = model.fit_raw(model.design_matrix(final, levels), y, seed=seed, threads=p.threads)
    now = datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)
    version = f"predict-{span[1]:%Y%m%d}-{now:%Y%m%dT%H%M%S}"
    oof = (cv.folds[0].test[0], cv.folds[-1].test[1])
    card = {
        "version": version, "trained_at": now.isoformat(), "horizon_days": p.horizon_days, "labelled_to": str(span[1]),
        "split": {"train": [str(final["day"].min())[:10], str(span[1])], "out-of-fold test": [str(oof[0]), str(oof[1])]},
        "folds": [f.to_dict() for f in cv.folds], "train_rows": int(len(final)), "train_failures": int(y.sum()),
        "calibration": cv.calibration, "features": list(FEATURES), "levels": levels,
        "reference": model.reference_values(final), "metrics": cv.metrics,
        "promoted": promoted, "reason": reason, "promotion_bar": [dataclasses.asdict(c) for c in bar],
        "sklearn": sklearn.__version__,
    }
    model.save(models_dir, version, est, card)
    if promoted:
        model.promote(models_dir, version)
        res.notes.append(f"trained {version}: promoted, it ranks ({reason})")
    else:
        _retire(models_dir, res)
        res.notes.append(f"trained {version}: not promoted, the evidence score ranks ({reason})")
    res.version, res.promoted, res.metrics = version, promoted, cv.metrics
    res.notes += cv.notes
    m = cv.metrics
    wh.insert("model_runs", pl.DataFrame([{
        "version": version, "trained_at": now, "run_id": run_id,
        "train_start": pd.Timestamp(final["day"].min()).date(), "train_end": span[1],
        "calibrate_start": oof[0], "calibrate_end": oof[1], "test_start": oof[0], "test_end": oof[1],
        "train_rows": int(len(final)), "train_failures": int(y.sum()), "test_failures": int(m["model"]["failures"]),
        "pr_auc": m["model"]["pr_auc"], "baseline_pr_auc": m["baseline"]["pr_auc"], "current_pr_auc": None,
        "brier": m["model"]["brier"], "ece": m["model"]["ece"], "promoted": promoted, "reason": reason,
    }], schema_overrides={"run_id": pl.Int64, "current_pr_auc": pl.Float64, "pr_auc": pl.Float64,
                          "baseline_pr_auc": pl.Float64}))
    if out_dir is not None:
        write_evaluation(out_dir, card, cv.test, cv.risk, cv.evidence_risk)
    return res


def _last_card(models_dir: Path) -> dict | None:
    cards = sorted(models_dir.glob("predict-*.json")) if models_dir.exists() else []
    return json.loads(cards[-1].read_text(encoding="utf-8")) if cards else None


def _retire(models_dir: Path, res: TrainResult) -> None:
    """The evidence score ranks from now on: a promoted model no longer shows it does better."""
    current = models_dir / "current.json"
    if current.exists():
        res.notes.append(f"model {model.current_version(models_dir)} retired")
        current.unlink()


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def write_evaluation(out_dir: Path, card: dict, test: pd.DataFrame, risk: np.ndarray, base_risk: np.ndarray) -> None:
    """DVC metrics (``metrics/predict.json``) and plots (PR and calibration curves as CSV)."""
    _write_metrics(out_dir, card)
    y = test["label"].astype(bool).to_numpy().astype(int)
    pr = pd.concat([evaluate.pr_curve(y, risk).assign(scorer="model"),
                    evaluate.pr_curve(y, base_risk).assign(scorer="evidence")])
    pr.to_csv(out_dir / "plots" / "predict_pr.csv", index=False)
    cal = pd.concat([evaluate.calibration_table(y, risk).assign(scorer="model"),
                     evaluate.calibration_table(y, base_risk).assign(scorer="evidence")])
    cal.to_csv(out_dir / "plots" / "predict_calibration.csv", index=False)


def _write_metrics(out_dir: Path, card: dict) -> None:
    """``metrics/predict.json`` from a model card (the plots folder is created too)."""
    m = card["metrics"]
    flat = {"version": card["version"], "promoted": card["promoted"], "test_start": _test_period(card)[0],
            "test_end": _test_period(card)[1], "horizon_days": card["horizon_days"],
            "model": m["model"], "baseline": m["baseline"], "rules": m.get("rules"), "reason": card.get("reason"),
            "model_recall_at_baseline_precision": m["model_recall_at_baseline_precision"],
            "baseline_precision": m["baseline_precision"], "baseline_recall": m["baseline_recall"],
            "recall_ratio_vs_baseline": m["recall_ratio_vs_baseline"], "alert_threshold": m["alert_threshold"]}
    (out_dir / "metrics").mkdir(parents=True, exist_ok=True)
    (out_dir / "plots").mkdir(parents=True, exist_ok=True)
    (out_dir / "metrics" / "predict.json").write_text(json.dumps(flat, indent=2) + "\n", encoding="utf-8")


def _test_period(card: dict) -> list[str]:
    split = card["split"]
    return split.get("out-of-fold test") or split.get("test")


def write_placeholder(out_dir: Path, notes: list[str]) -> None:
    """Any missing metrics or plot file, saying no model was evaluated (DVC expects them every night)."""
    files = {
        out_dir / "metrics" / "predict.json":
            json.dumps({"version": "evidence", "model": None, "baseline": None, "notes": notes}, indent=2) + "\n",
        out_dir / "plots" / "predict_pr.csv": "recall,precision,threshold,scorer\n",
        out_dir / "plots" / "predict_calibration.csv": "mean_risk,observed_rate,count,scorer\n",
    }
    for path, text in files.items():
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
