"""Ingest the asset registry ``DATA/inventory.csv`` into the ``inventory`` table.

Reads: ``inventory.csv`` (columns fixed by the contract). Writes: ``inventory``.
The file is small and authoritative, so a changed file replaces the table; rows without a
serial or with unreadable dates go to the quarantine.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl

from pipeline.errors import UsageError
from pipeline.timeutil import parse_datetime
from pipeline.warehouse import Loaded, Rejected

COLUMNS = ["serial", "model", "vendor", "host", "slot", "site", "batch", "installed_at", "removed_at"]
REQUIRED = ["serial", "host", "slot"]


def read_inventory(path: Path, file_id: int, default_tz: str = "UTC") -> Loaded:
    """Parse ``inventory.csv`` into rows of the ``inventory`` table."""
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        return Loaded()
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise UsageError(f"{path}: inventory lacks the columns {missing}; it has {header}; expected {COLUMNS}")
    pos = {c: header.index(c) for c in COLUMNS if c in header}
    rows, rejects, read = [], [], 0
    for line_no, rec in enumerate(reader, start=2):
        if not any(x.strip() for x in rec):
            continue
        read += 1
        raw = ",".join(rec)
        get = lambda c: rec[pos[c]].strip() if c in pos and pos[c] < len(rec) else ""  # noqa: E731
        serial = get("serial").upper()
        if not serial:
            rejects.append(Rejected(line_no, "missing_serial", raw))
            continue
        try:
            slot = int(float(get("slot"))) if get("slot") else None
        except ValueError:
            rejects.append(Rejected(line_no, "bad_slot", raw, f"slot {get('slot')!r} is not a number"))
            continue
        try:
            installed = parse_datetime(get("installed_at"), default_tz)
            removed = parse_datetime(get("removed_at"), default_tz)
        except ValueError as exc:
            rejects.append(Rejected(line_no, "bad_timestamp", raw, str(exc)))
            continue
        rows.append({
            "serial": serial, "model": get("model") or None, "vendor": get("vendor") or None,
            "host": get("host") or None, "slot": slot, "site": get("site") or None,
            "batch": get("batch") or None, "installed_at": installed, "removed_at": removed,
            "file_id": file_id, "line_no": line_no,
        })
    schema = {
        "serial": pl.Utf8, "model": pl.Utf8, "vendor": pl.Utf8, "host": pl.Utf8, "slot": pl.Int32,
        "site": pl.Utf8, "batch": pl.Utf8, "installed_at": pl.Datetime("us"), "removed_at": pl.Datetime("us"),
        "file_id": pl.Int64, "line_no": pl.Int64,
    }
    df = pl.DataFrame(rows, schema=schema)
    return Loaded(tables={"inventory": df}, rows_read=read, rows_loaded=len(rows), rejects=rejects)


def run(ctx) -> None:
    """Stage: load ``DATA/inventory.csv`` (replacing the previous version when it changed)."""
    path = ctx.data_dir / "inventory.csv"
    if not path.exists():
        ctx.note("inventory", f"no {path}: GPUs are known only from telemetry")
        return
    tz = ctx.cfg.time.default_tz
    # Only one inventory is current: a file under another path replaces the old one too.
    for old in ctx.wh.sql("SELECT path FROM files WHERE stage = 'inventory' AND path <> ?", [ctx.file_key(path)]):
        with ctx.wh.transaction():
            fid = ctx.wh.registered("inventory", old[0])["file_id"]
            ctx.wh._forget_file(fid)
    ctx.ingest_files("inventory", [path], lambda p, fid: read_inventory(p, fid, tz))
