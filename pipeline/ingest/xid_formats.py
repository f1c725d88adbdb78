"""Reading one kernel-log line: its time prefix and, if it is one, its Xid/SXid event.

Hosts archive kernel messages in many forms. Every form puts a time prefix (or none) before
the kernel's own text, and the NVIDIA driver's text is the same in all of them::

    [ 1234.567890] NVRM: Xid ...                              raw dmesg (uptime)
    [Tue Mar  5 10:11:12 2024] NVRM: Xid ...                  dmesg -T (local ctime)
    [Mar 5 10:11] ... / [  +0.000123] ...                     dmesg -H (minute anchor, deltas)
    kern  :err   : 2024-03-05T10:11:12,123456+01:00 NVRM: ... dmesg -x --time-format iso
    Mar  5 10:11:12 host kernel: [ 1234.5] NVRM: ...          BSD syslog / journalctl short
    2024-03-05T10:11:12.123456+08:00 host kernel: NVRM: ...   RFC 3339 rsyslog / short-iso
    kernel: NVRM: ...                                         no time at all

This module only reads text; putting years, zones and boot times together is
:mod:`pipeline.ingest.xid`'s job. Nothing here raises on any input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)}

# Leading junk of a pasted or quoted line: ANSI colours, "> " quoting, list bullets, spaces.
_JUNK = re.compile(r"^(?:\x1b\[[0-9;]*m|[>|*#]\s?|\s)+")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

_PREFIX = re.compile(
    r"""^(?:<\d{1,3}>)?                                   # dmesg -r priority
    (?:[a-z]{2,8}\s*:[a-z]{3,7}\s*:\s)?                   # dmesg -x 'kern  :err   : '
    (?:
        \[\s*(?P<up>\d{1,10}\.\d{1,9})\]                  # [ 1234.567890]
      | \[(?:[A-Z][a-z]{2}\s)?(?P<ct_mon>[A-Z][a-z]{2})\s+(?P<ct_day>\d{1,2})\s
          (?P<ct_time>\d\d:\d\d:\d\d)\s(?P<ct_year>\d{4})\]   # [Tue Mar  5 10:11:12 2024]
      | \[\s*\+(?P<delta>\d{1,10}\.\d{1,9})\]            # dmesg -H [  +0.000123]
      | \[(?P<hm_mon>[A-Z][a-z]{2})\s?(?P<hm_day>\d{1,2})\s(?P<hm_time>\d\d:\d\d)\]  # dmesg -H [Mar 5 10:11]
      | (?P<iso>\d{4}-\d\d-\d\d[T\ ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)
      | (?P<bsd_mon>[A-Z][a-z]{2})\s+(?P<bsd_day>\d{1,2})\s(?P<bsd_time>\d\d:\d\d:\d\d(?:\.\d{1,9})?)
    )?
    \s*
    (?:(?P<host>[A-Za-z0-9][\w.\-]*)\s+)?                 # syslog host (only before 'kernel:')
    (?P<kernel>kernel(?:\[\d+\])?:\s*)?
    (?:\[\s*(?P<up2>\d{1,10}\.\d{1,9})\]\s*)?             # kernel uptime stamp inside syslog
    """,
    re.VERBOSE,
)

#: The event itself. The code is the number right after the PCI id; later numbers
#: ("caused by previous Xid 149") are message text.
EVENT = re.compile(
    r"""(?P<kind>S?Xid)\s*\(\s*(?:PCI:)?
    (?P<dom>[0-9a-fA-F]{4,8}):(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})(?:\.(?P<fn>[0-7]))?
    (?P<inst>[^)]{0,80})\):\s*(?P<code>\d{1,6})\b(?P<rest>.*)$""",
    re.VERBOSE,
)
#: Looks like an event (so an unreadable one is quarantined, not skipped).
EVENT_LIKE = re.compile(r"\bS?Xid\s*\(")
_PID = re.compile(r"^,?\s*pid=(?P<pid>'?<unknown>'?|\d+|[^,\s]*)(?:,\s*name=(?P<name>[^,]*))?(?:,\s*(?P<msg>.*))?$")
_FATAL = re.compile(r"\b(Fatal|Non-?fatal)\b", re.IGNORECASE)
_SUBCODE = re.compile(r"^([A-Z][A-Z0-9]*_[A-Z0-9_]+)\b")
_RECOVERY = re.compile(r"recovery action changed from .*? to (?:0x[0-9a-fA-F]+\s*)?\(([^)]*)\)", re.IGNORECASE)

GPU_AT = re.compile(
    r"NVRM: GPU at (?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?):\s*(?P<uuid>GPU-[0-9a-fA-F-]{8,})")
SERIAL = re.compile(r"NVRM: GPU Board Serial Number:\s*(?P<serial>\S*)")
FELL_START = re.compile(r"NVRM: The NVIDIA GPU (?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
RTC_BOOT = re.compile(r"setting system clock to (?P<iso>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d)(?: UTC)?(?: \((?P<epoch>\d+)\))?")


def canonical_pci(dom: str, bus: str, dev: str, fn: str | None = None) -> str:
    """``0000:3b:00.0`` from the parts of any PCI id form (``00000000:3B:00``, ``PCI:0000:3b:00``).

    >>> canonical_pci("00000000", "3B", "00")
    '0000:3b:00.0'
    """
    return f"{int(dom, 16):04x}:{bus.lower()}:{dev.lower()}.{fn or '0'}"


def canonical_pci_text(text: str | None) -> str | None:
    """Canonical form of a PCI id written as text, or None when it is not one."""
    if not text:
        return None
    m = re.fullmatch(r"\s*(?:PCI:)?([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?\s*", text)
    return canonical_pci(*m.groups()) if m else None


@dataclass
class Prefix:
    """What a line's prefix says about its time; every field may be None."""

    uptime: float | None = None
    aware: datetime | None = None      # the line's own zone-qualified time
    local: datetime | None = None      # a local wall-clock time with its year
    md: tuple[int, int, str] | None = None  # (month, day, "HH:MM[:SS[.f]]") without a year
    delta: float | None = None         # dmesg -H relative seconds
    host: str | None = None
    text: str = ""                     # the kernel's own text


