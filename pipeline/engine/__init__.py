"""The engine seam: heavy logic as named SQL steps that DuckDB (default) or Spark runs.

In the splink style: :class:`Engine` names, logs and times each step and wraps every engine
failure in :class:`~pipeline.errors.EngineError` (naming the step, showing the SQL); one small
subclass per engine only registers inputs and executes SQL; the few SQL differences live in
:mod:`pipeline.engine.dialect`. Spark is imported only when asked for.

>>> from pipeline.engine import get_engine
>>> eng = get_engine("duckdb")
>>> eng.rows("select 1 + 1", step="sum")
[(2,)]
"""

from __future__ import annotations

from pipeline.engine.base import Engine
from pipeline.engine.dialect import Dialect, DuckDBDialect, SparkDialect
from pipeline.engine.duckdb_engine import DuckDBEngine
from pipeline.errors import UsageError

ENGINES = ("duckdb", "spark")


def get_engine(name: str = "duckdb", **kwargs) -> Engine:
    """An engine by name: ``duckdb`` (default, no setup) or ``spark`` (needs the extra).

    Parameters
    ----------
    name : str
        ``"duckdb"`` or ``"spark"``.
    **kwargs
        Passed to the engine: ``con`` for DuckDB; ``spark`` (a SparkSession) or ``settings``
        (:class:`pipeline.config.SparkSettings`) for Spark.

    Raises
    ------
    UsageError
        For an unknown name.
    DependencyMissing
        For ``spark`` when pyspark is not installed.
    """
    if name == "duckdb":
        return DuckDBEngine(**kwargs)
    if name == "spark":
        from pipeline.engine.spark_engine import SparkEngine  # imported only when asked for

        return SparkEngine(**kwargs)
    raise UsageError(f"engine {name!r} is not known; choose one of {', '.join(ENGINES)}")


__all__ = ["Dialect", "DuckDBDialect", "DuckDBEngine", "Engine", "SparkDialect", "get_engine", "ENGINES"]
