"""Hourly facts of many telemetry files of one host in one DuckDB pass.

Reads: a host's new or changed nvidia-smi logs, in rotation order. Writes (returned, for
:meth:`Warehouse.ingest_batch`): one :class:`Loaded` per file, with that file's
``smi_hourly`` and ``smi_headers`` rows, counts and quarantined lines.

Fleets write one small file per host and day, so the cost that matters is per statement,
not per row. Files that share a layout (field list, header or not, delimiter, line end,
compression) are read by one multi-file ``read_csv`` with the file name as a column and
aggregated by file, GPU and hour in the same statement; repeated header lines are
recognized in SQL and skipped. A large file is a batch of one: DuckDB streams it.

The reject judge (:func:`judge_rejects`, and ``_bad`` in :func:`~pipeline.ingest.telemetry.facts.hourly_sql`)
then decides per file: a file whose only problems are lines of the wrong number of cells
keeps its result and those lines go to the quarantine; a file with anything else (an
unreadable value, a changed header, bad bytes, mixed line ends) is read line by line by
:func:`~pipeline.ingest.telemetry.stage.load_file`, cleaning cells with the same SQL.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.errors import EngineError
from pipeline.ingest import sniff
from pipeline.ingest.telemetry import facts
from pipeline.ingest.telemetry.fields import ALIASES, Field, header_fields
from pipeline.ingest.telemetry.read import (
    BLANK_CHARS,
    csv_source,
    first_line,
    line_end,
    line_reject,
    scratch,
    split_lines,
)
from pipeline.timeutil import local_to_utc_expr
from pipeline.warehouse import Loaded, Rejected

log = logging.getLogger(__name__)

#: Files per DuckDB statement: large enough that fixed costs vanish, small enough that
#: one batch's hourly rows stay a few MB.
BATCH_FILES = 256


@dataclass(frozen=True)
class Layout:
    """What files must share to be read by one ``read_csv``."""

    fields: tuple[Field, ...]
    skip: int  # 1: the first line is a header
    delim: str
    newline: str  # the first line's end: LF, CRLF or CR
    gzip: bool
    header: tuple[tuple[str, ...], ...]  # per cell, its spellings a repeated header may use


def probe(path: Path, current: list[Field] | None) -> tuple[Layout | None, list[Field] | None]:
    """The file's layout under the field list in force (None: it needs the exact path), and
    its header's fields (None when headerless)."""
    try:
        head, text, gz_error = sniff.head(path)
        if sniff.judge(head, text, gz_error) is not None:
            return None, None  # a broken file is loaded alone, to be quarantined whole
        whole = max(len(head), len(text)) < sniff.HEAD_BYTES  # the head is the whole file
        line = first_line(path) if line_end(text) is None and not whole else split_lines(text)[0]
        newline = line_end(text) or "\n"
    except (OSError, EOFError):
        return None, None
    gz = head[:2] == sniff.GZIP_MAGIC
    line = line.lstrip("\ufeff")
    hf = _header_fields(line)
    fields = hf or current
    if not fields or "timestamp" not in [f.name for f in fields] or facts.needs_round_index(fields):
        return None, hf  # GPUs numbered by line order (no index field): read line by line
    delim = ", " if ", " in line else ","
    spelled = line.split(delim) if hf else [None] * len(fields)
    header = tuple(spellings(f, raw) for f, raw in zip(fields, spelled))
    return Layout(tuple(fields), 1 if hf else 0, delim, newline, gz, header), hf


@functools.lru_cache(maxsize=4096)
def _header_fields(line: str) -> list[Field] | None:
    """:func:`header_fields`, remembered: a host's files mostly share their header."""
    found = _header_tuple(line)
    return list(found) if found is not None else None


@functools.lru_cache(maxsize=256)
def _header_tuple(line: str) -> tuple[Field, ...] | None:
    found = header_fields(line)
    return tuple(found) if found is not None else None


@functools.lru_cache(maxsize=4096)
def spellings(f: Field, raw: str | None = None) -> tuple[str, ...]:
    """The header cells that name field ``f``: its canonical name or an alias, with its unit."""
    names = [f.name] + sorted(a for a, c in ALIASES.items() if c == f.name)
    out = {f"{n} [{f.unit}]" if f.unit else n for n in names} | ({raw} if raw else set())
    return tuple(sorted(out))


