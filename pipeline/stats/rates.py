"""Annualized failure rates with exact Poisson intervals, per group.

The counting is one SQL step over a lifetimes relation (GPU-days and failures per group;
``month`` / ``quarter`` split each lifetime over the calendar periods it spans); the interval
is scipy's chi-square quantiles (Garwood's exact Poisson interval)::

    low  = chi2.ppf(a/2, 2k) / 2        high = chi2.ppf(1 - a/2, 2k + 2) / 2

scaled by 365 x 100 / GPU-days. With no failures the lower bound is 0: an upper bound only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import polars as pl
from scipy.stats import chi2

from pipeline.engine import Engine
from pipeline.errors import UsageError
from pipeline.vocab.groupings import PERIODS

NONE_LABEL = "(none)"


def poisson_interval(events: int, exposure: float, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) interval for a Poisson rate ``events / exposure``.

    >>> lo, hi = poisson_interval(0, 1.0)
    >>> lo, round(hi, 3)
    (0.0, 3.689)
    """
    if exposure <= 0:
        return (math.nan, math.nan)
    a = 1.0 - confidence
    low = 0.0 if events == 0 else chi2.ppf(a / 2, 2 * events) / 2
    high = chi2.ppf(1 - a / 2, 2 * events + 2) / 2
    return float(low / exposure), float(high / exposure)


def parse_by(by: str | Sequence[str] | None) -> list[str]:
    """``"model,batch"`` or ``["model", "batch"]`` to a list of column names."""
    if by is None:
        return []
    items = by.split(",") if isinstance(by, str) else [p for b in by for p in str(b).split(",")]
    cols = [c.strip() for c in items if c.strip()]
    if len(set(cols)) != len(cols):
        raise UsageError(f"--by {','.join(cols)}: a column is named twice")
    return cols


def check_by(by: list[str], available: Sequence[str], *, option: str = "--by") -> None:
    """Raise :class:`UsageError` naming the allowed columns when one of ``by`` is unknown."""
    allowed = [c for c in available] + list(PERIODS)
    bad = [c for c in by if c not in allowed]
    periods = [c for c in by if c in PERIODS]
    if bad:
        raise UsageError(f"{option} {','.join(by)}: unknown column(s) {bad}; choose from {', '.join(allowed)}")
    if len(periods) > 1:
        raise UsageError(f"{option} {','.join(by)}: use one time period at most (month or quarter)")


def counts_sql(engine: Engine, source: str, by: list[str]) -> str:
    """GPUs, GPU-days and failures per group of ``by`` over the lifetimes relation ``source``."""
    d = engine.dialect
    _q = d.quote
    period = next((c for c in by if c in PERIODS), None)
    plain = [c for c in by if c not in PERIODS]
    if period is None:
        keys = ", ".join(_q(c) for c in plain)
        group = f"GROUP BY {keys}" if plain else ""
        select = f"{keys}, " if plain else ""
        return f"""
SELECT {select}count(DISTINCT id) AS gpus, coalesce(sum(gpu_days), 0.0) AS gpu_days,
       CAST(coalesce(sum(CASE WHEN failed THEN 1 ELSE 0 END), 0) AS BIGINT) AS failures
FROM {source}
{group}"""
    unit = PERIODS[period]
    months = 3 if unit == "quarter" else 1
    label = (f"concat(CAST(year(period_start) AS {d.string_type}), '-Q', CAST(quarter(period_start) AS {d.string_type}))"
             if unit == "quarter" else
             f"concat(CAST(year(period_start) AS {d.string_type}), '-', lpad(CAST(month(period_start) AS {d.string_type}), 2, '0'))")
    ep = d.epoch_seconds
    inner_keys = "".join(f"{_q(c)}, " for c in plain)
    keys = ", ".join([_q(c) for c in plain] + [_q(period)])
    return f"""
WITH pieces AS (
    SELECT {inner_keys}id, failed, exit_at, {label} AS {_q(period)},
           greatest(entry_at, period_start) AS p_from,
           least(exit_at, {d.add_months('period_start', months)}) AS p_to,
           (failed AND exit_at > period_start AND exit_at <= {d.add_months('period_start', months)}) AS failed_here
    FROM {source} {d.explode_periods('entry_at', 'exit_at', unit)}
)
SELECT {keys}, count(DISTINCT id) AS gpus,
       coalesce(sum(CASE WHEN p_to > p_from THEN ({ep('p_to')} - {ep('p_from')}) / 86400.0 ELSE 0.0 END), 0.0) AS gpu_days,
       CAST(coalesce(sum(CASE WHEN failed_here THEN 1 ELSE 0 END), 0) AS BIGINT) AS failures
FROM pieces
WHERE p_to > p_from OR failed_here
GROUP BY {keys}"""


def add_rates(counts: pl.DataFrame, by: list[str], *, confidence: float, min_gpu_days: float) -> pl.DataFrame:
    """Add ``afr_pct`` and its exact interval to per-group counts; mark low exposure."""
    lows, highs, rates = [], [], []
    for k, t in zip(counts["failures"].to_list(), counts["gpu_days"].to_list()):
        lo, hi = poisson_interval(int(k), float(t), confidence)
        scale = 365.0 * 100.0
        rates.append(k / t * scale if t > 0 else None)
        lows.append(lo * scale if t > 0 else None)
        highs.append(hi * scale if t > 0 else None)
    out = counts.with_columns(
        pl.col("gpus").cast(pl.Int64), pl.col("gpu_days").cast(pl.Float64), pl.col("failures").cast(pl.Int64),
        pl.Series("afr_pct", rates, dtype=pl.Float64),
        pl.Series("afr_ci_low_pct", lows, dtype=pl.Float64),
        pl.Series("afr_ci_high_pct", highs, dtype=pl.Float64),
    ).with_columns((pl.col("gpu_days") < min_gpu_days).alias("low_exposure"))
    cols = by + ["gpus", "gpu_days", "failures", "afr_pct", "afr_ci_low_pct", "afr_ci_high_pct", "low_exposure"]
    return out.select(cols).sort(by or ["gpus"], nulls_last=True)


def afr_table(engine: Engine, source: str, by: list[str], *, confidence: float = 0.95,
              min_gpu_days: float = 0.0) -> pl.DataFrame:
    """AFR per group of ``by`` over the lifetimes relation ``source`` (contract columns plus
    ``low_exposure``)."""
    counts = engine.pl(counts_sql(engine, source, by), step=f"stats: afr by {','.join(by) or 'fleet'}")
    if not by and counts.height and counts["gpus"][0] == 0:
        counts = counts.clear()
    return add_rates(counts, by, confidence=confidence, min_gpu_days=min_gpu_days)


def to_long(table: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """The ``stats_afr`` layout: grouping, group_value and a JSON group_key instead of the by-columns."""
    values = [[None if v is None else str(v) for v in table[c].to_list()] for c in by] if by else []
    n = table.height
    labels = [" / ".join(NONE_LABEL if col[i] is None else col[i] for col in values) if by else "fleet" for i in range(n)]
    keys = [json.dumps({c: values[j][i] for j, c in enumerate(by)}, ensure_ascii=False) for i in range(n)]
    rest = table.drop(by)
    return pl.DataFrame({
        "grouping": [",".join(by)] * n, "group_value": labels, "group_key": keys,
    }, schema={"grouping": pl.Utf8, "group_value": pl.Utf8, "group_key": pl.Utf8}).hstack(rest)
