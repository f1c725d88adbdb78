"""Finding the few lines of a kernel log that matter, fast.

About one line in a hundred of a busy host's kernel log is the NVIDIA driver's. Running a
regular expression over every line costs many times the reading of the file, so the file is
read whole and searched for rare bytes first: ``memchr`` for ``X`` then a check for ``Xid``
(covers ``SXid``), ``N`` then ``NVRM`` (GPU map, fallen-off-the-bus lines), and, only in
uptime-stamped logs, the RTC boot marker. Only those lines are decoded and parsed.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np

_HUMAN_MARK = re.compile(rb"^\[(?:\s*\+\d+\.\d+|[A-Z][a-z]{2}\s?\d{1,2} \d\d:\d\d)\]", re.MULTILINE)
_UPTIME_MARK = re.compile(rb"^(?:<\d{1,3}>)?(?:[a-z]{2,8}\s*:[a-z]{3,7}\s*:\s)?\[\s*\d+\.\d+\]", re.MULTILINE)


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by magic, not by name)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            # A truncated rotation: keep what decompresses.
            d = gzip.GzipFile(fileobj=__import__("io").BytesIO(data))
            chunks = []
            try:
                while block := d.read(1 << 20):
                    chunks.append(block)
            except (OSError, EOFError):
                pass
            data = b"".join(chunks)
    return data


def _starts(buf: bytes, first: bytes, word: bytes, out: set[int]) -> None:
    """Add the start offset of every line holding ``word`` (found via its rare first byte)."""
    n = len(word)
    find, rfind = buf.find, buf.rfind
    i = find(first)
    while i != -1:
        if buf[i:i + n] == word:
            s = rfind(b"\n", 0, i) + 1
            out.add(s)
            e = find(b"\n", i)
            if e == -1:
                break
            i = find(first, e)
        else:
            i = find(first, i + 1)


def is_human(buf: bytes) -> bool:
    """Whether the log is ``dmesg -H`` (relative deltas): its times need every line."""
    return _HUMAN_MARK.search(buf, 0, 8192) is not None


def is_uptime(buf: bytes) -> bool:
    return _UPTIME_MARK.search(buf, 0, 8192) is not None


def candidate_lines(buf: bytes) -> list[tuple[int, bytes]]:
    """(1-based line number, line bytes) of every line that may matter, in file order."""
    starts: set[int] = set()
    _starts(buf, b"X", b"Xid", starts)
    _starts(buf, b"N", b"NVRM", starts)
    if is_uptime(buf):
        i = buf.find(b"setting system clock to")
        while i != -1:
            starts.add(buf.rfind(b"\n", 0, i) + 1)
            i = buf.find(b"setting system clock to", i + 1)
    if not starts:
        return []
    order = sorted(starts)
    arr = np.frombuffer(buf, dtype=np.uint8)
    out = []
    line_no, prev = 1, 0
    for s in order:
        line_no += int(np.count_nonzero(arr[prev:s] == 10))
        prev = s
        e = buf.find(b"\n", s)
        out.append((line_no, buf[s:] if e == -1 else buf[s:e]))
    return out


def count_lines(buf: bytes) -> int:
    if not buf:
        return 0
    n = int(np.count_nonzero(np.frombuffer(buf, dtype=np.uint8) == 10))
    return n + (0 if buf.endswith(b"\n") else 1)


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
            if len(parts) == 2 and parts[0].isdigit():
                anchor, since = (months[stamp[:3]], int(parts[0]), parts[1].decode() + ":00"), 0.0
        out[no] = (anchor, since)
    return out
