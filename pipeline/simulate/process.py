"""The simulated fleet's history: GPUs, failures, service events, false alarms, reboots.

Reads nothing, writes nothing. :func:`simulate_fleet` is the fast, pure-Python core that the
statistics tests call for many seeds: it returns a :class:`FleetSim` (inventory, failures,
true per-group rates) without writing any telemetry. :func:`pipeline.simulate.simulate`
writes the input layout on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from pipeline.simulate import hazard
from pipeline.simulate.fleet import MODEL_BY_KEY, Host, build_hosts, serial_for, uuid_for
from pipeline.simulate.precursors import Effect, KernelEvent, failure_effects, pick_precursor, pick_symptom

DEFAULT_START = datetime(2025, 3, 1)

#: Non-failure service work. name -> (rate per host-year, part, symptoms, action, scope).
SERVICE_EVENTS: dict[str, tuple[float, str, tuple[str, ...], str, str]] = {
    "gpu_reseat": (0.25, "GPU", ("FELL_OFF_BUS", "PCIE_ERROR"), "RESEAT", "gpu"),
    "gpu_reset": (0.30, "GPU", ("HANG", "GSP_ERROR", "APP_FAULT"), "REBOOT", "gpu"),
    "gpu_nff": (0.20, "NONE", ("PERFORMANCE", "OTHER", "HANG"), "NONE", "gpu"),
    "gpu_monitor": (0.20, "GPU", ("MEMORY_CORRECTABLE", "OVERHEAT"), "MONITOR", "gpu"),
    "riser": (0.05, "PCIE_RISER", ("PCIE_ERROR",), "REPLACE", "gpu"),
    "firmware": (0.15, "SOFTWARE", ("DRIVER_ISSUE", "GSP_ERROR", "BOOT_FAILURE"), "REFLASH", "host"),
    "fan": (0.15, "FAN", ("FAN_FAULT", "OVERHEAT"), "REPLACE", "host"),
    "psu": (0.12, "PSU", ("POWER_FAULT",), "REPLACE", "host"),
    "dimm": (0.15, "DIMM", ("MEMORY_CORRECTABLE", "MEMORY_UNCORRECTABLE"), "REPLACE", "host"),
    "nic": (0.12, "NIC", ("OTHER", "PERFORMANCE"), "REPLACE", "host"),
    "cable": (0.06, "CABLE", ("OTHER", "PERFORMANCE"), "REPLACE", "host"),
    "nvswitch": (0.04, "NVSWITCH", ("NVLINK_ERROR",), "REPLACE", "host"),
    "baseboard": (0.02, "GPU_BASEBOARD", ("NVLINK_ERROR", "BOOT_FAILURE"), "REPLACE", "host"),
    "clean": (0.08, "COOLING", ("OVERHEAT",), "CLEAN", "host"),
    "storage": (0.06, "STORAGE", ("BOOT_FAILURE", "OTHER"), "REPLACE", "host"),
    "bmc": (0.04, "SOFTWARE", ("OTHER",), "REFLASH", "host"),
    "motherboard": (0.02, "MOTHERBOARD", ("BOOT_FAILURE", "POWER_FAULT"), "REPLACE", "host"),
    "cpu": (0.01, "CPU", ("BOOT_FAILURE", "HANG"), "REPLACE", "host"),
}

#: Service work whose ticket names another part than the one it is coded to (CODING-GUIDE 2): a
#: BMC firmware flash is written about the BMC and coded SOFTWARE, since nothing was replaced.
#: name -> the part the technician names.
NAMED_PART = {"bmc": "BMC"}

#: Harmless look-alikes with no ticket. name -> rate per GPU-year (per rack-year for hot_aisle).
FALSE_ALARMS = {"sbe_burst": 0.5, "xid79_transient": 0.04, "width_transient": 0.08, "hot_aisle": 1.5}
MAINTENANCE_REBOOTS_PER_YEAR = 6.0


@dataclass
class FleetSim:
    """A simulated fleet's history; frames are built on demand.

    Attributes
    ----------
    inventory : polars.DataFrame
        Contract inventory columns plus ``uuid``, ``pci_bus_id``, ``service_point``.
    failures : polars.DataFrame
        One row per GPU replacement: ``serial, failed_at, part_code, symptom_code, precursor``, ...
    groups : polars.DataFrame
        True hazard and rate per (model, vendor, batch).
    """

    seed: int
    start: datetime
    end: datetime
    accel: float
    hosts: list[Host]
    gpus: list[dict] = field(default_factory=list)
    gpus_full: list[dict] = field(default_factory=list)
    failure_rows: list[dict] = field(default_factory=list)
    service_rows: list[dict] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    kernel_events: list[KernelEvent] = field(default_factory=list)
    reboots: list[tuple[int, datetime, bool]] = field(default_factory=list)
    expected: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    _by_slot: dict[tuple[int, int], list[dict]] = field(default_factory=dict, repr=False)

    @property
    def inventory(self) -> pl.DataFrame:
        return pl.DataFrame(self.gpus, schema=_INVENTORY_SCHEMA)

    @property
    def failures(self) -> pl.DataFrame:
        return pl.DataFrame(self.failure_rows, schema=_FAILURE_SCHEMA)

    @property
    def groups(self) -> pl.DataFrame:
        rows = []
        for (model, vendor, batch), (exp, days, n, fails) in sorted(self.expected.items()):
            k, lam = hazard.batch_params(batch, model)
            rows.append({
                "model": model, "vendor": vendor, "batch": batch, "weibull_shape": k,
                "weibull_scale_years": round(hazard.effective_scale(k, lam, self.accel), 4),
                "true_afr_pct": round(100.0 * exp / (days / hazard.YEAR_DAYS), 4) if days else None,
                "gpus": int(n), "gpu_days": round(days, 3), "expected_failures": round(exp, 4),
                "failures": int(fails),
            })
        return pl.DataFrame(rows, schema=_GROUP_SCHEMA)

    @property
    def host_frame(self) -> pl.DataFrame:
        return pl.DataFrame([{
            "host": h.name, "site": h.site, "service_point": h.service_point, "model": h.model,
            "batch": h.batch, "vendor": h.vendor, "gpus": h.gpus, "rack": h.rack, "unit": h.unit,
            "installed_at": h.installed_at,
        } for h in self.hosts])

    def serial_at(self, host: int, slot: int, t: datetime) -> dict | None:
        """The GPU tenure in a slot at time ``t`` (the last one installed before ``t``)."""
        best = None
        for g in self._by_slot.get((host, slot), []):
            if g["_installed"] <= t:
                best = g
        return best

    def boards(self, host: int, slot: int) -> list[dict]:
        """Every board that held a slot, in install order."""
        return self._by_slot.get((host, slot), [])

    def index_slots(self) -> None:
        """Index the boards of each (host, slot) in install order, for :meth:`serial_at`."""
        self._by_slot = {}
        for g in self.gpus_full:
            self._by_slot.setdefault((g["_host"], g["slot"]), []).append(g)


_INVENTORY_SCHEMA = {
    "serial": pl.Utf8, "model": pl.Utf8, "vendor": pl.Utf8, "host": pl.Utf8, "slot": pl.Int32,
    "site": pl.Utf8, "batch": pl.Utf8, "installed_at": pl.Datetime("us"), "removed_at": pl.Datetime("us"),
    "uuid": pl.Utf8, "pci_bus_id": pl.Utf8, "service_point": pl.Utf8,
}
_FAILURE_SCHEMA = {
    "serial": pl.Utf8, "failed_at": pl.Datetime("us"), "part_code": pl.Utf8, "symptom_code": pl.Utf8,
    "precursor": pl.Utf8, "lead_days": pl.Float64, "host": pl.Utf8, "slot": pl.Int32, "model": pl.Utf8,
    "vendor": pl.Utf8, "batch": pl.Utf8, "replaced_at": pl.Datetime("us"), "new_serial": pl.Utf8,
}
_GROUP_SCHEMA = {
    "model": pl.Utf8, "vendor": pl.Utf8, "batch": pl.Utf8, "weibull_shape": pl.Float64,
    "weibull_scale_years": pl.Float64, "true_afr_pct": pl.Float64, "gpus": pl.Int64, "gpu_days": pl.Float64,
    "expected_failures": pl.Float64, "failures": pl.Int64,
}


def _years(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds() / 86400.0 / hazard.YEAR_DAYS


def _poisson_times(rng: np.random.Generator, rate_per_year: float, t0: datetime, t1: datetime) -> list[datetime]:
    if t1 <= t0 or rate_per_year <= 0:
        return []
    n = int(rng.poisson(rate_per_year * _years(t0, t1)))
    span = (t1 - t0).total_seconds()
    return sorted((t0 + timedelta(seconds=float(s))).replace(microsecond=0) for s in rng.uniform(0, span, n))


def simulate_fleet(gpus: int, days: int, seed: int, start: datetime = DEFAULT_START,
                   accel: float = 1.0) -> FleetSim:
    """Simulate a fleet's failures and service history without writing anything.

    Parameters
    ----------
    gpus : int
        GPUs in service at the start (slots; replacements add serials).
    days : int
        Length of the window in days.
    seed : int
        Everything is a deterministic function of (gpus, days, seed, start, accel).
    start : datetime
        First instant of the window (UTC, naive).
    accel : float
        Multiplies every hazard and event rate (1 = realistic; the bundled sample uses more so
        that 64 GPUs in 60 days show failures).

    Returns
    -------
    FleetSim

    Examples
    --------
    >>> sim = simulate_fleet(200, 90, seed=1)
    >>> sim.groups.columns[:4]
    ['model', 'vendor', 'batch', 'weibull_shape']
    """
    if gpus < 1 or days < 1:
        raise ValueError(f"gpus and days must be at least 1, got gpus={gpus}, days={days}")
    if accel <= 0:
        raise ValueError(f"accel must be positive, got {accel}")
    accel = float(accel)
    ss = np.random.SeedSequence([int(seed), 0x5EED])
    r_fleet, r_fail, r_serv, r_false, r_boot = (np.random.default_rng(s) for s in ss.spawn(5))
    end = start + timedelta(days=days)
    hosts = build_hosts(gpus, start, r_fleet)
    sim = FleetSim(seed=seed, start=start, end=end, accel=accel, hosts=hosts)
    counters = {m: int(r_fleet.integers(0, 400_000)) for m in MODEL_BY_KEY}

    def new_gpu(h: Host, slot: int, installed: datetime, batch: str) -> dict:
        counters[h.model] += 1 + int(r_fleet.integers(0, 3))
        g = {
            "serial": serial_for(h.model, counters[h.model]), "model": MODEL_BY_KEY[h.model].inventory_name,
            "vendor": h.vendor, "host": h.name, "slot": slot, "site": h.site, "batch": batch,
            "installed_at": installed, "removed_at": None, "uuid": uuid_for(r_fleet),
            "pci_bus_id": f"0000:{h.buses[slot]}:00.0", "service_point": h.service_point,
            "_host": h.index, "_installed": installed, "_model": h.model,
        }
        sim.gpus_full.append(g)
        return g

    def expose(g: dict, t0: datetime, t1: datetime, failed: bool) -> None:
        key = (g["_model"], g["vendor"], g["batch"])
        acc = sim.expected.setdefault(key, [0.0, 0.0, 0, 0])
        if t1 <= t0:
            return
        k, lam = hazard.batch_params(g["batch"], g["_model"])
        a0, a1 = _years(g["_installed"], t0), _years(g["_installed"], t1)
        acc[0] += float(hazard.expected_failures(np.array(a0), np.array(a1), k, lam, accel))
        acc[1] += (t1 - t0).total_seconds() / 86400.0
        acc[2] += 1
        acc[3] += int(failed)

    for h in hosts:
        spec = MODEL_BY_KEY[h.model]
        for slot in range(h.gpus):
            g = new_gpu(h, slot, h.installed_at, h.batch)
            while True:
                t_begin = max(g["_installed"], start)
                if t_begin >= end:
                    break
                k, lam = hazard.batch_params(g["batch"], h.model)
                age0 = _years(g["_installed"], t_begin)
                age_f = float(hazard.sample_failure_age(np.array(age0), k, lam, accel, r_fail))
                if age_f >= _years(g["_installed"], end):
                    expose(g, t_begin, end, False)
                    break
                tf = g["_installed"] + timedelta(days=age_f * hazard.YEAR_DAYS)
                tf = tf.replace(microsecond=0)
                expose(g, t_begin, tf, True)
                opened = min(tf + timedelta(days=float(r_fail.uniform(0.02, 3.0))), end - timedelta(hours=1))
                opened = max(opened, tf + timedelta(minutes=5))
                fixed = opened + timedelta(days=float(r_fail.uniform(0.05, 1.5)))
                symptom = pick_symptom(r_fail)
                precursor = pick_precursor(symptom, spec.ecc, r_fail)
                eff, kev, lead = failure_effects(h.index, slot, tf, fixed, symptom, precursor, spec.has_fan, r_fail)
                sim.effects.extend(eff)
                sim.kernel_events.extend(kev)
                fixed = fixed.replace(microsecond=0)
                sim.reboots.append((h.index, fixed, True))
                g["removed_at"] = fixed
                g_new = new_gpu(h, slot, fixed, f"{h.model}-RMA")
                sim.failure_rows.append({
                    "serial": g["serial"], "failed_at": tf, "part_code": "GPU", "symptom_code": symptom,
                    "precursor": precursor, "lead_days": round(lead, 3), "host": h.name, "slot": slot,
                    "model": g["model"], "vendor": g["vendor"], "batch": g["batch"], "replaced_at": fixed,
                    "new_serial": g_new["serial"],
                })
                sim.service_rows.append(_service_row(h, slot, g, "failure", "GPU", symptom, "REPLACE",
                                                     tf, opened.replace(microsecond=0), fixed, True))
                g = g_new
    _service_events(sim, r_serv)
    _false_alarms(sim, r_false)
    for h in hosts:
        for t in _poisson_times(r_boot, MAINTENANCE_REBOOTS_PER_YEAR, max(h.installed_at, start), end):
            sim.reboots.append((h.index, t, bool(r_boot.random() < 0.9)))
    sim.reboots.extend((e.host, e.t0.replace(microsecond=0), True) for e in sim.effects if e.kind == "reboot")
    sim.reboots = sorted(set(sim.reboots), key=lambda r: (r[0], r[1], r[2]))
    sim.failure_rows.sort(key=lambda r: (r["failed_at"], r["serial"]))
    sim.service_rows.sort(key=lambda r: (r["opened_at"], r["host"], r["slot"] if r["slot"] is not None else -1))
    sim.gpus = [{k: v for k, v in g.items() if not k.startswith("_")} for g in sim.gpus_full]
    sim.index_slots()
    return sim


def _service_row(h: Host, slot: int | None, g: dict | None, kind: str, part: str, symptom: str, action: str,
                 t_event: datetime, opened: datetime, closed: datetime, replacement: bool) -> dict:
    return {
        "kind": kind, "host": h.name, "_host": h.index, "site": h.site, "service_point": h.service_point,
        "slot": slot, "serial": g["serial"] if g else None, "model": MODEL_BY_KEY[h.model].inventory_name,
        "event_at": t_event, "opened_at": opened, "closed_at": closed, "part_code": part,
        "symptom_code": symptom, "action_code": action, "is_replacement": replacement,
    }


def _service_events(sim: FleetSim, rng: np.random.Generator) -> None:
    """Tickets for work that is not a GPU replacement, with their telemetry and kernel traces."""
    by_slot: dict[tuple[int, int], list[dict]] = {}
    for g in sim.gpus_full:
        by_slot.setdefault((g["_host"], g["slot"]), []).append(g)
    for h in sim.hosts:
        t_from = max(h.installed_at, sim.start)
        spec = MODEL_BY_KEY[h.model]
        for name, (rate, part, symptoms, action, scope) in SERVICE_EVENTS.items():
            if name in ("nvswitch", "baseboard") and h.gpus < 8:
                continue
            for t in _poisson_times(rng, rate * sim.accel, t_from, sim.end - timedelta(hours=2)):
                slot = int(rng.integers(h.gpus)) if scope == "gpu" else None
                g = None
                if slot is not None:
                    for cand in by_slot[(h.index, slot)]:
                        if cand["_installed"] <= t and (cand["removed_at"] is None or cand["removed_at"] > t):
                            g = cand
                    if g is None:
                        continue  # the slot is empty (dead GPU awaiting its swap)
                symptom = symptoms[int(rng.integers(len(symptoms)))]
                opened = min(t + timedelta(days=float(rng.uniform(0.01, 3.0))), sim.end - timedelta(minutes=30))
                opened = max(opened, t + timedelta(minutes=2)).replace(microsecond=0)
                closed = (opened + timedelta(days=float(rng.uniform(0.02, 2.0)))).replace(microsecond=0)
                sim.service_rows.append(_service_row(h, slot, g, name, part, symptom, action, t, opened, closed, False))
                _service_traces(sim, h, slot, name, symptom, t, closed, spec.has_fan, rng)


def _service_traces(sim: FleetSim, h: Host, slot: int | None, name: str, symptom: str, t: datetime,
                    closed: datetime, has_fan: bool, rng: np.random.Generator) -> None:
    eff, kev = sim.effects, sim.kernel_events
    i = h.index
    if name == "gpu_reseat":
        kev.append(KernelEvent(i, slot, t, "Xid", 79))
        kev.append(KernelEvent(i, slot, t + timedelta(seconds=1), "falloff"))
        eff.append(Effect("lost", i, slot, t, closed))
    elif name == "gpu_reset":
        code = {"HANG": 109, "GSP_ERROR": 119, "APP_FAULT": 13}[symptom]
        kev.append(KernelEvent(i, slot, t, "Xid", code))
        if code != 13:
            eff.append(Effect("reset_required", i, slot, t, closed))
    elif name == "gpu_monitor":
        if symptom == "MEMORY_CORRECTABLE":
            eff.append(Effect("sbe_burst", i, slot, t, t, float(rng.integers(20, 400))))
        else:
            eff.append(Effect("temp", i, slot, t - timedelta(days=1), closed, float(rng.uniform(6, 12))))
    elif name == "riser":
        eff.append(Effect("width", i, slot, t - timedelta(days=float(rng.uniform(0.5, 5))), closed, 8.0))
        for _ in range(int(rng.integers(2, 10))):
            kev.append(KernelEvent(i, slot, t - timedelta(hours=float(rng.uniform(0, 48))), "aer"))
    elif name in ("fan", "clean"):
        eff.append(Effect("temp", i, None, t - timedelta(days=float(rng.uniform(0.5, 4))), closed, float(rng.uniform(5, 12))))
        if has_fan:
            eff.append(Effect("fan", i, None, t - timedelta(days=1), closed, 0.5))
    elif name == "psu":
        eff.append(Effect("power_brake", i, None, t - timedelta(hours=float(rng.uniform(1, 30))), closed))
    elif name in ("nvswitch", "baseboard", "cable") and h.gpus == 8:
        for _ in range(int(rng.integers(1, 4))):
            tt = t - timedelta(hours=float(rng.uniform(0, 24)))
            kev.append(KernelEvent(i, None, tt, "SXid", int(rng.choice([12028, 19084, 20034, 11004]))))
            if name != "cable":
                kev.append(KernelEvent(i, int(rng.integers(h.gpus)), tt + timedelta(seconds=2), "Xid", 74))
    if name not in ("gpu_monitor", "gpu_nff", "clean"):
        sim.reboots.append((i, closed, True))


def _false_alarms(sim: FleetSim, rng: np.random.Generator) -> None:
    """Harmless events on healthy GPUs that look like precursors (no ticket, no failure)."""
    for g in sim.gpus_full:
        t0 = max(g["_installed"], sim.start)
        t1 = g["removed_at"] or sim.end
        i, slot = g["_host"], g["slot"]
        for t in _poisson_times(rng, FALSE_ALARMS["sbe_burst"] * sim.accel, t0, t1):
            sim.effects.append(Effect("sbe_burst", i, slot, t, t, float(rng.integers(5, 300))))
        for t in _poisson_times(rng, FALSE_ALARMS["xid79_transient"] * sim.accel, t0, t1):
            back = t + timedelta(minutes=float(rng.uniform(10, 90)))
            sim.kernel_events.append(KernelEvent(i, slot, t, "Xid", 79))
            sim.effects.append(Effect("lost", i, slot, t, back))
            sim.reboots.append((i, back, True))
        for t in _poisson_times(rng, FALSE_ALARMS["width_transient"] * sim.accel, t0, t1):
            sim.effects.append(Effect("width", i, slot, t, t + timedelta(days=float(rng.uniform(0.2, 4))), 8.0))
    racks: dict[str, list[Host]] = {}
    for h in sim.hosts:
        racks.setdefault(h.rack, []).append(h)
    for rack in sorted(racks):
        for t in _poisson_times(rng, FALSE_ALARMS["hot_aisle"] * sim.accel, sim.start, sim.end):
            t_end = t + timedelta(days=float(rng.uniform(0.5, 6)))
            bump = float(rng.uniform(4, 11))
            for h in racks[rack]:
                sim.effects.append(Effect("hot", h.index, None, t, t_end, bump))
