"""Which GPU sat where, from telemetry, reconciled with a registry that lags behind.

Reads: ``smi_hourly`` (serials as nvidia-smi reported them, by host, PCI address and
hour), ``inventory``. Writes: ``inventory_observed`` (one row per serial and place it
reported from, with the serial seen next in that place) and ``inventory_stale`` (registry
rows still "installed" for serials that left the telemetry long ago).

Registries are updated by hand and late: a swapped GPU often stays listed as installed
and its replacement is not listed at all. Telemetry says what happened: a serial that
stops reporting while another appears at the same host and PCI address was swapped out.
:func:`reconciled_inventory_sql` is the inventory with that knowledge added, used by the
ticket linker (a replacement ticket without a serial takes the GPU seen leaving its
slot) and by exposure (a GPU's exposure ends at its observed removal):

- a listed GPU without ``removed_at`` that was seen replaced in its place gets the last
  time it reported as its removal;
- a serial that reported but is not listed at all becomes a row in its host and slot
  (model, vendor and site from the GPU it replaced; batch unknown), from its first to its
  last report (or open while it still reports).

Only serials the telemetry itself reported count: ``gpu_days`` fills serials in from the
inventory by host and slot, which would only repeat the registry's mistakes.
"""

from __future__ import annotations

import logging

from pipeline.vocab.hosts import host_key_sql

log = logging.getLogger(__name__)

#: Two sightings of a place this close (hours) are not a swap when they overlap by this
#: much at most: hourly rows of two GPUs can share the swap's hour.
SWAP_OVERLAP = "INTERVAL 2 HOUR"

OBSERVED_SQL = f"""
WITH s AS (
    SELECT upper(trim(serial)) AS serial, host, {host_key_sql('host')} AS host_k, pci_bus_id, gpu_index,
           ts_first, ts_last
    FROM smi_hourly
    WHERE serial IS NOT NULL AND trim(serial) <> '' AND ts_first IS NOT NULL
),
spans AS (
    SELECT serial, any_value(host) AS host, host_k, pci_bus_id, mode(gpu_index) AS gpu_index,
           min(ts_first) AS first_seen, max(coalesce(ts_last, ts_first)) AS last_seen
    FROM s GROUP BY serial, host_k, pci_bus_id
),
placed AS (
    SELECT *, coalesce(pci_bus_id, 'index' || CAST(gpu_index AS VARCHAR)) AS place FROM spans
)
SELECT serial, host, pci_bus_id, gpu_index, first_seen, last_seen,
       lead(serial) OVER w AS next_serial, lead(first_seen) OVER w AS next_first_seen
FROM placed
WINDOW w AS (PARTITION BY host_k, place ORDER BY first_seen, last_seen, serial)
"""


def build_observed(wh) -> int:
    """Rebuild ``inventory_observed`` from ``smi_hourly``; returns its rows."""
    frame = wh.engine.pl(OBSERVED_SQL, step="link: inventory observed in telemetry")
    with wh.transaction():
        wh.replace("inventory_observed", frame.select("serial", "host", "pci_bus_id", "gpu_index", "first_seen",
                                                      "last_seen", "next_serial"))
    return frame.height


def reconciled_inventory_sql(observed: str = "inventory_observed", inventory: str = "inventory") -> str:
    """A SELECT of the inventory's columns (``serial, model, vendor, host, slot, site,
    batch, installed_at, removed_at``) with the removals and the unlisted GPUs the
    telemetry saw (module doc), plus ``source`` ('inventory', 'observed_removal',
    'observed_only')."""
    hk = host_key_sql
    return f"""
WITH o AS (
    SELECT *, {hk('host')} AS host_k,
           max(last_seen) OVER (PARTITION BY serial) AS serial_last_seen
    FROM {observed}
),
gone AS (  -- the serial's last place, where another serial reported after it: swapped out there
    SELECT serial, host_k, gpu_index, last_seen AS removed_at FROM o
    WHERE next_serial IS NOT NULL AND next_serial <> serial AND last_seen = serial_last_seen
),
inv AS (SELECT *, {hk('host')} AS host_k FROM {inventory}),
fixed AS (
    SELECT i.serial, i.model, i.vendor, i.host, i.slot, i.site, i.batch, i.installed_at,
           coalesce(i.removed_at, g.removed_at) AS removed_at,
           CASE WHEN i.removed_at IS NULL AND g.removed_at IS NOT NULL THEN 'observed_removal'
                ELSE 'inventory' END AS source
    FROM inv i
    LEFT JOIN gone g ON g.serial = i.serial AND g.host_k = i.host_k
         AND (i.slot IS NULL OR g.gpu_index IS NULL OR g.gpu_index = i.slot)
         AND (i.installed_at IS NULL OR g.removed_at > i.installed_at)
),
unlisted AS (
    SELECT o.serial, o.host, o.host_k, o.gpu_index AS slot, o.first_seen, o.last_seen,
           o.next_serial IS NOT NULL AND o.last_seen = o.serial_last_seen AS swapped_out
    FROM o WHERE NOT EXISTS (SELECT 1 FROM {inventory} i WHERE i.serial = o.serial)
),
before AS (  -- the listed GPU whose place an unlisted one took: its model, vendor and site
    SELECT u.serial, arg_max(i.model, coalesce(i.installed_at, TIMESTAMP '1970-01-01')) AS model,
           arg_max(i.vendor, coalesce(i.installed_at, TIMESTAMP '1970-01-01')) AS vendor,
           arg_max(i.site, coalesce(i.installed_at, TIMESTAMP '1970-01-01')) AS site
    FROM unlisted u JOIN inv i ON i.host_k = u.host_k AND i.slot = u.slot
         AND (i.installed_at IS NULL OR i.installed_at <= u.first_seen)
    GROUP BY u.serial
)
SELECT * FROM fixed
UNION ALL
SELECT u.serial, b.model, b.vendor, u.host, u.slot, b.site, NULL AS batch, u.first_seen AS installed_at,
       CASE WHEN u.swapped_out THEN u.last_seen END AS removed_at, 'observed_only' AS source
FROM unlisted u LEFT JOIN before b USING (serial)
"""


