"""GPU-day features for failure prediction, as DuckDB SQL over the declared tables.

Reads ``inventory``, ``gpu_days``, ``xid_events``, ``tickets`` and the failure events
(:mod:`pipeline.predict.labels`). Writes ``features``: one row per inventory serial and
UTC day in service, with rolling 1/7/30-day windows, trends against the GPU's own past
and against its model's fleet median that day, Xid counts by code and severity, SXid on
its host, earlier tickets and reseats (from their close, when the outcome is known), tickets
opened lately (from their open, whatever their outcome), age, fleet position and host-level signals.

Every window looks backwards only (``ROWS BETWEEN n PRECEDING AND CURRENT ROW`` over a
dense day grid), and the fleet medians use only the same day, so a row for day *d* never
changes when data after *d* is appended. The grid of a serial ends the day before its
first failure or its removal: later days are not in service. ``label`` and
``days_to_failure`` are the targets, never features.
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta

from pipeline.config import Config
from pipeline.engine import Dialect, DuckDBDialect, Engine
from pipeline.predict.evidence_weights import HW_CLASSES, XID_CLASSES, xid_class_values
from pipeline.predict.labels import failure_events_sql
from pipeline.stats.exposure import PLAUSIBLE_FROM
from pipeline.vocab.sql import literal, literals
from pipeline.warehouse import Warehouse

log = logging.getLogger(__name__)

#: The warehouse tables the feature query reads (handed to the engine it runs on).
INPUTS: tuple[str, ...] = ("inventory", "gpu_days", "xid_events", "tickets", "failures", "inventory_observed")

#: Xid codes counted one by one (the rest count only through their severity class):
#: hardware (48 DBE, 63/64 row remap, 74 NVLink, 79 fell off the bus, 92 high SBE rate,
#: 94/95 contained/uncontained ECC, 119/120 GSP, 61/62 internal micro-controller,
#: 68 video, 69 graphics exception, 8/109 GPU stopped / context-switch timeout: hangs that
#: come back before a GPU dies of one) and application-caused (13, 31, 43, 45).
XID_CODES: tuple[int, ...] = (8, 13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119, 120)

#: Fleet-position columns handed to the model as categories.
CATEGORICAL: tuple[str, ...] = ("model", "vendor", "site", "batch")

#: Identity columns of a features row (not model inputs).
KEYS: tuple[str, ...] = ("serial", "day", "host", "pci_bus_id")

#: Target columns (never model inputs).
TARGETS: tuple[str, ...] = ("label", "days_to_failure")

_NUMERIC_BASE: tuple[str, ...] = (
    "slot", "age_days", "telemetry_days_7d",
    "temp_mean_1d", "temp_mean_7d", "temp_mean_30d", "temp_max_7d", "temp_slope_7d", "temp_slope_30d",
    "temp_vs_own_30d", "temp_vs_own_before", "temp_1d_vs_own_before", "temp_vs_model_7d",
    "temp_vs_host_1d", "temp_vs_host_7d", "samples_vs_own_1d",
    "power_mean_7d", "power_vs_model_7d", "util_mean_7d", "sm_clock_vs_model_7d",
    "fan_mean_7d", "fan_vs_model_7d",
    "throttle_thermal_7d", "throttle_hw_7d", "power_brake_7d",
    "ecc_corr_1d", "ecc_corr_7d", "ecc_corr_30d", "ecc_corr_trend", "ecc_corr_slope_7d", "ecc_corr_vs_own_before",
    "ecc_uncorr_7d", "ecc_uncorr_30d",
    "retired_pages", "retired_pages_delta_7d", "retired_pages_delta_30d",
    "remap_pending_7d", "remap_failed_30d", "remap_uncorr_30d",
    "pcie_width_deficit_7d", "pcie_width_deficit_30d", "pcie_narrow_days_7d", "pcie_narrow_days_30d",
    "pcie_replay_7d", "pcie_replay_30d",
    "xid_crit_1d", "xid_crit_7d", "xid_crit_30d", "xid_warn_7d", "xid_warn_30d",
    "xid_app_7d", "xid_all_30d", "days_since_crit_xid",
    "sxid_host_7d", "sxid_host_30d",
    "tickets_prior", "reseats_prior",
    "host_failures_30d", "host_xid_crit_7d_others", "host_temp_vs_model_7d",
)

#: Xid counts per evidence class (pipeline/declared/predict_evidence.yaml) today, in 7 and in 30 days.
CLASS_COUNTS: tuple[str, ...] = tuple(f"xc_{k}_{w}d" for k in XID_CLASSES for w in (1, 7, 30))

#: Numeric model inputs, in a fixed order.
NUMERIC: tuple[str, ...] = _NUMERIC_BASE + tuple(
    f"xid{c}_{w}d" for c in XID_CODES for w in (7, 30)
) + CLASS_COUNTS + ("lost_markers_7d", "lost_marker_days_1d", "lost_marker_days_7d", "pcie_narrow_days_1d",
                   "days_since_fix", "days_since_hw_evidence",
                   "tickets_opened_1d", "tickets_opened_7d", "tickets_opened_30d", "days_since_ticket_open")

#: The gpu_days column counting failing-GPU marker samples ([GPU is lost], [GPU requires reset],
#: [Unknown Error]); absent from warehouses built before the telemetry ingest counted them.
LOST_MARKER_COLUMN = "gpu_error_samples"

#: Every model input.
FEATURES: tuple[str, ...] = NUMERIC + CATEGORICAL


def _win(n: int) -> str:
    return f"(PARTITION BY serial ORDER BY day ROWS BETWEEN {n - 1} PRECEDING AND CURRENT ROW)"


def features_sql(cfg: Config, failures: str, lost_columns: tuple[str, ...] = (), *, start: date, end: date,
                 dialect: Dialect | None = None) -> str:
    """The feature query over the days ``start`` to ``end`` (inclusive).

    ``failures`` is a SQL relation with ``serial, failed_at`` (see
    :func:`pipeline.predict.labels.failure_events_sql`); ``lost_columns`` the ``gpu_days``
    columns counting failing-GPU marker samples (none: the count is 0). ``dialect``: the
    engine's (default DuckDB's); the rest of the query is SQL both engines read alike.
    """
    d = dialect or DuckDBDialect()
    w1, w7, w30 = _win(1), _win(7), _win(30)
    # The GPU's own normal: the 30 days before the last 7, so a slow precursor (ECC
    # climbing, a temperature creep over weeks) is not averaged into its own baseline.
    before = "(PARTITION BY serial ORDER BY day ROWS BETWEEN 36 PRECEDING AND 7 PRECEDING)"
    parts = literals(cfg.stats.failure_parts)
    actions = literals(cfg.stats.failure_actions)
    xid_day = ",\n      ".join(
        f"count(*) FILTER (WHERE xid = {c}) AS x{c}" for c in XID_CODES
    )
    xid_roll = ",\n    ".join(
        f"sum(coalesce(x{c}, 0)) OVER {w} AS xid{c}_{n}d"
        for c in XID_CODES for n, w in ((7, w7), (30, w30))
    )
    cls_day = ",\n      ".join(f"count(*) FILTER (WHERE cls = {literal(k)}) AS c_{k}" for k in XID_CLASSES)
    cls_roll = ",\n    ".join(
        f"CAST(sum(coalesce(c_{k}, 0)) OVER {w} AS DOUBLE) AS xc_{k}_{n}d"
        for k in XID_CLASSES for n, w in ((1, w1), (7, w7), (30, w30))
    )
    lost = " + ".join(f"coalesce({d.quote(c)}, 0)" for c in lost_columns) or "0"
    # Counts over a window as sums of 0/1: Spark has no FILTER on window aggregates.
    hd = "(PARTITION BY host, day)"  # inline: Spark misreads a named window followed by an operator
    narrow = "CASE WHEN pcie_min_1d < pcie_full THEN 1 ELSE 0 END"
    marked = "CASE WHEN lost_markers > 0 THEN 1 ELSE 0 END"
    hw_xid = " + ".join(f"coalesce(c_{k}, 0)" for k in HW_CLASSES)
    return f"""
