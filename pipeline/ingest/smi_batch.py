"""Hourly facts of many telemetry files of one host in one DuckDB pass.

Reads: a host's new or changed nvidia-smi logs, in rotation order. Writes (returned, for
:meth:`Warehouse.ingest_batch`): one :class:`Loaded` per file, with that file's
``smi_hourly`` and ``smi_headers`` rows, counts and quarantined lines.

Fleets write one small file per host and day, so the cost that matters is per file, not
per row. Files that share a layout (field list, header or not, delimiter, line ends,
compression) are joined into one plain file, each line tagged with its file, read by one
``read_csv`` and aggregated by file, GPU and hour in the same statement (DuckDB's own
multi-file read costs ~4 ms per file, ~7 with gzip; joining costs well under one); header
lines, first or repeated, are recognized in SQL and skipped. The per-file fast-path checks of
:func:`pipeline.ingest.smi.load_file` are then made per file from that one result. A file
that fails them (a changed header, an unreadable value, bad bytes, a damaged gzip) is loaded alone
by :func:`~pipeline.ingest.smi.load_file`, line by line, with the field list in force.
"""

from __future__ import annotations

import functools
import gzip
import logging
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from pipeline.ingest import smi_facts, sniff
from pipeline.ingest.smi_fields import ALIASES, Field, header_fields
from pipeline.ingest.smi_read import BLANK_CHARS, csv_source, open_binary, scratch, tool_message
from pipeline.timeutil import local_to_utc_expr
from pipeline.warehouse import Loaded, Rejected

log = logging.getLogger(__name__)

#: Files per DuckDB statement: large enough that fixed costs vanish, small enough that
#: one batch's hourly rows stay a few MB.
BATCH_FILES = 256
#: Files at least this large are loaded alone by ``single``: streamed (the C reader of
#: :mod:`pipeline.ingest.smi_native`, else DuckDB's), never copied into a batch file; a
#: batch only pays off where the cost is per file, not per byte.
ALONE_BYTES = 4 << 20


@dataclass(frozen=True)
class Layout:
    """What files must share to be read by one ``read_csv``."""

    fields: tuple[Field, ...]
    skip: int  # 1: the first line is a header
    delim: str
    crlf: bool
    gzip: bool
    header: tuple[tuple[str, ...], ...]  # per cell, its spellings a repeated header may use


def probe(path: Path, current: list[Field] | None) -> tuple[Layout | None, list[Field] | None]:
    """The file's layout under the field list in force (None: it needs the exact path), and
    its header's fields (None when headerless)."""
    try:
        head, text, gz_error = sniff.head(path)
        if sniff.judge(head, text, gz_error) is not None:
            return None, None  # a broken file is loaded alone, to be quarantined whole
        cut = text.find(b"\n")
        if cut >= 0 or max(len(head), len(text)) < sniff.HEAD_BYTES:  # a first line, or the whole file
            raw = text[:cut + 1] if cut >= 0 else text
        else:
            with open_binary(path) as f:
                raw = f.readline(1 << 20)
    except (OSError, EOFError):
        return None, None
    gz = head[:2] == sniff.GZIP_MAGIC
    line = raw.decode("utf-8", errors="replace").lstrip("\ufeff").rstrip("\r\n")
    hf = _header_fields(line)
    fields = hf or current
    if not fields or "timestamp" not in [f.name for f in fields] or smi_facts.needs_round_index(fields):
        return None, hf  # GPUs numbered by line order (no index field): read line by line
    delim = ", " if ", " in line else ","
    spelled = line.split(delim) if hf else [None] * len(fields)
    header = tuple(spellings(f, raw) for f, raw in zip(fields, spelled))
    return Layout(tuple(fields), 1 if hf else 0, delim, raw.endswith(b"\r\n"), gz, header), hf


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

    A line may come with several errors (a truncated line in typed columns: a cast error
    too); a line of the wrong number of cells is quarantined for that, as the exact path
    does, whatever else DuckDB found in it.
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
        cells = len(raw.split(","))
        if (not kinds[line_no] & {"MISSING COLUMNS", "TOO MANY COLUMNS"} or cells == n or "\ufffd" in raw
                or not raw.strip(BLANK_CHARS) or header_fields(raw) is not None):
            return None
        reason = "truncated_line" if cells < n else "extra_fields"
        detail = f"{cells} of {n} fields" if cells < n else f"{cells} fields, the header has {n}"
        if cells < n and (msg := tool_message(raw)):
            reason, detail = msg
        rejects.append(Rejected(line_no, reason, raw, detail))
    return rejects


def fast_batch(con, items: list[tuple[Path, int]], lay: Layout, *, host: str, tz: str) -> list[tuple[Loaded, pl.DataFrame] | None]:
    """Each file's (counts and rejects, hourly rows), or None for a file that needs the
    exact path. One DuckDB statement for the lot; a failing statement is split in halves.
    ``con`` is a scratch connection (:func:`~pipeline.ingest.smi_read.scratch`)."""
    try:
        return _fast_batch(con, items, lay, host=host, tz=tz)
    except duckdb.Error as exc:
        if len(items) == 1:
            log.info("%s: fast path declined (%s); reading line by line", items[0][0], exc)
            return [None]
    half = len(items) // 2
    return fast_batch(con, items[:half], lay, host=host, tz=tz) + fast_batch(con, items[half:], lay, host=host, tz=tz)


