"""Failure modes and service: Pareto, Xid rates, time to repair, repeat offenders.

Each is one SQL step over the warehouse's ``tickets`` / ``xid_events`` and the lifetimes
relation, restricted to the observation window; only the exact Poisson interval of the Xid
rates is computed in Python (scipy).
"""

from __future__ import annotations

import polars as pl

from pipeline.engine import Engine
from pipeline.stats.rates import poisson_interval
from pipeline.stats.exposure import Window
from pipeline.stats.failures import _in_list


def _between(engine: Engine, expr: str, window: Window) -> str:
    d = engine.dialect
    return f"{expr} >= {d.timestamp(window.start)} AND {expr} < {d.timestamp(window.end)}"


def pareto(engine: Engine, window: Window, parts: list[str], actions: list[str]) -> pl.DataFrame:
    """Tickets by part x symptom, most frequent first, with share and cumulative share."""
    df = engine.pl(f"""
SELECT coalesce(part_code, '(uncoded)') AS part_code, coalesce(symptom_code, '(uncoded)') AS symptom_code,
       count(*) AS tickets,
       CAST(sum(CASE WHEN part_code IN {_in_list(parts)} AND action_code IN {_in_list(actions)} THEN 1 ELSE 0 END) AS BIGINT) AS failures
FROM tickets
WHERE {_between(engine, 'opened_at', window)}
GROUP BY 1, 2
ORDER BY tickets DESC, part_code, symptom_code""", step="stats: pareto (part x symptom)")
    total = df["tickets"].sum() or 1
    return df.with_columns(
        pl.int_range(1, df.height + 1, dtype=pl.Int32).alias("rank"),
        pl.col("tickets").cast(pl.Int64), pl.col("failures").cast(pl.Int64),
        (pl.col("tickets") / total).alias("share"),
        (pl.col("tickets").cum_sum() / total).alias("cumulative_share"),
    ).select("rank", "part_code", "symptom_code", "tickets", "failures", "share", "cumulative_share")


def xid_rates(engine: Engine, window: Window, lifetimes: str, *, confidence: float = 0.95) -> pl.DataFrame:
    """Xid/SXid events per 1,000 GPU-days by code and model (events linked to an inventory GPU)."""
    df = engine.pl(f"""
WITH exposure AS (
    SELECT coalesce(model, '(unknown)') AS model, sum(gpu_days) AS gpu_days FROM {lifetimes} GROUP BY 1
),
models AS (SELECT DISTINCT serial, coalesce(model, '(unknown)') AS model FROM inventory),
events AS (
    SELECT x.kind, x.xid, m.model, x.serial, x.severity
    FROM xid_events AS x JOIN models AS m ON m.serial = x.serial
    WHERE {_between(engine, 'x.ts', window)}
)
SELECT e.kind, e.xid, e.model, count(*) AS events, count(DISTINCT e.serial) AS gpus,
       coalesce(max(x.gpu_days), 0.0) AS gpu_days, max(e.severity) AS severity
FROM events AS e LEFT JOIN exposure AS x ON x.model = e.model
GROUP BY e.kind, e.xid, e.model
ORDER BY e.kind, e.xid, e.model""", step="stats: xid rates")
    lows, highs, rates = [], [], []
    for k, t in zip(df["events"].to_list(), df["gpu_days"].to_list()):
        lo, hi = poisson_interval(int(k), float(t), confidence)
        ok = t > 0
        rates.append(k / t * 1000 if ok else None)
        lows.append(lo * 1000 if ok else None)
        highs.append(hi * 1000 if ok else None)
    return df.with_columns(
        pl.col("xid").cast(pl.Int32), pl.col("events").cast(pl.Int64), pl.col("gpus").cast(pl.Int64),
        pl.Series("per_1000_gpu_days", rates, dtype=pl.Float64),
        pl.Series("ci_low", lows, dtype=pl.Float64), pl.Series("ci_high", highs, dtype=pl.Float64),
    ).select("kind", "xid", "model", "events", "gpus", "gpu_days", "per_1000_gpu_days", "ci_low", "ci_high", "severity")


def repair_times(engine: Engine, window: Window) -> tuple[pl.DataFrame, int]:
    """Time to repair by part from tickets with a close time; also the count closed before opened."""
    ep = engine.dialect.epoch_seconds
    base = f"""
SELECT coalesce(part_code, '(uncoded)') AS part_code, ({ep('closed_at')} - {ep('opened_at')}) / 3600.0 AS hours
FROM tickets WHERE closed_at IS NOT NULL AND {_between(engine, 'opened_at', window)}"""
    q = engine.dialect.quantile
    agg = f"""count(*) AS tickets, avg(hours) AS mttr_hours, {q('hours', 0.5)} AS median_hours,
       {q('hours', 0.9)} AS p90_hours"""
    df = engine.pl(f"""
WITH r AS ({base})
SELECT part_code, {agg} FROM r WHERE hours >= 0 GROUP BY part_code
UNION ALL
SELECT '(all)' AS part_code, {agg} FROM r WHERE hours >= 0 HAVING count(*) > 0
ORDER BY tickets DESC""", step="stats: time to repair")
    negative = engine.rows(f"SELECT count(*) FROM ({base}) AS r WHERE hours < 0", step="stats: closed before opened")[0][0]
    return df.with_columns(pl.col("tickets").cast(pl.Int64)), int(negative)


def repeat_offenders(engine: Engine, window: Window, parts: list[str], days: int) -> pl.DataFrame:
    """A GPU, slot or host with a GPU-fault ticket again within ``days`` of the previous one."""
    d = engine.dialect
    ep = d.epoch_seconds
    s = d.string_type
    return engine.pl(f"""
WITH faults AS (
    SELECT t.ticket_id, t.opened_at, t.serial, coalesce(i.host, t.host) AS host, coalesce(i.slot, t.slot) AS slot
    FROM tickets AS t
    LEFT JOIN (SELECT serial, min(host) AS host, min(slot) AS slot FROM inventory GROUP BY serial) AS i
           ON i.serial = t.serial
    WHERE t.part_code IN {_in_list(parts)} AND t.opened_at IS NOT NULL AND {_between(engine, 't.opened_at', window)}
),
keyed AS (
    SELECT 'gpu' AS level, serial AS key, host, ticket_id, opened_at, serial FROM faults WHERE serial IS NOT NULL
    UNION ALL
    SELECT 'slot', host || '/' || CAST(slot AS {s}), host, ticket_id, opened_at, serial
    FROM faults WHERE host IS NOT NULL AND slot IS NOT NULL
    UNION ALL
    SELECT 'host', host, host, ticket_id, opened_at, serial FROM faults WHERE host IS NOT NULL
),
ordered AS (
    SELECT *, lag(ticket_id) OVER w AS previous_ticket, lag(opened_at) OVER w AS previous_at,
           lag(serial) OVER w AS previous_serial
    FROM keyed
    WINDOW w AS (PARTITION BY level, key ORDER BY opened_at, ticket_id)
)
SELECT level, key, host, previous_ticket, previous_at, ticket_id AS repeat_ticket, opened_at AS repeat_at,
       ({ep('opened_at')} - {ep('previous_at')}) / 86400.0 AS days_between,
       CASE WHEN previous_serial = serial OR previous_serial IS NULL OR serial IS NULL
            THEN coalesce(serial, previous_serial)
            ELSE previous_serial || ' -> ' || serial END AS serials
FROM ordered
WHERE previous_ticket IS NOT NULL AND ({ep('opened_at')} - {ep('previous_at')}) <= {int(days) * 86400}
ORDER BY level, key, repeat_at""", step="stats: repeat offenders")
