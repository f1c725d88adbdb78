"""``fleetfault parse smi``: nvidia-smi CSV logs to one clean table, without a warehouse."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline.cli_app import ConfigOpt, OutOpt, console, group, out_console, parse_inputs, setup
from pipeline.errors import UsageError


def register(app: typer.Typer) -> None:
    parse = group("parse", "Parse raw logs to clean tables, without a warehouse.")

    @parse.command("smi")
    def parse_smi(
        files: Annotated[list[Path], typer.Argument(help="nvidia-smi --query-gpu CSV logs (.csv or .csv.gz), oldest first.")],
        out: OutOpt,
        fields: Annotated[Optional[str], typer.Option("--fields", help="Query fields of headerless (noheader) files, comma-separated, e.g. timestamp,index,temperature.gpu.")] = None,
        host: Annotated[Optional[str], typer.Option("--host", help="Host of the samples. Default: each file's folder name.")] = None,
        tz: Annotated[Optional[str], typer.Option("--tz", help="Time zone of the timestamps (IANA name). Default: time.default_tz in the config (UTC).")] = None,
        config: ConfigOpt = None,
    ) -> None:
        """nvidia-smi CSV logs to one clean table: UTC timestamps, numbers without units.

        Exits 1 when some lines could not be read (they are listed on stderr), 0 otherwise.
        """
        from pipeline.ingest.telemetry import parse_smi_files
        from pipeline.output import write_table

        cfg = setup(config)
        zone = parse_inputs("parse smi", cfg, tz, files)
        if fields is not None and not [x for x in fields.split(",") if x.strip()]:
            raise UsageError("--fields: give the query fields, comma-separated, e.g. timestamp,index,temperature.gpu")
        df, rejects = parse_smi_files(files, host=host, tz=zone, fields=fields)
        write_table(df, out)
        out_console.print(f"wrote {df.height} samples ({df.width} columns) to {out}")
        if rejects:
            for r in rejects[:20]:
                where = f"line {r.line_no}" if r.line_no is not None else "file"  # a file judged whole
                console.print(f"rejected {where}: {r.reason}: {r.detail}", markup=False, highlight=False, soft_wrap=True)
            more = " (first 20 shown)" if len(rejects) > 20 else ""
            n = len(rejects)
            console.print(f"fleetfault: {n} line{'s' if n != 1 else ''} could not be read{more}", markup=False)
            raise typer.Exit(1)
