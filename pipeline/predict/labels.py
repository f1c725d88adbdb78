"""Failure events, the prediction target: a GPU replaced (a GPU REPLACE ticket linked to a serial).

Reads ``failures`` (written by the stats stage) or, when that table is still empty,
derives the same events from ``tickets`` with the stats stage's rule
(``stats.failure_parts`` x ``stats.failure_actions``, linked to an inventory serial), so
``fleetfault predict`` works on a warehouse where the stats stage has not run yet.
Writes nothing. The GPU-day label itself (replaced within ``predict.horizon_days``, days
after a replacement or outside service excluded) is made in :mod:`~pipeline.predict.features`.
"""

from __future__ import annotations

from pipeline.config import Config
from pipeline.warehouse import Warehouse


def _quoted(values: list[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values) or "NULL"


def failure_events_sql(wh: Warehouse, cfg: Config) -> str:
    """A SQL relation with ``serial, failed_at`` (UTC): one row per GPU replacement."""
    if wh.scalar("SELECT count(*) FROM failures", step="predict: count failures"):
        return "SELECT serial, failed_at FROM failures"
    return f"""SELECT t.serial, t.opened_at AS failed_at FROM tickets t
      WHERE t.serial IS NOT NULL AND t.opened_at IS NOT NULL
        AND t.part_code IN ({_quoted(cfg.stats.failure_parts)})
        AND t.action_code IN ({_quoted(cfg.stats.failure_actions)})
        AND t.serial IN (SELECT serial FROM inventory)"""
