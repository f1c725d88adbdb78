"""Each group against the rest of the fleet: rate ratio, exact interval, exact test.

Conditional on the total ``n = k1 + k2`` failures, the group's count is binomial with
``p = T1 r1 / (T1 r1 + T2 r2)``; equal rates mean ``p0 = T1 / (T1 + T2)``. scipy's
``binomtest`` gives the exact p-value and the Clopper-Pearson interval of ``p``, which maps
to the rate ratio as ``RR = p / (1 - p) x T2 / T1``. p-values are adjusted within a
dimension with Benjamini-Hochberg (scipy's ``false_discovery_control``). A group is flagged
when its adjusted p-value is below ``1 - confidence`` and it fails more than the rest.
"""

from __future__ import annotations


import polars as pl
from scipy.stats import binomtest, false_discovery_control

COMPARE_SCHEMA = {
    "dimension": pl.Utf8, "group_value": pl.Utf8, "model": pl.Utf8, "gpu_days": pl.Float64,
    "failures": pl.Int64, "rest_gpu_days": pl.Float64, "rest_failures": pl.Int64, "rate_ratio": pl.Float64,
    "rr_ci_low": pl.Float64, "rr_ci_high": pl.Float64, "p_value": pl.Float64, "p_adjusted": pl.Float64,
    "flagged": pl.Boolean, "sentence": pl.Utf8,
}


def rate_ratio_test(k1: int, t1: float, k2: int, t2: float, confidence: float = 0.95) -> dict:
    """Rate ratio of ``k1/t1`` to ``k2/t2`` with its exact interval and two-sided p-value.

    >>> r = rate_ratio_test(30, 1000.0, 10, 1000.0)
    >>> round(r["rate_ratio"], 1), r["p_value"] < 0.01
    (3.0, True)
    """
    n = k1 + k2
    if t1 <= 0 or t2 <= 0 or n == 0:
        return {"rate_ratio": None, "rr_ci_low": None, "rr_ci_high": None, "p_value": None}
    p0 = t1 / (t1 + t2)
    test = binomtest(k1, n, p0)
    ci = test.proportion_ci(confidence_level=confidence, method="exact")

    def to_rr(p: float) -> float | None:
        return None if p >= 1 else p / (1 - p) * t2 / t1

    rr = (k1 / t1) / (k2 / t2) if k2 > 0 else None
    return {"rate_ratio": rr, "rr_ci_low": to_rr(ci.low), "rr_ci_high": to_rr(ci.high), "p_value": float(test.pvalue)}


def _fmt(x: float) -> str:
    return f"{x:.2f}" if x < 1 else f"{x:.1f}"


def sentence(dimension: str, group: str, model: str | None, r: dict, confidence: float) -> str:
    """'batch B-2024-07 of H100 fails 3.1× the rate of the rest of the fleet, 95% CI 2.2–4.3'."""
    who = f"{dimension} {group}" + (f" of {model}" if model and dimension != "model" else "")
    rr, lo, hi = r["rate_ratio"], r["rr_ci_low"], r["rr_ci_high"]
    hi_text = "∞" if hi is None else _fmt(hi)
    if rr is None:
        return f"{who} fails while the rest of the fleet had no failures ({confidence:.0%} CI of the ratio from {_fmt(lo)})"
    return f"{who} fails {_fmt(rr)}× the rate of the rest of the fleet, {confidence:.0%} CI {_fmt(lo)}–{hi_text}"


def compare_groups(counts: pl.DataFrame, dimension: str, *, confidence: float = 0.95,
                   models: dict[str, str] | None = None) -> pl.DataFrame:
    """Compare every group of ``counts`` (columns ``dimension``, gpu_days, failures) with the rest.

    ``models`` maps a group to its single GPU model (for the sentence). A group is flagged when
    its adjusted p-value is below ``1 - confidence``.
    """
    models = models or {}
    total_t = float(counts["gpu_days"].sum() or 0.0)
    total_k = int(counts["failures"].sum() or 0)
    rows = []
    for value, t1, k1 in zip(counts[dimension].to_list(), counts["gpu_days"].to_list(), counts["failures"].to_list()):
        group = "(none)" if value is None else str(value)
        t2, k2 = total_t - t1, total_k - k1
        r = rate_ratio_test(int(k1), float(t1), int(k2), float(t2), confidence)
        rows.append({"dimension": dimension, "group_value": group, "model": models.get(group),
                     "gpu_days": float(t1), "failures": int(k1), "rest_gpu_days": float(t2),
                     "rest_failures": int(k2)} | r)
    out = pl.DataFrame(rows, schema={k: v for k, v in COMPARE_SCHEMA.items() if k not in ("p_adjusted", "flagged", "sentence")})
    ps = [p for p in out["p_value"].to_list() if p is not None]
    adjusted = iter(false_discovery_control(ps, method="bh").tolist() if ps else [])
    adj = [None if p is None else min(1.0, next(adjusted)) for p in out["p_value"].to_list()]
    alpha = 1 - confidence
    significant = [a is not None and a < alpha for a in adj]
    # Flag what procurement must act on: groups failing more. Better-than-fleet groups keep
    # their sentence, unflagged.
    flagged = [sig and (row["rate_ratio"] is None or row["rate_ratio"] > 1)
               for sig, row in zip(significant, out.iter_rows(named=True))]
    sentences = [sentence(dimension, row["group_value"], row["model"], row, confidence) if sig else None
                 for row, sig in zip(out.iter_rows(named=True), significant)]
    return out.with_columns(pl.Series("p_adjusted", adj, dtype=pl.Float64), pl.Series("flagged", flagged),
                            pl.Series("sentence", sentences, dtype=pl.Utf8)).select(list(COMPARE_SCHEMA))


def single_models(frame: pl.DataFrame, dimension: str) -> dict[str, str]:
    """Groups of ``dimension`` whose GPUs are all one model -> that model."""
    if dimension == "model" or "model" not in frame.columns:
        return {}
    per = frame.group_by(dimension).agg(pl.col("model").drop_nulls().unique())
    return {str(g): m[0] for g, m in zip(per[dimension].to_list(), per["model"].to_list()) if g is not None and len(m) == 1}
