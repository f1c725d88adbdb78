"""Tables as Parquet under the warehouse folder, written by the ingest's tasks: the Spark table layer.

Layout (``ROOT`` is ``--warehouse``: a local folder or a URL Spark and pyarrow both read)::

    ROOT/tables/<table>/batch=<n>/day=<yyyy-mm-dd>/part-*.parquet   rows of one ingest, by UTC day
    ROOT/_registry/v<00000001>.parquet                               the file registry, one
                                                                     immutable version per commit
    ROOT/_txn/<stage>.json                                           what an open ingest writes

An ingest's rows are one batch folder per table (``n``: the smallest file id it loads), split
by UTC day: the number of Parquet files grows with the tasks and days of a night, not with
its input files (a partition per input file made every write, listing and read pay per file).
Every row keeps its ``file_id``. The parse tasks write their rows themselves
(:class:`BatchWriter`, pyarrow) under names no reader opens (``.part-*.staged``) and return
those names; the commit renames them to ``part-*.parquet``: one Spark job per ingest instead
of a Spark write (its own job and commit protocol) per table, and a failed task attempt's
files are never published. The registry version, which names each file's batch, is
written after the data, in one file (a rename on a local or HDFS folder; an object store
shows an object whole or not at all), and readers read only the batches it names and keep
only the rows of file ids it lists: a run killed before that commit leaves its rows unseen,
and the next ingest's :meth:`begin` deletes its batch. A changed file's old rows are hidden
by that same commit (its old file id leaves the registry) and then deleted from their batch's
Parquet files, each rewritten beside and renamed over (:meth:`_rewrite`).
One writer at a time, as with the DuckDB warehouse file.
Every table is plain Parquet: DuckDB, polars, pandas and any Spark read it (filter
``file_id`` by the latest registry version for the committed rows; after a clean commit
there are no others).
"""

from __future__ import annotations

import json
import logging
import posixpath
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.engine.tables import DAY_COLUMN, TableStore, arrow_schema, conform, spark_ddl

log = logging.getLogger(__name__)

#: Registry versions kept besides the latest (older ones are deleted at commit).
KEEP_VERSIONS = 3
#: The store's registry: the ``files`` columns and the batch each file's rows are in.
BATCH = pa.field("batch", pa.int64())
#: The name Hive (and Spark) give the partition of a null value.
NULL_DAY = "__HIVE_DEFAULT_PARTITION__"
STAGED = ".staged"


def _filesystem(root: str) -> tuple[pafs.FileSystem, str, str]:
    """(pyarrow filesystem, its path of ``root``, ``root`` as Spark addresses it)."""
    if "://" in str(root):
        fs, base = pafs.FileSystem.from_uri(str(root))
        return fs, base, str(root).rstrip("/")
    return pafs.LocalFileSystem(), posixpath.abspath(str(root)), posixpath.abspath(str(root))


def _by_day(rows: pa.Table, column: str | None) -> Iterator[tuple[str, pa.Table]]:
    """``rows`` split by the UTC day of ``column`` (its partition folder's value)."""
    if column is None:
        yield NULL_DAY, rows
        return
    days = pc.cast(pc.cast(rows.column(column), pa.date32()), pa.int32())
    keys = days.fill_null(np.iinfo(np.int32).min).to_numpy()
    order = np.argsort(keys, kind="stable")
    rows, keys = rows.take(order), keys[order]
    values, starts = np.unique(keys, return_index=True)
    for value, start, end in zip(values, starts, [*starts[1:], len(keys)]):
        name = NULL_DAY if value == np.iinfo(np.int32).min else str(np.datetime64(int(value), "D"))
        yield name, rows.slice(start, end - start)


@dataclass(frozen=True)
class BatchWriter:
    """What a task of the open ingest writes its rows with (picklable: it is shipped to the
    executors, which must reach ``root`` through pyarrow as the driver does).

    A call writes a declared table's rows as one Parquet file per UTC day into the batch's
    folders, under a name no reader opens, and returns those files' paths; only the ones
    :meth:`ParquetTableStore.commit` receives are published, so the files of a task attempt
    that failed (and was run again) are never read."""

    root: str
    batch: int

    def __call__(self, name: str, rows: pa.Table) -> list[str]:
        fs, base, _ = _filesystem(self.root)
        rows = conform(name, rows)
        written = []
        for day, part in _by_day(rows, DAY_COLUMN.get(name)) if rows.num_rows else ():
            folder = posixpath.join(base, "tables", name, f"batch={self.batch}", f"day={day}")
            fs.create_dir(folder, recursive=True)
            path = posixpath.join(folder, f".part-{uuid.uuid4().hex}{STAGED}")
            pq.write_table(part, path, filesystem=fs)
            written.append(path)
        return written