def judge_rejects(found: list[tuple], n: int) -> list[Rejected] | None:
    """Quarantine rows for DuckDB's rejected lines of one file, or None when one of them is
    something the exact path must judge (only cell-count errors are taken here).

    The judgement is :func:`~pipeline.ingest.telemetry.read.line_reject`'s, the one the
    line-by-line path makes.
    """
    kinds: dict[int, set[str]] = {}
    raws: dict[int, str] = {}
    for line_no, kind, raw in found:
        kinds.setdefault(int(line_no), set()).add(kind)
        if raws.setdefault(int(line_no), raw or "") != (raw or ""):
            return None
    rejects = []
    for line_no in sorted(kinds):
        raw = raws[line_no].strip("\r\n")
        # Only lines DuckDB rejected for their number of cells, and that the one judge
        # rejects too (a blank line or a header: the line-by-line path skips it).
        if (not kinds[line_no] & {"MISSING COLUMNS", "TOO MANY COLUMNS"} or not raw.strip(BLANK_CHARS)
                or header_fields(raw) is not None):
            return None
        rejected = line_reject(line_no, raw, n)
        if rejected is None or rejected.reason == "undecodable":
            return None  # (undecodable: the line-by-line path decodes the file its own way)
        rejects.append(rejected)
    return rejects


def fast_batch(con, items: list[tuple[Path, int]], lay: Layout, *, host: str, tz: str) -> list[tuple[Loaded, pl.DataFrame] | None]:
    """Each file's (counts and rejects, hourly rows), or None for a file that needs the
    exact path. One DuckDB statement for the lot; a failing statement is split in halves.
    ``con`` is a scratch engine (:func:`~pipeline.ingest.telemetry.read.scratch`)."""
    try:
        return _fast_batch(con, items, lay, host=host, tz=tz)
    except EngineError as exc:
        if len(items) == 1:
            log.info("%s: fast path declined (%s); reading line by line", items[0][0], exc)
            return [None]
    half = len(items) // 2
    return fast_batch(con, items[:half], lay, host=host, tz=tz) + fast_batch(con, items[half:], lay, host=host, tz=tz)


def _fast_batch(con, items, lay: Layout, *, host: str, tz: str):
    """One ``read_csv`` over the batch's files, the file name a column: DuckDB's fixed cost
    per statement is paid once per batch, not per file."""
    fields = list(lay.fields)
    pos = {str(path): k for k, (path, _) in enumerate(items)}
    src = csv_source([path for path, _ in items], len(fields), lay.skip, lay.delim, newline=lay.newline, gzip=lay.gzip)
    # A statement that rejects nothing records no scan: the last statement's rejects go first.
    for table in ("agg", "reject_errors", "reject_scans"):
        con.execute(f"DROP TABLE IF EXISTS {table}", step="smi: clear the last batch")
    header = [list(c) for c in lay.header]
    con.execute(f"CREATE TEMP TABLE agg AS {facts.hourly_sql(fields, src, by_file=True, header=header)}",
                step="smi: read a batch of files")
    per_file = {
        pos[name]: (bad, n, headers)
        for name, bad, n, headers in con.rows(
            "SELECT filename, coalesce(sum(_bad) FILTER (NOT _hdr), 0) + count(*) FILTER (hour_local IS NULL AND NOT _hdr), "
            "coalesce(sum(samples) FILTER (NOT _hdr), 0), coalesce(sum(samples) FILTER (_hdr), 0) FROM agg GROUP BY filename",
            step="smi: per-file counts")
    }
    found: dict[int, list[tuple]] = {}
    for name, line, kind, raw in con.rows(
        "SELECT DISTINCT s.file_path, e.line, e.error_type, e.csv_line FROM reject_errors e "
        "JOIN reject_scans s USING (scan_id, file_id) ORDER BY 1, 2", step="smi: rejected lines"):
        found.setdefault(pos[name], []).append((line, kind, raw))
    out: list[tuple[Loaded, int] | None] = []
    ok: list[tuple[str, int]] = []
    for k, (path, file_id) in enumerate(items):
        bad, n, headers = per_file.get(k, (0, 0, 0))
        rejects = judge_rejects(found.get(k, []), len(fields)) if not bad else None
        if rejects is None:
            out.append(None)
            continue
        n = int(n or 0)
        # Header lines (the first and any repeated one) are skipped, as the exact path does.
        out.append((Loaded(rows_read=n + len(rejects), rows_loaded=n, rows_skipped=int(headers) + lay.skip,
                           rejects=rejects), file_id))
        ok.append((str(path), file_id))
    if ok:
        con.register("ids", pl.DataFrame({"filename": [a for a, _ in ok], "file_id": [b for _, b in ok]},
                                         schema={"filename": pl.Utf8, "file_id": pl.Int64}))
        hourly = finish_hourly(con, "(SELECT agg.* EXCLUDE (_hdr), ids.file_id FROM agg JOIN ids USING (filename) WHERE NOT _hdr)", host, tz)
        parts = hourly.partition_by("file_id", as_dict=True)
    else:
        parts = {}
    empty = finish_hourly(con, None, host, tz)
    return [None if r is None else (r[0], parts.get((r[1],), empty)) for r in out]


