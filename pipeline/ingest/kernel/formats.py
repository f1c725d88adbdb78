"""The text of kernel-log lines: time prefixes and Xid/SXid event shapes, as patterns.

Hosts archive kernel messages in many forms. Every form puts a time prefix (or none) before
the kernel's own text, and the NVIDIA driver's text is the same in all of them::

    [ 1234.567890] NVRM: Xid ...                              raw dmesg (uptime)
    [Tue Mar  5 10:11:12 2024] NVRM: Xid ...                  dmesg -T (local ctime)
    [Mar 5 10:11] ... / [  +0.000123] ...                     dmesg -H (minute anchor, deltas)
    kern  :err   : 2024-03-05T10:11:12,123456+01:00 NVRM: ... dmesg -x --time-format iso
    Mar  5 10:11:12 host kernel: [ 1234.5] NVRM: ...          BSD syslog / kern.log / journalctl short
    2024-03-05T10:11:12.123456+08:00 host kernel: NVRM: ...   RFC 3339 rsyslog / journalctl short-iso
    kernel: NVRM: ...                                         no time at all
    Tue 2024-03-05 10:11:12 UTC host kernel: ...              journalctl short-full (zone name)
    1709633472.123456 host kernel: ...                        journalctl short-unix
    <4>1 2024-03-05T10:11:12+00:00 host kernel - - - ...      RFC 5424 forwarding
    10.0.0.7: kern: warning: [2024-03-05T10:11:12.29Z]: ...   host: facility: level: [iso]: (Talos)
    host gpud[12]: ... NVRM: Xid ...                          a program quoting the kernel: no event

journald's ``-o json``/``-o verbose`` entries and shippers' JSON are first rewritten as
syslog-style lines (:mod:`pipeline.ingest.kernel.journal`); ANSI colours, paste quoting, a
BOM and the NULs a crash leaves are removed before the prefix is read. A line ends at LF,
CRLF or a lone CR (:func:`pipeline.ingest.kernel.scan.lf_lines`).

The patterns are written for polars' (Rust) regex engine, which runs them over all the
candidate lines of a file at once (:mod:`pipeline.ingest.kernel.parse`): no look-around,
``[0-9]`` rather than the Unicode ``\\d``.
"""

from __future__ import annotations

from datetime import datetime

MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)}

_UP = r"[0-9]{1,10}\.[0-9]{1,9}"
_HEX_PCI = r"(?P<dom>[0-9a-fA-F]{4,8}):(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})(?:\.(?P<fn>[0-7]))?"

#: Colour codes and paste junk before a line ("> " quoting, bullets, spaces, a BOM, the NULs
#: a crash leaves in a syslog file).
ANSI_RS = r"\x1b\[[0-9;]*m"
JUNK_RS = r"^(?:[>|*#]\s?|\s|\x00|\x{feff})+"

#: The time prefix, anchored at the line start; every part optional.
PREFIX_RS = "".join([
    r"^(?:<[0-9]{1,3}>(?:1 )?)?",                            # dmesg -r priority; RFC 5424 '<4>1 '
    r"(?:(?:[0-9A-Za-z][\w.\-]*:\s)?(?:kern|user|daemon|syslog|auth|authpriv|local[0-7])\s*:\s*"
    r"(?:emerg|alert|crit|err|warn|warning|notice|info|debug)\s*:\s)?",   # dmesg -x 'kern  :err   : ', 'host: kern: warning: '
    r"(?:",
    rf"\[\s*(?P<up>{_UP})\]",                                # [ 1234.567890]
    r"|\[(?:[A-Z][a-z]{2}\s)?(?P<ct_mon>[A-Z][a-z]{2})\s+(?P<ct_day>[0-9]{1,2})\s"
    r"(?P<ct_time>[0-9]{2}:[0-9]{2}:[0-9]{2})\s(?P<ct_year>[0-9]{4})\]",   # [Tue Mar  5 10:11:12 2024]
    rf"|\[\s*\+(?P<delta>{_UP})\]",                          # dmesg -H [  +0.000123]
    r"|\[(?P<hm_mon>[A-Z][a-z]{2})\s?(?P<hm_day>[0-9]{1,2})\s(?P<hm_time>[0-9]{2}:[0-9]{2})\]",  # [Mar 5 10:11]
    r"|\[?(?:[A-Z][a-z]{2} )?(?P<iso>[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?)\]?:?"                  # RFC 3339, '[...Z]:', short-full's weekday
    r"(?: (?P<zname>UTC|GMT|[A-Z]{1,2}[SD]T|CES?T|EES?T|WES?T|MSK|IST|JST|KST|HKT|SGT|AE[SD]T)\b)?",
    r"|(?P<unix>[0-9]{9,10}\.[0-9]{1,9})\s",                # journalctl -o short-unix
    r"|(?P<bsd_mon>[A-Z][a-z]{2})\s+(?P<bsd_day>[0-9]{1,2})\s(?P<bsd_time>[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?)",
    r")?\s*",
    r"(?:(?:(?P<host>[A-Za-z0-9][\w.\-]*)\s+)?"
    r"(?:kernel(?:\[[0-9]+\])?:|kernel (?:-|[0-9]+) \S+ (?:-|\[[^\]]*\])"  # RFC 5424 'kernel - - -'
    r"|(?P<tag>[A-Za-z_][\w.\-/@]*)\[[0-9]+\]:)\s*)?",  # 'host kernel:' or a program's 'gpud[12]:'
    rf"(?:\[\s*(?P<up2>{_UP})\]\s*)?",                      # kernel uptime inside syslog
])

