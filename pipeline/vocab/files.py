"""Opening an input file that may be gzip-compressed, known by its magic bytes, never its name:
rotation writes ``syslog.2.gz``, but people also gzip a file and keep its name, or name a
plain file ``.gz``.

Python readers use :func:`open_bytes` / :func:`open_text` (streaming), :func:`read_bytes`
(the whole file, with where a damaged stream breaks) or :func:`read_head` (the first bytes,
for judging a file; :func:`head_of` the same of bytes already read); a DuckDB ``read_csv`` of the same file takes :func:`compression_sql` as
its ``compression`` argument, so both read the same text (a property test checks it).
A damaged stream keeps what decompresses before the break: a rotation copied while it was
being written still gives its lines.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import BinaryIO, TextIO

from pipeline.vocab.sql import literal

GZIP_MAGIC = b"\x1f\x8b"
#: gzip's window bits for zlib: a gzip header and trailer around deflate data.
_GZIP_WBITS = 16 + zlib.MAX_WBITS


def is_gzip(path: str | Path) -> bool:
    """Whether the file starts with gzip's magic bytes. Raises OSError when it cannot be read."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def open_bytes(path: str | Path) -> BinaryIO:
    """The file's bytes as a stream, decompressed when it is gzip (every member).

    Reading a damaged gzip stream raises ``EOFError``, ``zlib.error`` or ``gzip.BadGzipFile``
    at the break; :func:`read_bytes` keeps what comes before it.
    """
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")  # type: ignore[return-value]


def open_text(path: str | Path, encoding: str = "utf-8", errors: str = "replace") -> TextIO:
    """The file's text as a stream (universal newlines off: line ends are kept as written)."""
    return io.TextIOWrapper(open_bytes(path), encoding=encoding, errors=errors, newline="")


def compression_sql(path: str | Path) -> str:
    """The ``compression`` argument of DuckDB's ``read_csv`` for the file, from its magic
    bytes: ``'gzip'`` or ``'none'`` (DuckDB's own ``'auto'`` goes by the name)."""
    return literal("gzip" if is_gzip(path) else "none")


def gunzip(data: bytes) -> tuple[bytes, str | None]:
    """``data`` decompressed when it is gzip (every member), and where it breaks (cut short,
    corrupted, garbage after its end) or None. What decompresses before a break is kept.

    >>> gunzip(gzip.compress(b"a\\n") + gzip.compress(b"b\\n"))
    (b'a\\nb\\n', None)
    """
    if data[:2] != GZIP_MAGIC:
        return data, None
    out: list[bytes] = []
    while True:
        d = zlib.decompressobj(_GZIP_WBITS)
        try:
            out.append(d.decompress(data))
        except zlib.error as exc:
            return b"".join(out), f"compressed data is damaged after {sum(map(len, out))} bytes: {exc}"
        if not d.eof:
            return b"".join(out), f"the gzip stream is cut short after {sum(map(len, out))} bytes"
        data = d.unused_data
        if data[:2] != GZIP_MAGIC:  # the end, NUL padding, or garbage after the last member
            tail = f"{len(data)} bytes of garbage after the gzip data" if data.strip(b"\x00") else None
            return b"".join(out), tail


def read_bytes(path: str | Path) -> tuple[bytes, str | None]:
    """The whole file, decompressed when it is gzip, and where a damaged stream breaks
    (:func:`gunzip`) or None."""
    return gunzip(Path(path).read_bytes())


def read_head(path: str | Path, size: int) -> tuple[bytes, bytes, str | None]:
    """(the first ``size`` raw bytes, up to ``size`` bytes of their text when gzip else the
    same, the gzip error or None). Raises OSError when the file cannot be read."""
    with open(path, "rb") as f:
        return head_of(f.read(size), size)


def head_of(raw: bytes, size: int) -> tuple[bytes, bytes, str | None]:
    """:func:`read_head` of a file whose first bytes (``size`` or more, or the whole file)
    are already read: a reader that needs the whole file judges it from the same read."""
    raw = raw[:size]
    if raw[:2] != GZIP_MAGIC:
        return raw, raw, None
    d = zlib.decompressobj(_GZIP_WBITS)
    try:
        data = d.decompress(raw, size)
    except zlib.error as exc:
        return raw, b"", str(exc)
    if not data and not d.eof and len(raw) < size:
        return raw, b"", "the stream ends before any data"
    return raw, data, None