WITH bounds AS (SELECT CAST({literal(start)} AS DATE) AS d0, CAST({literal(end)} AS DATE) AS d1,
                       CAST({int(cfg.predict.horizon_days)} AS INTEGER) AS h),
fails AS (
  SELECT serial, CAST(failed_at AS DATE) AS fday FROM ({failures}) WHERE serial IS NOT NULL
),
first_fail AS (SELECT serial, min(fday) AS fday FROM fails GROUP BY serial),
inv AS (
  SELECT serial, model, vendor, host, slot, site, batch, inst, rem, first_fday FROM (
    SELECT i.serial, i.model, i.vendor, i.host, i.slot, i.site, i.batch,
      CAST(i.installed_at AS DATE) AS inst, CAST(i.removed_at AS DATE) AS rem, f.fday AS first_fday,
      row_number() OVER (PARTITION BY i.serial ORDER BY i.installed_at DESC NULLS LAST) AS latest
    FROM inventory i LEFT JOIN first_fail f ON f.serial = i.serial
  ) WHERE latest = 1
),
grid AS (
  SELECT inv.*, grid_day AS day
  FROM inv CROSS JOIN bounds
  {d.explode_days("greatest(coalesce(inv.inst, bounds.d0), bounds.d0)",
                  "least(coalesce(inv.rem - 1, bounds.d1), coalesce(inv.first_fday - 1, bounds.d1), bounds.d1)",
                  "grid_day")}
),
tele AS (
  SELECT serial AS t_serial, day AS t_day,
    avg(temp_mean) AS temp_mean, max(temp_max) AS temp_max, avg(power_mean) AS power_mean,
    avg(util_mean) AS util_mean, avg(sm_clock_mean) AS sm_clock, avg(fan_mean) AS fan_mean,
    avg(throttle_thermal_share) AS thr_thermal, avg(throttle_hw_slowdown_share) AS thr_hw,
    avg(throttle_power_brake_share) AS thr_brake,
    sum(ecc_corrected_delta) AS ecc_c, sum(ecc_uncorrected_delta) AS ecc_u,
    max(retired_pages_max) AS retired, max(remapped_rows_pending_max) AS remap_p,
    max(remapped_rows_failed_max) AS remap_f, max(remapped_rows_uncorrectable_max) AS remap_u,
    min(pcie_width_min) AS pcie_min, max(pcie_width_max_reported) AS pcie_max, sum(pcie_replay_delta) AS pcie_replay,
    max_by(pci_bus_id, samples) AS pci_bus_id, sum(samples) AS samples, sum({lost}) AS lost_markers
  FROM gpu_days WHERE serial IS NOT NULL GROUP BY serial, day
),
xd AS (
  SELECT serial AS x_serial, CAST(ts AS DATE) AS x_day,
      count(*) FILTER (WHERE severity = 'critical') AS crit,
      count(*) FILTER (WHERE severity = 'warn') AS warn,
      count(*) FILTER (WHERE severity = 'app') AS app,
      count(*) AS n,
      {xid_day},
      {cls_day}
  FROM (SELECT e.*, coalesce(m.cls, 'other') AS cls
        FROM xid_events e LEFT JOIN ({xid_class_values()}) m ON m.kind = e.kind AND e.xid BETWEEN m.lo AND m.hi)
  WHERE serial IS NOT NULL AND ts IS NOT NULL AND kind = 'Xid'
  GROUP BY ALL
),
hx AS (
  SELECT host, CAST(ts AS DATE) AS day,
    count(*) FILTER (WHERE kind = 'SXid') AS sxid,
    count(*) FILTER (WHERE kind = 'Xid' AND severity = 'critical') AS crit
  FROM xid_events WHERE ts IS NOT NULL GROUP BY ALL
),
tk AS (
  -- Tickets on the GPU closed without replacing it (a reseat, a reset, a riser or cable
  -- swap, no fault found), dated by their close: the day the outcome is known. Counted from
  -- the open, a ticket would be known early to be no replacement and to be a reseat, and an
  -- open ticket would mark the day as no failure (a replacement's ticket opens the failure day,
  -- which is no scored day), so the walk-forward would score what a live night cannot know.
  SELECT serial, CAST(closed_at AS DATE) AS day, count(*) AS n,
    count(*) FILTER (WHERE action_code = 'RESEAT') AS reseats
  FROM tickets
  WHERE serial IS NOT NULL AND closed_at IS NOT NULL
    AND NOT (coalesce(part_code IN ({parts}), false) AND coalesce(action_code IN ({actions}), false))
  GROUP BY ALL
),
op AS (
  -- Every ticket on the GPU dated by its open, whatever its outcome and whether it has closed:
  -- on the night it opens, someone has reported this GPU and nothing more is known. No close
  -- type, no action, no part: a feature of day d must not depend on how a later close ends.
  -- A replacement's ticket opens on its failure day (the failure is dated by that open), which
  -- is past the GPU's last scored day, so a failure's own ticket is never seen here.
  SELECT serial, CAST(opened_at AS DATE) AS day, count(*) AS n
  FROM tickets WHERE serial IS NOT NULL AND opened_at IS NOT NULL
  GROUP BY ALL
),
hf AS (
  SELECT inv.host, f.fday AS day, count(*) AS n
  FROM fails f JOIN inv USING (serial) GROUP BY ALL
),
base AS (
  SELECT g.serial, g.day, g.host, g.model, g.vendor, g.site, g.batch, g.slot, g.inst, g.first_fday,
    t.*, x.*,
    hx.sxid AS host_sxid, hx.crit AS host_crit, tk.n AS tickets, tk.reseats AS reseats, op.n AS opened,
    hf.n AS host_fails,
    {d.day_diff("DATE '1970-01-01'", "g.day")} AS dn
  FROM grid g
  LEFT JOIN tele t ON t.t_serial = g.serial AND t.t_day = g.day
  LEFT JOIN xd x ON x.x_serial = g.serial AND x.x_day = g.day
  LEFT JOIN hx ON hx.host = g.host AND hx.day = g.day
  LEFT JOIN tk ON tk.serial = g.serial AND tk.day = g.day
  LEFT JOIN op ON op.serial = g.serial AND op.day = g.day
  LEFT JOIN hf ON hf.host = g.host AND hf.day = g.day
),
roll AS (
  SELECT serial, day, host, model, vendor, site, batch, first_fday,
    {d.last_non_null("pci_bus_id")} OVER (PARTITION BY serial ORDER BY day ROWS UNBOUNDED PRECEDING) AS pci_bus_id,
    CAST(slot AS DOUBLE) AS slot,
    CAST({d.day_diff("inst", "day")} AS DOUBLE) AS age_days,
    CAST(count(temp_mean) OVER {w7} AS DOUBLE) AS telemetry_days_7d,
    avg(temp_mean) OVER {w1} AS temp_mean_1d,
    avg(temp_mean) OVER {w7} AS temp_mean_7d,
    avg(temp_mean) OVER {w30} AS temp_mean_30d,
    max(temp_max) OVER {w7} AS temp_max_7d,
    {d.regr_slope("temp_mean", "dn", w7)} AS temp_slope_7d,
    {d.regr_slope("temp_mean", "dn", w30)} AS temp_slope_30d,
    avg(temp_mean) OVER {before} AS temp_mean_before,
    coalesce(samples, 0) / nullif(avg(samples) OVER {before}, 0) AS samples_vs_own_1d,
    avg(power_mean) OVER {w7} AS power_mean_7d,
    avg(util_mean) OVER {w7} AS util_mean_7d,
    avg(sm_clock) OVER {w7} AS sm_clock_7d,
    avg(fan_mean) OVER {w7} AS fan_mean_7d,
    avg(thr_thermal) OVER {w7} AS throttle_thermal_7d,
    avg(thr_hw) OVER {w7} AS throttle_hw_7d,
    avg(thr_brake) OVER {w7} AS power_brake_7d,
    sum(coalesce(ecc_c, 0)) OVER {w1} AS ecc_corr_1d,
    sum(coalesce(ecc_c, 0)) OVER {w7} AS ecc_corr_7d,
    sum(coalesce(ecc_c, 0)) OVER {w30} AS ecc_corr_30d,
    {d.regr_slope("coalesce(ecc_c, 0)", "dn", w7)} AS ecc_corr_slope_7d,
    sum(coalesce(ecc_c, 0)) OVER {before} AS ecc_corr_before,
    sum(coalesce(ecc_u, 0)) OVER {w7} AS ecc_uncorr_7d,
    sum(coalesce(ecc_u, 0)) OVER {w30} AS ecc_uncorr_30d,
    max(retired) OVER (PARTITION BY serial ORDER BY day ROWS UNBOUNDED PRECEDING) AS retired_pages,
    max(retired) OVER (PARTITION BY serial ORDER BY day ROWS BETWEEN UNBOUNDED PRECEDING AND 7 PRECEDING) AS retired_before_7d,
    max(retired) OVER (PARTITION BY serial ORDER BY day ROWS BETWEEN UNBOUNDED PRECEDING AND 30 PRECEDING) AS retired_before_30d,
    max(remap_p) OVER {w7} AS remap_pending_7d,
    max(remap_f) OVER {w30} AS remap_failed_30d,
    max(remap_u) OVER {w30} AS remap_uncorr_30d,
    -- The link's full width: as reported, else the widest this GPU has run at (many
    -- queries leave out pcie.link.width.max, and a narrowed link is a precursor).
    max(coalesce(pcie_max, pcie_min)) OVER (PARTITION BY serial ORDER BY day ROWS UNBOUNDED PRECEDING) AS pcie_full,
    pcie_min AS pcie_min_1d,
    min(pcie_min) OVER {w7} AS pcie_min_7d,
    min(pcie_min) OVER {w30} AS pcie_min_30d,
    sum(coalesce(pcie_replay, 0)) OVER {w7} AS pcie_replay_7d,
    sum(coalesce(pcie_replay, 0)) OVER {w30} AS pcie_replay_30d,
    sum(coalesce(crit, 0)) OVER {w1} AS xid_crit_1d,
    sum(coalesce(crit, 0)) OVER {w7} AS xid_crit_7d,
    sum(coalesce(crit, 0)) OVER {w30} AS xid_crit_30d,
    sum(coalesce(warn, 0)) OVER {w7} AS xid_warn_7d,
    sum(coalesce(warn, 0)) OVER {w30} AS xid_warn_30d,
    sum(coalesce(app, 0)) OVER {w7} AS xid_app_7d,
    sum(coalesce(n, 0)) OVER {w30} AS xid_all_30d,
    max(CASE WHEN crit > 0 THEN day END) OVER (PARTITION BY serial ORDER BY day ROWS UNBOUNDED PRECEDING) AS last_crit_day,
    sum(coalesce(host_sxid, 0)) OVER {w7} AS sxid_host_7d,
    sum(coalesce(host_sxid, 0)) OVER {w30} AS sxid_host_30d,
    sum(coalesce(host_crit, 0)) OVER {w7} AS host_crit_7d,
    sum(coalesce(tickets, 0)) OVER (PARTITION BY serial ORDER BY day ROWS UNBOUNDED PRECEDING) AS tickets_prior,
    sum(coalesce(reseats, 0)) OVER (PARTITION BY serial ORDER BY day ROWS UNBOUNDED PRECEDING) AS reseats_prior,
    max(CASE WHEN tickets > 0 THEN day END) OVER (PARTITION BY serial ORDER BY day ROWS UNBOUNDED PRECEDING) AS last_ticket_day,
    CAST(sum(coalesce(opened, 0)) OVER {w1} AS DOUBLE) AS tickets_opened_1d,
    CAST(sum(coalesce(opened, 0)) OVER {w7} AS DOUBLE) AS tickets_opened_7d,
    CAST(sum(coalesce(opened, 0)) OVER {w30} AS DOUBLE) AS tickets_opened_30d,
    max(CASE WHEN opened > 0 THEN day END) OVER (PARTITION BY serial ORDER BY day ROWS UNBOUNDED PRECEDING) AS last_open_day,
    -- Hardware evidence a fix answers: an Xid of a hardware class or a failing-GPU marker
    -- (a narrowed link is added in the next step, where the link's full width is known).
    CASE WHEN {hw_xid} > 0 OR coalesce(lost_markers, 0) > 0 THEN 1 ELSE 0 END AS hw_today,
    sum(coalesce(host_fails, 0)) OVER {w30} AS host_failures_30d,
    CAST(sum(coalesce(lost_markers, 0)) OVER {w7} AS DOUBLE) AS lost_markers_7d,
    -- Days, not samples: a logger sampling every 10 s writes 360 marked samples for an
    -- hour a logger sampling hourly marks once.
    CAST(sum({marked}) OVER {w1} AS DOUBLE) AS lost_marker_days_1d,
    CAST(sum({marked}) OVER {w7} AS DOUBLE) AS lost_marker_days_7d,
    {xid_roll},
    {cls_roll}
  FROM base
),
fleet AS (
  SELECT *,
    -- Days on a narrowed link: a riser or a transient narrows it for a day or two, a
    -- failing GPU's link stays narrow until it is swapped.
    -- Narrow today: a link that went back to full width was a transient, one still narrow is not.
    sum({narrow}) OVER {w1} AS pcie_narrow_days_1d,
    sum({narrow}) OVER {w7} AS pcie_narrow_days_7d,
    sum({narrow}) OVER {w30} AS pcie_narrow_days_30d,
    max(CASE WHEN hw_today > 0 OR {narrow} > 0 THEN day END)
      OVER (PARTITION BY serial ORDER BY day ROWS UNBOUNDED PRECEDING) AS last_hw_day,
    -- Against the other GPUs of its host the same day: a fan, a dirty filter or a hot
    -- aisle heats the whole host, a failing GPU only itself.
    temp_mean_1d - (sum(temp_mean_1d) OVER {hd} - temp_mean_1d) / nullif(count(temp_mean_1d) OVER {hd} - 1, 0) AS temp_vs_host_1d,
    temp_mean_7d - (sum(temp_mean_7d) OVER {hd} - temp_mean_7d) / nullif(count(temp_mean_7d) OVER {hd} - 1, 0) AS temp_vs_host_7d,
    temp_mean_7d - {d.quantile("temp_mean_7d", 0.5)} OVER (PARTITION BY model, day) AS temp_vs_model_7d,
    power_mean_7d - {d.quantile("power_mean_7d", 0.5)} OVER (PARTITION BY model, day) AS power_vs_model_7d,
    sm_clock_7d - {d.quantile("sm_clock_7d", 0.5)} OVER (PARTITION BY model, day) AS sm_clock_vs_model_7d,
    fan_mean_7d - {d.quantile("fan_mean_7d", 0.5)} OVER (PARTITION BY model, day) AS fan_vs_model_7d
  FROM roll
)
SELECT serial, day, host, pci_bus_id, model, vendor, site, batch,
  slot, age_days, telemetry_days_7d,
  temp_mean_1d, temp_mean_7d, temp_mean_30d, temp_max_7d, temp_slope_7d, temp_slope_30d,
  temp_mean_7d - temp_mean_30d AS temp_vs_own_30d, temp_mean_7d - temp_mean_before AS temp_vs_own_before,
  temp_mean_1d - temp_mean_before AS temp_1d_vs_own_before, temp_vs_model_7d,
  temp_vs_host_1d, temp_vs_host_7d, samples_vs_own_1d,
  power_mean_7d, power_vs_model_7d, util_mean_7d, sm_clock_vs_model_7d,
  fan_mean_7d, fan_vs_model_7d,
  throttle_thermal_7d, throttle_hw_7d, power_brake_7d,
  ecc_corr_1d, ecc_corr_7d, ecc_corr_30d,
  ecc_corr_7d / 7e0 - ecc_corr_30d / 30e0 AS ecc_corr_trend, ecc_corr_slope_7d,
  ln(1 + greatest(ecc_corr_7d, 0) / 7e0) - ln(1 + greatest(coalesce(ecc_corr_before, 0), 0) / 30e0) AS ecc_corr_vs_own_before,
  ecc_uncorr_7d, ecc_uncorr_30d,
  retired_pages, retired_pages - coalesce(retired_before_7d, 0) AS retired_pages_delta_7d,
  retired_pages - coalesce(retired_before_30d, 0) AS retired_pages_delta_30d,
  remap_pending_7d, remap_failed_30d, remap_uncorr_30d,
  pcie_full - pcie_min_7d AS pcie_width_deficit_7d, pcie_full - pcie_min_30d AS pcie_width_deficit_30d,
  CAST(pcie_narrow_days_7d AS DOUBLE) AS pcie_narrow_days_7d, CAST(pcie_narrow_days_30d AS DOUBLE) AS pcie_narrow_days_30d,
  pcie_replay_7d, pcie_replay_30d,
  xid_crit_1d, xid_crit_7d, xid_crit_30d, xid_warn_7d, xid_warn_30d, xid_app_7d, xid_all_30d,
  CAST(coalesce({d.day_diff("last_crit_day", "day")}, 999) AS DOUBLE) AS days_since_crit_xid,
  sxid_host_7d, sxid_host_30d,
  tickets_prior, reseats_prior,
  -- A fix is a ticket closed without a replacement, the tickets counted above.
  CAST(coalesce({d.day_diff("last_ticket_day", "day")}, 999) AS DOUBLE) AS days_since_fix,
  CAST(coalesce({d.day_diff("last_hw_day", "day")}, 999) AS DOUBLE) AS days_since_hw_evidence,
  host_failures_30d,
  host_crit_7d - xid_crit_7d AS host_xid_crit_7d_others,
  avg(temp_vs_model_7d) OVER (PARTITION BY host, day) AS host_temp_vs_model_7d,
  {", ".join(f"xid{c}_{w}d" for c in XID_CODES for w in (7, 30))},
  {", ".join(CLASS_COUNTS)}, lost_markers_7d, lost_marker_days_1d, lost_marker_days_7d,
  CAST(pcie_narrow_days_1d AS DOUBLE) AS pcie_narrow_days_1d,
  tickets_opened_1d, tickets_opened_7d, tickets_opened_30d,
  CAST(coalesce({d.day_diff("last_open_day", "day")}, 999) AS DOUBLE) AS days_since_ticket_open,
  CASE
    WHEN first_fday IS NOT NULL AND {d.day_diff("day", "first_fday")} <= (SELECT h FROM bounds) THEN true
    WHEN day + (SELECT h FROM bounds) > (SELECT d1 FROM bounds) THEN NULL
    ELSE false
  END AS label,
  CASE WHEN first_fday IS NOT NULL THEN {d.day_diff("day", "first_fday")} END AS days_to_failure
