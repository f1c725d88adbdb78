"""Hourly facts of many telemetry files, of any hosts, in one DuckDB pass per layout.

Reads: new or changed nvidia-smi logs, as runs of each host's consecutive files in
rotation order (:class:`Run`). Writes (returned, for :meth:`Warehouse.ingest_batch`): one
:class:`Loaded` per file, with that file's ``smi_hourly`` and ``smi_headers`` rows, counts
and quarantined lines.

Fleets write one small file per host and day, so the cost that matters is per statement
and per file, not per row. Files that share a layout (field list, header or not,
delimiter, line end, compression) are read by ONE multi-file ``read_csv`` whatever their
hosts, each line one text cell split in SQL (:func:`~pipeline.ingest.telemetry.read.lines_source`),
the file name a column, and aggregated by file, GPU and hour in the same statement. What
differs per host (its name, its time zone) is a column of a small per-file table joined
on the file name, not a statement per host; repeated header lines are recognized in SQL
and skipped. A large uncompressed file (:data:`WIDE_READ_BYTES`) is read as columns
instead (:func:`~pipeline.ingest.telemetry.read.columns_source`): DuckDB's parallel CSV
reader splits its lines, and the same SQL cleans and aggregates them.

Then each file is judged: a file whose only problems are lines of the wrong number of
cells keeps its result and those lines go to the quarantine (:func:`count_rejects`); a
file with anything else (an unreadable value, a changed header, a blank line, bad bytes,
mixed line ends, a statement that fails naming it) is read line by line by
:func:`~pipeline.ingest.telemetry.stage.load_file`, cleaning cells with the same SQL.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.errors import EngineError
from pipeline.ingest import sniff
from pipeline.ingest.telemetry import facts, header_plan
from pipeline.ingest.telemetry.fields import (
    ALIASES,
    Field,
    first_char_sql,
    header_fields,
)
from pipeline.ingest.telemetry.read import (
    BLANK_CHARS,
    READ_ERRORS,
    LineCount,
    columns_source,
    count_lines,
    first_line,
    line_end,
    line_reject,
    lines_source,
    open_binary,
    scratch,
    split_lines,
)
from pipeline.timeutil import local_to_utc_expr
from pipeline.warehouse import Loaded, Rejected

log = logging.getLogger(__name__)

#: Files per :func:`load_files` call for callers that feed one host's files in pieces
#: (the Spark ingest's tasks); the stage hands over up to ``INGEST_FILES`` of all hosts.
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

    @property
    def group(self) -> tuple:
        """What files of any hosts must share to be read by one statement (the header's
        spellings aside)."""
        return (self.fields, self.skip, self.delim, self.newline, self.gzip)


@dataclass(frozen=True)
class Peek:
    """What :func:`probe` reads of a file, whatever the field list in force: its first line
    (byte-order mark stripped), that line's end, whether it is gzip, and, when the first line
    is data, the header plan's sample of it
    (:func:`~pipeline.ingest.telemetry.header_plan.head_sample`) where the head settles it."""

    line: str
    newline: str
    gzip: bool
    sample: tuple[str, ...] | None = None


def peek(path: Path) -> Peek | None:
    """The file's :class:`Peek`, or None when it needs the exact path (broken, unreadable).
    It depends on the file alone, so the stage reads the next batch's ahead, in a thread,
    while DuckDB reads this one (:func:`peek_many`)."""
    try:
        head, text, gz_error = sniff.head(path)
        if sniff.judge(head, text, gz_error) is not None:
            return None  # a broken file is loaded alone, to be quarantined whole
        whole = max(len(head), len(text)) < sniff.HEAD_BYTES  # the head is the whole file
        line = first_line(path) if line_end(text) is None and not whole else split_lines(text)[0]
        newline = line_end(text) or "\n"
    except (OSError, EOFError):
        return None
    line, gz = line.lstrip("\ufeff"), head[:2] == sniff.GZIP_MAGIC
    # (a gzip head is never taken as the whole file: a second member would lie beyond it)
    sample = None if _header_fields(line) else header_plan.head_sample_of(text, whole and not gz and not gz_error)
    return Peek(line, newline, gz, None if sample is None else tuple(sample))


def peek_many(paths: list[Path]) -> dict[Path, Peek | None]:
    """:func:`peek` of each file (what a batch's :func:`load_runs` is handed as ``peeks``)."""
    return {p: peek(p) for p in paths}


_UNSEEN = object()


def probe(path: Path, current: list[Field] | None, seen=_UNSEEN) -> tuple[Layout | None, list[Field] | None]:
    """The file's layout under the field list in force (None: it needs the exact path), and
    its header's fields (None when headerless). ``seen``: its :func:`peek`, read before."""
    pk = peek(path) if seen is _UNSEEN else seen
    if pk is None:
        return None, None
    line = pk.line
    hf = _header_fields(line)
    fields = hf or current
    if not fields or "timestamp" not in [f.name for f in fields] or facts.needs_round_index(fields):
        return None, hf  # GPUs numbered by line order (no index field): read line by line
    if hf:
        flds, delim, header = _spelled(line)
    else:
        flds, delim = tuple(fields), ", " if ", " in line else ","
        header = tuple(spellings(f) for f in fields)
    return Layout(flds, 1 if hf else 0, delim, pk.newline, pk.gzip, header), hf


@functools.lru_cache(maxsize=1024)
def _spelled(line: str) -> tuple[tuple[Field, ...], str, tuple[tuple[str, ...], ...]]:
    """A header line's fields, delimiter and per cell its spellings (a host's files mostly
    share their header: worked out once)."""
    delim = ", " if ", " in line else ","
    fields = _header_tuple(line)
    return fields, delim, tuple(spellings(f, raw) for f, raw in zip(fields, line.split(delim)))


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


#: Decompressed bytes beyond which a file with lines of the wrong cell count is not scanned
#: for their line numbers here: the line-by-line path, which streams, reads it instead.
SCAN_BYTES = 256 << 20


def count_rejects(path: Path, lay: Layout, expected: int, columns: bool = False) -> list[Rejected] | None:
    """The quarantine rows of a file whose fast read found ``expected`` lines it could not
    take, or None when one of them is something the exact path must judge (only lines of
    the wrong number of cells are taken here).

    ``columns``: the file was read as columns, split at the layout's delimiter, so the
    lines it dropped were found by counting, not seen. Each line must then be split alike
    at every comma and at that delimiter (with ``, ``: no bare comma), or one line
    dropped for a bare comma and another kept with a comma inside a cell would pass as
    one judged line where the exact path rejects the other (the counts match, the rows do not).

    The lines are numbered as the line-by-line path numbers them, and each is judged by
    :func:`~pipeline.ingest.telemetry.read.line_reject`, the one judge. The file is given
    back when its bytes hold a line end of another kind than its layout's (DuckDB and the
    line-by-line path would cut its lines differently), a blank or header line, or when the
    lines found are not exactly the ``expected`` ones.
    """
    try:
        with open_binary(path) as f:
            data = f.read(SCAN_BYTES + 1)
    except READ_ERRORS:
        return None
    if len(data) > SCAN_BYTES:
        return None
    other = data.replace(b"\r\n", b"") if lay.newline == "\r\n" else data
    if (b"\r" in other and lay.newline != "\r") or (b"\n" in other and lay.newline != "\n"):
        return None
    n = len(lay.fields)
    rejects = []
    for line_no, line in enumerate(split_lines(data), 1):
        if line_no <= lay.skip:
            continue
        if line_no == 1:
            line = line.lstrip("\ufeff")
        cells = line.count(",") + 1
        if columns and (cells == n) != (line.count(lay.delim) + 1 == n):
            return None
        if cells == n:
            continue
        if not line.strip(BLANK_CHARS) or header_fields(line) is not None:
            return None  # (blank, header: the line-by-line path skips it)
        rejected = line_reject(line_no, line, n)
        if rejected is None or rejected.reason == "undecodable":
            return None  # (undecodable: the line-by-line path decodes the file its own way)
        rejects.append(rejected)
    return rejects if len(rejects) == expected else None


@dataclass(frozen=True)
class Item:
    """A file of a fast batch: its registry id, and its host's name and time zone."""

    path: Path
    file_id: int
    host: str
    tz: str


_FAILED_FILE = re.compile(r"^\s*file = (.+?)\s*$", re.MULTILINE)

#: The rule between the two reads of a layout's files: an uncompressed file of at least this
#: many bytes is read as columns (:func:`~pipeline.ingest.telemetry.read.columns_source`,
#: DuckDB's parallel CSV reader splitting the cells), any other file as one text cell a line
#: split in SQL (:func:`~pipeline.ingest.telemetry.read.lines_source`). Per file, DuckDB's
#: CSV reader costs more the more columns it is given, which is what many small files (one
#: per host and day, kilobytes each) pay; per byte, splitting lines in SQL costs more, which
#: is what a large file pays. A gzip file always takes the one-cell read: the columns read
#: counts the file's lines and commas in Python first, which would mean decompressing it twice.
#: Measured figures: bench/RESULTS.md.
WIDE_READ_BYTES = 64 << 20


def wide_read(path: Path, lay: Layout) -> bool:
    """Whether ``path`` is read as columns (:data:`WIDE_READ_BYTES`)."""
    if lay.gzip:
        return False
    try:
        return path.stat().st_size >= WIDE_READ_BYTES
    except OSError:
        return False


def fast_batch(con, items: list[Item], lay: Layout, header: list[list[str]] | None = None,
               ) -> list[tuple[Loaded, pl.DataFrame] | None]:
    """Each file's (counts and rejects, ``smi_hourly`` rows), or None for a file that needs
    the exact path. One DuckDB statement for the lot, whatever their hosts (two when some
    files are read as columns and others as lines, :data:`WIDE_READ_BYTES`); when it fails,
    the file its error names (else each half) is tried apart.
    ``con`` is a scratch engine (:func:`~pipeline.ingest.telemetry.read.scratch`);
    ``header``: per cell, the spellings a repeated header line may use (default: the
    layout's)."""
    wide = [wide_read(it.path, lay) for it in items]
    out: list = [None] * len(items)
    for kind in (False, True):
        at = [k for k, w in enumerate(wide) if w == kind]
        for k, res in zip(at, _batch(con, [items[k] for k in at], lay, header, kind)):
            out[k] = res
    return out


def _batch(con, items: list[Item], lay: Layout, header, wide: bool) -> list:
    if not items:
        return []
    try:
        return _fast_batch(con, items, lay, header, wide)
    except EngineError as exc:
        if len(items) == 1:
            log.info("%s: fast path declined (%s); reading line by line", items[0].path, exc)
            return [None]
        named = {m.group(1) for m in _FAILED_FILE.finditer(str(exc))}
        bad = [k for k, it in enumerate(items) if str(it.path) in named]
    if len(bad) == 1:
        k = bad[0]
        log.info("%s: fast path declined; reading line by line", items[k].path)
        return (_batch(con, items[:k], lay, header, wide) + [None] + _batch(con, items[k + 1:], lay, header, wide))
    half = len(items) // 2
    return _batch(con, items[:half], lay, header, wide) + _batch(con, items[half:], lay, header, wide)


def _fast_batch(con, items: list[Item], lay: Layout, header, wide: bool = False):
    """One ``read_csv`` over the batch's files, the file name a column, and the hourly
    facts of all of them in the same statement: DuckDB's fixed cost per statement is paid
    once per batch, not per file or host. A file's host and zone come from a small table
    joined on the file name (``_smi_files``), so files of any hosts share the statement.
    ``wide``: the files are read as columns (:data:`WIDE_READ_BYTES`), after their lines
    and commas are counted."""
    fields = list(lay.fields)
    ts = [f.name for f in fields].index("timestamp")
    counted = {it.path: count_lines(it.path, lay.newline) for it in items} if wide else {}
    read = [it for it in items if not wide or counted[it.path] is not None]
    if not read:
        return [None] * len(items)
    paths = [it.path for it in read]
    if wide:
        src, cells = columns_source(paths, len(fields), lay.skip, lay.delim, newline=lay.newline), None
        # A GPU's raw identity is a group key: a space around it (the line-by-line path strips
        # it) is looked for once per group, and sends the file line by line as an unreadable value would.
        spaced = " OR ".join(f"{first_char_sql(f'h.r_{c}', ' ', ' ')} OR ends_with(h.r_{c}, ' ')" for c in facts.ID_RAW)
        bad_n = f"h._bad + coalesce(({spaced})::INTEGER, 0)"
    else:
        # The cells the facts neither clean nor take as a GPU's identity are read only by the
        # repeated-header test, from ``_cells`` (``hourly_sql``'s ``cells``): their ``c<i>`` are
        # never referenced, so DuckDB does not fill them.
        src, cells = lines_source(paths, len(fields), ts, lay.skip, lay.delim, newline=lay.newline,
                                  gzip=lay.gzip), "_cells"
        bad_n = "h._bad"
    header = header or [list(c) for c in lay.header]
    con.register("_smi_files", pl.DataFrame(
        {"filename": [str(it.path) for it in read], "file_id": [it.file_id for it in read],
         "host": [it.host for it in read], "tz": [it.tz for it in read]},
        schema={"filename": pl.Utf8, "file_id": pl.Int64, "host": pl.Utf8, "tz": pl.Utf8}))
    try:
        hourly = facts.hourly_sql(fields, src, by_file=True, header=header, cells=cells)
        df = con.pl(facts.finish_hourly_sql(
            f"(SELECT h.* EXCLUDE (filename), {bad_n} AS _bad_n, f.file_id, f.host AS _host, f.tz AS _tz "
            f"FROM ({hourly}) h JOIN _smi_files f USING (filename))"), step="smi: read a batch of files")
    finally:
        con.unregister("_smi_files")
    data = ~pl.col("_hdr")
    nohour = pl.col("hour_local").is_null()
    per_file = {
        fid: (bad, odd, n, hdr) for fid, bad, odd, n, hdr in df.group_by("file_id").agg(
            pl.col("_bad_n").filter(data & ~nohour).sum().alias("bad"),
            pl.col("samples").filter(data & nohour).sum().alias("odd"),
            pl.col("samples").filter(data).sum().alias("n"),
            pl.col("samples").filter(~data).sum().alias("headers"),
        ).iter_rows()
    }
    out: list[tuple[Loaded, int] | None] = []
    ok: list[int] = []
    for it in items:
        if wide and counted[it.path] is None:
            out.append(None)
            continue
        bad, odd, n, headers = (int(x) for x in per_file.get(it.file_id, (0, 0, 0, 0)))
        # Groups with an hour and an unreadable value, or lines without an hour that are not
        # all lines of the wrong cell count: the line-by-line path judges the file.
        rejects = None if bad else _settle(it.path, lay, odd, n + headers, counted.get(it.path))
        if rejects is None:
            out.append(None)
            continue
        n = n - odd
        # Header lines (the first and any repeated one) are skipped, as the exact path does.
        out.append((Loaded(rows_read=n + len(rejects), rows_loaded=n, rows_skipped=headers + lay.skip,
                           rejects=rejects), it.file_id))
        ok.append(it.file_id)
    good = df.filter(data & ~nohour & pl.col("file_id").is_in(ok)) if ok else df.clear()
    parts = _by_file(_to_utc(good)) if ok else {}
    empty = _no_hourly()
    return [None if r is None else (r[0], parts.get(r[1], empty)) for r in out]


def _settle(path: Path, lay: Layout, odd: int, returned: int, counted: LineCount | None) -> list[Rejected] | None:
    """The quarantine rows of a file read fast, or None when it must be read line by line.

    ``odd``: its lines read without an hour; ``returned``: all lines the read gave back
    (data and repeated headers). Read as columns (``counted``: its lines and commas), the
    lines the reader dropped (a wrong number of cells, blank) are the file's lines not given
    back, and are judged with the odd ones; when there are none, every line must hold
    exactly ``n - 1`` commas (no comma inside a column).
    """
    expected = odd
    if counted is not None:
        dropped = counted.lines - lay.skip - returned
        if dropped < 0:
            return None
        expected += dropped
        if not expected:
            return [] if counted.commas == (len(lay.fields) - 1) * counted.lines else None
    return count_rejects(path, lay, expected, columns=counted is not None) if expected else []


def _by_file(df: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """Each file's rows as a slice of ``df`` sorted by file (no copy per file, as
    ``partition_by`` would make: the warehouse concatenates them again)."""
    df = df.sort("file_id", maintain_order=True)
    runs = df.select(pl.col("file_id").rle()).unnest("file_id")
    out, at = {}, 0
    for n, fid in runs.iter_rows():
        out[fid] = df.slice(at, n)
        at += n
    return out


def _to_utc(df: pl.DataFrame) -> pl.DataFrame:
    """``smi_hourly`` rows of :func:`_fast_batch`'s frame: each file's local hours to UTC in
    its host's zone (one conversion per zone), the host the line names, else the folder's."""
    from pipeline.schemas import schema

    zones = []
    tzs = df["_tz"].unique().to_list()
    # (a batch mostly holds one zone's hosts: then its rows are not split and put together again)
    parts = ([(tzs[0], df)] if len(tzs) == 1
             else [(tz, part) for (tz,), part in df.partition_by("_tz", as_dict=True).items()])
    for tz, part in parts:
        zones.append(_hourly_utc(part, tz).with_columns(host=pl.coalesce(pl.col("line_host"), pl.col("_host"))))
    cols = schema("smi_hourly").names
    return pl.concat([z.select(cols) for z in zones]) if zones else _no_hourly()


def _hourly_utc(df: pl.DataFrame, tz: str) -> pl.DataFrame:
    """Local hours and first/last times to UTC in ``tz``.

    Each distinct local hour is converted once and its shift looked up per row: on hourly
    logs a row is a line, and a zone conversion per row costs far more than a lookup
    (bench/RESULTS.md).
    """
    local = pl.col("hour_local").cast(pl.Datetime("us"))
    hours = df.select(local.unique().drop_nulls())
    shifts = hours.select(local, (local_to_utc_expr(local, tz) - local).alias("shift"))
    shift = local.replace_strict(shifts["hour_local"], shifts["shift"], default=None)
    return df.with_columns(
        hour=local + shift,
        ts_first=pl.col("ts_first").cast(pl.Datetime("us")) + shift,
        ts_last=pl.col("ts_last").cast(pl.Datetime("us")) + shift,
        file_id=pl.col("file_id").cast(pl.Int64),
    )


def finish_hourly(con, src: str | None, host: str, tz: str) -> pl.DataFrame:
    """``smi_hourly`` rows from partial aggregates ``src`` (a relation with ``file_id``):
    clean identities, within-hour counter deltas, local hours to UTC. None: no rows."""
    from pipeline.schemas import schema

    cols = schema("smi_hourly")
    if src is None:
        return _no_hourly()
    df = _hourly_utc(con.pl(facts.finish_hourly_sql(src), step="smi: hourly facts"), tz)
    df = df.with_columns(host=pl.coalesce(pl.col("line_host"), pl.lit(host)))  # the line names its host, else the folder
    return df.select(cols.names)


@functools.cache
def _no_hourly() -> pl.DataFrame:
    """An empty ``smi_hourly`` frame (built once: a file without rows gets this one)."""
    from pipeline.schemas import schema

    types = {"BIGINT": pl.Int64, "INTEGER": pl.Int32, "DOUBLE": pl.Float64, "TIMESTAMP": pl.Datetime("us")}
    return pl.DataFrame(schema={c.name: types.get(c.type, pl.Utf8) for c in schema("smi_hourly").columns})


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


@dataclass
class Run:
    """Consecutive files of one host (rotation order) handed to :func:`load_runs`."""

    host: str
    tz: str
    fields: list[Field] | None  # the field list in force before its first file
    items: list[tuple[Path, int]]  # (path, file_id)


@dataclass
class _Pick:
    """What the first pass made of a file: a fast layout, or its line-by-line result and
    the field list that result started from."""

    lay: Layout | None = None
    start: list[Field] | None = None
    result: tuple | None = None


def load_files(items: list[tuple[Path, int]], *, host: str, tz: str, fields: list[Field] | None,
               single: Callable, start_of: Callable | None = None) -> list[tuple[Loaded, list[Field] | None]]:
    """Hourly facts of consecutive files of one host (rotation order): :func:`load_runs`
    with one run; ``single(path, file_id, fields)``."""
    run = Run(host, tz, fields, items)
    return load_runs([run], single=lambda path, fid, flds, _run: single(path, fid, flds), start_of=start_of)[0]


def load_runs(runs: list[Run], *, single: Callable, start_of: Callable | None = None,
              firsts: dict[Path, list[Field] | None] | None = None, peeks: dict[Path, Peek | None] | None = None,
              head_samples: dict[Path, list[str]] | None = None) -> list[list[tuple[Loaded, list[Field] | None]]]:
    """Hourly facts of many hosts' files, batched by layout across hosts.

    ``single(path, file_id, fields, run)`` loads one file the exact way and returns
    ``(Loaded, fields after it)``. ``start_of(path, fields)``: the field list a file starts
    with, given the one its predecessor ended with (default: that one; the stage's header
    plan, :mod:`pipeline.ingest.telemetry.header_plan`, may name another).
    ``firsts``, when given, gets the header of the first line (None: it starts with data)
    of each file whose layout was read here, so that the header plan need not open it again.
    ``peeks``: files' :func:`peek`, read ahead (a file not in it is peeked here).
    ``head_samples``, when given, gets the header plan's sample of each such file that starts with
    data, where its peek settled it (:attr:`Peek.sample`).
    Returns, per run and file, its :class:`Loaded` and the field list in force after it.
    """
    start_of = start_of or (lambda _path, flds: flds)
    with scratch() as con:
        return _load_runs(con, runs, single=single, start_of=start_of, firsts={} if firsts is None else firsts,
                          peeks=peeks or {}, head_samples={} if head_samples is None else head_samples)


def _load_runs(con, runs: list[Run], *, single, start_of, firsts, peeks, head_samples):
    # 1. Each file's layout, its predecessor assumed read fast (a fast file ends with its
    #    layout's fields); a file the fast path cannot take is read line by line now.
    picks: list[list[_Pick]] = []
    groups: dict[tuple, list[tuple[int, int]]] = {}
    for r, run in enumerate(runs):
        current, mine = run.fields, []
        for k, (path, fid) in enumerate(run.items):
            current = start_of(path, current)
            pk = peeks[path] if path in peeks else peek(path)
            lay, hf = probe(path, current, pk)
            if lay is not None:
                firsts[path] = hf
                if pk.sample is not None:
                    head_samples[path] = list(pk.sample)
            if lay is None:
                res = single(path, fid, current, run)
                mine.append(_Pick(start=current, result=res))
                current = res[1]
            else:
                mine.append(_Pick(lay=lay))
                groups.setdefault(lay.group, []).append((r, k))
                current = list(lay.fields)
        picks.append(mine)
    # 2. One statement per layout, across hosts (a repeated header may use any spelling of
    #    the layout's fields that one of its files' headers used).
    fast: dict[tuple[int, int], tuple] = {}
    for members in groups.values():
        lays = [picks[r][k].lay for r, k in members]
        header = [sorted(set().union(*cells)) for cells in zip(*(lay.header for lay in lays))]
        items = [Item(runs[r].items[k][0], runs[r].items[k][1], runs[r].host, runs[r].tz) for r, k in members]
        for (r, k), res in zip(members, fast_batch(con, items, lays[0], header)):
            if res is not None:
                fast[(r, k)] = res
    # 3. In order again: a headerless file's fast result assumed the fields its predecessor
    #    ended with; where the exact path of a predecessor ended otherwise, it is read again.
    out: list[list] = []
    heads: list[tuple[int, str, list[Field] | None, list[Field] | None, Loaded]] = []
    for r, run in enumerate(runs):
        current, results = run.fields, []
        for k, (path, fid) in enumerate(run.items):
            current = start_of(path, current)
            pick = picks[r][k]
            flds = list(pick.lay.fields) if pick.lay is not None else None
            if (r, k) in fast and (pick.lay.skip or current == flds):
                loaded, hourly = fast[(r, k)]
                loaded.tables = {"smi_hourly": hourly}
                # (a headerless file is taken only when it starts with its layout's fields)
                heads.append((fid, run.host, pick.lay.fields, pick.lay.fields, loaded))
                res = (loaded, flds)
            elif pick.result is not None and pick.start == current:
                res = pick.result
            else:
                res = single(path, fid, current, run)
            results.append(res)
            current = res[1]
        out.append(results)
    # One smi_headers frame for the files read in batches, a one-row slice each.
    if heads:
        memo: dict[int, tuple] = {}  # by the list's id (kept alive in the value): hashing Fields costs more

        def text(flds):
            hit = memo.get(id(flds))
            if hit is None:
                hit = memo[id(flds)] = (flds, _cells(flds))
            return hit[1]
        frame = pl.DataFrame({"file_id": [h[0] for h in heads], "host": [h[1] for h in heads],
                              "last_fields": [text(h[2]) for h in heads],
                              "start_fields": [text(h[3]) for h in heads]}, schema=_HEADS_SCHEMA)
        for row, h in enumerate(heads):
            h[4].tables["smi_headers"] = frame.slice(row, 1)
    return out
