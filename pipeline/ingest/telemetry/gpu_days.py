"""GPU-day facts derived from hourly facts: the ``gpu_days`` table.

Reads: every row of ``smi_hourly`` and the ``inventory`` (serials for GPUs whose telemetry
lacks one). Writes: ``gpu_days``, rebuilt whole by :func:`derive_gpu_days`.

Why apart from the smi stage: ingest loads files, derivation combines all of them (a day
spans files, counters step across files). The nightly job (:mod:`pipeline.run`) runs the
derivation after the stage, so loading stays per file and idempotent.
"""

from __future__ import annotations

from pipeline.engine.dialect import Dialect
from pipeline.vocab.hosts import host_key_sql

#: The tables :func:`gpu_days_sql` reads (what the Spark engine is handed).
INPUTS = ("inventory", "smi_hourly")


def gpu_days_sql(d: Dialect) -> str:
    """The SELECT giving ``gpu_days``' rows, in the SQL of dialect ``d`` (DuckDB or Spark).

    Where several rows qualify (two inventory rows for a slot at a time), the least serial
    is taken, so that both engines pick the same one.

    Two passes over ``smi_hourly``, each reading only its columns: the day's aggregates
    (one hash aggregate over the wide rows), and the counter steps between a GPU's
    consecutive hours with the gap before each hour (a ``lag`` window over a few narrow
    columns; a window keeps every column it is handed, so the metrics stay out of it). The
    GPU's usual gap is a grouped median joined to its days, not a second window.
    """
    steps_c, steps_u, steps_r = (
        f"CASE WHEN {n}_delta IS NOT NULL THEN CASE WHEN {p} IS NULL OR {n}_first IS NULL THEN 0 "
        f"WHEN {n}_first >= {p} THEN {n}_first - {p} ELSE {n}_first END END"
        for n, p in (("ecc_corrected", "prev_c"), ("ecc_uncorrected", "prev_u"), ("pcie_replay", "prev_r")))
    return f"""
WITH inv AS (
  SELECT {host_key_sql('host')} AS host_k, slot, serial, installed_at, removed_at FROM inventory
),
-- the inventory serial of rows without one: the GPU in the host's slot at the row's time
-- (a join on host and slot, not a subquery per row: Spark would pair every distinct time
-- with every inventory row)
slot_at AS (
  SELECT t.host_k, t.gpu_index, t.ts_first, t.ts_last, min(i.serial) AS serial
  FROM (SELECT DISTINCT {host_key_sql('host')} AS host_k, gpu_index, ts_first, ts_last FROM smi_hourly
        WHERE serial IS NULL) AS t
  JOIN inv i ON i.host_k = t.host_k AND i.slot = t.gpu_index
   AND (i.installed_at IS NULL OR i.installed_at <= t.ts_last)
   AND (i.removed_at IS NULL OR i.removed_at > t.ts_first)
  GROUP BY t.host_k, t.gpu_index, t.ts_first, t.ts_last
),
g AS (
  SELECT gpu_key, CAST(hour AS DATE) AS day,
    {d.arg_max('serial_linked', 'ts_last')} AS serial, {d.arg_max('uuid', 'ts_last')} AS uuid, {d.arg_max('host', 'ts_last')} AS host,
    {d.arg_max('pci_bus_id', 'ts_last')} AS pci_bus_id, {d.arg_max('gpu_index', 'ts_last')} AS gpu_index, {d.arg_max('name', 'ts_last')} AS name,
    sum(samples) AS samples, sum({d.seconds_between('ts_first', 'ts_last')}) AS span_s, count(*) AS nrows,
    min(temp_min) AS temp_min, sum(temp_sum) / nullif(sum(temp_n), 0) AS temp_mean,
    sum(temp_sumsq) / nullif(sum(temp_n), 0) AS temp_meansq, max(temp_max) AS temp_max,
    max(mem_temp_max) AS mem_temp_max,
    sum(util_sum) / nullif(sum(util_n), 0) AS util_mean,
    sum(mem_used_sum) / nullif(sum(mem_used_n), 0) AS mem_used_mean, max(mem_used_max) AS mem_used_max,
    sum(power_sum) / nullif(sum(power_n), 0) AS power_mean, max(power_max) AS power_max,
    sum(sm_clock_sum) / nullif(sum(sm_clock_n), 0) AS sm_clock_mean,
    sum(throttle_thermal) / nullif(sum(throttle_n), 0) AS throttle_thermal_share,
    sum(throttle_power) / nullif(sum(throttle_n), 0) AS throttle_power_share,
    sum(throttle_hw_slowdown) / nullif(sum(throttle_n), 0) AS throttle_hw_slowdown_share,
    sum(throttle_power_brake) / nullif(sum(throttle_n), 0) AS throttle_power_brake_share,
    sum(ecc_corrected_delta) AS c_within, sum(ecc_uncorrected_delta) AS u_within,
    max(retired_pages_max) AS retired_pages_max, max(remapped_rows_pending_max) AS remapped_rows_pending_max,
    max(remapped_rows_failed_max) AS remapped_rows_failed_max,
    max(remapped_rows_uncorrectable_max) AS remapped_rows_uncorrectable_max,
    min(pcie_width_min) AS pcie_width_min, max(pcie_width_max_reported) AS pcie_width_max_reported,
    sum(pcie_replay_delta) AS r_within,
    sum(fan_sum) / nullif(sum(fan_n), 0) AS fan_mean, max(fan_max) AS fan_max,
    sum(gpu_error_n) AS gpu_error_samples
  FROM {_keyed()} AS k GROUP BY gpu_key, CAST(hour AS DATE)
),
-- a counter's step from the GPU's previous hour (a reset: the new value) is added to the
-- hour's own delta, where the hour has one; the gap before each hour's first sample gives
-- the GPU's usual time between samples (logs sampled less than twice an hour; overlapping
-- files give none). Summed per day (st) and its median taken per GPU (gap).
steps AS (
  SELECT gpu_key, CAST(hour AS DATE) AS day, {steps_c} AS c_step, {steps_u} AS u_step, {steps_r} AS r_step,
    CASE WHEN ts_first > prev_ts THEN {d.seconds_between('prev_ts', 'ts_first')} END AS gap_s
  FROM (
    SELECT gpu_key, hour, ts_first, ecc_corrected_delta, ecc_corrected_first, ecc_uncorrected_delta,
      ecc_uncorrected_first, pcie_replay_delta, pcie_replay_first,
      lag(ecc_corrected_last) OVER w AS prev_c, lag(ecc_uncorrected_last) OVER w AS prev_u,
      lag(pcie_replay_last) OVER w AS prev_r, lag(ts_last) OVER w AS prev_ts
    FROM {_keyed()} AS k WINDOW w AS (PARTITION BY gpu_key ORDER BY ts_first, ts_last)
  ) AS lagged
),
-- two aggregates of the steps, not GROUPING SETS: there the median was also computed per
-- day (a holistic state in each of a year's ~700k GPU-days spilled tens of GB)
st AS (
  SELECT gpu_key, day, sum(c_step) AS c_step, sum(u_step) AS u_step, sum(r_step) AS r_step
  FROM steps GROUP BY gpu_key, day
),
gap AS (
  SELECT gpu_key, {d.quantile('gap_s', 0.5)} AS gpu_gap_s FROM steps GROUP BY gpu_key
)
SELECT g.gpu_key, serial, uuid, host, pci_bus_id, gpu_index, name, g.day, samples,
  -- samples x interval over the day: the interval from within the hours where they hold
  -- several samples (1 s logs: 3,600), else the GPU's usual gap (hourly logs: one an hour;
  -- a day's pair of samples a second apart would make the within-hour estimate tiny)
  CASE WHEN samples >= 2 * nrows THEN least(1.0, samples * (span_s / (samples - nrows)) / 86400.0)
       WHEN gap.gpu_gap_s > 0 THEN least(1.0, samples * gap.gpu_gap_s / 86400.0) END AS coverage,
  temp_min, temp_mean,
  -- p95 from the day's moments (normal approximation, capped by the max): exact
  -- quantiles would need every sample; hourly facts keep counts, sums and extremes.
  least(temp_max, temp_mean + 1.6449 * sqrt(greatest(temp_meansq - temp_mean * temp_mean, 0))) AS temp_p95,
  temp_max, mem_temp_max, util_mean, mem_used_mean, mem_used_max, power_mean, power_max, sm_clock_mean,
  throttle_thermal_share, throttle_power_share, throttle_hw_slowdown_share, throttle_power_brake_share,
  c_within + st.c_step AS ecc_corrected_delta, u_within + st.u_step AS ecc_uncorrected_delta,
  retired_pages_max, remapped_rows_pending_max,
  remapped_rows_failed_max, remapped_rows_uncorrectable_max, pcie_width_min, pcie_width_max_reported,
  r_within + st.r_step AS pcie_replay_delta, fan_mean, fan_max, gpu_error_samples
FROM g
JOIN st ON st.gpu_key IS NOT DISTINCT FROM g.gpu_key AND st.day = g.day
JOIN gap ON gap.gpu_key IS NOT DISTINCT FROM g.gpu_key
"""


