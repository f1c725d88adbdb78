"""Ingest kernel logs: every Xid and SXid event, with its time, GPU and process.

Reads: ``DATA/kernel/<host>/*.log[.gz]`` (dmesg, ``dmesg -T/-H/-x/-r/--time-format iso``, syslog,
RFC 5424, journalctl short/-precise/-monotonic/-iso/-full/-unix/json/verbose, shippers' JSON,
kern.log; see :mod:`pipeline.ingest.kernel.formats`), the inventory (a host's site
gives its time zone) and ``kernel.boot_times`` in the config.
Writes, per file (through the file registry, so reloading is incremental): ``xid_raw`` (every
event line as read), ``gpu_map`` (the driver's ``GPU at PCI:... GPU-<uuid>`` and
``GPU Board Serial Number`` lines) and ``kernel_segments`` (its boots, for the host's boot
table: :mod:`pipeline.ingest.kernel.boots`). After the stage, :func:`pipeline.link.xid.derive`
derives ``xid_events`` from them: one row per event however many files saw it, dated from
its host's boots where the line carries only an uptime, linked to its GPU's serial.

Why: Xid messages are the GPU's own account of what went wrong. Hosts lose them on restart
and flood on application Xids; the warehouse keeps all of them, classified by the catalog.
Unrelated lines are skipped (``rows_skipped``); only lines that look like an Xid/SXid event
and cannot be read go to the quarantine.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from pipeline.ingest import sniff
from pipeline.ingest.kernel import boots
from pipeline.ingest.kernel.parse import (
    MAP_SCHEMA,
    RAW_SCHEMA,
    FileParse,
    LogText,
    parse_bytes,
    parse_texts,
)
from pipeline.timeutil import parse_datetime
from pipeline.vocab.files import gunzip
from pipeline.vocab.hosts import host_key
from pipeline.warehouse import Loaded, Rejected

__all__ = ["CONTRACT_COLUMNS", "MAP_SCHEMA", "RAW_SCHEMA", "FileParse", "KernelFile", "parse_bytes", "parse_file",
           "parse_files", "parse_xid_files", "run"]

log = logging.getLogger(__name__)

STAGE = "xid"

#: The contract's ``parse xid`` columns, in order.
CONTRACT_COLUMNS = ["ts", "uptime_s", "host", "pci_bus_id", "kind", "xid", "pid", "process",
                    "message", "source_file", "line_no", "ts_quality", "ts_error_s"]

_DATE_IN_NAME = re.compile(r"(20\d\d)-?(0[1-9]|1[0-2])-?([0-3]\d)(?:[-_T]([01]\d|2[0-3])([0-5]\d))?")
#: The contract's ``*.log[.gz]``, plus the names rotation gives them (``kern.log.1``, ``syslog.2.gz``).
_KERNEL_NAME = re.compile(r"(\.log(\.\d+)?|^(syslog|messages|kern|dmesg|journal)[\w.-]*?)(\.gz)?$")


def reference_time(path: Path) -> tuple[datetime, bool]:
    """When the file's year-less lines were written, and whether it bounds them.

    A date in the file name (``syslog-20250301``, ``kern.log.2025-03-01``) is near its lines
    (rotation names a file by its first or its last day): ``(date, False)``. Else the file's
    mtime, which no line can be later than, though a copy made without keeping it is much
    later: ``(mtime, True)``.
    """
    m = _DATE_IN_NAME.search(path.name)
    if m:
        try:
            return datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4] or 12), int(m[5] or 0)), False
        except ValueError:
            pass
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).replace(tzinfo=None), True
    except OSError:
        return datetime.now(timezone.utc).replace(tzinfo=None), True


@dataclass(frozen=True)
class KernelFile:
    """One kernel log to read, with what its rows record (``source_file``: default the path)."""

    path: Path
    host: str
    tz: str = "UTC"
    boot_time: datetime | None = None
    source_file: str | None = None
    boot_check: bool = False


def parse_files(files: Sequence[KernelFile]) -> list[FileParse]:
    """Read and parse many kernel logs (plain or gzip) in one pass; one result per file, in
    order. A file that cannot be read at all is one quarantine row naming why (its sniff
    verdict: ``empty_file``, ``bad_gzip``, ``binary_file``, ``bad_encoding``); a gzip cut
    short gives the events before the cut and a ``bad_gzip`` row for the lost rest."""
    texts: list[LogText] = []
    whole: dict[int, Rejected] = {}
    damaged: dict[int, Rejected] = {}
    windows = boots.day_windows([(f.path, f.tz) for f in files])
    for k, f in enumerate(files):
        source_file = f.source_file or str(f.path)
        raw, problem = sniff.read_judged(f.path)  # read once: judged by its head, then all of it decompressed
        if problem is not None:  # nothing worth scanning: one row says why
            whole[k] = Rejected(None, problem.reason, "", f"{source_file}: {problem.detail}")  # details start with the file
            continue
        data, damage = gunzip(raw)  # decompressed once: the lines, and where the stream breaks
        if damage is not None:
            damaged[k] = Rejected(None, "bad_gzip", "", f"{source_file}: {damage}")
        ref, is_latest = reference_time(f.path)
        texts.append(LogText(data, source_file, f.host, f.tz, f.boot_time, ref, f.boot_check, is_latest, windows[k]))
    parsed = iter(parse_texts(texts))
    out: list[FileParse] = []
    for k in range(len(files)):
        if k in whole:
            out.append(FileParse(pl.DataFrame(schema=RAW_SCHEMA), pl.DataFrame(schema=MAP_SCHEMA), [whole[k]], 0))
            continue
        fp = next(parsed)
        if k in damaged:
            fp.rejects.append(damaged[k])
        out.append(fp)
    return out


def parse_file(path: Path, *, host: str | None = None, tz: str = "UTC", boot_time: datetime | None = None,
               source_file: str | None = None, boot_check: bool = False) -> FileParse:
    """Parse one kernel log file (plain or gzip): :func:`parse_files` of one; the host
    defaults to its folder's name."""
    path = Path(path)
    return parse_files([KernelFile(path, host or path.parent.name, tz, boot_time, source_file, boot_check)])[0]


