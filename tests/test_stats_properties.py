"""Properties of exposure and rates on random fleets: invariants that must hold for any input."""

from __future__ import annotations

from datetime import datetime, timedelta

import duckdb
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

import pipeline.stats as st
from pipeline.config import Stats
from pipeline.engine import DuckDBEngine
from pipeline.schemas import schema

W0, W1 = datetime(2025, 1, 1), datetime(2026, 1, 1)
CFG = Stats(window_start="2025-01-01", window_end="2025-12-31")
day = hst.integers(-900, 500).map(lambda d: W0 + timedelta(days=d, hours=d % 7))


@hst.composite
def fleets(draw):
    n = draw(hst.integers(1, 12))
    inv = []
    for i in range(n):
        installed = draw(hst.one_of(hst.none(), day))
        removed = draw(hst.one_of(hst.none(), day))
        if installed and removed and removed < installed:
            installed, removed = removed, installed
        inv.append({"serial": f"S{i}", "model": draw(hst.sampled_from(["H100", "A100", None])), "vendor": "Dell",
                    "host": f"h{i // 4}", "slot": i % 4, "site": "sha", "batch": draw(hst.sampled_from(["B1", "B2"])),
                    "installed_at": installed, "removed_at": removed})
    tickets = [{"ticket_id": f"T{j}", "service_point": "sp", "serial": f"S{draw(hst.integers(0, n))}",
                "opened_at": draw(day), "part_code": draw(hst.sampled_from(["GPU", "FAN", "GPU_BASEBOARD"])),
                "action_code": draw(hst.sampled_from(["REPLACE", "RESEAT"])), "review": False}
               for j in range(draw(hst.integers(0, 10)))]
    return inv, tickets


def engine_for(inv, tickets) -> DuckDBEngine:
    con = duckdb.connect(":memory:")
    for name in ("inventory", "tickets", "gpu_days", "xid_events"):
        con.execute(schema(name).ddl().replace(" NOT NULL", ""))
    eng = DuckDBEngine(con)
    for name, rows, sch in (("inventory", inv, {"installed_at": pl.Datetime("us"), "removed_at": pl.Datetime("us"),
                                                "model": pl.Utf8, "slot": pl.Int32}),
                            ("tickets", tickets, {"opened_at": pl.Datetime("us"), "serial": pl.Utf8})):
        if not rows:
            continue
        frame = pl.DataFrame(rows, schema_overrides=sch)
        eng.register("_in", frame)
        cols = ", ".join(frame.columns)
        eng.execute(f"INSERT INTO {name} ({cols}) SELECT {cols} FROM _in", step="load")
        eng.unregister("_in")
    return eng


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_exposure_invariants(fleet):
    inv, tickets = fleet
    lt = st.lifetimes(engine_for(inv, tickets), CFG)
    frame = lt.frame()
    if frame.height:
        assert (frame["entry_at"] >= W0).all() and (frame["exit_at"] <= W1).all()
        assert (frame["exit_at"] > frame["entry_at"]).all() and (frame["gpu_days"] > 0).all()
        assert (frame["entry_age_days"] >= 0).all()
    replaced = {(t["serial"], t["opened_at"]) for t in tickets if t["part_code"] == "GPU" and t["action_code"] == "REPLACE"}
    for row in frame.filter(pl.col("failed")).iter_rows(named=True):
        assert (row["id"], row["exit_at"]) in replaced  # every failure is a replacement ticket at the exit
    fleet_rate = st.afr(lt, cfg=CFG)
    months = st.afr(lt, by="month", cfg=CFG)
    if frame.height:
        assert fleet_rate["failures"][0] == frame["failed"].sum() <= len(inv)
        assert fleet_rate["gpu_days"][0] <= len(inv) * 365 + 1e-6
        assert months["gpu_days"].sum() == pytest.approx(fleet_rate["gpu_days"][0])
        assert months["failures"].sum() == fleet_rate["failures"][0]
        row = fleet_rate.row(0, named=True)
        assert row["afr_ci_low_pct"] <= row["afr_pct"] <= row["afr_ci_high_pct"]
    else:
        assert fleet_rate.height == 0 and months.height == 0
