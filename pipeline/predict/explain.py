"""``top_factors``: why a GPU ranks high, in words a technician understands.

Reads and writes nothing. Features are grouped by what a person would check (Xids, ECC,
memory remapping, temperature, PCIe, power and clocks, the host, the GPU's ticket history,
whether it still reports, its fleet position). A group's weight for one GPU is how much its
risk falls when that group is set to the fleet's typical values (the model card's
reference): an occlusion attribution, exact for the model in use and cheap (one prediction
per group). The groups that raise the risk most are rendered from the GPU's own values, e.g.
"Xid 63 ×4 in 7 days; corrected ECC +350/day; 12 °C above its model's median".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from pipeline.predict.features import CLASS_COUNTS, XID_CODES

_XID_COLS = [f"xid{c}_{w}d" for c in XID_CODES for w in (7, 30)]


def _v(row, col) -> float:
    v = row.get(col)
    return 0.0 if v is None or pd.isna(v) else float(v)


def _xid(row) -> str | None:
    parts = []
    week = sorted(((int(_v(row, f"xid{c}_7d")), c) for c in XID_CODES if _v(row, f"xid{c}_7d") > 0), reverse=True)
    parts += [f"Xid {c} ×{n} in 7 days" for n, c in week[:2]]
    if not parts:
        month = sorted(((int(_v(row, f"xid{c}_30d")), c) for c in XID_CODES if _v(row, f"xid{c}_30d") > 0), reverse=True)
        parts += [f"Xid {c} ×{n} in 30 days" for n, c in month[:2]]
    if not parts and _v(row, "xid_crit_7d") > 0:
        parts.append(f"{int(_v(row, 'xid_crit_7d'))} critical Xids in 7 days")
    return ", ".join(parts) or None


def _ecc(row) -> str | None:
    parts = []
    if _v(row, "ecc_uncorr_7d") > 0:
        parts.append(f"uncorrected ECC ×{int(_v(row, 'ecc_uncorr_7d'))} in 7 days")
    rate, trend = _v(row, "ecc_corr_7d") / 7, _v(row, "ecc_corr_trend")
    if rate >= 10 or trend >= 5:  # a few corrected errors a day are normal background
        parts.append(f"corrected ECC +{rate:,.0f}/day" + (f" (up {trend:,.0f}/day on its month)" if trend >= max(1, rate / 3) else ""))
    return ", ".join(parts) or None


def _memory(row) -> str | None:
    parts = []
    if _v(row, "remap_failed_30d") > 0:
        parts.append("row remapping failed")
    if _v(row, "remap_pending_7d") > 0:
        parts.append("row remap pending (reset needed)")
    if _v(row, "retired_pages") > 0:
        d = _v(row, "retired_pages_delta_7d")
        parts.append(f"{int(_v(row, 'retired_pages'))} retired pages" + (f" (+{int(d)} in 7 days)" if d > 0 else ""))
    return ", ".join(parts) or None


def _temperature(row) -> str | None:
    parts = []
    dt = _v(row, "temp_vs_model_7d")
    if abs(dt) >= 3:
        parts.append(f"{abs(dt):.0f} °C {'above' if dt > 0 else 'below'} its model's median")
    own, today = _v(row, "temp_vs_own_before"), _v(row, "temp_1d_vs_own_before")
    if own >= 3:
        parts.append(f"{own:.0f} °C warmer than in the month before")
    elif today >= 3:
        parts.append(f"{today:.0f} °C warmer today than in the month before")
    host = _v(row, "temp_vs_host_7d")
    if host >= 3:
        parts.append(f"{host:.0f} °C hotter than the other GPUs of its host")
    if _v(row, "temp_slope_7d") >= 0.5:
        parts.append(f"warming {_v(row, 'temp_slope_7d'):.1f} °C/day")
    if _v(row, "throttle_thermal_7d") >= 0.05:
        parts.append(f"thermally throttled {100 * _v(row, 'throttle_thermal_7d'):.0f}% of the time")
    return ", ".join(parts) or None


def _pcie(row) -> str | None:
    parts = []
    if _v(row, "pcie_width_deficit_7d") > 0:
        n = int(_v(row, "pcie_narrow_days_7d"))
        parts.append(f"PCIe link {int(_v(row, 'pcie_width_deficit_7d'))} lanes below its width"
                     + (f" on {n} of the last 7 days" if n > 1 else ""))
    if _v(row, "pcie_replay_7d") > 0:
        parts.append(f"PCIe replays +{int(_v(row, 'pcie_replay_7d'))} in 7 days")
    return ", ".join(parts) or None


def _power(row) -> str | None:
    parts = []
    for col, unit, what in (("power_vs_model_7d", "W", "power"), ("sm_clock_vs_model_7d", "MHz", "SM clock"),
                            ("fan_vs_model_7d", "%", "fan")):
        v = _v(row, col)
        if abs(v) >= {"W": 25, "MHz": 100, "%": 10}[unit]:
            parts.append(f"{what} {abs(v):.0f} {unit} {'above' if v > 0 else 'below'} its model's median")
    if _v(row, "power_brake_7d") > 0:
        parts.append("HW power brake active")
    return ", ".join(parts) or None


def _host(row) -> str | None:
    parts = []
    n = int(_v(row, "host_failures_30d"))
    if n:
        parts.append(f"{n} other GPU{'s' if n > 1 else ''} on this host replaced in 30 days")
    if _v(row, "sxid_host_7d") > 0:
        parts.append(f"SXid ×{int(_v(row, 'sxid_host_7d'))} on its host in 7 days")
    if _v(row, "host_xid_crit_7d_others") > 0:
        parts.append(f"{int(_v(row, 'host_xid_crit_7d_others'))} critical Xids on other GPUs of its host")
    if _v(row, "host_temp_vs_model_7d") >= 3:
        parts.append(f"host runs {_v(row, 'host_temp_vs_model_7d'):.0f} °C hot")
    return ", ".join(parts) or None


def _history(row) -> str | None:
    parts = []
    opened = int(_v(row, "tickets_opened_30d"))
    if opened:
        parts.append(f"{opened} ticket{'s' if opened > 1 else ''} opened in 30 days, "
                     f"last {int(_v(row, 'days_since_ticket_open'))} days ago")
    n = int(_v(row, "tickets_prior"))
    if n:
        r = int(_v(row, "reseats_prior"))
        parts.append(f"{n} earlier ticket{'s' if n > 1 else ''}" + (f" ({r} reseat{'s' if r > 1 else ''})" if r else "")
                     + f", last closed {int(_v(row, 'days_since_fix'))} days ago")
    return ", ".join(parts) or None


def _telemetry(row) -> str | None:
    lost = _v(row, "lost_markers_7d")
    if lost > 0:
        return f"'GPU is lost' / 'requires reset' ×{int(lost)} in nvidia-smi in 7 days"
    share = row.get("samples_vs_own_1d")
    if share is None or pd.isna(share) or share >= 0.8:
        return None
    return "no telemetry today" if share <= 0 else f"reported {100 * share:.0f}% of its usual samples today"


def _fleet(row) -> str | None:
    return f"batch {row.get('batch')}, {int(_v(row, 'age_days'))} days in service"


#: group -> (its features, how to say it)
GROUPS: dict[str, tuple[list[str], Callable]] = {
    "xid": (_XID_COLS + ["xid_crit_1d", "xid_crit_7d", "xid_crit_30d", "xid_warn_7d", "xid_warn_30d",
                         "xid_app_7d", "xid_all_30d", "days_since_crit_xid", *CLASS_COUNTS], _xid),
    "ecc": (["ecc_corr_1d", "ecc_corr_7d", "ecc_corr_30d", "ecc_corr_trend", "ecc_corr_slope_7d",
             "ecc_corr_vs_own_before", "ecc_uncorr_7d", "ecc_uncorr_30d"], _ecc),
    "memory": (["retired_pages", "retired_pages_delta_7d", "retired_pages_delta_30d", "remap_pending_7d",
                "remap_failed_30d", "remap_uncorr_30d"], _memory),
    "temperature": (["temp_mean_1d", "temp_mean_7d", "temp_mean_30d", "temp_max_7d", "temp_slope_7d", "temp_slope_30d",
                     "temp_vs_own_30d", "temp_vs_own_before", "temp_1d_vs_own_before", "temp_vs_model_7d",
                     "temp_vs_host_1d", "temp_vs_host_7d", "throttle_thermal_7d", "throttle_hw_7d"], _temperature),
    "pcie": (["pcie_width_deficit_7d", "pcie_width_deficit_30d", "pcie_narrow_days_7d", "pcie_narrow_days_30d",
              "pcie_replay_7d", "pcie_replay_30d"], _pcie),
    "power": (["power_mean_7d", "power_vs_model_7d", "util_mean_7d", "sm_clock_vs_model_7d", "fan_mean_7d",
               "fan_vs_model_7d", "power_brake_7d"], _power),
    "host": (["sxid_host_7d", "sxid_host_30d", "host_failures_30d", "host_xid_crit_7d_others", "host_temp_vs_model_7d"], _host),
    "history": (["tickets_prior", "reseats_prior", "days_since_fix", "tickets_opened_1d", "tickets_opened_7d",
                 "tickets_opened_30d", "days_since_ticket_open"], _history),
    "telemetry": (["samples_vs_own_1d", "telemetry_days_7d", "lost_markers_7d"], _telemetry),
    "fleet": (["slot", "age_days", "model", "vendor", "site", "batch"], _fleet),
}


def contributions(frame: pd.DataFrame, predict: Callable[[pd.DataFrame], np.ndarray], reference: dict) -> pd.DataFrame:
    """Risk drop per group when it is set to the reference values (rows of ``frame``, a column per group)."""
    base = predict(frame)
    out = {}
    for name, (cols, _) in GROUPS.items():
        alt = frame.copy()
        for c in cols:
            if c in alt.columns:
                alt[c] = reference.get(c)
        out[name] = base - predict(alt)
    return pd.DataFrame(out, index=frame.index)


def describe(row: dict, contrib: dict | None = None, limit: int = 3) -> str:
    """The top factors of one GPU, strongest first, ``'; '``-separated.

    Without contributions (the rule baseline) the Xid, ECC and memory groups are described.
    """
    if contrib is None:
        order = ["xid", "ecc", "memory"]
    else:
        floor = 0.05 * max(contrib.values()) if contrib else 0.0
        order = [g for g, v in sorted(contrib.items(), key=lambda kv: -kv[1]) if v > max(floor, 1e-6)]
    texts = [t for g in order if (t := GROUPS[g][1](row))]
    return "; ".join(texts[:limit]) or "no unusual signal"