def _keyed() -> str:
    """``smi_hourly``'s rows with ``serial_linked`` (the row's serial, else the inventory's:
    ``slot_at``) and ``gpu_key``; written out where used, so that each use reads only its
    columns (a CTE used twice is materialized whole)."""
    return f"""(
  SELECT h.*, coalesce(serial_linked, 'uuid:' || uuid, 'bus:' || host || '/' || coalesce(pci_bus_id, 'index' || gpu_index)) AS gpu_key
  FROM (
    SELECT s.*, coalesce(s.serial, a.serial) AS serial_linked
    FROM (SELECT *, CASE WHEN serial IS NULL THEN {host_key_sql('host')} END AS host_k FROM smi_hourly) AS s
    LEFT JOIN slot_at a ON a.host_k = s.host_k AND a.gpu_index = s.gpu_index
     AND a.ts_first IS NOT DISTINCT FROM s.ts_first AND a.ts_last IS NOT DISTINCT FROM s.ts_last
  ) AS h
)"""


def derive(ctx) -> int:
    """After the smi stage (``pipeline.run`` calls it): :func:`derive_gpu_days` on the
    configured engine (:meth:`pipeline.run.RunContext.engine_for`)."""
    return derive_gpu_days(ctx.wh, ctx.engine_for(INPUTS))


def derive_gpu_days(wh, engine=None) -> int:
    """Rebuild ``gpu_days`` from every row of ``smi_hourly``, its SQL run on ``engine``
    (default: the warehouse's); returns its row count."""
    engine = engine or wh.engine
    return wh.rebuild("gpu_days", gpu_days_sql(engine.dialect), engine=engine, step="gpu_days")
