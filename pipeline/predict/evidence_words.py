"""``top_factors`` of the evidence score: its largest terms, each in a technician's words.

Reads and writes nothing. A term is rendered from the GPU's own numbers ("Xid 79 (fell off
the bus) ×2 in 7 days, 1 today"; "row remapping failed"; "PCIe link narrowed on 5 of the
last 30 days"), strongest contribution first, so the first factor is always the evidence
that raised the risk most.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from pipeline.predict.evidence_weights import HW_CLASSES, load_weights, xid_class_of
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
    from pipeline.ingest.kernel.catalog import classify

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


def _recent(row: dict, what: str, c7: str, c30: str, unit: str = "") -> str:
    """``what ×n in 7 days`` when the week has any, else the month's count."""
    n7 = _v(row, c7)
    return f"{what}{n7:.0f}{unit} of the last 7 days" if n7 else f"{what}{_v(row, c30):.0f}{unit} of the last 30 days"


def _heat(row: dict) -> str:
    h = row.get("temp_vs_host_7d")
    host = "" if h is None or pd.isna(h) else f"{float(h):.0f} °C above its host's other GPUs, "
    return (f"running hot: {host}{_v(row, 'temp_vs_model_7d'):.0f} °C above its model's median, "
            f"{_v(row, 'temp_vs_own_before'):.0f} °C above its month before")


def _lost(row: dict) -> str:
    share = _v(row, "samples_vs_own_1d")
    return "no telemetry today" if share <= 0 else f"reported only {100 * share:.0f}% of its usual samples today"


#: term -> its words, from the GPU's own numbers (the Xid classes are rendered by :func:`_xid`).
WORDS: dict[str, Callable[[dict], str]] = {
    "ecc_uncorrected": lambda r: (f"uncorrectable ECC ×{_v(r, 'ecc_uncorr_7d'):.0f} in 7 days" if _v(r, "ecc_uncorr_7d")
                                  else f"uncorrectable ECC ×{_v(r, 'ecc_uncorr_30d'):.0f} in 30 days"),
    "ecc_corrected": lambda r: (f"corrected ECC {_v(r, 'ecc_corr_7d') / 7:,.0f}/day (background ≤ "
                                f"{load_weights().terms['ecc_corrected']['floor_per_day']:g})"),
    "ecc_trend": lambda r: f"corrected ECC rising: {math.exp(_v(r, 'ecc_corr_vs_own_before')):.1f}× its rate of the month before",
    "retired_pages": lambda r: _plural(_v(r, "retired_pages"), "retired page"),
    "retired_recent": lambda r: f"{_plural(_v(r, 'retired_pages_delta_30d'), 'page')} retired in 30 days",
    "remap_pending": lambda r: "row remap pending (needs a GPU reset)",
    "remap_failed": lambda r: "row remapping failed (no spare rows)",
    "remap_uncorrectable": lambda r: f"{_plural(_v(r, 'remap_uncorr_30d'), 'row')} remapped for uncorrectable errors",
    "pcie_narrow": lambda r: _recent(r, "PCIe link narrowed on ", "pcie_narrow_days_7d", "pcie_narrow_days_30d"),
    "pcie_deficit": lambda r: f"PCIe link {_v(r, 'pcie_width_deficit_7d'):.0f} lanes below its full width",
    "pcie_replay": lambda r: f"PCIe replays +{_v(r, 'pcie_replay_7d'):,.0f} in 7 days",
    "heat": _heat,
    "thermal_throttle": lambda r: f"thermally throttled {100 * _v(r, 'throttle_thermal_7d'):.0f}% of the time",
    "lost_samples": _lost,
    "lost_markers": lambda r: (f"'GPU is lost' / 'requires reset' in nvidia-smi on {_v(r, 'lost_marker_days_7d'):.0f} of the "
                               f"last 7 days ({_v(r, 'lost_markers_7d'):.0f} samples)"),
    "sxid_host": lambda r: f"NVSwitch SXid ×{_v(r, 'sxid_host_7d'):.0f} on its host in 7 days",
    "reseats": lambda r: f"reseated {_plural(_v(r, 'reseats_prior'), 'time')} before",
    "tickets": lambda r: _plural(_v(r, "tickets_prior") - _v(r, "reseats_prior"), "earlier ticket"),
    "ticket_opened": lambda r: _opened(r),
}


def _opened(row: dict) -> str:
    """Tickets opened on the GPU lately, and whether a fix has closed after the last one."""
    n1, n7, n30 = (_v(row, f"tickets_opened_{w}d") for w in (1, 7, 30))
    when = "today" if n1 else ("in 7 days" if n7 else "in 30 days")
    words = f"{_plural(n1 or n7 or n30, 'ticket')} opened on this GPU {when}"
    fixed, last = row.get("days_since_fix"), row.get("days_since_ticket_open")
    if fixed is not None and last is not None and not pd.isna(fixed) and not pd.isna(last) and float(fixed) < 999 \
            and float(fixed) <= float(last):
        words += f" (a fix closed {'today' if fixed == 0 else _plural(float(fixed), 'day') + ' ago'})"
    return words


#: The terms a fix answers (``recency.after_fix`` in pipeline/declared/predict_evidence.yaml).
ANSWERED: frozenset[str] = frozenset({*(f"xid_{k}" for k in HW_CLASSES), "lost_markers", "pcie_narrow"})


def _answered(row: dict) -> float | None:
    """Days since the fix that answered the GPU's hardware evidence (None: none did), as
    :func:`pipeline.predict.evidence._after_fix` decides it."""
    fixed, seen = row.get("days_since_fix"), row.get("days_since_hw_evidence")
    if fixed is None or seen is None or pd.isna(fixed) or pd.isna(seen):
        return None
    return float(fixed) if float(fixed) < 999 and float(fixed) <= float(seen) else None


def _render(term: str, row: dict) -> str:
    words = _xid(row, term[4:]) if term.startswith("xid_") else WORDS[term](row)
    fixed = _answered(row) if term in ANSWERED else None
    if fixed is not None:  # why it weighs less than the same evidence unanswered
        words += f" (before a fix {'today' if fixed == 0 else _plural(fixed, 'day') + ' ago'})"
    return words


def describe(row: dict, contrib: dict[str, float], limit: int = 3) -> str:
    """The GPU's strongest terms in words, strongest first, ``'; '``-separated."""
    top = [k for k, v in sorted(contrib.items(), key=lambda kv: -kv[1]) if v > 1e-9][:limit]
    if not top:
        app = _v(row, "xc_app_30d")
        return (f"application Xids only ({app:.0f} in 30 days): not a hardware sign" if app
                else "no evidence of a fault")
    return "; ".join(_render(k, row) for k in top)
