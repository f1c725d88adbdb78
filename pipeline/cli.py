"""The ``fleetfault`` command line (typer + rich).

Each stage package adds its own commands through ``register(app)`` in a ``commands``
module listed in ``_COMMAND_MODULES``; this file holds the shared options, the nightly
``run``, ``export`` and the exit-code policy: 0 ok, 1 input rejected (rows quarantined),
2 usage or configuration error, always with one clear line on stderr.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from pipeline.config import Config, load_config
from pipeline.errors import FleetfaultError, UsageError

app = typer.Typer(
    name="fleetfault",
    help=(
        "Turn a GPU fleet's fault records (nvidia-smi logs, Xid kernel messages, service "
        "tickets) into failure rates, survival curves and a ranked list of GPUs likely to fail."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)
out_console = Console()

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="Config file (TOML). Default: ./fleetfault.toml if present, else built-in defaults.")]
WarehouseOpt = Annotated[Optional[Path], typer.Option("--warehouse", help="DuckDB warehouse file. Default: paths.warehouse in the config (fleetfault.duckdb).")]

#: Modules whose ``register(app)`` adds commands. Only commands that work are listed.
_COMMAND_MODULES: list[str] = [
    "pipeline.normalize.commands",
    "pipeline.collect.commands",
    "pipeline.report.commands",
    "pipeline.stats.commands",
    "pipeline.ingest.xid_commands",
    "pipeline.ingest.smi_commands",
    "pipeline.ingest.ticket_commands",
    "pipeline.predict.commands",
    "pipeline.simulate.commands",
    "pipeline.normalize.evaluate_commands",
]

_GROUPS: dict[str, typer.Typer] = {}


def group(name: str, help: str) -> typer.Typer:
    """A command group (``fleetfault parse ...``, ``fleetfault review ...``), created once
    and shared by the modules that add commands to it."""
    if name not in _GROUPS:
        _GROUPS[name] = typer.Typer(help=help, no_args_is_help=True)
        app.add_typer(_GROUPS[name], name=name)
    return _GROUPS[name]


def setup(config: Path | None, verbose: bool = False) -> Config:
    """Load the config once and set up logging; every command starts here."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return load_config(config)


def parse_inputs(command: str, cfg: Config, tz: str | None, files: list[Path]) -> str:
    """Checks shared by the ``parse`` commands: the zone (``--tz`` or ``time.default_tz``)
    must exist and every FILE must be a file. Returns the zone."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    zone = tz or cfg.time.default_tz
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"{command}: --tz {zone!r} is not a time zone; use an IANA name like 'Asia/Shanghai' or 'UTC'") from None
    missing = [str(f) for f in files if not Path(f).is_file()]
    if missing:
        raise UsageError(f"{command}: no such file: {', '.join(missing)}")
    return zone


def warehouse_path(cfg: Config, warehouse: Path | None) -> Path:
    return Path(warehouse) if warehouse else Path(cfg.paths.warehouse)


def existing_warehouse(cfg: Config, warehouse: Path | None) -> Path:
    """The warehouse path, which must exist for commands that only read it."""
    path = warehouse_path(cfg, warehouse)
    if not path.exists():
        raise UsageError(f"no warehouse at {path}: run `fleetfault run` first, or pass --warehouse FILE")
    return path


@app.command()
def run(
    data: Annotated[Optional[Path], typer.Option("--data", help="Input folder (inventory.csv, telemetry/, kernel/, tickets/). Default: data/sample.")] = None,
    warehouse: WarehouseOpt = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Folder for the report and exports. Default: out/.")] = None,
    config: ConfigOpt = None,
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

    cfg = setup(config, verbose)
    data_dir = Path(data) if data else Path(cfg.paths.data)
    out_dir = Path(out) if out else Path(cfg.paths.out)
    wh = warehouse_path(cfg, warehouse)
    if quiet or not console.is_terminal:
        reports, code = run_pipeline(cfg, data_dir, wh, out_dir, stages=stage)
    else:
        cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*cols, console=console, transient=True) as progress:
            reports, code = run_pipeline(cfg, data_dir, wh, out_dir, stages=stage, progress=progress)
    table = Table(title=f"fleetfault run: {data_dir} -> {wh}")
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
    if new_rows == 0:
        out_console.print("No new rows: every input file was already loaded unchanged.")
    else:
        out_console.print(f"Loaded {new_rows} new rows. Outputs in {out_dir}/, warehouse {wh}.")
    if code:
        console.print(f"fleetfault: {sum(r.rows_quarantined for r in reports)} rows quarantined "
                      f"(see `fleetfault export quarantine -o q.csv`)")
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
    out: Annotated[Path, typer.Option("-o", "--out", help="Output file: .parquet, .xlsx, else CSV.")],
    warehouse: WarehouseOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write one warehouse table with the contract's columns."""
    from pipeline.output import write_table
    from pipeline.warehouse import Warehouse

    cfg = setup(config)
    if table not in EXPORTS:
        raise UsageError(f"export: unknown table {table!r}; choose one of {', '.join(EXPORTS)}")
    name, cols = EXPORTS[table]
    with Warehouse(existing_warehouse(cfg, warehouse), read_only=True) as wh:
        select = ", ".join(f'"{c}"' for c in cols) if cols else "*"
        order = {"xid": " ORDER BY ts, host", "tickets": " ORDER BY opened_at, ticket_id",
                 "gpu_days": " ORDER BY gpu_key, day", "failures": " ORDER BY failed_at"}.get(table, "")
        df = wh.pl(f'SELECT {select} FROM "{name}"{order}', step=f"export {table}")
    write_table(df, out)
    out_console.print(f"wrote {df.height} rows of {table} to {out}")


def _register_commands() -> None:
    for mod in _COMMAND_MODULES:
        importlib.import_module(mod).register(app)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run the app, turning fleetfault errors into one line and an exit code.

    With ``argv`` given (tests, notebooks) the exit code is returned instead of exiting.
    """
    try:
        app(args=argv, prog_name="fleetfault")
        code = 0
    except SystemExit as exc:  # typer/click exit with their own codes (2 for usage errors)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except FleetfaultError as exc:
        console.print(f"fleetfault: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        code = exc.exit_code
    if argv is None:
        sys.exit(code)
    return code
