"""The simulated fleet's static shape: sites, service points, GPU models, purchase batches, hosts.

Reads nothing and writes nothing: it holds the catalogue the other simulator modules draw
from and :func:`build_hosts`, which lays out hosts (8 GPUs, or 4 for PCIe cards) over sites
and racks. Everything here is plain data so that docs/simulator.md can quote it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np


@dataclass(frozen=True)
class SiteSpec:
    name: str
    tz: str
    service_points: tuple[str, ...]
    weight: float


#: Sites, their zones (fixed: fleetfault.toml lists the same) and service points.
SITES: tuple[SiteSpec, ...] = (
    SiteSpec("sha", "Asia/Shanghai", ("sha-sp1", "sha-sp2"), 0.30),
    SiteSpec("sjc", "America/Los_Angeles", ("sjc-depot",), 0.25),
    SiteSpec("fra", "Europe/Berlin", ("fra-rz1",), 0.20),
    SiteSpec("iad", "America/New_York", ("iad-noc", "iad-vendor"), 0.25),
)
SITE_BY_NAME = {s.name: s for s in SITES}


@dataclass(frozen=True)
class ModelSpec:
    key: str  # short name used in batch labels
    smi_name: str  # as nvidia-smi prints `name`
    inventory_name: str  # as the asset registry writes it
    gpus_per_host: int
    mem_mib: int
    power_limit_w: float
    idle_power_w: float
    sm_max_mhz: int
    mem_clock_mhz: int
    pcie_gen: int
    pci_id: str  # vendor:device for the kernel's "fallen off the bus" message
    serial_prefix: str  # 7 digits; the board serial is the prefix and 6 more digits
    ecc: str  # "remap" (A100 and later: row remapping) or "retire" (V100: page retirement)
    has_fan: bool
    temp_base: float  # mean busy temperature, C
    weight: float  # share of hosts


MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("V100", "Tesla V100-SXM2-32GB", "Tesla V100-SXM2-32GB", 8, 32768, 300.0, 42.0, 1530, 877, 3,
              "10de:1db5", "0323918", "retire", False, 62.0, 0.10),
    ModelSpec("A100", "NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", 8, 81920, 400.0, 58.0, 1410, 1593, 4,
              "10de:20b2", "1562121", "remap", False, 60.0, 0.25),
    ModelSpec("H100", "NVIDIA H100 80GB HBM3", "H100 80GB HBM3", 8, 81559, 700.0, 72.0, 1980, 2619, 5,
              "10de:2330", "1650523", "remap", False, 61.0, 0.32),
    ModelSpec("H200", "NVIDIA H200", "H200 141GB HBM3e", 8, 143771, 700.0, 75.0, 1980, 3201, 5,
              "10de:2335", "1654124", "remap", False, 58.0, 0.15),
    ModelSpec("L40S", "NVIDIA L40S", "L40S", 4, 46068, 350.0, 34.0, 2520, 9001, 4,
              "10de:26b9", "1322723", "remap", False, 55.0, 0.12),
    ModelSpec("RTX6000", "NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", 4, 49140, 300.0, 28.0, 2505, 10001, 4,
              "10de:26b1", "1751223", "remap", True, 66.0, 0.06),
)
MODEL_BY_KEY = {m.key: m for m in MODELS}


@dataclass(frozen=True)
class BatchSpec:
    """A purchase batch: one model from one vendor, installed over a span of days.

    The hazard of a GPU of age ``t`` years is Weibull: ``h(t) = (k/lam) (t/lam)^(k-1)``.
    Install days are relative to the simulation start (negative: before it).
    """

    batch: str
    model: str
    vendor: str
    install_from_day: int
    install_to_day: int
    shape: float
    scale_years: float
    share: float  # share of the model's hosts
    note: str = ""


BATCHES: tuple[BatchSpec, ...] = (
    # Old fleet, wearing out (Titan SC20: failures rise with age; shape > 1).
    BatchSpec("V100-2019Q4", "V100", "Dell", -1950, -1850, 3.0, 9.0, 1.0, "wear-out"),
    BatchSpec("A100-2021Q3", "A100", "Inspur", -1330, -1290, 1.0, 40.0, 0.5),
    BatchSpec("A100-2022Q1", "A100", "Supermicro", -1130, -1100, 1.1, 38.0, 0.5),
    BatchSpec("H100-2023Q4", "H100", "Supermicro", -480, -440, 1.0, 28.0, 0.55),
    # The bad batch: three times the hazard of its sibling (a marginal HBM lot).
    BatchSpec("H100-2024Q2", "H100", "Dell", -300, -270, 1.0, 28.0 / 3.0, 0.45, "bad batch (3x)"),
    # Brand new, infant mortality (shape < 1), installed around the start of the window.
    BatchSpec("H200-2025Q1", "H200", "Lenovo", -20, 20, 0.55, 400.0, 1.0, "infant mortality"),
    BatchSpec("L40S-2024Q1", "L40S", "HPE", -420, -380, 1.2, 30.0, 1.0),
    BatchSpec("RTX6000-2023Q2", "RTX6000", "Dell", -650, -600, 1.0, 30.0, 1.0),
)

#: Replacement boards (RMA stock) carry the model's base hazard, new from install.
RMA_SHAPE_SCALE = {"V100": (1.0, 25.0), "A100": (1.0, 40.0), "H100": (1.0, 28.0), "H200": (0.8, 60.0),
                   "L40S": (1.2, 30.0), "RTX6000": (1.0, 30.0)}

#: PCI bus numbers of the GPUs in an 8-GPU HGX board or a 4-card PCIe host, by slot.
PCI_BUSES = {8: ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db"), 4: ("17", "65", "ca", "e3")}
PCI_BUSES_ALT = {8: ("07", "0f", "47", "4e", "87", "90", "b7", "bd"), 4: ("01", "41", "81", "c1")}


@dataclass
class Host:
    index: int
    name: str
    site: str
    service_point: str
    model: str
    batch: str
    vendor: str
    gpus: int
    installed_at: datetime  # UTC
    rack: str
    unit: int
    buses: tuple[str, ...]


def _weighted_round_robin(weights: dict[str, float], n: int) -> list[str]:
    """n picks spread like the weights, deterministic and well mixed even for small n."""
    current = {k: 0.0 for k in weights}
    total = sum(weights.values())
    out = []
    for _ in range(n):
        for k, w in weights.items():
            current[k] += w
        best = max(current, key=lambda k: (current[k], k))
        current[best] -= total
        out.append(best)
    return out


def build_hosts(gpus: int, start: datetime, rng: np.random.Generator) -> list[Host]:
    """Hosts holding exactly ``gpus`` GPUs (the last host may be partly filled).

    Models are spread by weight, sites round-robin by weight, batches by share.
    """
    if gpus < 1:
        raise ValueError("gpus must be at least 1")
    models = {m.key: m.weight for m in MODELS}
    sites = {s.name: s.weight for s in SITES}
    n_est = max(1, gpus // 6 + 2)
    model_seq = _weighted_round_robin(models, n_est * 2)
    site_seq = _weighted_round_robin(sites, n_est * 2)
    batch_pick: dict[str, list[str]] = {}
    for m in MODELS:
        bs = [b for b in BATCHES if b.model == m.key]
        batch_pick[m.key] = _weighted_round_robin({b.batch: b.share for b in bs}, n_est * 2)
    batch_by_name = {b.batch: b for b in BATCHES}
    hosts: list[Host] = []
    left = gpus
    site_count: dict[str, int] = {}
    model_used: dict[str, int] = {}
    i = 0
    while left > 0:
        mk = model_seq[i]
        spec = MODEL_BY_KEY[mk]
        b = batch_by_name[batch_pick[mk][model_used.get(mk, 0)]]
        model_used[mk] = model_used.get(mk, 0) + 1
        site = site_seq[i]
        n_site = site_count.get(site, 0)
        site_count[site] = n_site + 1
        points = SITE_BY_NAME[site].service_points
        point = points[n_site % len(points)]
        n = min(spec.gpus_per_host, left)
        day = rng.uniform(b.install_from_day, b.install_to_day)
        installed = (start + timedelta(days=float(day))).replace(microsecond=0)
        rack = f"{site.upper()}-R{n_site // 4 + 1:02d}"
        buses = (PCI_BUSES if b.vendor in ("Supermicro", "Lenovo", "HPE") else PCI_BUSES_ALT)[spec.gpus_per_host]
        hosts.append(Host(i, f"{site}-gpu{n_site + 1:03d}", site, point, mk, b.batch, b.vendor, n,
                          installed, rack, 4 + 4 * (n_site % 4), buses[:n]))
        left -= n
        i += 1
    return hosts


def serial_for(model: str, counter: int) -> str:
    """A 13-digit board serial as nvidia-smi prints it."""
    return f"{MODEL_BY_KEY[model].serial_prefix}{counter % 1_000_000:06d}"


def uuid_for(rng: np.random.Generator) -> str:
    h = "".join(f"{x:02x}" for x in rng.integers(0, 256, 16))
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
