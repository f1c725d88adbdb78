"""Ingest kernel logs: every Xid and SXid event, with its time, GPU and process.

Reads: ``DATA/kernel/<host>/*.log[.gz]`` (dmesg, ``dmesg -T/-H/--time-format iso``, syslog,
journalctl, kern.log; see :mod:`pipeline.ingest.xid_formats`), the inventory (a host's site
gives its time zone) and ``kernel.boot_times`` in the config.
Writes, per file (through the file registry, so reloading is incremental): ``xid_raw`` (every
event line as read) and ``gpu_map`` (the driver's ``GPU at PCI:... GPU-<uuid>`` and
``GPU Board Serial Number`` lines). Then :mod:`pipeline.link.xid` derives ``xid_events``:
one row per event however many files saw it, linked to its GPU's serial.

Why: Xid messages are the GPU's own account of what went wrong. Hosts lose them on restart
and flood on application Xids; the warehouse keeps all of them, classified by the catalog.
Unrelated lines are skipped (``rows_skipped``); only lines that look like an Xid/SXid event
and cannot be read go to the quarantine.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl

from pipeline.ingest import xid_formats as fmt
from pipeline.ingest import xid_scan as scan
from pipeline.timeutil import local_to_utc_expr, parse_datetime
from pipeline.warehouse import Loaded, Rejected

log = logging.getLogger(__name__)

STAGE = "xid"

RAW_SCHEMA: dict[str, pl.DataType] = {
    "source_file": pl.Utf8, "line_no": pl.Int64, "host": pl.Utf8, "ts": pl.Datetime("us"),
    "ts_source": pl.Utf8, "uptime_s": pl.Float64, "boot_seg": pl.Int32, "pci_bus_id": pl.Utf8,
    "kind": pl.Utf8, "xid": pl.Int32, "pid": pl.Int64, "process": pl.Utf8, "message": pl.Utf8,
    "gpu_instance": pl.Utf8, "fatal": pl.Boolean, "subcode": pl.Utf8, "recovery_action": pl.Utf8,
    "shape": pl.Utf8,
}
MAP_SCHEMA: dict[str, pl.DataType] = {
    "source_file": pl.Utf8, "line_no": pl.Int64, "host": pl.Utf8, "ts": pl.Datetime("us"),
    "uptime_s": pl.Float64, "boot_seg": pl.Int32, "pci_bus_id": pl.Utf8, "uuid": pl.Utf8, "serial": pl.Utf8,
}
#: The contract's ``parse xid`` columns, in order.
CONTRACT_COLUMNS = ["ts", "uptime_s", "host", "pci_bus_id", "kind", "xid", "pid", "process",
                    "message", "source_file", "line_no"]

_DATE_IN_NAME = re.compile(r"(20\d\d)-?(0[1-9]|1[0-2])-?([0-3]\d)")
_FELL_TEXT = "GPU has fallen off the bus"
#: The contract's ``*.log[.gz]``, plus the names rotation gives them (``kern.log.1``, ``syslog.2.gz``).
_KERNEL_NAME = re.compile(r"(\.log(\.\d+)?|^(syslog|messages|kern|dmesg|journal)[\w.-]*?)(\.gz)?$")


@dataclass
class _Rec:
    """A timed line of interest, before years, zones and boot times are settled."""

    line_no: int
    p: fmt.Prefix
    seg: int
    human_since: float | None = None
    row: dict = field(default_factory=dict)


@dataclass
class FileParse:
    """One file's events, GPU map rows and rejects."""

    events: pl.DataFrame
    gpu_map: pl.DataFrame
    rejects: list[Rejected]
    rows_skipped: int

    @property
    def rows_read(self) -> int:
        return self.events.height + len(self.rejects)


def reference_time(path: Path) -> datetime:
    """A time near the file's year-less lines: a date in the file name, else its mtime."""
    m = _DATE_IN_NAME.search(path.name)
    if m:
        try:
            return datetime(int(m[1]), int(m[2]), int(m[3]), 12)
        except ValueError:
            pass
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).replace(tzinfo=None)
    except OSError:
        return datetime.now(timezone.utc).replace(tzinfo=None)


