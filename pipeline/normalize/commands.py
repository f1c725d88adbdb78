"""CLI: ``fleetfault normalize`` and ``fleetfault review export|import``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline.cli_app import ConfigOpt, EngineOpt, OutOpt, WarehouseOpt

#: The contract's ``normalize`` columns, in order.
NORMALIZE_COLUMNS = ["ticket_id", "service_point", "opened_at", "host", "serial", "part_text", "symptom_text",
                     "action_text", "part_code", "part_score", "symptom_code", "symptom_score", "action_code",
                     "action_score", "review"]


def normalize(
    files: Annotated[list[Path], typer.Argument(help="Ticket exports: CSV (any common encoding), XLSX, an HTML table saved as .xls, JSON or JSONL.")],
    out: OutOpt,
    point: Annotated[Optional[str], typer.Option("--point", help="Service point whose config (columns, date order, zone) applies. Default: each file's folder name.")] = None,
    config: ConfigOpt = None,
    warehouse: WarehouseOpt = None,
    engine: EngineOpt = None,
) -> None:
    """Ticket exports to coded tickets: part, symptom and action codes with scores.

    The latest version of a ticket repeated across overlapping dumps is kept. Answers
    imported through `fleetfault review import`, and the learned layer the last run trained
    on them, are used when the warehouse exists.
    Rows that cannot be read are listed on stderr and the command exits 1; the rest is written.
    """
    import polars as pl

    from pipeline.cli_app import console, out_console, setup, warehouse_path
    from pipeline.errors import UsageError
    from pipeline.ingest.tickets import RAW_SCHEMA, load_tickets
    from pipeline.normalize import stage
    from pipeline.output import write_table
    from pipeline.run import open_warehouse

    cfg = setup(config, engine=engine)
    frames, rejects = [], 0
    for i, f in enumerate(files, start=1):
        if not f.is_file():
            raise UsageError(f"normalize: no such file {f}")
        loaded = load_tickets(f, i, point or f.resolve().parent.name, cfg)
        frames.append(loaded.tables["tickets_raw"])
        for r in loaded.rejects:
            rejects += 1
            console.print(f"fleetfault: {f}:{r.line_no or '-'}: {r.reason}: {r.detail}", markup=False, highlight=False, soft_wrap=True)
    raw = pl.concat(frames) if frames else pl.DataFrame(schema=RAW_SCHEMA)
    rows = stage.latest(raw).sort("service_point", "ticket_id")
    learned = []
    wh_path = warehouse_path(cfg, warehouse)
    if wh_path.exists():
        with open_warehouse(cfg, wh_path, read_only=True) as wh:
            learned = stage.learned_answers(wh) if wh.table_exists("review_answers") else []
    coded = stage.code(rows, stage.load_matcher(cfg, learned))
    if wh_path.exists():
        coded = stage.stored_learned_layer(cfg, wh_path, coded)
    # Nothing is linked here: the serial is the one the ticket wrote.
    result = coded.with_columns(pl.col("serial_text").alias("serial")).select(NORMALIZE_COLUMNS)
    write_table(result, out)
    n_review = int(result["review"].sum()) if result.height else 0
    out_console.print(f"wrote {result.height} tickets to {out} ({n_review} await review)")
    if rejects:
        console.print(f"fleetfault: {rejects} rows rejected (listed above); the rest is in {out}")
        raise typer.Exit(1)


def review_export(
    out: Annotated[Path, typer.Option("-o", "--out", help="Review file to write (.xlsx, or .csv).")],
    warehouse: WarehouseOpt = None,
    engine: EngineOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Texts awaiting review, with the top three suggested codes and an empty `code` column.

    Fill in `code` (see the `codes` sheet), then run `fleetfault review import FILE`.
    """
    from pipeline.cli_app import existing_warehouse, out_console, setup
    from pipeline.normalize.review import export_review
    from pipeline.run import open_warehouse

    cfg = setup(config, engine=engine)
    with open_warehouse(cfg, existing_warehouse(cfg, warehouse)) as wh:
        n = export_review(wh, cfg, out)
    out_console.print(f"wrote {n} texts awaiting review to {out}" if n else f"nothing awaits review; wrote an empty {out}")


def review_import(
    file: Annotated[Path, typer.Argument(help="A review file from `fleetfault review export`, with `code` filled in.")],
    warehouse: WarehouseOpt = None,
    engine: EngineOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Store the chosen codes and recode the tickets: these texts and near variants are coded from now on."""
    from pipeline.cli_app import existing_warehouse, out_console, setup
    from pipeline.normalize.review import import_review
    from pipeline.run import open_warehouse, recode

    cfg = setup(config, engine=engine)
    with open_warehouse(cfg, existing_warehouse(cfg, warehouse)) as wh:
        stored = import_review(wh, cfg, file)
        _, waiting = recode(wh, cfg)
    out_console.print(f"stored {stored} answers from {file}; {waiting} tickets still await review")


def register(app: typer.Typer) -> None:
    from pipeline.cli_app import group

    app.command("normalize")(normalize)
    review = group("review", "Tickets the matcher was unsure of: out to a person, their codes back in.")
    review.command("export")(review_export)
    review.command("import")(review_import)
