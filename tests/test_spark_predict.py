"""Features, the predicted-failure list and the report on Spark: the same as on DuckDB.

The stages before ``predict`` run once on DuckDB; ``run --stage predict --stage report`` then
runs on two copies of that warehouse, one per engine, so the comparison covers the feature
query, its hand-over and write-back (``RunContext.engine_for``) and the report's SQL on Spark.
Retraining is off: the models fit in scikit-learn on the ``features`` table either way, and
ranking with the evidence score is what a fleet without a promoted model gets.

Every test shares the session's one local[2] Spark (the ``spark`` fixture) on the ``spark``
xdist worker, as ``tests/test_spark.py`` does.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.config import load_config, with_engine
from tests.conftest import ROOT
from tests.spark_nights import sample_night
from tests.test_spark import assert_same_table

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

SAMPLE = ROOT / "data" / "sample"
UP_TO_STATS = ["inventory", "smi", "xid", "tickets", "normalize", "link", "stats"]
#: The prediction's contract columns compared exactly (risk within 1e-9 relative).
EXACT = ["rank", "serial", "host", "pci_bus_id", "model", "horizon_days", "top_factors"]


def _config():
    cfg = load_config(ROOT / "fleetfault.toml")
    return dataclasses.replace(cfg, predict=dataclasses.replace(cfg.predict, retrain=False))


def _night_on_both(spark, data: Path, tmp: Path, up_to_link: Path | None = None) -> dict[str, Path]:
    """The stages up to stats once on DuckDB (from a copy of ``up_to_link``'s warehouse, when
    given, on: the stats stage only), then predict and report on each engine; returns engine
    -> its folder (``wh.duckdb``, ``out/``)."""
    from pipeline.run import run_pipeline

    cfg = _config()
    base = tmp / "base.duckdb"
    if up_to_link is not None:
        shutil.copy(up_to_link, base)
    stages = UP_TO_STATS if up_to_link is None else UP_TO_STATS[UP_TO_STATS.index("stats"):]
    _, code = run_pipeline(cfg, data, base, tmp / "base_out", stages=stages)
    assert code in (0, 1)
    folders = {}
    for engine in ("duckdb", "spark"):
        folder = tmp / engine
        folder.mkdir()
        shutil.copy(base, folder / "wh.duckdb")
        reports, _ = run_pipeline(with_engine(cfg, engine), data, folder / "wh.duckdb", folder / "out",
                                  stages=["predict", "report"])
        assert [r.stage for r in reports] == ["predict", "report"]
        folders[engine] = folder
    # The Spark run's stages really read their tables on Spark: what they were handed is there.
    views = {t.name for t in spark.catalog.listTables() if t.isTemporary}
    assert {"gpu_days", "xid_events", "failures", "predictions", "stats_afr"} <= views
    return folders


def _table(folder: Path, sql: str) -> pl.DataFrame:
    from pipeline.warehouse import Warehouse

    with Warehouse(folder / "wh.duckdb", read_only=True) as wh:
        return wh.engine.pl(sql, step="read")


def _sheets(path: Path) -> dict[str, list[tuple]]:
    from openpyxl import load_workbook

    book = load_workbook(path, read_only=True)
    try:
        return {ws.title: [tuple(row) for row in ws.iter_rows(values_only=True)] for ws in book.worksheets}
    finally:
        book.close()


def _same_value(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is None and b is None
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-12)
    return a == b


def assert_same_outputs(folders: dict[str, Path]) -> None:
    """The same features, predicted list and report numbers from both engines."""
    ours, theirs = folders["duckdb"], folders["spark"]
    features = [_table(f, "SELECT * FROM features") for f in (ours, theirs)]
    assert features[0].height > 0
    assert_same_table(*features, "features")

    lists = [pl.read_csv(f / "out" / "predictions.csv", infer_schema_length=None) for f in (ours, theirs)]
    assert lists[0].height > 0 and lists[0]["risk"].max() > 0
    assert lists[0].select(EXACT).to_dicts() == lists[1].select(EXACT).to_dicts()
    for a, b in zip(lists[0]["risk"], lists[1]["risk"]):
        assert a == pytest.approx(b, rel=1e-9), f"risk {a} on DuckDB, {b} on Spark"
    for name in ("predictions", "predict_track"):
        assert_same_table(*(_table(f, f"SELECT * FROM {name}") for f in (ours, theirs)), name)

    books = [_sheets(f / "out" / "report.xlsx") for f in (ours, theirs)]
    assert {"summary", "monthly_trend", "top_xids", "predictions", "ticket_quality"} <= set(books[0])
    assert list(books[0]) == list(books[1]), "the report has other sections on Spark"
    for sheet, rows in books[0].items():
        other = books[1][sheet]
        assert len(rows) == len(other), f"report sheet {sheet}: {len(rows)} rows on DuckDB, {len(other)} on Spark"
        for i, (r, s) in enumerate(zip(rows, other)):
            assert len(r) == len(s) and all(map(_same_value, r, s)), f"report sheet {sheet}, row {i}: {r} != {s}"
    proms = [[line.rpartition(" ") for line in (f / "out" / "fleetfault.prom").read_text().splitlines()
              if not line.startswith(("#", "fleetfault_export_timestamp_seconds "))] for f in (ours, theirs)]
    assert len(proms[0]) == len(proms[1]) > 0
    for (series, _, a), (other, _, b) in zip(*proms):
        assert series == other and float(a) == pytest.approx(float(b), rel=1e-9), f"{series} {a} != {other} {b}"


@pytest.mark.slow
def test_the_sample_gives_the_same_features_list_and_report_on_spark(spark, tmp_path, tmp_path_factory):
    # (the sample's stages up to link on DuckDB: the night tests/spark_nights.py shares)
    up_to_link = sample_night("duckdb", tmp_path_factory).wh
    assert_same_outputs(_night_on_both(spark, SAMPLE, tmp_path, up_to_link))


@pytest.mark.slow
def test_a_256_gpu_fleet_gives_the_same_features_list_and_report_on_spark(spark, tmp_path, cli):
    # A month at hourly samples with failures sped up: 266 serials, some failing in the month.
    assert cli("simulate", "--gpus", "256", "--days", "30", "--interval", "3600", "--accel", "5", "--seed", "3",
               "--out", tmp_path / "fleet", "-q") == 0
    folders = _night_on_both(spark, tmp_path / "fleet", tmp_path)
    assert _table(folders["duckdb"], "SELECT count(DISTINCT serial) FROM features").item() >= 256
    assert_same_outputs(folders)
