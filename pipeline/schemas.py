"""Declared tables: ``pipeline/declared/tables/*.yaml`` read into :class:`TableSchema`.

One declaration serves three uses: the warehouse creates (and migrates) its tables from
it, stages validate what they hand over against it, and the docs list its columns.

A declaration::

    table: xid_events
    stage: ingest.xid
    doc: One row per Xid/SXid event.
    primary_key: [event_id]
    columns:
      ts:   {type: TIMESTAMP, nullable: true, doc: UTC time of the event}
      host: {type: VARCHAR, nullable: false, doc: ...}
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from pipeline.errors import SchemaError

# libyaml's loader when present: the pure-Python one takes a second for these files.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_TYPES = {
    "VARCHAR", "BIGINT", "INTEGER", "SMALLINT", "DOUBLE", "FLOAT", "BOOLEAN", "DATE",
    "TIMESTAMP", "TIMESTAMPTZ", "JSON", "BLOB", "VARCHAR[]", "DOUBLE[]", "BIGINT[]",
}


def schemas_dir() -> Path:
    """``pipeline/declared/`` (shipped as package data), or ``$FLEETFAULT_SCHEMAS``."""
    env = os.environ.get("FLEETFAULT_SCHEMAS")
    return Path(env) if env else Path(__file__).resolve().parent / "declared"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool
    doc: str


@dataclass(frozen=True)
class TableSchema:
    name: str
    stage: str
    doc: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def ddl(self) -> str:
        cols = [f'"{c.name}" {c.type}{"" if c.nullable else " NOT NULL"}' for c in self.columns]
        if self.primary_key:
            cols.append("PRIMARY KEY (" + ", ".join(f'"{k}"' for k in self.primary_key) + ")")
        return f'CREATE TABLE IF NOT EXISTS "{self.name}" (\n  ' + ",\n  ".join(cols) + "\n)"

    def validate_columns(self, columns: list[str], *, allow_missing_nullable: bool = True) -> None:
        """Raise :class:`SchemaError` if ``columns`` has names not declared, or lacks required ones."""
        extra = [c for c in columns if c not in self.names]
        missing = [
            c.name for c in self.columns
            if c.name not in columns and not (allow_missing_nullable and c.nullable)
        ]
        if extra or missing:
            raise SchemaError(
                f"table {self.name!r}: undeclared columns {extra} / missing required columns {missing}; "
                f"declared in pipeline/declared/tables/{self.name}.yaml: {self.names}"
            )


def _parse(path: Path) -> TableSchema:
    raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    problems = []
    name = raw.get("table")
    if name != path.stem:
        problems.append(f"'table' must equal the file name {path.stem!r}, got {name!r}")
    cols = []
    for cname, spec in (raw.get("columns") or {}).items():
        spec = spec or {}
        ctype = str(spec.get("type", "")).upper()
        if ctype not in _TYPES:
            problems.append(f"column {cname!r}: type {ctype!r} not one of {sorted(_TYPES)}")
        cols.append(Column(cname, ctype, bool(spec.get("nullable", True)), str(spec.get("doc", ""))))
    pk = tuple(raw.get("primary_key") or ())
    for k in pk:
        if k not in [c.name for c in cols]:
            problems.append(f"primary_key names unknown column {k!r}")
    if not cols:
        problems.append("no columns")
    if problems:
        raise SchemaError(f"{path}: " + "; ".join(problems))
    return TableSchema(name, str(raw.get("stage", "")), str(raw.get("doc", "")).strip(), tuple(cols), pk)


@functools.cache
def _load(directory: str) -> dict[str, TableSchema]:
    d = Path(directory) / "tables"
    if not d.is_dir():
        raise SchemaError(f"no table declarations at {d} (set FLEETFAULT_SCHEMAS to a folder holding tables/, taxonomy.yaml and xid_catalog.yaml)")
    return {p.stem: _parse(p) for p in sorted(d.glob("*.yaml"))}


def all_schemas() -> dict[str, TableSchema]:
    """Every declared table, by name."""
    return _load(str(schemas_dir()))


def schema(name: str) -> TableSchema:
    """The declaration of one table."""
    tables = all_schemas()
    if name not in tables:
        raise SchemaError(f"no table {name!r} declared; declared tables: {sorted(tables)}")
    return tables[name]
