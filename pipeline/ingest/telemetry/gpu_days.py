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
    """
    return f"""
WITH inv AS (
  SELECT {host_key_sql('host')} AS host_k, slot, serial, installed_at, removed_at FROM inventory
),
s AS (SELECT *, {host_key_sql('host')} AS host_k FROM smi_hourly),
-- the inventory serial of rows without one: the GPU in the host's slot at the row's time
-- (a join on host and slot, not a subquery per row: Spark would pair every distinct time
-- with every inventory row)
slot_at AS (
  SELECT t.host_k, t.gpu_index, t.ts_first, t.ts_last, min(i.serial) AS serial
  FROM (SELECT DISTINCT host_k, gpu_index, ts_first, ts_last FROM s WHERE serial IS NULL) AS t
  JOIN inv i ON i.host_k = t.host_k AND i.slot = t.gpu_index
   AND (i.installed_at IS NULL OR i.installed_at <= t.ts_last)
   AND (i.removed_at IS NULL OR i.removed_at > t.ts_first)
  GROUP BY t.host_k, t.gpu_index, t.ts_first, t.ts_last
),
h AS (
  SELECT s.*, coalesce(s.serial, a.serial) AS serial_linked
  FROM s LEFT JOIN slot_at a ON a.host_k = s.host_k AND a.gpu_index = s.gpu_index
   AND a.ts_first IS NOT DISTINCT FROM s.ts_first AND a.ts_last IS NOT DISTINCT FROM s.ts_last
),
k AS (
  SELECT *, coalesce(serial_linked, 'uuid:' || uuid, 'bus:' || host || '/' || coalesce(pci_bus_id, 'index' || gpu_index)) AS gpu_key
  FROM h
),
steps AS (
  SELECT *,
    lag(ecc_corrected_last) OVER w AS prev_c, lag(ecc_uncorrected_last) OVER w AS prev_u,
    lag(pcie_replay_last) OVER w AS prev_r, lag(ts_last) OVER w AS prev_ts
  FROM k WINDOW w AS (PARTITION BY gpu_key ORDER BY ts_first, ts_last)
),
d AS (
  SELECT *,
    ecc_corrected_delta + CASE WHEN prev_c IS NULL OR ecc_corrected_first IS NULL THEN 0
      WHEN ecc_corrected_first >= prev_c THEN ecc_corrected_first - prev_c ELSE ecc_corrected_first END AS c_delta,
    ecc_uncorrected_delta + CASE WHEN prev_u IS NULL OR ecc_uncorrected_first IS NULL THEN 0
      WHEN ecc_uncorrected_first >= prev_u THEN ecc_uncorrected_first - prev_u ELSE ecc_uncorrected_first END AS u_delta,
    pcie_replay_delta + CASE WHEN prev_r IS NULL OR pcie_replay_first IS NULL THEN 0
      WHEN pcie_replay_first >= prev_r THEN pcie_replay_first - prev_r ELSE pcie_replay_first END AS r_delta,
    {d.seconds_between('ts_first', 'ts_last')} AS span_s,
    -- the GPU's usual time between samples, for logs sampled less than twice an hour (the
    -- gap before each hour's first sample; overlapping files give none)
    median(CASE WHEN ts_first > prev_ts THEN {d.seconds_between('prev_ts', 'ts_first')} END) OVER (PARTITION BY gpu_key) AS gpu_gap_s
  FROM steps
),
g AS (
  SELECT gpu_key, CAST(hour AS DATE) AS day,
    {d.arg_max('serial_linked', 'ts_last')} AS serial, {d.arg_max('uuid', 'ts_last')} AS uuid, {d.arg_max('host', 'ts_last')} AS host,
    {d.arg_max('pci_bus_id', 'ts_last')} AS pci_bus_id, {d.arg_max('gpu_index', 'ts_last')} AS gpu_index, {d.arg_max('name', 'ts_last')} AS name,
    sum(samples) AS samples, sum(span_s) AS span_s, count(*) AS nrows, max(gpu_gap_s) AS gpu_gap_s,
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
    sum(c_delta) AS ecc_corrected_delta, sum(u_delta) AS ecc_uncorrected_delta,
    max(retired_pages_max) AS retired_pages_max, max(remapped_rows_pending_max) AS remapped_rows_pending_max,
    max(remapped_rows_failed_max) AS remapped_rows_failed_max,
    max(remapped_rows_uncorrectable_max) AS remapped_rows_uncorrectable_max,
    min(pcie_width_min) AS pcie_width_min, max(pcie_width_max_reported) AS pcie_width_max_reported,
    sum(r_delta) AS pcie_replay_delta,
    sum(fan_sum) / nullif(sum(fan_n), 0) AS fan_mean, max(fan_max) AS fan_max,
    sum(gpu_error_n) AS gpu_error_samples
  FROM d GROUP BY ALL
)
SELECT gpu_key, serial, uuid, host, pci_bus_id, gpu_index, name, day, samples,
  -- samples x interval over the day: the interval from within the hours where they hold
  -- several samples (1 s logs: 3,600), else the GPU's usual gap (hourly logs: one an hour;
  -- a day's pair of samples a second apart would make the within-hour estimate tiny)
  CASE WHEN samples >= 2 * nrows THEN least(1.0, samples * (span_s / (samples - nrows)) / 86400.0)
       WHEN gpu_gap_s > 0 THEN least(1.0, samples * gpu_gap_s / 86400.0) END AS coverage,
  temp_min, temp_mean,
  -- p95 from the day's moments (normal approximation, capped by the max): exact
  -- quantiles would need every sample; hourly facts keep counts, sums and extremes.
  least(temp_max, temp_mean + 1.6449 * sqrt(greatest(temp_meansq - temp_mean * temp_mean, 0))) AS temp_p95,
  temp_max, mem_temp_max, util_mean, mem_used_mean, mem_used_max, power_mean, power_max, sm_clock_mean,
  throttle_thermal_share, throttle_power_share, throttle_hw_slowdown_share, throttle_power_brake_share,
  ecc_corrected_delta, ecc_uncorrected_delta, retired_pages_max, remapped_rows_pending_max,
  remapped_rows_failed_max, remapped_rows_uncorrectable_max, pcie_width_min, pcie_width_max_reported,
  pcie_replay_delta, fan_mean, fan_max, gpu_error_samples
FROM g
"""


def derive(ctx) -> int:
    """After the smi stage (``pipeline.run`` calls it): :func:`derive_gpu_days` on the
    configured engine (:meth:`pipeline.run.RunContext.engine_for`)."""
    return derive_gpu_days(ctx.wh, ctx.engine_for(INPUTS))


def derive_gpu_days(wh, engine=None) -> int:
    """Rebuild ``gpu_days`` from every row of ``smi_hourly``, its SQL run on ``engine``
    (default: the warehouse's); returns its row count."""
    engine = engine or wh.engine
    return wh.rebuild("gpu_days", gpu_days_sql(engine.dialect), engine=engine, step="gpu_days")
