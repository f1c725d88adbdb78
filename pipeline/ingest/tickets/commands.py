"""CLI: ``fleetfault tickets inspect FILE...``: the layout fleetfault would read.

For each export (each sheet of a workbook): which column fills each role, its score and
three sample values, what is unsure and why, and a ``[tickets.points.<point>]`` block that
reads it, ready to paste into ``fleetfault.toml``. Exits 1 when some export would be
quarantined as ``unrecognised_layout`` (or could not be read at all), 0 otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline.cli_app import ConfigOpt, group, setup


def inspect(
    files: Annotated[list[Path], typer.Argument(help="Ticket exports: CSV, XLSX, XLS, an HTML table saved as .xls, JSON or JSONL.")],
    point: Annotated[Optional[str], typer.Option("--point", help="Service point whose config (columns, date order, encoding) applies. Default: each file's folder name.")] = None,
    inventory: Annotated[Optional[Path], typer.Option("--inventory", help="inventory.csv whose hosts and serials are evidence for the host and serial columns. Default: DATA/inventory.csv when FILE lies in DATA/tickets/<point>/.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Print the layout fleetfault would read from ticket exports, and a config block for it."""
    from pipeline.errors import UsageError

    cfg = setup(config)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise UsageError(f"tickets inspect: no such file: {', '.join(missing)}")
    if inventory is not None and not inventory.is_file():
        raise UsageError(f"tickets inspect: --inventory {inventory}: no such file")
    unsure = 0
    for f in files:
        inv = inventory or _data_inventory(f)
        name = point or f.resolve().parent.name
        for block in inspect_file(f, name, cfg, _known(inv) if inv else None):
            typer.echo(block)
            unsure += block.startswith("UNSURE") or block.startswith("NOT READ")
    if unsure:
        raise typer.Exit(1)


def inspect_file(path: Path, point: str, cfg, known=None) -> list[str]:
    """The report blocks for one export: one per sheet with a header (or one saying why none)."""
    from pipeline.config import ServicePoint
    from pipeline.ingest.tickets.columns import cell_text, infer_dayfirst
    from pipeline.ingest.tickets.layout import recognise
    from pipeline.ingest.tickets.readers import read_export
    from pipeline.ingest.tickets.stage import guess_header, sheet_body, sheet_layout

    sp = cfg.tickets.points.get(point) or ServicePoint()
    got = read_export(path, sp.encoding)
    if got.rejects and not got.sheets:
        return [f"NOT READ {path}: " + "; ".join(f"{r.reason}: {r.detail}" for r in got.rejects)]
    blocks = []
    hits = [(sheet, sheet_layout(sheet, sp, known)) for sheet in got.sheets]
    headed = any(hit is not None for _, hit in hits)
    for sheet, hit in hits:
        if hit is None:
            if not sheet.rows:
                continue
            if headed:  # as the run does: a pivot or notes sheet beside the tickets is skipped
                blocks.append(f"SKIPPED {path} (sheet {sheet.name!r}): no ticket header")
                continue
            start = guess_header(sheet)
            header, body, _ = sheet_body(sheet, start)
            lay = recognise(header, [c for _, c in body], sp.columns, known)
            lay.problems.insert(0, "no row reads as a ticket header by its words")
        else:
            lay, header, body, _ = hit
        where = f"{path} (sheet {sheet.name!r}, {len(body)} rows)" if len(got.sheets) > 1 else f"{path} ({len(body)} rows)"
        dayfirst = None
        if "opened_at" in lay.columns:
            i = lay.columns["opened_at"]
            dayfirst = infer_dayfirst([cell_text(c[i]) for _, c in body if i < len(c)], sp.dayfirst)
        blocks.append(describe(lay, where, point, dayfirst))
    if got.rejects:
        blocks.append("\n".join(f"  {path}:{r.line_no or '-'}: {r.reason}: {r.detail}" for r in got.rejects))
    return blocks or [f"UNSURE {path}: no rows"]


def describe(lay, where: str, point: str, dayfirst: bool | None) -> str:
    """One export's layout as text: a table of roles, the problems, the config block."""
    from pipeline.ingest.tickets.layout import ROLES

    head = ("UNSURE (would be quarantined as unrecognised_layout) " if not lay.ok else "OK ") + where
    rows = [("role", "column", "score", "by", "samples")]
    for role in ROLES:
        c = lay.chosen.get(role)
        if c is not None:
            twins = f" (+{len(lay.more[role])} of that name)" if lay.more.get(role) else ""
            rows.append((role, c.header + twins, f"{c.score:.0f}", c.by, " | ".join(lay.samples(c.column))))
    used = set(lay.columns.values()) | {j for js in lay.more.values() for j in js}
    widths = [max(_width(r[k]) for r in rows) for k in range(4)]
    out = [head] + ["  " + "  ".join(r[k] + " " * (widths[k] - _width(r[k])) for k in range(4)) + "  " + r[4]
                    for r in rows]
    unused = [h for i, h in enumerate(lay.headers) if h and i not in used]
    if unused:
        out.append(f"  unused columns: {', '.join(unused)}")
    for p in lay.problems:
        out.append(f"  problem: {p}")
    for n in lay.notes:
        out.append(f"  note: {n}")
    out.append("  config block for fleetfault.toml:")
    out.extend("    " + line for line in lay.config_block(point, dayfirst=dayfirst).splitlines())
    return "\n".join(out)


def _width(s: str) -> int:
    """Columns a terminal gives ``s``: Chinese characters take two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def _data_inventory(path: Path) -> Path | None:
    """DATA/inventory.csv for an export at DATA/tickets/<point>/FILE."""
    parents = path.resolve().parents
    if len(parents) > 2 and parents[1].name == "tickets" and (parents[2] / "inventory.csv").is_file():
        return parents[2] / "inventory.csv"
    return None


def _known(path: Path):
    from pipeline.ingest.inventory import read_inventory
    from pipeline.ingest.tickets.values import Known

    got = read_inventory(path, 0)
    inv = got.tables.get("inventory")
    if inv is None or not len(inv):
        return None
    import polars as pl

    inv = pl.DataFrame(inv) if not isinstance(inv, pl.DataFrame) else inv
    return Known.of(inv["host"].to_list(), inv["serial"].to_list())


def register(app: typer.Typer) -> None:
    group("tickets", "Look at ticket exports before a run: the layout fleetfault would read.").command("inspect")(inspect)
