"""The evidence score: the default ranking and the baseline a learned model must beat.

Reads and writes nothing (works on a ``features`` frame). The score is a sum of terms, one
per kind of evidence (each Xid class, ECC, retired pages and row remapping, a narrowed PCIe
link, heat, lost samples, earlier reseats and tickets, tickets opened lately), each its weight in
``pipeline/declared/predict_evidence.yaml`` times a non-decreasing function of the GPU's own
numbers: more evidence never lowers the score, and an application Xid adds nothing. It is
not fitted to anything; a fleet's failures only set its scale:

- with fewer than ``min_failures`` failures in the labelled history the risk is the
  published prior: hazard ``AFR/365 × e^score`` for the GPU's generation, so a GPU with
  no evidence carries the generation's AFR;
- with enough, ``logit(risk) = a + b·min(score, K) + b₊·max(score − K, 0)`` with the knee
  ``K`` = :data:`KNEE` (one event that by itself says replace), fitted on the fleet's labelled
  GPU-days with the prior as a weak Gaussian prior on ``a`` and ``b`` and ``b₊ ~ N(b, 0.5²)``
  (both ≥ 0.05 keep the order; with little data the line stays straight);
- with :data:`MIN_REWEIGHT_FAILURES` or more, each term may also get its own non-negative
  slope, ``logit(risk) = a + Σ bⱼ·termⱼ`` with every ``bⱼ ~ N(b, 0.5²)`` (the expert weights
  are the prior: with little data the fit stays the single-slope one), but only when it beats
  the single slope on the fleet's own later periods, fitted on the days before each
  (:func:`reweight_check`). A term can then weigh more or less, never turn against risk.

:func:`order` turns risks into the list's order: GPUs with the same evidence share a rank
and a risk; GPUs whose evidence differs never share a risk (a tie of the sum is broken by
the stronger kind of evidence, then moved by one float step).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import expit

from pipeline.predict.evidence_weights import HW_CLASSES, XID_CLASSES, Weights, load_weights

log = logging.getLogger(__name__)

#: The score's terms, in the order ties are broken (the more direct evidence first).
TERM_ORDER: tuple[str, ...] = (
    "xid_fatal", "remap_failed", "xid_memory", "ecc_uncorrected", "pcie_narrow", "pcie_deficit", "xid_nvlink",
    "xid_pcie", "remap_pending", "lost_markers", "xid_gsp_hang", "remap_uncorrectable", "retired_recent",
    "retired_pages", "lost_samples", "thermal_throttle", "heat", "xid_sbe", "ecc_trend", "ecc_corrected",
    "reseats", "ticket_opened", "pcie_replay", "tickets", "xid_driver", "xid_other", "sxid_host", "xid_app",
)

#: The features columns the score reads (besides ``model``, ``host`` and ``day``).
INPUTS: tuple[str, ...] = (
    "model", *(f"xc_{k}_{n}d" for k in XID_CLASSES for n in (1, 7, 30)), "ecc_uncorr_7d", "ecc_uncorr_30d",
    "ecc_corr_7d", "ecc_corr_vs_own_before", "retired_pages", "retired_pages_delta_30d", "remap_pending_7d",
    "remap_failed_30d", "remap_uncorr_30d", "pcie_narrow_days_7d", "pcie_narrow_days_30d", "pcie_width_deficit_7d",
    "pcie_replay_7d", "temp_vs_host_7d", "temp_vs_model_7d", "temp_vs_own_before", "throttle_thermal_7d", "samples_vs_own_1d",
    "lost_marker_days_1d", "lost_marker_days_7d", "sxid_host_7d", "reseats_prior", "tickets_prior",
    "pcie_narrow_days_1d", "days_since_fix", "days_since_hw_evidence",
    "tickets_opened_1d", "tickets_opened_7d", "tickets_opened_30d", "days_since_ticket_open",
)

#: Fewest failures (distinct replaced GPUs) in the labelled history before the fleet's own
#: rate calibrates the score instead of the published prior.
MIN_FAILURES = 5

#: Score at which the calibrated logit may bend (the weight of one hardware-fatal Xid or of a
#: failed row remap: one event that by itself says "replace"). The score adds log hazard
#: ratios as if each kind of evidence were independent; up to one such event that is about
#: right (a GPU moves from the healthy population to a suspect), beyond it the further
#: evidence is mostly the same failing board seen again (Xids, ECC, lost samples and link
#: errors of one fault come together), so the sum counts it twice and the slope above the
#: knee is fitted on its own, its prior the slope below (a straight line with little data).
KNEE = 3.0

#: Fewest failures before each term may get its own slope: a slope per kind of evidence needs
#: failures of several kinds behind it, and the check on later periods needs failures in them.
MIN_REWEIGHT_FAILURES = 10
#: Standard deviation of the prior of each term's slope around the single slope (logit units
#: per unit of the term's expert-weighted value): a term's weight moves by half or so only
#: where its GPU-days say so clearly.
REWEIGHT_PRIOR_SD = 0.5
#: Later periods of the check (:func:`reweight_check`) and their length in days.
REWEIGHT_FOLDS, REWEIGHT_FOLD_DAYS = 3, 14


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame.columns:
        return np.zeros(len(frame))
    return np.nan_to_num(pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float), nan=0.0)


def _log2p(x: np.ndarray) -> np.ndarray:
    return np.log2(1.0 + np.maximum(x, 0.0))


def terms(frame: pd.DataFrame, w: Weights | None = None) -> pd.DataFrame:
    """Each term's contribution (≥ 0) for every row of ``frame``, columns in :data:`TERM_ORDER`."""
    w = w or load_weights()
    r, t = w.recency, w.terms
    fix = _after_fix(frame, r["after_fix"])
    out: dict[str, np.ndarray] = {}
    for k in XID_CLASSES:
        c1, c7, c30 = (_col(frame, f"xc_{k}_{n}d") for n in (1, 7, 30))
        past = r["week"] * (c7 - c1) + r["month"] * (c30 - c7)
        n = r["today"] * c1 + (fix * past if k in HW_CLASSES else past)
        out[f"xid_{k}"] = w.xid_weight[k] * _log2p(n)
    u7, u30 = _col(frame, "ecc_uncorr_7d"), _col(frame, "ecc_uncorr_30d")
    out["ecc_uncorrected"] = t["ecc_uncorrected"]["weight"] * _log2p(u7 + r["month"] * (u30 - u7))
    ec = t["ecc_corrected"]
    excess = np.maximum(_col(frame, "ecc_corr_7d") / 7.0 - ec["floor_per_day"], 0.0) / ec["scale_per_day"]
    out["ecc_corrected"] = ec["weight"] * _log2p(excess)
    # A rise against its own month counts only as far as the rate is above the background:
    # a GPU going from 0 to 3 corrected errors a day is not failing.
    out["ecc_trend"] = (t["ecc_trend"]["weight"] * np.clip(_col(frame, "ecc_corr_vs_own_before"), 0.0,
                                                           t["ecc_trend"]["cap"]) * np.minimum(excess, 1.0))
    out["retired_pages"] = t["retired_pages"]["weight"] * _log2p(_col(frame, "retired_pages"))
    out["retired_recent"] = t["retired_recent"]["weight"] * _log2p(_col(frame, "retired_pages_delta_30d"))
    out["remap_pending"] = t["remap_pending"]["weight"] * np.clip(_col(frame, "remap_pending_7d"), 0, 1)
    out["remap_failed"] = t["remap_failed"]["weight"] * np.clip(_col(frame, "remap_failed_30d"), 0, 1)
    out["remap_uncorrectable"] = t["remap_uncorrectable"]["weight"] * _log2p(_col(frame, "remap_uncorr_30d"))
    n7, n30 = _col(frame, "pcie_narrow_days_7d"), _col(frame, "pcie_narrow_days_30d")
    # Still narrow today, the days count fully; a link back at full width was more likely a
    # transient (a riser, a retrain), so its past days count at the week's weight.
    now = (np.where(_col(frame, "pcie_narrow_days_1d") > 0, r["today"], r["week"])
           if "pcie_narrow_days_1d" in frame.columns else r["today"])  # a frame that does not say
    out["pcie_narrow"] = t["pcie_narrow"]["weight"] * now * fix * _log2p(n7 + r["month"] * (n30 - n7))
    out["pcie_deficit"] = (t["pcie_deficit"]["weight"] * np.maximum(_col(frame, "pcie_width_deficit_7d"), 0.0)
                           / t["pcie_deficit"]["scale_lanes"])
    out["pcie_replay"] = t["pcie_replay"]["weight"] * _log2p(_col(frame, "pcie_replay_7d") / t["pcie_replay"]["scale"])
    out["heat"] = t["heat"]["weight"] * np.maximum(_heat_excess(frame) - t["heat"]["margin_c"], 0.0)
    out["thermal_throttle"] = t["thermal_throttle"]["weight"] * np.clip(_col(frame, "throttle_thermal_7d"), 0, 1)
    out["lost_samples"] = t["lost_samples"]["weight"] * np.maximum(_lost_share(frame) - t["lost_samples"]["margin"], 0.0)
    m1, m7 = _col(frame, "lost_marker_days_1d"), _col(frame, "lost_marker_days_7d")
    out["lost_markers"] = t["lost_markers"]["weight"] * _log2p(r["today"] * m1 + fix * r["week"] * (m7 - m1))
    out["sxid_host"] = t["sxid_host"]["weight"] * _log2p(_col(frame, "sxid_host_7d"))
    reseats = _col(frame, "reseats_prior")
    out["reseats"] = t["reseats"]["weight"] * _log2p(reseats)
    out["tickets"] = t["tickets"]["weight"] * _log2p(_col(frame, "tickets_prior") - reseats)
    # From the open, whatever the outcome: a report about this GPU, answered once a fix closes
    # after it (the fix itself then counts as a reseat or an earlier ticket).
    o1, o7, o30 = (_col(frame, f"tickets_opened_{n}d") for n in (1, 7, 30))
    answered = _after_fix(frame, r["after_fix"], seen="days_since_ticket_open")
    out["ticket_opened"] = t["ticket_opened"]["weight"] * _log2p(
        r["today"] * o1 + answered * (r["week"] * (o7 - o1) + r["month"] * (o30 - o7)))
    return pd.DataFrame({k: out[k] for k in TERM_ORDER}, index=frame.index)


