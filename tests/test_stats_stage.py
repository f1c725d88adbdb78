"""The stats stage in `fleetfault run`, and `fleetfault afr` / `export failures` on its warehouse."""

from __future__ import annotations

import json
from datetime import datetime as D
from datetime import timedelta

import polars as pl
import pytest

from pipeline.config import Config, Stats
from pipeline.run import run_pipeline
from pipeline.schemas import all_schemas
from pipeline.warehouse import Warehouse
from tests.test_stats_exposure import gpu, load, ticket

STATS_TABLES = ["failures", "stats_lifetimes", "stats_afr", "stats_trend", "stats_compare", "stats_survival",
                "stats_weibull", "stats_pareto", "stats_xid_rates", "stats_repair", "stats_repeat"]


@pytest.fixture
def fleet(tmp_path):
    path = tmp_path / "wh.duckdb"
    inv, tickets = [], []
    for i in range(24):
        batch = "B-2024-07" if i < 8 else "B-2023-11"
        inv.append(gpu(f"S{i:03d}", D(2024, 1, 1), host=f"gpu-a{i // 8:02d}", slot=i % 8, batch=batch))
    for n, (i, day) in enumerate([(0, 10), (1, 40), (2, 80), (3, 120), (12, 150)]):
        opened = D(2025, 1, 1) + timedelta(days=day)
        tickets.append(ticket(f"T{n}", opened, f"S{i:03d}", closed=opened + timedelta(hours=6)))
    tickets.append(ticket("T9", D(2025, 1, 15), "S000", action="RESEAT", symptom="PCIE_ERROR", closed=D(2025, 1, 14)))
    tickets.append(ticket("T10", D(2025, 1, 12), "S005", action="RESEAT", symptom="HANG"))
    with Warehouse(path) as wh:
        load(wh, inv, tickets)
        wh.insert("xid_events", pl.DataFrame({
            "event_id": ["e1", "e2", "e3"], "ts": [D(2025, 1, 9, 3), D(2025, 2, 1), D(2025, 3, 1)],
            "host": ["gpu-a00"] * 3, "kind": ["Xid", "Xid", "Xid"], "xid": [79, 79, 48],
            "source_file": ["kern.log"] * 3, "line_no": [1, 2, 3], "serial": ["S000", "S001", "S002"],
        }))
    return path


def test_stats_stage_writes_every_table_and_the_metrics(fleet, tmp_path):
    cfg = Config(stats=Stats(window_start="2025-01-01", window_end="2025-06-30", min_gpu_days=100.0))
    out = tmp_path / "out"
    run_pipeline(cfg, tmp_path, fleet, out, stages=["stats"])
    with Warehouse(fleet, read_only=True) as wh:
        counts = {t: wh.engine.scalar(f"SELECT count(*) FROM {t}", step="test") for t in STATS_TABLES}
        fleet_row = wh.engine.pandas("SELECT * FROM stats_afr WHERE grouping = ''", step="test").iloc[0]
        groupings = {r[0] for r in wh.engine.rows("SELECT DISTINCT grouping FROM stats_afr", step="test")}
        flagged = wh.engine.rows("SELECT sentence FROM stats_compare WHERE flagged", step="test")
        repair = wh.engine.pandas("SELECT * FROM stats_repair WHERE part_code = '(all)'", step="test").iloc[0]
        xid = wh.engine.pandas("SELECT * FROM stats_xid_rates WHERE xid = 79", step="test").iloc[0]
    assert all(counts[t] > 0 for t in STATS_TABLES), counts
    assert fleet_row["failures"] == 5 and fleet_row["gpus"] == 24
    assert {"", "model", "batch", "slot", "model,batch", "quarter"} <= groupings
    assert [s for (s,) in flagged] and flagged == [("batch B-2024-07 of H100 80GB HBM3 fails 11.8× the rate of the rest of the fleet, 95% CI 1.2–579.4",)] and flagged[0][0].startswith("batch B-2024-07 of H100 80GB HBM3 fails ")
    assert repair["tickets"] == 5  # the ticket closed before it opened is left out
    assert xid["events"] == 2 and xid["per_1000_gpu_days"] == pytest.approx(2 / xid["gpu_days"] * 1000)
    metrics = json.loads((out / "metrics" / "stats.json").read_text())
    assert metrics["failures"] == 5 and metrics["window_start"] == "2025-01-01" and metrics["window_end"] == "2025-06-30"
    assert metrics["tickets_closed_before_opened"] == 1 and metrics["flagged_groups"] >= 1
    # idempotent: a second run replaces, never appends
    run_pipeline(cfg, tmp_path, fleet, out, stages=["stats"])
    with Warehouse(fleet, read_only=True) as wh:
        assert {t: wh.engine.scalar(f"SELECT count(*) FROM {t}", step="test") for t in STATS_TABLES} == counts
        declared = all_schemas()
        for t in STATS_TABLES:
            cols = wh.engine.pl(f"SELECT * FROM {t} LIMIT 0", step="test").columns
            assert cols == declared[t].names


def test_afr_and_survival_commands_on_the_warehouse(fleet, cli, tmp_path):
    assert cli("afr", "--by", "batch,quarter", "--warehouse", fleet, "-o", "afr.csv") == 0
    afr = pl.read_csv("afr.csv")
    assert afr.columns == ["batch", "quarter", "gpus", "gpu_days", "failures", "afr_pct", "afr_ci_low_pct",
                           "afr_ci_high_pct", "low_exposure"]
    assert afr["failures"].sum() == 5
    assert cli("afr", "--by", "colour", "--warehouse", fleet, "-o", "x.csv") == 2
    assert cli("survival", "--by", "batch", "--warehouse", fleet, "-o", "km.parquet") == 0
    km = pl.read_parquet("km.parquet")
    assert km.columns == ["batch", "t_days", "at_risk", "events", "survival", "ci_low", "ci_high"]
    assert pl.read_parquet("km_weibull.parquet").height == 2
    assert cli("survival", "--by", "batch,model", "--warehouse", fleet, "-o", "km.csv") == 2
