"""The engine base class: run named SQL steps, hand results out as Arrow or polars.

Subclasses implement three small methods (``_execute``, ``_register``, ``_unregister``); the
base class does the naming, logging, timing and error wrapping, so every engine fails the
same way: an :class:`~pipeline.errors.EngineError` that names the step and shows the SQL.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.engine.dialect import Dialect
from pipeline.errors import EngineError

log = logging.getLogger(__name__)


class Engine(ABC):
    """Runs SQL steps. ``dialect`` holds the SQL that differs between engines."""

    name: str = "engine"
    dialect: Dialect

    # -- what an engine implements -------------------------------------------------
    @abstractmethod
    def _execute(self, sql: str) -> pa.Table | None:
        """Run one statement; return its rows as Arrow (None for statements without rows)."""

    @abstractmethod
    def _register(self, name: str, table: pa.Table) -> None:
        """Make an Arrow table queryable under ``name``."""

    @abstractmethod
    def _unregister(self, name: str) -> None:
        """Forget a registered table."""

    # -- shared behaviour ------------------------------------------------------------
    def execute(self, sql: str, *, step: str) -> pa.Table | None:
        """Run the SQL step ``step``; engine failures become :class:`EngineError`."""
        t0 = time.perf_counter()
        try:
            result = self._execute(sql)
        except EngineError:
            raise
        except Exception as exc:  # each engine has its own exception tree; one error for all
            raise EngineError(step, sql, exc) from None
        log.debug("%s: step %s took %.3fs", self.name, step, time.perf_counter() - t0)
        return result

    def arrow(self, sql: str, *, step: str) -> pa.Table:
        """A query's result as an Arrow table."""
        out = self.execute(sql, step=step)
        if out is None:
            raise EngineError(step, sql, ValueError("the statement returned no result set"))
        return out

    def pl(self, sql: str, *, step: str) -> pl.DataFrame:
        """A query's result as a polars DataFrame."""
        return pl.from_arrow(self.arrow(sql, step=step))

    def pandas(self, sql: str, *, step: str):
        """A query's result as a pandas DataFrame, typed as DuckDB's ``.df()`` types it (what
        the row-wise Python steps were written against): dates as ``datetime64``, integer and
        boolean columns holding nulls as pandas' nullable types, the others as numpy's."""
        return _to_pandas(self.arrow(sql, step=step))

    def rows(self, sql: str, *, step: str) -> list[tuple]:
        """A query's result as a list of tuples."""
        return self.pl(sql, step=step).rows()

    def scalar(self, sql: str, *, step: str):
        """The first column of a query's first row (None when it has no rows)."""
        rows = self.rows(sql, step=step)
        return rows[0][0] if rows else None

    def create_table(self, name: str, sql: str, *, step: str | None = None) -> None:
        """``CREATE OR REPLACE`` a temporary table (a view in Spark) from a SELECT."""
        self.execute(self.dialect.create_temp(name, sql), step=step or f"create {name}")

    def register(self, name: str, data: Any) -> None:
        """Register a polars / pandas / Arrow frame as a table named ``name``."""
        self._register(name, _to_arrow(data))

    def unregister(self, name: str) -> None:
        self._unregister(name)


_NULLABLE = {pa.int8(): "Int8", pa.int16(): "Int16", pa.int32(): "Int32", pa.int64(): "Int64",
             pa.uint8(): "UInt8", pa.uint16(): "UInt16", pa.uint32(): "UInt32", pa.uint64(): "UInt64",
             pa.bool_(): "boolean"}


def _to_pandas(table: pa.Table):
    import pandas as pd

    columns = {}
    for name, col in zip(table.column_names, table.columns):
        if pa.types.is_date(col.type):
            col = col.cast(pa.timestamp("us"))
        if col.null_count and col.type in _NULLABLE:
            columns[name] = pd.Series(col.to_pandas(types_mapper={col.type: pd.api.types.pandas_dtype(_NULLABLE[col.type])}.get),
                                      name=name)
        else:
            columns[name] = col.to_pandas()
    return pd.DataFrame(columns, columns=table.column_names) if columns else table.to_pandas()


def _to_arrow(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pl.DataFrame):
        return data.to_arrow()
    return pa.Table.from_pandas(data, preserve_index=False)
