"""A Weibull fit per group (lifelines' WeibullFitter, delayed entry and censoring), in words.

The shape says how the hazard changes with age: below 1 it falls (infant mortality: burn-in
would pay), about 1 it is constant (random failures: spares scale with fleet size), above 1
it rises (wear-out: plan replacements by age). "About 1" means the interval contains 1.
"""

from __future__ import annotations

import logging
import math
import warnings

import polars as pl
from scipy.stats import norm

from pipeline.stats.kaplan_meier import _groups

log = logging.getLogger(__name__)

MIN_FAILURES = 3
#: The oldest age observed must be at least this multiple of the youngest age at entry.
MIN_AGE_SPAN = 2.0
YEAR = 365.25

WEIBULL_SCHEMA = {
    "group_value": pl.Utf8, "units": pl.Int64, "failures": pl.Int64, "shape": pl.Float64,
    "shape_ci_low": pl.Float64, "shape_ci_high": pl.Float64, "scale_days": pl.Float64,
    "pattern": pl.Utf8, "interpretation": pl.Utf8,
}


def describe_shape(shape: float, low: float, high: float, confidence: float = 0.95) -> tuple[str, str]:
    """The pattern and a sentence for a Weibull shape and its interval.

    >>> describe_shape(0.6, 0.5, 0.7)[0]
    'infant mortality'
    """
    pct = f"{confidence:.0%}"
    interval = f"shape {shape:.2f}, {pct} CI {low:.2f}-{high:.2f}"
    if high < 1:
        return "infant mortality", f"hazard falls with age ({interval}): early failures dominate; burn-in would catch them"
    if low > 1:
        return "wear-out", f"hazard rises with age ({interval}): plan replacements by age"
    return "random", f"no clear change of hazard with age ({interval}): failures look random; spares scale with fleet size"


def fit_weibull(frame: pl.DataFrame, *, confidence: float = 0.95) -> dict:
    """Fit one group; a row of the ``stats_weibull`` table (without grouping columns)."""
    from lifelines import WeibullFitter
    from lifelines.exceptions import ConvergenceError, StatisticalWarning

    failures = int(frame["failed"].sum())
    row = {"units": frame.height, "failures": failures, "shape": None, "shape_ci_low": None,
           "shape_ci_high": None, "scale_days": None}
    if failures < MIN_FAILURES:
        return row | {"pattern": "too few failures",
                      "interpretation": f"{failures} failure(s): at least {MIN_FAILURES} are needed to fit a Weibull"}
    first, last = float(frame["entry_age_days"].min()), float(frame["exit_age_days"].max())
    if last / max(first, 1.0) < MIN_AGE_SPAN:
        # The shape is how the hazard changes over log-age; over a narrow band of ages it is
        # not identified, and the optimizer wanders for minutes before giving up.
        return row | {"pattern": "no fit", "interpretation": (
            f"ages observed span only {first:.0f}-{last:.0f} days: too narrow to tell how the hazard changes with age")}
    wf = WeibullFitter(alpha=1 - confidence)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # in years: durations near 1 keep the optimizer well conditioned
            wf.fit(frame["exit_age_days"].to_numpy() / YEAR, event_observed=frame["failed"].to_numpy(),
                   entry=frame["entry_age_days"].to_numpy() / YEAR)
    except (ConvergenceError, ValueError) as exc:
        log.warning("Weibull fit failed for a group of %d units: %s", frame.height, exc)
        return row | {"pattern": "no fit", "interpretation": f"the Weibull fit did not converge: {exc}"}
    shape = float(wf.rho_)
    # The interval on the log scale (delta method), as for any positive parameter: the plain
    # Wald interval lifelines prints can reach below zero when failures are few.
    se = float(wf.summary.loc["rho_", "se(coef)"])
    z = float(norm.ppf(0.5 + confidence / 2))
    half = z * se / shape if shape > 0 else math.inf
    low, high = shape * math.exp(-half), shape * math.exp(half)
    if not all(math.isfinite(x) for x in (shape, low, high)) or any(
            isinstance(w.message, StatisticalWarning) for w in caught):
        log.warning("Weibull fit of a group of %d units is unreliable (lifelines: %s)", frame.height,
                    "; ".join(str(w.message).split("\n")[0] for w in caught) or "non-finite interval")
        return row | {"shape": shape if math.isfinite(shape) else None, "pattern": "no fit",
                      "interpretation": "lifelines warns that this fit is unreliable: too few or too clustered failures"}
    pattern, words = describe_shape(shape, low, high, confidence)
    return row | {"shape": shape, "shape_ci_low": low, "shape_ci_high": high,
                  "scale_days": float(wf.lambda_) * YEAR, "pattern": pattern, "interpretation": words}


def weibull_table(frame: pl.DataFrame, by: str | None, *, confidence: float = 0.95) -> pl.DataFrame:
    """One Weibull fit per group of ``by`` (or the fleet): group_value, units, failures, shape..."""
    rows = [{"group_value": label} | fit_weibull(sub, confidence=confidence)
            for label, sub in _groups(frame, by) if sub.height]
    return pl.DataFrame(rows, schema=WEIBULL_SCHEMA).sort("group_value")
