"""The ``stats`` stage: every reliability table, recomputed from the warehouse on each run.

Reads: ``inventory``, ``tickets`` (coded and linked), ``gpu_days`` and ``xid_events`` (for
the window and the Xid rates). Writes: ``failures`` (:func:`~pipeline.stats.failures.build_failures`,
the one definition), then from it ``stats_lifetimes``, ``stats_afr``
(the fleet and each ``stats.afr_by`` grouping), ``stats_trend``, ``stats_compare``,
``stats_survival``, ``stats_weibull``, ``stats_pareto``, ``stats_xid_rates``,
``stats_repair``, ``stats_repeat``; and ``OUT/metrics/stats.json`` for DVC.

Why: procurement and operators read these numbers, with their uncertainty, in the report.
Everything is derived (no file is ingested), so each run replaces the tables in one
transaction: the nightly job is idempotent.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import polars as pl

from pipeline.stats import rates
from pipeline.stats import modes
from pipeline.stats.comparisons import compare_groups, single_models
from pipeline.stats.failures import INPUTS as FAILURES_INPUTS, TABLE as FAILURES, build_failures
from pipeline.stats.sources import from_warehouse
from pipeline.stats.kaplan_meier import survival_table
from pipeline.stats.weibull_fit import weibull_table

log = logging.getLogger(__name__)

STAGE = "stats"
#: The warehouse tables the stage reads.
INPUTS = ("inventory", "tickets", "gpu_days", "xid_events", "failures")  # failures: built in the warehouse first


def _afr_rows(lt, scfg) -> pl.DataFrame:
    parts = []
    for grouping in [""] + list(scfg.afr_by):
        by = rates.parse_by(grouping)
        rates.check_by(by, lt.group_columns, option="stats.afr_by")
        table = rates.afr_table(lt.engine, lt.relation, by, confidence=scfg.confidence, min_gpu_days=scfg.min_gpu_days)
        parts.append(rates.to_long(table, by))
    return pl.concat(parts, how="vertical_relaxed")


def _by_group(frame: pl.DataFrame, by: str, fn, scfg) -> pl.DataFrame:
    out = fn(frame, by or None, confidence=scfg.confidence)
    name = by or "group"
    if name in out.columns:
        out = out.rename({name: "group_value"})
    return out.with_columns(pl.lit(by).alias("grouping"))


def compute(engine, scfg) -> tuple[dict[str, pl.DataFrame], dict]:
    """Every stats table from the warehouse the engine sees (its ``failures`` table as
    :func:`~pipeline.stats.failures.build_failures` left it), and the metrics for DVC."""
    lt = from_warehouse(engine, scfg, failures=FAILURES)
    window = lt.window
    frame = lt.frame()
    n_failures = engine.scalar(f"SELECT count(*) FROM {FAILURES}", step="stats: count failures")
    tables: dict[str, pl.DataFrame] = {
        "stats_lifetimes": frame,
        "stats_afr": _afr_rows(lt, scfg),
    }
    trend = rates.afr_table(engine, lt.relation, ["month"], confidence=scfg.confidence, min_gpu_days=scfg.min_gpu_days)
    tables["stats_trend"] = trend.rename({"month": "period"})
    compares = []
    for dim in scfg.compare_by:
        if dim not in lt.group_columns:
            continue
        counts = rates.afr_table(engine, lt.relation, [dim], confidence=scfg.confidence)
        compares.append(compare_groups(counts, dim, confidence=scfg.confidence,
                                       models=single_models(frame, dim)))
    if compares:
        tables["stats_compare"] = pl.concat(compares)
    groupings = [""] + [c for c in scfg.survival_by if c in lt.group_columns]
    tables["stats_survival"] = pl.concat(
        [_by_group(frame, g, survival_table, scfg) for g in groupings], how="vertical_relaxed")
    tables["stats_weibull"] = pl.concat(
        [_by_group(frame, g, weibull_table, scfg) for g in groupings], how="vertical_relaxed")
    tables["stats_pareto"] = modes.pareto(engine, window, scfg.failure_parts, scfg.failure_actions)
    tables["stats_xid_rates"] = modes.xid_rates(engine, window, lt.relation, confidence=scfg.confidence)
    tables["stats_repair"], negative = modes.repair_times(engine, window)
    tables["stats_repeat"] = modes.repeat_offenders(engine, window, scfg.failure_parts, scfg.repeat_window_days)
    fleet = tables["stats_afr"].filter(pl.col("grouping") == "")
    flagged = tables.get("stats_compare", pl.DataFrame({"flagged": [], "sentence": []}, schema={"flagged": pl.Boolean, "sentence": pl.Utf8}))
    metrics = {
        "window_start": window.start.date().isoformat(), "window_end": (window.end - timedelta(days=1)).date().isoformat(),
        "window_source": window.source,
        "gpus": int(fleet["gpus"][0]) if fleet.height else 0,
        "gpu_days": round(float(fleet["gpu_days"][0]), 1) if fleet.height else 0.0,
        "failures": int(fleet["failures"][0]) if fleet.height else 0,
        "afr_pct": _round(fleet["afr_pct"][0]) if fleet.height else None,
        "afr_ci_low_pct": _round(fleet["afr_ci_low_pct"][0]) if fleet.height else None,
        "afr_ci_high_pct": _round(fleet["afr_ci_high_pct"][0]) if fleet.height else None,
        "flagged_groups": int(flagged["flagged"].sum() or 0),
        "flagged": flagged.filter(pl.col("flagged").cast(pl.Boolean).fill_null(False))["sentence"].to_list(),
        "tickets_closed_before_opened": negative,
        "failures_outside_exposure": int(n_failures - int(frame["failed"].sum() or 0)),
    }
    return tables, metrics


def _round(x):
    return None if x is None else round(float(x), 3)


def window_note(metrics: dict) -> str:
    """One line on what the rates cover; says plainly when there is nothing to count."""
    if metrics["window_source"] == "empty":
        return "no data yet (no inventory, telemetry, kernel logs or tickets): no failure rates"
    span = f"window {metrics['window_start']}..{metrics['window_end']} ({metrics['window_source']})"
    if not metrics["gpus"]:
        return f"{span}: no inventory GPU in service in it, so no failure rates (they count inventory.csv's GPUs)"
    found = f"{metrics['failures']} failures" if metrics["failures"] else "no failures (each rate is 0, with an upper bound)"
    return f"{span}: {metrics['gpus']} GPUs, {metrics['gpu_days']:.0f} GPU-days, {found}"


def run(ctx) -> None:
    """Stage: rebuild ``failures``, recompute every stats table from it and write
    ``OUT/metrics/stats.json``."""
    scfg = ctx.cfg.stats
    with ctx.wh.transaction():
        # in the warehouse first: the Spark engine then reads it as an input
        n_failures = build_failures(ctx.wh, scfg, ctx.engine_for(FAILURES_INPUTS))
        tables, metrics = compute(ctx.engine_for(INPUTS), scfg)
        for name, frame in tables.items():
            ctx.wh.replace(name, frame)
    ctx.report(STAGE).rows_out = n_failures + sum(f.height for f in tables.values())
    folder = ctx.out_dir / "metrics"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stats.json").write_text(json.dumps(metrics, indent=2) + "\n")
    ctx.note(STAGE, window_note(metrics))
    for sentence in metrics["flagged"]:
        ctx.note(STAGE, sentence)
    if metrics["failures_outside_exposure"]:
        ctx.note(STAGE, f"{metrics['failures_outside_exposure']} failure ticket(s) fall outside their GPU's "
                        "exposure in the window (before the window, before install, or a second ticket)")
