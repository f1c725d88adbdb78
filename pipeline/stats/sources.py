"""Where lifetimes come from: the warehouse (inventory + tickets) or a plain lifetime table.

A lifetime table is what a team with an RMA spreadsheet and no telemetry has: one row per
unit, ``id, start, end, failed`` (dates, 0/1) and any grouping columns; an optional ``entry``
column gives delayed entry (the unit was observed only from then on). Both become the same
lifetimes relation, so every statistic runs on either.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.config import Stats
from pipeline.engine import DuckDBEngine, Engine
from pipeline.errors import UsageError
from pipeline.stats.exposure import LIFETIMES, Window, build_lifetimes
from pipeline.stats.failures import derive_failures
from pipeline.vocab.groupings import GROUP_COLUMNS

REQUIRED = ("id", "start", "end", "failed")
RESERVED = set(REQUIRED) | {"entry"}
_TRUE = {"1", "true", "yes", "y", "t", "dead", "failed"}
_FORMATS = ("%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y/%m/%d")
_FALSE = {"0", "false", "no", "n", "f", "", "alive", "censored"}


@dataclass
class Lifetimes:
    """A lifetimes relation on an engine, and the columns one may group it by."""

    engine: Engine
    relation: str
    group_columns: list[str]
    window: Window | None = None

    def frame(self) -> pl.DataFrame:
        return self.engine.pl(f"SELECT * FROM {self.relation} ORDER BY id", step="stats: read lifetimes")


def from_warehouse(engine: Engine, cfg: Stats, window: Window | None = None, *,
                   failures: str | None = None) -> Lifetimes:
    """Lifetimes from the warehouse tables the engine sees: the failures are the table
    ``failures`` names (the stored ``failures`` for the night and the report), else derived
    from ``tickets`` with ``cfg``'s definition (an analyst's question)."""
    failures = failures or derive_failures(engine, cfg)
    window = build_lifetimes(engine, cfg, failures, window)
    return Lifetimes(engine, LIFETIMES, list(GROUP_COLUMNS), window)


def _to_bool(col: pl.Series, path: str) -> pl.Series:
    text = col.cast(pl.Utf8).str.strip_chars().str.to_lowercase().fill_null("")
    bad = text.filter(~text.is_in(list(_TRUE | _FALSE)))
    if bad.len():
        raise UsageError(f"--lifetimes {path}: column 'failed' must be 0/1 (or true/false), found {bad[0]!r}")
    return text.is_in(list(_TRUE))


def _to_datetime(col: pl.Series, name: str, path: str) -> pl.Series:
    if col.dtype in (pl.Date, pl.Datetime):
        return col.cast(pl.Datetime("us"))
    text = col.cast(pl.Utf8).str.strip_chars().replace("", None).str.replace("T", " ", literal=True)
    parsed = pl.select(pl.coalesce(
        [text.str.strptime(pl.Datetime("us"), fmt, strict=False) for fmt in _FORMATS]
    )).to_series()
    bad = text.filter(parsed.is_null() & text.is_not_null())
    if bad.len():
        raise UsageError(f"--lifetimes {path}: column {name!r} has a value that is not a date: {bad[0]!r} "
                         "(use ISO dates, YYYY-MM-DD)")
    return parsed


def read_lifetime_table(path: str | Path) -> pl.DataFrame:
    """Read and check a lifetime CSV (or Parquet); return the lifetimes columns plus its own."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"--lifetimes {path}: no such file")
    raw = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path, infer_schema_length=0)
    raw = raw.rename({c: c.strip().lower() for c in raw.columns})
    missing = [c for c in REQUIRED if c not in raw.columns]
    if missing:
        raise UsageError(f"--lifetimes {path}: missing column(s) {missing}; a lifetime table has "
                         f"id, start, end, failed and any grouping columns; it has {raw.columns}")
    return lifetime_frame(raw, str(path))


def lifetime_frame(raw: pl.DataFrame, where: str = "lifetimes") -> pl.DataFrame:
    """Turn ``id, start, end, failed[, entry]`` plus grouping columns into the lifetimes layout."""
    start = _to_datetime(raw["start"], "start", where)
    end = _to_datetime(raw["end"], "end", where)
    entry = _to_datetime(raw["entry"], "entry", where).fill_null(start) if "entry" in raw.columns else start
    if start.is_null().any() or end.is_null().any():
        raise UsageError(f"--lifetimes {where}: 'start' and 'end' must be set on every row")
    failed = _to_bool(raw["failed"], where)
    groups = [c for c in raw.columns if c not in RESERVED]
    out = raw.select(pl.col("id").cast(pl.Utf8), *[pl.col(c) for c in groups]).with_columns(
        birth_at=start, entry_at=pl.max_horizontal(start, entry), exit_at=end, failed=failed,
    ).with_columns(
        gpu_days=(pl.col("exit_at") - pl.col("entry_at")).dt.total_seconds(fractional=True) / 86400,
        entry_age_days=(pl.col("entry_at") - pl.col("birth_at")).dt.total_seconds(fractional=True) / 86400,
        exit_age_days=(pl.col("exit_at") - pl.col("birth_at")).dt.total_seconds(fractional=True) / 86400,
    )
    bad = out.filter(pl.col("gpu_days") < 0)
    if bad.height:
        raise UsageError(f"--lifetimes {where}: 'end' before 'start' (or entry) for id {bad['id'][0]!r} "
                         f"and {bad.height - 1} more")
    if out["id"].is_duplicated().any():
        dup = out.filter(pl.col("id").is_duplicated())["id"][0]
        raise UsageError(f"--lifetimes {where}: id {dup!r} appears more than once; one row per unit")
    return out


def from_frame(frame: pl.DataFrame, engine: Engine | None = None, *, name: str = "_ff_lifetimes_input") -> Lifetimes:
    """Register an already-shaped lifetimes frame (see :func:`lifetime_frame`) on an engine."""
    engine = engine or DuckDBEngine()
    engine.register(name, frame.filter(pl.col("gpu_days") > 0))
    core = {"id", "birth_at", "entry_at", "exit_at", "failed", "gpu_days", "entry_age_days", "exit_age_days", "exit_reason"}
    return Lifetimes(engine, name, [c for c in frame.columns if c not in core])


def from_lifetime_table(path: str | Path, engine: Engine | None = None) -> Lifetimes:
    """A lifetime CSV on an engine (a fresh in-memory DuckDB by default)."""
    return from_frame(read_lifetime_table(path), engine)
