"""Ingest at scale: new and changed files parsed as Spark tasks, host by host, into Parquet.

Reads: ``DATA/kernel/<host>/*`` (stage ``xid``) or ``DATA/telemetry/<host>/*`` (``smi``), the
config (zones, boot times, field lists) and the table store's registry. Writes, through a
:class:`~pipeline.engine.tables.TableStore`: the stage's tables (``xid_raw``, ``gpu_map``,
``kernel_segments``; ``smi_hourly``, ``smi_headers``), the ``quarantine`` and the registry.

Why: a fleet of 10,000 GPUs writes a million small files a year; one machine reads them one
after the other. Here the files are hashed on the executors, those the registry holds
unchanged are skipped, and the rest are spread by host (a host's files stay together and in
order: a headerless telemetry file continues its predecessor's header) over ``mapInArrow``
tasks that run the very parsers of the single-machine job (:mod:`.ingest_parsers`) and write
their rows and quarantine lines themselves as Parquet, by table and UTC day
(:meth:`TableStore.writer`), returning only the registry rows and the names of what they
wrote: one Spark job parses and writes a whole ingest. The driver's commit publishes the data
and then the registry: a run killed halfway leaves every table as it was, and its rerun writes
the same rows.
Input paths must be readable by every executor (a local folder in local mode, a shared
mount on a cluster); the tables may live at any URL Spark writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.engine.base import _to_arrow
from pipeline.engine.ingest_parsers import HostFile, HostSettings, configured_fields, input_files, parse_host
from pipeline.engine.tables import TableStore, arrow_schema, conform
from pipeline.vocab.hosts import host_key
from pipeline.warehouse import FileResult, sha256_file

log = logging.getLogger(__name__)

#: A task's buffered rows are written once they exceed this many bytes (its memory bound).
FLUSH_BYTES = 128 << 20
_TASK = pa.schema([("host", pa.string()), ("path", pa.string()), ("key", pa.string()), ("file_id", pa.int64()),
                   ("order", pa.int64()), ("sha256", pa.string()), ("size", pa.int64())])


@dataclass
class IngestResult:
    """A stage's counts, as the single-machine ingest reports them."""

    files: int = 0
    unchanged: int = 0
    rows_read: int = 0
    rows_loaded: int = 0
    rows_quarantined: int = 0
    #: registry key -> what became of the file ("loaded", "reloaded", "unchanged"; the warehouse's FileResult)
    by_key: dict = field(default_factory=dict)
    #: the file ids committed by this ingest, and those it retired (files changed or loaded again)
    committed: list[int] = field(default_factory=list)
    retired: list[int] = field(default_factory=list)


def _task_output() -> pa.Schema:
    """What a parse task returns: registry rows (the ``files`` columns), and rows naming a
    file it wrote (``written``; the rest null)."""
    return pa.schema([f.with_nullable(True) for f in arrow_schema("files")]).append(pa.field("written", pa.string()))


