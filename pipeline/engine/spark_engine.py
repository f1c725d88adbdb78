"""The Spark engine: the same SQL steps on a SparkSession, for fleets too big for one machine.

Imported only when asked for (``get_engine("spark")``); without pyspark it says which extra
to install.
"""

from __future__ import annotations

import pyarrow as pa

from pipeline.engine.base import Engine
from pipeline.engine.dialect import SparkDialect
from pipeline.errors import DependencyMissing

INSTALL_HINT = "the Spark engine needs pyspark: pip install 'fleetfault[spark]' (and a Java runtime)"


def _import_pyspark():
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise DependencyMissing(INSTALL_HINT) from None
    return SparkSession


class SparkEngine(Engine):
    """Runs steps with ``spark.sql``; registers inputs as temporary views."""

    name = "spark"

    def __init__(self, spark=None):
        session_cls = _import_pyspark()
        self.spark = spark if spark is not None else (
            session_cls.builder.master("local[1]").appName("fleetfault")
            .config("spark.sql.session.timeZone", "UTC").getOrCreate()
        )
        self.dialect = SparkDialect()

    def _execute(self, sql: str) -> pa.Table | None:
        df = self.spark.sql(sql)
        if not df.columns:
            return None
        if hasattr(df, "toArrow"):  # pyspark >= 4
            return _naive_utc(df.toArrow())
        return _naive_utc(pa.Table.from_pandas(df.toPandas(), preserve_index=False))

    def _register(self, name: str, table: pa.Table) -> None:
        self.spark.createDataFrame(table.to_pandas()).createOrReplaceTempView(name)

    def _unregister(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)


def _naive_utc(table: pa.Table) -> pa.Table:
    """Spark hands out zoned timestamps (the session zone is UTC); fleetfault keeps naive UTC."""
    fields = [pa.field(f.name, pa.timestamp(f.type.unit)) if pa.types.is_timestamp(f.type) and f.type.tz else f
              for f in table.schema]
    return table.cast(pa.schema(fields))
