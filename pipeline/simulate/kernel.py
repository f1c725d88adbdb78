"""Kernel logs per host, in the format that host's logging stack writes.

Reads a :class:`~pipeline.simulate.process.FleetSim`; writes ``DATA/kernel/<host>/*.log[.gz]``.
The same message reads differently per format (the uptime and wall-clock prefixes differ):

===================  ==========================================================================
dmesg_raw            ``[ 8123.456789] NVRM: Xid (PCI:0000:3b:00): 79, ...`` (uptime only; one file per boot)
dmesg_T              ``[Wed Mar  5 10:11:12 2025] NVRM: ...`` (local time; one file per boot)
syslog               ``Mar  5 10:11:12 sha-gpu001 kernel: NVRM: ...`` (RHEL /var/log/messages)
journal_short_iso    ``2025-03-05T10:11:12+0800 sha-gpu001 kernel: NVRM: ...`` (``journalctl -k -o short-iso``)
rsyslog_rfc3339      ``2025-03-05T10:11:12.345678+08:00 sha-gpu001 kernel: [ 8123.456789] NVRM: ...``
kern_log             ``Mar  5 10:11:12 sha-gpu001 kernel: [ 8123.456789] NVRM: ...`` (Ubuntu kern.log)
dmesg_raw_daily      as dmesg_raw, a file per local day (``simulate --daily-dmesg-share``)
===================  ==========================================================================

With ``simulate --kernel-rotation daily`` every format is written one file per local day
(``messages-20250305.log``, ``dmesg-T-20250305.log``, ...; the older ones gzipped where the
host gzips), from the window start on, instead of per week or per boot.

Besides the events of the failure process, every host gets boot banners, unrelated kernel
noise and application Xids (13, 31, 43, 45) that mean nothing about the hardware.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

from pipeline.simulate import kmsg
from pipeline.simulate.fleet import MODEL_BY_KEY, Host
from pipeline.simulate.precursors import KernelEvent
from pipeline.simulate.styles import DAILY_DMESG, HostStyle
from pipeline.simulate.telemetry import write_gzip

APP_XID_PER_GPU_DAY = 0.012
NOISE_PER_HOST_DAY = 6.0


def boot_times(sim, h: Host, reboots: list[tuple[datetime, bool]]) -> list[datetime]:
    """The host's boots: one before the window (or at install), then each reboot."""
    rng = np.random.default_rng([sim.seed, 0xB007, h.index])
    first = max(h.installed_at, sim.start - timedelta(days=float(rng.uniform(0.5, 40))))
    return [first.replace(microsecond=0)] + sorted(t for t, _ in reboots if t > first)


def _prefix(fmt: str, t_utc: datetime, up: float, host: str, zone: ZoneInfo) -> str:
    loc = t_utc.replace(tzinfo=timezone.utc).astimezone(zone)
    if fmt in ("dmesg_raw", DAILY_DMESG):
        return f"[{up:12.6f}] "
    if fmt == "dmesg_T":
        return f"[{loc:%a %b} {loc.day:2d} {loc:%H:%M:%S %Y}] "
    if fmt == "syslog":
        return f"{loc:%b} {loc.day:2d} {loc:%H:%M:%S} {host} kernel: "
    if fmt == "journal_short_iso":
        return f"{loc:%Y-%m-%dT%H:%M:%S%z} {host} kernel: "
    if fmt == "rsyslog_rfc3339":
        return f"{loc.isoformat(timespec='microseconds')} {host} kernel: [{up:12.6f}] "
    return f"{loc:%b} {loc.day:2d} {loc:%H:%M:%S} {host} kernel: [{up:12.6f}] "


