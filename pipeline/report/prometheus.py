"""Per-GPU risk and Xid counts as a Prometheus textfile-collector file.

Reads: ``predictions`` (the latest list), ``predict_track`` (how the list has done per month)
and ``xid_events``. Writes: ``fleetfault.prom`` for
node_exporter's ``--collector.textfile.directory``, so Grafana can chart and alert on the risk.

The file is produced by ``prometheus_client`` itself (its exposition code escapes label
values), and written atomically (temporary file, then rename) as the textfile collector
requires, so node_exporter never reads half a file.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from pipeline.report.atomic import write_atomic
from pipeline.warehouse import Warehouse

#: Xid counts are given over this many days before the last event day, and over all records.
XID_WINDOW_DAYS = 7


class _Snapshot:
    """A collector that yields metric families computed once from the warehouse."""

    def __init__(self, families):
        self._families = families

    def collect(self):
        return iter(self._families)


def metric_families(wh: Warehouse) -> list[GaugeMetricFamily]:
    """The fleetfault metrics from the warehouse (empty families when there is no data)."""
    risk = GaugeMetricFamily(
        "fleetfault_gpu_failure_risk",
        "Calibrated probability that the GPU is replaced within horizon_days (latest prediction)",
        labels=["serial", "host", "model", "pci_bus_id", "horizon_days"],
    )
    rank = GaugeMetricFamily("fleetfault_gpu_failure_rank", "Rank in the predicted-failure list (1 = most at risk)",
                             labels=["serial", "host", "model"])
    rows = wh.engine.rows(
        "SELECT serial, host, model, pci_bus_id, horizon_days, risk, rank, as_of FROM predictions "
        "WHERE as_of = (SELECT max(as_of) FROM predictions) ORDER BY rank, serial", step="prometheus: predictions")
    as_of = None
    for serial, host, model, bus, horizon, p, r, day in rows:
        risk.add_metric([serial, host or "", model or "", bus or "", str(horizon)], float(p))
        rank.add_metric([serial, host or "", model or ""], float(r))
        as_of = day
    xids = GaugeMetricFamily(
        "fleetfault_gpu_xid_events",
        f"Xid/SXid events linked to the GPU, over the last {XID_WINDOW_DAYS} days of records (window=7d) "
        "and over all records (window=all)",
        labels=["serial", "host", "model", "kind", "xid", "window"],
    )
    counts = wh.engine.rows(
        f"""
        WITH last AS (SELECT max(ts) AS t FROM xid_events)
        SELECT e.serial, coalesce(i.host, any_value(e.host)), coalesce(i.model, ''), e.kind, e.xid,
               count(*) AS n_all,
               count(*) FILTER (WHERE e.ts > (SELECT t FROM last) - INTERVAL {XID_WINDOW_DAYS} DAY) AS n_recent
        FROM xid_events e LEFT JOIN inventory i USING (serial)
        WHERE e.serial IS NOT NULL
        GROUP BY e.serial, i.host, i.model, e.kind, e.xid
        ORDER BY e.serial, e.kind, e.xid
        """,
        step="prometheus: xid counts",
    )
    for serial, host, model, kind, xid, n_all, n_recent in counts:
        labels = [serial, host or "", model or "", kind, str(xid)]
        xids.add_metric([*labels, f"{XID_WINDOW_DAYS}d"], float(n_recent))
        xids.add_metric([*labels, "all"], float(n_all))
    meta = GaugeMetricFamily("fleetfault_predictions_as_of_timestamp_seconds",
                             "Unix time of the last day of data the predictions use")
    if as_of is not None:
        meta.add_metric([], datetime(as_of.year, as_of.month, as_of.day, tzinfo=timezone.utc).timestamp())
    written = GaugeMetricFamily("fleetfault_export_timestamp_seconds", "Unix time this file was written")
    written.add_metric([], datetime.now(timezone.utc).timestamp())
    return [risk, rank, xids, meta, written, *track_families(wh)]


def track_families(wh: Warehouse) -> list[GaugeMetricFamily]:
    """The list's track record per month (caught, missed, false alarms, median lead) and which
    ranker published the latest list; empty families before the predict stage ran."""
    fam = {k: GaugeMetricFamily(f"fleetfault_predict_{k}", doc, labels=["month", "source"]) for k, doc in (
        ("failures_caught", "GPU replacements flagged in the day's top list on one of the horizon's days before them"),
        ("failures_missed", "GPU replacements not flagged in time"),
        ("false_alarms", "Flags on GPUs not replaced within the horizon (once per GPU per horizon)"),
        ("median_lead_days", "Median days from the first flag to the replacement, caught failures"))}
    if wh.table_exists("predict_track"):
        for month, source, caught, missed, false, lead in wh.engine.rows(
                "SELECT month, source, caught, missed, false_alarms, median_lead_days FROM predict_track ORDER BY month",
                step="prometheus: track record"):
            for k, v in (("failures_caught", caught), ("failures_missed", missed), ("false_alarms", false),
                         ("median_lead_days", lead)):
                if v is not None:
                    fam[k].add_metric([month, source], float(v))
    ranker = GaugeMetricFamily("fleetfault_predict_ranker_info",
                               "1 for what ranked the latest list: a promoted model's version, else 'evidence' "
                               "(fleet-calibrated) or 'evidence-prior' (published prior AFR), with the last "
                               "training's reason", labels=["ranker", "reason"])
    row = wh.engine.rows("SELECT model_version FROM predictions WHERE as_of = (SELECT max(as_of) FROM predictions) LIMIT 1",
                         step="prometheus: ranker")
    if row:
        reason = wh.engine.rows("SELECT reason FROM model_runs ORDER BY trained_at DESC LIMIT 1", step="prometheus: reason")
        ranker.add_metric([row[0][0] or "", reason[0][0] if reason else "no model trained yet"], 1.0)
    return [*fam.values(), ranker]


def exposition(families: list[GaugeMetricFamily]) -> str:
    """Metric families in the text exposition format (prometheus_client escapes the labels)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(families))
    return generate_latest(registry).decode("utf-8")


def render(wh: Warehouse) -> str:
    """The text exposition format of :func:`metric_families`."""
    return exposition(metric_families(wh))


def write_textfile(wh: Warehouse, path: str | Path) -> Path:
    """Write the metrics atomically to ``path`` (conventionally ``*.prom``)."""
    return write_atomic(path, render(wh))
