"""CLI: ``fleetfault collect``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def collect(
    out: Annotated[Path, typer.Option("-o", "--out", help="Root of the input layout: writes telemetry/<host>/ and kernel/<host>/ below it.")],
    interval: Annotated[Optional[float], typer.Option("--interval", help="Seconds between samples. Default: collect.interval_s (60).")] = None,
    host: Annotated[Optional[str], typer.Option("--host", help="Host name for the folders. Default: this machine's short hostname.")] = None,
    count: Annotated[Optional[int], typer.Option("--count", help="Stop after this many samples (default: run until SIGTERM/SIGINT).")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="Config file (TOML).")] = None,
) -> None:
    """Sample this host's GPUs through NVML, as nvidia-smi CSV logs and Xid kernel lines.

    Runs until stopped (SIGTERM or Ctrl-C flush the files and exit 0). Needs the NVIDIA
    driver and `pip install 'fleetfault[nvml]'`.
    """
    from pipeline.cli_app import out_console, setup
    from pipeline.collect.sampler import Collector, load_nvml
    from pipeline.errors import UsageError

    cfg = setup(config, verbose=True)
    every = cfg.collect.interval_s if interval is None else interval
    if every <= 0:
        raise UsageError(f"--interval must be positive seconds, got {every}")
    col = Collector(load_nvml(), out, host=host, interval=every)
    rounds = col.run(max_samples=count)
    out_console.print(f"collected {rounds} rounds ({col.samples_written} GPU samples, "
                      f"{col.events_written} Xid events) into {out}")


def register(app: typer.Typer) -> None:
    app.command("collect")(collect)
