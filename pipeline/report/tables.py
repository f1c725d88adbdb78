"""The report's other tables: fleet summary, failure modes, Xids, trend, repairs, predictions,
data quality.

Reads: ``inventory``, ``gpu_days``, ``xid_events``, ``tickets``, ``failures``,
``predictions``, ``files``, ``quarantine`` and the statistics tables where they exist.
Writes nothing. Every function returns a polars frame (empty when the table behind it has no
rows yet), so each report section can say "no data yet" instead of failing.
"""

from __future__ import annotations

import polars as pl

from pipeline.config import Config
from pipeline.report.reliability import failure_events_sql, fleet_afr, stats_table, window
from pipeline.warehouse import Warehouse


def summary(wh: Warehouse, cfg: Config) -> dict:
    """Headline numbers: GPUs, hosts, models, GPU-days, failures, AFR and the period."""
    gpus, in_service, hosts, models = wh.engine.rows(
        "SELECT count(DISTINCT serial), count(DISTINCT serial) FILTER (WHERE removed_at IS NULL), "
        "count(DISTINCT host), count(DISTINCT model) FROM inventory", step="report: summary")[0]
    lo, hi = window(wh, cfg)
    out = {"gpus": gpus, "in_service": in_service, "hosts": hosts, "models": models,
           "period_start": lo, "period_end": hi,
           "telemetry_gpu_days": wh.engine.scalar("SELECT count(*) FROM gpu_days", step="report: gpu-days"),
           "xid_events": wh.engine.scalar("SELECT count(*) FROM xid_events", step="report: xid events"),
           "tickets": wh.engine.scalar("SELECT count(*) FROM tickets", step="report: tickets")}
    out.update(fleet_afr(wh, cfg))
    return out


def pareto(wh: Warehouse) -> pl.DataFrame:
    """Failure modes (part x symptom) of the coded, linked tickets, most frequent first,
    with the cumulative share."""
    st = stats_table(wh, "stats_pareto")
    if st is not None:
        return st.sort("rank").select("part_code", "symptom_code", "tickets", "failures",
                                      (100 * pl.col("cumulative_share")).alias("cumulative_pct"))
    df = wh.engine.pl(
        """
        SELECT part_code, coalesce(symptom_code, '(uncoded)') AS symptom_code, count(*) AS tickets
        FROM tickets WHERE part_code IS NOT NULL AND part_code <> 'NONE'
        GROUP BY ALL ORDER BY tickets DESC, part_code, symptom_code
        """,
        step="report: pareto",
    )
    return _cumulative(df)


def _cumulative(df: pl.DataFrame) -> pl.DataFrame:
    if not df.height:
        return df
    return df.with_columns((100 * pl.col("tickets").cum_sum() / pl.col("tickets").sum()).alias("cumulative_pct"))


def top_xids(wh: Warehouse, per_model: int = 5) -> pl.DataFrame:
    """The most frequent Xid/SXid codes per GPU model, as counts and per 1,000 GPU-days of
    telemetry on that model (the rate is null where the model has no telemetry)."""
    st = stats_table(wh, "stats_xid_rates")
    if st is not None:
        return (st.with_columns(pl.col("events").rank("ordinal", descending=True).over("model").alias("r"))
                .filter(pl.col("r") <= per_model)
                .select("model", "kind", "xid", "severity", "events", "gpus", "per_1000_gpu_days", "ci_low", "ci_high")
                .sort("model", "events", descending=[False, True]))
    return wh.engine.pl(
        f"""
        WITH ev AS (
            SELECT coalesce(i.model, '(unlinked)') AS model, e.kind, e.xid,
                   any_value(e.severity) AS severity, count(*) AS events,
                   count(DISTINCT e.serial) AS gpus
            FROM xid_events e LEFT JOIN inventory i USING (serial)
            GROUP BY ALL),
        expo AS (
            SELECT i.model, count(*) AS gpu_days
            FROM gpu_days d JOIN inventory i ON d.serial = i.serial GROUP BY ALL),
        ranked AS (
            SELECT ev.*, 1000.0 * events / nullif(expo.gpu_days, 0) AS per_1000_gpu_days,
                   row_number() OVER (PARTITION BY ev.model ORDER BY events DESC, xid) AS r
            FROM ev LEFT JOIN expo USING (model))
        SELECT model, kind, xid, severity, events, gpus, per_1000_gpu_days
        FROM ranked WHERE r <= {int(per_model)} ORDER BY model, events DESC, xid
        """,
        step="report: top xids",
    )


def monthly_trend(wh: Warehouse, cfg: Config) -> pl.DataFrame:
    """Failures, tickets and Xid events per calendar month (UTC), with the month's AFR and
    interval where the statistics stage computed it."""
    df = wh.engine.pl(
        f"""
        WITH f AS (SELECT date_trunc('month', failed_at) AS month, count(*) AS failures
                   FROM ({failure_events_sql(wh, cfg)}) AS ev GROUP BY ALL),
        t AS (SELECT date_trunc('month', opened_at) AS month, count(*) AS tickets
              FROM tickets WHERE opened_at IS NOT NULL GROUP BY ALL),
        x AS (SELECT date_trunc('month', ts) AS month, count(*) AS xid_events
              FROM xid_events WHERE ts IS NOT NULL GROUP BY ALL),
        d AS (SELECT date_trunc('month', day) AS month, count(*) AS gpu_days FROM gpu_days GROUP BY ALL)
        SELECT CAST(month AS DATE) AS month,
               coalesce(failures, 0) AS failures, coalesce(tickets, 0) AS tickets,
               coalesce(xid_events, 0) AS xid_events, coalesce(gpu_days, 0) AS telemetry_gpu_days
        FROM f FULL JOIN t USING (month) FULL JOIN x USING (month) FULL JOIN d USING (month)
        ORDER BY month
        """,
        step="report: monthly trend",
    )
    st = stats_table(wh, "stats_trend")
    if st is None or not df.height:
        return df
    rates = st.select(pl.col("period").alias("_period"), "gpu_days", "afr_pct", "afr_ci_low_pct", "afr_ci_high_pct")
    return (df.with_columns(pl.col("month").dt.strftime("%Y-%m").alias("_period"))
            .join(rates, on="_period", how="left").drop("_period"))


