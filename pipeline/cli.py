"""The ``fleetfault`` command line (typer + rich): the nightly ``run``, ``export`` and the
exit-code contract a scheduler relies on.

Each stage package adds its own commands through ``register(app)`` in a ``commands``
module listed in ``_COMMAND_MODULES``; what those modules share (the app, options,
consoles, ``setup``) lives in :mod:`pipeline.cli_app`. Exit codes: 0 all loaded; 1 some
input quarantined (every output still written); 2 usage, configuration or environment
error; 3 internal error. Whatever goes wrong, stderr gets one line, never a traceback: the
details of an internal error go to a log file whose path that line gives.
"""

from __future__ import annotations

import importlib
import shlex
import sys
import tempfile
import traceback
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from pipeline.cli_app import (  # noqa: F401  (re-exported: older code imports them from here)
    ConfigOpt, EngineOpt, OutOpt, WarehouseOpt, app, console, existing_warehouse, group, out_console, parse_inputs, setup,
    warehouse_path,
)
from pipeline.errors import FleetfaultError, UsageError

#: Modules whose ``register(app)`` adds commands. Only commands that work are listed.
_COMMAND_MODULES: list[str] = [
    "pipeline.normalize.commands",
    "pipeline.collect.commands",
    "pipeline.report.commands",
    "pipeline.stats.commands",
    "pipeline.ingest.kernel.commands",
    "pipeline.ingest.telemetry.commands",
    "pipeline.ingest.tickets.commands",
    "pipeline.predict.commands",
    "pipeline.simulate.commands",
    "pipeline.normalize.evaluate_commands",
]

