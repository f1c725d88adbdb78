"""Exposure: one lifetime per GPU inside the observation window, as SQL steps.

The window is the config's (``stats.window_start`` / ``window_end``, ISO dates, the end
day included) or else the first to the last day of data (tickets, telemetry days, Xid
events; the inventory only when there is nothing else, because registries reach back years
before the first ticket and counting from ``installed_at`` would deflate every rate).

A GPU enters at the later of its install and the window start (delayed entry: its age at
entry is kept for survival curves) and leaves at the first of

- its first failure at or after its install (a replacement ends exposure even when the
  inventory still lists the GPU; one before the window start leaves no exposure at all),
- its removal (a decommissioned host is a removal: censored, not a failure),
- the window end (censored).

A failure ticket opened up to ``stats.removal_grace_days`` after the inventory's removal
still counts: paperwork often trails the swap.

Where telemetry saw what the registry missed (``inventory_observed``, DuckDB), the
inventory read here is the reconciled one (:mod:`pipeline.link.observed`): a GPU seen
swapped out leaves at its last report, a GPU seen but not listed has its own exposure.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from pipeline.config import Stats
from pipeline.engine import Engine
from pipeline.errors import ConfigError

log = logging.getLogger(__name__)

LIFETIMES = "_ff_lifetimes"
#: Data stamps before this are clock errors (an RTC reset to 1970 or 2000), not history.
PLAUSIBLE_FROM = datetime(2000, 1, 2)


@dataclass(frozen=True)
class Window:
    """The observation window, [start, end) in UTC."""

    start: datetime
    end: datetime
    source: str  # 'config', 'data', 'inventory' or 'empty'

    @property
    def days(self) -> float:
        return (self.end - self.start).total_seconds() / 86400


def _config_day(value: str, key: str) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ConfigError([f"stats.{key}: {value!r} is not an ISO date (YYYY-MM-DD)"]) from None


def data_window(engine: Engine, cfg: Stats) -> Window:
    """The window from the config, else from the first to the last day of data.

    Stamps no clock could have written (before 2000, or after tomorrow: a dead RTC, a
    year-less syslog line given the wrong year) do not stretch a window taken from the data.
    """
    d = engine.dialect
    earliest, latest = PLAUSIBLE_FROM, datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(days=1)

    def plausible(expr: str) -> str:
        return f"{expr} BETWEEN {d.timestamp(earliest)} AND {d.timestamp(latest)}"

    first = _config_day(cfg.window_start, "window_start")
    last = _config_day(cfg.window_end, "window_end")
    source = "config"
    if first is None or last is None:
        lo, hi = engine.rows(f"""
SELECT min(lo), max(hi) FROM (
    SELECT min(opened_at) AS lo, max(opened_at) AS hi FROM tickets WHERE {plausible("opened_at")}
    UNION ALL SELECT CAST(min(day) AS TIMESTAMP), CAST(max(day) AS TIMESTAMP) FROM gpu_days
      WHERE {plausible("CAST(day AS TIMESTAMP)")}
    UNION ALL SELECT min(ts), max(ts) FROM xid_events WHERE {plausible("ts")}
) AS spans""", step="stats: data window")[0]
        source = "data"
        if lo is None:
            lo, hi = engine.rows(
                "SELECT min(installed_at), max(greatest(installed_at, coalesce(removed_at, installed_at))) "
                "FROM inventory", step="stats: window from inventory")[0]
            source = "inventory"
        if lo is None:
            today = datetime.combine(date.today(), datetime.min.time())
            return Window(today, today, "empty")
        first = first or lo.date()
        last = last or hi.date()
    start = datetime.combine(first, datetime.min.time())
    end = datetime.combine(last, datetime.min.time()) + timedelta(days=1)
    if end <= start:
        raise ConfigError([f"stats.window_end ({last}) is before stats.window_start ({first})"])
    return Window(start, end, source)


def lifetimes_sql(engine: Engine, window: Window, failures: str, grace_days: float,
                  inventory: str = "inventory") -> str:
    """The SELECT giving one row per inventory GPU with exposure in ``window``; ``inventory``
    is the relation read as the inventory (the reconciled one where telemetry saw more)."""
    d = engine.dialect
    w0, w1 = d.timestamp(window.start), d.timestamp(window.end)
    grace = f"INTERVAL {int(round(grace_days * 24))} HOUR"
    ep = d.epoch_seconds
    return f"""
WITH inv AS (
    SELECT i.*, coalesce(i.installed_at, {w0}) AS birth_at,
           greatest(coalesce(i.installed_at, {w0}), {w0}) AS entry_at,
           row_number() OVER (PARTITION BY i.serial ORDER BY i.installed_at, i.host, i.slot) AS nth,
           count(*) OVER (PARTITION BY i.serial) AS installs
    FROM {inventory} AS i
),
first_failure AS (
    SELECT inv.serial, inv.nth, min(f.failed_at) AS failed_at
    FROM inv JOIN {failures} AS f ON f.serial = inv.serial
    WHERE (inv.installed_at IS NULL OR f.failed_at >= inv.installed_at)
      AND (inv.removed_at IS NULL OR f.failed_at <= inv.removed_at + {grace})
    GROUP BY inv.serial, inv.nth
),
spans AS (
    SELECT inv.*, ff.failed_at,
           least(coalesce(inv.removed_at, {w1}), coalesce(ff.failed_at, {w1}), {w1}) AS exit_at,
           (ff.failed_at IS NOT NULL AND ff.failed_at >= inv.entry_at AND ff.failed_at < {w1}) AS failed
    FROM inv LEFT JOIN first_failure AS ff ON ff.serial = inv.serial AND ff.nth = inv.nth
)
SELECT CASE WHEN installs > 1 THEN serial || '#' || CAST(nth AS {d.string_type}) ELSE serial END AS id,
       model, vendor, site, host, slot, batch, birth_at, entry_at, exit_at, failed,
       CASE WHEN failed THEN 'failed'
            WHEN removed_at IS NOT NULL AND removed_at < {w1} THEN 'removed'
            ELSE 'censored' END AS exit_reason,
       ({ep('exit_at')} - {ep('entry_at')}) / 86400.0 AS gpu_days,
       ({ep('entry_at')} - {ep('birth_at')}) / 86400.0 AS entry_age_days,
       ({ep('exit_at')} - {ep('birth_at')}) / 86400.0 AS exit_age_days
FROM spans
WHERE exit_at > entry_at
"""


def build_lifetimes(engine: Engine, cfg: Stats, failures: str, window: Window | None = None) -> Window:
    """Create the temporary lifetimes table from ``inventory`` and ``failures``; return the window."""
    from pipeline.link.observed import exposure_inventory

    window = window or data_window(engine, cfg)
    inventory = exposure_inventory(engine)
    engine.create_table(LIFETIMES, lifetimes_sql(engine, window, failures, cfg.removal_grace_days, inventory),
                        step="stats: lifetimes (exposure in the window)")
    return window
