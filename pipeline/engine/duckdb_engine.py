"""The DuckDB engine (default): an in-process connection, no setup.

Given the warehouse's connection it reads the declared tables directly; given none it opens
an in-memory database (for lifetime tables and tests).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from pipeline.engine.base import Engine
from pipeline.engine.dialect import DuckDBDialect


class DuckDBEngine(Engine):
    """Runs steps on a DuckDB connection (the warehouse's, or a new in-memory one)."""

    name = "duckdb"

    def __init__(self, con: duckdb.DuckDBPyConnection | None = None):
        self.con = con if con is not None else duckdb.connect(":memory:")
        self.dialect = DuckDBDialect()

    def _execute(self, sql: str) -> pa.Table | None:
        rel = self.con.sql(sql)  # runs statements without rows at once, returning None
        # DuckDB 2 wants every result consumed before the next statement: read it all.
        return None if rel is None else rel.to_arrow_table()

    def _register(self, name: str, table: pa.Table) -> None:
        self.con.register(name, table)

    def _unregister(self, name: str) -> None:
        self.con.unregister(name)
