"""The failure model: a class-weighted gradient-boosted tree, calibrated out of fold.

Reads and writes model files only (no tables). A model is a
``HistGradientBoostingClassifier`` fitted on the labelled history; its raw scores become
probabilities through a sigmoid (Platt) fitted on the pooled out-of-fold scores of the
time-ordered cross-validation (:func:`cv_folds`), kept in the card as ``calibration``:
no GPU-day the calibrator sees was in the training of the model that scored it. It is
stored with skops (no
pickle: loading checks every type against a list of trusted scikit-learn/numpy types)
beside a model card (JSON for programs, Markdown for people) holding its version, data
range, features, category levels, reference values for explanations and test metrics.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.calibration import CalibratedClassifierCV
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.frozen import FrozenEstimator
from threadpoolctl import threadpool_limits

from pipeline.errors import FleetfaultError
from pipeline.predict.features import CATEGORICAL, FEATURES, NUMERIC

log = logging.getLogger(__name__)

#: Most category levels kept per column (the rest are "unknown"); HGB allows 255.
MAX_LEVELS = 250

#: Calibrate isotonically only with at least this many positive GPU-days in the period.
ISOTONIC_MIN_POSITIVES = 40

#: Most negative GPU-days trained on; beyond it negatives are sampled and re-weighted.
#: Failures are what is scarce (a 2,000-GPU fleet has a few hundred positive GPU-days in a
#: half year, against ~300,000 negative ones, nearly all without any evidence), and
#: sampling the majority class then undoing it by weight loses little (He et al., "Practical
#: lessons from predicting clicks on ads at Facebook", ADKDD 2014, section 6.2); the
#: out-of-fold calibration is fitted on unsampled days either way. It keeps a night's five
#: fits (four folds and the final model) within minutes on a shared 2-core host.
MAX_TRAIN_NEGATIVES = 25_000


@dataclass(frozen=True)
class Split:
    """Train / calibrate / test periods (inclusive days), in time order, with gaps of the
    horizon between them so that no failure labels GPU-days on both sides of a boundary."""

    train: tuple[date, date]
    calibrate: tuple[date, date]
    test: tuple[date, date]

    def to_dict(self) -> dict:
        return {k: [str(a), str(b)] for k, (a, b) in
                (("train", self.train), ("calibrate", self.calibrate), ("test", self.test))}


def choose_split(first: date, last: date, train_days: int, calibration_days: int, test_days: int,
                 horizon: int) -> Split | None:
    """Periods ending at ``last`` (the last labelled day): the configured lengths when the
    data is long enough (a sliding training window), else 60/20/20 of what there is.

    Returns None when fewer than 7 days would be left for any period.
    """
    span = (last - first).days + 1 - 2 * horizon
    want = train_days + calibration_days + test_days
    if span < want:
        test_days = calibration_days = max(0, int(span * 0.2))
        train_days = span - 2 * test_days
    if min(train_days, calibration_days, test_days) < 7:
        return None
    return periods_ending(first, last, train_days, calibration_days, test_days, horizon)


def periods_ending(first: date, last: date, train_days: int, calibration_days: int, test_days: int,
                   horizon: int) -> Split:
    """Test, then calibration, then training periods back from ``last``, a horizon apart;
    training starts no earlier than ``first`` (so it may be shorter than ``train_days``)."""
    test = (last - timedelta(days=test_days - 1), last)
    cal_end = test[0] - timedelta(days=horizon + 1)
    cal = (cal_end - timedelta(days=calibration_days - 1), cal_end)
    train_end = cal[0] - timedelta(days=horizon + 1)
    train = (max(first, train_end - timedelta(days=train_days - 1)), train_end)
    return Split(train, cal, test)


@dataclass(frozen=True)
class Fold:
    """One time-ordered cross-validation fold: train on ``train``, judge on ``test`` (a
    horizon later, so no failure labels GPU-days on both sides)."""

    train: tuple[date, date]
    test: tuple[date, date]

    def to_dict(self) -> dict:
        return {"train": [str(a) for a in self.train], "test": [str(a) for a in self.test]}


#: Fewest training days a fold keeps.
MIN_TRAIN_DAYS = 14


def cv_folds(first: date, last: date, train_days: int, test_days: int, horizon: int, folds: int) -> list[Fold]:
    """Up to ``folds`` consecutive test periods tiling back from ``last`` (oldest first).

    A period is ``test_days`` long when the history allows, else shorter (7 days at least) so
    that a young fleet still gets folds; each trains on up to ``train_days`` before it, a
    horizon apart, and needs :data:`MIN_TRAIN_DAYS`.
    """
    span = (last - first).days + 1
    length = max(7, min(test_days, (span - MIN_TRAIN_DAYS - horizon) // max(folds, 1)))
    out = []
    for j in range(folds):
        t1 = last - timedelta(days=j * length)
        t0 = t1 - timedelta(days=length - 1)
        tr1 = t0 - timedelta(days=horizon + 1)
        tr0 = max(first, tr1 - timedelta(days=train_days - 1))
        if (tr1 - tr0).days + 1 < MIN_TRAIN_DAYS:
            break
        out.append(Fold((tr0, tr1), (t0, t1)))
    return out[::-1]


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 1e-7, 1 - 1e-7)
    return np.log(p) - np.log1p(-p)


def fit_calibration(raw: np.ndarray, y: np.ndarray) -> dict:
    """Platt scaling on the logit of raw scores: ``{"method": "sigmoid", "a", "b"}`` (b ≥ 0)."""
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=100.0).fit(_logit(raw).reshape(-1, 1), np.asarray(y, dtype=int))
    return {"method": "sigmoid", "a": float(lr.coef_[0, 0]), "b": float(lr.intercept_[0])}


def calibrate(raw: np.ndarray, cal: dict) -> np.ndarray:
    """Calibrated probabilities from raw scores (see :func:`fit_calibration`)."""
    from scipy.special import expit

    return expit(max(cal["a"], 0.0) * _logit(raw) + cal["b"])


def predict_risk(est, card: dict, frame: pd.DataFrame) -> np.ndarray:
    """The calibrated risk of a stored model on a features frame."""
    raw = est.predict_proba(design_matrix(frame, card["levels"]))[:, 1]
    cal = card.get("calibration")
    return calibrate(raw, cal) if isinstance(cal, dict) else raw


def category_levels(frame: pd.DataFrame) -> dict[str, list[str]]:
    """The most frequent levels of each categorical column (kept with the model)."""
    return {c: [str(v) for v in frame[c].value_counts().index[:MAX_LEVELS]] for c in CATEGORICAL}


def design_matrix(frame: pd.DataFrame, levels: dict[str, list[str]]) -> pd.DataFrame:
    """The model's input: numeric features as float32, categoricals with the model's levels."""
    X = frame[list(NUMERIC)].astype("float32")
    for c in CATEGORICAL:
        X[c] = pd.Categorical(frame[c].astype("object"), categories=levels.get(c, []))
    return X[list(FEATURES)]


def fit(X_train: pd.DataFrame, y_train: np.ndarray, X_cal: pd.DataFrame, y_cal: np.ndarray,
        *, seed: int = 0, threads: int = 1) -> CalibratedClassifierCV:
    """Fit the boosted trees on the training period, then calibrate on the calibration period.

    ``threads`` caps OpenMP: on a busy host, threads that spin-wait on each other make a fit
    slower than one thread does.
    """
    with threadpool_limits(threads, "openmp"):
        hgb = _fit_raw(X_train, y_train, seed)
        method = "isotonic" if int(np.sum(y_cal)) >= ISOTONIC_MIN_POSITIVES else "sigmoid"
        cal = CalibratedClassifierCV(FrozenEstimator(hgb), method=method)
        return cal.fit(X_cal, np.asarray(y_cal, dtype=int))


def fit_raw(X_train: pd.DataFrame, y_train: np.ndarray, *, seed: int = 0,
            threads: int = 1) -> HistGradientBoostingClassifier:
    """The boosted trees alone (raw scores, to be calibrated out of fold)."""
    with threadpool_limits(threads, "openmp"):
        return _fit_raw(X_train, y_train, seed)


def _fit_raw(X_train, y_train, seed: int) -> HistGradientBoostingClassifier:
    """Positives are up-weighted by the square root of the class ratio (enough to learn rare
    failures without making the trees chase noise); calibration undoes the weighting."""
    y_train = np.asarray(y_train, dtype=int)
    pos, neg = int(y_train.sum()), int(len(y_train) - y_train.sum())
    rng = np.random.default_rng(seed)
    weight = np.ones(len(y_train))
    if neg > MAX_TRAIN_NEGATIVES:
        rate = MAX_TRAIN_NEGATIVES / neg
        keep = (y_train == 1) | (rng.random(len(y_train)) < rate)
        X_train, y_train, weight = X_train[keep], y_train[keep], weight[keep]
        weight[y_train == 0] = 1 / rate
    weight[y_train == 1] *= max(1.0, np.sqrt(neg / max(pos, 1)))
    # A feature never reported (no fan on SXM boards) is all-missing, which the binner
    # rejects; as a constant it gets no splits, so its later values cannot matter.
    empty = [c for c in NUMERIC if X_train[c].isna().all()]
    if empty:
        X_train = X_train.assign(**{c: np.float32(0) for c in empty})
    hgb = HistGradientBoostingClassifier(
        learning_rate=0.08, max_iter=150, max_leaf_nodes=15, min_samples_leaf=40,
        l2_regularization=1.0, early_stopping=False, random_state=seed,
    )
    hgb.fit(X_train, y_train, sample_weight=weight)
    log.info("model: %d training rows (%d positive)", len(y_train), pos)
    return hgb


def reference_values(frame: pd.DataFrame) -> dict:
    """Typical values (median, most common level): what explanations compare a GPU to."""
    ref: dict = {c: (None if pd.isna(v) else float(v)) for c, v in frame[list(NUMERIC)].median().items()}
    for c in CATEGORICAL:
        mode = frame[c].mode()
        ref[c] = None if mode.empty else str(mode.iloc[0])
    return ref


# -- storage -----------------------------------------------------------------------------------

#: Type prefixes a stored model may contain; anything else refuses to load.
_TRUSTED_PREFIXES = ("sklearn.", "numpy.", "builtins.", "collections.", "scipy.", "pandas.")
_TRUSTED_NAMES = ("functools.partial",)  # sklearn's losses hold partials of its own functions


def save(models_dir: Path, version: str, estimator, card: dict) -> Path:
    """Write ``<version>.skops``, ``<version>.json`` and ``<version>.md``; returns the model path."""
    import skops.io as sio

    models_dir.mkdir(parents=True, exist_ok=True)
    path = models_dir / f"{version}.skops"
    sio.dump(estimator, path)
    (models_dir / f"{version}.json").write_text(json.dumps(card, indent=2, default=str), encoding="utf-8")
    (models_dir / f"{version}.md").write_text(card_markdown(card), encoding="utf-8")
    return path


def load(models_dir: Path, version: str):
    """The stored estimator and its card.

    Raises
    ------
    FleetfaultError
        When the files are missing or hold a type outside the trusted list.
    """
    import skops.io as sio

    path, card_path = models_dir / f"{version}.skops", models_dir / f"{version}.json"
    if not path.exists() or not card_path.exists():
        raise FleetfaultError(f"model {version} is missing from {models_dir} (expected {path.name} and {card_path.name})")
    untrusted = sio.get_untrusted_types(file=path)
    bad = [t for t in untrusted if not t.startswith(_TRUSTED_PREFIXES) and t not in _TRUSTED_NAMES]
    if bad:
        raise FleetfaultError(f"{path}: refusing to load types outside scikit-learn/numpy: {bad}")
    return sio.load(path, trusted=untrusted), json.loads(card_path.read_text(encoding="utf-8"))


def current_version(models_dir: Path) -> str | None:
    """The promoted model's version (``current.json``), or None."""
    p = models_dir / "current.json"
    return json.loads(p.read_text(encoding="utf-8"))["version"] if p.exists() else None