def parse_bytes(
    buf: bytes,
    *,
    source_file: str,
    host: str,
    tz: str = "UTC",
    boot_time: datetime | None = None,
    ref_time: datetime | None = None,
) -> FileParse:
    """Parse one kernel log held in memory.

    Parameters
    ----------
    buf : bytes
        The whole (decompressed) file.
    source_file, host : str
        Recorded on every row; a syslog line naming its own host overrides ``host``.
    tz : str
        Zone of local wall-clock stamps (``dmesg -T``, syslog, journalctl short).
    boot_time : datetime, optional
        Naive UTC boot time for uptime-only lines of the last boot in the file when the
        log itself has no boot marker.
    ref_time : datetime, optional
        A time near the year-less lines (default: now): the last line takes the year that
        puts it nearest; earlier lines count back across each December to January.
    """
    human = scan.is_human(buf)
    htimes = scan.human_times(buf) if human else {}
    recs: list[_Rec] = []
    events: list[_Rec] = []
    maps: list[_Rec] = []
    rejects: list[Rejected] = []
    seg_boot: dict[int, datetime] = {}
    boot_recs: list[tuple[_Rec, float]] = []  # lines with a wall clock and an uptime
    seg, last_up = 0, None
    last_sxid: _Rec | None = None
    last_map: _Rec | None = None
    fell: _Rec | None = None
    for line_no, raw in scan.candidate_lines(buf):
        line = fmt.clean(raw.decode("utf-8", errors="replace"))
        p = fmt.read_prefix(line)
        if human and line_no in htimes:
            anchor, since = htimes[line_no]
            p.md, p.delta = anchor, None
            rec = _Rec(line_no, p, seg, since)
        else:
            rec = _Rec(line_no, p, seg)
        if p.uptime is not None:
            if last_up is not None and p.uptime + 1e-6 < last_up:
                seg += 1
            last_up = p.uptime
            rec.seg = seg
            if p.aware or p.local or p.md:
                boot_recs.append((rec, p.uptime))
        recs.append(rec)
        text = p.text
        if "Xid" in text:
            ev = fmt.read_event(text)
            if ev is None:
                if fmt.EVENT_LIKE.search(text):
                    rejects.append(Rejected(line_no, "bad_xid_line", line[:4000],
                                            f"{source_file}: looks like an Xid/SXid event but its PCI id or code cannot be read"))
                continue
            if (fmt.is_companion(ev) and last_sxid is not None and last_sxid.row["xid"] == ev.xid
                    and last_sxid.row["pci_bus_id"] == ev.pci_bus_id and line_no - last_sxid.line_no <= 4):
                continue  # the Severity/Data line of the SXid just read
            rec.row = {**ev.__dict__, "host": p.host or host, "shape": "line"}
            events.append(rec)
            last_sxid = rec if ev.kind == "SXid" else None
            continue
        if "NVRM" not in text:
            m = fmt.RTC_BOOT.search(text)
            if m and p.uptime is not None:
                at = datetime.fromtimestamp(int(m["epoch"]), timezone.utc).replace(tzinfo=None) if m["epoch"] \
                    else datetime.fromisoformat(m["iso"].replace(" ", "T"))
                seg_boot.setdefault(rec.seg, at - timedelta(seconds=p.uptime))
            continue
        if (m := fmt.GPU_AT.search(text)) is not None:
            rec.row = {"host": p.host or host, "pci_bus_id": fmt.canonical_pci_text(m["pci"]),
                       "uuid": m["uuid"], "serial": None}
            maps.append(rec)
            last_map = rec
        elif (m := fmt.SERIAL.search(text)) is not None:
            if last_map is not None and line_no - last_map.line_no <= 4 and last_map.row["serial"] is None:
                last_map.row["serial"] = m["serial"].strip() or None
        elif (m := fmt.FELL_START.search(text)) is not None:
            fell = rec
            fell.row = {"pci": fmt.canonical_pci_text(m["pci"])}
            if "fallen off the bus" in text:
                _emit_fell(fell, events, host)
                fell = None
        elif "fallen off the bus" in text and fell is not None and line_no - fell.line_no <= 4:
            _emit_fell(fell, events, host)
            fell = None
    n_lines = scan.count_lines(buf)
    _settle_times(recs, tz, ref_time or datetime.now(timezone.utc).replace(tzinfo=None), human)
    for rec, up in boot_recs:
        if rec.row.get("_utc") is not None:
            seg_boot.setdefault(rec.seg, rec.row["_utc"] - timedelta(seconds=up))
    if boot_time is not None and seg not in seg_boot:
        seg_boot[seg] = boot_time
    ev_rows = [_finish(r, seg_boot, source_file) for r in events]
    map_rows = [_finish(r, seg_boot, source_file) for r in maps]
    ev_df = pl.DataFrame([{k: r.get(k) for k in RAW_SCHEMA} for r in ev_rows], schema=RAW_SCHEMA)
    map_df = pl.DataFrame([{k: r.get(k) for k in MAP_SCHEMA} for r in map_rows], schema=MAP_SCHEMA)
    skipped = max(n_lines - ev_df.height - len(rejects), 0)
    return FileParse(ev_df, map_df, rejects, skipped)


