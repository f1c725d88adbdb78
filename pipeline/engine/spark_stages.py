"""The telemetry and kernel-log stages of ``fleetfault run --engine spark``: the Spark ingest.

Reads: ``DATA/telemetry/<host>/*``, ``DATA/kernel/<host>/*``, the warehouse's registry
(``files``), ``inventory`` (host zones) and ``smi_headers``. Writes: the Parquet table store
(:class:`~pipeline.engine.parquet_tables.ParquetTableStore`, ``[engine.spark] tables``) and
then, for every file the store committed, the same rows, quarantine lines and registry row
(under the same file id) into the warehouse, where every later stage reads them.

Why one registry: a warehouse may be run with ``--engine spark`` one night and ``duckdb``
the next. The Spark ingest decides what is new, changed or unchanged from the warehouse's
``files`` table and numbers files from its sequence, exactly as the DuckDB stages do, so
whichever engine loaded a file, the other finds it unchanged and loads nothing twice. The
store keeps its own registry version as the commit point of its Parquet files (a run killed
before it leaves no rows seen); the warehouse takes the committed files in one transaction
(:meth:`~pipeline.warehouse.Warehouse.adopt`), DuckDB reading the Parquet files. A run
killed between the two finds the files still new in the warehouse and loads them again,
the store's copy replaced by path (:meth:`ParquetTableStore.commit`).

The header plan of headerless nvidia-smi files (``smi_headers.header_from``,
``reloaded_because``, settled across runs) is the single-machine stage's own code
(:func:`pipeline.ingest.telemetry.stage._settle_headers`) over the warehouse's registry; the
files it reads again go through the Spark ingest with the start it picked.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.engine.ingest_parsers import TABLES, input_files
from pipeline.vocab.sql import literals

log = logging.getLogger(__name__)


def _ingest(ctx, stage: str, *, reload: Collection[str] | None = None, starts: dict | None = None):
    """The Spark ingest of ``stage`` decided by the warehouse's registry, its committed files
    then copied into the warehouse."""
    from pipeline.engine.spark_ingest import ingest
    from pipeline.ingest.kernel.stage import host_zones

    spark, store = ctx.spark_store()
    wh = ctx.wh

    def last_fields(file_ids: list[int]) -> dict[int, str | None]:
        return dict(wh.engine.rows(f"SELECT file_id, last_fields FROM smi_headers WHERE file_id IN ({literals(file_ids)})",
                                   step="smi: last headers of unchanged files"))

    registry = wh.registry(stage)
    _retire_stale(store, stage, registry)
    result = ingest(spark, store, stage, ctx.data_dir, ctx.cfg, zones=host_zones(ctx), run_id=wh.run_id,
                    key_of=ctx.file_key, registry=registry, new_ids=wh.new_file_ids,
                    last_fields=last_fields, reload=reload, starts=starts)
    if result.committed:
        registry = store.registry()
        files = registry.filter(pc.is_in(registry.column("file_id"), pa.array(result.committed, pa.int64())))
        sources = {t: store.parquet_files(t, result.committed) for t in (*TABLES[stage], "quarantine")}
        wh.adopt(stage, files, sources, retired=result.retired)
    return result


def _retire_stale(store, stage: str, registry: pa.Table) -> None:
    """Retire the store's files of ``stage`` that the warehouse's registry no longer lists
    (replaced by a night on DuckDB, or committed by a run killed before the warehouse took
    them): the store then holds no version of a file but the warehouse's."""
    from pipeline.engine.tables import arrow_schema

    mine = store.registry()
    listed = set(registry.column("file_id").to_pylist())
    stale = [i for i, st in zip(mine.column("file_id").to_pylist(), mine.column("stage").to_pylist())
             if st == stage and i not in listed]
    if stale:
        log.info("%s: retiring %d file(s) of the store the warehouse's registry no longer lists", stage, len(stale))
        store.commit(stage, arrow_schema("files").empty_table(), forget=stale)


def xid(ctx) -> None:
    """Stage ``xid`` on Spark: new and changed kernel logs into ``xid_raw``, ``gpu_map``,
    ``kernel_segments`` (store and warehouse)."""
    if not input_files("xid", ctx.data_dir):
        ctx.note("xid", f"no kernel logs under {ctx.data_dir / 'kernel'}")
        return
    ctx.tally("xid", _ingest(ctx, "xid").by_key.values())


def smi(ctx) -> None:
    """Stage ``smi`` on Spark: new and changed telemetry files into ``smi_hourly`` and
    ``smi_headers``, then the header plan settled as the single-machine stage does."""
    from pipeline.ingest.telemetry.header_plan import cells_text
    from pipeline.ingest.telemetry.stage import STAGE, _settle_headers, configured_fields

    root = ctx.data_dir / "telemetry"
    if not root.is_dir():
        ctx.note(STAGE, f"no {root}: no telemetry")
        return
    plan: list[tuple[Path, str, Path | None]] = []  # (file, host, previous file of the host), as the stage's
    for host, paths in input_files(STAGE, ctx.data_dir).items():
        plan += [(path, host, paths[i - 1] if i else None) for i, path in enumerate(paths)]
    key_of = functools.cache(ctx.file_key)
    first = _ingest(ctx, STAGE)
    results = {path: first.by_key[key_of(path)] for path, _, _ in plan}
    planned: dict = {}  # path -> the field list the header plan picks (filled by _settle_headers)

    def again(entries, reload: bool = True):
        paths = {key_of(path): path for path, _, _ in entries}
        starts = {key: cells_text(planned[path]) for key, path in paths.items() if path in planned}
        out = _ingest(ctx, STAGE, reload=set(paths), starts=starts)
        return {paths[key]: res for key, res in out.by_key.items()}

    before = _headers(ctx.wh)
    results.update(_settle_headers(ctx, plan, planned, again, results, key_of,
                                   functools.cache(functools.partial(configured_fields, ctx.cfg))))
    _store_settled_headers(ctx, before)
    ctx.tally(STAGE, results.values())


def _headers(wh) -> pa.Table:
    return wh.engine.arrow("SELECT * FROM smi_headers ORDER BY file_id", step="smi: headers")


def _store_settled_headers(ctx, before: pa.Table) -> None:
    """The ``smi_headers`` rows the header plan updated in the warehouse, written to the
    store's partitions of those files too (so that both hold the same rows)."""
    after = _headers(ctx.wh)
    old = {tuple(r.values()) for r in before.to_pylist()}
    changed = [r for r in after.to_pylist() if tuple(r.values()) not in old]
    if not changed:
        return
    _, store = ctx.spark_store()
    committed = set(store.registry().column("file_id").to_pylist())
    rows = pa.Table.from_pylist([r for r in changed if r["file_id"] in committed], schema=after.schema)
    if rows.num_rows:
        from pipeline.engine.tables import conform

        store.rewrite_files("smi_headers", conform("smi_headers", rows), rows.column("file_id").to_pylist())
