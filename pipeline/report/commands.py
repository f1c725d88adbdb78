"""``fleetfault report``: the procurement report from an existing warehouse."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline.cli_app import ConfigOpt, EngineOpt, WarehouseOpt


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        out: Annotated[Path, typer.Option("-o", "--out", help="Report file (.html); the workbook is written beside it (.xlsx).")],
        warehouse: WarehouseOpt = None,
        engine: EngineOpt = None,
        config: ConfigOpt = None,
        prometheus: Annotated[Optional[Path], typer.Option("--prometheus", help="Also write the per-GPU risk and Xid counts as a Prometheus textfile (.prom).")] = None,
        data: Annotated[Optional[Path], typer.Option("--data", help="The input folder the warehouse was loaded from: its simulator marker (truth/params.json) puts the 'simulated data' banner on the report. Without it, report.data_origin in the config or the previous report beside OUT decides.")] = None,
    ) -> None:
        """Write the procurement report: one self-contained HTML file that opens offline and prints
        cleanly, plus an XLSX workbook with the table behind every chart."""
        from pipeline.cli_app import existing_warehouse, out_console, setup
        from pipeline.errors import UsageError
        from pipeline.report.build import build_report
        from pipeline.report.prometheus import write_textfile
        from pipeline.run import open_warehouse

        cfg = setup(config, engine=engine)
        if out.suffix.lower() not in (".html", ".htm"):
            raise UsageError(f"-o {out}: the report is HTML; give a file name ending in .html")
        with open_warehouse(cfg, existing_warehouse(cfg, warehouse), read_only=True) as wh:
            html, book = build_report(wh, cfg, at=out, data_dir=data).write(out)
            if prometheus:
                write_textfile(wh, prometheus)
        out_console.print(f"wrote {html} and {book}" + (f" and {prometheus}" if prometheus else ""))
