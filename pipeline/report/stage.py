"""The ``report`` stage of the nightly run: the deliverables people open.

Reads: every warehouse table (see :mod:`pipeline.report.build`). Writes, in ``ctx.out_dir``:
``report.html`` and ``report.xlsx`` (the procurement report and the tables behind its
charts), ``predictions.csv`` and ``predictions.xlsx`` (the on-call team's list, formula
cells neutralized) and ``fleetfault.prom`` (per-GPU risk and Xid counts for Prometheus).
It is last in the run because it reads what every other stage wrote.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.config import Config
from pipeline.output import write_table
from pipeline.report.build import build_report
from pipeline.report.prometheus import write_textfile
from pipeline.warehouse import Warehouse

#: The warehouse tables the report's SQL reads (with every ``stats_*`` table): handed to the
#: engine it runs on.
INPUTS: tuple[str, ...] = ("inventory", "gpu_days", "xid_events", "tickets", "failures", "predictions",
                           "predict_track", "model_runs", "files", "quarantine", "inventory_stale")


class OnEngine:
    """The warehouse as the report reads it: everything the warehouse offers, its SQL run on
    ``engine`` (where the run's ``[engine]`` is Spark, the report's tables are computed there
    from the inputs handed over; the files it writes come out the same)."""

    def __init__(self, wh: Warehouse, engine):
        self._wh, self.engine = wh, engine

    def __getattr__(self, name: str):
        return getattr(self._wh, name)


def report_inputs(wh: Warehouse) -> list[str]:
    """:data:`INPUTS` and the statistics tables, those the warehouse holds."""
    stats = sorted(n for n in wh.schemas if n.startswith("stats_"))
    return [n for n in (*INPUTS, *stats) if wh.table_exists(n)]


#: The contract's predicted-failure columns.
PREDICT_COLUMNS = ["rank", "serial", "host", "pci_bus_id", "model", "risk", "horizon_days", "top_factors"]


def prediction_list(wh: Warehouse) -> pl.DataFrame:
    """The latest predicted-failure list with the contract's columns (empty before a model ran)."""
    cols = ", ".join(wh.engine.dialect.quote(c) for c in PREDICT_COLUMNS)
    return wh.engine.pl(
        f"SELECT {cols} FROM predictions WHERE as_of = (SELECT max(as_of) FROM predictions) ORDER BY rank, serial",
        step="report: prediction list",
    )


def write_outputs(wh: Warehouse, cfg: Config, out_dir: str | Path, data_dir: str | Path | None = None) -> dict[str, Path]:
    """Write every deliverable into ``out_dir``; returns name -> path. ``data_dir`` is the input
    folder (its simulator marker puts a banner on the report)."""
    out = Path(out_dir)
    report = build_report(wh, cfg, at=out / "report.html", data_dir=data_dir)
    html, book = report.write(out / "report.html")
    preds = prediction_list(wh)
    return {
        "report": html,
        "workbook": book,
        "predictions_csv": write_table(preds, out / "predictions.csv"),
        "predictions_xlsx": write_table(preds, out / "predictions.xlsx"),
        "prometheus": write_textfile(wh, out / "fleetfault.prom"),
    }


def run(ctx) -> None:
    """Stage entry point (see :mod:`pipeline.run`)."""
    engine = ctx.engine_for(report_inputs(ctx.wh))
    source = ctx.wh if engine is ctx.wh.engine else OnEngine(ctx.wh, engine)
    paths = write_outputs(source, ctx.cfg, ctx.out_dir, ctx.data_dir)
    ctx.report("report").rows_out = len(paths)
    ctx.note("report", f"report in {paths['report']}, predicted failures in {paths['predictions_csv']}")