def _concat(items, lay: Layout, out: Path) -> dict[int, int]:
    """Write the files' lines to ``out``, each prefixed with the file's position and the
    delimiter; returns position -> the number of lines before the file's first. A file that
    cannot be read (damaged gzip) is left out, for the exact path."""
    offsets: dict[int, int] = {}
    lines = 0
    with open(out, "wb") as w:
        for k, (path, _) in enumerate(items):
            try:
                data = path.read_bytes()
                data = gzip.decompress(data) if lay.gzip else data
            except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
                continue
            offsets[k] = lines
            data = data.removeprefix(b"\xef\xbb\xbf")
            if not data:
                continue
            if not data.endswith(b"\n"):
                data += b"\n"
            prefix = f"{k}{lay.delim}".encode()
            w.write(prefix + data[:-1].replace(b"\n", b"\n" + prefix) + b"\n")
            lines += data.count(b"\n")
    return offsets


def _fast_batch(con, items, lay: Layout, *, host: str, tz: str):
    """One plain file holding the batch's lines, each tagged with its file: DuckDB's fixed
    cost per file read (a few ms, more for gzip) is paid once per batch."""
    fields = list(lay.fields)
    with tempfile.TemporaryDirectory(prefix="fleetfault-smi-") as tmp:
        joined = Path(tmp) / "batch.csv"
        offsets = _concat(items, lay, joined)
        src = csv_source(joined, len(fields), 0, lay.delim, tagged=True)
        con.execute("DROP TABLE IF EXISTS agg")
        header = [list(c) for c in lay.header]
        con.execute(f"CREATE TEMP TABLE agg AS {smi_facts.hourly_sql(fields, src, by_file=True, header=header)}")
    per_file = {
        name: (bad, n, headers)
        for name, bad, n, headers in con.execute(
            "SELECT filename, coalesce(sum(_bad) FILTER (NOT _hdr), 0) + count(*) FILTER (hour_local IS NULL AND NOT _hdr), "
            "coalesce(sum(samples) FILTER (NOT _hdr), 0), coalesce(sum(samples) FILTER (_hdr), 0) FROM agg GROUP BY filename"
        ).fetchall()
    }
    scan = con.execute("SELECT max(scan_id) FROM reject_scans").fetchall()[0][0]
    found: dict[str, list[tuple]] = {}
    for line, kind, raw in con.execute(
        "SELECT DISTINCT line, error_type, csv_line FROM reject_errors WHERE scan_id = ? ORDER BY line", [scan]
    ).fetchall():
        tag, _, rest = (raw or "").partition(lay.delim)
        k = int(tag) if tag.isdigit() and int(tag) in offsets else -1
        found.setdefault(str(k), []).append((line - offsets.get(k, 0), kind, rest))
    if "-1" in found:  # a line the tagging cannot place: let the exact path judge every file
        return [None] * len(items)
    out: list[tuple[Loaded, int] | None] = []
    ok: list[tuple[str, int]] = []
    for k, (path, file_id) in enumerate(items):
        name = str(k)
        bad, n, headers = per_file.get(name, (0, 0, 0))
        rejects = judge_rejects(found.get(name, []), len(fields)) if not bad and k in offsets else None
        if rejects is None:
            out.append(None)
            continue
        n = int(n or 0)
        # Header lines (the first and any repeated one) are skipped, as the exact path does.
        out.append((Loaded(rows_read=n + len(rejects), rows_loaded=n, rows_skipped=int(headers), rejects=rejects), file_id))
        ok.append((name, file_id))
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
    df = con.sql(smi_facts.finish_hourly_sql(src)).pl()
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
    :mod:`pipeline.ingest.smi_headers`, may name another).
    Returns, per file, its :class:`Loaded` and the field list in force after it.
    """
    con = scratch()
    try:
        return _load_files(con, items, host=host, tz=tz, fields=fields, single=single,
                           start_of=start_of or (lambda _path, flds: flds))
    finally:
        con.close()


def _large(path: Path) -> bool:
    try:
        return path.stat().st_size >= ALONE_BYTES
    except OSError:
        return False


def _load_files(con, items, *, host, tz, fields, single, start_of):
    results: list = [None] * len(items)
    starts: list = [None] * len(items)  # the field list each file started with
    current = fields
    i = 0
    while i < len(items):
        current = start_of(items[i][0], current)
        lay, _ = probe(items[i][0], current)
        if lay is None or _large(items[i][0]):
            starts[i] = current
            results[i] = single(*items[i], current)
            current = results[i][1]
            i += 1
            continue
        j = i + 1
        while (j < len(items) and j - i < BATCH_FILES and not _large(items[j][0])
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