def finish_hourly(con, src: str | None, host: str, tz: str) -> pl.DataFrame:
    """``smi_hourly`` rows from partial aggregates ``src`` (a relation with ``file_id``):
    clean identities, within-hour counter deltas, local hours to UTC. None: no rows."""
    from pipeline.schemas import schema

    cols = schema("smi_hourly")
    if src is None:
        types = {"BIGINT": pl.Int64, "INTEGER": pl.Int32, "DOUBLE": pl.Float64, "TIMESTAMP": pl.Datetime("us")}
        return pl.DataFrame(schema={c.name: types.get(c.type, pl.Utf8) for c in cols.columns})
    df = con.pl(facts.finish_hourly_sql(src), step="smi: hourly facts")
    hour_utc = local_to_utc_expr(pl.col("hour_local").cast(pl.Datetime("us")), tz)
    shift = hour_utc - pl.col("hour_local").cast(pl.Datetime("us"))
    df = df.with_columns(
        hour=hour_utc,
        ts_first=pl.col("ts_first").cast(pl.Datetime("us")) + shift,
        ts_last=pl.col("ts_last").cast(pl.Datetime("us")) + shift,
        file_id=pl.col("file_id").cast(pl.Int64),
        host=pl.coalesce(pl.col("line_host"), pl.lit(host)),  # the line names its host, else the folder
    )
    return df.select(cols.names)


def cell(f: Field) -> str:
    """A field as a header cell: ``memory.used [MiB]``."""
    return f"{f.name} [{f.unit}]" if f.unit else f.name


_HEADS_SCHEMA = {"file_id": pl.Int64, "host": pl.Utf8, "last_fields": pl.Utf8, "start_fields": pl.Utf8}


def _cells(fields) -> str | None:
    return ", ".join(cell(f) for f in fields) if fields else None


def headers_frame(file_id: int, host: str, last: list[Field] | tuple | None,
                  start: list[Field] | tuple | None = None) -> pl.DataFrame:
    """The ``smi_headers`` row of a file: the field lists it starts and ends with."""
    return pl.DataFrame({"file_id": [file_id], "host": [host], "last_fields": [_cells(last)],
                         "start_fields": [_cells(start)]}, schema=_HEADS_SCHEMA)


def load_files(items: list[tuple[Path, int]], *, host: str, tz: str, fields: list[Field] | None,
               single: Callable, start_of: Callable | None = None) -> list[tuple[Loaded, list[Field] | None]]:
    """Hourly facts of consecutive files of one host (rotation order), batched by layout.

    ``fields`` is the field list in force before the first file; ``single(path, file_id,
    fields)`` loads one file the exact way and returns ``(Loaded, fields after it)``.
    ``start_of(path, fields)``: the field list a file starts with, given the one its
    predecessor ended with (default: that one; the stage's header plan,
    :mod:`pipeline.ingest.telemetry.header_plan`, may name another).
    Returns, per file, its :class:`Loaded` and the field list in force after it.
    """
    with scratch() as con:
        return _load_files(con, items, host=host, tz=tz, fields=fields, single=single,
                           start_of=start_of or (lambda _path, flds: flds))


def _load_files(con, items, *, host, tz, fields, single, start_of):
    results: list = [None] * len(items)
    starts: list = [None] * len(items)  # the field list each file started with
    current = fields
    i = 0
    while i < len(items):
        current = start_of(items[i][0], current)
        lay, _ = probe(items[i][0], current)
        if lay is None:
            starts[i] = current
            results[i] = single(*items[i], current)
            current = results[i][1]
            i += 1
            continue
        j = i + 1
        while (j < len(items) and j - i < BATCH_FILES
               and probe(items[j][0], start_of(items[j][0], list(lay.fields)))[0] == lay):
            j += 1
        flds = list(lay.fields)
        for k, res in zip(range(i, j), fast_batch(con, items[i:j], lay, host=host, tz=tz)):
            current = start_of(items[k][0], current)
            # A headerless file's fast result assumed the batch's fields: true while every
            # file before it ended with them (or the plan names them).
            if res is not None and (lay.skip or current == flds):
                loaded, hourly = res
                loaded.tables = {"smi_hourly": hourly}
                starts[k] = flds if lay.skip else current
                results[k] = (loaded, flds)
                current = flds
            else:
                starts[k] = current
                results[k] = single(*items[k], current)
                current = results[k][1]
        i = j
    # One smi_headers frame for the files read in batches, a one-row slice each.
    fast = [k for k, (loaded, _) in enumerate(results) if "smi_headers" not in loaded.tables]
    if fast:
        heads = pl.DataFrame({"file_id": [items[k][1] for k in fast], "host": host,
                              "last_fields": [_cells(results[k][1]) for k in fast],
                              "start_fields": [_cells(starts[k]) for k in fast]}, schema=_HEADS_SCHEMA)
        for row, k in enumerate(fast):
            results[k][0].tables["smi_headers"] = heads.slice(row, 1)
    return results
