"""Ingest the asset registry ``DATA/inventory.csv`` into the ``inventory`` table.

Reads: ``inventory.csv`` (the contract's columns, in any order and case, among any others).
Writes: ``inventory``. The file is small and authoritative, so a changed file replaces the
table. Registries are kept by hand and exported from spreadsheets, so the reader takes what
they give: ``;``/tab/``|`` separators, ``Installed At`` or ``SERIAL`` headers, a few common
other names (``hostname``, ``serial_number``, ``gpu_index``), slots written ``GPU3``, dates
as ``2024/03/05``, ``05.03.2024``, ``5-Mar-2024``, ISO with ``T..Z`` or Excel day numbers
(day first when any date in the file shows a day above 12), and serials Excel turned into
``1650523300349.0``. Rows without a serial, with an unreadable slot or date, a serial Excel
rounded (``1.65052E+12``) or a repeat of an earlier row go to the quarantine. A GPU listed
again at a later install while its earlier row is still open was moved: the earlier row is
closed at the later install, so it is never counted in two places at once.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import re
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from pipeline.errors import UsageError
from pipeline.ingest import sniff
from pipeline.timeutil import local_to_utc, parse_datetime
from pipeline.warehouse import Loaded, Rejected

log = logging.getLogger(__name__)

COLUMNS = ["serial", "model", "vendor", "host", "slot", "site", "batch", "installed_at", "removed_at"]
REQUIRED = ["serial", "host"]

#: Other names registries give the contract's columns (after lower-casing, spaces to ``_``).
ALIASES = {
    "serial": ["serial_number", "serial_no", "sn", "gpu_serial", "board_serial"],
    "host": ["hostname", "host_name", "node", "server", "nodename"],
    "slot": ["gpu_index", "index", "slot_id", "gpu_slot", "position", "bay"],
    "model": ["gpu_model", "product", "product_name"],
    "vendor": ["oem", "manufacturer", "supplier"],
    "site": ["location", "datacenter", "data_center", "dc"],
    "batch": ["lot", "purchase_batch", "order_batch"],
    "installed_at": ["installed", "install_date", "installed_on", "deployed_at", "in_service_since"],
    "removed_at": ["removed", "removal_date", "removed_on", "decommissioned_at", "retired_at"],
    # Optional: the host's address, for tickets that name the host by it (10.0.0.5).
    "ip": ["ip", "ip_address", "host_ip", "mgmt_ip", "ipaddr", "ip_addr", "address"],
}

_SCHEMA = {
    "serial": pl.Utf8, "model": pl.Utf8, "vendor": pl.Utf8, "host": pl.Utf8, "slot": pl.Int32,
    "site": pl.Utf8, "batch": pl.Utf8, "installed_at": pl.Datetime("us"), "removed_at": pl.Datetime("us"),
    "file_id": pl.Int64, "line_no": pl.Int64, "ip": pl.Utf8,
}
#: Slots above this are typos or numbers that are not slots (a server holds at most a few dozen GPUs).
_MAX_SLOT = 1024
_SLOT = re.compile(r"^\D{0,8}?(\d{1,3})$")
_EXCEL_ROUNDED = re.compile(r"^\d(\.\d+)?E\+?\d+$", re.IGNORECASE)
_DAY_FIRST = re.compile(r"^\s*(\d{1,2})[/.-](\d{1,2})[/.-]\d{4}")
_EXTRA_FORMATS = ["%d.%m.%Y %H:%M:%S", "%Y.%m.%d", "%Y.%m.%d %H:%M:%S", "%d-%b-%Y", "%d-%b-%y", "%d %b %Y",
                  "%b %d, %Y", "%b %d %Y", "%d %B %Y", "%B %d, %Y", "%Y-%m-%d %H:%M:%S.%f"]
_EXCEL_EPOCH = datetime(1899, 12, 30)


def header_key(name: str) -> str:
    """``" Installed At"`` -> ``installed_at``: how a header names a column."""
    return re.sub(r"[\s\-.]+", "_", name.strip().strip("\ufeff").strip().lower()).strip("_")


def column_positions(header: list[str]) -> dict[str, int]:
    """Contract column -> its position in ``header`` (exact names first, then the aliases)."""
    keys = [header_key(h) for h in header]
    pos = {c: keys.index(c) for c in COLUMNS if c in keys}
    for col, names in ALIASES.items():
        if col not in pos:
            found = [keys.index(n) for n in names if n in keys and keys.index(n) not in pos.values()]
            if found:
                pos[col] = found[0]
    return pos


def sniff_delimiter(first_line: str) -> str:
    """The separator of a header line: the most frequent of ``,`` ``;`` tab ``|`` (comma on ties)."""
    counts = {d: first_line.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=lambda d: (counts[d], d == ","))
    return best if counts[best] else ","


def parse_when(text: str, tz: str, dayfirst: bool) -> datetime | None:
    """A registry date or datetime as naive UTC; zone-less ones are read in ``tz``.

    Raises ValueError when unreadable or out of range.
    """
    try:
        return _parse_when(text, tz, dayfirst)
    except OverflowError:  # 9999-12-31 23:00 in a zone east of UTC: past datetime's end
        raise ValueError(f"date/time {text.strip()!r} is out of range") from None


def _parse_when(text: str, tz: str, dayfirst: bool) -> datetime | None:
    s = text.strip()
    if not s:
        return None
    try:
        return parse_datetime(s, tz, dayfirst=dayfirst)
    except ValueError:
        pass
    for fmt in _EXTRA_FORMATS:
        try:
            return local_to_utc(datetime.strptime(s, fmt), tz)
        except ValueError:
            continue
    try:
        serial_day = float(s)
    except ValueError:
        raise ValueError(f"unreadable date/time {s!r}") from None
    if 20000 <= serial_day <= 80000:  # an Excel day number (1954..2119)
        return local_to_utc(_EXCEL_EPOCH + timedelta(days=serial_day), tz)
    raise ValueError(f"unreadable date/time {s!r} (a number, but not an Excel date)")


def clean_serial(text: str) -> tuple[str | None, str | None]:
    """(serial, None), or (None, reason) when Excel has destroyed it."""
    s = text.strip().strip("'").strip().upper()
    if _EXCEL_ROUNDED.match(s):
        return None, "mangled_serial"
    if re.fullmatch(r"\d+\.0+", s):  # a number cell: 1650523300349.0
        s = s.split(".")[0]
    return (s or None), (None if s else "missing_serial")


def parse_slot(text: str) -> int | None:
    """``3``, ``3.0``, ``GPU3``, ``gpu 3``, ``#3`` -> 3; empty -> None. Raises ValueError."""
    s = text.strip()
    if not s:
        return None
    try:
        value = float(s)
    except ValueError:
        m = _SLOT.match(s)
        if not m:
            raise ValueError(f"slot {s!r} is not a number") from None
        return int(m[1])
    # 1e309, 3.5 or 10**21 is no slot (and would not fit the table's INTEGER column).
    if not (math.isfinite(value) and value.is_integer() and 0 <= value < _MAX_SLOT):
        raise ValueError(f"slot {s!r} is not a GPU slot number (0 to {_MAX_SLOT - 1})")
    return int(value)


