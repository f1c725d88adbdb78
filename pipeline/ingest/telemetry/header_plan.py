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

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

from pipeline.ingest.telemetry.fields import (FALSE_WORDS, TIMESTAMP_FORMATS, TRUE_WORDS, Field, header_fields,
                                        parse_fields)
from pipeline.ingest.telemetry.read import _HEADER_SHAPE, BLANK_CHARS, BLOCK_BYTES, READ_ERRORS, _blocks, split_lines

#: Data lines of a headerless file that a candidate header must fit.
SAMPLE_LINES = 20

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?(\s*\S{1,4})?")
_HEX = re.compile(r"0[xX][0-9a-fA-F]{1,16}|\d{1,20}")
_PCI = re.compile(r"(?:PCI:)?[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}(?:\.[0-7])?")
_WORDS = set(TRUE_WORDS) | set(FALSE_WORDS)


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
            for text in lines:
                if header_fields(text) is not None or len(out) >= n:
                    return out
                if text.strip(BLANK_CHARS):
                    out.append(text)
    except READ_ERRORS:
        pass  # a damaged file: what was read (its lines are judged by the loader)
    return out


def _is_time(text: str) -> bool:
    for fmt in TIMESTAMP_FORMATS:
        try:
            datetime.strptime(text, fmt)
            return True
        except ValueError:
            continue
    return False


def _marker(text: str) -> bool:
    return text in ("", "N/A") or text.startswith("[")


def _cell_fits(f: Field, text: str) -> bool:
    """Whether ``text`` reads as a value of field ``f`` (the kinds of :attr:`Field.kind`)."""
    kind = f.kind
    if kind == "ts":
        return _is_time(text)
    if kind == "int":
        return text.isdigit()
    if _marker(text):
        return True
    if kind == "num":
        return text in _WORDS or _NUMBER.fullmatch(text) is not None
    if kind == "mask":
        return _HEX.fullmatch(text) is not None
    if kind == "pci":
        return _PCI.fullmatch(text) is not None
    if f.name == "name":  # a model name, never a number or a time
        return any(c.isalpha() for c in text) and not _is_time(text)
    if f.name == "uuid":
        return text.startswith(("GPU-", "MIG-"))
    return True


def fits(fields: Sequence[Field], sample: Sequence[str]) -> bool:
    """Whether the data lines ``sample`` read under ``fields``: each has its number of
    cells (one cut line allowed) and nine in ten of those parse cell by cell."""
    n = len(fields)
    whole = [[c.strip() for c in s.split(",")] for s in sample]
    whole = [cells for cells in whole if len(cells) == n]
    if not whole or len(whole) < len(sample) - 1:
        return False
    good = sum(all(_cell_fits(f, c) for f, c in zip(fields, cells)) for cells in whole)
    return good * 10 >= len(whole) * 9


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
    out: list[Start] = []
    for i, f in enumerate(files):
        if f.starts_with_header:
            out.append(Start(f.own_first, f.key))
            continue
        before = [(g.own_last, g.key) for g in reversed(files[:i]) if g.own_last]
        # after it: a header written further down the file itself, then in later files
        after = [(g.own_first, g.key) for g in files[i:] if g.own_first]
        pick = None
        if (before or after) and not f.lines():  # no data line before its header: nothing to guess for
            pick = Start(None, None)
        for flds, key in before + after:
            if pick is None and fits(flds, f.lines()):
                pick = Start(flds, key)
        if pick is None:
            pick = Start(configured, "config" if configured else None)
        out.append(pick)
    return out


def from_cells(text: str | None) -> list[Field] | None:
    """The field list of :func:`cells_text` (or a header line) back; None for none."""
    return parse_fields(text) if text else None