def _after_fix(frame: pd.DataFrame, factor: float, seen: str = "days_since_hw_evidence") -> np.ndarray:
    """``factor`` where a ticket closed without a replacement on or after the day of the GPU's
    last hardware evidence (a hardware-class Xid, a failing-GPU marker, a narrowed link; or
    the day the column ``seen`` counts from, e.g. a ticket's last open), else 1. Days, not
    hours: a lost GPU is marked until the reseat that day, so evidence that stops on the day
    of the fix is what the fix answered; a fault that comes back shows on a later day, which
    lifts the discount (so does any evidence today after an earlier fix). A frame without
    the two columns (an older warehouse) is never discounted."""
    if "days_since_fix" not in frame.columns or seen not in frame.columns:
        return np.ones(len(frame))
    fixed = pd.to_numeric(frame["days_since_fix"], errors="coerce").fillna(999).to_numpy(dtype=float)
    last = pd.to_numeric(frame[seen], errors="coerce").fillna(999).to_numpy(dtype=float)
    return np.where((fixed <= last) & (fixed < 999), factor, 1.0)


def _heat_excess(frame: pd.DataFrame) -> np.ndarray:
    """Degrees above its host's other GPUs, its model's median and its own month before (the
    smallest, 7-day means): a fan or a hot aisle heats the whole host, a new batch runs warm
    everywhere, a GPU that always ran warm is a slot's airflow; a failing GPU heats alone, lately."""
    out = _col(frame, "temp_vs_model_7d")
    for c in ("temp_vs_host_7d", "temp_vs_own_before"):
        if c in frame.columns:
            v = pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=float)
            out = np.where(np.isnan(v), out, np.minimum(out, v))
    return out