def _dayfirst(records: list[list[str]], cols: list[int]) -> bool:
    """True when some date in these columns can only be day-first (``25/03/2024``)."""
    for rec in records:
        for i in cols:
            m = _DAY_FIRST.match(rec[i]) if i < len(rec) else None
            if m and int(m[1]) > 12 >= int(m[2]):
                return True
    return False


def read_inventory(path: Path, file_id: int, default_tz: str = "UTC") -> Loaded:
    """Parse ``inventory.csv`` into rows of the ``inventory`` table.

    Raises
    ------
    UsageError
        When the file as a whole is no inventory (empty, binary, another encoding, no
        header, no serial or host column): the night cannot place any GPU without it.
    """
    if (problem := sniff.file_problem(path, legacy=True, gzip=False)) is not None:
        raise UsageError(f"{path}: the inventory cannot be read ({problem.reason}): {problem.detail}")
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    first = text.split("\n", 1)[0]
    skip = 0
    if first.lower().startswith("sep=") and len(first.strip()) == 5:  # Excel's separator line
        delim, text, skip = first.strip()[4], text.split("\n", 1)[1] if "\n" in text else "", 1
    else:
        delim = sniff_delimiter(first)
    # newline="": the csv module ends records at CR, CRLF or LF (Excel for Mac writes CR only).
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delim)
    try:
        header = next(reader)
    except StopIteration:
        return Loaded()
    except csv.Error as exc:
        raise UsageError(f"{path}: the inventory's header cannot be read as CSV: {exc}") from None
    records, broken, start = [], [], reader.line_num + 1
    while True:  # ``start``: a record's first line in the file (quoted fields may span lines)
        try:
            rec = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # a field past the csv module's size limit
            lines = re.split(r"\r\n|\r|\n", text)
            broken.append(Rejected(start + skip, "bad_csv", lines[start - 1][:4000] if start <= len(lines) else "", str(exc)))
        else:
            if any(x.strip() for x in rec):
                records.append((start + skip, rec))
        start = reader.line_num + 1
    pos = column_positions(header)
    missing = [c for c in REQUIRED if c not in pos]
    if missing:
        raise UsageError(f"{path}: inventory lacks the columns {missing}; it has {header}; expected {COLUMNS}")
    dayfirst = _dayfirst([r for _, r in records], [pos[c] for c in ("installed_at", "removed_at") if c in pos])
    rows, rejects, seen = [], list(broken), {}
    for line_no, rec in records:
        raw = delim.join(rec)
        get = lambda c: rec[pos[c]].strip() if c in pos and pos[c] < len(rec) else ""  # noqa: E731
        serial, why = clean_serial(get("serial"))
        if serial is None:
            detail = f"serial {get('serial')!r} was rounded by a spreadsheet; export the column as text" \
                if why == "mangled_serial" else "no serial in this row"
            rejects.append(Rejected(line_no, why, raw, detail))
            continue
        try:
            slot = parse_slot(get("slot"))
        except ValueError as exc:
            rejects.append(Rejected(line_no, "bad_slot", raw, str(exc)))
            continue
        try:
            installed = parse_when(get("installed_at"), default_tz, dayfirst)
            removed = parse_when(get("removed_at"), default_tz, dayfirst)
        except ValueError as exc:
            rejects.append(Rejected(line_no, "bad_timestamp", raw, str(exc)))
            continue
        key = (serial, installed) if installed is not None else (serial, get("host"), slot, removed)
        if key in seen:
            rejects.append(Rejected(line_no, "duplicate_row", raw,
                                    f"serial {serial} installed {installed or '(no date)'} is already listed on line {seen[key]}"))
            continue
        seen[key] = line_no
        rows.append({
            "serial": serial, "model": get("model") or None, "vendor": get("vendor") or None,
            "host": get("host") or None, "slot": slot, "site": get("site") or None,
            "batch": get("batch") or None, "installed_at": installed, "removed_at": removed,
            "file_id": file_id, "line_no": line_no, "ip": get("ip") or None,
        })
    close_moved(rows)
    df = pl.DataFrame(rows, schema=_SCHEMA)
    return Loaded(tables={"inventory": df}, rows_read=len(records) + len(broken), rows_loaded=len(rows), rejects=rejects)


