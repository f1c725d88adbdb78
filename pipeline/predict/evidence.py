"""The evidence score: the default ranking and the baseline a learned model must beat.

Reads and writes nothing (works on a ``features`` frame). The score is a sum of terms, one
per kind of evidence (each Xid class, ECC, retired pages and row remapping, a narrowed PCIe
link, heat, lost samples, earlier reseats and tickets), each its weight in
``pipeline/declared/predict_evidence.yaml`` times a non-decreasing function of the GPU's own
numbers: more evidence never lowers the score, and an application Xid adds nothing. It is
not fitted to anything; a fleet's failures only set its scale:

- with fewer than ``min_failures`` failures in the labelled history the risk is the
  published prior: hazard ``AFR/365 × e^score`` for the GPU's generation, so a GPU with
  no evidence carries the generation's AFR;
- with enough, ``logit(risk) = a + b·score``, fitted on the fleet's labelled GPU-days with
  the prior as a weak Gaussian prior on ``a`` and ``b`` (b ≥ 0.05 keeps the order).

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

from pipeline.predict.evidence_weights import XID_CLASSES, Weights, load_weights

log = logging.getLogger(__name__)

#: The score's terms, in the order ties are broken (the more direct evidence first).
TERM_ORDER: tuple[str, ...] = (
    "xid_fatal", "remap_failed", "xid_memory", "ecc_uncorrected", "pcie_narrow", "pcie_deficit", "xid_nvlink",
    "xid_pcie", "remap_pending", "lost_markers", "xid_gsp_hang", "remap_uncorrectable", "retired_recent",
    "retired_pages", "lost_samples", "thermal_throttle", "heat", "xid_sbe", "ecc_trend", "ecc_corrected",
    "reseats", "pcie_replay", "tickets", "xid_driver", "xid_other", "sxid_host", "xid_app",
)

#: The features columns the score reads (besides ``model``, ``host`` and ``day``).
INPUTS: tuple[str, ...] = (
    "model", *(f"xc_{k}_{n}d" for k in XID_CLASSES for n in (1, 7, 30)), "ecc_uncorr_7d", "ecc_uncorr_30d",
    "ecc_corr_7d", "ecc_corr_vs_own_before", "retired_pages", "retired_pages_delta_30d", "remap_pending_7d",
    "remap_failed_30d", "remap_uncorr_30d", "pcie_narrow_days_7d", "pcie_narrow_days_30d", "pcie_width_deficit_7d",
    "pcie_replay_7d", "temp_vs_host_7d", "temp_vs_model_7d", "temp_vs_own_before", "throttle_thermal_7d", "samples_vs_own_1d",
    "lost_marker_days_1d", "lost_marker_days_7d", "sxid_host_7d", "reseats_prior", "tickets_prior",
)

#: Fewest failures (distinct replaced GPUs) in the labelled history before the fleet's own
#: rate calibrates the score instead of the published prior.
MIN_FAILURES = 5


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
    out: dict[str, np.ndarray] = {}
    for k in XID_CLASSES:
        c1, c7, c30 = (_col(frame, f"xc_{k}_{n}d") for n in (1, 7, 30))
        n = r["today"] * c1 + r["week"] * (c7 - c1) + r["month"] * (c30 - c7)
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
    out["pcie_narrow"] = t["pcie_narrow"]["weight"] * _log2p(n7 + r["month"] * (n30 - n7))
    out["pcie_deficit"] = (t["pcie_deficit"]["weight"] * np.maximum(_col(frame, "pcie_width_deficit_7d"), 0.0)
                           / t["pcie_deficit"]["scale_lanes"])
    out["pcie_replay"] = t["pcie_replay"]["weight"] * _log2p(_col(frame, "pcie_replay_7d") / t["pcie_replay"]["scale"])
    out["heat"] = t["heat"]["weight"] * np.maximum(_heat_excess(frame) - t["heat"]["margin_c"], 0.0)
    out["thermal_throttle"] = t["thermal_throttle"]["weight"] * np.clip(_col(frame, "throttle_thermal_7d"), 0, 1)
    out["lost_samples"] = t["lost_samples"]["weight"] * np.maximum(_lost_share(frame) - t["lost_samples"]["margin"], 0.0)
    m1, m7 = _col(frame, "lost_marker_days_1d"), _col(frame, "lost_marker_days_7d")
    out["lost_markers"] = t["lost_markers"]["weight"] * _log2p(r["today"] * m1 + r["week"] * (m7 - m1))
    out["sxid_host"] = t["sxid_host"]["weight"] * _log2p(_col(frame, "sxid_host_7d"))
    reseats = _col(frame, "reseats_prior")
    out["reseats"] = t["reseats"]["weight"] * _log2p(reseats)
    out["tickets"] = t["tickets"]["weight"] * _log2p(_col(frame, "tickets_prior") - reseats)
    return pd.DataFrame({k: out[k] for k in TERM_ORDER}, index=frame.index)


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
    coef_: tuple[float, float] = (0.0, 1.0)
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
        s = score(frame, self.weights)
        a0 = float(np.log(np.median(self._prior_hazard(frame)) * self.horizon_days))
        # Rows with the same score and label are one weighted point: a year of a large fleet
        # is mostly GPU-days without evidence.
        keys, inv = np.unique(np.round(s, 9), return_inverse=True)
        n = np.bincount(inv).astype(float)
        k = np.bincount(inv, weights=y)
        a, b = _map_logistic(keys, n, k, a0)
        self.coef_, self.source_ = (a, b), "fleet"
        self.notes_ = [f"risks calibrated on the fleet's own {failures} failures (logit = {a:.2f} + {b:.2f} x score)"]
        return self

    def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
        s = score(frame, self.weights)
        if self.source_ == "fleet":
            a, b = self.coef_
            p = expit(a + b * s)
        else:
            p = -np.expm1(-self._prior_hazard(frame) * self.horizon_days * np.exp(np.minimum(s, 50.0)))
        return np.column_stack([1 - p, p])

    def to_dict(self) -> dict:
        return {"source": self.source_, "failures": self.failures_, "coef": list(self.coef_),
                "weights_file": self.weights.path, "min_failures": self.min_failures}

    @property
    def version(self) -> str:
        return "evidence" if self.source_ == "fleet" else "evidence-prior"


def _map_logistic(s: np.ndarray, n: np.ndarray, k: np.ndarray, a0: float) -> tuple[float, float]:
    """MAP of ``logit p = a + b s`` on grouped data, priors a ~ N(a0, 2²), b ~ N(1, 0.5²), b ≥ 0.05."""

    def nll(theta):
        a, b = theta
        z = a + b * s
        ll = k * z - n * np.logaddexp(0.0, z)
        pen = ((a - a0) / 2.0) ** 2 / 2 + ((b - 1.0) / 0.5) ** 2 / 2
        r = n * expit(z) - k
        grad = np.array([r.sum() + (a - a0) / 4.0, (r * s).sum() + (b - 1.0) / 0.25])
        return -ll.sum() + pen, grad

    res = minimize(nll, np.array([a0, 1.0]), jac=True, method="L-BFGS-B", bounds=[(-30, 10), (0.05, 5.0)])
    return float(res.x[0]), float(res.x[1])


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
