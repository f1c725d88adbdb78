"""Tables as Parquet under the warehouse folder, written by Spark: the Spark table layer.

Layout (``ROOT`` is ``--warehouse``: a local folder or a URL Spark and pyarrow both read)::

    ROOT/tables/<table>/file_id=<n>/day=<yyyy-mm-dd>/part-*.parquet   rows of one file and UTC day
    ROOT/_registry/v<00000001>.parquet                                 the file registry, one
                                                                       immutable version per commit
    ROOT/_txn/<stage>.json                                             file ids an open ingest writes

A file's rows are one partition (split by day), written with dynamic partition overwrite,
so writing a file again replaces exactly its rows. The registry version is written after
the data, in one file (a rename on a local or HDFS folder; an object store shows an object
whole or not at all), and readers keep only the rows of file ids it lists: a run killed
before that commit leaves its rows unseen, and the next ingest's :meth:`begin` deletes them.
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
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.engine.tables import DAY_COLUMN, TableStore, arrow_schema, spark_ddl

log = logging.getLogger(__name__)

#: Registry versions kept besides the latest (older ones are deleted at commit).
KEEP_VERSIONS = 3


class ParquetTableStore(TableStore):
    """Parquet tables and a versioned Parquet file registry under ``root``."""

    def __init__(self, spark, root: str):
        self.spark = spark
        if "://" in str(root):
            self.fs, self._base = pafs.FileSystem.from_uri(str(root))
            self.root = str(root).rstrip("/")
        else:
            self.fs = pafs.LocalFileSystem()
            self._base = self.root = posixpath.abspath(str(root))
        self.fs.create_dir(self._fs_path("_registry"), recursive=True)

    # -- paths ---------------------------------------------------------------------------
    def _fs_path(self, *parts: str) -> str:
        """A path for pyarrow's filesystem."""
        return posixpath.join(self._base, *parts)

    def table_path(self, name: str) -> str:
        """A table's folder as Spark addresses it."""
        return f"{self.root}/tables/{name}"

    def _exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self._fs_path(*parts)).type != pafs.FileType.NotFound

    # -- rows ----------------------------------------------------------------------------
    def read(self, name: str):
        from pyspark.sql import functions as F

        ddl = spark_ddl(name)
        columns = [f.name for f in arrow_schema(name)]
        if not self._exists("tables", name):
            frame = self.spark.createDataFrame([], ddl)
        else:
            stored = ddl if "file_id" in columns else f"{ddl}, `file_id` BIGINT"
            frame = self.spark.read.schema(f"{stored}, `day` DATE").parquet(self.table_path(name))
            ids = self.spark.createDataFrame(self.registry().select(["file_id"]))
            frame = frame.join(F.broadcast(ids), "file_id", "left_semi")
        # Steps compare timestamps as the session's (UTC) TIMESTAMP, as on DuckDB.
        return frame.select([F.col(c).cast("timestamp").alias(c) if t == pa.timestamp("us") else F.col(c)
                             for c, t in zip(columns, arrow_schema(name).types)])

    def _with_day(self, name: str, frame):
        from pyspark.sql import functions as F

        day = DAY_COLUMN.get(name)
        return frame.withColumn("day", F.to_date(F.col(day)) if day else F.lit(None).cast("date"))

    def append(self, name: str, frame) -> None:
        (self._with_day(name, frame).write.mode("append").partitionBy(*self.PARTITION)
         .parquet(self.table_path(name)))

    def replace_partitions(self, name: str, frame, keys: Sequence[str] = TableStore.PARTITION) -> None:
        (self._with_day(name, frame).write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
         .partitionBy(*keys).parquet(self.table_path(name)))

    def parquet_files(self, name: str, file_ids: Sequence[int]) -> list[str]:
        """The Parquet files holding these file ids' rows of a table (hive-partitioned paths
        that DuckDB's ``read_parquet(..., hive_partitioning = true)`` reads), as URLs under a
        URL root."""
        if not file_ids or not self._exists("tables", name):
            return []
        wanted = {f"file_id={int(i)}" for i in file_ids}
        base = self._fs_path("tables", name)
        present = [i.path for i in self.fs.get_file_info(pafs.FileSelector(base))
                   if posixpath.basename(i.path) in wanted]
        out = []
        for folder in present:
            for info in self.fs.get_file_info(pafs.FileSelector(folder, recursive=True)):
                if info.type == pafs.FileType.File and info.path.endswith(".parquet"):
                    out.append(self.root + info.path[len(self._base):] if "://" in self.root else info.path)
        return sorted(out)

    def rewrite_files(self, name: str, frame, file_ids: Sequence[int]) -> None:
        """Replace a table's rows of these (committed) file ids with ``frame``'s: their folders
        deleted, then the rows appended. Not atomic: for rows derived again from files already
        committed (the header plan's ``smi_headers`` columns), whose partitions are known by
        file id whatever their days."""
        self._drop_files(file_ids, tables=[name])
        self.append(name, frame)

    def _drop_files(self, file_ids: Sequence[int], tables: Sequence[str] | None = None) -> None:
        """Delete every table's (or ``tables``') partitions of these file ids."""
        if not file_ids or not self._exists("tables"):
            return
        for info in self.fs.get_file_info(pafs.FileSelector(self._fs_path("tables"))):
            if tables is not None and posixpath.basename(info.path) not in tables:
                continue
            for fid in file_ids:
                folder = posixpath.join(info.path, f"file_id={int(fid)}")
                if self.fs.get_file_info(folder).type == pafs.FileType.Directory:
                    self.fs.delete_dir(folder)

    # -- the registry: the commit ----------------------------------------------------------
    def _versions(self) -> list[str]:
        infos = self.fs.get_file_info(pafs.FileSelector(self._fs_path("_registry")))
        return sorted(i.path for i in infos if posixpath.basename(i.path).startswith("v")
                      and i.path.endswith(".parquet"))

    def registry(self) -> pa.Table:
        versions = self._versions()
        if not versions:
            return arrow_schema("files").empty_table()
        return pq.read_table(versions[-1], filesystem=self.fs).cast(arrow_schema("files"))

    def _txn_path(self, stage: str) -> str:
        return self._fs_path("_txn", f"{stage}.json")

    def _write_txn(self, stage: str, file_ids: Sequence[int]) -> None:
        self.fs.create_dir(self._fs_path("_txn"), recursive=True)
        with self.fs.open_output_stream(self._txn_path(stage)) as f:
            f.write(json.dumps({"file_ids": sorted(int(i) for i in file_ids)}).encode())

    def begin(self, stage: str, file_ids: Sequence[int]) -> None:
        path = self._txn_path(stage)
        if self.fs.get_file_info(path).type == pafs.FileType.File:  # an ingest killed before it finished
            with self.fs.open_input_stream(path) as f:
                left = json.loads(f.read())["file_ids"]
            committed = set(self.registry().column("file_id").to_pylist())
            orphans = [i for i in left if i not in committed]
            log.info("%s: deleting the rows of %d file(s) an interrupted ingest left", stage, len(orphans))
            self._drop_files(orphans)
        self._write_txn(stage, file_ids)

    def commit(self, stage: str, files: pa.Table, forget: Sequence[int] = ()) -> None:
        current = self.registry()
        # A path committed here but never seen by the registry the ingest decided with (the
        # warehouse's, when a run died between this commit and the warehouse's copy) is
        # retired too: a path is one file id.
        mine = set(zip(files.column("stage").to_pylist(), files.column("path").to_pylist()))
        same_path = [r["file_id"] for r in current.select(["file_id", "stage", "path"]).to_pylist()
                     if (r["stage"], r["path"]) in mine]
        gone = sorted(set(int(i) for i in [*forget, *same_path]))
        # The retired files join the open ingest's list first: should the run die between the
        # commit and their deletion, the next begin() finds them unlisted and deletes them.
        self._write_txn(stage, [*files.column("file_id").to_pylist(), *gone])
        kept = current.filter(pc.invert(pc.is_in(current.column("file_id"), pa.array(gone, pa.int64()))))
        new = pa.concat_tables([kept, files.select(kept.column_names).cast(kept.schema)])
        versions = self._versions()
        number = int(posixpath.basename(versions[-1])[1:9]) + 1 if versions else 1
        final = self._fs_path("_registry", f"v{number:08d}.parquet")
        tmp = self._fs_path("_registry", f".tmp-{uuid.uuid4().hex}.parquet")
        pq.write_table(new, tmp, filesystem=self.fs)
        self.fs.move(tmp, final)  # the commit: from here on readers see the new files' rows
        self._drop_files(gone)
        self.fs.delete_file(self._txn_path(stage))
        for old in versions[:-KEEP_VERSIONS]:
            self.fs.delete_file(old)
