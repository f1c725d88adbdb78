"""Ingest every service point's ticket exports into ``tickets_raw``.

Reads: ``DATA/tickets/<service_point>/*.{csv,xlsx,json,jsonl}`` and the point's section of
the config (``tickets.points.<point>``: columns, date format, day/month order, encoding,
zone). Writes: ``tickets_raw``, one row per ticket row of each file, with its file and line,
so overlapping periodic dumps are all kept here and the ``normalize`` stage picks the latest
version of each ticket. Broken rows go to the quarantine with a reason; the rest is loaded.
Which column fills which field is decided by :mod:`pipeline.ingest.tickets.layout`; an export
whose layout it is unsure of is quarantined whole (``unrecognised_layout``) and read again on
the next run, when a config block may name its columns.
Cell text is stored as text: ``=cmd|...`` is a string here, never a formula.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import polars as pl

from pipeline.config import Config, ServicePoint
from pipeline.engine.dialect import Dialect
from pipeline.ingest.tickets.columns import (
    TEXT_FIELDS, cell_text, clean_serial, clean_slot, header_zone, infer_dayfirst, map_columns, parse_when,
)
from pipeline.ingest.tickets.layout import Layout, recognise
from pipeline.ingest.tickets.readers import SUFFIXES, Sheet, read_export
from pipeline.ingest.tickets.swaps import pick_swap
from pipeline.ingest.tickets.values import Known
from pipeline.warehouse import Loaded, Rejected

log = logging.getLogger(__name__)

#: How many rows above the header an export may put titles and notes in.
HEADER_SEARCH_ROWS = 15

RAW_SCHEMA = {
    "service_point": pl.Utf8, "ticket_id": pl.Utf8, "opened_at": pl.Datetime("us"),
    "closed_at": pl.Datetime("us"), "updated_at": pl.Datetime("us"), "status": pl.Utf8, "host": pl.Utf8,
    "slot": pl.Int32, "serial_text": pl.Utf8, "serial": pl.Utf8, "part_text": pl.Utf8, "symptom_text": pl.Utf8,
    "action_text": pl.Utf8, "swap_part_text": pl.Utf8, "removed_serial": pl.Utf8, "installed_serial": pl.Utf8,
    "source_file": pl.Utf8, "sheet": pl.Utf8, "file_id": pl.Int64, "line_no": pl.Int64,
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


def find_header(sheet: Sheet, columns: dict[str, str]) -> int | None:
    """Index in ``sheet.rows`` of the header row (-1: the reader gave it), or None: the first
    of the top rows whose headers name a ticket id and some text (exports put titles above)."""
    if sheet.header is not None:
        return -1 if map_columns(sheet.header, columns) else None
    for idx, (_, cells) in enumerate(sheet.rows[:HEADER_SEARCH_ROWS]):
        if map_columns(cells, columns):
            return idx
    return None


def sheet_body(sheet: Sheet, start: int) -> tuple[list, list[tuple[int, list]], int]:
    """(header cells, data rows, rows skipped) of a sheet whose header is at ``start``:
    blank rows, the header repeated where dumps were pasted together and totals rows are
    skipped."""
    header = sheet.header if start < 0 else sheet.rows[start][1]
    body, skipped = [], max(start + 1, 0)
    for line_no, cells in sheet.rows[start + 1:]:
        if cells == header or not any(c is not None and str(c).strip() for c in cells) or _is_total(cells):
            skipped += 1
        else:
            body.append((line_no, cells))
    return header, body, skipped


def guess_header(sheet: Sheet) -> int:
    """For a sheet with no recognisable header, the top row most like one (most text cells),
    so that a message can say what the columns were and what they might be."""
    if sheet.header is not None:
        return -1
    top = sheet.rows[:HEADER_SEARCH_ROWS]
    texts = [sum(isinstance(c, str) and bool(c.strip()) and not c.strip().isdigit() for c in cells) for _, cells in top]
    return max(range(len(top)), key=lambda i: (texts[i], -i)) if top else -1


def sheet_layout(sheet: Sheet, sp: ServicePoint, known: Known | None = None) -> tuple[Layout, list, list, int] | None:
    """(layout, header cells, data rows, rows skipped) of one sheet, or None when the sheet
    holds nothing that looks like a ticket header."""
    start = find_header(sheet, sp.columns)
    if start is None:
        return None
    header, body, skipped = sheet_body(sheet, start)
    return recognise(header, [c for _, c in body], sp.columns, known), header, body, skipped


def unrecognised(source: str, point: str, sheet: Sheet, lay: Layout) -> Rejected:
    """The quarantine row for a sheet whose layout is unsure: the problems, the columns,
    the best guesses and the config block that would read it."""
    raw = "\t".join(lay.headers)
    detail = (f"sheet {sheet.name!r}: {lay.describe()}. Check the guesses and add to fleetfault.toml:\n"
              f"{lay.config_block(point)}\n(`fleetfault tickets inspect {source}` shows the layout)")
    return Rejected(None, "unrecognised_layout", raw, detail)


def load_tickets(path: Path, file_id: int, point: str, cfg: Config, *, source: str | None = None,
                 known: Known | None = None) -> Loaded:
    """Read one export of service point ``point`` into ``tickets_raw`` rows.

    ``known``: the inventory's hosts and serials, evidence for which column holds them.
    A sheet whose layout is unsure (see :mod:`pipeline.ingest.tickets.layout`) is one
    ``unrecognised_layout`` reject naming its columns and best guesses; nothing of it is loaded.
    """
    sp = cfg.tickets.points.get(point) or ServicePoint()
    tz = point_tz(cfg, point)
    source = source or str(path)
    got = read_export(path, sp.encoding)
    rejects = list(got.rejects)
    rows: list[dict] = []
    read = len(got.rejects)
    skipped = 0
    headed = 0
    for sheet in got.sheets:
        hit = sheet_layout(sheet, sp, known)
        if hit is None:
            if sheet.rows:
                log.info("%s: sheet %r has no ticket header; skipped", source, sheet.name)
            skipped += len(sheet.rows)
            continue
        headed += 1
        lay, header_cells, body, n_skip = hit
        skipped += n_skip
        if not lay.ok:
            rejects.append(unrecognised(source, point, sheet, lay))
            read += 1
            skipped += len(body)
            continue
        for note in lay.notes:
            log.info("%s: %s", source, note)
        cols = lay.columns
        # Empty trailing header cells (Excel's used range, "a,b,c,,,") do not widen a row.
        width = max((i + 1 for i, c in enumerate(header_cells) if cell_text(c) is not None), default=0)
        # Free text that fills no role may hold what was done: the action is then left to
        # review rather than read from the symptom.
        unsure = {"action_text"} if lay.loose_text else set()
        if free := _free_text_fields(cols, lay.named | unsure):
            log.info("%s: no %s column; coded from the description", source, "/".join(free))
        if unsure and "action_text" not in cols:
            log.info("%s: no action column, and free text in %s: action left empty", source,
                     [lay.headers[i] for i in lay.loose_text])
        zones = {f: header_zone(header_cells[cols[f]]) or tz for f in _TIME_FIELDS if f in cols}
        dates = [cell_text(c[cols["opened_at"]]) for _, c in body if "opened_at" in cols and cols["opened_at"] < len(c)]
        dayfirst = infer_dayfirst(dates, sp.dayfirst) if not sp.date_format else sp.dayfirst
        for line_no, cells in body:
            read += 1
            raw = sheet.raw.get(line_no) or "\t".join("" if c is None else str(c) for c in cells)
            rec, why = _row(cells, lay, width, sheet.header is None and bool(sheet.raw), zones, dayfirst, sp.date_format,
                            free)
            if why:
                rejects.append(Rejected(line_no, why[0], raw, why[1]))
                continue
            rec.update(service_point=point, source_file=source, sheet=sheet.name, file_id=file_id, line_no=line_no)
            rows.append(rec)
    if not headed and any(s.rows for s in got.sheets):
        sheet = next(s for s in got.sheets if s.rows)
        start = guess_header(sheet)
        header, body, _ = sheet_body(sheet, start)
        lay = recognise(header, [c for _, c in body], sp.columns, known)
        if lay.ok:  # the headers alone said nothing, yet the values fill every required role
            lay.problems.append("no row reads as a ticket header by its words")
        rejects.append(unrecognised(source, point, sheet, lay))
        read += 1
        skipped += sum(len(s.rows) for s in got.sheets)
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


def _free_text_fields(cols: dict[str, int], named: set[str] = frozenset()) -> tuple[str, ...]:
    """Text fields without a column of their own: the layout's free text is fed to each,
    so an export with one description column is coded in part, symptom and action. A field
    whose column is there but held no such text (``Resolution``: Done) stays empty."""
    if not any(f in cols for f in ("symptom_text", "title", "description")):
        return ()
    return tuple(f for f in ("part_text", "action_text") if f not in cols and f not in named)


def _row(cells: list, lay: Layout, width: int, check_width: bool, zones: dict[str, str], dayfirst: bool,
         fmt: str, free: tuple[str, ...] = ()) -> tuple[dict, tuple[str, str] | None]:
    """One data row to a record, or the reason it cannot be loaded."""
    if check_width and len(cells) != width:
        extra = cells[width:]
        if len(cells) < width or any(cell_text(c) is not None for c in extra):
            return {}, ("field_count", f"{len(cells)} fields where the header has {width}")
    cols = lay.columns
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
    rec["status"] = cell_text(get("status"))
    rec["host"] = cell_text(get("host"))
    text = {f: _text(cells, lay, f) for f in (*TEXT_FIELDS, "title", "description")}
    rec["part_text"], rec["action_text"] = text["part_text"], text["action_text"]
    # A title, a symptom and a long description (Summary + Description) are read together.
    texts = [t for t in (text["title"], text["symptom_text"], text["description"]) if t]
    rec["symptom_text"] = "\n".join(dict.fromkeys(texts)) or None
    swap = pick_swap(get("swap_part_text"), get("removed_serial"), get("installed_serial"))
    rec.update(swap_part_text=swap.kind, removed_serial=swap.removed, installed_serial=swap.installed)
    if "part_text" not in cols and swap.kind:
        rec["part_text"] = swap.kind  # the part the tool says was swapped, as it wrote it
    for f in free:
        rec[f] = rec[f] or rec["symptom_text"]
    if swap.others:
        rec["part_text"] = "\n".join(t for t in (rec["part_text"], "also swapped: " + "; ".join(swap.others)) if t)
    if rec["host"]:
        rec["host"] = rec["host"].strip()
    rec["slot"] = clean_slot(get("slot"))
    rec["serial_text"] = cell_text(get("serial"))
    rec["serial"] = clean_serial(get("serial"))
    if rec["serial"] is None and swap.removed:  # the removed unit is the ticket's failed one
        rec["serial_text"], rec["serial"] = swap.removed_text, swap.removed
    if not any(rec[f] for f in TEXT_FIELDS) and rec["serial"] is None and rec["host"] is None:
        return {}, ("empty_ticket", "a ticket id but no text, serial or host")
    return rec, None


#: Jira writes each comment as ``05/Mar/25 2:10 PM;jsmith;the text``.
_JIRA_COMMENT = re.compile(r"^\d{1,2}/[A-Za-z]{3}/\d{2,4} \d{1,2}:\d{2}(?: ?[AP]M)?;[^;\n]*;")


def _text(cells: list, lay: Layout, role: str) -> str | None:
    """A text role's value: its column, joined with the columns repeating its header."""
    idx = [lay.columns[role], *lay.more.get(role, [])] if role in lay.columns else []
    parts = [_JIRA_COMMENT.sub("", t).strip() for i in idx if i < len(cells) and (t := cell_text(cells[i]))]
    return "\n".join(p for p in parts if p) or None


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
    """Stage ``tickets``: load new and changed exports into ``tickets_raw``.

    Exports quarantined as ``unrecognised_layout`` are read again every night, unchanged or
    not: the config block pasted since, or a fuller inventory, may now read them.
    """
    files = ticket_files(ctx.data_dir)
    if not files:
        ctx.note("tickets", f"no ticket exports under {ctx.data_dir / 'tickets'}")
        return
    by_point: dict[str, list[Path]] = {}
    for point, f in files:
        by_point.setdefault(point, []).append(f)
    known = known_assets(ctx.wh)
    retry = {r[0] for r in ctx.wh.engine.rows(
        "SELECT DISTINCT source_file FROM quarantine WHERE stage = 'tickets' AND reason = 'unrecognised_layout'",
        step="exports to read again")}
    for point, paths in by_point.items():
        results = ctx.load_files(
            "tickets", paths,
            lambda p, fid, point=point: load_tickets(p, fid, point, ctx.cfg, source=ctx.file_key(p), known=known),
            reload=[p for p in paths if ctx.file_key(p) in retry],
        )
        ctx.tally("tickets", results)
    n = ctx.wh.engine.scalar("SELECT count(DISTINCT source_file) FROM quarantine WHERE stage = 'tickets' "
                             "AND reason = 'unrecognised_layout'", step="unrecognised exports")
    if n:
        ctx.note("tickets", f"{n} export(s) not read: layout unsure (reason unrecognised_layout; "
                            f"`fleetfault tickets inspect FILE` prints a config block that reads them)")
    ctx.report("tickets").rows_out = ctx.wh.engine.scalar("SELECT count(*) FROM tickets_raw", step="tickets_raw rows")


