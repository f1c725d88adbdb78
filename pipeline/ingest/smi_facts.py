"""Hourly facts from clean samples, and GPU-day facts from hourly facts (SQL steps).

Reads: a relation of raw text columns ``c0..cN`` (one file segment with known fields).
Writes: rows of ``smi_hourly`` (one per file, GPU and hour; partial aggregates that
combine exactly across files) and, from all of ``smi_hourly``, the ``gpu_days`` table.

Aggregates are kept as counts, sums and extremes so that an hour split over two files
(rotation) combines exactly. Volatile ECC and PCIe replay counters reset to 0 on reboot:
an hour keeps its first, last and largest value, a delta never goes negative, and the
step between consecutive hours (or files) is added when the later hour is combined.
"""

from __future__ import annotations

from pipeline.ingest.hosts import host_key_sql
from pipeline.ingest.smi_fields import Field, bad_sql, clean_sql

#: fact metric -> candidate columns (first present wins; canonical names, see smi_fields.ALIASES).
METRICS: dict[str, list[str]] = {
    "temp": ["temperature_gpu"],
    "mem_temp": ["temperature_memory"],
    "util": ["utilization_gpu"],
    "mem_used": ["memory_used"],
    "power": ["power_draw", "power_draw_average", "power_draw_instant"],
    "sm_clock": ["clocks_sm"],
    "fan": ["fan_speed"],
    "mask": ["clocks_event_reasons_active", "clocks_throttle_reasons_active"],
    "ecc_c": ["ecc_errors_corrected_volatile_total"],
    "ecc_u": ["ecc_errors_uncorrected_volatile_total"],
    "pcie_replay": ["pcie_replay_counter"],
    "retired_sbe": ["retired_pages_sbe"],
    "retired_dbe": ["retired_pages_dbe"],
    "rr_pending": ["remapped_rows_pending"],
    "rr_failed": ["remapped_rows_failure"],
    "rr_uncorr": ["remapped_rows_uncorrectable"],
    "pcie_width": ["pcie_link_width_current"],
    "pcie_width_max": ["pcie_link_width_max"],
}

