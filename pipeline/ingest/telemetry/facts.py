"""Hourly facts from clean samples (SQL steps).

Reads: a relation of raw text columns ``c0..cN`` (files or segments with known fields).
Writes: rows of ``smi_hourly`` (one per file, GPU and hour; partial aggregates that
combine exactly across files); :mod:`pipeline.ingest.telemetry.gpu_days` derives GPU days.

Aggregates are kept as counts, sums and extremes so that an hour split over two files
(rotation) combines exactly. Volatile ECC and PCIe replay counters reset to 0 on reboot:
an hour keeps its first, last and largest value, a delta never goes negative, and the
step between consecutive hours (or files) is added when the later hour is combined.
"""

from __future__ import annotations

import re

from pipeline.ingest.telemetry.fields import Field, bad_sql, clean_sql, failing_sql
from pipeline.vocab.sql import literal

#: fact metric -> candidate columns (first present wins; canonical names, see fields.ALIASES).
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

#: Raw identity columns of the hourly rows (``r_<key>``) and the field each comes from.
ID_RAW = {"gpu_index": "index", "name": "name", "serial": "serial", "uuid": "uuid", "pci_bus_id": "pci.bus_id",
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


def round_index_sql(fields: list[Field], src: str, *, by: str | None = None) -> str:
    """``src`` (with ``line_no``) and ``_round_idx``: the GPU index of each line, numbered
    from 0 within its sampling round (``by``: a column telling files apart, each numbered
    on its own).

    nvidia-smi prints a round's GPUs in index order, each line stamped when its GPU was
    queried (a few ms apart), so a round is a run of consecutive lines each less than
    :data:`ROUND_GAP_MS` after the line before; a later round starts at least the loop
    interval (``-l``, 1 s or more) after. Lines with an unreadable timestamp (quarantined)
    get no index. With whole-second timestamps a round that straddles a second boundary
    is split in two (its second part numbered from 0 again).
    """
    i = [f.name for f in fields].index("timestamp")
    ts = clean_sql(fields[i], f"c{i}")
    key, part = (f"{by}, ", f"PARTITION BY {by} ") if by else ("", "")
    w = f"OVER ({part}ORDER BY line_no)"
    return f"""(
SELECT s.*, (row_number() OVER (PARTITION BY {key}g.rnd ORDER BY s.line_no) - 1)::VARCHAR AS _round_idx
FROM {src} s LEFT JOIN (
  SELECT {key}line_no, sum(new) {w} AS rnd FROM (
    SELECT {key}line_no, CASE WHEN lag(t) {w} IS NULL OR t < lag(t) {w}
      OR t - lag(t) {w} >= INTERVAL {ROUND_GAP_MS} MILLISECOND THEN 1 ELSE 0 END AS new
    FROM (SELECT {key}line_no, {ts} AS t FROM {src}) WHERE t IS NOT NULL
  )
) g USING ({key}line_no)
)"""


def _strict(fields: list[Field]) -> list[int]:
    return [i for i, f in enumerate(fields) if f.kind in ("ts", "int", "num", "mask")]


_REASON_COLUMNS = {p + r for r in _REASON_FIELDS for p in ("clocks_event_reasons_", "clocks_throttle_reasons_")}


def is_reason_field(f: Field) -> bool:
    """A single throttle (clock event) reason, e.g. ``clocks_event_reasons.hw_slowdown``."""
    return f.column in _REASON_COLUMNS


def used_fields(fields: list[Field]) -> list[Field]:
    """The fields the facts read (identity and metrics); the others are not even cleaned."""
    wanted = {c for cands in METRICS.values() for c in cands} | set(ID_RAW) | {"ts"} | _REASON_COLUMNS
    return [f if f.column in wanted else Field(f.name, f.unit, ignored=True) for f in fields]


def cleaned_sql(fields: list[Field], src: str, extra: str = "", *, flag_bad: bool = False) -> str:
    """``src`` with each checked field's clean value ``v<i>`` beside its raw text ``c<i>``.

    ``flag_bad``: unreadable values are flagged, not NULL (:func:`~pipeline.ingest.telemetry.fields.clean_sql`).
    """
    cols = [f"c{i}" for i in range(len(fields))]
    cols += [f"{clean_sql(fields[i], f'c{i}', flag_bad=flag_bad)} AS v{i}" for i in _strict(fields)]
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


def _cleaned_cols(fields: list[Field]) -> str:
    return ", ".join(f"v{i}" for i in _strict(fields)) or "NULL AS _none"


def bad_checks_grouped(fields: list[Field], metrics: dict[str, str] | None = None) -> tuple[str, str]:
    """(aggregate, check on the group) SQL over :func:`cleaned_sql` rows with ``flag_bad``:
    true when a row of the group holds an unreadable value.

    Flagged numbers are NaN, which makes ``max`` and ``sum`` not finite (DuckDB orders NaN
    above infinity); a flagged or negative mask makes ``min`` negative. An
    unreadable time leaves ``hour_local`` NULL, an unreadable index (a group key, and the
    only ``int`` field) fails its cast: both are checked on the aggregated row.

    ``metrics`` (:func:`metric_exprs`): a field that is a metric is checked on that
    metric's own ``max`` or ``sum`` among the hourly aggregates, which DuckDB computes once
    for both, rather than on an aggregate of its own per row. (A sum that overflows to
    infinity flags a readable group: the file is then read line by line, to the same rows.)
    """
    reuse, aggs = {}, {agg for _, agg in _AGGREGATES}
    for name, expr in (metrics or {}).items():
        hit = next((a for a in (f"max(m_{name})", f"sum(m_{name})") if a in aggs), None)
        if hit and re.fullmatch(r"v\d+", expr):
            reuse[int(expr[1:])] = hit
    values, keys = [], []
    for i in _strict(fields):
        kind = fields[i].kind
        if kind == "ts":
            keys.append("hour_local IS NULL")
        elif kind == "int":
            keys.append(f"{clean_sql(fields[i], 'r_gpu_index')} IS NULL")
        elif kind == "mask":
            values.append(f"min(v{i}) < 0")
        else:
            values.append(f"NOT isfinite({reuse.get(i, f'max(v{i})')})")
    return " OR ".join(values) or "false", " OR ".join(keys) or "false"


def hourly_sql(fields: list[Field], src: str, *, by_file: bool = False, header: list[list[str]] | None = None,
               cells: str | None = None, combinable: bool = False) -> str:
    """One pass over ``src``: partial hourly facts per raw GPU identity and local hour
    (and per ``filename`` with ``by_file``: ``src`` reads many files).

    ``header`` (per cell, the spellings of the header's field): lines repeating the header
    (a restarted logger appends it) are grouped apart, flagged ``_hdr``, instead of
    counting as bad. ``cells``: a list column of ``src`` holding each line's raw cells
    (:func:`~pipeline.ingest.telemetry.read.lines_source`'s ``_cells``); the header test
    then takes the cells the facts do not use from it, on the few lines it looks at,
    rather than from ``c<i>`` columns that every line would have to fill.

    ``_bad`` is 1 when one of the group's rows has an unreadable value in a field the facts
    use (:func:`bad_checks_grouped`): the fast path gives up on a file where it is not 0 (the
    exact path quarantines those rows before aggregating, so it never finds one). Fields the
    facts do not use are neither cleaned nor checked.

    ``combinable``: each row also carries the times its first and last counter values were
    taken at, so that rows of the same GPU and hour from several stretches of one file
    combine into the row one pass would give (:func:`combine_hourly_sql`).
    """
    idx = {f.name: i for i, f in enumerate(fields)}
    ts = f"v{idx['timestamp']}" if "timestamp" in idx else "NULL::TIMESTAMP"
    # Without a field that tells GPUs apart, ``src`` must come from :func:`round_index_sql`.
    by_round = needs_round_index(fields)
    raw_ids = ", ".join(
        (f"c{idx[src_name]}" if src_name in idx else "_round_idx" if by_round and col == "gpu_index"
         else "NULL::VARCHAR") + f" AS r_{col}"
        for col, src_name in ID_RAW.items()
    )
    m = metric_exprs(fields)
    inner = ", ".join(f"{expr} AS m_{name}" for name, expr in m.items())
    fields = used_fields(fields)
    bad_values, bad_keys = bad_checks_grouped(fields, m)
    # A sample of a failing GPU: a failing marker in a value the facts use. A marker's clean
    # value is NULL, so the marker list is compared only where ``v<i>`` is (most cells
    # are numbers: one validity test instead of three string comparisons).
    failing = " OR ".join(f"(v{i} IS NULL AND {failing_sql(f'c{i}')})" for i, f in enumerate(fields)
                          if f.kind in ("num", "mask")) or "false"
    # (a CASE condition is evaluated row by row as far as it must be; the same OR of ANDs in
    # a select list is evaluated whole, every test on every row)
    inner += f", (CASE WHEN {failing} THEN true ELSE false END) AS m_gpu_error"
    file_col = "filename, " if by_file else ""
    outer, hdr = file_col, ""
    if header:
        ts_at = idx.get("timestamp")
        cell = (lambda i: f"c{i}" if cells is None or i == ts_at else f"{cells}[{i + 1}]")
        same = " AND ".join(f"{cell(i)} IN ({', '.join(literal(h) for h in names)})" for i, names in enumerate(header))
        hdr = f"(CASE WHEN c0 = 'timestamp' THEN {same} ELSE false END) AS _hdr, "
        outer += "_hdr, "
    keys = ", ".join(f"r_{col}" for col in ID_RAW)
    carried = ("_round_idx, " if by_round else "") + (f"{cells}, " if header and cells else "")
    grouped = f"""
SELECT {outer}{keys}, coalesce({bad_values}, false) AS _bad_values,
  date_trunc('hour', ts) AS hour_local, count(*) AS samples, min(ts) AS ts_first, max(ts) AS ts_last,
  {_aggregates(m, combinable=combinable)}
FROM (
  SELECT {file_col}{hdr}{raw_ids}, {ts} AS ts, {inner}, {_cleaned_cols(fields)}
  FROM {cleaned_sql(fields, src, extra=file_col + carried, flag_bad=True)}
)
GROUP BY ALL
"""
    return _with_bad(grouped, bad_keys)


def _with_bad(grouped: str, bad_keys: str) -> str:
    return f"SELECT * EXCLUDE (_bad_values), coalesce(_bad_values OR {bad_keys}, true)::INTEGER AS _bad FROM ({grouped})"


#: The hourly aggregates: (output column, SQL over the ``m_<metric>`` columns). A count
#: whose metrics were not queried is 0, any other aggregate NULL, without a per-row pass.
_AGGREGATES = [
    ("temp_n", "count(m_temp)"), ("temp_sum", "sum(m_temp)"), ("temp_sumsq", "sum(m_temp * m_temp)"),
    ("temp_min", "min(m_temp)"), ("temp_max", "max(m_temp)"), ("mem_temp_max", "max(m_mem_temp)"),
    ("util_n", "count(m_util)"), ("util_sum", "sum(m_util)"),
    ("mem_used_n", "count(m_mem_used)"), ("mem_used_sum", "sum(m_mem_used)"), ("mem_used_max", "max(m_mem_used)"),
    ("power_n", "count(m_power)"), ("power_sum", "sum(m_power)"), ("power_max", "max(m_power)"),
    ("sm_clock_n", "count(m_sm_clock)"), ("sm_clock_sum", "sum(m_sm_clock)"),
    ("fan_n", "count(m_fan)"), ("fan_sum", "sum(m_fan)"), ("fan_max", "max(m_fan)"),
    ("throttle_n", "count(m_mask)"),
    ("throttle_thermal", f"count(*) FILTER (m_mask & {THERMAL_BITS} <> 0)"),
    ("throttle_power", f"count(*) FILTER (m_mask & {POWER_BITS} <> 0)"),
    ("throttle_hw_slowdown", f"count(*) FILTER (m_mask & {HW_SLOWDOWN_BITS} <> 0)"),
    ("throttle_power_brake", f"count(*) FILTER (m_mask & {POWER_BRAKE_BITS} <> 0)"),
    # (DuckDB's arg_min / arg_max skip rows whose value, the first argument, is NULL: a
    # marker is not a counter's first or last value, with no FILTER, which costs a fifth
    # of the statement; tests/test_smi_wide.py checks it.)
    *[(f"{name}_{end}", f"{agg}(m_{short}, ts)" if agg != "max" else f"max(m_{short})")
      for short, name in (("ecc_c", "ecc_corrected"), ("ecc_u", "ecc_uncorrected"), ("pcie_replay", "pcie_replay"))
      for end, agg in (("first", "arg_min"), ("last", "arg_max"), ("max", "max"))],
    ("retired_pages_max", "max(coalesce(m_retired_sbe, 0) + coalesce(m_retired_dbe, 0)) "
                          "FILTER (m_retired_sbe IS NOT NULL OR m_retired_dbe IS NOT NULL)"),
    ("remapped_rows_pending_max", "max(m_rr_pending)"), ("remapped_rows_failed_max", "max(m_rr_failed)"),
    ("remapped_rows_uncorrectable_max", "max(m_rr_uncorr)"),
    ("pcie_width_min", "min(m_pcie_width)"), ("pcie_width_max_reported", "max(m_pcie_width_max)"),
    ("gpu_error_n", "count(*) FILTER (m_gpu_error)"),
]


#: A counter's first or last value, taken by time.
_BY_TIME = re.compile(r"^arg_(min|max)\((m_\w+), ts\)")


def _aggregates(metrics: dict[str, str], *, combinable: bool = False) -> str:
    absent = {f"m_{name}" for name, expr in metrics.items() if expr.startswith("NULL::")}
    out = []
    for col, agg in _AGGREGATES:
        used = set(re.findall(r"m_\w+", agg))
        # (combinable: the time the value was taken at; for a first, the least time of a value)
        taken_at = _BY_TIME.sub(r"\1(CASE WHEN \2 IS NOT NULL THEN ts END)", agg) \
            if combinable and _BY_TIME.match(agg) else None
        if used <= absent:
            agg = "0::BIGINT" if agg.startswith("count(") else "NULL::DOUBLE"
            taken_at = taken_at and "NULL::TIMESTAMP"
        out.append(f"{agg} AS {col}")
        if taken_at:
            out.append(f"{taken_at} AS _at_{col}")
    return ",\n  ".join(out)


def combine_hourly_sql(src: str) -> str:
    """Rows of :func:`hourly_sql` with ``combinable`` from several stretches of one file (the
    line-by-line path aggregates each run of lines between two header lines, and each block
    it reads, on its own) combined into one row per GPU identity and hour: the row one pass
    over all those lines gives, as the fast path's. Counts and sums add up, extremes are the
    extremes of the extremes, and a counter's first (last) value is the one taken first
    (last), by the time carried in ``_at_<column>`` (on a tie the earlier stretch's, as one
    pass keeps the earlier line's).

    Each column's rule follows from its aggregate in :data:`_AGGREGATES`, so an hourly fact
    is still defined once.
    """
    keys = ", ".join(f"r_{col}" for col in ID_RAW) + ", hour_local"
    parts = ["sum(samples)::BIGINT AS samples", "min(ts_first) AS ts_first", "max(ts_last) AS ts_last"]
    for col, agg in _AGGREGATES:
        fn = agg.split("(", 1)[0]
        if fn == "count":
            parts.append(f"sum({col})::BIGINT AS {col}")
        elif fn in ("sum", "min", "max"):
            parts.append(f"{fn}({col}) AS {col}")
        elif fn in ("arg_min", "arg_max"):
            parts.append(f"{fn}({col}, _at_{col}) AS {col}")  # (NULL: no value in that stretch)
        else:
            raise ValueError(f"no rule to combine {col} = {agg}")
    return f"(SELECT {keys}, {', '.join(parts)}, max(_bad) AS _bad FROM {src} GROUP BY {keys})"


def reject_rows_sql(fields: list[Field], src: str, extra: str = "", *, facts_only: bool = False) -> str:
    """Rows of ``src`` (with ``line_no``, ``line``) whose values cannot be read, and why.

    ``facts_only``: check only the fields the hourly facts use (as :func:`hourly_sql` does).
    """
    fields = used_fields(fields) if facts_only else fields
    checks = bad_checks(fields)
    if not checks:
        return f"SELECT {extra}line_no, line, NULL AS bad_field FROM {src} WHERE false"
    whens = " ".join(f"WHEN {b} THEN {literal(name)}" for name, b in checks)
    return f"""
SELECT {extra}line_no, line, bad_field FROM (
  SELECT {extra}line_no, line, CASE {whens} END AS bad_field FROM {cleaned_sql(fields, src, extra + "line_no, line, ")}
) WHERE bad_field IS NOT NULL ORDER BY line_no
"""


def finish_hourly_sql(view: str) -> str:
    """Clean the raw identities of aggregated rows and compute within-hour counter deltas.

    The identities are cleaned once per distinct raw tuple (a file holds a few GPUs) and
    joined back, not once per row: on a log sampled hourly a row is one line, and the bus
    id's cleaning (regular expressions) per row cost about a quarter of a batch statement.
    """
    ids = {
        "gpu_index": clean_sql(Field("index"), "r_gpu_index"),
        "name": clean_sql(Field("name"), "r_name"),
        "serial": f"upper({clean_sql(Field('serial'), 'r_serial')})",
        "uuid": clean_sql(Field("uuid"), "r_uuid"),
        "pci_bus_id": clean_sql(Field("pci.bus_id"), "r_pci_bus_id"),
        "line_host": clean_sql(Field("hostname"), "r_host"),
    }
    raw = [f"r_{c}" for c in ID_RAW]
    deltas = ", ".join(
        f"CASE WHEN {n}_last >= {n}_first THEN {n}_last - {n}_first "
        f"ELSE {n}_max - {n}_first + {n}_last END AS {n}_delta"
        for n in ("ecc_corrected", "ecc_uncorrected", "pcie_replay")
    )
    keep = ", ".join(f"{e} AS {c}" for c, e in ids.items())
    same = " AND ".join(f"a.{r} IS NOT DISTINCT FROM i.{r}" for r in raw)
    return f"WITH a AS (SELECT * FROM {view}), " \
           f"i AS (SELECT {', '.join(raw)}, {keep} FROM (SELECT DISTINCT {', '.join(raw)} FROM a)) " \
           f"SELECT {', '.join(f'i.{c}' for c in ids)}, a.* EXCLUDE ({', '.join(raw)}, _bad, " \
           f"ecc_corrected_max, ecc_uncorrected_max, pcie_replay_max), {deltas} FROM a JOIN i ON {same}"