def _emit_fell(rec: _Rec, events: list[_Rec], host: str) -> None:
    """The multi-line "has fallen off the bus" message carries no code: it is an Xid 79."""
    pci = rec.row.get("pci")
    rec.row = {"kind": "Xid", "xid": 79, "pci_bus_id": pci, "pid": None, "process": None,
               "message": _FELL_TEXT, "gpu_instance": None, "fatal": None, "subcode": None,
               "recovery_action": None, "host": rec.p.host or host, "shape": "fallen_off_bus"}
    events.append(rec)


def _settle_times(recs: list[_Rec], tz: str, ref: datetime, human: bool) -> None:
    """Give each record a naive UTC wall time (``row['_utc']``) where its line has one.

    Year-less stamps take years counted back from ``ref``; a month going backwards
    (December to January) is a new year. Local times become UTC in ``tz``, DST-safe.
    """
    rolls, k, prev_month, last_md = [], 0, None, None
    for r in recs:
        if r.p.md is not None:
            month = r.p.md[0]
            if prev_month is not None and month < prev_month:
                k += 1
            prev_month, last_md = month, r.p.md
        rolls.append(k)
    base = None
    if last_md is not None:
        # The year that puts the last line nearest the reference: logrotate's dateext names a
        # file by its rotation day (lines before it), others by their first day (lines after).
        years = [y for y in (ref.year - 1, ref.year, ref.year + 1) if fmt.with_year(last_md, y) is not None]
        if years:
            last_year = min(years, key=lambda y: abs((fmt.with_year(last_md, y) - ref).total_seconds()))
            base = last_year - k
    local: list[tuple[_Rec, datetime]] = []
    for r, kk in zip(recs, rolls):
        p = r.p
        if p.aware is not None:
            r.row["_utc"] = p.aware.astimezone(timezone.utc).replace(tzinfo=None)
        elif p.local is not None:
            local.append((r, p.local))
        elif p.md is not None and base is not None:
            d = fmt.with_year(p.md, base + kk)
            if d is not None:
                local.append((r, d + timedelta(seconds=r.human_since or 0.0)))
    if local:
        s = pl.Series("t", [d for _, d in local], dtype=pl.Datetime("us"))
        utc = pl.DataFrame({"t": s}).select(local_to_utc_expr(pl.col("t"), tz))["t"].to_list()
        for (r, _), u in zip(local, utc):
            r.row["_utc"] = u


def _finish(rec: _Rec, seg_boot: dict[int, datetime], source_file: str) -> dict:
    row = rec.row
    up = rec.p.uptime
    ts, src = row.get("_utc"), "wall"
    if ts is None and up is not None and rec.seg in seg_boot:
        ts, src = seg_boot[rec.seg] + timedelta(seconds=up), "boot"
    row.update(ts=ts, ts_source=src if ts is not None else None, uptime_s=up, boot_seg=rec.seg,
               source_file=source_file, line_no=rec.line_no)
    return row


def parse_file(path: Path, *, host: str | None = None, tz: str = "UTC", boot_time: datetime | None = None,
               source_file: str | None = None) -> FileParse:
    """Parse one kernel log file (plain or gzip); the host defaults to its folder's name."""
    path = Path(path)
    return parse_bytes(
        scan.read_bytes(path), source_file=source_file or str(path), host=host or path.parent.name,
        tz=tz, boot_time=boot_time, ref_time=reference_time(path),
    )