def _lost_share(frame: pd.DataFrame) -> np.ndarray:
    """Share of its usual samples missing today, beyond the gap of its host's median GPU (the
    last day of data is often cut short for every GPU, a lost GPU stops alone)."""
    if "samples_vs_own_1d" not in frame.columns:
        return np.zeros(len(frame))
    share = pd.to_numeric(frame["samples_vs_own_1d"], errors="coerce").clip(upper=1.0)
    keys = [c for c in ("host", "day") if c in frame.columns]
    host_share = share.groupby([frame[c] for c in keys]).transform("median") if keys else share.median()
    lost = (np.asarray(host_share, dtype=float) if keys else float(host_share)) - share.to_numpy(dtype=float)
    return np.nan_to_num(np.maximum(lost, 0.0), nan=0.0)


def score(frame: pd.DataFrame, w: Weights | None = None) -> np.ndarray:
    """The evidence score of every row (0 for a GPU without evidence)."""
    return terms(frame, w).to_numpy().sum(axis=1)


@dataclass
class EvidenceScore:
    """The score turned into a probability of replacement within ``horizon_days``.

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"model": ["H100", "H100"], "xc_fatal_1d": [0, 1], "xc_fatal_7d": [0, 1],
    ...                   "xc_fatal_30d": [0, 1]})
    >>> p = EvidenceScore(horizon_days=7).predict_proba(f)[:, 1]
    >>> bool(p[1] > p[0] > 0)
    True
    """

    horizon_days: int = 7
    min_failures: int = MIN_FAILURES
    weights_file: str | None = None
    source_: str = "prior"
    failures_: int = 0
    #: ``(a, b, b₊)``: intercept, slope up to :data:`KNEE`, slope above it.
    coef_: tuple[float, float, float] = (0.0, 1.0, 1.0)
    #: Each term's own slope (in :data:`TERM_ORDER`) when the re-weighted fit won its check.
    term_coef_: tuple[float, ...] | None = None
    notes_: list[str] = field(default_factory=list)

    @property
    def weights(self) -> Weights:
        return load_weights(self.weights_file)

    def _prior_hazard(self, frame: pd.DataFrame) -> np.ndarray:
        models = frame["model"] if "model" in frame.columns else pd.Series([None] * len(frame), index=frame.index)
        w = self.weights
        afr = {m: w.prior_afr_pct(m)[0] for m in pd.unique(models.astype("object"))}
        return models.astype("object").map(afr).to_numpy(dtype=float) / 100.0 / 365.0

    def fit(self, frame: pd.DataFrame, y, failures: int | None = None) -> EvidenceScore:
        """Calibrate on labelled GPU-days (``y``: replaced within the horizon), or keep the prior.

        ``failures`` is the number of distinct failures behind ``y`` (default: positive
        serials in ``frame``).
        """
        y = np.asarray(y, dtype=float)
        if failures is None:
            failures = int(frame.loc[y > 0, "serial"].nunique()) if "serial" in frame.columns else int(y.sum() > 0)
        self.failures_ = failures
        if failures < self.min_failures:
            self.source_ = "prior"
            self.notes_ = [f"{failures} failure{'s' if failures != 1 else ''} in the history (need {self.min_failures} "
                           "to use the fleet's own rate): risks use the published prior AFR"]
            return self
        X = terms(frame, self.weights).to_numpy()
        a0 = self._a0(frame)
        a, b, b2 = _fit_single(X, y, a0)
        self.coef_, self.source_, self.term_coef_ = (a, b, b2), "fleet", None
        self.notes_ = [f"risks calibrated on the fleet's own {failures} failures (logit = {a:.2f} + {b:.2f} x score "
                       f"up to {KNEE:g}, {b2:.2f} x score above)"]
        if failures >= MIN_REWEIGHT_FAILURES and "day" in frame.columns:
            won, why = reweight_check(frame, X, y, a0, self.horizon_days, self.min_failures)
            if won:
                b = _fit_line(X, y, a0)[1]
                a, c = _fit_terms(X, y, a0, b)
                self.coef_, self.term_coef_ = (a, b, b), tuple(float(v) for v in c)
                moved = sorted(zip(TERM_ORDER, c), key=lambda t: -abs(t[1] - b))[:3]
                why += "; furthest from the single slope: " + ", ".join(f"{k} {v:.2f}" for k, v in moved)
                self.notes_ = [f"risks calibrated on the fleet's own {failures} failures with a slope per kind of "
                               f"evidence ({why})"]
            else:
                self.notes_.append(f"one slope for every kind of evidence ({why})")
        return self

    def _a0(self, frame: pd.DataFrame) -> float:
        return float(np.log(np.median(self._prior_hazard(frame)) * self.horizon_days))

    def slopes(self) -> np.ndarray:
        """Each term's slope on the logit (the single slope for all when none of their own)."""
        return np.asarray(self.term_coef_) if self.term_coef_ is not None else np.full(len(TERM_ORDER), self.coef_[1])

    def contributions(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Each term's part of the calibrated logit (its value times its slope): what
        raises this GPU's risk the most, for the words and the tie-break of the list."""
        t = terms(frame, self.weights)
        return t * self.slopes() if self.source_ == "fleet" else t

    def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
        if self.source_ == "fleet" and self.term_coef_ is not None:
            p = expit(self.coef_[0] + terms(frame, self.weights).to_numpy() @ self.slopes())
        elif self.source_ == "fleet":
            p = expit(_bent(score(frame, self.weights), *self.coef_))
        else:
            s = score(frame, self.weights)
            p = -np.expm1(-self._prior_hazard(frame) * self.horizon_days * np.exp(np.minimum(s, 50.0)))
        return np.column_stack([1 - p, p])

    def to_dict(self) -> dict:
        return {"source": self.source_, "failures": self.failures_, "coef": list(self.coef_),
                "term_coef": dict(zip(TERM_ORDER, self.term_coef_)) if self.term_coef_ is not None else None,
                "weights_file": self.weights.path, "min_failures": self.min_failures}

    @property
    def version(self) -> str:
        return "evidence" if self.source_ == "fleet" else "evidence-prior"


def _grouped(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct rows of ``X``, how many of each, how many of them positive): rows with the
    same evidence and label are one weighted point, and a large fleet's year is mostly
    GPU-days without evidence."""
    keys, inv = np.unique(np.round(X, 9), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    return keys, np.bincount(inv).astype(float), np.bincount(inv, weights=y)


def _bent(s: np.ndarray, a: float, b: float, b2: float) -> np.ndarray:
    """The single-slope logit: ``a + b·min(s, KNEE) + b₊·max(s − KNEE, 0)``."""
    return a + b * np.minimum(s, KNEE) + b2 * np.maximum(s - KNEE, 0.0)


def _fit_single(X: np.ndarray, y: np.ndarray, a0: float) -> tuple[float, float, float]:
    """``(a, b, b₊)`` of the bent single-slope logit (:func:`_bent`)."""
    keys, n, k = _grouped(X.sum(axis=1, keepdims=True), y)
    return _map_logistic(keys[:, 0], n, k, a0, KNEE)


def _fit_line(X: np.ndarray, y: np.ndarray, a0: float) -> tuple[float, float, float]:
    """``(a, b, b)``: the straight single-slope logit (the centre of the per-term slopes' prior)."""
    keys, n, k = _grouped(X.sum(axis=1, keepdims=True), y)
    return _map_logistic(keys[:, 0], n, k, a0, np.inf)


def _fit_terms(X: np.ndarray, y: np.ndarray, a0: float, b: float) -> tuple[float, np.ndarray]:
    """MAP of ``logit p = a + Σ cⱼ Xⱼ``: a ~ N(a0, 2²), cⱼ ~ N(b, REWEIGHT_PRIOR_SD²), 0 ≤ cⱼ ≤ 5."""
    keys, n, k = _grouped(X, y)
    m = keys.shape[1]
    sd2 = REWEIGHT_PRIOR_SD ** 2

    def nll(theta):
        a, c = theta[0], theta[1:]
        z = a + keys @ c
        ll = k * z - n * np.logaddexp(0.0, z)
        pen = ((a - a0) / 2.0) ** 2 / 2 + ((c - b) ** 2).sum() / sd2 / 2
        r = n * expit(z) - k
        grad = np.concatenate([[r.sum() + (a - a0) / 4.0], keys.T @ r + (c - b) / sd2])
        return -ll.sum() + pen, grad

    res = minimize(nll, np.concatenate([[a0], np.full(m, b)]), jac=True, method="L-BFGS-B",
                   bounds=[(-30, 10)] + [(0.0, 5.0)] * m)
    return float(res.x[0]), res.x[1:]


def reweight_check(frame: pd.DataFrame, X: np.ndarray, y: np.ndarray, a0: float, horizon: int,
                   min_failures: int) -> tuple[bool, str]:
    """Whether a slope per term beats the single slope on the fleet's own later periods.

    The last :data:`REWEIGHT_FOLDS` periods of :data:`REWEIGHT_FOLD_DAYS` days are each scored
    by both fits made on the days before them (a horizon apart: those labels were known), the
    out-of-fold days are pooled, never shuffled, and the per-term fit must have both the
    lower log-loss and the higher PR-AUC there.
    """
    from sklearn.metrics import average_precision_score, log_loss

    day = pd.to_datetime(frame["day"]).to_numpy()
    last = day.max()
    oof_y, single, per_term = [], [], []
    for j in reversed(range(REWEIGHT_FOLDS)):
        t1 = last - np.timedelta64(j * REWEIGHT_FOLD_DAYS, "D")
        t0 = t1 - np.timedelta64(REWEIGHT_FOLD_DAYS - 1, "D")
        train, test = day < t0 - np.timedelta64(horizon, "D"), (day >= t0) & (day <= t1)
        if not test.any() or _failures(frame, y, train) < min_failures:
            continue
        coef = _fit_single(X[train], y[train], a0)
        a2, c = _fit_terms(X[train], y[train], a0, _fit_line(X[train], y[train], a0)[1])
        oof_y.append(y[test])
        single.append(expit(_bent(X[test].sum(axis=1), *coef)))
        per_term.append(expit(a2 + X[test] @ c))
    yy = np.concatenate(oof_y) if oof_y else np.array([])
    if not yy.any():
        return False, "no failure in the later periods to check a slope per kind of evidence on"
    p1, p2 = np.concatenate(single), np.concatenate(per_term)
    ll1, ll2 = log_loss(yy, p1, labels=[0, 1]), log_loss(yy, p2, labels=[0, 1])
    ap1, ap2 = average_precision_score(yy, p1), average_precision_score(yy, p2)
    won = ll2 < ll1 and ap2 > ap1
    return won, (f"on {len(oof_y)} later period{'s' if len(oof_y) != 1 else ''} fitted on the days before each, "
                 f"{int(yy.sum())} failing GPU-days: log-loss {ll2:.5f} vs {ll1:.5f}, PR-AUC {ap2:.3f} vs {ap1:.3f} "
                 "for a slope per kind against one")


def _failures(frame: pd.DataFrame, y: np.ndarray, mask: np.ndarray) -> int:
    if "serial" not in frame.columns:
        return int((y[mask] > 0).any())
    return int(frame.loc[mask & (y > 0), "serial"].nunique())


def _map_logistic(s: np.ndarray, n: np.ndarray, k: np.ndarray, a0: float, knee: float) -> tuple[float, float, float]:
    """MAP of ``logit p = a + b·min(s, knee) + b₊·max(s − knee, 0)`` on grouped data, priors
    a ~ N(a0, 2²), b ~ N(1, 0.5²), b₊ ~ N(b, 0.5²), both ≥ 0.05 (``knee`` inf: a straight line, b₊ = b)."""
    lo, hi = np.minimum(s, knee), np.maximum(s - knee, 0.0)
    bent = bool(hi.any())

    def nll(theta):
        a, b, b2 = theta
        z = a + b * lo + b2 * hi
        ll = k * z - n * np.logaddexp(0.0, z)
        pen = ((a - a0) / 2.0) ** 2 / 2 + ((b - 1.0) / 0.5) ** 2 / 2 + ((b2 - b) / 0.5) ** 2 / 2
        r = n * expit(z) - k
        grad = np.array([r.sum() + (a - a0) / 4.0, (r * lo).sum() + (b - 1.0) / 0.25 - (b2 - b) / 0.25,
                         (r * hi).sum() + (b2 - b) / 0.25])
        return -ll.sum() + pen, grad

    res = minimize(nll, np.array([a0, 1.0, 1.0]), jac=True, method="L-BFGS-B",
                   bounds=[(-30, 10), (0.05, 5.0), (0.05, 5.0)])
    a, b, b2 = (float(v) for v in res.x)
    return a, b, (b2 if bent else b)


def tiebreak_key(frame: pd.DataFrame, term_frame: pd.DataFrame, w: Weights | None = None) -> pd.DataFrame:
    """What orders GPUs of equal risk: the terms in :data:`TERM_ORDER`, then the counts of
    each Xid code in the weights' ``code_order`` (30 then 7 days): a Xid 95 outranks a Xid 94."""
    w = w or load_weights()
    codes = {f"xid{c}_{n}d": _col(frame, f"xid{c}_{n}d") for c in w.code_order for n in (30, 7)}
    return pd.concat([term_frame[list(TERM_ORDER)].reset_index(drop=True),
                      pd.DataFrame(codes, index=range(len(frame)))], axis=1)


def order(risk: np.ndarray, key: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row order, rank, risk) of the list: risk first, then ``key``'s columns, larger first
    (:func:`tiebreak_key`: the evidence terms, then the Xid codes).

    Rows with the same risk and the same key share a rank ("1, 2, 2, 4") and a risk; a row
    whose key differs from the row above it but whose risk is equal gets the next float
    below, so different evidence never shows the same risk.
    """
    risk = np.asarray(risk, dtype=float)
    E = key.to_numpy(dtype=float) if len(key.columns) else np.zeros((len(risk), 0))
    keys = [-E[:, j] for j in reversed(range(E.shape[1]))] + [-risk]
    idx = np.lexsort(keys) if len(risk) else np.array([], dtype=int)
    r, e = risk[idx], E[idx]
    new = np.ones(len(idx), dtype=bool)
    if len(idx) > 1:
        new[1:] = (r[1:] != r[:-1]) | (e[1:] != e[:-1]).any(axis=1)
    rank = np.maximum.accumulate(np.where(new, np.arange(1, len(idx) + 1), 0))
    out = r.copy()
    for i in np.flatnonzero(new)[1:]:
        if out[i] >= out[i - 1]:  # the same risk as a group with other evidence
            out[i] = np.nextafter(out[i - 1], -np.inf)
        # rows that follow in the same group take the group's (possibly moved) risk
        j = i + 1
        while j < len(idx) and not new[j]:
            out[j] = out[i]
            j += 1
    return idx, rank, out