def write_host_kernel(sim, h: Host, style: HostStyle, out: Path, events: list[KernelEvent],
                      reboots: list[tuple[datetime, bool]], tz: str) -> list[Path]:
    """Write one host's kernel log files; returns their paths."""
    spec = MODEL_BY_KEY[h.model]
    rng = np.random.default_rng([sim.seed, 0x4E7, h.index])
    zone = ZoneInfo(tz)
    boots = boot_times(sim, h, reboots)
    kernel = kmsg.KERNELS[h.index % len(kmsg.KERNELS)]
    old = style.old_driver
    # (utc time, uptime, message, boot index)
    lines: list[tuple[datetime, float, str, int]] = []

    def boot_of(t: datetime) -> int:
        i = 0
        for j, b in enumerate(boots):
            if b <= t:
                i = j
        return i

    def add(t: datetime, text: str) -> None:
        bi = boot_of(t)
        lines.append((t, (t - boots[bi]).total_seconds(), text, bi))

    for bi, b in enumerate(boots):
        for up, text in kmsg.boot_lines(style.driver, kernel, h.buses, rng, b):
            lines.append((b + timedelta(seconds=up), up, text, bi))
    announced: set[tuple[int, str]] = set()
    t_from = max(h.installed_at, sim.start)
    window_days = max((sim.end - t_from).total_seconds() / 86400.0, 0.0)
    evs = list(events)
    # Application Xids on healthy GPUs: a user's bad kernel, not the hardware.
    n_app = int(rng.poisson(APP_XID_PER_GPU_DAY * sim.accel * h.gpus * window_days))
    for _ in range(n_app):
        t = t_from + timedelta(seconds=float(rng.uniform(0, window_days * 86400)))
        evs.append(KernelEvent(h.index, int(rng.integers(h.gpus)), t.replace(microsecond=0), "Xid",
                               int(rng.choice([13, 13, 31, 31, 43, 45]))))
    for ev in sorted(evs, key=lambda e: (e.t, e.kind, e.code)):
        t = ev.t + timedelta(microseconds=int(rng.integers(0, 999_999)))
        if t < max(boots[0], sim.start) or t >= sim.end:  # logs are collected from the window start
            continue
        bus = h.buses[ev.slot] if ev.slot is not None else h.buses[0]
        pci = f"PCI:0000:{bus}:00"
        if ev.kind == "Xid":
            bi = boot_of(t)
            if ev.slot is not None and (bi, bus) not in announced:
                announced.add((bi, bus))
                ten = sim.serial_at(h.index, ev.slot, ev.t)
                add(t, f"NVRM: GPU at {pci}: {ten['uuid']}")
                add(t, f"NVRM: GPU Board Serial Number: {ten['serial']}")
            unknown = ev.code in (79, 119, 120, 48, 64, 94, 95) and rng.random() < 0.6
            msgs = kmsg.xid_text(ev.code, rng, spec.ecc)
            pn = kmsg.pid_name(rng, old, unknown)
            repeat = int(rng.integers(1, 4)) if ev.code in (13, 31, 63, 94) else 1
            for r in range(repeat):
                for k, m in enumerate(msgs):
                    add(t + timedelta(microseconds=37 * (k + 1) + 500_000 * r), f"NVRM: Xid ({pci}): {ev.code}, {pn}{m}")
        elif ev.kind == "falloff":
            for k, m in enumerate(kmsg.falloff_lines(bus, spec.pci_id)):
                add(t + timedelta(microseconds=11 * k), m)
        elif ev.kind == "SXid":
            for k, m in enumerate(kmsg.sxid_lines(ev.code, rng)):
                add(t + timedelta(microseconds=9 * k), m)
        elif ev.kind == "aer":
            for k, m in enumerate(kmsg.aer_lines(bus, spec.pci_id, rng)):
                add(t + timedelta(microseconds=13 * k), m)
    n_noise = int(rng.poisson(NOISE_PER_HOST_DAY * window_days))
    for _ in range(n_noise):
        t = t_from + timedelta(seconds=float(rng.uniform(0, window_days * 86400)))
        add(t, kmsg.noise_line(rng))
    lines.sort(key=lambda x: (x[0], x[1]))
    return _write(sim, h, style, out, lines, boots, zone)


def _write(sim, h: Host, style: HostStyle, out: Path, lines, boots, zone) -> list[Path]:
    folder = out / h.name
    folder.mkdir(parents=True, exist_ok=True)
    fmt = style.kernel
    daily = style.kernel_daily or fmt == DAILY_DMESG
    files: dict[str, list[str]] = {}
    order: list[str] = []
    last_boot = -1
    for t, up, text, bi in lines:
        if t >= sim.end:
            continue
        if daily and t < sim.start:
            continue  # rotated logs are collected from the window start
        loc_day = t.replace(tzinfo=timezone.utc).astimezone(zone) if daily else None
        if daily and fmt in ("dmesg_raw", DAILY_DMESG):
            # `dmesg` appended to a file per local day: the boot before the window unmarked,
            # a reboot inside it marked in that day's file only.
            key = f"dmesg-{loc_day:%Y%m%d}.log"
        elif daily and fmt == "dmesg_T":
            key = f"dmesg-T-{loc_day:%Y%m%d}.log"
        elif fmt == "dmesg_raw":
            # One dump per boot, named by the collector after `uptime -s` (the local boot time):
            # the only way to put a wall clock on its uptime stamps.
            loc = boots[bi].replace(tzinfo=timezone.utc).astimezone(zone)
            key = f"dmesg-boot-{loc:%Y%m%d-%H%M%S}.log"
        elif fmt == "dmesg_T":
            # One dump per boot, saved when the next boot came (or at the end).
            saved = boots[bi + 1] if bi + 1 < len(boots) else sim.end - timedelta(seconds=1)
            loc = saved.replace(tzinfo=timezone.utc).astimezone(zone)
            key = f"dmesg-T-{loc:%Y%m%d-%H%M}.log"
        else:
            if t < sim.start:
                continue
            week = int((t - sim.start).total_seconds() // (7 * 86400))
            first = (sim.start + timedelta(days=7 * week)).replace(tzinfo=timezone.utc).astimezone(zone)
            stem = {"syslog": "messages", "journal_short_iso": "journal", "rsyslog_rfc3339": "syslog",
                    "kern_log": "kern"}[fmt]
            key = f"{stem}-{(loc_day if daily else first):%Y%m%d}.log"
        if key not in files:
            files[key] = []
            order.append(key)
        if fmt == "journal_short_iso" and bi != last_boot and last_boot != -1:
            files[key].append(f"-- Boot {_boot_id(sim.seed, h.index, bi)} --")
        last_boot = bi
        files[key].append(_prefix(fmt, t, up, h.name, zone) + text)
    written = []
    for i, key in enumerate(order):
        data = ("\n".join(files[key]) + "\n").encode("utf-8")
        if style.gzip and i < len(order) - 1 and (fmt not in ("dmesg_raw", "dmesg_T") or style.kernel_daily):
            path = folder / (key + ".gz")
            write_gzip(path, data)
        else:
            path = folder / key
            path.write_bytes(data)
        written.append(path)
    return written


def _boot_id(seed: int, host: int, boot: int) -> str:
    """A journal boot id (32 hex digits), stable for (seed, host, boot)."""
    return "".join(f"{x:02x}" for x in np.random.default_rng([seed, host, boot, 0xB0]).integers(0, 256, 16))
