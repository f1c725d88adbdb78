"""Finding the few lines of a kernel log that matter, fast: the literal prefilter.

About one line in a hundred of a busy host's kernel log is the NVIDIA driver's. Running a
regular expression over every line costs many times the reading of the file, so the file is
read whole and searched for literals, rare bytes first (``bytes.find`` of one byte is
``memchr``, several times faster than a search for a word or a regular expression): ``X``
then a check for ``Xid`` (covers ``SXid``), and ``V`` then a check for ``NVRM`` and the words
of the driver's map and fallen-off lines; only in uptime-stamped logs, one search for the RTC
boot marker; and the boot markers. Only those lines are decoded and parsed, many files'
lines at once (:func:`pipeline.ingest.kernel.parse.parse_texts`).

This is the only way a kernel log is read (no native scanner: a C reader of untrusted logs
needs a fuzzed, capped buffer to be safe, and the time it saved is now spent once per batch).
"""

from __future__ import annotations

import re

import numpy as np

from pipeline.ingest.kernel import journal

_HUMAN_MARK = re.compile(rb"^\[(?:\s*\+\d+\.\d+|[A-Z][a-z]{2}\s?\d{1,2} \d\d:\d\d)\]", re.MULTILINE)
_UPTIME_MARK = re.compile(rb"^(?:<\d{1,3}>)?(?:[a-z]{2,8}\s*:[a-z]{3,7}\s*:\s)?\[\s*\d+\.\d+\]", re.MULTILINE)


#: How much of a file tells its format (:func:`is_human`, :func:`is_uptime`).
_HEAD = 8192


#: The kernel's banner, printed first at every boot: in a log whose lines carry a wall clock
#: and no uptime it dates the boot, for the uptime-only logs of that boot in other files.
BANNER = b"Linux version "
#: journalctl's line between two boots, ``-- Boot 9f2c...e1 --``: the same id in two files is
#: the same boot.
JOURNAL_BOOT = b"-- Boot "
_JOURNAL_TEXT = re.compile(rb"(?m)^-- ")


def _boot_needles(head: bytes) -> tuple[bytes, ...]:
    """What marks a boot in this log beside the scanners' own finds: the banner where lines
    carry no uptime, journalctl's boot lines in its text output (judged by the file's head)."""
    return ((BANNER,) if not is_uptime(head) else ()) + (
        (JOURNAL_BOOT,) if _JOURNAL_TEXT.search(head, 0, _HEAD) else ())


def _marks(buf, needles: tuple[bytes, ...]) -> list[tuple[int, bytes]]:
    """(line number, line) of each line of ``buf`` holding one of ``needles`` (rare words:
    ``find`` passes over the bytes at memory speed; lines are counted only up to each)."""
    starts: set[int] = set()
    for needle in needles:
        i = buf.find(needle)
        while i != -1:
            starts.add(buf.rfind(b"\n", 0, i) + 1)
            i = buf.find(needle, i + len(needle))
    if not starts:
        return []
    out: list[tuple[int, bytes]] = []
    arr = np.frombuffer(buf, dtype=np.uint8)
    no, last = 1, 0
    for s in sorted(starts):
        e = buf.find(b"\n", s)
        e = len(buf) if e == -1 else e
        no += int(np.count_nonzero(arr[last:s] == 10))
        last = s
        out.append((no, bytes(buf[s:e])))
    del arr  # (a mapped file cannot close while a view of it lives)
    return out


