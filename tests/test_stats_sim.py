"""Acceptance on the simulator: interval coverage against the true rates, the bad batch flagged.

The simulator (``pipeline.simulate.simulate_fleet``) knows each group's true failure rate
(expected failures over exposure, from its Weibull hazards). Hazards are accelerated so that
a 300-GPU, one-year fleet has counts large enough for the intervals to be tested, not just
trivially wide; the ratio between batches is unchanged by the acceleration.
"""

from __future__ import annotations

from datetime import timedelta

import duckdb
import polars as pl
import pytest

import pipeline.stats as st
from pipeline.config import Stats
from pipeline.engine import DuckDBEngine
from pipeline.schemas import schema

simulate = pytest.importorskip("pipeline.simulate.process")

SEEDS = range(20)
BAD_BATCH = "H100-2024Q2"


def sim_engine(sim) -> DuckDBEngine:
    """A bare DuckDB with the four input tables (faster than a full warehouse per seed)."""
    con = duckdb.connect(":memory:")
    for name in ("inventory", "tickets", "gpu_days", "xid_events"):
        con.execute(schema(name).ddl().replace(" NOT NULL", ""))
    engine = DuckDBEngine(con)
    inv = sim.inventory.select("serial", "model", "vendor", "host", "slot", "site", "batch", "installed_at", "removed_at")
    tickets = pl.DataFrame(sim.service_rows).select(
        pl.format("T{}", pl.int_range(pl.len())).alias("ticket_id"), "service_point", "opened_at", "closed_at",
        "host", "slot", "serial", "part_code", "symptom_code", "action_code", pl.lit(False).alias("review"))
    for name, frame in (("inventory", inv), ("tickets", tickets)):
        engine.register("_in", frame)
        cols = ", ".join(frame.columns)
        engine.execute(f"INSERT INTO {name} ({cols}) SELECT {cols} FROM _in", step=f"load {name}")
        engine.unregister("_in")
    return engine


def run_seed(seed: int):
    sim = simulate.simulate_fleet(300, 365, seed=seed, accel=24.0)
    cfg = Stats(window_start=sim.start.date().isoformat(),
                window_end=(sim.end - timedelta(days=1)).date().isoformat())
    lt = st.lifetimes(sim_engine(sim), cfg)
    rates = st.afr(lt, by="model,vendor,batch", cfg=cfg)
    truth = sim.groups.select("vendor", "batch", "true_afr_pct", pl.col("gpu_days").alias("true_gpu_days"),
                              pl.col("failures").alias("true_failures"))
    joined = rates.join(truth, on=["vendor", "batch"], how="inner")
    assert joined.height == truth.filter(pl.col("true_gpu_days") > 0).height, "every true group is reported"
    return joined, st.compare(lt, by="batch", cfg=cfg)


def test_afr_interval_coverage_and_bad_batch_over_20_seeds():
    groups, flagged = [], []
    for seed in SEEDS:
        joined, compare = run_seed(seed)
        # Exposure and counts are the simulator's own, so the coverage tests the interval alone
        # (exposure runs on to the ticket, written hours to days after the failure itself).
        assert joined["gpu_days"].sum() == pytest.approx(joined["true_gpu_days"].sum(), rel=1e-2), seed
        assert joined["failures"].to_list() == joined["true_failures"].to_list(), seed
        groups.append(joined)
        bad = compare.filter(pl.col("group_value") == BAD_BATCH).row(0, named=True)
        flagged.append(bad["flagged"] and bad["rate_ratio"] > 1)
        assert bad["sentence"].startswith(f"batch {BAD_BATCH} of H100"), bad["sentence"]
    every = pl.concat(groups)
    covered = (every["afr_ci_low_pct"] <= every["true_afr_pct"]) & (every["true_afr_pct"] <= every["afr_ci_high_pct"])
    coverage = covered.mean()
    print(f"coverage {coverage:.3f} over {every.height} groups; bad batch flagged in {sum(flagged)}/20 seeds")
    assert 0.90 <= coverage <= 0.98
    assert all(flagged), [s for s, f in zip(SEEDS, flagged) if not f]