def parse_xid_files(
    paths: Iterable[str | Path],
    *,
    host: str | None = None,
    tz: str = "UTC",
    boot_time: datetime | str | None = None,
) -> tuple[pl.DataFrame, list[Rejected]]:
    """Kernel logs to one row per Xid/SXid event (the ``parse xid`` contract columns).

    The same event seen in several of the files (dmesg and syslog, overlapping rotations)
    is one row. No warehouse is needed.

    Parameters
    ----------
    paths : iterable of path
        Kernel logs, plain or gzip, in any supported format.
    host : str, optional
        Host of every file; default: each file's folder name (a syslog line's own host wins).
    tz : str
        Zone of local wall-clock stamps.
    boot_time : datetime or str, optional
        Boot time (UTC, or ISO text with zone, or read in ``tz``) for uptime-only lines.

    Returns
    -------
    (polars.DataFrame, list of Rejected)
        Events ordered by host and time; unreadable event lines (their ``detail`` names the file).

    Examples
    --------
    >>> df, rejects = parse_xid_files(["node1/dmesg.log"], tz="Asia/Shanghai")  # doctest: +SKIP
    """
    from pipeline.link.xid import dedupe_frames

    if isinstance(boot_time, str):
        boot_time = parse_datetime(boot_time, tz)
    parts, map_parts, rejects = [], [], []
    for fid, path in enumerate(paths, start=1):
        fp = parse_file(Path(path), host=host, tz=tz, boot_time=boot_time)
        parts.append(fp.events.with_columns(file_id=pl.lit(fid, pl.Int64)))
        map_parts.append(fp.gpu_map.with_columns(file_id=pl.lit(fid, pl.Int64)))
        rejects.extend(fp.rejects)
    raw = pl.concat(parts) if parts else pl.DataFrame(schema={**RAW_SCHEMA, "file_id": pl.Int64})
    events = dedupe_frames(raw)
    return events.select(CONTRACT_COLUMNS), rejects


def loader(host: str, tz: str, boot_time: datetime | None, key_of=None):
    """A ``loader(path, file_id)`` for :meth:`Warehouse.ingest_file`."""

    def load(path: Path, file_id: int) -> Loaded:
        fp = parse_file(path, host=host, tz=tz, boot_time=boot_time, source_file=key_of(path) if key_of else None)
        tables = {
            "xid_raw": fp.events.with_columns(file_id=pl.lit(file_id, pl.Int64)),
            "gpu_map": fp.gpu_map.with_columns(file_id=pl.lit(file_id, pl.Int64)),
        }
        return Loaded(tables=tables, rows_read=fp.rows_read, rows_loaded=fp.events.height,
                      rows_skipped=fp.rows_skipped, rejects=fp.rejects)

    return load


def kernel_files(data_dir: Path) -> dict[str, list[Path]]:
    """host -> its kernel logs (``kernel/<host>/*.log[.gz]`` and rotations such as ``syslog.2.gz``)."""
    root = Path(data_dir) / "kernel"
    if not root.is_dir():
        return {}
    out = {}
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(p for p in d.iterdir() if p.is_file() and _KERNEL_NAME.search(p.name))
        if files:
            out[d.name] = files
    return out


def host_zones(ctx) -> dict[str, str]:
    """host -> time zone, through the inventory's site."""
    rows = ctx.wh.sql("SELECT host, any_value(site) FROM inventory WHERE host IS NOT NULL GROUP BY host", step="xid: host sites")
    return {h: ctx.cfg.site_tz(s) for h, s in rows}


def run(ctx) -> None:
    """Stage: load new or changed kernel logs, then derive the linked ``xid_events``."""
    from pipeline.link.xid import derive_xid_events

    files = kernel_files(ctx.data_dir)
    if not files:
        ctx.note(STAGE, f"no kernel logs under {ctx.data_dir / 'kernel'}")
    zones = host_zones(ctx)
    boots = ctx.cfg.kernel.boot_times
    for host, paths in files.items():
        tz = zones.get(host, ctx.cfg.time.default_tz)
        boot = parse_datetime(boots[host], tz) if host in boots else None
        ctx.ingest_files(STAGE, paths, loader(host, tz, boot, ctx.file_key))
    n = derive_xid_events(ctx.wh)
    ctx.report(STAGE).rows_out = n