class ParquetTableStore(TableStore):
    """Parquet tables and a versioned Parquet file registry under ``root``."""

    def __init__(self, spark, root: str):
        self.spark = spark
        self.fs, self._base, self.root = _filesystem(root)
        self.fs.create_dir(self._fs_path("_registry"), recursive=True)
        self._batch: int | None = None  # the open ingest's batch (begin .. commit)

    # -- paths ---------------------------------------------------------------------------
    def _fs_path(self, *parts: str) -> str:
        """A path for pyarrow's filesystem."""
        return posixpath.join(self._base, *parts)

    def table_path(self, name: str) -> str:
        """A table's folder as Spark addresses it."""
        return f"{self.root}/tables/{name}"

    def _exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self._fs_path(*parts)).type != pafs.FileType.NotFound

    def _url(self, fs_path: str) -> str:
        """A pyarrow filesystem path as Spark and DuckDB address it (a URL under a URL root)."""
        return self.root + fs_path[len(self._base):] if "://" in self.root else fs_path

    def _parts(self, name: str, batch: int) -> list[str]:
        """The Parquet files of a table's batch (pyarrow paths)."""
        folder = self._fs_path("tables", name, f"batch={int(batch)}")
        if self.fs.get_file_info(folder).type != pafs.FileType.Directory:
            return []
        return sorted(i.path for i in self.fs.get_file_info(pafs.FileSelector(folder, recursive=True))
                      if i.type == pafs.FileType.File and i.path.endswith(".parquet")
                      and not posixpath.basename(i.path).startswith((".", "_")))

    # -- rows ----------------------------------------------------------------------------
    def read(self, name: str):
        from pyspark.sql import functions as F

        ddl = spark_ddl(name)
        columns = [f.name for f in arrow_schema(name)]
        registry = self._registry()
        batches = sorted(set(registry.column("batch").to_pylist()))
        paths = [f"{self.table_path(name)}/batch={b}" for b in batches if self._exists("tables", name, f"batch={b}")]
        if not paths:
            frame = self.spark.createDataFrame([], ddl)
        else:
            # Only the committed batches are listed: a killed run's batch is never opened.
            frame = (self.spark.read.schema(f"{ddl}, `batch` BIGINT, `day` DATE")
                     .option("basePath", self.table_path(name)).parquet(*paths))
            ids = self.spark.createDataFrame(registry.select(["file_id"]))
            frame = frame.join(F.broadcast(ids), "file_id", "left_semi")
        # Steps compare timestamps as the session's (UTC) TIMESTAMP, as on DuckDB.
        return frame.select([F.col(c).cast("timestamp").alias(c) if t == pa.timestamp("us") else F.col(c)
                             for c, t in zip(columns, arrow_schema(name).types)])

    def writer(self) -> BatchWriter:
        if self._batch is None:
            raise RuntimeError("rows written outside an ingest (call begin() first)")
        return BatchWriter(self.root, self._batch)

    def parquet_files(self, name: str, file_ids: Sequence[int]) -> list[str]:
        """The Parquet files holding these (committed) file ids' rows of a table, among
        other files' rows of their batches (hive-partitioned paths; select by ``file_id``),
        as URLs under a URL root."""
        wanted = {int(i) for i in file_ids}
        reg = self._registry()
        batches = {b for i, b in zip(reg.column("file_id").to_pylist(), reg.column("batch").to_pylist()) if i in wanted}
        return sorted(self._url(p) for b in batches for p in self._parts(name, b))

    def rewrite_files(self, name: str, rows: pa.Table, file_ids: Sequence[int]) -> None:
        """Replace a table's rows of these committed file ids with ``rows`` (Arrow, the
        table's columns): rows derived again from files already committed (the header plan's
        ``smi_headers`` columns). The Parquet file holding them is written beside and renamed
        over, so a reader sees a file's old rows or its new ones, never neither."""
        reg = self._registry()
        batch_of = dict(zip(reg.column("file_id").to_pylist(), reg.column("batch").to_pylist()))
        by_batch: dict[int, list[int]] = {}
        for i in file_ids:
            if int(i) in batch_of:
                by_batch.setdefault(batch_of[int(i)], []).append(int(i))
        for batch, mine in by_batch.items():
            self._rewrite(name, batch, mine, rows.filter(pc.is_in(rows.column("file_id"), pa.array(mine, pa.int64()))))

    def _drop_files(self, by_batch: dict[int, list[int]], tables: Sequence[str] | None = None) -> None:
        """Delete these file ids' rows (batch -> file ids) from every table (or ``tables``)."""
        if not by_batch or not self._exists("tables"):
            return
        for info in self.fs.get_file_info(pafs.FileSelector(self._fs_path("tables"))):
            if tables is None or posixpath.basename(info.path) in tables:
                for batch, ids in by_batch.items():
                    self._rewrite(posixpath.basename(info.path), batch, ids)

    def _rewrite(self, name: str, batch: int, ids: Sequence[int], rows: pa.Table | None = None) -> None:
        """Each Parquet file of a table's batch that holds rows of ``ids``: those rows removed
        (and replaced by the ``rows`` of the same file ids: a file id's rows are in one Parquet
        file, written by the one task that parsed it), written beside under a name readers
        skip and renamed over; a file left empty is deleted. ``rows`` of file ids no Parquet
        file held are written as a new file of the batch."""
        wanted = pa.array(sorted({int(i) for i in ids}), pa.int64())
        for path in self._parts(name, batch):
            held = pc.unique(pq.read_table(path, columns=["file_id"], filesystem=self.fs).column("file_id"))
            held = pc.filter(held, pc.is_in(held, wanted))
            if not len(held):
                continue
            old = pq.read_table(path, filesystem=self.fs)
            new = old.filter(pc.invert(pc.is_in(old.column("file_id"), wanted)))
            if rows is not None:
                mine = pc.is_in(rows.column("file_id"), held)
                new = pa.concat_tables([new, rows.filter(mine).select(new.column_names).cast(new.schema)])
                rows = rows.filter(pc.invert(mine))
            folder, base = posixpath.split(path)
            crc = posixpath.join(folder, f".{base}.crc")  # Hadoop's checksum of the old bytes
            if self.fs.get_file_info(crc).type == pafs.FileType.File:
                self.fs.delete_file(crc)
            if new.num_rows == 0:
                self.fs.delete_file(path)
                continue
            tmp = posixpath.join(folder, f".{uuid.uuid4().hex}.tmp")
            pq.write_table(new, tmp, filesystem=self.fs)
            self.fs.move(tmp, path)  # (a rename: the old bytes or the new, whole)
        if rows is not None and rows.num_rows:
            self._publish(BatchWriter(self.root, batch)(name, rows))

    def _publish(self, written: Sequence[str]) -> None:
        """Staged files (:class:`BatchWriter`'s paths) renamed to the names readers open."""
        for path in written:
            folder, base = posixpath.split(path)
            if not (base.startswith(".part-") and base.endswith(STAGED)):
                raise ValueError(f"{path}: not a file the batch writer staged")
            self.fs.move(path, posixpath.join(folder, base[1:-len(STAGED)] + ".parquet"))

    def _batch_folders(self, batch: int) -> list[str]:
        """A batch's folder in every table that has one."""
        if not self._exists("tables"):
            return []
        folders = [posixpath.join(i.path, f"batch={int(batch)}")
                   for i in self.fs.get_file_info(pafs.FileSelector(self._fs_path("tables")))]
        return [f for f in folders if self.fs.get_file_info(f).type == pafs.FileType.Directory]

    def _sweep(self, batch: int) -> None:
        """Delete the staged files left in a batch (a failed task attempt's, never published)."""
        for folder in self._batch_folders(batch):
            for f in self.fs.get_file_info(pafs.FileSelector(folder, recursive=True)):
                if f.type == pafs.FileType.File and f.path.endswith(STAGED):
                    self.fs.delete_file(f.path)

    def _drop_batch(self, batch: int) -> None:
        """Delete a batch no committed registry names (a killed ingest's), from every table."""
        for folder in self._batch_folders(batch):
            self.fs.delete_dir(folder)

    # -- the registry: the commit ----------------------------------------------------------
    def _versions(self) -> list[str]:
        infos = self.fs.get_file_info(pafs.FileSelector(self._fs_path("_registry")))
        return sorted(i.path for i in infos if posixpath.basename(i.path).startswith("v")
                      and i.path.endswith(".parquet"))

    def _registry(self) -> pa.Table:
        """The latest registry version: the ``files`` columns and ``batch``."""
        versions = self._versions()
        schema = arrow_schema("files").append(BATCH)
        if not versions:
            return schema.empty_table()
        table = pq.read_table(versions[-1], filesystem=self.fs)
        if "batch" not in table.column_names:
            raise RuntimeError(f"{self.root}: a table store of the layout before batches (a folder per input "
                               "file); move it away: the warehouse keeps every row, the next Spark night starts "
                               "a new store")
        return table.select(schema.names).cast(schema)

    def registry(self) -> pa.Table:
        return self._registry().drop_columns(["batch"])

    def _txn_path(self, stage: str) -> str:
        return self._fs_path("_txn", f"{stage}.json")

    def _write_txn(self, stage: str, txn: dict) -> None:
        self.fs.create_dir(self._fs_path("_txn"), recursive=True)
        with self.fs.open_output_stream(self._txn_path(stage)) as f:
            f.write(json.dumps(txn).encode())

    def begin(self, stage: str, file_ids: Sequence[int]) -> None:
        path = self._txn_path(stage)
        if self.fs.get_file_info(path).type == pafs.FileType.File:  # an ingest killed before it finished
            with self.fs.open_input_stream(path) as f:
                left = json.loads(f.read())
            committed = set(self._registry().column("file_id").to_pylist())
            if left.get("batch") is not None and not committed & set(left["file_ids"]):
                log.info("%s: deleting batch %d, which an interrupted ingest left", stage, left["batch"])
                self._drop_batch(left["batch"])
            # Files it retired after its commit (their ids no longer committed) whose rows may remain.
            drop = {int(b): [i for i in ids if i not in committed] for b, ids in left.get("drop", {}).items()}
            self._drop_files({b: ids for b, ids in drop.items() if ids})
        self._batch = min(int(i) for i in file_ids) if file_ids else None
        if self._batch is not None and self._batch not in set(self._registry().column("batch").to_pylist()):
            self._drop_batch(self._batch)  # (new ids: a folder of that name can only be a leftover)
        self._write_txn(stage, {"batch": self._batch, "file_ids": sorted(int(i) for i in file_ids)})

    def commit(self, stage: str, files: pa.Table, forget: Sequence[int] = (), written: Sequence[str] = ()) -> None:
        if written and self._batch is None:
            raise RuntimeError(f"{stage}: commit of {len(written)} written file(s) without begin()")
        # The data first, whole: the tasks' files renamed to their readable names (still in a
        # batch no registry names, so a run killed here leaves them unread, and the next
        # begin() deletes the batch), the files of failed task attempts deleted.
        self._publish(written)
        if written:
            self._sweep(self._batch)
        current = self._registry()
        # A path committed here but never seen by the registry the ingest decided with (the
        # warehouse's, when a run died between this commit and the warehouse's copy) is
        # retired too: a path is one file id.
        mine = set(zip(files.column("stage").to_pylist(), files.column("path").to_pylist()))
        same_path = [r["file_id"] for r in current.select(["file_id", "stage", "path"]).to_pylist()
                     if (r["stage"], r["path"]) in mine]
        gone = set(int(i) for i in [*forget, *same_path])
        drop: dict[int, list[int]] = {}
        for i, b in zip(current.column("file_id").to_pylist(), current.column("batch").to_pylist()):
            if i in gone:
                drop.setdefault(int(b), []).append(int(i))
        if files.num_rows and self._batch is None:
            raise RuntimeError(f"{stage}: commit of {files.num_rows} file(s) without begin()")
        # The retired files join the open ingest's record first: should the run die between
        # the commit and their deletion, the next begin() finds them unlisted and deletes them.
        self._write_txn(stage, {"batch": self._batch, "file_ids": files.column("file_id").to_pylist(),
                                "drop": {str(b): ids for b, ids in drop.items()}})
        kept = current.filter(pc.invert(pc.is_in(current.column("file_id"), pa.array(sorted(gone), pa.int64()))))
        added = files.select(arrow_schema("files").names).cast(arrow_schema("files"))
        added = added.append_column(BATCH, pa.array([self._batch] * added.num_rows, pa.int64()))
        new = pa.concat_tables([kept, added])
        versions = self._versions()
        number = int(posixpath.basename(versions[-1])[1:9]) + 1 if versions else 1
        final = self._fs_path("_registry", f"v{number:08d}.parquet")
        tmp = self._fs_path("_registry", f".tmp-{uuid.uuid4().hex}.parquet")
        pq.write_table(new, tmp, filesystem=self.fs)
        self.fs.move(tmp, final)  # the commit: from here on readers see the new files' rows
        self._drop_files(drop)
        self.fs.delete_file(self._txn_path(stage))
        self._batch = None
        for old in versions[:-KEEP_VERSIONS]:
            self.fs.delete_file(old)
