"""The ``fleetfault`` typer app and what every command shares: the consoles, the common
options, config and logging set-up, and the checks on paths.

Command modules (``pipeline/*/commands.py``) import from here, never from
:mod:`pipeline.cli`, which imports them to register their commands: so ``python -m
pipeline.cli`` and ``python -m pipeline`` load each module once, with no import cycle.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from pipeline.config import Config, load_config
from pipeline.errors import UsageError

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
OutOpt = Annotated[Path, typer.Option("-o", "--out", help="Output file: .parquet, .xlsx, else CSV.")]
# A str, not a Path: Path("s3://bucket/wh") would drop a slash of the URL.
WarehouseOpt = Annotated[Optional[str], typer.Option("--warehouse", help="DuckDB warehouse file; with Spark, the folder or URL of its tables (docs/spark.md). Default: paths.warehouse in the config (fleetfault.duckdb).")]
EngineOpt = Annotated[Optional[str], typer.Option("--engine", help="duckdb or spark (overrides engine.name in the config); with spark, --warehouse names the tables' folder or URL. Default: duckdb.")]

_GROUPS: dict[str, typer.Typer] = {}


def group(name: str, help: str) -> typer.Typer:
    """A command group (``fleetfault parse ...``, ``fleetfault review ...``), created once
    and shared by the modules that add commands to it."""
    if name not in _GROUPS:
        _GROUPS[name] = typer.Typer(help=help, no_args_is_help=True)
        app.add_typer(_GROUPS[name], name=name)
    return _GROUPS[name]


def setup(config: Path | None, verbose: bool = False, engine: str | None = None) -> Config:
    """Load the config once (``--engine`` applied) and set up logging; every command starts here."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return engine_config(load_config(config), engine)


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


def engine_config(cfg: Config, engine: str | None) -> Config:
    """The config with ``--engine`` applied (checked, as the config's own value is)."""
    from pipeline.config import with_engine

    return with_engine(cfg, engine) if engine else cfg


def warehouse_path(cfg: Config, warehouse: str | Path | None) -> Path:
    """The DuckDB catalog file ``--warehouse`` names under the config's engine
    (:func:`pipeline.location.resolve_warehouse`: the one rule every command follows)."""
    from pipeline.location import resolve_warehouse

    return resolve_warehouse(cfg, warehouse).catalog


def existing_warehouse(cfg: Config, warehouse: str | Path | None) -> Path:
    """The warehouse's catalog file, which must exist for commands that only read it."""
    path = warehouse_path(cfg, warehouse)
    if not path.exists():
        raise UsageError(f"no warehouse at {path}: run `fleetfault run` first, or pass --warehouse FILE")
    if path.is_dir():
        raise UsageError(f"--warehouse {path}: is a folder; a Spark warehouse folder needs --engine spark "
                         f"(or [engine] name = \"spark\"), else give the DuckDB file")
    return path
