"""What changed since the last report: each report keeps its findings in a small JSON file
beside it, and the next one compares.

Reads and writes ``<report>.findings.json`` (``out/report.findings.json`` for the nightly
report): a list of snapshots, oldest first, at most :data:`KEEP`. A snapshot holds the fleet
figures, every group's verdict and the leading failure modes, plus the records' origin.

The baseline is the newest snapshot drawn from *different* records, so running the report
twice on the same night does not hide what the night before changed. A missing or damaged
file is not an error: the report says it has nothing to compare with, and why.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import date, datetime, timezone
from pathlib import Path

from pipeline.report.atomic import write_atomic
from pipeline.report.findings import LESS, MORE, Findings

log = logging.getLogger(__name__)

#: Snapshots kept in the file (about a month of nightly reports).
KEEP = 30
VERSION = 1


def history_path(report_path: str | Path) -> Path:
    """``out/report.html`` -> ``out/report.findings.json``."""
    p = Path(report_path)
    return p.with_name(p.stem + ".findings.json")


def load(path: str | Path) -> tuple[list[dict], str | None]:
    """The snapshots in ``path`` (oldest first) and, when the file was unusable, why."""
    path = Path(path)
    if not path.exists():
        return [], None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        snaps = data["snapshots"]
        if not isinstance(snaps, list) or not all(isinstance(s, dict) for s in snaps):
            raise TypeError("'snapshots' is not a list of objects")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("report: ignoring %s: %s", path, exc)
        return [], f"{path.name} could not be read ({type(exc).__name__}: {exc})"
    return snaps, None


def _num(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _day(x) -> str | None:
    return x.isoformat() if isinstance(x, (date, datetime)) else x


def snapshot(findings: Findings, origin: dict, generated_at: datetime | None = None) -> dict:
    """The JSON-ready record of what this report says."""
    s = findings.facts
    groups = [{"dimension": r["dimension"], "group": r["group_value"], "verdict": r["verdict"],
               "gpu_days": _num(r["gpu_days"]), "failures": r["failures"], "rate_ratio": _num(r["rate_ratio"]),
               "rr_ci_low": _num(r["rr_ci_low"]), "rr_ci_high": _num(r["rr_ci_high"])}
              for r in findings.groups.iter_rows(named=True)] if findings.groups.height else []
    modes = ([{"symptom_code": r["symptom_code"], "failures": r["failures"]}
              for r in findings.failure_modes.iter_rows(named=True)] if findings.failure_modes.height else [])
    return {
        "version": VERSION,
        "generated_at": (generated_at or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "period_start": _day(s.get("period_start")), "period_end": _day(s.get("period_end")),
        "gpus": s.get("gpus"), "gpu_days": _num(s.get("gpu_days")), "failures": s.get("failures"),
        "afr_pct": _num(s.get("afr_pct")), "afr_ci_low_pct": _num(s.get("afr_ci_low_pct")),
        "afr_ci_high_pct": _num(s.get("afr_ci_high_pct")), "tickets": s.get("tickets"),
        "xid_events": s.get("xid_events"), "groups": groups, "failure_modes": modes, "origin": origin,
    }


def _fingerprint(snap: dict) -> tuple:
    """What identifies the records a snapshot was drawn from."""
    days = snap.get("gpu_days")
    return (snap.get("period_start"), snap.get("period_end"), snap.get("gpus"),
            None if days is None else round(days, 1), snap.get("failures"), snap.get("tickets"),
            snap.get("xid_events"))


def baseline(history: list[dict], current: dict) -> tuple[dict | None, dict | None]:
    """(the newest snapshot from different records, the oldest consecutive one from the same)."""
    same = None
    for snap in reversed(history):
        if _fingerprint(snap) != _fingerprint(current):
            return snap, same
        same = snap
    return None, same


def _pct(x) -> str:
    return "—" if x is None else f"{x:.2f}%"


def _who(g: dict) -> str:
    return f"{g['dimension']} {g['group']}"


def describe(current: dict, base: dict) -> list[str]:
    """Sentences for every difference that matters between ``base`` and ``current``."""
    out = []
    if current.get("period_end") != base.get("period_end") or current.get("period_start") != base.get("period_start"):
        out.append(f"The records now cover {current.get('period_start')} to {current.get('period_end')} "
                   f"(last report: {base.get('period_start')} to {base.get('period_end')}).")
    df = (current.get("failures") or 0) - (base.get("failures") or 0)
    dd = (current.get("gpu_days") or 0) - (base.get("gpu_days") or 0)
    if df or abs(dd) >= 0.5:
        out.append(f"{df:+,} GPU failures ({base.get('failures') or 0:,} → {current.get('failures') or 0:,}) and "
                   f"{dd:+,.0f} GPU-days; fleet AFR {_pct(base.get('afr_pct'))} → {_pct(current.get('afr_pct'))} "
                   f"(95% interval now {_pct(current.get('afr_ci_low_pct'))}–{_pct(current.get('afr_ci_high_pct'))}).")
    dg = (current.get("gpus") or 0) - (base.get("gpus") or 0)
    if dg:
        out.append(f"The inventory lists {dg:+,} GPUs ({base.get('gpus') or 0:,} → {current.get('gpus') or 0:,}).")
    before = {(g["dimension"], g["group"]): g for g in base.get("groups") or []}
    now = {(g["dimension"], g["group"]): g for g in current.get("groups") or []}
    for key, g in now.items():
        old = before.get(key)
        if old is None:
            out.append(f"New: {_who(g)} ({g['verdict']}).")
        elif old["verdict"] != g["verdict"]:
            lead = "Now flagged: " if g["verdict"] == MORE else ""
            out.append(f"{lead}{_who(g)} {_verb(g['verdict'])} (last report: {old['verdict']}).")
    for key, g in before.items():
        if key not in now:
            out.append(f"Gone: {_who(g)} is no longer in the records (was: {g['verdict']}).")
    top_now = (current.get("failure_modes") or [{}])[0].get("symptom_code")
    top_then = (base.get("failure_modes") or [{}])[0].get("symptom_code")
    if top_now != top_then and top_now:
        out.append(f"The leading failure mode is now {top_now} (last report: {top_then or 'none'}).")
    return out


def _verb(verdict: str) -> str:
    return {MORE: "now fails significantly more than the rest of the fleet",
            LESS: "now fails significantly less than the rest of the fleet"}.get(verdict, f"is now: {verdict}")


def save(path: str | Path, history: list[dict], current: dict) -> Path:
    """Append ``current`` to ``history`` (keeping :data:`KEEP`) and write it atomically."""
    return write_atomic(path, json.dumps({"snapshots": [*history, current][-KEEP:]}, indent=1, ensure_ascii=False))
