"""Turn journald's structured exports and pasted, wrapped lines back into plain kernel lines.

``journalctl -o json`` writes one JSON object per entry and ``-o verbose`` one block of
``FIELD=value`` lines under a dated header; both carry the kernel's text in ``MESSAGE``.
Only the few candidate lines :mod:`pipeline.ingest.kernel.scan` found are rewritten, as the
syslog-style line the rest of the parser reads (``<iso time> <host> kernel: [uptime] text``),
so the patterns in :mod:`pipeline.ingest.kernel.formats` need no journald cases. A user-space
entry (``SYSLOG_IDENTIFIER`` not ``kernel``) keeps its tag (``gpud[0]:``), so an agent that
quotes an Xid is not taken for the kernel.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

_VERBOSE_HEAD = re.compile(
    rb"^[A-Z][a-z]{2} (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})?) ([A-Za-z]{1,6}|[+-]\d{2}:?\d{2})?\s*\[")
_FIELD = re.compile(rb"^\s+([A-Z_][A-Z0-9_]*)=(.*)$")
#: How a line that starts a new log record begins; a pasted Xid line's wrapped tail does not.
_RECORD_START = re.compile(
    rb"^(?:<\d{1,3}>|\x1b\[|\x00|\xef\xbb\xbf|\[|\{|[a-z]{2,8}\s*:|[A-Z][a-z]{2}\s|\d{4}-\d\d-\d\d|\d{1,3}(?:\.\d{1,3}){3}|"
    rb"[\w.\-]+\s+kernel\b|kernel\b|\s*$|\s+NVRM:|\s+[A-Z_][A-Z0-9_]*=)")
_ZONED_ISO = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)$")
_UTC_NAMES = {b"UTC", b"GMT", b"Z", b"+00:00", b"+0000"}


def _line(iso: str | None, host: str | None, ident: str | None, pid: str | None,
          uptime: float | None, text: str) -> bytes:
    """A syslog-style line from a journal entry's fields."""
    text = " ".join(text.replace("\r", "").split("\n"))
    parts = [iso or "", host or ""]
    if ident in (None, "", "kernel"):
        parts.append("kernel:" + (f" [{uptime:.6f}]" if uptime is not None else ""))
    else:
        parts.append(f"{ident}[{pid or 0}]:")
    return (" ".join(p for p in parts if p) + " " + text).encode()


