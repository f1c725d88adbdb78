"""Reading nvidia-smi CSV logs: many files per DuckDB statement, or one file line by line.

The fast path (:func:`lines_source`, or :func:`columns_source` for a large file) hands many
files to one DuckDB ``read_csv`` (gzip, CRLF and parallel parsing included), the file name a
column; :mod:`pipeline.ingest.telemetry.batch` aggregates in the same statement and judges
what it rejected. A file it gives back goes
through the line-by-line path (:func:`read_exact`), which walks the file in blocks with line
numbers, follows header changes, and tells each line's fate: loaded, skipped (blank,
header) or quarantined (:func:`line_reject`). A line ends at LF, CRLF or a lone CR on both
paths; both clean values with the same SQL (:mod:`pipeline.ingest.telemetry.fields`).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import logging
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.engine.duckdb_engine import DuckDBEngine
from pipeline.ingest import sniff
from pipeline.ingest.telemetry.fields import Field, header_fields
from pipeline.vocab.pci import pci_id
from pipeline.vocab.sql import literal, literals
from pipeline.warehouse import Rejected

log = logging.getLogger(__name__)

BLOCK_BYTES = 32 << 20
_HEADER_SHAPE = r"^\s*[A-Za-z_][\w.]*\s*(\[[^\]]*\])?\s*(,\s*[A-Za-z_][\w.]*\s*(\[[^\]]*\])?\s*)*$"


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == sniff.GZIP_MAGIC


#: What reading a damaged file can raise (a gzip cut short or corrupt raises zlib.error, which
#: is not an OSError); callers that only peek treat the file as having nothing more.
READ_ERRORS = (OSError, EOFError, zlib.error)


def open_binary(path: Path) -> io.BufferedIOBase:
    """The file's bytes, decompressed when it is gzip (by its magic, not its name)."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


def first_line(path: Path, limit: int = 1 << 20, *, skip: int = 0) -> str:
    """The first line after ``skip`` lines (without its end), decoded leniently; '' for an
    empty file."""
    head = b""
    try:
        with open_binary(path) as f:
            # One raw read at a time: a damaged gzip raises at its cut, losing what that read decoded.
            while len(head) < limit and len(_LINE_END.findall(head[:-1])) <= skip:
                piece = f.read1(4096)
                if not piece:
                    break
                head += piece
    except (*READ_ERRORS, gzip.BadGzipFile, ValueError):
        pass  # a damaged file: what was read
    lines = split_lines(head)[skip:skip + 1]
    return lines[0].lstrip("\ufeff") if lines else ""


