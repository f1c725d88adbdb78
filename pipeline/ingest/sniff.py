"""What kind of bad file is this: the checks every reader makes before it parses a file.

Reads: the first bytes of one input file (decompressed when it is gzip), from the file
(:func:`file_problem`) or from bytes a reader already read (:func:`problem_of`,
:func:`read_judged`: the same verdict). Writes nothing; a reader turns the verdict into one
quarantine row for the whole file and loads nothing from it.

Without this, each reader met a broken file in its own way: random bytes in a ``.csv.gz``
became ``no_header`` lines, a random-bytes ``kern.log.gz`` was registered with no quarantine
row, a 0-byte export ended the night with a message about column recognition. Here one
function names what is wrong, the same way for every input kind:

- ``empty_file``: 0 bytes, only blank space, or a gzip stream that holds nothing;
- ``bad_gzip``: gzip's magic bytes, but no data can be decompressed;
- ``binary_file``: not text (an image, an archive, a database, random bytes); the detail
  names the format when its signature is known;
- ``bad_encoding``: text in an encoding the reader does not take (UTF-16 logs), or bytes
  that are not text in any encoding the reader knows.

Format-specific verdicts (``bad_json``, ``bad_xlsx``, ``bad_xls``) stay with their readers,
which know the format; this module only judges bytes.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from pathlib import Path

# GZIP_MAGIC and gunzip live in pipeline.vocab.files; re-exported here only until the telemetry
# and kernel readers (smi_*, xid_*) import them from there.
from pipeline.vocab.files import GZIP_MAGIC, gunzip, head_of, read_head  # noqa: F401
from pipeline.warehouse import Rejected

#: How much of a file (decompressed) is judged: enough for a verdict, cheap per file.
HEAD_BYTES = 1 << 16

#: Signatures of formats that are never a text log or export; the detail names them.
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a ZIP archive (an .xlsx workbook or a .zip)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an OLE2 document (an Excel 97-2003 .xls workbook)"),
    (b"%PDF", "a PDF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x7fELF", "an ELF executable"),
    (b"BZh", "bzip2-compressed data (only gzip is decompressed)"),
    (b"\xfd7zXZ\x00", "xz-compressed data (only gzip is decompressed)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data (only gzip is decompressed)"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"LPKSHHRH", "a binary systemd journal: export it with `journalctl -o short-iso` or `-o json`"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"PAR1", "a Parquet file"),
)
#: Bytes that no text holds (C0 controls but tab, line ends, form feed, backspace and ESC,
#: which colour codes and old terminals leave in logs).
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\b\x0b\x1b")
#: A run of NULs is what a crash leaves in a preallocated syslog: padding, not binary data.
_NUL_RUN = re.compile(rb"\x00{16,}")
_NUL_RUN_MIN = b"\x00" * 16
#: Share of non-text bytes above which a head is binary (random bytes: ~11%).
_BINARY_SHARE = 0.02
#: Share of the head's bytes in invalid UTF-8 sequences above which a UTF-8 log is not UTF-8.
_INVALID_SHARE = 0.2


@dataclass(frozen=True)
class Problem:
    """Why a whole file cannot be read: a quarantine reason code and a one-line detail."""

    reason: str
    detail: str

    def rejected(self, raw: str = "") -> Rejected:
        """The file's one quarantine row (no line number: the whole file)."""
        return Rejected(None, self.reason, raw, self.detail)


def head(path: Path, size: int = HEAD_BYTES) -> tuple[bytes, bytes, str | None]:
    """(raw first bytes, their decompressed text when gzip else the same, gzip error or None):
    :func:`pipeline.vocab.files.read_head` with the size judged here.

    Raises OSError when the file cannot be read.
    """
    return read_head(path, size)


def file_problem(path: Path, *, utf16: bool = False, legacy: bool = False, gzip: bool = True) -> Problem | None:
    """What is wrong with the whole file, or None when it is worth parsing.

    Parameters
    ----------
    path
        The input file.
    utf16
        The reader decodes UTF-16 (ticket exports); else UTF-16 text is ``bad_encoding``.
    legacy
        The reader decodes legacy encodings (GBK, Big5, Windows-1252); else a head that is
        mostly invalid UTF-8 is ``bad_encoding``.
    gzip
        The reader decompresses gzip (logs); else gzip data is ``binary_file`` (say so,
        rather than let the reader find no text in it).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.csv"; _ = p.write_bytes(b"")
    >>> file_problem(p).reason
    'empty_file'
    """
    try:
        raw, data, gz_error = head(Path(path))
    except OSError as exc:
        return _unreadable(exc)
    return judge(raw, data, gz_error, utf16=utf16, legacy=legacy, gzip=gzip)