def repair_times(wh: Warehouse) -> pl.DataFrame:
    """Hours from a ticket's opening to its closing, per part, where the export carries both."""
    st = stats_table(wh, "stats_repair")
    if st is not None:
        return st.select("part_code", "tickets", "median_hours", "p90_hours",
                         pl.col("mttr_hours").alias("mean_hours")).sort("tickets", descending=True)
    hours = repair_hours(wh)
    return (hours.group_by("part_code")
            .agg(pl.len().alias("tickets"), pl.col("hours").median().alias("median_hours"),
                 pl.col("hours").quantile(0.9, interpolation="linear").alias("p90_hours"),
                 pl.col("hours").mean().alias("mean_hours"))
            .sort(["tickets", "part_code"], descending=[True, False]))


def repair_hours(wh: Warehouse) -> pl.DataFrame:
    """Every ticket's repair time in hours (for the histogram)."""
    hours = wh.engine.dialect.seconds_between("opened_at", "closed_at")
    return wh.engine.pl(
        "SELECT coalesce(part_code, '(uncoded)') AS part_code, "
        f"{hours} / 3600e0 AS hours FROM tickets "
        "WHERE opened_at IS NOT NULL AND closed_at IS NOT NULL AND closed_at >= opened_at",
        step="report: repair hours",
    )


def predictions(wh: Warehouse) -> pl.DataFrame:
    """The latest predicted-failure list (contract columns plus ``as_of``), rank order."""
    return wh.engine.pl(
        """
        SELECT rank, serial, host, pci_bus_id, model, risk, horizon_days, top_factors, as_of, model_version
        FROM predictions WHERE as_of = (SELECT max(as_of) FROM predictions)
        ORDER BY rank, serial
        """,
        step="report: predictions",
    )


def files_read(wh: Warehouse) -> pl.DataFrame:
    """Files loaded per stage with their row counts."""
    return wh.engine.pl(
        "SELECT stage, count(*) AS files, CAST(sum(rows_read) AS BIGINT) AS rows_read, "
        "CAST(sum(rows_loaded) AS BIGINT) AS rows_loaded, CAST(sum(rows_quarantined) AS BIGINT) AS rows_quarantined, "
        "CAST(sum(size) AS BIGINT) AS bytes FROM files GROUP BY stage ORDER BY stage",
        step="report: files read",
    )


def empty_files(wh: Warehouse, limit: int = 50) -> pl.DataFrame:
    """Files that gave no rows, with why: quarantined whole (``empty_file``, ``bad_gzip``,
    ...), every row rejected, or no data rows. A kernel log without an Xid is normal, not listed."""
    return wh.engine.pl(
        "SELECT f.stage, f.path AS file, f.rows_read, f.rows_quarantined, "
        "coalesce(q.reason || ': ' || q.detail, 'no data rows') AS why "
        "FROM files f LEFT JOIN (SELECT file_id, min_by(reason, coalesce(line_no, 0)) AS reason, "
        "min_by(detail, coalesce(line_no, 0)) AS detail FROM quarantine GROUP BY file_id) q USING (file_id) "
        "WHERE f.rows_loaded = 0 AND (f.rows_quarantined > 0 OR f.stage <> 'xid') "
        f"ORDER BY f.stage, f.path LIMIT {int(limit)}",
        step="report: files without rows",
    )


def quarantine_reasons(wh: Warehouse) -> pl.DataFrame:
    """Quarantined rows per stage and reason, with one example file and line."""
    return wh.engine.pl(
        "SELECT stage, reason, count(*) AS rows, count(DISTINCT source_file) AS files, "
        "min(source_file) AS example_file, min(line_no) AS example_line "
        "FROM quarantine GROUP BY stage, reason ORDER BY rows DESC, stage, reason",
        step="report: quarantine",
    )


def ticket_quality(wh: Warehouse) -> dict:
    """Tickets awaiting review, unlinked tickets and unlinked Xid events."""
    total, review, unlinked = wh.engine.rows(
        "SELECT count(*), count(*) FILTER (WHERE review), count(*) FILTER (WHERE serial IS NULL) FROM tickets",
        step="report: ticket quality")[0]
    x_total, x_unlinked = wh.engine.rows(
        "SELECT count(*), count(*) FILTER (WHERE serial IS NULL) FROM xid_events", step="report: xid quality")[0]
    return {"tickets": total, "awaiting_review": review, "unlinked_tickets": unlinked,
            "xid_events": x_total, "unlinked_xid_events": x_unlinked}


def unlinked_tickets(wh: Warehouse, limit: int = 20) -> pl.DataFrame:
    """A sample of the tickets no inventory GPU could be found for."""
    return wh.engine.pl(
        "SELECT service_point, ticket_id, opened_at, host, serial_text, part_text FROM tickets "
        f"WHERE serial IS NULL ORDER BY opened_at DESC NULLS LAST, ticket_id LIMIT {int(limit)}",
        step="report: unlinked tickets",
    )
