"""Where ``--warehouse`` points: the DuckDB catalog file and, with Spark, the tables' folder or URL.

Every command that reads or writes the warehouse resolves ``--warehouse`` (or ``paths.warehouse``)
here, so ``fleetfault run`` and ``report``/``predict``/``export``/... find the same files.

The rules (docs/spark.md, "Where the tables are"):

- ``[engine] name = "duckdb"``: the value is the DuckDB file, as always.
- Spark, and the value ends in ``.duckdb``, is ``:memory:``, or is an existing file: the DuckDB
  file, its Parquet tables at ``[engine.spark] tables`` or beside it (``wh.duckdb`` ->
  ``wh.tables``): what a Spark warehouse was before the contract named a folder.
- Spark, and the value is a URL with a scheme other than ``file://`` (``s3://``, ``hdfs://``):
  the tables' URL; the DuckDB catalog (registry, quarantine, runs, derived tables) is the local
  file ``[engine.spark] catalog`` names, since DuckDB writes local files only.
- Spark, otherwise (a folder, or a ``file://`` URL): the tables' folder, the catalog inside it
  (``<folder>/catalog.duckdb``) so that one folder holds the whole warehouse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from pipeline.config import Config
from pipeline.errors import UsageError

#: The DuckDB catalog's name inside a Spark warehouse folder.
CATALOG_NAME = "catalog.duckdb"

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class WarehouseLocation:
    catalog: Path  # the DuckDB file (or Path(":memory:"))
    tables: str | None  # the Spark tables' folder or URL; None on DuckDB

    @property
    def local_tables(self) -> Path | None:
        """The tables' folder when it is on this machine (None for a remote URL or DuckDB)."""
        if self.tables is None or is_remote(self.tables):
            return None
        return _local(self.tables)


def is_url(value: str) -> bool:
    """``value`` has a scheme (``s3://``, ``hdfs://``, ``file://``)."""
    return bool(_SCHEME.match(str(value)))


def is_remote(value: str) -> bool:
    """``value`` is a URL off this machine (any scheme but ``file://``)."""
    return is_url(value) and urlparse(str(value)).scheme != "file"


def _is_duckdb_file(value: str) -> bool:
    return value == ":memory:" or value.endswith(".duckdb") or Path(value).is_file()


def tables_beside(cfg: Config, catalog: str | Path) -> str:
    """The Spark tables of a ``.duckdb`` warehouse file: ``[engine.spark] tables``, else beside
    it (``fleetfault.duckdb`` -> ``fleetfault.tables``)."""
    path = Path(catalog)
    return cfg.engine.spark.tables or str(path.with_name(path.stem + ".tables"))


def resolve_warehouse(cfg: Config, warehouse: str | Path | None = None) -> WarehouseLocation:
    """``--warehouse`` (default ``paths.warehouse``) as the catalog file and the Spark tables.

    Raises
    ------
    UsageError
        A remote tables URL with Spark and no ``[engine.spark] catalog`` to hold the catalog.
    """
    value = str(warehouse) if warehouse is not None and str(warehouse) else cfg.paths.warehouse
    if cfg.engine.name != "spark":
        return WarehouseLocation(Path(value), None)
    if not is_url(value) and _is_duckdb_file(value):
        return WarehouseLocation(Path(value), tables_beside(cfg, value))
    if is_remote(value):
        if not cfg.engine.spark.catalog:
            raise UsageError(f"--warehouse {value}: a remote Spark warehouse needs a local DuckDB catalog; "
                             f"set [engine.spark] catalog = \"fleetfault.duckdb\" in the config")
        return WarehouseLocation(Path(cfg.engine.spark.catalog), value)
    return WarehouseLocation(_local(value) / CATALOG_NAME, value)


def _local(value: str) -> Path:
    """A folder, or a ``file://`` URL, as a local path."""
    return Path(unquote(urlparse(value).path)) if is_url(value) else Path(value)