# nvidia-smi's own error messages, printed into a ``-l`` log in place of a GPU's row (or of
# a whole round) when the driver cannot answer. Each is quarantined under its own reason, so
# a lost GPU is not mistaken for a cut-off line: ``gpu_unreachable`` names the GPU's PCI id.
_TOOL_MESSAGES = (
    (re.compile(r"Unable to determine the device handle for (?:GPU|gpu)\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
                r"(?:\.[0-7])?)\s*:\s*(.*)"), "gpu_unreachable"),
    (re.compile(r"No devices were found"), "no_devices"),
    (re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"), "driver_unreachable"),
    (re.compile(r"Failed to initialize NVML:\s*(.*)"), "nvml_init_failed"),
)


def tool_message(line: str) -> tuple[str, str] | None:
    """(reason, detail) when the line is one of nvidia-smi's own error messages, else None.

    >>> tool_message("Unable to determine the device handle for GPU0000:5D:00.0: Unknown Error")
    ('gpu_unreachable', 'GPU 0000:5d:00.0: Unknown Error')
    """
    text = line.strip().lstrip("\ufeff")
    for rx, reason in _TOOL_MESSAGES:
        m = rx.match(text)
        if not m:
            continue
        if reason == "gpu_unreachable":
            return reason, f"GPU {pci_id(m.group(1))}: {m.group(2).strip() or 'no reason given'}"
        return reason, f"nvidia-smi: {text}"
    return None


#: The engine :func:`stage_scratch` lends to every :func:`scratch` inside it.
_lent: DuckDBEngine | None = None


@contextlib.contextmanager
def scratch() -> Iterator[DuckDBEngine]:
    """An in-memory DuckDB engine for parsing files (keeps reject tables and scratch frames
    out of the warehouse), closed on exit; inside :func:`stage_scratch`, that one engine."""
    if _lent is not None:
        yield _lent
        return
    engine = DuckDBEngine()
    try:
        yield engine
    finally:
        engine.con.close()


@contextlib.contextmanager
def stage_scratch() -> Iterator[DuckDBEngine]:
    """One scratch engine for a whole stage: opening an engine per batch (or per file read
    line by line) costs more than reading a small file. Users of a lent engine name their
    scratch tables and views the same way each time and replace them (``DROP ... IF
    EXISTS``, ``register``), so nothing one batch leaves is read by the next."""
    global _lent
    if _lent is not None:
        yield _lent
        return
    with scratch() as engine:
        _lent = engine
        try:
            yield engine
        finally:
            _lent = None


def lines_source(paths: list[Path], n: int, ts: int, skip: int, delim: str = ", ", *, newline: str = "\n",
                 gzip: bool = False) -> str:
    """DuckDB ``read_csv`` over many files as ``n`` raw text cells ``c0..`` and ``filename``
    (and ``_cells``, the list they come from, for the repeated-header test, which looks at
    a few lines' cells).

    Each line is read as ONE text column and split at ``delim`` in SQL: DuckDB's CSV parser
    costs several times more per small file with many columns than with one. The cells are
    the line-by-line path's (:func:`read_exact`: split at every comma, spaces trimmed) on
    every line the split takes: ``n`` cells, ``n - 1`` commas, no space before a comma or
    doubled after one (nvidia-smi separates cells with ``, ``), none at either end.

    Any other line (a wrong number of cells, odd spacing, a blank line, a line end of
    another kind than the file's inside it) gets no timestamp (cell ``c<ts>`` NULL), so it
    lands in a group without an hour, which :mod:`pipeline.ingest.telemetry.batch` counts
    per file and settles (:func:`~pipeline.ingest.telemetry.batch.count_rejects`) or gives
    the file to the line-by-line path. No quoting (nvidia-smi never quotes), no type
    guessing: cell meaning is the SQL of :mod:`pipeline.ingest.telemetry.fields`.

    ``used``: the cells the caller reads on data lines (default: all). The others are cut
    out only on lines whose first cell is ``timestamp`` (a header repeated in the file,
    which is recognized cell by cell) and are NULL elsewhere: cutting a cell out of every
    line costs about as much as cleaning one.
    """
    # One regexp scan of the line for every odd spacing (a space before a comma, doubled
    # after one, at either end), a line end inside it and, split at ``, ``, a comma not
    # followed by its space (a cell holding a comma: ``n - 1`` commas is then ``n - 1``
    # separators): five ``contains`` each searched the line for its first character, a
    # space or a comma, found on every cell.
    if delim not in (", ", ","):
        raise ValueError(f"delimiter {delim!r}: nvidia-smi lines are split at ', ' or ','")
    odd = [" ,", delim + " ", "^ ", " $", "[\r\n]"] + ([",([^ ]|$)"] if delim == ", " else [])
    plain = f"len(l) = {n} AND NOT regexp_matches(line, {literal('|'.join(odd))})"
    cells = ", ".join(f"CASE WHEN {plain} THEN l[{i + 1}] END AS c{i}" if i == ts else f"l[{i + 1}] AS c{i}"
                      for i in range(n))
    # delim chr(1): never in a log line, so each line is one cell; a line holding one makes
    # the statement fail naming its file, which then goes line by line alone.
    read = (
        f"read_csv([{literals(str(p) for p in paths)}], columns={{'line': 'VARCHAR'}}, header=false, "
        f"skip={skip}, delim=chr(1), new_line={literal(NEWLINE_OPTION[newline])}, quote='', escape='', "
        f"auto_detect=false, filename=true, compression={literal('gzip' if gzip else 'none')})"
    )
    return (f"(SELECT filename, l AS _cells, {cells} FROM "
            f"(SELECT filename, line, string_split(line, {literal(delim)}) AS l FROM {read}))")


def columns_source(paths: list[Path], n: int, skip: int, delim: str = ", ", *, newline: str = "\n") -> str:
    """DuckDB ``read_csv`` over large files as ``n`` raw text columns ``c0..`` and
    ``filename``: DuckDB's parallel CSV reader splits the lines, not SQL (the read
    :mod:`pipeline.ingest.telemetry.batch` takes for files of at least
    :data:`~pipeline.ingest.telemetry.batch.WIDE_READ_BYTES`; :func:`lines_source` for the rest).

    The columns are split at ``delim`` and, unlike :func:`lines_source`'s cells, not tested
    line by line for odd spacing (a test per cell costs about what splitting a line in SQL
    saves). Nothing is lost by that, because each difference from the line-by-line path's
    cells (split at every comma, spaces stripped) is caught elsewhere:

    - a line of another number of cells (and a blank line) is dropped here
      (``ignore_errors``) and found by counting the file's lines (:func:`count_lines`);
    - a comma inside a column: the file's commas are counted too (``n - 1`` a line);
    - a space around a value the facts clean (numbers, masks, times) either cleans to the
      same value (DuckDB's casts ignore it) or makes the value unreadable, so the file goes
      line by line (``_bad``); a marker followed by a space, which the failing-marker test
      would not see as one, is flagged unreadable as well
      (:func:`~pipeline.ingest.telemetry.fields.clean_sql`); cells the facts do not clean are
      not read;
    - a space around a GPU's identity (a group key) is checked once per group by the caller.

    Empty cells stay ``''`` (``force_not_null``), as :func:`lines_source` splits them.
    """
    if delim not in (", ", ","):
        raise ValueError(f"delimiter {delim!r}: nvidia-smi lines are split at ', ' or ','")
    names = [f"c{i}" for i in range(n)]
    types = ", ".join(f"{literal(c)}: 'VARCHAR'" for c in names)
    read = (
        f"read_csv([{literals(str(p) for p in paths)}], columns={{{types}}}, header=false, skip={skip}, "
        f"delim={literal(delim)}, new_line={literal(NEWLINE_OPTION[newline])}, quote='', escape='', "
        f"auto_detect=false, null_padding=false, ignore_errors=true, force_not_null=[{literals(names)}], "
        f"filename=true, compression='none')"
    )
    return f"(SELECT filename, {', '.join(names)} FROM {read})"


@dataclass(frozen=True)
class LineCount:
    """What :func:`count_lines` found: the file's lines (an unterminated last one included)
    and commas."""

    lines: int
    commas: int


#: Bytes read per call by :func:`count_lines`: a block and its compare mask stay in the
#: CPU's cache between the two counts (a 16 MiB block went to memory and back twice).
_COUNT_BLOCK = 1 << 20


def count_lines(path: Path, newline: str) -> LineCount | None:
    """The lines and commas of an uncompressed file whose lines end with ``newline``; None
    when it also holds a line end of another kind (DuckDB would cut its lines otherwise
    than the line-by-line path). Two vectorized byte counts a block (numpy's compare and
    ``count_nonzero``, about twice as fast as ``bytearray.count``'s byte loop), read in
    place, and a ``find`` for the other line end: this pass is not parallel, so on two cores
    it costs the columns read twice its CPU in wall time."""
    end, other = (b"\r", b"\n") if newline == "\r" else (b"\n", b"\r")
    crlf = newline == "\r\n"
    lines = commas = cr = pairs = 0
    buf = bytearray(_COUNT_BLOCK)
    view = np.frombuffer(buf, dtype=np.uint8)
    hit = np.empty(_COUNT_BLOCK, dtype=bool)  # (one mask for every compare: no allocation a block)
    last = -1  # the file's last byte (-1: empty)
    try:
        with open(path, "rb", buffering=0) as f:
            while k := f.readinto(buf):
                lines += int(np.count_nonzero(np.equal(view[:k], end[0], out=hit[:k])))
                commas += int(np.count_nonzero(np.equal(view[:k], 44, out=hit[:k])))  # ','
                if crlf:  # every CR starts a CRLF (one cut by the block counted whole)
                    cr += buf.count(b"\r", 0, k)
                    pairs += buf.count(b"\r\n", 0, k) + (last == 13 and buf[0] == 10)
                elif buf.find(other, 0, k) >= 0:
                    return None
                last = buf[k - 1]
    except OSError:
        return None
    if crlf and not cr == pairs == lines:
        return None
    return LineCount(lines + (last not in (-1, 10, 13)), commas)


#: A file's line end -> DuckDB's ``new_line`` option.
NEWLINE_OPTION = {"\n": "\\n", "\r\n": "\\r\\n", "\r": "\\r"}


def line_end(data: bytes) -> str | None:
    """The first line end in ``data`` (``\\n``, ``\\r\\n`` or a lone ``\\r``); None: none seen."""
    m = _LINE_END.search(data)
    return m.group().decode() if m else None


_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass
class Segment:
    """Consecutive data lines read under one field list: ``line_no``, ``line``, ``c0..``."""

    fields: list[Field]
    frame: pl.DataFrame


@dataclass
class ExactRead:
    """What the exact path made of one file so far."""

    rejects: list[Rejected] = field(default_factory=list)
    rows_read: int = 0  # data lines (loaded or quarantined)
    rows_skipped: int = 0  # blank and header lines
    last_fields: list[Field] | None = None


BLANK_CHARS = " \t\r\x0b\x0c"


#: Decompressed bytes read per call: gzip raises at a cut without returning what came before
#: it in that call, so a small piece bounds what a cut costs.
_PIECE = 256 << 10


def _read_upto(f, size: int) -> tuple[bytes, BaseException | None]:
    """Up to ``size`` bytes, and the error that stopped the read early (a gzip cut short)."""
    parts, got = [], 0
    while got < size:
        try:
            piece = f.read(min(_PIECE, size - got))
        except (OSError, EOFError, gzip.BadGzipFile, ValueError) as exc:  # truncated or corrupt gzip
            return b"".join(parts), exc
        if not piece:
            break
        parts.append(piece)
        got += len(piece)
    return b"".join(parts), None


def _blocks(path: Path, size: int, errors: list[str]) -> Iterator[tuple[bytes, bool]]:
    """Blocks of whole lines, LF-ended (the last may lack its end), and whether it is the last.

    A damaged gzip stream ends the file where it breaks (the lines before the break are
    kept); the reason goes to ``errors``.
    """
    with open_binary(path) as f:
        carry = b""
        pending = b""  # the last block is held back: an unterminated last line joins it
        broken = False
        while not broken:
            data, exc = _read_upto(f, size)
            if exc is not None:
                log.info("%s: read stopped early: %s", path, exc)  # quarantined as bad_gzip
                errors.append(str(exc))
                broken = True
            if not data:
                break
            buf = carry + data
            # A line ends at LF, CRLF or a lone CR (old Mac tools; DuckDB's reader agrees);
            # a CR at the block's end may be half a CRLF, so it waits for the next block.
            cut = max(buf.rfind(b"\n"), buf.rfind(b"\r", 0, len(buf) - 1))
            if cut < 0:
                carry = buf
                continue
            carry = buf[cut + 1:]
            if pending:
                yield pending, False
            pending = _lf(buf[: cut + 1])
        if pending or carry:
            yield pending + _lf(carry), True


def _lf(data: bytes) -> bytes:
    """Every line end as LF."""
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def split_lines(data: bytes) -> list[str]:
    """Decoded lines of whole-line bytes (any line end), the last kept even without its end."""
    text = _lf(data).decode("utf-8", errors="replace")
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def read_exact(path: Path, fields: list[Field] | None, out: ExactRead, *, block: int = BLOCK_BYTES) -> Iterator[Segment]:
    """Yield the file's data lines as segments; quarantine what cannot be split.

    ``fields`` is the field list in force before the first header (None: unknown, so
    data lines before a header go to the quarantine as ``no_header``).
    """
    if (problem := sniff.file_problem(path)) is not None:  # nothing worth splitting: one row says why
        out.rows_read += 1
        out.rejects.append(problem.rejected())
        out.last_fields = fields
        return
    current = fields
    offset = 0
    errors: list[str] = []
    for data, _last in _blocks(path, block, errors):
        text = data.decode("utf-8", errors="replace")
        lines = pl.Series("line", [text]).str.split("\n").explode()  # (_blocks: LF line ends only)
        if text.endswith("\n"):
            lines = lines.head(len(lines) - 1)
        df = pl.DataFrame({"line": lines}).with_row_index("line_no", offset + 1)
        df = df.with_columns(pl.col("line_no").cast(pl.Int64), pl.col("line"))
        if offset == 0:
            df = df.with_columns(pl.col("line").str.strip_chars_start("\ufeff"))
        offset += len(lines)
        df = df.with_columns(
            blank=pl.col("line").str.strip_chars(BLANK_CHARS) == "",
            maybe_header=pl.col("line").str.contains(_HEADER_SHAPE),
        )
        headers = {}
        for ln, line in df.filter(pl.col("maybe_header")).select("line_no", "line").iter_rows():
            hf = header_fields(line)
            if hf is not None:
                headers[ln] = hf
        out.rows_skipped += int(df["blank"].sum()) + len(headers)
        starts = sorted(headers)
        bounds = [df["line_no"][0] if len(df) else 0] + starts + [offset + 1]
        seg_fields = [current] + [headers[s] for s in starts]
        data_rows = df.filter(~pl.col("blank") & ~pl.col("line_no").is_in(starts))
        for k, flds in enumerate(seg_fields):
            part = data_rows.filter((pl.col("line_no") >= bounds[k]) & (pl.col("line_no") < bounds[k + 1]))
            if flds is not None:
                current = flds
            if part.is_empty():
                continue
            out.rows_read += len(part)
            seg = _split(part, flds, out)
            if seg is not None:
                yield seg
    for msg in errors:
        out.rows_read += 1
        out.rejects.append(Rejected(offset + 1, "bad_gzip", "", f"compressed data is damaged here: {msg}"))
    out.last_fields = current


#: Why a data line of a headerless file without a field list is quarantined.
NO_HEADER = "headerless file and no field list: pass --fields or set telemetry.fields"

#: Decompressed bytes up to which :func:`read_unheaded` takes a file in one read.
UNHEADED_BYTES = BLOCK_BYTES  # (one block: lines and their decoding exactly as read_exact cuts them)


def read_unheaded(path: Path) -> ExactRead | None:
    """:func:`read_exact` of a file read with no field list that holds no header line, in
    one pass of plain Python: every data line is quarantined as ``no_header`` (a host
    whose collector never wrote a header, before ``telemetry.fields`` names its query).

    None when the file needs :func:`read_exact` after all: a problem with the whole file, a
    damaged gzip, a line that may be a header, or more than :data:`UNHEADED_BYTES`. The
    lines, their numbers and fates are :func:`read_exact`'s (any line end, the first line's
    byte order mark dropped, blank lines skipped).
    """
    if sniff.file_problem(path) is not None:
        return None
    try:
        with open_binary(path) as f:
            data = f.read(UNHEADED_BYTES + 1)
    except (*READ_ERRORS, gzip.BadGzipFile, ValueError):
        return None
    if len(data) > UNHEADED_BYTES:
        return None
    out = ExactRead()
    header_shape = re.compile(_HEADER_SHAPE)
    for line_no, line in enumerate(split_lines(data), 1):
        if line_no == 1:
            line = line.lstrip("\ufeff")
        if not line.strip(BLANK_CHARS):
            out.rows_skipped += 1
            continue
        if header_shape.match(line):
            return None  # (perhaps a header: read_exact follows it)
        out.rows_read += 1
        out.rejects.append(Rejected(line_no, "no_header", line, NO_HEADER))
    return out


def line_reject(line_no: int, line: str, n: int) -> Rejected | None:
    """The reject judge for a whole line under a field list of ``n`` fields: bytes that are
    not UTF-8, one of nvidia-smi's own messages, too few or too many cells (split at commas,
    as both paths split); None when the line has its ``n`` cells (its values are judged by
    the SQL of :mod:`pipeline.ingest.telemetry.fields`)."""
    if "\ufffd" in line:
        return Rejected(line_no, "undecodable", line, "bytes that are not UTF-8")
    cells = line.count(",") + 1
    if cells == n:
        return None
    if cells < n and (msg := tool_message(line)):
        return Rejected(line_no, msg[0], line, msg[1])
    if cells < n:
        return Rejected(line_no, "truncated_line", line, f"{cells} of {n} fields")
    return Rejected(line_no, "extra_fields", line, f"{cells} fields, the header has {n}")


def _split(part: pl.DataFrame, fields: list[Field] | None, out: ExactRead) -> Segment | None:
    if fields is None:
        out.rejects.extend(
            Rejected(ln, "no_header", line, NO_HEADER)
            for ln, line in part.select("line_no", "line").iter_rows()
        )
        return None
    n = len(fields)
    part = part.with_columns(
        cells=pl.col("line").str.split(","),
        undecodable=pl.col("line").str.contains("\ufffd", literal=True),
    ).with_columns(ncells=pl.col("cells").list.len())
    bad = part.filter(pl.col("undecodable") | (pl.col("ncells") != n))
    out.rejects.extend(line_reject(ln, line, n) for ln, line in bad.select("line_no", "line").iter_rows())
    good = part.filter(~pl.col("undecodable") & (pl.col("ncells") == n))
    if good.is_empty():
        return None
    cols = [pl.col("cells").list.get(i).str.strip_chars(" ").alias(f"c{i}") for i in range(n)]
    return Segment(fields, good.select("line_no", "line", *cols))
