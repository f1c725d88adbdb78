"""Where the report's records come from: a real fleet, or the simulator (and how much faster
than life its failures run).

Reads: the config (``report.data_origin``, ``report.rate_multiplier``), else the simulator's
marker ``DATA/truth/params.json`` (only its existence and its ``accel`` factor: the ground
truth itself is never read), else what the previous report in the same folder recorded (so
``fleetfault report``, which has no data folder, keeps the banner the nightly run drew).
Writes nothing.

Why: the bundled sample multiplies every failure rate by 8 so that 64 GPUs show failures in
60 days; a fleet AFR of 58% read without that warning looks like a disaster, and a synthetic
fleet must never be mistaken for real hardware when buying.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from pipeline.config import Config
from pipeline.report import html as h

log = logging.getLogger(__name__)

#: The simulator writes this beside the data it generates (see pipeline.simulate).
MARKER = Path("truth") / "params.json"


@dataclass(frozen=True)
class Origin:
    """``simulated``: written by ``fleetfault simulate``; ``rate_multiplier``: failure and event
    rates are this many times a real fleet's; ``source``: how that is known, in words."""

    simulated: bool = False
    rate_multiplier: float = 1.0
    source: str = "no simulator marker and no config setting"

    @property
    def flagged(self) -> bool:
        return self.simulated or self.rate_multiplier != 1.0

    def as_dict(self) -> dict:
        return asdict(self)


def _marker(data_dir: Path) -> Origin | None:
    path = Path(data_dir) / MARKER
    if not path.is_file():
        return None
    try:
        accel = float(json.loads(path.read_text(encoding="utf-8")).get("accel", 1.0))
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        # the folder is still the simulator's; only the factor is unknown
        log.warning("report: %s is unreadable (%s); the rate multiplier is unknown", path, exc)
        accel = 1.0
    return Origin(True, accel if accel > 0 else 1.0, f"the simulator's marker {path}")


def resolve(cfg: Config, data_dir: Path | str | None = None, history: list[dict] | None = None) -> Origin:
    """The records' origin: config first, then the simulator's marker, then the last report's."""
    rep = cfg.report
    found = _marker(Path(data_dir)) if data_dir is not None else None
    if found is None and data_dir is None and history:
        last = history[-1].get("origin") or {}
        if last.get("simulated") or last.get("rate_multiplier", 1.0) != 1.0:
            found = Origin(bool(last.get("simulated")), float(last.get("rate_multiplier") or 1.0),
                           f"the previous report ({last.get('source', 'its findings file')})")
    if rep.data_origin == "real":
        return Origin(False, rep.rate_multiplier or 1.0, "config report.data_origin = real")
    if rep.data_origin == "simulated":
        mult = rep.rate_multiplier or (found.rate_multiplier if found else 1.0)
        return Origin(True, mult, "config report.data_origin = simulated")
    if found is not None:
        return Origin(found.simulated, rep.rate_multiplier or found.rate_multiplier, found.source)
    if rep.rate_multiplier and rep.rate_multiplier != 1.0:
        return Origin(False, rep.rate_multiplier, "config report.rate_multiplier")
    return Origin()


def _fmt_mult(x: float) -> str:
    return f"{x:g}"


def banner(origin: Origin, fleet_afr_pct: float | None = None) -> str:
    """The warning shown above every section, or "" for real, unaccelerated records."""
    if not origin.flagged:
        return ""
    m = origin.rate_multiplier
    what = "Simulated data" if origin.simulated else "Accelerated data"
    head = what + (f": failure rates ×{_fmt_mult(m)}" if m != 1.0 else "")
    parts = []
    if origin.simulated:
        parts.append("These records were written by the fleetfault simulator, not collected from real hardware.")
    if m != 1.0:
        text = (f"Every failure and event rate is multiplied by {_fmt_mult(m)}, so the AFRs below are "
                f"{_fmt_mult(m)} times what a real fleet of these GPUs would show")
        if fleet_afr_pct is not None:
            text += f" (fleet AFR {fleet_afr_pct:.2f}% here, about {fleet_afr_pct / m:.2f}% at real rates)"
        parts.append(text + ".")
    parts.append("Do not base purchases on this report.")
    return (f'<div class="banner" id="data-origin" role="alert"><strong>{h.esc(head)}.</strong> '
            f'{h.esc(" ".join(parts))} <span class="note">Known from {h.esc(origin.source)}.</span></div>')
