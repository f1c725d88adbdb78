"""Derive ``xid_events``: each Xid/SXid event once, classified and linked to its GPU.

Reads: ``xid_raw``, ``gpu_map`` and ``kernel_segments`` (per file, from the xid stage,
:mod:`pipeline.ingest.kernel`), ``gpu_days``
(telemetry: host + pci_bus_id on a day), ``inventory`` and the Xid catalog.
Writes: ``xid_events`` (replaced on every run: it is a pure function of its inputs).
``pipeline.run`` calls :func:`derive` right after the xid stage.

Hosts match across tables case-insensitively and with or without a trailing domain.
The same event is seen in several files when a host keeps dmesg and syslog, or when rotated
files overlap. Lines are the same event when host, kind, PCI id, code and message agree and
so does the time: the kernel uptime to the millisecond where the line carried one, else the
wall clock to the second; a line with only a wall clock also joins an uptime-keyed event
within 2 s. Within one file two lines are never one event (a burst of identical Xids is
kept), except the codeless "fallen off the bus" message, which joins an Xid 79 of the same
GPU within a minute. Linking order: the driver's own PCI -> serial map (same boot, else the
latest before the event), telemetry (host + pci_bus_id that UTC day), then the inventory
(the slot telemetry gives that PCI id, the GPU installed there at the time).
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from pipeline.engine import DuckDBEngine
from pipeline.engine.dialect import Dialect
from pipeline.ingest.kernel.boots import date_events
from pipeline.ingest.kernel.catalog import load_catalog
from pipeline.vocab.hosts import host_key_sql

#: The warehouse tables :func:`derive_xid_events` reads (what the Spark engine is handed).
INPUTS = ("xid_raw", "kernel_segments", "gpu_map", "gpu_days", "inventory")


def _wall_first(d: Dialect) -> str:
    """The sort key of a line for the event's time: its own clock first, then boot time +
    uptime; among equals the first file and line."""
    return d.array("CASE ts_source WHEN 'wall' THEN 0 WHEN 'boot' THEN 1 ELSE 2 END", "file_id", "line_no")


def dedupe_sql(raw: str, d: Dialect) -> str:
    """One row per event from the ``xid_raw``-shaped table ``raw``: event_id, the
    representative line and ``copies``; in the SQL of dialect ``d`` (DuckDB or Spark)."""
    first = "file_id * 1e9 + line_no"
    return f"""
WITH r AS (
    SELECT *,
        CASE WHEN uptime_s IS NOT NULL THEN 'u' || CAST(round(uptime_s * 1000) AS BIGINT)
             WHEN ts IS NOT NULL THEN 't' || CAST({d.epoch_seconds("date_trunc('second', ts)")} AS BIGINT)
             ELSE 'l' || file_id || ':' || line_no END AS tkey
    FROM {raw}
), k AS (
    SELECT *, row_number() OVER (
        PARTITION BY file_id, host, kind, pci_bus_id, xid, message, tkey ORDER BY line_no) AS occ
    FROM r
), keyed AS (
    SELECT *, md5(concat_ws('|', host, kind, coalesce(pci_bus_id, '-'), xid, coalesce(message, ''), tkey, occ)) AS eid
    FROM k
), ts_only AS (  -- a line with a wall clock only joins an uptime-keyed event within 2 s
    SELECT a.file_id, a.line_no, b.eid AS target,
        row_number() OVER (PARTITION BY a.file_id, a.line_no
                           ORDER BY abs({d.seconds_between('b.ts', 'a.ts')}), b.eid) AS rn
    FROM keyed a JOIN keyed b
      ON a.uptime_s IS NULL AND a.ts IS NOT NULL AND b.uptime_s IS NOT NULL AND b.ts IS NOT NULL
     AND a.file_id <> b.file_id AND a.host = b.host AND a.kind = b.kind AND a.xid = b.xid
     AND a.pci_bus_id IS NOT DISTINCT FROM b.pci_bus_id AND a.message IS NOT DISTINCT FROM b.message
     AND b.ts BETWEEN a.ts - INTERVAL 2 SECOND AND a.ts + INTERVAL 2 SECOND
), ids AS (
    SELECT keyed.*, coalesce(t.target, keyed.eid) AS event_id
    FROM keyed LEFT JOIN ts_only t ON t.rn = 1 AND t.file_id = keyed.file_id AND t.line_no = keyed.line_no
), fell AS (  -- the codeless fallen-off message next to an Xid 79 of the same GPU is that event
    -- (as is a second codeless form of it: the one-line and the three-line message)
    SELECT DISTINCT f.event_id
    FROM ids f JOIN ids x
      ON f.shape = 'fallen_off_bus' AND x.kind = 'Xid' AND x.xid = 79 AND x.event_id <> f.event_id
     AND (x.shape = 'line' OR (x.shape = 'fallen_off_bus' AND (x.file_id < f.file_id
          OR (x.file_id = f.file_id AND x.line_no < f.line_no))))
     AND f.host = x.host AND f.pci_bus_id = x.pci_bus_id
     AND ((f.ts IS NOT NULL AND x.ts IS NOT NULL AND abs({d.seconds_between('x.ts', 'f.ts')}) <= 60)
       OR (f.file_id = x.file_id AND f.boot_seg = x.boot_seg AND abs(f.uptime_s - x.uptime_s) <= 60))
)
SELECT event_id,
    -- the line's own clock first (_wall_first): two logs can disagree on a year-less syslog
    -- stamp's year, and the pick must not vary by run
    {d.arg_min('ts', _wall_first(d))} AS ts,
    {d.arg_min('ts_quality', _wall_first(d))} AS ts_quality,
    {d.arg_min('ts_error_s', _wall_first(d))} AS ts_error_s,
    max(uptime_s) AS uptime_s,
    {d.arg_min('host', first)} AS host,
    {d.arg_min('pci_bus_id', first)} AS pci_bus_id,
    {d.arg_min('kind', first)} AS kind,
    {d.arg_min('xid', first)} AS xid,
    max(pid) AS pid, max(process) AS process,
    {d.arg_min('message', first)} AS message,
    {d.arg_min('source_file', first)} AS source_file,
    min({first}) AS first_seen,
    {d.arg_min('line_no', first)} AS line_no,
    {d.arg_min('file_id', first)} AS file_id,
    {d.arg_min('boot_seg', first)} AS boot_seg,
    max(gpu_instance) AS gpu_instance, bool_or(fatal) AS fatal, max(subcode) AS subcode,
    max(recovery_action) AS recovery_action,
    CAST(count(*) AS INTEGER) AS copies