def problem_of(raw: bytes, *, utf16: bool = False, legacy: bool = False, gzip: bool = True) -> Problem | None:
    """:func:`file_problem`'s verdict on a file's raw bytes already read: the whole file, or
    at least its first :data:`HEAD_BYTES` (only those are judged, as there)."""
    return judge(*head_of(raw, HEAD_BYTES), utf16=utf16, legacy=legacy, gzip=gzip)


def read_judged(path: Path, *, utf16: bool = False, legacy: bool = False,
                gzip: bool = True) -> tuple[bytes, Problem | None]:
    """The whole file's raw bytes (not decompressed) and :func:`file_problem`'s verdict on
    them, from one read: a reader that loads whole files reads each once, not its head
    first and then all of it again. ``(b"", unreadable_file)`` when it cannot be read."""
    try:
        raw = (path if isinstance(path, Path) else Path(path)).read_bytes()
    except OSError as exc:
        return b"", _unreadable(exc)
    return raw, problem_of(raw, utf16=utf16, legacy=legacy, gzip=gzip)


def _unreadable(exc: OSError) -> Problem:
    return Problem("unreadable_file", f"cannot read the file: {exc.strerror or exc}")


def judge(raw: bytes, data: bytes, gz_error: str | None, *, utf16: bool = False, legacy: bool = False,
          gzip: bool = True) -> Problem | None:
    """:func:`file_problem` on a head already read by :func:`head` (readers that need the
    first bytes anyway read them once)."""
    if not raw:
        return Problem("empty_file", "the file is empty (0 bytes)")
    if not gzip and raw[:2] == GZIP_MAGIC:
        return Problem("binary_file", "gzip-compressed data; this input is read uncompressed: gunzip it first")
    if gz_error is not None:
        return Problem("bad_gzip", f"gzip magic bytes, but nothing decompresses: {gz_error}")
    if raw[:2] == GZIP_MAGIC and not data:
        return Problem("empty_file", "a gzip file that decompresses to 0 bytes")
    whole = len(raw) < HEAD_BYTES and len(data) < HEAD_BYTES  # the head is the whole file
    # Byte-order marks alone are what a spreadsheet writes when it saves an empty sheet.
    if whole and not data.replace(codecs.BOM_UTF8, b"").replace(codecs.BOM_UTF16_LE, b"").replace(
            codecs.BOM_UTF16_BE, b"").strip(b" \t\r\n\f\x0b\x00"):
        return Problem("empty_file", f"only blank space, NUL padding or byte-order marks ({len(data)} bytes)")
    return text_problem(data, utf16=utf16, legacy=legacy)


def text_problem(data: bytes, *, utf16: bool = False, legacy: bool = False) -> Problem | None:
    """:func:`file_problem`'s verdict on bytes already in hand (a file's decompressed head)."""
    if not utf16 and (_utf16(data) or data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE))):
        return Problem("bad_encoding", "UTF-16 text (as Windows PowerShell writes it); this input is read as "
                                       "UTF-8: convert it with `iconv -f UTF-16 -t UTF-8`")
    if utf16 and _utf16(data):
        return None
    for magic, what in _SIGNATURES:
        if data.startswith(magic):
            return Problem("binary_file", f"not text: {what}")
    # A substring search first: it is far cheaper than the regex scan of a whole head, and
    # most heads hold no NUL run (the smi and kernel stages judge one head per file).
    body = _NUL_RUN.sub(b"", data) if _NUL_RUN_MIN in data else data
    odd = len(body) - len(body.translate(None, _CONTROL))
    if body and odd > _BINARY_SHARE * len(body):
        return Problem("binary_file", f"not text: {odd} control or NUL bytes in the first {len(body)} "
                                      f"(starts {data[:8].hex(' ')})")
    if not legacy and (bad := _invalid_utf8(body)) > _INVALID_SHARE * len(body):
        return Problem("bad_encoding", f"not UTF-8 text: {bad} of the first {len(body)} bytes form no UTF-8 character")
    return None


def _utf16(data: bytes) -> bool:
    """UTF-16 by its BOM, or by ASCII text with every other byte zero."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) and not data.startswith(codecs.BOM_UTF32_LE):
        return True
    sample = data[:4096]
    if len(sample) < 8:
        return False
    halves = (sample[1::2], sample[0::2])
    return any(h.count(0) > 0.4 * len(h) and other.count(0) < 0.05 * len(other)
               for h, other in (halves, halves[::-1]))


def _invalid_utf8(data: bytes) -> int:
    """About how many bytes of ``data`` are in invalid UTF-8 sequences (one replacement
    character each; a last character cut by the head's end counts a few)."""
    if data.isascii():
        return 0
    return data.decode("utf-8", errors="replace").count("\ufffd")