@app.command()
def run(
    data: Annotated[Optional[Path], typer.Option("--data", help="Input folder (inventory.csv, telemetry/, kernel/, tickets/). Default: data/sample.")] = None,
    warehouse: WarehouseOpt = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Folder for the report and exports. Default: out/.")] = None,
    config: ConfigOpt = None,
    engine: EngineOpt = None,
    stage: Annotated[Optional[list[str]], typer.Option("--stage", help="Run only this stage (repeatable); used by dvc.yaml.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
    accept_rejects: Annotated[bool, typer.Option("--accept-rejects", help="Exit 0 even when rows were quarantined (for schedulers such as DVC that stop on any non-zero exit).")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log each step.")] = False,
) -> None:
    """The nightly job: ingest new files, normalize, link, compute statistics, predict, report.

    Files already loaded unchanged are skipped, so running it twice loads nothing twice.
    Exits 1 when some rows were rejected (see the quarantine table), 0 otherwise.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from pipeline.run import run_pipeline

    from pipeline.location import resolve_warehouse

    cfg = setup(config, verbose, engine)
    data_dir = Path(data) if data else Path(cfg.paths.data)
    out_dir = Path(out) if out else Path(cfg.paths.out)
    loc = resolve_warehouse(cfg, warehouse)
    wh = loc.catalog  # the DuckDB file: what every other command's --warehouse also accepts
    if quiet or not console.is_terminal:
        reports, code = run_pipeline(cfg, data_dir, loc, out_dir, stages=stage)
    else:
        cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*cols, console=console, transient=True) as progress:
            reports, code = run_pipeline(cfg, data_dir, loc, out_dir, stages=stage, progress=progress)
    table = Table(title=f"fleetfault run: {data_dir} -> {wh}" + (f" (tables {loc.tables})" if loc.tables else ""))
    for col in ("stage", "files", "skipped", "read", "loaded", "rejected", "out", "s"):
        table.add_column(col, justify="left" if col == "stage" else "right", no_wrap=True)
    table.caption = "skipped: files already loaded unchanged; rejected: rows sent to the quarantine"
    for r in reports:
        table.add_row(r.stage, str(r.files), str(r.unchanged), str(r.rows_read), str(r.rows_loaded),
                      str(r.rows_quarantined), str(r.rows_out), f"{r.seconds:.1f}")
    out_console.print(table)
    for r in reports:
        for n in r.notes:
            out_console.print(f"[dim]{r.stage}:[/dim] {n}")
    new_rows = sum(r.rows_loaded for r in reports)
    changed = sum(r.files - r.unchanged for r in reports)
    if changed == 0:
        out_console.print("No new rows: every input file was already loaded unchanged.")
    else:
        out_console.print(f"Loaded {new_rows} new rows from {changed} new or changed files. "
                          f"Outputs in {out_dir}/, warehouse {wh}.")
    if code:
        hint = f"fleetfault export quarantine --warehouse {shlex.quote(str(wh))} -o quarantine.csv"
        n = sum(r.rows_quarantined for r in reports)
        console.print(f"fleetfault: {n} row{'s' if n != 1 else ''} quarantined "
                      f"(see `{hint}`)", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(0 if accept_rejects else code)


#: export name -> (warehouse table, columns or None for all declared ones)
EXPORTS: dict[str, tuple[str, list[str] | None]] = {
    "xid": ("xid_events", ["ts", "uptime_s", "host", "pci_bus_id", "kind", "xid", "pid", "process",
                           "message", "source_file", "line_no", "ts_quality", "ts_error_s", "serial"]),
    "tickets": ("tickets", ["ticket_id", "service_point", "opened_at", "host", "serial", "part_text",
                            "symptom_text", "action_text", "part_code", "part_score", "symptom_code",
                            "symptom_score", "action_code", "action_score", "review"]),
    "gpu_days": ("gpu_days", None),
    "failures": ("failures", ["serial", "failed_at", "ticket_id", "part_code", "symptom_code"]),
    "inventory": ("inventory", None),
    "inventory_observed": ("inventory_observed", None),
    "inventory_stale": ("inventory_stale", None),
    "quarantine": ("quarantine", None),
    "files": ("files", None),
    "runs": ("runs", None),
}


@app.command()
def export(
    table: Annotated[str, typer.Argument(help="xid, tickets, gpu_days, failures, inventory, quarantine, files or runs.")],
    out: OutOpt,
    warehouse: WarehouseOpt = None,
    engine: EngineOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write one warehouse table with the contract's columns."""
    from pipeline.output import write_table
    from pipeline.run import open_warehouse
    from pipeline.vocab.sql import ident

    cfg = setup(config, engine=engine)
    if table not in EXPORTS:
        raise UsageError(f"export: unknown table {table!r}; choose one of {', '.join(EXPORTS)}")
    name, cols = EXPORTS[table]
    with open_warehouse(cfg, existing_warehouse(cfg, warehouse), read_only=True) as wh:
        select = ", ".join(ident(c) for c in cols) if cols else "*"
        order = {"xid": " ORDER BY ts, host", "tickets": " ORDER BY opened_at, ticket_id",
                 "gpu_days": " ORDER BY gpu_key, day", "failures": " ORDER BY failed_at"}.get(table, "")
        df = wh.engine.pl(f"SELECT {select} FROM {ident(name)}{order}", step=f"export {table}")
    write_table(df, out)
    out_console.print(f"wrote {df.height} rows of {table} to {out}")


def _register_commands() -> None:
    for mod in _COMMAND_MODULES:
        importlib.import_module(mod).register(app)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run the app, turning every error into one line and an exit code.

    With ``argv`` given (tests, notebooks) the exit code is returned instead of exiting.
    """
    try:
        code = app(args=argv, prog_name="fleetfault", standalone_mode=False)
        code = code if isinstance(code, int) else 0
    except SystemExit as exc:  # a command that exits on its own
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except (typer.Abort, KeyboardInterrupt):
        _say("fleetfault: interrupted")
        code = 130
    except FleetfaultError as exc:
        code = exc.exit_code
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        if code == 3 or len(lines) > 1:  # the rest (SQL, a cause's traceback) goes to a log
            lines[0] += f"; details in {_crash_log(exc)}"
        _say(f"fleetfault: {'internal ' if code == 3 else ''}error: {lines[0]}")
    except Exception as exc:
        code = _click_error(exc)
        if code is None:  # a bug: one line for the scheduler, the traceback in a file
            first = (str(exc).strip().splitlines() or [""])[0]
            _say(f"fleetfault: internal error: {type(exc).__name__}: {first}; details in {_crash_log(exc)}")
            code = 3
    if argv is None:
        sys.exit(code)
    return code


def _click_error(exc: Exception) -> int | None:
    """Click's (or typer's vendored click's) usage errors as one line, not a boxed block;
    None for any other exception. Recognised by shape: typer ships its own copy of click."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # ``fleetfault``, ``fleetfault parse``: the help
        ctx = getattr(exc, "ctx", None)
        text = ctx.get_help() if ctx is not None else ""  # typer's rich help prints itself
        if text:
            out_console.print(text, markup=False, highlight=False)
        return 0
    if not (callable(getattr(exc, "format_message", None)) and isinstance(getattr(exc, "exit_code", None), int)):
        return None
    ctx = getattr(exc, "ctx", None)
    where = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
    _say(f"fleetfault: error: {exc.format_message().rstrip('.')}{where}")
    return 2


def _say(line: str) -> None:
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def _crash_log(exc: BaseException) -> Path:
    """Write the traceback (causes included) and the command line to a new log file."""
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
    fd, name = tempfile.mkstemp(prefix=f"fleetfault-{stamp}-", suffix=".log")
    with open(fd, "w", encoding="utf-8") as f:
        f.write(f"fleetfault {' '.join(map(shlex.quote, sys.argv[1:]))}\n\n")
        f.write("".join(traceback.format_exception(exc)))
    return Path(name)


if __name__ == "__main__":  # python -m pipeline.cli
    main()
