"""What a failure or a service event looks like before and when it happens.

Reads nothing, writes nothing. Turns a failure (or a harmless event) into *effects* on the
telemetry of one GPU or host (a rising corrected-ECC rate, a narrowed PCIe link, a slow
temperature creep, a lost GPU) and *kernel events* (Xid, SXid, AER lines). The telemetry and
kernel writers replay them; the ground truth records which precursor kind a failure had.

The symptom mix is loosely based on published fault breakdowns (docs/simulator.md): memory
(DBE, row remapping) leads, then off-the-bus and PCIe link problems, hangs, GSP timeouts,
NVLink and thermal faults. About half of all failures come with no precursor at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np


@dataclass(frozen=True)
class Effect:
    """A change to telemetry of one GPU (``slot``) or a whole host (``slot`` None) in [t0, t1)."""

    kind: str
    host: int
    slot: int | None
    t0: datetime
    t1: datetime
    value: float = 0.0


@dataclass(frozen=True)
class KernelEvent:
    """One kernel message group: an Xid, an SXid triple, an AER report, a fell-off-the-bus block."""

    host: int
    slot: int | None
    t: datetime
    kind: str  # "Xid", "SXid", "aer", "falloff"
    code: int = 0


#: symptom -> (share of GPU replacements, probability of a precursor, precursor kinds)
SYMPTOMS: dict[str, tuple[float, float, tuple[str, ...]]] = {
    "MEMORY_UNCORRECTABLE": (0.32, 0.65, ("ecc_rising", "xid_memory")),
    "FELL_OFF_BUS": (0.18, 0.45, ("xid79_burst", "pcie_width")),
    "ROW_REMAP": (0.08, 0.80, ("row_remap",)),
    "PCIE_ERROR": (0.07, 0.70, ("pcie_width",)),
    "HANG": (0.10, 0.15, ("xid_hang",)),
    "GSP_ERROR": (0.06, 0.25, ("xid_hang",)),
    "OVERHEAT": (0.07, 0.80, ("thermal_creep",)),
    "NVLINK_ERROR": (0.07, 0.35, ("nvlink_xid",)),
    "OTHER": (0.05, 0.0, ()),
}

#: precursor kind -> (min, max) lead time in days before the failure
LEAD_DAYS = {
    "ecc_rising": (2.0, 21.0), "xid_memory": (1.0, 14.0), "row_remap": (2.0, 20.0),
    "page_retire": (3.0, 25.0), "xid79_burst": (0.5, 7.0), "pcie_width": (1.0, 12.0),
    "xid_hang": (0.5, 6.0), "thermal_creep": (4.0, 25.0), "nvlink_xid": (0.5, 8.0),
}


def pick_symptom(rng: np.random.Generator) -> str:
    names = list(SYMPTOMS)
    p = np.array([SYMPTOMS[s][0] for s in names])
    return names[int(rng.choice(len(names), p=p / p.sum()))]


def pick_precursor(symptom: str, ecc: str, rng: np.random.Generator) -> str:
    _, prob, kinds = SYMPTOMS[symptom]
    if not kinds or rng.random() >= prob:
        return "none"
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "row_remap" and ecc == "retire":
        kind = "page_retire"
    return kind


def _spread(rng: np.random.Generator, t0: datetime, t1: datetime, n: int) -> list[datetime]:
    span = max((t1 - t0).total_seconds(), 1.0)
    return sorted(t0 + timedelta(seconds=float(s)) for s in rng.uniform(0, span, n))


def failure_effects(host: int, slot: int, tf: datetime, t_fixed: datetime, symptom: str, precursor: str,
                    has_fan: bool, rng: np.random.Generator) -> tuple[list[Effect], list[KernelEvent], float]:
    """Effects and kernel events of one GPU failure at ``tf``, replaced at ``t_fixed``.

    Returns (effects, kernel events, lead days of the precursor or 0).
    """
    eff: list[Effect] = []
    kev: list[KernelEvent] = []
    lead = 0.0
    if precursor != "none":
        lo, hi = LEAD_DAYS[precursor]
        lead = float(rng.uniform(lo, hi))
        t0 = tf - timedelta(days=lead)
        if precursor == "ecc_rising":
            eff.append(Effect("sbe_ramp", host, slot, t0, tf, float(rng.lognormal(5.0, 1.0))))
            for t in _spread(rng, tf - timedelta(days=lead / 3), tf, int(rng.integers(0, 3))):
                eff.append(Effect("remap_corr", host, slot, t, t))
                kev.append(KernelEvent(host, slot, t, "Xid", 63))
        elif precursor == "xid_memory":
            for t in _spread(rng, t0, tf, int(rng.integers(2, 7))):
                code = int(rng.choice([63, 63, 94, 94, 48, 64]))
                kev.append(KernelEvent(host, slot, t, "Xid", code))
                eff.append(Effect({63: "remap_corr", 64: "remap_unc", 94: "dbe", 48: "dbe"}[code], host, slot, t, t))
            eff.append(Effect("sbe_ramp", host, slot, t0, tf, float(rng.lognormal(2.5, 1.0))))
        elif precursor == "row_remap":
            for t in _spread(rng, t0, tf, int(rng.integers(2, 9))):
                eff.append(Effect("remap_unc", host, slot, t, t))
                kev.append(KernelEvent(host, slot, t, "Xid", 63))
            eff.append(Effect("remap_pending", host, slot, tf - timedelta(days=lead / 4), t_fixed))
        elif precursor == "page_retire":
            for t in _spread(rng, t0, tf, int(rng.integers(3, 12))):
                eff.append(Effect("retire_sbe", host, slot, t, t))
                kev.append(KernelEvent(host, slot, t, "Xid", 63))
            eff.append(Effect("sbe_ramp", host, slot, t0, tf, float(rng.lognormal(3.0, 1.0))))
            eff.append(Effect("retire_pending", host, slot, tf - timedelta(days=lead / 4), t_fixed))
        elif precursor == "xid79_burst":
            for t in _spread(rng, t0, tf - timedelta(hours=2), int(rng.integers(1, 4))):
                back = t + timedelta(minutes=float(rng.uniform(20, 240)))
                kev.append(KernelEvent(host, slot, t, "Xid", 79))
                kev.append(KernelEvent(host, slot, t, "falloff"))
                eff.append(Effect("lost", host, slot, t, back))
                eff.append(Effect("reboot", host, None, back, back))
        elif precursor == "pcie_width":
            eff.append(Effect("width", host, slot, t0, t_fixed, float(rng.choice([8, 8, 4]))))
            for t in _spread(rng, t0, tf, int(rng.integers(3, 15))):
                kev.append(KernelEvent(host, slot, t, "aer"))
        elif precursor == "xid_hang":
            for t in _spread(rng, t0, tf, int(rng.integers(1, 3))):
                kev.append(KernelEvent(host, slot, t, "Xid", int(rng.choice([109, 119, 8]))))
        elif precursor == "thermal_creep":
            eff.append(Effect("temp", host, slot, t0, t_fixed, float(rng.uniform(9, 22))))
            if has_fan:
                eff.append(Effect("fan", host, slot, t0, t_fixed, float(rng.uniform(0.3, 0.8))))
        elif precursor == "nvlink_xid":
            for t in _spread(rng, t0, tf, int(rng.integers(1, 5))):
                kev.append(KernelEvent(host, slot, t, "Xid", 74))
                if rng.random() < 0.5:
                    kev.append(KernelEvent(host, None, t + timedelta(seconds=1), "SXid", int(rng.choice([12028, 19084, 20034]))))
    # The failure itself, then a dead or drained GPU until it is swapped.
    if symptom == "MEMORY_UNCORRECTABLE":
        kev.append(KernelEvent(host, slot, tf, "Xid", 48))
        kev.append(KernelEvent(host, slot, tf + timedelta(seconds=1), "Xid", int(rng.choice([63, 64, 95]))))
        eff.append(Effect("dbe", host, slot, tf, tf, float(rng.integers(1, 4))))
        eff.append(Effect("drained", host, slot, tf, t_fixed))
    elif symptom in ("FELL_OFF_BUS", "PCIE_ERROR"):
        if symptom == "PCIE_ERROR":
            kev.append(KernelEvent(host, slot, tf - timedelta(seconds=3), "aer"))
        kev.append(KernelEvent(host, slot, tf, "Xid", 79))
        kev.append(KernelEvent(host, slot, tf + timedelta(seconds=1), "falloff"))
        eff.append(Effect("lost", host, slot, tf, t_fixed))
    elif symptom == "ROW_REMAP":
        kev.append(KernelEvent(host, slot, tf, "Xid", 64))
        eff.append(Effect("remap_failure", host, slot, tf, t_fixed))
        eff.append(Effect("drained", host, slot, tf, t_fixed))
    elif symptom == "HANG":
        kev.append(KernelEvent(host, slot, tf, "Xid", int(rng.choice([109, 8]))))
        eff.append(Effect("reset_required", host, slot, tf, t_fixed))
    elif symptom == "GSP_ERROR":
        kev.append(KernelEvent(host, slot, tf, "Xid", 119))
        kev.append(KernelEvent(host, slot, tf + timedelta(seconds=30), "Xid", int(rng.choice([119, 120]))))
        eff.append(Effect("reset_required", host, slot, tf, t_fixed))
    elif symptom == "OVERHEAT":
        eff.append(Effect("temp", host, slot, tf, t_fixed, 30.0))
    elif symptom == "NVLINK_ERROR":
        kev.append(KernelEvent(host, slot, tf, "Xid", 74))
        kev.append(KernelEvent(host, None, tf + timedelta(seconds=1), "SXid", 20034))
        eff.append(Effect("drained", host, slot, tf, t_fixed))
    else:
        if rng.random() < 0.5:
            kev.append(KernelEvent(host, slot, tf, "Xid", int(rng.choice([62, 45]))))
        eff.append(Effect("drained", host, slot, tf, t_fixed))
    return eff, kev, lead
