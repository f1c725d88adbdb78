"""``simulate``: a simulated fleet written in the input layout of the contract.

Reads nothing; writes ``OUT/inventory.csv``, ``OUT/telemetry/<host>/``, ``OUT/kernel/<host>/``,
``OUT/tickets/<point>/`` and ``OUT/truth/``. Hosts are written one at a time (telemetry, then
kernel log), so memory is bounded by the history of the fleet (small) plus one host-day of
samples, whatever ``gpus`` and ``days`` are.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from pipeline.simulate import field_layouts, truth
from pipeline.simulate.fleet import SITE_BY_NAME
from pipeline.simulate.kernel import boot_times, write_host_kernel
from pipeline.simulate.process import DEFAULT_START, FleetSim, simulate_fleet
from pipeline.simulate.styles import KERNEL_ROTATIONS, host_style
from pipeline.simulate.telemetry import write_host_telemetry
from pipeline.simulate.tickets import write_tickets

log = logging.getLogger(__name__)

LAYOUT = ("inventory.csv", "telemetry", "kernel", "tickets", "truth")


def simulate(gpus: int, days: int, seed: int, out: str | Path, *, interval: float = 300.0,
             start: datetime = DEFAULT_START, accel: float = 1.0, ticket_layouts: str = "default",
             stale_inventory: float = 0.0, on_host: Callable[[str, int, int], None] | None = None,
             copytruncate_share: float = 0.0, daily_dmesg_share: float = 0.0,
             kernel_rotation: str = "default") -> FleetSim:
    """Simulate a fleet and write it in the input layout with its ground truth.

    Parameters
    ----------
    gpus, days, seed, start, accel
        As in :func:`~pipeline.simulate.process.simulate_fleet`.
    out : path
        Output folder; the layout's files and folders in it are replaced.
    interval : float
        Seconds between nvidia-smi samples.
    ticket_layouts : {'default', 'field'}
        How the service points write their exports (:mod:`pipeline.simulate.field_layouts`).
    stale_inventory : float
        Share of failure removals left out of ``inventory.csv`` (the failed GPU still listed
        as installed; for half of them the replacement not listed at all), listed in
        ``truth/stale_removals.csv``. The truth keeps every removal.
    on_host : callable, optional
        Called with (host name, hosts done, hosts in all) after each host is written.
    copytruncate_share, daily_dmesg_share : float
        Share of hosts whose nvidia-smi header is only where the collector restarted (it
        ran before the data began), and whose kernel log is raw ``dmesg`` per local day
        (:func:`~pipeline.simulate.styles.host_style`); 0 keeps every host's usual style.
    kernel_rotation : {'default', 'daily'}
        ``daily``: every host's kernel log one file per local day (the many-small-files shape).

    Returns
    -------
    FleetSim
    """
    if interval < 1:
        raise ValueError(f"interval must be at least 1 second, got {interval}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in LAYOUT:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    if ticket_layouts not in field_layouts.LAYOUTS:
        raise ValueError(f"ticket_layouts must be one of {field_layouts.LAYOUTS}, got {ticket_layouts!r}")
    if not 0 <= stale_inventory <= 1:
        raise ValueError(f"stale_inventory must be a share between 0 and 1, got {stale_inventory}")
    if kernel_rotation not in KERNEL_ROTATIONS:
        raise ValueError(f"kernel_rotation must be one of {KERNEL_ROTATIONS}, got {kernel_rotation!r}")
    sim = simulate_fleet(gpus, days, seed, start=start, accel=accel)
    listed, stale = field_layouts.stale_inventory(sim.gpus, sim.failure_rows, stale_inventory, seed)
    columns = truth.INVENTORY_COLUMNS
    if ticket_layouts == "field":  # the hosts' addresses, for tickets that name a host by its IP
        host_index = {h.name: h.index for h in sim.hosts}
        listed = [{**g, "ip": field_layouts.host_ip(host_index[g["host"]])} for g in listed]
        columns = [*columns, "ip"]
    truth.write_csv(out / "inventory.csv", columns, listed)
    styles = {h.name: host_style(h, copytruncate_share=copytruncate_share, daily_dmesg_share=daily_dmesg_share,
                                 kernel_rotation=kernel_rotation)
              for h in sim.hosts}
    effects: dict[int, list] = {}
    for e in sim.effects:
        effects.setdefault(e.host, []).append(e)
    kevents: dict[int, list] = {}
    for k in sim.kernel_events:
        kevents.setdefault(k.host, []).append(k)
    reboots: dict[int, list] = {}
    for hi, t, clean in sim.reboots:
        reboots.setdefault(hi, []).append((t, clean))
    boots = {}
    for done, h in enumerate(sim.hosts, start=1):
        tz = SITE_BY_NAME[h.site].tz
        st = styles[h.name]
        write_host_telemetry(sim, h, st, out / "telemetry", interval, effects.get(h.index, []),
                             reboots.get(h.index, []), tz)
        write_host_kernel(sim, h, st, out / "kernel", kevents.get(h.index, []), reboots.get(h.index, []), tz)
        boots[h.name] = boot_times(sim, h, reboots.get(h.index, []))
        if on_host:
            on_host(h.name, done, len(sim.hosts))
    new_serials = {f["serial"]: f["new_serial"] for f in sim.failure_rows}
    ticket_rows = write_tickets(sim, out / "tickets", new_serials, ticket_layouts)
    # Options are recorded only when set, so that the defaults write the same truth as before.
    params = {"gpus": int(gpus), "days": int(days), "seed": int(seed), "interval_s": float(interval)}
    if ticket_layouts != "default" or stale_inventory:
        params.update(ticket_layouts=ticket_layouts, stale_inventory=float(stale_inventory))
    if copytruncate_share or daily_dmesg_share:
        params.update(copytruncate_share=float(copytruncate_share), daily_dmesg_share=float(daily_dmesg_share))
    if kernel_rotation != "default":
        params.update(kernel_rotation=kernel_rotation)
    truth.write_truth(sim, out / "truth", styles, ticket_rows, params)
    truth.write_boots(sim, out / "truth", boots)
    if stale_inventory:
        truth.write_csv(out / "truth" / "stale_removals.csv", ["serial"], [{"serial": x} for x in stale])
    log.info("simulated %d hosts, %d failures, %d tickets into %s", len(sim.hosts), len(sim.failure_rows),
             len(ticket_rows), out)
    return sim