def clean(line: str) -> str:
    """Drop carriage returns, colours and paste junk around a line."""
    line = line.rstrip("\r\n")
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    return _JUNK.sub("", line, count=1) if line[:1] in " >|*#\t" else line


def read_prefix(line: str) -> Prefix:
    """Split a cleaned line into its time prefix and the kernel's text."""
    m = _PREFIX.match(line)
    p = Prefix(text=line[m.end():] if m else line)
    if not m:
        return p
    g = m.groupdict()
    up = g["up"] or g["up2"]
    if up:
        p.uptime = float(up)
    if g["kernel"]:
        p.host = g["host"]
    elif g["host"]:  # a word before the text that was not a syslog host: put it back
        p.text = line[m.start("host"):]
    try:
        if g["ct_mon"]:
            p.local = datetime.strptime(f"{g['ct_year']} {MONTHS[g['ct_mon']]} {g['ct_day']} {g['ct_time']}", "%Y %m %d %H:%M:%S")
        elif g["iso"]:
            d = datetime.fromisoformat(g["iso"].replace(" ", "T").replace("Z", "+00:00"))
            if d.tzinfo is None:
                p.local = d
            else:
                p.aware = d
        elif g["bsd_mon"]:
            p.md = (MONTHS[g["bsd_mon"]], int(g["bsd_day"]), g["bsd_time"])
        elif g["hm_mon"]:
            p.md = (MONTHS[g["hm_mon"]], int(g["hm_day"]), g["hm_time"] + ":00")
        elif g["delta"]:
            p.delta = float(g["delta"])
    except (KeyError, ValueError):
        pass  # an impossible date (Feb 30): the line keeps no time, the event is still read
    return p


def with_year(md: tuple[int, int, str], year: int) -> datetime | None:
    """A year-less (month, day, time) as a datetime, or None when it cannot exist (Feb 29)."""
    month, day, hms = md
    try:
        return datetime.strptime(f"{year} {month} {day} {hms}", "%Y %m %d %H:%M:%S.%f" if "." in hms else "%Y %m %d %H:%M:%S")
    except ValueError:
        return None


@dataclass
class Event:
    """One Xid/SXid event read from a line."""

    kind: str
    xid: int
    pci_bus_id: str
    pid: int | None
    process: str | None
    message: str
    gpu_instance: str | None
    fatal: bool | None
    subcode: str | None
    recovery_action: str | None


def read_event(text: str) -> Event | None:
    """The event a kernel text holds, or None when it holds none readable."""
    m = EVENT.search(text)
    if not m:
        return None
    g = m.groupdict()
    rest = g["rest"].strip()
    pid = process = None
    pm = _PID.match(rest) if "pid=" in rest[:8] else None
    if pm:
        raw_pid = pm["pid"]
        # Old drivers print pid=0 when no process is known: no pid, like '<unknown>'.
        pid = int(raw_pid) if raw_pid.isdigit() and len(raw_pid) < 12 and int(raw_pid) > 0 else None
        name = (pm["name"] or "").strip()
        process = name if name and name.strip("'") != "<unknown>" else None
        message = (pm["msg"] or "").strip()
    else:
        message = rest[1:].strip() if rest.startswith(",") else rest
    fm = _FATAL.search(message[:120])
    fatal = None if fm is None else fm.group(1).lower() == "fatal"
    sm = _SUBCODE.match(message)
    rm = _RECOVERY.search(message)
    inst = g["inst"].strip() or None
    return Event(
        kind=g["kind"], xid=int(g["code"]),
        pci_bus_id=canonical_pci(g["dom"], g["bus"], g["dev"], g["fn"]),
        pid=pid, process=process, message=message, gpu_instance=inst, fatal=fatal,
        subcode=sm.group(1) if sm else None, recovery_action=rm.group(1).strip() if rm else None,
    )


def is_companion(ev: Event) -> bool:
    """An SXid's second and third lines (``Severity ...``, ``Data {...}``) belong to the first."""
    return ev.kind == "SXid" and (ev.message.startswith("Severity") or ev.message.startswith("Data"))
