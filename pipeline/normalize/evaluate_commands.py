"""CLI: ``fleetfault evaluate tickets CODED --truth TRUTH [-o OUT]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline.cli_app import ConfigOpt


def read_any(path: Path, what: str):
    """A CSV (every column as text), Parquet or XLSX (first sheet) file as a polars frame."""
    import polars as pl

    from pipeline.errors import UsageError

    if not path.is_file():
        raise UsageError(f"{what}: no such file {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            return pl.read_parquet(path)
        if suffix == ".xlsx":
            from openpyxl import load_workbook

            ws = load_workbook(path, read_only=True, data_only=True).worksheets[0]
            rows = [[None if v is None else str(v) for v in r] for r in ws.iter_rows(values_only=True)]
            if not rows:
                return pl.DataFrame()
            return pl.DataFrame(rows[1:], schema=[str(h) for h in rows[0]], orient="row")
        return pl.read_csv(path, infer_schema=False, encoding="utf8-lossy")
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise UsageError(f"{what}: cannot read {path} as {suffix or 'CSV'}: {exc}") from None


def evaluate_tickets(
    coded: Annotated[Path, typer.Argument(help="Coded tickets (`fleetfault normalize` or `export tickets` output): CSV, Parquet or XLSX.")],
    truth: Annotated[Path, typer.Option("--truth", help="Ground truth with service_point, ticket_id and the code columns (e.g. simulate's truth/tickets.csv).")],
    out: Annotated[Optional[Path], typer.Option("-o", "--out", help="Write the scores and the error table here (.parquet, .xlsx, else CSV).")] = None,
    config: ConfigOpt = None,
) -> None:
    """Score coded tickets against truth: per dimension the precision on automatically
    coded rows, the coverage, and the most frequent errors."""
    import polars as pl
    from rich.table import Table

    from pipeline.cli_app import out_console, setup
    from pipeline.normalize.evaluate import score
    from pipeline.output import write_table

    cfg = setup(config)
    frame = read_any(coded, "CODED")
    if all(f"{d}_text" in frame.columns for d in ("part", "symptom", "action")) and "part_route" not in frame.columns:
        # how the rules found each code (the calibration's route), read again from the texts
        from pipeline.normalize.matcher import Matcher

        frame = pl.concat([frame, Matcher.load(cfg, prior=False).routes(frame)], how="horizontal")
    report = score(frame, read_any(truth, "--truth"))
    table = Table(title=f"{coded} vs {truth}")
    for col in ("dimension", "tickets", "auto-coded", "correct", "precision", "coverage"):
        table.add_column(col, justify="left" if col == "dimension" else "right")
    for r in report.summary.iter_rows(named=True):
        table.add_row(r["dimension"], str(r["tickets"]), str(r["auto"]), str(r["correct"]),
                      f"{100 * r['precision']:.2f}%", f"{100 * r['coverage']:.2f}%")
    out_console.print(table)
    undecidable = report.summary.filter(pl.col("decidable") < pl.col("tickets"))
    for r in undecidable.iter_rows(named=True):
        out_console.print(f"{r['dimension']}: {r['tickets'] - r['decidable']} tickets have no gold code (no code is right); "
                          f"coverage of the {r['decidable']} others {100 * r['decided_coverage']:.2f}%")
    if report.reliability.height:
        rel = Table(title="reliability: auto-coded codes scoring >= s")
        for col in ("dimension", "score >= s", "codes", "right", "mean score"):
            rel.add_column(col, justify="left" if col == "dimension" else "right")
        for r in report.reliability.filter(pl.col("codes") > 0).iter_rows(named=True):
            rel.add_row(r["dimension"], f"{r['score_at_least']:.0f}", str(r["codes"]),
                        f"{100 * r['precision']:.2f}%", f"{100 * r['mean_score']:.2f}%")
        out_console.print(rel)
    if report.routes.height:
        by = Table(title="reliability per route: auto-coded codes by how the rules found them")
        for col in ("dimension", "route", "codes", "right", "mean score"):
            by.add_column(col, justify="left" if col in ("dimension", "route") else "right")
        for r in report.routes.iter_rows(named=True):
            by.add_row(r["dimension"], r["route"] or "-", str(r["codes"]), f"{100 * r['precision']:.2f}%",
                       "-" if r["mean_score"] is None else f"{100 * r['mean_score']:.2f}%")
        out_console.print(by)
    if report.confusion.height:
        errors = Table(title="most frequent errors (auto-coded)")
        for col in ("dimension", "truth", "coded", "n"):
            errors.add_column(col)
        for r in report.confusion.head(15).iter_rows():
            errors.add_row(*(str(v) for v in r))
        out_console.print(errors)
    if report.unmatched_coded or report.unmatched_truth:
        out_console.print(f"{report.unmatched_coded} coded rows have no truth; "
                          f"{report.unmatched_truth} truth rows were not coded")
    verdict = "meets" if report.passed() else "misses"
    out_console.print(f"{verdict} the targets (precision >= 99%, coverage >= 95% of decidable tickets per dimension)")
    if out is not None:
        tidy = pl.concat([
            report.summary.with_columns(pl.lit("score").alias("section")),
            report.confusion.with_columns(pl.lit("error").alias("section")),
            report.missed.with_columns(pl.lit("review").alias("section")),
            report.reliability.with_columns(pl.lit("reliability").alias("section")),
            *([report.routes.with_columns(pl.lit("route").alias("section"))] if report.routes.height else []),
        ], how="diagonal_relaxed")
        first = ["section", "dimension", "truth", "coded", "n"]
        write_table(tidy.select(first + [c for c in tidy.columns if c not in first]), out)
        out_console.print(f"wrote {tidy.height} rows to {out}")


def register(app: typer.Typer) -> None:
    from pipeline.cli_app import group

    group("evaluate", "Score outputs against ground truth.").command("tickets")(evaluate_tickets)
