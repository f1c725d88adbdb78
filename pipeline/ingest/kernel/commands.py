"""CLI: ``fleetfault parse xid FILE... [--host H] [--tz ZONE] -o OUT``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline.cli_app import ConfigOpt, OutOpt


def parse_xid(
    files: Annotated[list[Path], typer.Argument(help="Kernel logs (dmesg, dmesg -T/-H/iso, syslog, journalctl, kern.log), plain or .gz.")],
    out: OutOpt,
    host: Annotated[Optional[str], typer.Option("--host", help="Host of every file. Default: each file's folder name (a syslog line's own host wins).")] = None,
    tz: Annotated[Optional[str], typer.Option("--tz", help="Zone of local timestamps (dmesg -T, syslog), e.g. Asia/Shanghai. Default: time.default_tz in the config.")] = None,
    boot_time: Annotated[Optional[str], typer.Option("--boot-time", help="Boot time (ISO 8601) for uptime-only dmesg lines without a boot marker.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Kernel logs to one row per Xid/SXid event.

    The same event seen in several of the files (dmesg and syslog, overlapping rotations)
    is written once. Unrelated lines are skipped; lines that look like an Xid event but
    cannot be read are listed on stderr and the command exits 1; the rest is written.
    """
    from pipeline.cli_app import console, out_console, parse_inputs, setup
    from pipeline.errors import UsageError
    from pipeline.ingest.kernel.stage import parse_xid_files
    from pipeline.output import write_table
    from pipeline.timeutil import parse_datetime

    cfg = setup(config)
    zone = parse_inputs("parse xid", cfg, tz, files)
    boot = None
    if boot_time:
        try:
            boot = parse_datetime(boot_time, zone)
        except ValueError:
            raise UsageError(f"parse xid: --boot-time {boot_time!r} is not a date/time; use ISO 8601 like 2024-03-05T08:00:00+08:00") from None
    df, rejects = parse_xid_files(files, host=host, tz=zone, boot_time=boot)
    for r in rejects:
        where = f"{r.line_no}: {r.reason}: {r.raw[:200]}" if r.line_no is not None else \
            f"-: {r.reason}: {r.detail.split(': ', 1)[-1]}"  # a file rejected whole: why, not a line
        console.print(f"fleetfault: {r.detail.split(':')[0]}:{where}", markup=False, highlight=False, soft_wrap=True)
    write_table(df, out)
    out_console.print(f"wrote {df.height} Xid/SXid events to {out}" + (f"; {len(rejects)} unreadable event lines" if rejects else ""))
    if rejects:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    from pipeline.cli_app import group

    group("parse", "Parse raw logs to clean tables, without a warehouse.").command("xid")(parse_xid)