FROM ids
WHERE event_id NOT IN (SELECT event_id FROM fell)
GROUP BY event_id
"""


def link_sql(d: Dialect) -> str:
    """``xid_events``' rows from the de-duplicated events ``_xid_dedup``, the dated driver
    map ``_gpu_map_dated``, ``gpu_days``, ``inventory`` and the catalog ``_xid_catalog``.
    Where several rows tie (two serials telemetry saw at a host's PCI id on a day, two
    slots equally often), the least is taken, so that both engines pick the same one."""
    return f"""
WITH e AS (SELECT * FROM _xid_dedup),
bm AS (
    SELECT e.event_id, m.serial, m.uuid, row_number() OVER (
        PARTITION BY e.event_id
        ORDER BY (m.file_id = e.file_id AND m.boot_seg IS NOT DISTINCT FROM e.boot_seg) DESC,
                 CASE WHEN e.ts IS NOT NULL AND m.ts IS NOT NULL THEN abs({d.seconds_between('m.ts', 'e.ts')}) END NULLS LAST,
                 m.file_id DESC, m.line_no DESC) AS rn
    FROM e JOIN _gpu_map_dated m ON {host_key_sql('m.host')} = {host_key_sql('e.host')} AND m.pci_bus_id = e.pci_bus_id
     AND (m.serial IS NOT NULL OR m.uuid IS NOT NULL)
     AND ((m.file_id = e.file_id AND m.boot_seg IS NOT DISTINCT FROM e.boot_seg)
       OR (e.ts IS NOT NULL AND m.ts IS NOT NULL AND m.ts <= e.ts + INTERVAL 10 MINUTE))
),
by_uuid AS (SELECT uuid, min(serial) AS serial FROM gpu_days
            WHERE uuid IS NOT NULL AND serial IS NOT NULL GROUP BY uuid),
tel AS (
    SELECT e.event_id, min(g.serial) AS serial, {d.arg_min('g.uuid', 'g.serial')} AS uuid
    FROM e JOIN gpu_days g ON {host_key_sql('g.host')} = {host_key_sql('e.host')} AND g.pci_bus_id = e.pci_bus_id AND g.day = CAST(e.ts AS DATE)
    WHERE g.serial IS NOT NULL GROUP BY e.event_id
),
slot_days AS (SELECT host, pci_bus_id, gpu_index, count(*) AS n
              FROM (SELECT {host_key_sql('host')} AS host, pci_bus_id, gpu_index FROM gpu_days
                    WHERE gpu_index IS NOT NULL AND pci_bus_id IS NOT NULL) AS g
              GROUP BY host, pci_bus_id, gpu_index),
