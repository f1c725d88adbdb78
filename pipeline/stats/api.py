"""The Python surface the report and notebooks call: every statistic from any source.

A *source* is a :class:`~pipeline.warehouse.Warehouse`, a DuckDB connection, an
:class:`~pipeline.engine.Engine` over the warehouse tables, a lifetime table (a CSV/Parquet
path, or a polars/pandas frame with ``id, start, end, failed``), or :class:`Lifetimes`.

>>> import pipeline.stats as st                                    # doctest: +SKIP
>>> st.afr(wh, by=["model", "batch"])                              # doctest: +SKIP
>>> st.survival("rma.csv", by="vendor")                            # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from pipeline.config import Config, Stats
from pipeline.engine import DuckDBEngine, Engine
from pipeline.errors import UsageError
from pipeline.stats import rates
from pipeline.stats.comparisons import compare_groups, single_models
from pipeline.stats.sources import Lifetimes, from_frame, from_lifetime_table, from_warehouse, lifetime_frame
from pipeline.stats.kaplan_meier import survival_table
from pipeline.stats.weibull_fit import weibull_table


def _stats_cfg(cfg: Config | Stats | None) -> Stats:
    if cfg is None:
        return Stats()
    return cfg.stats if isinstance(cfg, Config) else cfg


def lifetimes(source: Any, cfg: Config | Stats | None = None) -> Lifetimes:
    """The lifetimes relation of a source (see the module docstring)."""
    scfg = _stats_cfg(cfg)
    if isinstance(source, Lifetimes):
        return source
    if isinstance(source, Engine):
        return from_warehouse(source, scfg)
    if isinstance(source, duckdb.DuckDBPyConnection):
        return from_warehouse(DuckDBEngine(source), scfg)
    if isinstance(getattr(source, "engine", None), Engine):  # a Warehouse: the engine it runs on
        return from_warehouse(source.engine, scfg)
    if isinstance(source, (str, Path)):
        return from_lifetime_table(source)
    if isinstance(source, pl.DataFrame):  # a raw lifetime table, or one already shaped
        return from_frame(source if "exit_age_days" in source.columns else lifetime_frame(source))
    if hasattr(source, "to_records"):  # pandas
        return from_frame(lifetime_frame(pl.from_pandas(source)))
    raise UsageError(f"cannot compute statistics from a {type(source).__name__}: pass a Warehouse, a DuckDB "
                     "connection, an Engine, a lifetime table path or frame")


def afr(source: Any, by: str | list[str] | None = None, cfg: Config | Stats | None = None) -> pl.DataFrame:
    """Annualized failure rates per group, with the exact Poisson interval.

    Parameters
    ----------
    source
        Warehouse, connection, engine, lifetime table path or frame, or :class:`Lifetimes`.
    by : str or list of str, optional
        Grouping columns (``"model,batch"``); ``month``/``quarter``/``period`` split time.
        None: the whole fleet in one row.
    cfg : Config or Stats, optional
        ``confidence``, ``min_gpu_days`` and the failure definition (default: built-in).

    Returns
    -------
    polars.DataFrame
        The ``by`` columns, then gpus, gpu_days, failures, afr_pct, afr_ci_low_pct,
        afr_ci_high_pct, low_exposure.
    """
    scfg = _stats_cfg(cfg)
    lt = lifetimes(source, scfg)
    cols = rates.parse_by(by)
    rates.check_by(cols, lt.group_columns)
    return rates.afr_table(lt.engine, lt.relation, cols, confidence=scfg.confidence, min_gpu_days=scfg.min_gpu_days)


def _one_column(by: str | list[str] | None, lt: Lifetimes) -> str | None:
    cols = rates.parse_by(by)
    if len(cols) > 1:
        raise UsageError(f"--by {','.join(cols)}: survival takes one column")
    if cols and cols[0] not in lt.group_columns:
        raise UsageError(f"--by {cols[0]}: unknown column; choose from {', '.join(lt.group_columns)}")
    return cols[0] if cols else None


def survival(source: Any, by: str | None = None, cfg: Config | Stats | None = None) -> pl.DataFrame:
    """Kaplan-Meier curves by age per group (lifelines, delayed entry, censoring).

    Returns the ``by`` column (text; ``group`` when None), t_days, at_risk, events, survival,
    ci_low, ci_high.
    """
    scfg = _stats_cfg(cfg)
    lt = lifetimes(source, scfg)
    col = _one_column(by, lt)
    return survival_table(lt.frame(), col, confidence=scfg.confidence)


def weibull(source: Any, by: str | None = None, cfg: Config | Stats | None = None) -> pl.DataFrame:
    """A Weibull fit per group: shape, its interval, scale and the reading in words."""
    scfg = _stats_cfg(cfg)
    lt = lifetimes(source, scfg)
    col = _one_column(by, lt)
    return weibull_table(lt.frame(), col, confidence=scfg.confidence)


def compare(source: Any, by: str = "batch", cfg: Config | Stats | None = None) -> pl.DataFrame:
    """Each group of ``by`` against the rest of the fleet (rate ratio, exact interval and test,
    Benjamini-Hochberg adjusted), with the sentence for flagged groups."""
    scfg = _stats_cfg(cfg)
    lt = lifetimes(source, scfg)
    col = _one_column(by, lt)
    if col is None:
        raise UsageError("compare needs a column to group by (batch, vendor, model, ...)")
    counts = rates.afr_table(lt.engine, lt.relation, [col], confidence=scfg.confidence)
    models = single_models(lt.engine.pl(f"SELECT DISTINCT {lt.engine.dialect.quote(col)}, model FROM {lt.relation}",
                                        step="stats: models per group"), col) \
        if "model" in lt.group_columns and col != "model" else {}
    return compare_groups(counts, col, confidence=scfg.confidence, models=models)
