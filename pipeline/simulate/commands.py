"""``fleetfault simulate``: write a synthetic fleet in the input layout, with its ground truth."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer


def _parse_start(text: str | None) -> datetime:
    from pipeline.errors import UsageError
    from pipeline.simulate.process import DEFAULT_START

    if not text:
        return DEFAULT_START
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--start: {text!r} is not a date; use YYYY-MM-DD (UTC), e.g. --start 2025-03-01") from None


def register(app: typer.Typer) -> None:
    @app.command()
    def simulate(
        gpus: Annotated[int, typer.Option("--gpus", help="GPUs (slots) in the fleet.")] = 64,
        days: Annotated[int, typer.Option("--days", help="Days of history to write.")] = 60,
        seed: Annotated[int, typer.Option("--seed", help="Random seed: the output is a function of all options.")] = 1,
        out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (inventory.csv, telemetry/, kernel/, tickets/, truth/).")] = Path("data/sim"),
        interval: Annotated[float, typer.Option("--interval", help="Seconds between nvidia-smi samples.")] = 300.0,
        start: Annotated[Optional[str], typer.Option("--start", help="First day (UTC), YYYY-MM-DD. Default 2025-03-01.")] = None,
        accel: Annotated[float, typer.Option("--accel", help="Multiply every failure and event rate (1 = realistic).")] = 1.0,
        ticket_layouts: Annotated[str, typer.Option("--ticket-layouts", help="How service points write tickets: 'default', or 'field' (other tools' layouts: EN/ZH headers, nested JSON with part-swap lists, 1-based slots, FQDN and IP hosts, serial quirks, overlapping dumps).")] = "default",
        stale_inventory: Annotated[float, typer.Option("--stale-inventory", help="Share (0-1) of failure removals left out of inventory.csv (listed in truth/stale_removals.csv).")] = 0.0,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
        copytruncate_share: Annotated[float, typer.Option("--copytruncate-share", help="Share of hosts (0-1) whose nvidia-smi logger ran before the data began, so their files carry a header only where it restarted.")] = 0.0,
        daily_dmesg_share: Annotated[float, typer.Option("--daily-dmesg-share", help="Share of hosts (0-1) writing raw dmesg (uptime stamps only) to a file per local day.")] = 0.0,
        kernel_rotation: Annotated[str, typer.Option("--kernel-rotation", help="How kernel logs are rotated: 'default' (syslog-like logs per week, dmesg dumps per boot) or 'daily' (every host's log one file per local day, in its usual format).")] = "default",
    ) -> None:
        """Write a synthetic GPU fleet (telemetry, kernel logs, tickets, inventory) and its ground truth.

        Deterministic: the same options give byte-identical files. Hosts are written one at a
        time, so memory stays bounded for any --gpus and --days.
        """
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        from pipeline.cli_app import console, out_console, setup
        from pipeline.errors import UsageError
        from pipeline.simulate.writer import simulate as run_sim

        setup(None)
        for name, value, low in (("--gpus", gpus, 1), ("--days", days, 1)):
            if value < low:
                raise UsageError(f"{name} must be at least {low}, got {value}")
        if interval < 1:
            raise UsageError(f"--interval must be at least 1 second, got {interval}")
        if accel <= 0:
            raise UsageError(f"--accel must be positive, got {accel}")
        from pipeline.simulate.field_layouts import LAYOUTS

        if ticket_layouts not in LAYOUTS:
            raise UsageError(f"--ticket-layouts must be one of {', '.join(LAYOUTS)}, got {ticket_layouts!r}")
        if not 0 <= stale_inventory <= 1:
            raise UsageError(f"--stale-inventory must be a share between 0 and 1, got {stale_inventory}")
        for name, value in (("--copytruncate-share", copytruncate_share), ("--daily-dmesg-share", daily_dmesg_share)):
            if not 0 <= value <= 1:
                raise UsageError(f"{name} must be between 0 and 1, got {value}")
        from pipeline.simulate.styles import KERNEL_ROTATIONS

        if kernel_rotation not in KERNEL_ROTATIONS:
            raise UsageError(f"--kernel-rotation must be one of {', '.join(KERNEL_ROTATIONS)}, got {kernel_rotation!r}")
        shares = {"copytruncate_share": copytruncate_share, "daily_dmesg_share": daily_dmesg_share,
                  "kernel_rotation": kernel_rotation}
        t0 = _parse_start(start)
        extra = {"ticket_layouts": ticket_layouts, "stale_inventory": stale_inventory}
        if quiet or not console.is_terminal:
            sim = run_sim(gpus, days, seed, out, interval=interval, start=t0, accel=accel, **extra, **shares)
        else:
            cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn())
            with Progress(*cols, console=console, transient=True) as progress:
                task = progress.add_task("simulating hosts", total=None)

                def tick(host: str, done: int, total: int) -> None:
                    progress.update(task, completed=done, total=total, description=f"simulating {host}")

                sim = run_sim(gpus, days, seed, out, interval=interval, start=t0, accel=accel, on_host=tick, **extra, **shares)
        out_console.print(
            f"wrote {len(sim.hosts)} hosts, {len(sim.gpus)} GPU serials, {len(sim.failure_rows)} GPU failures, "
            f"{len(sim.service_rows)} tickets to {out}/ (truth in {out}/truth/)")