# Throttle (clock event) reason bits, and the single-reason fields that stand in for the
# mask when it was not queried.
THERMAL_BITS, POWER_BITS, HW_SLOWDOWN_BITS, POWER_BRAKE_BITS = 0x20 | 0x40, 0x04, 0x08, 0x80
_REASON_FIELDS = {"sw_power_cap": 0x04, "hw_slowdown": 0x08, "sw_thermal_slowdown": 0x20,
                  "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80}

_ID_RAW = {"gpu_index": "index", "name": "name", "serial": "serial", "uuid": "uuid", "pci_bus_id": "pci.bus_id",
           "host": "hostname"}


#: Fields that tell one GPU of a host from another.
_GPU_IDS = ("index", "serial", "uuid", "pci.bus_id")

#: Lines closer than this to the line before belong to the same sampling round.
ROUND_GAP_MS = 500


def needs_round_index(fields: list[Field]) -> bool:
    """True when no field tells the GPUs apart (``--query-gpu=timestamp,name,utilization.gpu,
    memory.used,memory.total``): the index comes from the line's place in its round."""
    names = {f.name for f in fields}
    return "timestamp" in names and not names.intersection(_GPU_IDS)


def round_index_sql(fields: list[Field], src: str) -> str:
    """``src`` (with ``line_no``) and ``_round_idx``: the GPU index of each line, numbered
    from 0 within its sampling round.

    nvidia-smi prints a round's GPUs in index order, each line stamped when its GPU was
    queried (a few ms apart), so a round is a run of consecutive lines each less than
    :data:`ROUND_GAP_MS` after the line before; a later round starts at least the loop
    interval (``-l``, 1 s or more) after. Lines with an unreadable timestamp (quarantined)
    get no index. With whole-second timestamps a round that straddles a second boundary
    is split in two (its second part numbered from 0 again).
    """
    i = [f.name for f in fields].index("timestamp")
    ts = clean_sql(fields[i], f"c{i}")
    return f"""(
SELECT s.*, (row_number() OVER (PARTITION BY g.rnd ORDER BY s.line_no) - 1)::VARCHAR AS _round_idx
FROM {src} s LEFT JOIN (
  SELECT line_no, sum(new) OVER (ORDER BY line_no) AS rnd FROM (
    SELECT line_no, CASE WHEN lag(t) OVER (ORDER BY line_no) IS NULL OR t < lag(t) OVER (ORDER BY line_no)
      OR t - lag(t) OVER (ORDER BY line_no) >= INTERVAL {ROUND_GAP_MS} MILLISECOND THEN 1 ELSE 0 END AS new
    FROM (SELECT line_no, {ts} AS t FROM {src}) WHERE t IS NOT NULL
  )
) g USING (line_no)
)"""


def _strict(fields: list[Field]) -> list[int]:
    return [i for i, f in enumerate(fields) if f.kind in ("ts", "int", "num", "mask")]


def _used(fields: list[Field]) -> list[Field]:
    """The fields the facts read (identity and metrics); the others are not even cleaned."""
    wanted = {c for cands in METRICS.values() for c in cands} | set(_ID_RAW) | {"ts"}
    wanted |= {p + r for r in _REASON_FIELDS for p in ("clocks_event_reasons_", "clocks_throttle_reasons_")}
    return [f if f.column in wanted else Field(f.name, f.unit, ignored=True) for f in fields]


def cleaned_sql(fields: list[Field], src: str, extra: str = "") -> str:
    """``src`` with each checked field's clean value ``v<i>`` beside its raw text ``c<i>``."""
    cols = [f"c{i}" for i in range(len(fields))]
    cols += [f"{clean_sql(fields[i], f'c{i}')} AS v{i}" for i in _strict(fields)]
    return f"(SELECT {extra}{', '.join(cols)} FROM {src})"


def _value(fields: list[Field], i: int) -> str:
    return f"v{i}" if i in _strict(fields) else clean_sql(fields[i], f"c{i}")


def metric_exprs(fields: list[Field]) -> dict[str, str]:
    """SQL of each fact metric over :func:`cleaned_sql` (NULL when its field was not queried)."""
    by_col = {f.column: i for i, f in enumerate(fields)}
    out = {}
    for metric, cands in METRICS.items():
        hit = next((by_col[c] for c in cands if c in by_col), None)
        out[metric] = _value(fields, hit) if hit is not None else "NULL::DOUBLE"
    if out["mask"] == "NULL::DOUBLE":
        parts = []
        for reason, bit in _REASON_FIELDS.items():
            for prefix in ("clocks_event_reasons_", "clocks_throttle_reasons_"):
                if prefix + reason in by_col:
                    parts.append(f"coalesce({_value(fields, by_col[prefix + reason])}, 0)::BIGINT * {bit}")
                    break
        out["mask"] = "(" + " + ".join(parts) + ")" if parts else "NULL::BIGINT"
    return out


def bad_checks(fields: list[Field]) -> list[tuple[str, str]]:
    """(field name, SQL true when its value is unreadable) over :func:`cleaned_sql`."""
    return [(fields[i].name, bad_sql(fields[i], f"c{i}", f"v{i}")) for i in _strict(fields)]


def cleaned_cols(fields: list[Field]) -> str:
    return ", ".join([f"c{i}" for i in _strict(fields)] + [f"v{i}" for i in _strict(fields)]) or "NULL AS _none"


def hourly_sql(fields: list[Field], src: str, *, by_file: bool = False, header: list[list[str]] | None = None) -> str:
    """One pass over ``src``: partial hourly facts per raw GPU identity and local hour
    (and per ``filename`` with ``by_file``: ``src`` reads many files).

    ``header`` (per cell, the spellings of the header's field): lines repeating the header
    (a restarted logger appends it) are grouped apart, flagged ``_hdr``, instead of
    counting as bad.

    ``_bad`` counts the group's rows with an unreadable value in a field the facts use: the
    fast path gives up on a file where it is not 0 (the exact path quarantines those rows
    before aggregating). Fields the facts do not use are neither cleaned nor checked.
    """
    idx = {f.name: i for i, f in enumerate(fields)}
    ts = f"v{idx['timestamp']}" if "timestamp" in idx else "NULL::TIMESTAMP"
    # Without a field that tells GPUs apart, ``src`` must come from :func:`round_index_sql`.
    by_round = needs_round_index(fields)
    raw_ids = ", ".join(
        (f"c{idx[src_name]}" if src_name in idx else "_round_idx" if by_round and col == "gpu_index"
         else "NULL::VARCHAR") + f" AS r_{col}"
        for col, src_name in _ID_RAW.items()
    )
    m = metric_exprs(fields)
    inner = ", ".join(f"{expr} AS m_{name}" for name, expr in m.items())
    fields = _used(fields)
    bad = f"count(*) FILTER ({' OR '.join(b for _, b in bad_checks(fields))})" if bad_checks(fields) else "0"
    counters = []
    for short, name in (("ecc_c", "ecc_corrected"), ("ecc_u", "ecc_uncorrected"), ("pcie_replay", "pcie_replay")):
        v = f"m_{short}"
        counters.append(
            f"arg_min({v}, ts) FILTER ({v} IS NOT NULL) AS {name}_first, "
            f"arg_max({v}, ts) FILTER ({v} IS NOT NULL) AS {name}_last, max({v}) AS {name}_max"
        )
    file_col = "filename, " if by_file else ""
    outer, hdr = file_col, ""
    if header:
        same = " AND ".join(f"c{i} IN ({', '.join(_quote(h) for h in cells)})" for i, cells in enumerate(header))
        hdr = f"(CASE WHEN c0 = 'timestamp' THEN {same} ELSE false END) AS _hdr, "
        outer += "_hdr, "
    return f"""
SELECT {outer}r_gpu_index, r_name, r_serial, r_uuid, r_pci_bus_id, r_host, {bad} AS _bad,
  date_trunc('hour', ts) AS hour_local, count(*) AS samples, min(ts) AS ts_first, max(ts) AS ts_last,
  count(m_temp) AS temp_n, sum(m_temp) AS temp_sum, sum(m_temp * m_temp) AS temp_sumsq,
  min(m_temp) AS temp_min, max(m_temp) AS temp_max, max(m_mem_temp) AS mem_temp_max,
  count(m_util) AS util_n, sum(m_util) AS util_sum,
  count(m_mem_used) AS mem_used_n, sum(m_mem_used) AS mem_used_sum, max(m_mem_used) AS mem_used_max,
  count(m_power) AS power_n, sum(m_power) AS power_sum, max(m_power) AS power_max,
  count(m_sm_clock) AS sm_clock_n, sum(m_sm_clock) AS sm_clock_sum,
  count(m_fan) AS fan_n, sum(m_fan) AS fan_sum, max(m_fan) AS fan_max,
  count(m_mask) AS throttle_n,
  count(*) FILTER (m_mask & {THERMAL_BITS} <> 0) AS throttle_thermal,
  count(*) FILTER (m_mask & {POWER_BITS} <> 0) AS throttle_power,
  count(*) FILTER (m_mask & {HW_SLOWDOWN_BITS} <> 0) AS throttle_hw_slowdown,
  count(*) FILTER (m_mask & {POWER_BRAKE_BITS} <> 0) AS throttle_power_brake,
  {', '.join(counters)},
  max(coalesce(m_retired_sbe, 0) + coalesce(m_retired_dbe, 0))
    FILTER (m_retired_sbe IS NOT NULL OR m_retired_dbe IS NOT NULL) AS retired_pages_max,
  max(m_rr_pending) AS remapped_rows_pending_max, max(m_rr_failed) AS remapped_rows_failed_max,
  max(m_rr_uncorr) AS remapped_rows_uncorrectable_max,
  min(m_pcie_width) AS pcie_width_min, max(m_pcie_width_max) AS pcie_width_max_reported
FROM (
  SELECT {file_col}{hdr}{raw_ids}, {ts} AS ts, {inner}, {cleaned_cols(fields)}
  FROM {cleaned_sql(fields, src, extra=file_col + ("_round_idx, " if by_round else ""))}
)
GROUP BY ALL
"""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def reject_rows_sql(fields: list[Field], src: str, extra: str = "", *, facts_only: bool = False) -> str:
    """Rows of ``src`` (with ``line_no``, ``line``) whose values cannot be read, and why.

    ``facts_only``: check only the fields the hourly facts use (as :func:`hourly_sql` does).
    """
    fields = _used(fields) if facts_only else fields
    checks = bad_checks(fields)
    if not checks:
        return f"SELECT {extra}line_no, line, NULL AS bad_field FROM {src} WHERE false"
    whens = " ".join(f"WHEN {b} THEN '{name}'" for name, b in checks)
    return f"""
SELECT {extra}line_no, line, bad_field FROM (
  SELECT {extra}line_no, line, CASE {whens} END AS bad_field FROM {cleaned_sql(fields, src, extra + "line_no, line, ")}
) WHERE bad_field IS NOT NULL ORDER BY line_no
"""


def finish_hourly_sql(view: str) -> str:
    """Clean the raw identities of aggregated rows and compute within-hour counter deltas."""
    ids = {
        "gpu_index": clean_sql(Field("index"), "r_gpu_index"),
        "name": clean_sql(Field("name"), "r_name"),
        "serial": f"upper({clean_sql(Field('serial'), 'r_serial')})",
        "uuid": clean_sql(Field("uuid"), "r_uuid"),
        "pci_bus_id": clean_sql(Field("pci.bus_id"), "r_pci_bus_id"),
        "line_host": clean_sql(Field("hostname"), "r_host"),
    }
    deltas = ", ".join(
        f"CASE WHEN {n}_last >= {n}_first THEN {n}_last - {n}_first "
        f"ELSE {n}_max - {n}_first + {n}_last END AS {n}_delta"
        for n in ("ecc_corrected", "ecc_uncorrected", "pcie_replay")
    )
    keep = ", ".join(f"{e} AS {c}" for c, e in ids.items())
    return f"SELECT {keep}, * EXCLUDE (r_gpu_index, r_name, r_serial, r_uuid, r_pci_bus_id, r_host, _bad, " \
           f"ecc_corrected_max, ecc_uncorrected_max, pcie_replay_max), {deltas} FROM {view}"


GPU_DAYS_SQL = f"""
WITH inv AS (
  SELECT {host_key_sql('host')} AS host_k, slot, serial, installed_at, removed_at FROM inventory
),
h AS (
  SELECT s.*,
    coalesce(s.serial, (
      SELECT any_value(i.serial) FROM inv i
      WHERE i.host_k = {host_key_sql('s.host')} AND i.slot = s.gpu_index
        AND (i.installed_at IS NULL OR i.installed_at <= s.ts_last)
        AND (i.removed_at IS NULL OR i.removed_at > s.ts_first)
    )) AS serial_linked
  FROM smi_hourly s
),
k AS (
  SELECT *, coalesce(serial_linked, 'uuid:' || uuid, 'bus:' || host || '/' || coalesce(pci_bus_id, 'index' || gpu_index)) AS gpu_key
  FROM h
),
steps AS (
  SELECT *,
    lag(ecc_corrected_last) OVER w AS prev_c, lag(ecc_uncorrected_last) OVER w AS prev_u,
    lag(pcie_replay_last) OVER w AS prev_r
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
    epoch(ts_last - ts_first) AS span_s
  FROM steps
),
g AS (
  SELECT gpu_key, CAST(hour AS DATE) AS day,
    arg_max(serial_linked, ts_last) AS serial, arg_max(uuid, ts_last) AS uuid, arg_max(host, ts_last) AS host,
    arg_max(pci_bus_id, ts_last) AS pci_bus_id, arg_max(gpu_index, ts_last) AS gpu_index, arg_max(name, ts_last) AS name,
    sum(samples) AS samples, sum(span_s) AS span_s, count(*) AS nrows,
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
    sum(fan_sum) / nullif(sum(fan_n), 0) AS fan_mean, max(fan_max) AS fan_max
  FROM d GROUP BY ALL
)
SELECT gpu_key, serial, uuid, host, pci_bus_id, gpu_index, name, day, samples,
  CASE WHEN samples > nrows THEN least(1.0, samples * (span_s / (samples - nrows)) / 86400.0) END AS coverage,
  temp_min, temp_mean,
  -- p95 from the day's moments (normal approximation, capped by the max): exact
  -- quantiles would need every sample; hourly facts keep counts, sums and extremes.
  least(temp_max, temp_mean + 1.6449 * sqrt(greatest(temp_meansq - temp_mean * temp_mean, 0))) AS temp_p95,
  temp_max, mem_temp_max, util_mean, mem_used_mean, mem_used_max, power_mean, power_max, sm_clock_mean,
  throttle_thermal_share, throttle_power_share, throttle_hw_slowdown_share, throttle_power_brake_share,
  ecc_corrected_delta, ecc_uncorrected_delta, retired_pages_max, remapped_rows_pending_max,
  remapped_rows_failed_max, remapped_rows_uncorrectable_max, pcie_width_min, pcie_width_max_reported,
  pcie_replay_delta, fan_mean, fan_max
FROM g
"""