def promote(models_dir: Path, version: str) -> None:
    (models_dir / "current.json").write_text(json.dumps({"version": version}) + "\n", encoding="utf-8")


def _bar_lines(bar: list[dict] | None) -> list[str]:
    """The promotion bar as a table: each check, this night's value, what it needs, met or not
    (a check after the first one not met was not evaluated)."""
    if not bar:
        return []
    rows = [f"| {c['check']} | {'—' if c['value'] is None else c['value']} | {c['need']} | "
            f"{'yes' if c['met'] else '**no**'} |" for c in bar]
    return ["## Promotion bar (docs/predict.md)", "", "| check | this model | needs | met |", "|---|---|---|---|",
            *rows, ""]


def card_markdown(card: dict) -> str:
    """The model card for people."""
    m, b = card.get("metrics", {}).get("model", {}), card.get("metrics", {}).get("baseline", {})
    rows = ["pr_auc", "recall_at_90_precision", "precision_top1pct", "recall_top1pct", "precision_topk",
            "recall_topk", "median_lead_days", "brier", "ece", "cost_saved"]

    def fmt(v):
        return "—" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))

    lines = [
        f"# Failure model {card['version']}", "",
        f"Replacement within {card['horizon_days']} days, per GPU and day. Trained {card['trained_at']}.",
        f"Promoted: {card.get('promoted')} ({card.get('reason', '')}).", "",
        *_bar_lines(card.get("promotion_bar")),
        "## Data", "",
        *(f"- {k}: {v[0]} to {v[1]}" for k, v in card["split"].items()),
        f"- training GPU-days: {card['train_rows']} ({card['train_failures']} positive)",
        f"- calibration: {card['calibration']}", "",
        "## Out-of-fold metrics (model vs evidence score, time-ordered folds pooled)", "", "| metric | model | evidence score |", "|---|---|---|",
        *(f"| {r} | {fmt(m.get(r))} | {fmt(b.get(r))} |" for r in rows),
        "", f"Model recall at the evidence score's precision: {fmt(card.get('metrics', {}).get('model_recall_at_baseline_precision'))} "
        f"(evidence score recall {fmt(card.get('metrics', {}).get('baseline_recall'))}).", "",
        "Definitions: a failure is a GPU replacement (the day its ticket was opened). The model alerts when "
        f"its risk is at least the break-even {fmt(card.get('metrics', {}).get('alert_threshold'))} (cost of a "
        "needless drain / cost of a missed failure), and so does the evidence score. A failure is caught "
        "when an alert falls on one of the horizon's days before it; its lead is the days from the first such "
        "alert to the failure day (1 to the horizon), the same for both.", "",
        "## Features", "", ", ".join(card["features"]), "",
    ]
    return "\n".join(lines)