def known_assets(wh) -> Known | None:
    """The inventory's hosts and serials (loaded by the stage before), or None when empty."""
    if not wh.table_exists("inventory"):
        return None
    rows = wh.engine.rows("SELECT host, serial FROM inventory", step="inventory hosts and serials")
    return Known.of((h for h, _ in rows), (s for _, s in rows)) if rows else None


def latest_sql(table: str = "tickets_raw", dialect: Dialect | None = None) -> str:
    """SQL for the latest version of each (service point, ticket): overlapping dumps repeat a
    ticket with its status moved on. Latest = newest ``updated_at``, then the dump holding
    the newest dates (a dump is at least as new as every date in it), then the file name
    (dumps are named by date), then the later line. In the SQL of ``dialect`` (default
    DuckDB's; Spark's quotes names otherwise)."""
    name = (dialect or Dialect()).quote(table)
    return f"""
        WITH dumps AS (
            SELECT file_id, max(greatest(coalesce(updated_at, opened_at), coalesce(closed_at, opened_at))) AS dump_at
            FROM {name} GROUP BY file_id
        )
        SELECT r.* FROM {name} r LEFT JOIN dumps d ON d.file_id = r.file_id  -- (USING: Spark puts file_id first in r.*)
        QUALIFY row_number() OVER (
            PARTITION BY r.service_point, r.ticket_id
            ORDER BY r.updated_at DESC NULLS LAST, d.dump_at DESC NULLS LAST, r.source_file DESC,
                     r.line_no DESC) = 1
    """
