"""``pipeline.api``: what the notebooks call, on a filled warehouse and on an empty one."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline import api
from pipeline.config import Config
from pipeline.errors import UsageError
from test_report import fill_warehouse


@pytest.fixture
def fleet(tmp_path):
    from pipeline.warehouse import Warehouse

    path = tmp_path / "fleet.duckdb"
    with Warehouse(path) as wh:
        fill_warehouse(wh, gpus_per_model=6)
    with api.open_warehouse(path, Config()) as wh:
        yield wh


def test_open_warehouse_is_read_only(fleet, tmp_path):
    from pipeline.errors import EngineError

    with pytest.raises(EngineError):
        fleet.engine.execute("DELETE FROM inventory", step="test")
    with pytest.raises(UsageError, match="fleetfault run"):
        api.open_warehouse(tmp_path / "missing.duckdb", Config())


def test_gpu_history_of_the_top_prediction(fleet):
    serial = api.interesting_gpu(fleet)
    assert serial == fleet.con.execute("SELECT serial FROM predictions WHERE rank = 1").fetchall()[0][0]
    history = api.gpu_history(fleet, serial.lower())  # serials are matched as the inventory stores them
    assert set(history) == {"inventory", "gpu_days", "xid_events", "tickets", "predictions"}
    assert history["inventory"].height == 1 and history["gpu_days"].height > 100
    assert history["predictions"]["rank"].to_list() == [1]
    with pytest.raises(UsageError, match="serial"):
        api.gpu_history(fleet, "  ")


def test_tables_for_notebooks(fleet):
    assert api.afr(fleet, "vendor", Config())["failures"].sum() == api.summary(fleet, Config())["failures"]
    assert not api.failure_modes(fleet).is_empty()
    assert not api.top_xids(fleet).is_empty()
    assert api.data_quality(fleet)["tickets"]["unlinked_tickets"] == 1
    assert api.model_runs(fleet).is_empty()


def test_model_card_and_calibration(fleet, tmp_path):
    assert api.model_card(fleet, cfg=Config()) == {}
    models = tmp_path / "models"  # paths.models is relative to the warehouse's folder
    models.mkdir()
    card = {"version": "predict-20250530", "horizon_days": 7,
            "metrics": {"model": {"pr_auc": 0.41, "brier": 0.012, "median_lead_days": 4},
                        "baseline": {"pr_auc": 0.18, "brier": 0.02, "median_lead_days": 1}}}
    (models / "predict-20250530.json").write_text(json.dumps(card), encoding="utf-8")
    (models / "current.json").write_text(json.dumps({"version": "predict-20250530"}), encoding="utf-8")
    got = api.model_card(fleet, cfg=Config())
    assert got["version"] == "predict-20250530"
    metrics = api.model_metrics(got)
    assert metrics.filter(pl.col("metric") == "pr_auc").row(0) == ("pr_auc", 0.41, 0.18)
    assert api.calibration(tmp_path / "out").is_empty()
    (tmp_path / "out" / "plots").mkdir(parents=True)
    (tmp_path / "out" / "plots" / "predict_calibration.csv").write_text(
        "mean_risk,observed_rate,count,scorer\n0.01,0.0,100,model\n0.2,0.25,20,model\n", encoding="utf-8")
    assert api.calibration(tmp_path / "out")["count"].sum() == 120
