"""Reliability tables for the report: AFR, survival, Weibull shapes and flagged groups.

Reads: the statistics stage's tables (``stats_*``) when they hold rows; otherwise the same
statistics computed on the spot by :mod:`pipeline.stats` from ``inventory`` and the stored
``failures`` (never recomputed here), so a report drawn from a warehouse whose statistics
tables are empty still shows them. Writes nothing. Each function returns a polars frame,
empty when there is nothing to show; the frames have the report's column names (the grouping
column is named after it: ``model``, ``vendor``, ...).
"""

from __future__ import annotations

import logging
from datetime import timedelta

import polars as pl

from pipeline import stats as st
from pipeline.config import Config
from pipeline.stats.failures import TABLE as FAILURES
from pipeline.stats.sources import from_warehouse
from pipeline.warehouse import Warehouse

log = logging.getLogger(__name__)

AFR_COLUMNS = ["gpus", "gpu_days", "failures", "afr_pct", "afr_ci_low_pct", "afr_ci_high_pct", "low_exposure"]
KM_COLUMNS = ["t_days", "at_risk", "events", "survival", "ci_low", "ci_high"]
WEIBULL_COLUMNS = ["units", "failures", "shape", "shape_ci_low", "shape_ci_high", "pattern", "interpretation"]


def stats_table(wh: Warehouse, name: str) -> pl.DataFrame | None:
    """A statistics table as polars when it exists and has rows, else None."""
    if not has_rows(wh, name):
        return None
    return wh.engine.pl(f"SELECT * FROM {wh.engine.dialect.quote(name)}", step=f"report: read {name}")


def has_rows(wh: Warehouse, name: str) -> bool:
    """Whether a (statistics) table exists and holds rows."""
    return wh.table_exists(name) and bool(wh.engine.scalar(f"SELECT count(*) FROM {wh.engine.dialect.quote(name)}",
                                                           step=f"report: rows of {name}"))


def _grouped(wh: Warehouse, name: str, by: str) -> pl.DataFrame | None:
    """The rows of a statistics table for one grouping, ``group_value`` renamed to ``by``."""
    table = stats_table(wh, name)
    if table is None:
        return None
    rows = table.filter(pl.col("grouping") == by)
    return rows.rename({"group_value": by}) if rows.height and by else (rows if rows.height else None)


def _has_records(wh: Warehouse) -> bool:
    return bool(wh.engine.scalar("SELECT count(*) FROM inventory", step="report: inventory rows"))


def window(wh: Warehouse, cfg: Config) -> tuple:
    """The observation window as (first day, last day), or (None, None) without records."""
    w = st.data_window(wh.engine, cfg.stats)
    if w.source == "empty":
        return None, None
    return w.start.date(), (w.end - timedelta(days=1)).date()  # the window's end is exclusive


def failure_events_sql(wh: Warehouse, cfg: Config) -> str:
    """A SELECT of the failures: the ``failures`` table (:mod:`pipeline.stats.failures`)."""
    return f"SELECT serial, failed_at, ticket_id, part_code, symptom_code FROM {FAILURES}"


def _lifetimes(wh: Warehouse, cfg: Config):
    """The lifetimes relation over the stored ``failures``, for statistics the statistics
    stage has not stored."""
    return st.lifetimes(from_warehouse(wh.engine, cfg.stats, failures=FAILURES), cfg)


def afr(wh: Warehouse, cfg: Config, by: str) -> pl.DataFrame:
    """AFR per group of ``by`` (model, vendor, batch, ...) with its exact interval."""
    rows = _grouped(wh, "stats_afr", by)
    if rows is None:
        if not _has_records(wh):
            return pl.DataFrame()
        rows = st.afr(_lifetimes(wh, cfg), by, cfg)
    return rows.select(pl.col(by).cast(pl.Utf8), *AFR_COLUMNS).sort("afr_pct", descending=True, nulls_last=True)


def fleet_afr(wh: Warehouse, cfg: Config) -> dict:
    """The whole fleet's AFR with its interval, as a dict (empty without data)."""
    rows = _grouped(wh, "stats_afr", "")
    if rows is None:
        if not _has_records(wh):
            return {}
        rows = st.afr(_lifetimes(wh, cfg), None, cfg)
    return rows.select(AFR_COLUMNS).row(0, named=True) if rows.height else {}


def survival(wh: Warehouse, cfg: Config, by: str = "model") -> pl.DataFrame:
    """Kaplan-Meier curves per group (the contract's survival columns)."""
    rows = _grouped(wh, "stats_survival", by)
    if rows is None:
        if not _has_records(wh):
            return pl.DataFrame()
        rows = st.survival(_lifetimes(wh, cfg), by, cfg)
    return rows.select(pl.col(by).cast(pl.Utf8), *KM_COLUMNS).sort(by, "t_days")


def weibull(wh: Warehouse, cfg: Config, by: str = "model") -> pl.DataFrame:
    """Weibull shape per group with its interval, the pattern and the reading in words."""
    rows = _grouped(wh, "stats_weibull", by)
    if rows is None:
        if not _has_records(wh):
            return pl.DataFrame()
        rows = st.weibull(_lifetimes(wh, cfg), by, cfg)
        if "group_value" in rows.columns:
            rows = rows.rename({"group_value": by})
    return rows.select(pl.col(by).cast(pl.Utf8), *WEIBULL_COLUMNS).sort(by)


def flagged(wh: Warehouse, cfg: Config) -> pl.DataFrame:
    """Groups failing significantly more than the rest of the fleet, with their sentences."""
    table = comparisons(wh, cfg)
    if not table.height:
        return table
    return (table.filter(pl.col("flagged") & pl.col("sentence").is_not_null())
            .sort("rate_ratio", descending=True, nulls_last=True))


def comparisons(wh: Warehouse, cfg: Config) -> pl.DataFrame:
    """Every group compared with the rest of the fleet (flagged or not): the statistics stage's
    ``stats_compare``, else the same comparison computed on the spot."""
    table = stats_table(wh, "stats_compare")
    if table is not None:
        return table
    if not _has_records(wh):
        return pl.DataFrame()
    parts = []
    lt = _lifetimes(wh, cfg)
    for dim in cfg.stats.compare_by:
        try:
            parts.append(st.compare(lt, dim, cfg))
        except Exception as exc:  # one dimension's failure must not hide the others
            log.warning("report: comparing by %s failed: %s", dim, exc)
    parts = [p for p in parts if p.height]
    return pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()
