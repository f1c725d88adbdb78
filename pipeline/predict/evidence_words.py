"""``top_factors`` of the evidence score: its largest terms, each in a technician's words.

Reads and writes nothing. A term is rendered from the GPU's own numbers ("Xid 79 (fell off
the bus) ×2 in 7 days, 1 today"; "row remapping failed"; "PCIe link narrowed on 5 of the
last 30 days"), strongest contribution first, so the first factor is always the evidence
that raised the risk most.
"""

from __future__ import annotations

import math

import pandas as pd

from pipeline.predict.evidence_weights import load_weights, xid_class_of
from pipeline.predict.features import XID_CODES

#: What the codes counted one by one mean, in short.
CODE_WORDS: dict[int, str] = {
    8: "GPU stopped", 48: "double-bit ECC", 61: "micro-controller breakpoint", 62: "micro-controller halt",
    63: "row-remap event", 64: "row-remap failure", 68: "video decoder exception", 69: "graphics engine error",
    74: "NVLink error", 79: "fell off the bus", 92: "high single-bit ECC rate", 94: "contained ECC error",
    95: "uncontained ECC error", 109: "context-switch timeout", 119: "GSP timeout", 120: "GSP error",
}

#: A class's name when its codes are not counted one by one.
CLASS_WORDS: dict[str, str] = {
    "fatal": "fatal hardware Xid", "memory": "GPU memory Xid", "nvlink": "NVLink Xid", "pcie": "PCIe Xid",
    "gsp_hang": "GSP/hang Xid", "sbe": "high corrected-ECC-rate Xid", "driver": "driver Xid",
    "app": "application Xid", "other": "Xid outside the catalog",
}


def _v(row: dict, col: str) -> float:
    v = row.get(col)
    return 0.0 if v is None or pd.isna(v) else float(v)


def _class_codes() -> dict[str, list[int]]:
    from pipeline.ingest.xid_catalog import classify

    out: dict[str, list[int]] = {}
    for c in XID_CODES:
        r = classify("Xid", c)
        out.setdefault(xid_class_of("Xid", c, r["severity"], r["symptom_code"]), []).append(c)
    return out


def _when(n1: float, n7: float, n30: float) -> str:
    if n7 > 0:
        return f"×{n7:.0f} in 7 days" + (f", {n1:.0f} today" if n1 > 0 else "")
    return f"×{n30:.0f} in 30 days"


def _xid(row: dict, k: str) -> str:
    n1, n7, n30 = (_v(row, f"xc_{k}_{w}d") for w in (1, 7, 30))
    codes = [(_v(row, f"xid{c}_30d"), c) for c in _class_codes().get(k, []) if _v(row, f"xid{c}_30d") > 0]
    if codes and sum(n for n, _ in codes) >= n30:
        names = ", ".join(f"{c} ({CODE_WORDS.get(c, 'Xid')})" for _, c in sorted(codes, reverse=True)[:2])
        return f"Xid {names} {_when(n1, n7, n30)}"
    return f"{CLASS_WORDS[k]} {_when(n1, n7, n30)}"


def _plural(n: float, word: str) -> str:
    return f"{n:.0f} {word}{'' if round(n) == 1 else 's'}"


def _render(term: str, row: dict) -> str:
    if term.startswith("xid_"):
        return _xid(row, term[4:])
    t = load_weights().terms
    if term == "ecc_uncorrected":
        u7, u30 = _v(row, "ecc_uncorr_7d"), _v(row, "ecc_uncorr_30d")
        return f"uncorrectable ECC ×{u7:.0f} in 7 days" if u7 else f"uncorrectable ECC ×{u30:.0f} in 30 days"
    if term == "ecc_corrected":
        return f"corrected ECC {_v(row, 'ecc_corr_7d') / 7:,.0f}/day (background ≤ {t['ecc_corrected']['floor_per_day']:g})"
    if term == "ecc_trend":
        return f"corrected ECC rising: {math.exp(_v(row, 'ecc_corr_vs_own_before')):.1f}× its rate of the month before"
    if term == "retired_pages":
        return f"{_plural(_v(row, 'retired_pages'), 'retired page')}"
    if term == "retired_recent":
        return f"{_plural(_v(row, 'retired_pages_delta_30d'), 'page')} retired in 30 days"
    if term == "remap_pending":
        return "row remap pending (needs a GPU reset)"
    if term == "remap_failed":
        return "row remapping failed (no spare rows)"
    if term == "remap_uncorrectable":
        return f"{_plural(_v(row, 'remap_uncorr_30d'), 'row')} remapped for uncorrectable errors"
    if term == "pcie_narrow":
        n7, n30 = _v(row, "pcie_narrow_days_7d"), _v(row, "pcie_narrow_days_30d")
        return (f"PCIe link narrowed on {n7:.0f} of the last 7 days" if n7
                else f"PCIe link narrowed on {n30:.0f} of the last 30 days")
    if term == "pcie_deficit":
        return f"PCIe link {_v(row, 'pcie_width_deficit_7d'):.0f} lanes below its full width"
    if term == "pcie_replay":
        return f"PCIe replays +{_v(row, 'pcie_replay_7d'):,.0f} in 7 days"
    if term == "heat":
        h, m = row.get("temp_vs_host_7d"), _v(row, "temp_vs_model_7d")
        host = "" if h is None or pd.isna(h) else f"{float(h):.0f} °C above its host's other GPUs, "
        own = _v(row, "temp_vs_own_before")
        return f"running hot: {host}{m:.0f} °C above its model's median, {own:.0f} °C above its month before"
    if term == "thermal_throttle":
        return f"thermally throttled {100 * _v(row, 'throttle_thermal_7d'):.0f}% of the time"
    if term == "lost_samples":
        share = _v(row, "samples_vs_own_1d")
        return "no telemetry today" if share <= 0 else f"reported only {100 * share:.0f}% of its usual samples today"
    if term == "lost_markers":
        return f"'GPU is lost' / 'requires reset' ×{_v(row, 'lost_markers_7d'):.0f} in nvidia-smi in 7 days"
    if term == "sxid_host":
        return f"NVSwitch SXid ×{_v(row, 'sxid_host_7d'):.0f} on its host in 7 days"
    if term == "reseats":
        return f"reseated {_plural(_v(row, 'reseats_prior'), 'time')} before"
    if term == "tickets":
        return f"{_plural(_v(row, 'tickets_prior') - _v(row, 'reseats_prior'), 'earlier ticket')}"
    return term


def describe(row: dict, contrib: dict[str, float], limit: int = 3) -> str:
    """The GPU's strongest terms in words, strongest first, ``'; '``-separated."""
    top = [k for k, v in sorted(contrib.items(), key=lambda kv: -kv[1]) if v > 1e-9][:limit]
    if not top:
        app = _v(row, "xc_app_30d")
        return (f"application Xids only ({app:.0f} in 30 days): not a hardware sign" if app
                else "no evidence of a fault")
    return "; ".join(_render(k, row) for k in top)