def exposure_inventory(engine) -> str:
    """The relation exposure reads as the inventory: the reconciled one (a parenthesised
    SELECT) where ``inventory_observed`` has rows and the engine's dialect reconciles
    (DuckDB), else ``inventory``."""
    if not engine.dialect.reconciles_inventory:
        return "inventory"
    has = engine.rows("SELECT count(*) FROM information_schema.tables WHERE table_name = 'inventory_observed'",
                      step="stats: observed inventory present")[0][0]
    if not has or not engine.rows("SELECT count(*) FROM inventory_observed", step="stats: observed rows")[0][0]:
        return "inventory"
    return f"({reconciled_inventory_sql()})"


def observed_exists(wh) -> bool:
    """Whether the warehouse has observed placements to reconcile with."""
    return bool(wh.engine.rows("SELECT count(*) FROM inventory_observed", step="link: observed rows")[0][0])


def stale_sql(after_days: int) -> str:
    """The open registry rows of serials silent for more than ``after_days`` before the
    telemetry's end."""
    return f"""
    WITH o AS (
        SELECT serial, max(last_seen) AS last_seen, arg_max(next_serial, last_seen) AS replaced_by
        FROM inventory_observed GROUP BY serial
    ),
    data_end AS (SELECT max(last_seen) AS t FROM inventory_observed)
    SELECT i.serial, i.host, i.slot, i.model, i.batch, o.last_seen, o.replaced_by,
           CAST(date_diff('hour', o.last_seen, d.t) / 24.0 AS DOUBLE) AS days_since_seen
    FROM inventory i JOIN o USING (serial) CROSS JOIN data_end d
    WHERE i.removed_at IS NULL AND o.last_seen < d.t - to_days(CAST({int(after_days)} AS INTEGER))
    QUALIFY row_number() OVER (PARTITION BY i.serial ORDER BY i.installed_at DESC NULLS LAST) = 1
    ORDER BY days_since_seen DESC, i.serial
"""


def build_stale(wh, after_days: int) -> int:
    """Rebuild ``inventory_stale``: registry rows still open for serials whose last
    report is more than ``after_days`` before the telemetry's end. Returns its rows."""
    frame = wh.engine.pl(stale_sql(int(after_days)), step="link: stale inventory rows")
    with wh.transaction():
        wh.replace("inventory_stale", frame)
    return frame.height


def stale_inventory(wh):
    """The ``inventory_stale`` rows as a polars frame, for the report's data-quality
    section: serial, host, slot, model, batch, last_seen, replaced_by, days_since_seen."""
    return wh.engine.pl("SELECT * FROM inventory_stale ORDER BY days_since_seen DESC, serial", step="read inventory_stale")


def run(ctx) -> None:
    """Rebuild ``inventory_observed`` and ``inventory_stale`` (part of stage ``link``)."""
    n = build_observed(ctx.wh)
    if not n:
        return
    stale = build_stale(ctx.wh, ctx.cfg.link.stale_after_days)
    removed = ctx.wh.engine.rows(f"SELECT count(*) FROM ({reconciled_inventory_sql()}) WHERE source <> 'inventory'",
                                 step="link: reconciled inventory counts")[0][0]
    if removed:
        ctx.note("link", f"{removed} GPU placement(s) seen in telemetry but not in inventory.csv "
                         "(a removal or a GPU not recorded there) are taken from the telemetry")
    if stale:
        ctx.note("link", f"{stale} inventory row(s) say installed for a serial not reported for more than "
                         f"{ctx.cfg.link.stale_after_days} days (table inventory_stale)")