def _spark_schema(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def _digest(path: str) -> tuple[str, int]:
    """A file's sha256 and size (the registry's test for unchanged), hashed as the warehouse
    hashes: the bytes there when its size was taken."""
    size = Path(path).stat().st_size
    return sha256_file(Path(path), limit=size), size


def _hash_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: each file's sha256 and size."""
    for batch in batches:
        paths = batch.column("path").to_pylist()
        digests, sizes = zip(*map(_digest, paths)) if paths else ((), ())
        yield pa.RecordBatch.from_pydict({"path": paths, "sha256": list(digests), "size": list(sizes)},
                                         schema=pa.schema([("path", pa.string()), ("sha256", pa.string()),
                                                           ("size", pa.int64())]))


def _parse_task(stage: str, settings: dict[str, HostSettings], run_id: int | None, now: datetime, write):
    """The ``mapInArrow`` function: every file of the partition's hosts, in order, its rows
    written with ``write`` (the store's writer) a buffer at a time."""
    from pipeline.warehouse import _reconciled

    shape = _task_output()

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = pa.Table.from_batches(list(batches), schema=_TASK).to_pylist()
        by_host: dict[str, list[dict]] = {}
        for row in sorted(rows, key=lambda r: (r["host"], r["order"])):
            by_host.setdefault(row["host"], []).append(row)
        buffers: dict[str, list[pa.Table]] = {}
        held = 0

        def flush() -> Iterator[pa.RecordBatch]:
            written = [path for table, parts in buffers.items() for path in write(table, pa.concat_tables(parts))]
            buffers.clear()
            if written:
                yield pa.RecordBatch.from_arrays(
                    [pa.array(written, pa.string()) if f.name == "written" else pa.nulls(len(written), f.type)
                     for f in shape], schema=shape)

        for host, items in by_host.items():
            files = [HostFile(r["path"], r["key"], r["file_id"]) for r in items]
            meta = {r["file_id"]: r for r in items}
            registry = []
            for f, loaded in parse_host(stage, host, files, settings.get(host, HostSettings())):
                n_rej = _reconciled(stage, f.key, loaded)
                pieces = {table: _to_arrow(data) for table, data in loaded.tables.items()}
                pieces["quarantine"] = pa.table({
                    "run_id": [run_id] * n_rej, "file_id": [f.file_id] * n_rej, "stage": [stage] * n_rej,
                    "source_file": [f.key] * n_rej, "line_no": [r.line_no for r in loaded.rejects],
                    "reason": [r.reason for r in loaded.rejects], "raw": [r.raw[:4000] for r in loaded.rejects],
                    "detail": [r.detail[:1000] for r in loaded.rejects], "quarantined_at": [now] * n_rej,
                })
                for table, data in pieces.items():
                    if data.num_rows:
                        data = conform(table, data)
                        buffers.setdefault(table, []).append(data)
                        held += data.nbytes
                m = meta[f.file_id]
                sha256, size = (m["sha256"], m["size"]) if m["sha256"] is not None else _digest(m["path"])
                registry.append({
                    "file_id": f.file_id, "stage": stage, "path": f.key, "size": size, "sha256": sha256,
                    "rows_read": loaded.rows_read, "rows_loaded": loaded.rows_loaded, "rows_quarantined": n_rej,
                    "rows_skipped": loaded.rows_skipped, "loaded_at": now, "run_id": run_id, "written": None,
                })
            yield pa.RecordBatch.from_pylist(registry, schema=shape)
            if held > FLUSH_BYTES:
                yield from flush()
                held = 0
        yield from flush()

    return run


def _parse_job(spark, todo: list[dict], parallel: int, task) -> pa.Table:
    """One Spark job: the files spread by host over ``parallel`` tasks running ``task``, which
    parse and write; what comes back is small (a row per file and per file written)."""
    tasks = spark.createDataFrame(pa.Table.from_pylist(todo, schema=_TASK))
    return (tasks.repartition(parallel, "host").sortWithinPartitions("host", "order")
            .mapInArrow(task, _spark_schema(_task_output())).toArrow())


def _host_settings(stage: str, cfg, hosts: list[str], zones: dict[str, str], carried: dict[str, str | None],
                   starts: dict[str, str | None]):
    out = {}
    for host in hosts:
        tz = zones.get(host_key(host), cfg.time.default_tz)
        if stage == "xid":
            out[host] = HostSettings(tz=tz, boot_time=cfg.kernel.boot_times.get(host))
        else:
            configured = configured_fields(cfg, host)
            start = carried[host] if carried.get(host) else configured
            out[host] = HostSettings(tz=tz, fields=start, configured=configured, starts=starts)
    return out


def _store_last_fields(store: TableStore) -> Callable[[list[int]], dict[int, str | None]]:
    """file id -> the header cells the file ended with, from the store's ``smi_headers``."""
    def last_fields(file_ids: list[int]) -> dict[int, str | None]:
        from pyspark.sql import functions as F

        heads = store.read("smi_headers").where(F.col("file_id").isin(file_ids)).select("file_id", "last_fields")
        return {r["file_id"]: r["last_fields"] for r in heads.collect()}

    return last_fields


def ingest(spark, store: TableStore, stage: str, data_dir: Path, cfg, *, zones: dict[str, str] | None = None,
           run_id: int | None = None, key_of=None, registry: pa.Table | None = None,
           new_ids: Callable[[int], list[int]] | None = None,
           last_fields: Callable[[list[int]], dict[int, str | None]] | None = None,
           reload: Collection[str] | None = None, starts: dict[str, str | None] | None = None) -> IngestResult:
    """Load the stage's new and changed files into ``store``; unchanged ones are skipped.

    Parameters
    ----------
    spark : SparkSession
    store : TableStore
        Where the tables and the registry live.
    stage : {"xid", "smi"}
    data_dir : Path
        The input layout (``kernel/<host>/``, ``telemetry/<host>/``).
    cfg : pipeline.config.Config
    zones : dict, optional
        host key -> time zone (from the inventory's sites); default ``time.default_tz``.
    key_of : callable, optional
        path -> registry key; default the path relative to ``data_dir``.
    registry : pyarrow.Table, optional
        The registry whose rows say which files are loaded and unchanged (the ``files``
        columns); default the store's. ``fleetfault run`` passes the warehouse's: one
        registry whichever engine loaded a file (:mod:`pipeline.engine.spark_stages`).
    new_ids : callable, optional
        n -> n unused file ids; default after the store's largest.
    last_fields : callable, optional
        file ids -> the header cells each ended with (``smi_headers.last_fields``) for the
        unchanged file a host's first file to parse continues; default the store's.
    reload : collection of str, optional
        Only these registry keys, loaded again even when unchanged (the header plan's
        reloads); default every new or changed file.
    starts : dict, optional
        registry key -> the header cells the file starts with (None: none), instead of the
        ones its predecessor ended with (the header plan's pick for a headerless file).
    """
    data_dir = Path(data_dir)
    key_of = key_of or (lambda p: str(Path(p).resolve().relative_to(data_dir.resolve())))
    plan = input_files(stage, data_dir)
    rows = [{"host": host, "path": str(p.resolve()), "key": key_of(p), "file_id": 0, "order": i, "sha256": None,
             "size": None} for host, paths in plan.items() for i, p in enumerate(paths)]
    if reload is not None:  # only these are read (and hashed) again
        rows = [r for r in rows if r["key"] in reload]
    result = IngestResult(files=len(rows))
    if not rows:
        return result
    parallel = max(1, min(len(plan), spark.sparkContext.defaultParallelism * 4))
    reg = (store.registry() if registry is None else registry).to_pylist()
    known = {r["path"]: r for r in reg if r["stage"] == stage}
    # Only a file the registry knows needs its hash before the parse (unchanged: skipped); a
    # new one is hashed by the task that parses it, so a first night (a backfill) is one job.
    listing = [{"path": r["path"]} for r in rows if r["key"] in known]
    digest = {}
    if listing:
        hashed = (spark.createDataFrame(pa.Table.from_pylist(listing, schema=pa.schema([("path", pa.string())])))
                  .repartition(parallel).mapInArrow(_hash_files, "path STRING, sha256 STRING, size BIGINT")
                  .toArrow().to_pylist())
        digest = {h["path"]: (h["sha256"], h["size"]) for h in hashed}
    todo, forget = [], []
    for row in rows:
        row["sha256"], row["size"] = digest.get(row["path"], (None, None))
        prev = known.get(row["key"])
        if reload is None and prev is not None and prev["sha256"] == row["sha256"]:
            result.unchanged += 1
            result.by_key[row["key"]] = FileResult(row["key"], "unchanged")
            continue
        if prev is not None:
            forget.append(prev["file_id"])
        todo.append(row)
    if not todo:
        return result
    ids = new_ids(len(todo)) if new_ids is not None else range(store.next_file_id(), store.next_file_id() + len(todo))
    for row, fid in zip(todo, ids):
        row["file_id"] = int(fid)
    previous = {}  # host -> file id of the unchanged file just before its first one to parse
    if stage == "smi":
        by_host: dict[str, list[dict]] = {}
        for r in rows:  # (in plan order: each host's files in rotation order)
            by_host.setdefault(r["host"], []).append(r)
        for host, host_rows in by_host.items():
            first = next((i for i, r in enumerate(host_rows) if r["file_id"]), None)
            if first and host_rows[first - 1]["key"] in known:
                previous[host] = known[host_rows[first - 1]["key"]]["file_id"]
    carried = {}
    if previous:
        last = (last_fields or _store_last_fields(store))(sorted(set(previous.values())))
        carried = {host: last.get(fid) for host, fid in previous.items()}
    settings = _host_settings(stage, cfg, list(plan), zones or {}, carried, starts or {})
    store.begin(stage, [r["file_id"] for r in todo])
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    out = _parse_job(spark, todo, parallel, _parse_task(stage, settings, run_id, now, store.writer()))
    written = out.filter(pc.is_valid(out.column("written"))).column("written").to_pylist()
    files = conform("files", out.filter(pc.is_valid(out.column("file_id"))))
    store.commit(stage, files, forget=forget, written=written)
    result.committed, result.retired = files.column("file_id").to_pylist(), forget
    for r in files.to_pylist():
        result.by_key[r["path"]] = FileResult(r["path"], "reloaded" if r["path"] in known else "loaded",
                                              r["rows_read"], r["rows_loaded"], r["rows_quarantined"])
    result.rows_read = sum(files.column("rows_read").to_pylist())
    result.rows_loaded = sum(files.column("rows_loaded").to_pylist())
    result.rows_quarantined = sum(files.column("rows_quarantined").to_pylist())
    log.info("%s on spark: %d files parsed, %d unchanged", stage, len(todo), result.unchanged)
    return result
