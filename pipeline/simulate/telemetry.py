"""nvidia-smi ``--query-gpu`` CSV logs, one file per host and site-local day.

Reads a :class:`~pipeline.simulate.process.FleetSim`; writes ``DATA/telemetry/<host>/``.
One host is generated at a time (all its days in order, counters carried from day to day),
so memory stays bounded by one host's day whatever the fleet size.

The quirks are those of real logs: units in the header and values (``631.95 W``), ``[N/A]``
and ``[Not Supported]`` where real GPUs print them (``N/A`` bare for an L40S memory
temperature), headerless ``noheader,nounits`` hosts, site-local ``2025/03/05 10:11:12.345``
timestamps, the header printed again when ``nvidia-smi -l`` restarts after a reboot,
copytruncate rotation (no header in rotated files; with ``--copytruncate-share`` a collector
started before the data, whose header is only where it restarted), a truncated last line, gzip on rotated
files, ``clocks_event_reasons.active`` hex masks (``clocks_throttle_reasons`` on old drivers),
volatile ECC counters that reset at each reboot, ``[GPU is lost]`` after a GPU falls off the bus.
"""

from __future__ import annotations

import gzip
import io
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.simulate.fleet import MODEL_BY_KEY, Host
from pipeline.simulate.precursors import Effect
from pipeline.simulate.smi_format import format_rows
from pipeline.simulate.styles import RESTART_HEADER, HostStyle

DAY = 86400.0
# clocks_event_reasons bits (nvml.h: nvmlClocksEventReason*)
GPU_IDLE, SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x1, 0x4, 0x8, 0x20, 0x40, 0x80
REBOOT_DOWN_S = 420.0
DAYS_PER_BATCH = 7


def _epoch(t: datetime, start: datetime) -> float:
    return (t - start).total_seconds()