FROM fleet
"""


def data_range(wh: Warehouse, engine: Engine | None = None) -> tuple[date, date] | None:
    """First and last UTC day of telemetry or Xid data in the warehouse (None when empty).

    Days no clock could have written (before 2000, after tomorrow: a year-less syslog line
    given the wrong year) are left out, so one such event cannot move the ranking day.
    ``engine``: where ``gpu_days`` and ``xid_events`` are read (default: the warehouse's).
    """
    latest = datetime.now(UTC).date() + timedelta(days=1)
    lo, hi = literal(PLAUSIBLE_FROM.date()), literal(latest)
    row = (engine or wh.engine).rows(
        f"""SELECT min(d0), max(d1) FROM (
             SELECT min(day) AS d0, max(day) AS d1 FROM gpu_days WHERE day BETWEEN {lo} AND {hi}
             UNION ALL SELECT min(CAST(ts AS DATE)), max(CAST(ts AS DATE)) FROM xid_events
               WHERE CAST(ts AS DATE) BETWEEN {lo} AND {hi})""",
        step="predict: data range",
    )[0]
    return None if row[0] is None else (row[0], row[1])


def lost_marker_columns(wh: Warehouse, engine: Engine | None = None) -> tuple[str, ...]:
    """The ``gpu_days`` column that counts failing-GPU marker samples, where it exists."""
    have = (engine or wh.engine).pl("SELECT * FROM gpu_days LIMIT 0", step="predict: gpu_days columns").columns
    return tuple(c for c in have if c == LOST_MARKER_COLUMN)


def build_features(wh: Warehouse, cfg: Config, *, start: date | None = None, end: date | None = None,
                   engine: Engine | None = None) -> int:
    """Recompute the ``features`` table from the warehouse; returns its row count.

    ``start``/``end`` bound the day grid (default: the data's range). Recomputing the whole
    table is cheap (one scan per input) and keeps every row consistent with late data.
    ``engine``: the engine the query runs on, seeing :data:`INPUTS` (default: the
    warehouse's DuckDB); on another engine the rows are written back into the warehouse.
    """
    engine = engine or wh.engine
    rng = data_range(wh, engine)
    if rng is None:
        with wh.transaction():
            wh.clear("features")
        return 0
    start, end = start or rng[0], end or rng[1]
    sql = features_sql(cfg, failure_events_sql(wh, cfg), lost_marker_columns(wh, engine), start=start, end=end,
                       dialect=engine.dialect)
    names = wh.schemas["features"].names
    if engine is wh.engine:
        cols = ", ".join(f'"{c}"' for c in names)
        with wh.transaction():
            wh.clear("features")
            wh.engine.execute(f"INSERT INTO features ({cols}) SELECT {cols} FROM ({sql})", step="predict: features")
    else:
        cols = ", ".join(engine.dialect.quote(c) for c in names)
        rows = engine.arrow(f"SELECT {cols} FROM ({sql}) AS features", step="predict: features")
        with wh.transaction():
            wh.replace("features", rows)
    n = wh.engine.scalar("SELECT count(*) FROM features", step="predict: count features")
    log.info("features: %d GPU-days from %s to %s", n, start, end)
    return n
