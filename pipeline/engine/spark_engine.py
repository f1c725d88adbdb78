"""The Spark engine: the same SQL steps on a SparkSession, for fleets too big for one machine.

Imported only when asked for (``get_engine("spark")``); without pyspark it says which extra
to install. Inputs go to Spark as Arrow (no pandas round trip, so types and nulls survive);
results come back as Arrow with naive UTC timestamps, as every fleetfault table keeps them.

Where the session comes from, first match wins: the ``spark`` argument; the session already
running in this process (a notebook, a managed service's job); a new one built from
``[engine.spark]`` in the config (master, app name, settings), except that under
``spark-submit`` its own ``--master`` and ``--name`` are kept.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from pipeline.engine.base import Engine
from pipeline.engine.dialect import SparkDialect
from pipeline.errors import DependencyMissing, EngineError

log = logging.getLogger(__name__)

INSTALL_HINT = "the Spark engine needs pyspark: pip install 'fleetfault[spark]' (and a Java runtime)"

#: Session settings fleetfault needs whatever the config says: naive UTC timestamps, and
#: ``spark.createDataFrame(arrow)`` / ``toArrow()`` through Arrow rather than row by row.
REQUIRED_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}

#: Defaults the config may override: the command line prints its own progress, not Spark's bars.
QUIET_CONF = {"spark.ui.showConsoleProgress": "false", "spark.log.level": "ERROR"}


def local_driver_memory(conf: dict[str, str], ram_bytes: int) -> dict[str, str]:
    """``spark.driver.memory`` for a local master when the config sets none: half the
    machine's memory (at least Spark's own 1 g).

    On a cluster the driver only plans and collects, and Spark's 1 g default suits it; on a
    local master the driver's JVM is also the executor, so every task's rows, shuffles and
    results live in that one heap, and a first run over a year of history does not fit in
    1 g. The heap is a ceiling, not a reservation, so half the memory costs nothing the run
    does not use. A config (or ``spark-submit --driver-memory``) that names it wins."""
    if "spark.driver.memory" in conf:
        return {}
    return {"spark.driver.memory": f"{max(1, ram_bytes // 2 // 2**30)}g"}


def local_warehouse_dir(conf: dict[str, str]) -> dict[str, str]:
    """``spark.sql.warehouse.dir`` for a local master when the config sets none: a folder in
    the system's temporary directory.

    Spark makes its SQL warehouse folder (``spark-warehouse``) in the working directory when
    the session starts; fleetfault keeps its tables itself (Parquet under ``--warehouse``)
    and never writes there, so the folder would only be litter in the user's directory (or
    a checkout the tests must not write into). A config that names it wins."""
    if "spark.sql.warehouse.dir" in conf:
        return {}
    return {"spark.sql.warehouse.dir": str(Path(tempfile.gettempdir()) / "fleetfault-spark-warehouse")}


def _ram_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _import_pyspark():
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise DependencyMissing(INSTALL_HINT) from None
    return SparkSession


def spark_session(settings=None):
    """The session to run on: the active one if any, else one built from ``settings``.

    Parameters
    ----------
    settings : pipeline.config.SparkSettings, optional
        ``master``, ``app_name`` and ``conf``; default ``local[*]``.

    Raises
    ------
    DependencyMissing
        When pyspark is not installed (or no Java runtime can start the JVM).
    """
    session_cls = _import_pyspark()
    active = session_cls.getActiveSession()
    if active is not None:
        # A notebook's or spark-submit's own session: it decides master and resources.
        for key, value in REQUIRED_CONF.items():
            if active.conf.get(key, None) != value:
                log.info("spark: setting %s=%s on the running session", key, value)
                active.conf.set(key, value)
        return active
    if settings is None:
        from pipeline.config import SparkSettings

        settings = SparkSettings()
    builder = session_cls.builder
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Under spark-submit (which starts the JVM and sets that variable) its --master and
        # --name decide; set here, they would override them.
        builder = builder.master(settings.master).appName(settings.app_name)
        if settings.master.startswith("local"):
            # A local master's Python workers run here, started as $PYSPARK_PYTHON or else
            # the PATH's python3, which need not hold this project's dependencies (a venv
            # used without activating it, pipx): run them with this interpreter instead.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            local = {**local_driver_memory(settings.conf, _ram_bytes()), **local_warehouse_dir(settings.conf)}
            for key, value in local.items():
                builder = builder.config(key, value)
    for key, value in {**QUIET_CONF, **settings.conf, **REQUIRED_CONF}.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except Exception as exc:  # py4j's "Java gateway process exited" when no JVM is found
        if "java" in str(exc).lower() or "gateway" in str(exc).lower():
            raise DependencyMissing(f"Spark could not start its JVM ({str(exc).splitlines()[0]}): install a Java "
                                    "runtime (17 or later) and set JAVA_HOME") from None
        raise


class SparkEngine(Engine):
    """Runs steps with ``spark.sql``; registers inputs as temporary views."""

    name = "spark"

    def __init__(self, spark=None, settings=None):
        self.spark = spark if spark is not None else spark_session(settings)
        self.dialect = SparkDialect()

    def _execute(self, sql: str) -> pa.Table | None:
        df = self.spark.sql(sql)
        if not df.columns:
            return None
        return naive_utc(df.toArrow())

    def create_table(self, name: str, sql: str, *, step: str | None = None) -> None:
        """A materialized snapshot, as DuckDB's temporary table is: a Spark view would run
        its whole query again each time a later step reads it (and see later inputs)."""
        step = step or f"create {name}"
        t0 = time.perf_counter()
        try:
            self.spark.sql(sql).localCheckpoint(eager=True).createOrReplaceTempView(name)
        except Exception as exc:  # as Engine.execute: one error type naming the step
            raise EngineError(step, sql, exc) from None
        log.debug("spark: step %s took %.3fs", step, time.perf_counter() - t0)

    def _register(self, name: str, table: pa.Table) -> None:
        self.spark.createDataFrame(table).createOrReplaceTempView(name)

    def _unregister(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)


def naive_utc(table: pa.Table) -> pa.Table:
    """Spark hands out zoned timestamps (the session zone is UTC); fleetfault keeps naive UTC."""
    fields = [pa.field(f.name, pa.timestamp(f.type.unit)) if pa.types.is_timestamp(f.type) and f.type.tz else f
              for f in table.schema]
    return table.cast(pa.schema(fields))