def _iso_from_us(us: str | None) -> str | None:
    try:
        return datetime.fromtimestamp(int(us) / 1e6, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _uptime(us: str | None) -> float | None:
    try:
        return int(us) / 1e6 if us is not None else None
    except (TypeError, ValueError):
        return None


def _first(entry: dict, keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` that holds text (or a number), as text; ``{"name": ...}`` is read through."""
    for k in keys:
        v = entry.get(k)
        if isinstance(v, dict):
            v = v.get("name") or v.get("hostname")
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            return str(v)
    return None


_ARRAY_MESSAGE = re.compile(rb'"MESSAGE"\s*:\s*\[')


def is_json_log(head: bytes) -> bool:
    """Whether the log is one JSON object per line (``journalctl -o json``, a shipper's export)."""
    return re.match(rb"\s*\{", head[:64]) is not None


def decode_array_messages(buf: bytes) -> bytes:
    """``buf`` with every ``journalctl -o json`` entry whose ``MESSAGE`` is a byte array
    (journald's form for text that is not UTF-8) rewritten with that text as a string, so
    the scanners' literal search finds an Xid in it; one entry per line, so line numbers
    stay. Anything else, a JSON export without such entries included, is returned as is."""
    if not is_json_log(buf) or _ARRAY_MESSAGE.search(buf) is None:
        return buf
    lines = buf.split(b"\n")
    for k, line in enumerate(lines):
        if _ARRAY_MESSAGE.search(line) is None:
            continue
        try:
            entry = json.loads(line)
            msg = entry["MESSAGE"]
            entry["MESSAGE"] = bytes(int(b) & 0xFF for b in msg).decode("utf-8", errors="replace")
        except (ValueError, RecursionError, TypeError, KeyError):
            continue  # not an entry after all: left for the scanners as it is
        lines[k] = json.dumps(entry, ensure_ascii=False).encode()
    return b"\n".join(lines)


def from_json(line: bytes) -> bytes:
    """A JSON log entry as a plain line (unchanged when it is not one).

    ``journalctl -o json`` (``MESSAGE``, ``__REALTIME_TIMESTAMP`` in microseconds,
    ``_HOSTNAME``) and the usual shippers' exports (Fluent Bit, Vector, Elastic, Loki:
    ``message``/``log``/``msg`` with ``@timestamp``/``time``/``timestamp`` as RFC 3339).
    """
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError):
        return line
    if not isinstance(entry, dict):
        return line
    msg = entry.get("MESSAGE")
    if isinstance(msg, list):  # journald writes non-UTF-8 messages as a byte array
        try:
            msg = bytes(int(b) & 0xFF for b in msg).decode("utf-8", errors="replace")
        except (TypeError, ValueError):
            return line
    if msg is None:
        msg = _first(entry, ("message", "log", "msg"))
        if msg is None:
            return line
        if " kernel: " in msg or msg.startswith("kernel: "):  # a whole syslog line, shipped as is
            return " ".join(msg.replace("\r", "").split("\n")).encode()
    if not isinstance(msg, str):
        return line
    kernel = entry.get("_TRANSPORT") == "kernel" or entry.get("SYSLOG_IDENTIFIER") in (None, "kernel")
    iso = _iso_from_us(_first(entry, ("__REALTIME_TIMESTAMP",)))
    if iso is None:
        iso = _first(entry, ("@timestamp", "time", "timestamp"))
        iso = iso if iso and _ZONED_ISO.match(iso) else None
    return _line(iso, _first(entry, ("_HOSTNAME", "host", "hostname")),
                 None if kernel else _first(entry, ("SYSLOG_IDENTIFIER",)) or "user", _first(entry, ("_PID",)),
                 _uptime(_first(entry, ("_SOURCE_MONOTONIC_TIMESTAMP",))) if kernel else None, msg)


def from_verbose(buf: bytes, start: int) -> bytes | None:
    """The ``journalctl -o verbose`` entry whose ``MESSAGE=`` line starts at ``start``, as a
    plain line; None when no dated header is found above it."""
    head = start
    for _ in range(200):  # an entry has a few dozen fields at most
        if head == 0:
            return None
        head = buf.rfind(b"\n", 0, head - 1) + 1
        if buf[head:head + 1] not in (b" ", b"\t"):
            break
    else:
        return None
    end = buf.find(b"\n", head)
    m = _VERBOSE_HEAD.match(buf[head:len(buf) if end == -1 else end])
    if not m:
        return None
    stop = buf.find(b"\n", start)
    while stop != -1 and buf[stop + 1:stop + 2] in (b" ", b"\t"):
        stop = buf.find(b"\n", stop + 1)
    fields: dict[str, str] = {}
    for raw in buf[head:len(buf) if stop == -1 else stop].split(b"\n")[1:]:
        f = _FIELD.match(raw.rstrip(b"\r"))
        if f:
            fields.setdefault(f[1].decode(), f[2].decode("utf-8", errors="replace"))
    when, zone = m[1].decode(), m[2] or b""
    iso = when.replace(" ", "T") + ("+00:00" if zone in _UTC_NAMES else "")  # other zones: the site's
    kernel = fields.get("_TRANSPORT") == "kernel" or fields.get("SYSLOG_IDENTIFIER") in (None, "kernel")
    return _line(iso, fields.get("_HOSTNAME"), None if kernel else fields.get("SYSLOG_IDENTIFIER") or "user",
                 fields.get("_PID"), _uptime(fields.get("_SOURCE_MONOTONIC_TIMESTAMP")) if kernel else None,
                 fields.get("MESSAGE", ""))


def wrapped_tail(buf: bytes, line: bytes, end: int) -> tuple[bytes, int] | None:
    """The next line when it is the wrapped tail of ``line`` (an Xid line that ends at byte
    ``end``): the Xid line has a time prefix and the next line starts no record of its own.

    Returns (joined line, end of the tail) or None.
    """
    if buf[end + 1:end + 4] == line[:3] and line[:1] not in (b" ", b"\t"):
        return None  # the next line opens as this one does: a record of its own (the usual case)
    if end >= len(buf) or line.lstrip(b" \t>").startswith((b"NVRM", b"nvidia-nvswitch")):
        return None  # a log without time prefixes: every line looks like a tail
    nxt_end = buf.find(b"\n", end + 1)
    nxt_end = len(buf) if nxt_end == -1 else nxt_end
    nxt = buf[end + 1:nxt_end]
    if not nxt.strip() or len(nxt) > 400 or _RECORD_START.match(nxt) or b"NVRM" in nxt or b"Xid" in nxt:
        return None
    head = line.rstrip(b"\r")
    if nxt[:1] in (b" ", b"\t"):
        return head.rstrip() + b" " + nxt.strip(), nxt_end
    return head + nxt.rstrip(b"\r"), nxt_end  # a terminal's hard wrap cuts mid-word