def write_gzip(path: Path, data: bytes) -> None:
    """Gzip with no name and mtime 0, so the bytes depend on the content only."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=6) as gz:
        gz.write(data)
    path.write_bytes(buf.getvalue())


class _Counters:
    """Per-slot ECC state carried across days; reset when a new board takes the slot."""

    def __init__(self, n: int):
        self.serial = [""] * n
        self.z = {k: np.zeros(n, dtype=np.int64) for k in
                  ("sbe_vol", "dbe_vol", "sbe_agg", "dbe_agg", "remap_corr", "remap_unc", "ret_sbe", "ret_dbe")}

    def new_board(self, slot: int, serial: str) -> None:
        if self.serial[slot] != serial:
            self.serial[slot] = serial
            for a in self.z.values():
                a[slot] = 0


def write_host_telemetry(sim, h: Host, style: HostStyle, out: Path, interval: float,
                         effects: list[Effect], reboots: list[tuple[datetime, bool]], tz: str) -> list[Path]:
    """Write every daily file of one host; returns the paths written."""
    spec = MODEL_BY_KEY[h.model]
    rng = np.random.default_rng([sim.seed, 0x7E1E, h.index])
    t_first = max(h.installed_at, sim.start)
    total = _epoch(sim.end, sim.start)
    e0 = _epoch(t_first, sim.start)
    phase = float(rng.uniform(0, interval))
    k0 = int(np.ceil((e0 - phase) / interval))
    ts = phase + interval * np.arange(max(k0, 0), int((total - phase) // interval) + 1)
    ts = ts[(ts >= e0) & (ts < total)]
    boot_e = np.array(sorted(_epoch(t, sim.start) for t, _ in reboots))
    clean = {_epoch(t, sim.start): c for t, c in reboots}
    if boot_e.size:
        pos = np.searchsorted(boot_e, ts, side="right") - 1
        down = (pos >= 0) & (ts - boot_e[np.clip(pos, 0, None)] < REBOOT_DOWN_S)
        ts = ts[~down]
    if ts.size == 0:
        return []
    ts = ts + rng.uniform(0, 0.9, ts.size)  # nvidia-smi -l drifts by a few ms each loop
    base = pl.datetime(sim.start.year, sim.start.month, sim.start.day, sim.start.hour, sim.start.minute,
                       sim.start.second, time_unit="us")
    local = pl.select(
        (base + pl.duration(microseconds=pl.Series((ts * 1e6).astype(np.int64))))
        .dt.replace_time_zone("UTC").dt.convert_time_zone(tz).dt.replace_time_zone(None).alias("local")
    )["local"]
    stamps = local.dt.strftime("%Y/%m/%d %H:%M:%S%.3f").to_list()
    days = local.dt.strftime("%Y%m%d").to_list()
    # Boundaries of each local day in the sample array.
    cuts = [0] + [i for i in range(1, len(days)) if days[i] != days[i - 1]] + [len(days)]
    # Sample index of the first sample after each reboot: header printed again there.
    after_boot = set(np.searchsorted(ts, boot_e).tolist()) if boot_e.size else set()
    if style.telemetry == RESTART_HEADER and ts.size > 3:
        # one restart for a configuration change, somewhere in the middle third of the data
        after_boot.add(int(np.random.default_rng([sim.seed, 0x5E7, h.index]).integers(ts.size // 3, 2 * ts.size // 3)))
    unclean_before = {int(np.searchsorted(ts, b)) for b in boot_e if not clean.get(float(b), True)}
    gpu_rng = np.random.default_rng([sim.seed, 0x6E0, h.index])
    temp_base = spec.temp_base + gpu_rng.normal(0, 2.0, h.gpus) + np.linspace(-1.5, 3.0, h.gpus)
    sbe_base = np.where(gpu_rng.random(h.gpus) < 0.08, gpu_rng.lognormal(-1.0, 1.0, h.gpus), 0.0)
    counters = _Counters(h.gpus)
    folder = out / h.name
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    n_days = len(cuts) - 1
    cut_rng = np.random.default_rng([sim.seed, 0xC07, h.index])
    pending: list[tuple[int, dict]] = []
    for d in range(n_days):
        a, b = cuts[d], cuts[d + 1]
        state = _day_state(sim, h, spec, rng, ts[a:b], boot_e, effects, temp_base, sbe_base, counters, interval)
        pending.append((d, state))
        if len(pending) < DAYS_PER_BATCH and d < n_days - 1:
            continue
        # Format several days in one vectorized pass (polars has a fixed cost per call).
        cat = {k: np.concatenate([st[k] for _, st in pending], axis=1) for k in ("serial", "uuid", "present")}
        values = {k: np.concatenate([st["values"][k] for _, st in pending], axis=1) for k in pending[0][1]["values"]}
        day_stamps = [x for dd, _ in pending for x in stamps[cuts[dd]:cuts[dd + 1]]]
        lines = format_rows(spec, h, style, day_stamps, cat["serial"], cat["uuid"], cat["present"], values)
        row = 0
        for dd, st in pending:
            n = int(st["present"].sum())
            out = _assemble(lines[row:row + n], st["present"], style, cuts[dd], after_boot, unclean_before, dd == 0)
            row += n
            written.append(_write_day(folder, f"smi-{days[cuts[dd]]}.csv", out, style, dd == n_days - 1, cut_rng))
        pending = []
    return written


def _write_day(folder: Path, name: str, lines: list[str], style: HostStyle, last: bool,
               rng: np.random.Generator) -> Path:
    text = "\n".join(lines)
    if last and rng.random() < 0.5 and lines:
        text = text[: len(text) - int(rng.integers(5, max(6, len(lines[-1]) - 5)))]  # logger still writing
    else:
        text += "\n"
    if style.gzip and not last:
        path = folder / (name + ".gz")
        write_gzip(path, text.encode("utf-8"))
    else:
        path = folder / name
        path.write_bytes(text.encode("utf-8"))
    return path


def _assemble(lines: list[str], present: np.ndarray, style: HostStyle, offset: int, after_boot: set,
              unclean_before: set, first_file: bool) -> list[str]:
    """One day's file: header where nvidia-smi prints one, the rows, lines cut by power loss."""
    out: list[str] = []
    header = ", ".join(style.fields)
    if style.telemetry in ("csv", "csv_nounits") or (style.telemetry == "csv_copytruncate" and first_file):
        out.append(header)
    per_sample = present.sum(axis=0)
    row = 0
    for s in range(present.shape[1]):
        if s > 0 and (offset + s) in after_boot and style.telemetry != "noheader_nounits":
            out.append(header)  # nvidia-smi -l restarted after the reboot
        n = int(per_sample[s])
        out.extend(lines[row:row + n])
        row += n
        if (offset + s + 1) in unclean_before and out:
            out[-1] = out[-1][: max(10, len(out[-1]) // 2)]  # power loss mid-write
    return out


def _mask(ts: np.ndarray, start: datetime, e: Effect) -> np.ndarray:
    return (ts >= _epoch(e.t0, start)) & (ts < _epoch(e.t1, start))


def _day_state(sim, h, spec, rng, ts, boot_e, effects, temp_base, sbe_base, counters, interval) -> dict:
    """GPU state arrays (GPU x sample) for one host-day; counters carry over in ``counters``."""
    G, S = h.gpus, ts.size
    day0, day1 = ts[0], ts[-1] + 1
    mine = [e for e in effects if _epoch(e.t1, sim.start) >= day0 - 1 and _epoch(e.t0, sim.start) < day1]
    # Load: the host runs jobs in 2-hour blocks, busy most of the time.
    block = ((ts // 7200).astype(np.int64))
    ub = np.unique(block)
    busy_b = rng.random(ub.size) < 0.85
    busy = np.broadcast_to(busy_b[np.searchsorted(ub, block)], (G, S)).copy()
    drained = np.zeros((G, S), bool)
    lost = np.zeros((G, S), bool)
    reset = np.zeros((G, S), bool)
    temp_add = np.zeros((G, S))
    width = np.full((G, S), 16.0)
    fan_bad = np.zeros((G, S))
    brake = np.zeros((G, S), bool)
    sbe_rate = np.repeat(sbe_base[:, None] / DAY * interval, S, axis=1)
    jumps = {k: np.zeros((G, S), np.int64) for k in ("sbe", "dbe", "remap_corr", "remap_unc", "ret_sbe")}
    remap_pending = np.zeros((G, S), bool)
    remap_failure = np.zeros((G, S), bool)
    retire_pending = np.zeros((G, S), bool)
    for e in mine:
        rows = slice(None) if e.slot is None else slice(e.slot, e.slot + 1)
        if e.t0 == e.t1:  # an instant: a counter jump at the next sample
            i = int(np.searchsorted(ts, _epoch(e.t0, sim.start)))
            if i >= S or e.slot is None:
                continue
            key = {"sbe_burst": "sbe", "dbe": "dbe", "remap_corr": "remap_corr", "remap_unc": "remap_unc",
                   "retire_sbe": "ret_sbe"}.get(e.kind)
            if key:
                jumps[key][e.slot, i] += max(1, int(e.value))
                if key == "remap_unc":
                    jumps["dbe"][e.slot, i] += 1
            continue
        m = _mask(ts, sim.start, e)
        if not m.any():
            continue
        if e.kind == "sbe_ramp":
            frac = (ts - _epoch(e.t0, sim.start)) / max(_epoch(e.t1, sim.start) - _epoch(e.t0, sim.start), 1.0)
            sbe_rate[rows] += np.where(m, e.value * frac ** 2 / DAY * interval, 0.0)
        elif e.kind in ("temp", "hot"):
            if e.kind == "temp" and e.value < 25:
                frac = np.clip((ts - _epoch(e.t0, sim.start)) / max(_epoch(e.t1, sim.start) - _epoch(e.t0, sim.start), 1.0) * 1.6, 0, 1)
                temp_add[rows] += np.where(m, e.value * frac, 0.0)
            else:
                temp_add[rows] += np.where(m, e.value, 0.0)
        elif e.kind == "width":
            width[rows] = np.where(m, np.minimum(width[rows], e.value), width[rows])
        elif e.kind == "fan":
            fan_bad[rows] = np.where(m, e.value, fan_bad[rows])
        elif e.kind == "power_brake":
            brake[rows] |= m & (rng.random(S) < 0.3)
        elif e.kind == "lost":
            lost[rows] |= m
        elif e.kind == "reset_required":
            reset[rows] |= m
        elif e.kind == "drained":
            drained[rows] |= m
        elif e.kind == "remap_pending":
            remap_pending[rows] |= m
        elif e.kind == "retire_pending":
            retire_pending[rows] |= m
        elif e.kind == "remap_failure":
            remap_failure[rows] |= m
    busy &= ~(drained | lost | reset)
    util = np.where(busy, np.clip(rng.normal(94, 6, (G, S)), 40, 100), 0).round().astype(int)
    util_mem = np.where(busy, np.clip(util * rng.uniform(0.15, 0.6, (G, 1)), 0, 100), 0).round().astype(int)
    temp = temp_base[:, None] - np.where(busy, 0.0, 24.0) + rng.normal(0, 1.0, (G, S)) + temp_add
    temp = np.clip(temp, 22, 97)
    thermal = temp >= 85
    mem_used = np.where(busy, (spec.mem_mib * rng.uniform(0.45, 0.93, (G, 1))).astype(int) + rng.integers(-64, 64, (G, S)), 0)
    power = spec.idle_power_w + util / 100.0 * (spec.power_limit_w * 0.93 - spec.idle_power_w) + rng.normal(0, 6, (G, S))
    power = np.where(thermal, power * 0.85, power)
    power = np.clip(power, spec.idle_power_w * 0.8, spec.power_limit_w * 1.0)
    sm = np.where(busy, spec.sm_max_mhz - rng.integers(0, 4, (G, S)) * 15, 345)
    sm = np.where(thermal | brake, (sm * 0.7).astype(int), sm)
    reasons = np.where(busy, np.where(power > spec.power_limit_w * 0.97, SW_POWER_CAP, 0), GPU_IDLE)
    reasons = reasons | np.where(thermal, SW_THERMAL, 0) | np.where(temp >= 90, HW_THERMAL | HW_SLOWDOWN, 0)
    reasons = reasons | np.where(brake, HW_POWER_BRAKE | HW_SLOWDOWN, 0)
    gen = np.where(busy, spec.pcie_gen, 1)
    fan = np.clip(30 + (temp - 40) * 1.3, 30, 100)
    fan = np.where(fan_bad > 0, np.where(rng.random((G, S)) < fan_bad, 0, 100), fan).round().astype(int)
    sbe_inc = rng.poisson(sbe_rate) + jumps["sbe"]
    dbe_inc = jumps["dbe"]
    # Volatile counters restart at each reboot; aggregate ones never do.
    boots_here = [int(np.searchsorted(ts, b)) for b in boot_e if ts[0] <= b < day1]
    segments = [0] + [i for i in boots_here if 0 < i < S] + [S]
    # A board swap can happen mid-day: look up the tenure per sample where needed.
    tenure_idx = np.zeros((G, S), np.int64)
    tenures: list[list[dict]] = []
    for g in range(G):
        lst = sim.boards(h.index, g)
        tenures.append(lst)
        starts = [_epoch(x["_installed"], sim.start) for x in lst]
        tenure_idx[g] = np.clip(np.searchsorted(starts, ts, side="right") - 1, 0, None)
    sbe_vol = np.zeros((G, S), np.int64)
    dbe_vol = np.zeros((G, S), np.int64)
    agg = {k: np.zeros((G, S), np.int64) for k in ("sbe_agg", "dbe_agg", "remap_corr", "remap_unc", "ret_sbe")}
    for g in range(G):
        z = counters.z
        # A board swapped mid-day starts from zero counters.
        for ti in np.unique(tenure_idx[g]):
            sel = np.nonzero(tenure_idx[g] == ti)[0]
            counters.new_board(g, tenures[g][ti]["serial"])
            for seg_a, seg_b in zip(segments[:-1], segments[1:]):
                a, b = max(seg_a, sel[0]), min(seg_b, sel[-1] + 1)
                if a >= b:
                    continue
                if a == seg_a and seg_a in boots_here:
                    z["sbe_vol"][g] = 0
                    z["dbe_vol"][g] = 0
                sbe_vol[g, a:b] = z["sbe_vol"][g] + np.cumsum(sbe_inc[g, a:b])
                dbe_vol[g, a:b] = z["dbe_vol"][g] + np.cumsum(dbe_inc[g, a:b])
                z["sbe_vol"][g] = sbe_vol[g, b - 1]
                z["dbe_vol"][g] = dbe_vol[g, b - 1]
            for key, inc in (("sbe_agg", sbe_inc), ("dbe_agg", dbe_inc), ("remap_corr", jumps["remap_corr"]),
                             ("remap_unc", jumps["remap_unc"]), ("ret_sbe", jumps["ret_sbe"])):
                seg = inc[g, sel[0]:sel[-1] + 1]
                agg[key][g, sel[0]:sel[-1] + 1] = z[key][g] + np.cumsum(seg)
                z[key][g] = agg[key][g, sel[-1]]
    values = {
        "temp": temp, "util": util, "util_mem": util_mem, "mem_used": np.maximum(mem_used, 0), "power": power,
        "sm": sm, "reasons": reasons, "fan": fan, "gen": gen, "width": width, "sbe_vol": sbe_vol, "dbe_vol": dbe_vol,
        "sbe_agg": agg["sbe_agg"], "dbe_agg": agg["dbe_agg"], "remap_corr": agg["remap_corr"],
        "remap_unc": agg["remap_unc"], "ret_sbe": agg["ret_sbe"], "lost": lost, "reset": reset,
        "remap_pending": remap_pending, "remap_failure": remap_failure, "retire_pending": retire_pending,
    }
    serial = np.empty((G, S), dtype=object)
    uuid = np.empty((G, S), dtype=object)
    present = np.ones((G, S), bool)
    for g in range(G):
        serial[g] = np.array([x["serial"] for x in tenures[g]], dtype=object)[tenure_idx[g]]
        uuid[g] = np.array([x["uuid"] for x in tenures[g]], dtype=object)[tenure_idx[g]]
        starts = np.array([_epoch(x["_installed"], sim.start) for x in tenures[g]])
        present[g] = starts[tenure_idx[g]] <= ts
    return {"values": values, "serial": serial, "uuid": uuid, "present": present}