def batches(files: Sequence[KernelFile], max_bytes: int = 64 << 20, max_files: int = 2000) -> Iterator[list[KernelFile]]:
    """``files`` in runs of at most ``max_files`` files and ``max_bytes`` bytes on disk (a
    bigger file is a run of its own): what one parse, and one warehouse transaction, holds."""
    run: list[KernelFile] = []
    size = 0
    for f in files:
        try:
            n = f.path.stat().st_size
        except OSError:
            n = 0
        if run and (size + n > max_bytes or len(run) >= max_files):
            yield run
            run, size = [], 0
        run.append(f)
        size += n
    if run:
        yield run


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
    parts, seg_parts, rejects = [], [], []
    files = [KernelFile(Path(p), host or Path(p).parent.name, tz, boot_time) for p in paths]
    fid = 0
    for run_ in batches(files):
        for fp in parse_files(run_):
            fid += 1
            parts.append(fp.events.with_columns(file_id=pl.lit(fid, pl.Int64)))
            seg_parts.append(fp.segments.with_columns(file_id=pl.lit(fid, pl.Int64)))
            rejects.extend(fp.rejects)
    raw = pl.concat(parts) if parts else pl.DataFrame(schema={**RAW_SCHEMA, "file_id": pl.Int64})
    segs = pl.concat(seg_parts) if seg_parts else pl.DataFrame(schema={**boots.SEGMENT_SCHEMA, "file_id": pl.Int64})
    configured = {host_key(h): boot_time for h in set(segs["host"].to_list())} if boot_time is not None else {}
    events = dedupe_frames(boots.date_events(raw, segs, configured))
    return events.select(CONTRACT_COLUMNS), rejects


