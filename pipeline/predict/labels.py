"""Failure events, the prediction target: a GPU replaced (a GPU REPLACE ticket linked to a serial).

Reads ``failures`` (:mod:`pipeline.stats.failures`, the one definition of a failure; the
statistics stage writes it before this stage runs) and ``tickets``. From ``inventory_observed`` (the linking
stage's record of which serial telemetry saw in which slot), a serial that stops reporting while a
new serial appears in its host and bus within ``link.replace_window_days`` is an observed
replacement too, dated at its last sample or at the open of its ticket still open then; a
serial keeps its earliest failure of either kind.
Writes nothing. The GPU-day label itself (replaced within ``predict.horizon_days``, days
after a replacement or outside service excluded) is made in :mod:`~pipeline.predict.features`.
"""

from __future__ import annotations

from pipeline.config import Config
from pipeline.stats.failures import TABLE as FAILURES
from pipeline.warehouse import Warehouse


def failure_events_sql(wh: Warehouse, cfg: Config) -> str:
    """A SQL relation with ``serial, failed_at`` (UTC): one row per GPU replacement."""
    tickets = f"SELECT serial, failed_at FROM {FAILURES}"
    return (f"SELECT serial, min(failed_at) AS failed_at FROM ({tickets} UNION ALL {observed_swaps_sql(cfg)}) "
            "GROUP BY serial")


def observed_swaps_sql(cfg: Config) -> str:
    """Replacements seen in telemetry (``serial, failed_at``), from the linking stage's
    ``inventory_observed`` (empty before telemetry has shown a swap).

    Dated at its last sample, or at the open of a ticket on the GPU still open then (opened
    within ``predict.horizon_days`` before, not closed before the day before): the report of
    that failure, as a replacement ticket's open dates a failure in ``failures``. A
    replacement whose ticket's part the coder left open is only seen here; dated at its last
    sample, the day its ticket opened would be a scored day whose features know the ticket
    (``tickets_opened_1d``) and whose label knows the failure.
    """
    # In seconds: DuckDB and Spark both read INTERVAL n SECOND (a fractional DAY count only DuckDB).
    window = round(float(cfg.link.replace_window_days) * 86400)
    report = int(cfg.predict.horizon_days) * 86400
    # A serial that stopped before the data's last day while another serial started in its
    # slot around then was swapped; one still reporting at the end was not.
    swaps = f"""SELECT o.serial, CAST(o.last_seen AS TIMESTAMP) AS failed_at
      FROM inventory_observed o JOIN inventory_observed n
        ON n.host = o.host AND n.pci_bus_id = o.pci_bus_id AND n.serial <> o.serial
       AND n.first_seen BETWEEN o.last_seen - INTERVAL 1 DAY AND o.last_seen + INTERVAL {window} SECOND
      WHERE o.serial IN (SELECT serial FROM inventory)
        AND o.last_seen < (SELECT max(last_seen) FROM inventory_observed) - INTERVAL 1 DAY"""
    return f"""SELECT w.serial, coalesce(min(CAST(t.opened_at AS TIMESTAMP)), w.failed_at) AS failed_at
      FROM ({swaps}) w LEFT JOIN tickets t
        ON t.serial = w.serial AND t.opened_at <= w.failed_at
       AND t.opened_at >= w.failed_at - INTERVAL {report} SECOND
       AND (t.closed_at IS NULL OR t.closed_at >= w.failed_at - INTERVAL 86400 SECOND)
      GROUP BY w.serial, w.failed_at"""
