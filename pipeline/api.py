"""The public functions analysts call from Jupyter: the warehouse, read-only, as tables.

Everything here is a thin wrapper: statistics come from the statistics stage's tables (or,
before it has run, from the report's fallback), predictions and model runs from the predict
stage. Every function returns a polars frame (``.to_pandas()`` for pandas users) or a dict,
and an empty frame rather than an error when a stage has not produced its table yet.

>>> from pipeline import api                                           # doctest: +SKIP
>>> wh = api.open_warehouse("fleetfault.duckdb")                       # doctest: +SKIP
>>> api.afr(wh, by="model")                                            # doctest: +SKIP
>>> api.gpu_history(wh, api.interesting_gpu(wh))["xid_events"]        # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.config import Config, load_config
from pipeline.errors import UsageError
from pipeline.report import reliability, tables
from pipeline.vocab.sql import literal
from pipeline.warehouse import Warehouse

__all__ = [
    "open_warehouse", "config", "summary", "afr", "survival", "weibull", "flagged", "failure_modes",
    "top_xids", "monthly_trend", "repair_times", "predictions", "gpu_history", "interesting_gpu",
    "model_runs", "model_card", "model_metrics", "calibration", "data_quality",
]


def config(path: str | Path | None = None) -> Config:
    """The config (``./fleetfault.toml`` when present, else the defaults)."""
    return load_config(path)


def open_warehouse(path: str | Path | None = None, cfg: Config | None = None) -> Warehouse:
    """Open the warehouse read-only (a nightly run may write to it meanwhile).

    Parameters
    ----------
    path : str or Path, optional
        The DuckDB file, or with Spark the tables' folder or URL, as ``--warehouse`` takes
        it (:func:`pipeline.location.resolve_warehouse`); default ``paths.warehouse``.
    """
    from pipeline.location import resolve_warehouse

    cfg = cfg or config()
    path = resolve_warehouse(cfg, path).catalog
    if not path.exists():
        raise UsageError(f"no warehouse at {path}: run `fleetfault run` first, or pass its path")
    from pipeline.run import open_warehouse as _open  # the config's engine, as every command gets it

    return _open(cfg, path, read_only=True)


def _cfg(cfg: Config | None) -> Config:
    return cfg if cfg is not None else config()


def summary(wh: Warehouse, cfg: Config | None = None) -> dict:
    """Headline numbers: GPUs, hosts, GPU-days, failures, fleet AFR and its interval, period."""
    return tables.summary(wh, _cfg(cfg))


def afr(wh: Warehouse, by: str = "model", cfg: Config | None = None) -> pl.DataFrame:
    """Annualized failure rate per group of ``by`` with the exact Poisson interval."""
    return reliability.afr(wh, _cfg(cfg), by)


def survival(wh: Warehouse, by: str = "model", cfg: Config | None = None) -> pl.DataFrame:
    """Kaplan-Meier curves per group: ``by``, t_days, at_risk, events, survival, ci_low, ci_high."""
    return reliability.survival(wh, _cfg(cfg), by)


def weibull(wh: Warehouse, by: str = "model", cfg: Config | None = None) -> pl.DataFrame:
    """Weibull shape per group, its interval and the reading in words."""
    return reliability.weibull(wh, _cfg(cfg), by)


def flagged(wh: Warehouse, cfg: Config | None = None) -> pl.DataFrame:
    """Batches, vendors and models failing significantly more than the rest, with sentences."""
    return reliability.flagged(wh, _cfg(cfg))


def failure_modes(wh: Warehouse) -> pl.DataFrame:
    """Failure-mode Pareto: part x symptom, tickets, cumulative percent."""
    return tables.pareto(wh)


def top_xids(wh: Warehouse, per_model: int = 5) -> pl.DataFrame:
    """The most frequent Xid/SXid codes per model, with rates per 1,000 GPU-days."""
    return tables.top_xids(wh, per_model)


def monthly_trend(wh: Warehouse, cfg: Config | None = None) -> pl.DataFrame:
    """Failures, tickets and Xid events per month (with the month's AFR when computed)."""
    return tables.monthly_trend(wh, _cfg(cfg))


def repair_times(wh: Warehouse) -> pl.DataFrame:
    """Median, 90th percentile and mean hours from ticket opened to closed, per part."""
    return tables.repair_times(wh)


def predictions(wh: Warehouse) -> pl.DataFrame:
    """The latest predicted-failure list, most at risk first."""
    return tables.predictions(wh)


def data_quality(wh: Warehouse) -> dict:
    """Files read per stage, quarantined rows per reason, and ticket/Xid linkage counts."""
    return {"files": tables.files_read(wh), "quarantine": tables.quarantine_reasons(wh),
            "tickets": tables.ticket_quality(wh)}


def gpu_history(wh: Warehouse, serial: str) -> dict[str, pl.DataFrame]:
    """Everything the warehouse knows about one GPU, by table.

    Returns
    -------
    dict
        ``inventory`` (its registry rows), ``gpu_days`` (telemetry facts per day),
        ``xid_events``, ``tickets`` and ``predictions`` (every list it appeared on).
    """
    if not isinstance(serial, str) or not serial.strip():
        raise UsageError(f"gpu_history: serial must be a non-empty string, got {serial!r}")
    s = serial.strip().upper()
    key = literal(s)
    q = {
        "inventory": "SELECT serial, model, vendor, host, slot, site, batch, installed_at, removed_at "
                     f"FROM inventory WHERE serial = {key}",
        "gpu_days": f"SELECT * EXCLUDE (gpu_key) FROM gpu_days WHERE serial = {key} ORDER BY day",
        "xid_events": "SELECT ts, host, pci_bus_id, kind, xid, severity, message, source_file, line_no "
                      f"FROM xid_events WHERE serial = {key} ORDER BY ts NULLS LAST",
        "tickets": "SELECT service_point, ticket_id, opened_at, closed_at, part_code, symptom_code, action_code, "
                   f"part_text, symptom_text, action_text, review FROM tickets WHERE serial = {key} ORDER BY opened_at",
        "predictions": "SELECT as_of, rank, risk, horizon_days, top_factors, model_version FROM predictions "
                       f"WHERE serial = {key} ORDER BY as_of",
    }
    return {name: wh.engine.pl(sql, step=f"api: {name} of {s}") for name, sql in q.items()}


def interesting_gpu(wh: Warehouse) -> str | None:
    """A GPU worth drilling into: the top of the latest prediction list, else the GPU with the
    most Xid events, else the first inventory serial (None for an empty warehouse)."""
    for sql in ("SELECT serial FROM predictions WHERE as_of = (SELECT max(as_of) FROM predictions) ORDER BY rank LIMIT 1",
                "SELECT serial FROM xid_events WHERE serial IS NOT NULL GROUP BY serial ORDER BY count(*) DESC, serial LIMIT 1",
                "SELECT serial FROM inventory ORDER BY serial LIMIT 1"):
        value = wh.engine.scalar(sql, step="api: interesting gpu")
        if value:
            return value
    return None


def model_runs(wh: Warehouse) -> pl.DataFrame:
    """Every training of the failure model: periods, pooled out-of-fold metrics next to the
    evidence score's (``baseline_pr_auc``), and whether it was promoted and why (newest first)."""
    if not wh.table_exists("model_runs"):  # a warehouse from before the predict stage existed
        return pl.DataFrame()
    return wh.engine.pl("SELECT * FROM model_runs ORDER BY trained_at DESC", step="api: model runs")


def _models_dir(wh: Warehouse, cfg: Config) -> Path:
    from pipeline.predict.stage import models_dir

    return models_dir(cfg, wh.path)


def model_card(wh: Warehouse, version: str | None = None, cfg: Config | None = None) -> dict:
    """The model card (JSON) of ``version``, default the promoted model; {} when none exists."""
    mdir = _models_dir(wh, _cfg(cfg))
    if version is None:
        current = mdir / "current.json"
        if not current.exists():
            return {}
        version = json.loads(current.read_text(encoding="utf-8"))["version"]
    card = mdir / f"{version}.json"
    return json.loads(card.read_text(encoding="utf-8")) if card.exists() else {}


def model_metrics(card: dict) -> pl.DataFrame:
    """A model card's out-of-fold metrics as a table: metric, model, baseline (the evidence score)."""
    m = card.get("metrics", {})
    model, base = m.get("model", {}) or {}, m.get("baseline", {}) or {}
    names = [k for k in model if isinstance(model.get(k), (int, float)) or isinstance(base.get(k), (int, float))]
    num = lambda v: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None  # noqa: E731
    return pl.DataFrame({"metric": names, "model": [num(model.get(k)) for k in names],
                         "baseline": [num(base.get(k)) for k in names]},
                        schema={"metric": pl.Utf8, "model": pl.Float64, "baseline": pl.Float64})


def calibration(out_dir: str | Path | None = None, cfg: Config | None = None) -> pl.DataFrame:
    """The last evaluation's calibration table (mean predicted risk against the observed rate
    per risk bin, for the model and the evidence score), from ``OUT/plots/``; empty when the
    predict stage has not evaluated a model yet."""
    out = Path(out_dir) if out_dir else Path(_cfg(cfg).paths.out)
    path = out / "plots" / "predict_calibration.csv"
    return pl.read_csv(path) if path.exists() else pl.DataFrame(
        schema={"mean_risk": pl.Float64, "observed_rate": pl.Float64, "count": pl.Int64, "scorer": pl.Utf8})
