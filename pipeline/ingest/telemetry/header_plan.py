"""Which header a telemetry file is read with when it starts without one.

Reads: a host's telemetry files (their first lines, and the header lines written in them)
and what ``smi_headers`` remembers of files loaded in earlier runs. Writes nothing itself:
:func:`plan_starts` returns, per file, the field list in force before its first line and
the file that header came from; the smi stage (:func:`pipeline.ingest.telemetry.stage.run`) and
``parse smi`` (:func:`pipeline.ingest.telemetry.stage.parse_smi_files`) read every file with it.

Why: ``nvidia-smi -l ... -f`` behind logrotate's ``copytruncate`` writes the header only
where the collector started or restarted, so most files of such a host begin with data.
Their header is the same host's header nearest in time: the last header written before the
file (the files are in rotation order), else, for the files before the collector's first
start in the data, the first header written after it. A candidate is taken only when the
file's first data lines have its number of cells and parse under it (a time where
``timestamp`` is, numbers where numbers are, a GPU name where ``name`` is), so a host
whose query changed is not read with the wrong list. None fits: the configured field list
(``--fields`` / ``telemetry.fields``), else the lines stay ``no_header`` in the quarantine.

The choice depends only on the set of files present, never on the order they arrived in:
the stage compares each file's recorded start with a fresh plan after every load and
reloads the files whose start changed (a header that arrived later), saying why.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipeline.ingest.telemetry.fields import (
    PCI_PATTERN,
    Field,
    bad_sql,
    header_fields,
    is_marker,
    is_time,
    parse_fields,
)
from pipeline.ingest.telemetry.read import (
    _HEADER_SHAPE,
    BLANK_CHARS,
    BLOCK_BYTES,
    READ_ERRORS,
    _blocks,
    split_lines,
)

#: Data lines of a headerless file that a candidate header must fit.
SAMPLE_LINES = 20

_PCI = re.compile(f"(?i:pci:)?{PCI_PATTERN}", re.IGNORECASE)


def cells_text(fields: Sequence[Field] | None) -> str | None:
    """A field list as the header cells nvidia-smi writes (``memory.used [MiB]``), joined."""
    if not fields:
        return None
    return ", ".join(f"{f.name} [{f.unit}]" if f.unit else f.name for f in fields)


@dataclass
class FileHeaders:
    """What a file holds of headers: the header of its first line (None: it starts with
    data), the first header written anywhere in it, and its first data lines."""

    first_line: list[Field] | None
    own_first: list[Field] | None
    sample: list[str] = field(default_factory=list)


def scan(path: Path) -> FileHeaders:
    """The file's first header line and up to :data:`SAMPLE_LINES` data lines before it.

    Reading stops at the first header (whole-file reads happen only for files without
    one, which are the small rotated files of a copytruncate host).
    """
    sample: list[str] = []
    first_seen = True
    errors: list[str] = []
    for data, _ in _blocks(path, BLOCK_BYTES, errors):
        lines = data.decode("utf-8", errors="replace").split("\n")
        if first_seen and lines:
            lines[0] = lines[0].lstrip("\ufeff")
        df = pl.DataFrame({"line": lines})
        maybe = df.with_row_index("k").filter(pl.col("line").str.contains(_HEADER_SHAPE))
        stop = len(lines)
        found = None
        for k, text in maybe.select("k", "line").iter_rows():
            hf = header_fields(text)
            if hf is not None:
                stop, found = k, hf
                break
        for text in df["line"].head(stop).to_list():
            if len(sample) < SAMPLE_LINES and text.strip(BLANK_CHARS):
                sample.append(text)
        if found is not None:
            return FileHeaders(found if first_seen and stop == 0 else None, found, sample)
        first_seen = False
    return FileHeaders(None, None, sample)


def head_sample(path: Path, n: int = SAMPLE_LINES) -> list[str]:
    """The file's first ``n`` data lines before its first header: what :func:`fits` judges
    (a few lines read, whatever the file's size)."""
    out: list[str] = []
    try:
        for k, (data, _) in enumerate(_blocks(path, 64 << 10, [])):
            lines = split_lines(data)
            if k == 0 and lines:
                lines[0] = lines[0].lstrip("\ufeff")
            if _take_sample(lines, out, n):
                return out
    except READ_ERRORS:
        pass  # a damaged file: what was read (its lines are judged by the loader)
    return out


def head_sample_of(text: bytes, whole: bool, n: int = SAMPLE_LINES) -> list[str] | None:
    """:func:`head_sample` from the file's first bytes (its text, decompressed), already
    read: None when they do not settle it (the ``n`` lines or a header lie beyond them).
    ``whole``: ``text`` is the whole file. Saves opening (and inflating) a headerless file
    a second time when the stage has peeked at it."""
    if not whole:
        # only whole lines: where _blocks would cut (a CR at the end may be half a CRLF)
        cut = max(text.rfind(b"\n"), text.rfind(b"\r", 0, len(text) - 1))
        if cut < 0:
            return None
        text = text[:cut + 1]
    lines = split_lines(text)
    if lines:
        lines[0] = lines[0].lstrip("\ufeff")
    out: list[str] = []
    return out if _take_sample(lines, out, n) or len(out) >= n or whole else None


def _take_sample(lines: Sequence[str], out: list[str], n: int) -> bool:
    """Add ``lines``' non-blank data lines to ``out``, up to ``n``; True once a header (or a
    line past the ``n``-th) ends the sample."""
    for text in lines:
        if header_fields(text) is not None or len(out) >= n:
            return True
        if text.strip(BLANK_CHARS):
            out.append(text)
    return False


def _text_fits(f: Field, text: str) -> bool:
    """Whether ``text`` is a plausible value of a text field (a bus id, a model name, a
    UUID): SQL reads any text there, so plausibility is judged here."""
    if is_marker(text):
        return True
    if f.kind == "pci":
        return _PCI.fullmatch(text) is not None
    if f.name == "name":  # a model name, never a number or a time
        return any(c.isalpha() for c in text) and not is_time(text)
    if f.name == "uuid":
        return text.startswith(("GPU-", "MIG-"))
    return True


@functools.cache
def _engine():
    from pipeline.engine.duckdb_engine import DuckDBEngine

    return DuckDBEngine()  # in memory: a few sample lines, no warehouse


def values_read(fields: Sequence[Field], rows: Sequence[Sequence[str]]) -> list[bool]:
    """Per row of trimmed cells, whether every value reads under its field: the SQL the
    loaders clean with (:func:`~pipeline.ingest.telemetry.fields.bad_sql`), run over these
    rows, so that a header is fitted by the same meaning of a cell the load uses.

    The rows go to the engine as a registered frame, not as SQL literals: a host with a
    headerless file a day has thousands of sample rows, and a ``VALUES`` list of every
    cell costs more to quote and parse than to check."""
    checks = [b for i, f in enumerate(fields) if (b := bad_sql(f, f"c{i}"))]
    clean = ["\x00" not in "".join(cells) for cells in rows]  # (NUL: junk, never a value)
    if not checks or not any(clean):
        return clean if checks else [True] * len(rows)
    kept = [k for k, ok in enumerate(clean) if ok]
    # The rows go in as a registered table, not as literals in the SQL text: a host that
    # writes its header once has a headerless file a day, thousands of cells to quote and parse.
    table = pl.DataFrame({"k": kept, **{f"c{i}": [rows[k][i] for k in kept] for i in range(len(fields))}},
                         schema={"k": pl.Int64, **{f"c{i}": pl.Utf8 for i in range(len(fields))}})
    engine = _engine()
    engine.register("_fit_rows", table)
    try:
        ok = dict(engine.rows(f"SELECT k, NOT ({' OR '.join(checks)}) FROM _fit_rows",
                              step="smi: fit a header to a headerless file's lines"))
    finally:
        engine.unregister("_fit_rows")
    return [bool(ok.get(k, False)) for k in range(len(rows))]


def fits(fields: Sequence[Field], sample: Sequence[str]) -> bool:
    """Whether the data lines ``sample`` read under ``fields``: each has its number of
    cells (one cut line allowed) and nine in ten of those read cell by cell."""
    return fits_many(fields, [sample])[0]


def fits_many(fields: Sequence[Field], samples: Sequence[Sequence[str]]) -> list[bool]:
    """:func:`fits` for many files' samples, their cells read by one SQL statement (a
    copytruncate host has a headerless file a day: one statement per header, not per file)."""
    n = len(fields)
    wholes = []
    for sample in samples:
        whole = [list(map(str.strip, s.split(","))) for s in sample]
        whole = [cells for cells in whole if len(cells) == n]
        wholes.append(whole if whole and len(whole) >= len(sample) - 1 else [])
    rows = [cells for whole in wholes for cells in whole]
    read = values_read(fields, rows) if rows else []
    # (_text_fits says True for any other field: only these cells need a look)
    judged = [(i, f) for i, f in enumerate(fields) if f.kind == "pci" or f.name in ("name", "uuid")]
    out, k = [], 0
    for whole in wholes:
        ok = read[k:k + len(whole)]
        k += len(whole)
        good = sum(r and all(_text_fits(f, cells[i]) for i, f in judged) for cells, r in zip(whole, ok))
        out.append(bool(whole) and good * 10 >= len(whole) * 9)
    return out


@dataclass(frozen=True)
class Start:
    """The field list a file is read with before its own first header, and where it came from."""

    fields: list[Field] | None
    source: str | None  # the file whose header it is; 'config'; None: none found

    @property
    def text(self) -> str | None:
        return cells_text(self.fields)


@dataclass
class HostFile:
    """One file of a host as the plan sees it, in rotation order."""

    key: str  # the registry's name of the file
    starts_with_header: bool
    own_first: list[Field] | None  # the first header written in it
    own_last: list[Field] | None  # the last header written in it (its field list at the end)
    #: its first data lines, or how to read them (only read when a header is to be fitted)
    sample: list[str] | Callable[[], list[str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        if callable(self.sample):
            self.sample = self.sample()
        return self.sample


def plan_starts(files: Sequence[HostFile], configured: list[Field] | None) -> list[Start]:
    """Per file (rotation order), the field list in force before its first line.

    A file that starts with its own header is read with it. Any other takes, of the host's
    headers, the nearest before it that fits its lines (the last header of the nearest
    earlier file that wrote one, then the next nearest), else the nearest after it that
    fits (its own first header further down, then the first header of the nearest later
    file that wrote one), else ``configured``.
    """
    heads = _Candidates(files)
    picks = _first_fits(files, heads)
    out: list[Start] = []
    for i, f in enumerate(files):
        if f.starts_with_header:
            out.append(Start(f.own_first, f.key))
        elif heads.count(i) and not f.lines():  # no data line before its header: nothing to guess for
            out.append(Start(None, None))
        else:
            out.append(picks.get(i) or Start(configured, "config" if configured else None))
    return out


class _Candidates:
    """The headers a headerless file may take, nearest first: the last header of each
    earlier file that wrote one (nearest first), then the first header of the file itself
    and of each later file that wrote one. Looked up by position, not listed per file (a
    year of daily files would make the lists quadratic)."""

    def __init__(self, files: Sequence[HostFile]):
        self.files = files
        self.lasts = [j for j, g in enumerate(files) if g.own_last]
        self.firsts = [j for j, g in enumerate(files) if g.own_first]
        # Each distinct header by a number, found the first time a file's header is a
        # candidate: the plan looks a file's candidates up several times, and hashing a
        # field list calls Python once per field.
        self._ids: dict[tuple[Field, ...], int] = {}
        self._id_of: dict[tuple[int, bool], int] = {}  # (place, last) -> number
        self.headers: list[tuple[Field, ...]] = []  # number -> fields

    def count(self, i: int) -> int:
        return bisect.bisect_left(self.lasts, i) + len(self.firsts) - bisect.bisect_left(self.firsts, i)

    def _at(self, i: int, k: int) -> tuple[int, bool]:
        """Where file ``i``'s ``k``-th candidate is: its place in ``lasts`` (True) or ``firsts``."""
        before = bisect.bisect_left(self.lasts, i)
        if k < before:
            return before - 1 - k, True
        return bisect.bisect_left(self.firsts, i) + k - before, False

    def get(self, i: int, k: int) -> tuple[tuple[Field, ...], str]:
        """File ``i``'s ``k``-th candidate: (its fields, the file it comes from)."""
        place = self._at(i, k)
        at, last = place
        return self.headers[self._number(place)], self.files[(self.lasts if last else self.firsts)[at]].key

    def id(self, i: int, k: int) -> int:
        """The number of file ``i``'s ``k``-th candidate header (:attr:`headers`)."""
        return self._number(self._at(i, k))

    def _number(self, place: tuple[int, bool]) -> int:
        hit = self._id_of.get(place)
        if hit is None:
            at, last = place
            g = self.files[(self.lasts if last else self.firsts)[at]]
            fields = tuple(g.own_last if last else g.own_first)
            hit = self._id_of[place] = self._ids.setdefault(fields, len(self._ids))
            if hit == len(self.headers):
                self.headers.append(fields)
        return hit


def _first_fits(files: Sequence[HostFile], heads: _Candidates) -> dict[int, Start]:
    """Per headerless file, the first of its candidate headers that fits its lines.
    Candidates are tried in rounds, one statement per header a round (:func:`fits_many`):
    a file is fitted against its next candidate only when the ones before failed, so a
    copytruncate host's files (which mostly fit their first) cost one round, not one
    statement per header of the host for every file."""
    picks: dict[int, Start] = {}
    tried: dict[tuple[int, int], bool] = {}  # (header number, file) -> fits
    nxt = {i: 0 for i, f in enumerate(files) if not f.starts_with_header and heads.count(i) and f.lines()}
    while nxt:
        ask: dict[int, list[int]] = {}
        for i, k in nxt.items():
            ask.setdefault(heads.id(i, k), []).append(i)
        for h, idx in ask.items():
            for i, ok in zip(idx, fits_many(list(heads.headers[h]), [files[i].lines() for i in idx])):
                tried[(h, i)] = ok
        for i in list(nxt):
            k, n = nxt[i], heads.count(i)
            while k < n and tried.get((heads.id(i, k), i)) is False:
                k += 1  # (a header already found not to fit: the next candidate)
            if k < n and tried.get((heads.id(i, k), i)):
                flds, key = heads.get(i, k)
                picks[i] = Start(list(flds), key)
                del nxt[i]
            elif k < n:
                nxt[i] = k
            else:
                del nxt[i]
    return picks


def from_cells(text: str | None) -> list[Field] | None:
    """The field list of :func:`cells_text` (or a header line) back; None for none."""
    return parse_fields(text) if text else None