def loader(files: dict[Path, KernelFile]):
    """A batch ``loader([(path, file_id), ...])`` for :meth:`Warehouse.ingest_batch`: the
    files read and parsed together, one :class:`Loaded` per file."""

    def load(items: list[tuple[Path, int]]) -> list[Loaded]:
        out = []
        for (_, file_id), fp in zip(items, parse_files([files[p] for p, _ in items])):
            parts = {"xid_raw": fp.events, "gpu_map": fp.gpu_map, "kernel_segments": fp.segments}
            tables = {t: df.with_columns(file_id=pl.lit(file_id, pl.Int64)) for t, df in parts.items() if df.height}
            out.append(Loaded(tables=tables, rows_read=fp.rows_read, rows_loaded=fp.events.height,
                              rows_skipped=fp.rows_skipped, rejects=fp.rejects))
        return out

    return load


def kernel_files(data_dir: Path) -> dict[str, list[Path]]:
    """host -> its kernel logs (``kernel/<host>/*.log[.gz]`` and rotations such as ``syslog.2.gz``)."""
    root = Path(data_dir) / "kernel"
    if not root.is_dir():
        return {}
    out = {}
    # (by name: the order of paths in one folder, without Path's slower comparisons)
    for d in sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.name):
        files = sorted((p for p in d.iterdir() if p.is_file() and _KERNEL_NAME.search(p.name)), key=lambda p: p.name)
        if files:
            out[d.name] = files
    return out


def host_zones(ctx) -> dict[str, str]:
    """host key (:func:`host_key`) -> time zone, through the inventory's site."""
    rows = ctx.wh.engine.rows("SELECT host, any_value(site) FROM inventory WHERE host IS NOT NULL GROUP BY host",
                              step="xid: host sites")
    return {host_key(h): ctx.cfg.site_tz(s) for h, s in rows}


def configured_boots(ctx, zones: dict[str, str] | None = None) -> dict[str, datetime]:
    """host key -> the boot ``kernel.boot_times`` gives it (naive UTC; read in the host's zone)."""
    zones = host_zones(ctx) if zones is None else zones
    return {host_key(h): parse_datetime(t, zones.get(host_key(h), ctx.cfg.time.default_tz))
            for h, t in ctx.cfg.kernel.boot_times.items()}


def run(ctx) -> None:
    """Stage: load new or changed kernel logs into ``xid_raw``, ``gpu_map`` and
    ``kernel_segments``, many files per parse and per transaction (:func:`batches`); the
    registry still skips, replaces and counts each file on its own. (``xid_events`` is
    derived from them after the stage: :func:`pipeline.link.xid.derive`.)"""
    found = kernel_files(ctx.data_dir)
    if not found:
        ctx.note(STAGE, f"no kernel logs under {ctx.data_dir / 'kernel'}")
    zones = host_zones(ctx)
    boot_times = ctx.cfg.kernel.boot_times
    files: dict[Path, KernelFile] = {}
    for host, paths in found.items():
        tz = zones.get(host_key(host), ctx.cfg.time.default_tz)
        boot = parse_datetime(boot_times[host], tz) if host in boot_times else None
        folder = ctx.file_key(paths[0].parent)  # (a file's key is its folder's and its name, unless it is a link)
        files.update((p, KernelFile(p, host, tz, boot, ctx.file_key(p) if p.is_symlink() else f"{folder}/{p.name}",
                                    boot_check=True)) for p in paths)
    load = loader(files)
    for run_ in ctx.track(list(batches(list(files.values()))), f"{STAGE}: batches of files"):
        paths = [f.path for f in run_]
        ctx.tally(STAGE, ctx.wh.ingest_batch(STAGE, paths, load, keys=[f.source_file for f in run_]))
