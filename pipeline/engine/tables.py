"""The table layer: where an engine's tables live, behind one small interface.

DuckDB keeps its tables in the warehouse file, whose transactions give the registry's
promises. A distributed engine writes files instead, and :class:`TableStore` is the
contract that gives the same promises there:

- every ingested row carries the ``file_id`` of its source file, and an ingest's rows are
  written together (a batch), so the files written grow with a night's tasks, not its inputs;
- :meth:`TableStore.begin` opens an ingest for some new file ids; the ingest's tasks write
  their rows with :meth:`writer` (on the executors) and hand back what they wrote, and only
  :meth:`commit` (the data published, then the file registry's new version) makes them
  visible, while retiring the rows of the files they replace. A run killed before the commit leaves rows no reader sees, and the
  next :meth:`begin` deletes them; a second run of the same night finds every file in the
  registry unchanged and writes nothing;
- :meth:`read` returns only committed rows.

:class:`pipeline.engine.parquet_tables.ParquetTableStore` implements it with Parquet and
pyarrow (tasks write, the driver renames at the commit); a Delta Lake or Iceberg writer would
implement the same methods with its own transaction log, where tasks write data files and the
driver's commit adds them (docs/spark.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from pipeline.schemas import schema

#: Declared column types (pipeline/declared/tables) as Arrow types. Timestamps are naive UTC.
ARROW_TYPES = {
    "VARCHAR": pa.string(), "BIGINT": pa.int64(), "INTEGER": pa.int32(), "SMALLINT": pa.int16(),
    "DOUBLE": pa.float64(), "FLOAT": pa.float32(), "BOOLEAN": pa.bool_(), "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us"),
}
#: The same as Spark DDL; stored timestamps are TIMESTAMP_NTZ so that Parquet keeps them naive
#: (as DuckDB, polars and pandas read the warehouse's), not shifted by a reader's zone.
SPARK_TYPES = {
    "VARCHAR": "STRING", "BIGINT": "BIGINT", "INTEGER": "INT", "SMALLINT": "SMALLINT", "DOUBLE": "DOUBLE",
    "FLOAT": "FLOAT", "BOOLEAN": "BOOLEAN", "DATE": "DATE", "TIMESTAMP": "TIMESTAMP_NTZ",
}

#: The column whose UTC day partitions a table's rows (tables not listed: one null-day partition).
DAY_COLUMN = {
    "xid_raw": "ts", "gpu_map": "ts", "kernel_segments": "day_lo", "smi_hourly": "hour",
    "quarantine": "quarantined_at", "files": "loaded_at",
}


def arrow_schema(table: str) -> pa.Schema:
    """The declared table's columns as an Arrow schema."""
    return pa.schema([pa.field(c.name, ARROW_TYPES[c.type.upper()], c.nullable) for c in schema(table).columns])


def spark_ddl(table: str) -> str:
    """The declared table's columns as a Spark DDL string (``a BIGINT, b STRING, ...``)."""
    return ", ".join(f"`{c.name}` {SPARK_TYPES[c.type.upper()]}" for c in schema(table).columns)


def conform(table: str, data: pa.Table) -> pa.Table:
    """``data`` with exactly the declared columns in order and types; absent ones null."""
    target = arrow_schema(table)
    cols = [data.column(f.name).cast(f.type) if f.name in data.column_names else pa.nulls(data.num_rows, f.type)
            for f in target]
    return pa.Table.from_arrays(cols, schema=pa.schema([f.with_nullable(True) for f in target]))


class TableStore(ABC):
    """Tables written file by file, visible once the file registry that lists them commits."""

    #: The columns every ingested table is partitioned by: the ingest that wrote the rows (one
    #: batch per commit, named by its smallest file id), split by UTC day. Rows keep ``file_id``.
    PARTITION = ("batch", "day")

    @abstractmethod
    def read(self, name: str) -> Any:
        """The committed rows of a declared table (an engine-native frame)."""

    @abstractmethod
    def writer(self) -> Callable[[str, pa.Table], list[str]]:
        """For the tasks of the open ingest (picklable): ``writer(table, rows)`` writes a
        declared table's rows (Arrow) where no reader sees them yet and returns what it wrote,
        which the driver passes to :meth:`commit`."""

    @abstractmethod
    def rewrite_files(self, name: str, rows: pa.Table, file_ids: Sequence[int]) -> None:
        """Replace the rows of these committed file ids with ``rows``, each file's at once."""

    @abstractmethod
    def registry(self) -> pa.Table:
        """The committed file registry (the ``files`` table's columns)."""

    @abstractmethod
    def begin(self, stage: str, file_ids: Sequence[int]) -> None:
        """Open an ingest that will write ``file_ids``, deleting what a killed one left."""

    @abstractmethod
    def commit(self, stage: str, files: pa.Table, forget: Sequence[int] = (), written: Sequence[str] = ()) -> None:
        """Publish the ``written`` data (what the ingest's writer calls returned) and ``files``
        (its registry rows), and retire the ``forget`` file ids."""

    def next_file_id(self) -> int:
        """The first file id no committed file uses."""
        ids = self.registry().column("file_id").to_pylist()
        return max(ids, default=0) + 1