def _with_marks(lines: list[tuple[int, bytes]], marks: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The candidate lines with the boot-mark lines among them, in line order, each once."""
    have = {no for no, _ in lines}
    # (a journal's JSON entry is read as its plain line; a verbose entry's field is not a line)
    marks = [(no, journal.from_json(x) if x[:1] == b"{" else x) for no, x in marks
             if no not in have and x[:1] not in (b" ", b"\t")]
    return sorted(lines + marks, key=lambda x: x[0]) if marks else lines


def _xid_lines(buf: bytes) -> list[int]:
    """Start offsets of the lines holding ``Xid`` (or ``SXid``): ``memchr`` for the rare
    byte ``X``, then a check of the word."""
    find, rfind, starts = buf.find, buf.rfind, buf.startswith
    out: list[int] = []
    i = find(b"X")
    while i != -1:
        if starts(b"Xid", i):
            out.append(rfind(b"\n", 0, i) + 1)
            e = find(b"\n", i)
            if e == -1:
                break
            i = find(b"X", e)
        else:
            i = find(b"X", i + 1)
    return out


def _line_numbers(buf: bytes, starts: list[int]) -> tuple[list[int], int]:
    """1-based line numbers of sorted line-start offsets, and the file's line count.

    Newlines are counted gap by gap with numpy (SIMD); ``bytes.count`` loops byte by byte.
    """
    arr = np.frombuffer(buf, dtype=np.uint8)
    out, no, last = [], 1, 0
    for s in starts:
        no += int(np.count_nonzero(arr[last:s] == 10))
        out.append(no)
        last = s
    tail = 0
    for cs in range(last, len(buf), 1 << 20):
        tail += int(np.count_nonzero(arr[cs:min(cs + (1 << 20), len(buf))] == 10))
    total = (no + tail - (1 if buf.endswith(b"\n") else 0)) if buf else 0
    return out, total


#: How the driver's lines that build the GPU map or tell of a GPU that fell off the bus or
#: failed to initialize begin (each line of the multi-line fallen-off message carries
#: ``NVRM:``; ``NVRM: GPU `` covers ``GPU at``, ``GPU Board Serial`` and the one-line
#: ``GPU 0000:01:00.0: GPU has fallen off the bus.``).
_DRIVER_HEADS = (b"NVRM: GPU ", b"NVRM: The NVIDIA GPU", b"NVRM: fallen off", b"NVRM: RmInitAdapter failed")


def _driver_lines(buf: bytes) -> list[int]:
    """Start offsets of the driver's map and fallen-off lines: ``memchr`` for the rare byte
    ``V``, then a check (no copy) for one of :data:`_DRIVER_HEADS` around it."""
    find, starts = buf.find, buf.startswith
    out: list[int] = []
    i = find(b"V", 1)
    while i != -1:
        if starts(_DRIVER_HEADS, i - 1):
            out.append(buf.rfind(b"\n", 0, i) + 1)
        i = find(b"V", i + 1)
    return out


def _each_line(buf: bytes, needle: bytes, out: set[int]) -> None:
    """Add every line holding ``needle``."""
    i = buf.find(needle)
    while i != -1:
        out.add(buf.rfind(b"\n", 0, i) + 1)
        i = buf.find(needle, i + 1)


_LONE_CR = re.compile(rb"\r(?!\n)")


def lf_lines(buf: bytes) -> bytes:
    """``buf`` with every line end a LF: a CRLF, and a lone CR (old Mac-style exports, serial
    console captures, a terminal's carriage returns), ends a line as an editor that honours
    CR shows it, so line numbers are that editor's. Everything after (the literal search,
    line numbers, boot marks, ``dmesg -H`` times, journald entries) then splits at LF only.

    A log without CR (nearly every one) is returned as is after one ``memchr``, and so is a
    CRLF log without a lone CR (every reader below drops a CR before LF): copying it would
    cost twice the search for a lone CR.

    >>> lf_lines(b"a\\rb\\r\\nc\\n\\rd")
    b'a\\nb\\nc\\n\\nd'
    """
    if b"\r" not in buf or _LONE_CR.search(buf) is None:
        return buf
    return buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def is_human(buf: bytes) -> bool:
    """Whether the log is ``dmesg -H`` (relative deltas): its times need every line."""
    return _HUMAN_MARK.search(buf, 0, _HEAD) is not None


def is_uptime(buf: bytes) -> bool:
    return _UPTIME_MARK.search(buf, 0, _HEAD) is not None


def candidate_lines(buf: bytes) -> tuple[list[tuple[int, bytes]], int]:
    """(1-based line number, line bytes) of every line that may matter, in file order, and
    the number of lines in the file. journald's JSON and verbose entries come back as plain
    lines (:mod:`pipeline.ingest.kernel.journal`), a pasted Xid line joined with its wrapped tail."""
    lines, n_lines = _driver_and_xid_lines(buf)
    needles = _boot_needles(buf[:_HEAD])
    return (_with_marks(lines, _marks(buf, needles)) if needles else lines), n_lines


def _driver_and_xid_lines(buf: bytes) -> tuple[list[tuple[int, bytes]], int]:
    """:func:`candidate_lines` but the boot marks: ``memchr`` loops, numpy line numbers."""
    known = _xid_lines(buf)
    extra = set(_driver_lines(buf))
    if is_uptime(buf):
        _each_line(buf, b"setting system clock to", extra)
    starts = sorted(extra.union(known))
    numbers, n_lines = _line_numbers(buf, starts)
    out = []
    xid_starts = set(known)
    tail_end = -1
    for s, no in zip(starts, numbers):
        if s <= tail_end:  # the wrapped tail of the Xid line before
            continue
        e = buf.find(b"\n", s)
        e = len(buf) if e == -1 else e
        line = buf[s:e]
        first = line[:1]
        if first == b"{":
            line = journal.from_json(line)
        elif first in (b" ", b"\t") and line.lstrip().startswith(b"MESSAGE="):
            line = journal.from_verbose(buf, s) or line
        elif s in xid_starts:
            joined = journal.wrapped_tail(buf, line, e)
            if joined is not None:
                line, tail_end = joined
        out.append((no, line))
    return out, n_lines


_HH_MM = re.compile(rb"[0-9]{1,2}:[0-9]{2}")


def human_times(buf: bytes) -> dict[int, tuple[tuple[int, int, str] | None, float]]:
    """For ``dmesg -H``: line number -> (last minute anchor (month, day, 'HH:MM:00'), seconds since it).

    The slow path (every line is looked at); only such logs take it.
    """
    out: dict[int, tuple[tuple[int, int, str] | None, float]] = {}
    anchor: tuple[int, int, str] | None = None
    since = 0.0
    months = {m.encode(): i for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)}
    for no, line in enumerate(buf.split(b"\n"), start=1):
        if not line.startswith(b"["):
            out[no] = (anchor, since)
            continue
        end = line.find(b"]")
        stamp = line[1:end].strip() if end > 0 else b""
        if stamp.startswith(b"+"):
            try:
                since += float(stamp[1:])
            except ValueError:
                pass
        elif stamp[:3] in months:
            parts = stamp[3:].split()
            if len(parts) == 2 and parts[0].isdigit() and _HH_MM.fullmatch(parts[1]):
                anchor, since = (months[stamp[:3]], int(parts[0]), parts[1].decode() + ":00"), 0.0
        out[no] = (anchor, since)
    return out