#: The event. Its code is the number right after the PCI id; later numbers
#: ("caused by previous Xid 149") are message text.
# The head of the event up to its code. It starts with a literal so the engine can jump to
# it, and has no ".*" tail: capturing a long tail is what makes such patterns slow.
# A bug report or a redacted export elides the id (``Xid (PCI:...): 145, ...``): the event is
# kept, its PCI id null.
_ELIDED = r"(?:PCI:)?(?:\.\.\.|…)"
EVENT_RS = (r"(?P<kind>S?Xid) ?\( ?(?:(?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
            rf"|{_ELIDED})(?P<inst>[^)]*)\): *(?P<code>[0-9]{{1,6}})(?:[^0-9A-Za-z_]|$)")
#: Everything up to and including the code: removing it leaves the event's own text.
EVENT_HEAD_RS = (r"^.*?S?Xid ?\( ?(?:(?:PCI:)?[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}|" + _ELIDED +
                 r")[^)]*\): *[0-9]{1,6}(?:[^0-9A-Za-z_]|$)")
#: Looks like an event, so an unreadable one is quarantined rather than skipped.
EVENT_LIKE_RS = r"\bS?Xid\s*\("
PID_RS = (r"^,?\s*pid=(?P<pid>'?<unknown>'?|[0-9]+|[^,\s]*)(?:,\s*name=(?P<name>[^,]*))?"
          r"(?:,\s*(?P<msg>.*))?$")
SUBCODE_RS = r"^([A-Z][A-Z0-9]*_[A-Z0-9_]+)(?-u:\b)"
FATAL_RS = r"(?i)(?-u:\b)(fatal|non-?fatal)(?-u:\b)"
RECOVERY_RS = r"(?i)recovery action changed from .*? to (?:0x[0-9a-fA-F]+\s*)?\(([^)]*)\)"
GPU_AT_RS = (r"NVRM: GPU at (?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?):"
             r"\s*(?P<uuid>GPU-[0-9a-fA-F-]{8,})")
SERIAL_RS = r"NVRM: GPU Board Serial Number:\s*(\S*)"
FELL_START_RS = rf"NVRM: The NVIDIA GPU {_HEX_PCI}"
#: The one-line forms: ``NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.`` (current
#: drivers, next to the Xid 79 line), ``NVRM: GPU at PCI:0000:65:00: GPU has fallen off the
#: bus.`` and ``NVRM: GPU at 0000:01:00.0 has fallen off the bus.`` (older ones).
FELL_ONE_RS = rf"NVRM: GPU (?:at )?(?:PCI:)?{_HEX_PCI}:? (?:GPU )?has fallen off the bus"
#: The driver failing to bring a GPU up (after it fell off the bus, typically):
#: ``NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)``; older drivers name no GPU.
RM_INIT_RS = (r"NVRM: (?:GPU (?:at )?(?:PCI:)?(?P<dom>[0-9a-fA-F]{4,8}):(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})"
              r"(?:\.(?P<fn>[0-7]))?:? )?RmInitAdapter failed!? ?(?P<code>\([0-9a-fA-Fx:]*\))?")
RM_INIT_TEXT = "RmInitAdapter failed"
RTC_RS = (r"setting system clock to (?P<iso>[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2})"
          r"(?: UTC)?(?: \((?P<epoch>[0-9]+)\))?")
FELL_TEXT = "GPU has fallen off the bus"
#: journalctl's line between boots in its text output; the id names the boot in every file.
JOURNAL_BOOT_RS = r"^-- Boot ([0-9a-f]{32}) --"





def _at(year: int, month: int, day: int, hms: str) -> datetime:
    """``datetime`` from a date and ``HH:MM:SS[.ffffff]`` (strptime is ten times slower)."""
    hh, mm, ss = hms.split(":")
    sec, _, frac = ss.partition(".")
    return datetime(year, month, day, int(hh), int(mm), int(sec), int((frac + "000000")[:6]) if frac else 0)


def with_year(md: tuple[int, int, str], year: int) -> datetime | None:
    """A year-less (month, day, time) as a datetime, or None when it cannot exist (Feb 29)."""
    try:
        return _at(year, *md)
    except (ValueError, TypeError):
        return None