slot AS (  -- the index telemetry gives the PCI id most often (the mode; the least on a tie)
    SELECT host, pci_bus_id, gpu_index FROM (
        SELECT *, row_number() OVER (PARTITION BY host, pci_bus_id ORDER BY n DESC, gpu_index) AS rn
        FROM slot_days) AS ranked
    WHERE rn = 1
),
inv AS (
    SELECT e.event_id, i.serial, row_number() OVER (
        PARTITION BY e.event_id ORDER BY i.installed_at DESC NULLS LAST, i.serial) AS rn
    FROM e JOIN slot s ON s.host = {host_key_sql('e.host')} AND s.pci_bus_id = e.pci_bus_id
           JOIN inventory i ON {host_key_sql('i.host')} = {host_key_sql('e.host')} AND i.slot = s.gpu_index
    WHERE (e.ts IS NULL AND i.removed_at IS NULL)
       OR (e.ts IS NOT NULL AND (i.installed_at IS NULL OR i.installed_at <= e.ts)
           AND (i.removed_at IS NULL OR i.removed_at > e.ts))
),
linked AS (
    SELECT e.*,
        upper(trim(coalesce(bm.serial, bu.serial, tel.serial, inv.serial))) AS serial,
        coalesce(bm.uuid, tel.uuid) AS uuid,
        CASE WHEN coalesce(bm.serial, bu.serial) IS NOT NULL THEN 'boot_map'
             WHEN tel.serial IS NOT NULL THEN 'telemetry'
             WHEN inv.serial IS NOT NULL THEN 'inventory' END AS link_method
    FROM e
    LEFT JOIN bm ON bm.event_id = e.event_id AND bm.rn = 1
    LEFT JOIN by_uuid bu ON bu.uuid = bm.uuid AND bm.serial IS NULL
    LEFT JOIN tel ON tel.event_id = e.event_id
    LEFT JOIN inv ON inv.event_id = e.event_id AND inv.rn = 1
)
SELECT l.event_id, l.ts, l.ts_quality, l.ts_error_s, l.uptime_s, l.host, l.pci_bus_id, l.kind, l.xid, l.pid, l.process, l.message,
    l.source_file, l.line_no, nullif(l.serial, '') AS serial, l.uuid, l.link_method,
    coalesce(c.severity, 'unknown') AS severity, c.symptom_code, c.hardware,
    l.gpu_instance, l.fatal, l.subcode, l.recovery_action, c.mnemonic, c.action, l.copies
FROM linked l
LEFT JOIN _xid_catalog c ON c.kind = l.kind AND l.xid BETWEEN c.code_lo AND c.code_hi
"""


def dedupe_frames(raw: pl.DataFrame) -> pl.DataFrame:
    """De-duplicate parsed events held in a frame (``parse xid``, no warehouse needed).

    ``raw`` has the ``xid_raw`` columns. Returns one row per event, ordered by host and time.
    """
    engine = DuckDBEngine()  # in memory
    try:
        engine.register("xid_raw_frame", raw)
        return engine.pl(dedupe_sql("xid_raw_frame", engine.dialect) + " ORDER BY host, ts NULLS LAST, first_seen",
                         step="parse xid: de-duplicate events")
    finally:
        engine.con.close()


def derive_xid_events(wh, boot_times: dict[str, datetime] | None = None, engine=None) -> int:
    """Rebuild ``xid_events`` from ``xid_raw``, ``kernel_segments`` (each host's boots:
    uptime-only lines dated from any file, :mod:`pipeline.ingest.kernel.boots`), ``gpu_map``,
    ``gpu_days`` and ``inventory``, its SQL run on ``engine`` (default: the warehouse's; the
    dating is polars on this machine either way). ``boot_times``: host key -> configured boot
    (naive UTC).

    Returns the number of events.
    """
    engine = engine or wh.engine
    cat = load_catalog().drop("causes")
    segs = engine.pl("SELECT * FROM kernel_segments", step="xid: boots in files")
    dated = date_events(engine.pl("SELECT * FROM xid_raw", step="xid: raw events"), segs, boot_times)
    # the driver's map lines of an uptime-only log are dated alike, to link later files' events
    maps = date_events(engine.pl("SELECT * FROM gpu_map", step="xid: gpu map"), segs, boot_times)
    frames = {"_xid_catalog": cat, "_xid_dated": dated, "_gpu_map_dated": maps}
    for name, frame in frames.items():
        engine.register(name, frame)
    try:
        engine.create_table("_xid_dedup", dedupe_sql("_xid_dated", engine.dialect), step="xid: de-duplicate events")
        try:
            return wh.rebuild("xid_events", link_sql(engine.dialect), engine=engine, step="xid: link events to GPUs")
        finally:
            engine.execute(engine.dialect.drop_temp("_xid_dedup"), step="xid: drop temp")
    finally:
        for name in frames:
            engine.unregister(name)


def derive(ctx) -> int:
    """After the xid stage (``pipeline.run`` calls it): ``xid_events`` from what the stage
    loaded, with the configured boot times (``kernel.boot_times``, read in each host's zone),
    on the configured engine (:meth:`pipeline.run.RunContext.engine_for`). Returns the
    number of events."""
    from pipeline.ingest.kernel.stage import configured_boots

    return derive_xid_events(ctx.wh, configured_boots(ctx), ctx.engine_for(INPUTS))
