"""Ingest every service point's ticket exports into ``tickets_raw``.

Reads: ``DATA/tickets/<service_point>/*.{csv,xlsx,json,jsonl}`` and the point's section of
the config (``tickets.points.<point>``: columns, date format, day/month order, encoding,
zone). Writes: ``tickets_raw``, one row per ticket row of each file, with its file and line,
so overlapping periodic dumps are all kept here and the ``normalize`` stage picks the latest
version of each ticket. Broken rows go to the quarantine with a reason; the rest is loaded.
Cell text is stored as text: ``=cmd|...`` is a string here, never a formula.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import polars as pl

from pipeline.config import Config, ServicePoint
from pipeline.ingest.ticket_columns import (
    TEXT_FIELDS, cell_text, clean_serial, clean_slot, header_zone, infer_dayfirst, layout_error, map_columns,
    parse_when,
)
from pipeline.ingest.ticket_readers import SUFFIXES, Sheet, read_export
from pipeline.warehouse import Loaded, Rejected

log = logging.getLogger(__name__)

#: How many rows above the header an export may put titles and notes in.
HEADER_SEARCH_ROWS = 15

RAW_SCHEMA = {
    "service_point": pl.Utf8, "ticket_id": pl.Utf8, "opened_at": pl.Datetime("us"),
    "closed_at": pl.Datetime("us"), "updated_at": pl.Datetime("us"), "status": pl.Utf8, "host": pl.Utf8,
    "slot": pl.Int32, "serial_text": pl.Utf8, "serial": pl.Utf8, "part_text": pl.Utf8, "symptom_text": pl.Utf8,
    "action_text": pl.Utf8, "source_file": pl.Utf8, "sheet": pl.Utf8, "file_id": pl.Int64, "line_no": pl.Int64,
}
_TIME_FIELDS = ("opened_at", "closed_at", "updated_at")


def point_tz(cfg: Config, point: str) -> str:
    """A service point's zone: its own, else its site's (listed in ``sites.<site>.service_points``
    or a site whose name starts the point's name), else ``time.default_tz``."""
    sp = cfg.tickets.points.get(point)
    if sp and sp.tz:
        return sp.tz
    for name, site in cfg.sites.items():
        if point in site.service_points:
            return site.tz
    low = point.lower()
    for name in sorted(cfg.sites, key=len, reverse=True):
        if low.startswith(name.lower()):
            return cfg.sites[name].tz
    return cfg.time.default_tz


def _find_header(sheet: Sheet, columns: dict[str, str]) -> tuple[int, dict[str, int]] | None:
    if sheet.header is not None:
        found = map_columns(sheet.header, columns)
        return (-1, found) if found else None
    for idx, (_, cells) in enumerate(sheet.rows[:HEADER_SEARCH_ROWS]):
        found = map_columns(cells, columns)
        if found:
            return idx, found
    return None


def load_tickets(path: Path, file_id: int, point: str, cfg: Config, *, source: str | None = None) -> Loaded:
    """Read one export of service point ``point`` into ``tickets_raw`` rows.

    Raises
    ------
    UsageError
        When no sheet has a recognisable header; the message names the columns it saw.
    """
    sp = cfg.tickets.points.get(point) or ServicePoint()
    tz = point_tz(cfg, point)
    source = source or str(path)
    got = read_export(path, sp.encoding)
    rejects = list(got.rejects)
    rows: list[dict] = []
    read = len(got.rejects)
    skipped = 0
    recognised = 0
    for sheet in got.sheets:
        hit = _find_header(sheet, sp.columns)
        if hit is None:
            if sheet.rows:
                log.info("%s: sheet %r has no ticket header; skipped", source, sheet.name)
            skipped += len(sheet.rows)
            continue
        recognised += 1
        start, cols = hit
        body = sheet.rows[start + 1:]
        skipped += start + 1 if sheet.header is None else 0
        header_cells = sheet.header if sheet.header is not None else sheet.rows[start][1]
        # Empty trailing header cells (Excel's used range, "a,b,c,,,") do not widen a row.
        width = max((i + 1 for i, c in enumerate(header_cells) if cell_text(c) is not None), default=0)
        if free := _free_text_fields(cols):
            log.info("%s: no %s column; coded from the description", source, "/".join(free))
        zones = {f: header_zone(header_cells[cols[f]]) or tz for f in _TIME_FIELDS if f in cols}
        dates = [cell_text(c[cols["opened_at"]]) for _, c in body if "opened_at" in cols and cols["opened_at"] < len(c)]
        dayfirst = infer_dayfirst(dates, sp.dayfirst) if not sp.date_format else sp.dayfirst
        for line_no, cells in body:
            # Blank rows, and the header repeated where dumps were pasted together.
            if cells == header_cells or not any(c is not None and str(c).strip() for c in cells) or _is_total(cells):
                skipped += 1
                continue
            read += 1
            raw = sheet.raw.get(line_no) or "\t".join("" if c is None else str(c) for c in cells)
            rec, why = _row(cells, cols, width, sheet.header is None and bool(sheet.raw), zones, dayfirst, sp.date_format,
                            free)
            if why:
                rejects.append(Rejected(line_no, why[0], raw, why[1]))
                continue
            rec.update(service_point=point, source_file=source, sheet=sheet.name, file_id=file_id, line_no=line_no)
            rows.append(rec)
    if not recognised and any(s.rows for s in got.sheets):  # an export with no rows at all is just empty
        first = next((s for s in got.sheets if s.rows or s.header), got.sheets[0])
        headers = first.header if first.header is not None else (first.rows[0][1] if first.rows else [])
        raise layout_error(source, point, headers)
    df = pl.DataFrame(rows, schema=RAW_SCHEMA) if rows else pl.DataFrame(schema=RAW_SCHEMA)
    return Loaded(tables={"tickets_raw": df}, rows_read=read, rows_loaded=len(rows), rows_skipped=skipped, rejects=rejects)


#: Cells of the summary row Excel reports end with: a total word first, then counts.
_COUNT = r"\s*[\d.,%]*\s*(?:条|件|個|个|张|張|单|單|tickets?|rows?|items?)?\s*"
_TOTAL = re.compile(r"^\s*(?:grand\s+)?(?:totals?|sum|summe|gesamt|count|合计|合計|总计|總計|小计|小計|共计|共計|汇总|彙總)"
                    r"\s*[:：]?" + _COUNT + "$", re.I)


def _is_total(cells: list) -> bool:
    """A totals row at the bottom of an export: ``合计 | | | 3 条``, ``Total: 42``."""
    first = next((c for c in cells if cell_text(c) is not None), None)
    if not isinstance(first, str) or not _TOTAL.match(first):
        return False
    rest = [cell_text(c) for c in cells[cells.index(first) + 1:]]
    return all(t is None or re.fullmatch(_COUNT, t, re.I) for t in rest)


def _free_text_fields(cols: dict[str, int]) -> tuple[str, ...]:
    """Text fields without a column of their own: the layout's free text is fed to each,
    so an export with one description column is coded in part, symptom and action."""
    if not any(f in cols for f in ("symptom_text", "description")):
        return ()
    return tuple(f for f in ("part_text", "action_text") if f not in cols)


def _row(cells: list, cols: dict[str, int], width: int, check_width: bool, zones: dict[str, str], dayfirst: bool,
         fmt: str, free: tuple[str, ...] = ()) -> tuple[dict, tuple[str, str] | None]:
    """One data row to a record, or the reason it cannot be loaded."""
    if check_width and len(cells) != width:
        extra = cells[width:]
        if len(cells) < width or any(cell_text(c) is not None for c in extra):
            return {}, ("field_count", f"{len(cells)} fields where the header has {width}")
    get = lambda f: cells[cols[f]] if f in cols and cols[f] < len(cells) else None  # noqa: E731
    rec: dict = {}
    tid = cell_text(get("ticket_id"))
    if tid is None:
        return {}, ("missing_ticket_id", "no ticket id in this row")
    rec["ticket_id"] = tid
    for f in _TIME_FIELDS:
        try:
            rec[f] = parse_when(get(f), zones.get(f, "UTC"), dayfirst=dayfirst, fmt=fmt)
        except (ValueError, OverflowError) as exc:
            if f == "opened_at":
                return {}, ("bad_timestamp", f"{f}: {exc}")
            rec[f] = None  # a secondary date that cannot be read does not cost the ticket
    for f in ("status", "host", *TEXT_FIELDS):
        rec[f] = cell_text(get(f))
    # A short text and a long description (Summary + Description) are read together.
    texts = [t for t in (rec["symptom_text"], cell_text(get("description"))) if t]
    rec["symptom_text"] = "\n".join(dict.fromkeys(texts)) or None
    for f in free:
        rec[f] = rec["symptom_text"]
    if rec["host"]:
        rec["host"] = rec["host"].strip()
    rec["slot"] = clean_slot(get("slot"))
    rec["serial_text"] = cell_text(get("serial"))
    rec["serial"] = clean_serial(get("serial"))
    if not any(rec[f] for f in TEXT_FIELDS) and rec["serial"] is None and rec["host"] is None:
        return {}, ("empty_ticket", "a ticket id but no text, serial or host")
    return rec, None


def ticket_files(data_dir: Path) -> list[tuple[str, Path]]:
    """(service point, file) for every export under ``DATA/tickets/<point>/``, sorted."""
    root = Path(data_dir) / "tickets"
    if not root.is_dir():
        return []
    out = []
    for point_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in sorted(point_dir.rglob("*")):
            if f.is_file() and f.suffix.lower() in SUFFIXES and not f.name.startswith(("~$", ".")):
                out.append((point_dir.name, f))
    return out


def run(ctx) -> None:
    """Stage ``tickets``: load new and changed exports into ``tickets_raw``."""
    files = ticket_files(ctx.data_dir)
    if not files:
        ctx.note("tickets", f"no ticket exports under {ctx.data_dir / 'tickets'}")
        return
    by_point: dict[str, list[Path]] = {}
    for point, f in files:
        by_point.setdefault(point, []).append(f)
    for point, paths in by_point.items():
        ctx.ingest_files(
            "tickets", paths,
            lambda p, fid, point=point: load_tickets(p, fid, point, ctx.cfg, source=ctx.file_key(p)),
        )
    ctx.report("tickets").rows_out = ctx.wh.scalar("SELECT count(*) FROM tickets_raw")


def latest_sql(table: str = "tickets_raw") -> str:
    """SQL for the latest version of each (service point, ticket): overlapping dumps repeat a
    ticket with its status moved on. Latest = newest ``updated_at``, then the dump holding
    the newest dates (a dump is at least as new as every date in it), then the file name
    (dumps are named by date), then the later line."""
    return f"""
        WITH dumps AS (
            SELECT file_id, max(greatest(coalesce(updated_at, opened_at), coalesce(closed_at, opened_at))) AS dump_at
            FROM "{table}" GROUP BY file_id
        )
        SELECT r.* FROM "{table}" r LEFT JOIN dumps d USING (file_id)
        QUALIFY row_number() OVER (
            PARTITION BY r.service_point, r.ticket_id
            ORDER BY r.updated_at DESC NULLS LAST, d.dump_at DESC NULLS LAST, r.source_file DESC,
                     r.line_no DESC) = 1
    """