def close_moved(rows: list[dict]) -> int:
    """Close a serial's open row at its next install (the GPU was moved); returns how many."""
    by_serial: dict[str, list[dict]] = {}
    for r in rows:
        by_serial.setdefault(r["serial"], []).append(r)
    closed = 0
    for listed in by_serial.values():
        dated = sorted((r for r in listed if r["installed_at"] is not None), key=lambda r: r["installed_at"])
        for earlier, later in zip(dated, dated[1:]):
            if earlier["removed_at"] is None or earlier["removed_at"] > later["installed_at"]:
                earlier["removed_at"] = later["installed_at"]
                closed += 1
                log.info("inventory: %s line %s closed at its re-install on line %s",
                         earlier["serial"], earlier["line_no"], later["line_no"])
    return closed


def run(ctx) -> None:
    """Stage: load ``DATA/inventory.csv`` (replacing the previous version when it changed)."""
    path = ctx.data_dir / "inventory.csv"
    if not path.exists():
        ctx.note("inventory", f"no {path}: GPUs are known only from telemetry")
        return
    tz = ctx.cfg.time.default_tz
    # Only one inventory is current: a file under another path replaces the old one too.
    for old in ctx.wh.registered_keys("inventory"):
        if old != ctx.file_key(path):
            ctx.wh.forget("inventory", old)
    ctx.ingest_files("inventory", [path], lambda p, fid: read_inventory(p, fid, tz))
    unknown = [r[0] for r in ctx.wh.engine.rows("SELECT DISTINCT site FROM inventory WHERE site IS NOT NULL ORDER BY site",
                                                step="inventory sites")
               if r[0] not in ctx.cfg.sites]
    if unknown:
        ctx.note("inventory", f"sites with no zone in the config (sites.<name>.tz): {', '.join(unknown[:10])}"
                              f"{' ...' if len(unknown) > 10 else ''}; their hosts' zone-less times are read as {tz}")
