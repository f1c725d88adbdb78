"""The Spark engine: configured from ``[engine]``, and table for table the same as DuckDB.

The Spark tests share one local[2] session (the ``spark`` fixture) and run on one xdist
worker (group ``spark``); they skip without pyspark or Java unless FLEETFAULT_REQUIRE_SPARK=1.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import polars as pl
import pytest

from pipeline.config import config_from_dict, load_config, with_engine
from pipeline.errors import ConfigError
from tests.conftest import ROOT

from tests.spark_nights import SAMPLE, UP_TO_LINK, sample_night  # noqa: F401 (SAMPLE, UP_TO_LINK: others import them here)


# -- the config, no Spark needed ---------------------------------------------------------
def test_engine_section_defaults_to_duckdb_and_reads_spark_settings():
    assert config_from_dict({}).engine.name == "duckdb"
    cfg = config_from_dict({"engine": {"name": "spark", "spark": {
        "master": "spark://head:7077", "app_name": "nightly", "conf": {"spark.executor.memory": "8g"}}}})
    assert cfg.engine.name == "spark"
    assert cfg.engine.spark.master == "spark://head:7077"
    assert cfg.engine.spark.conf == {"spark.executor.memory": "8g"}
    assert load_config(ROOT / "fleetfault.toml").engine.spark.master == "local[*]"


def test_engine_section_problems_are_reported_at_load():
    with pytest.raises(ConfigError) as info:
        config_from_dict({"engine": {"name": "postgres", "spark": {
            "master": " ", "conf": {"executor.memory": "8g", "spark.sql.session.timeZone": "Asia/Shanghai"}}}})
    text = str(info.value)
    assert "engine.name: must be one of duckdb, spark, got 'postgres'" in text
    assert "engine.spark.master: empty" in text
    assert "engine.spark.conf.executor.memory: not a Spark setting" in text
    assert "must be UTC" in text


def test_run_engine_option_overrides_the_config():
    cfg = config_from_dict({"engine": {"name": "duckdb"}})
    assert with_engine(cfg, "spark").engine.name == "spark"
    assert cfg.engine.name == "duckdb"  # the config itself stays as loaded
    with pytest.raises(ConfigError, match="must be one of duckdb, spark"):
        with_engine(cfg, "sprak")


def test_keep_samples_is_refused_on_spark_in_one_line():
    raw = {"telemetry": {"keep_samples": True}}
    assert config_from_dict(raw).telemetry.keep_samples  # fine on DuckDB
    for make in (lambda: config_from_dict({**raw, "engine": {"name": "spark"}}),
                 lambda: with_engine(config_from_dict(raw), "spark")):
        with pytest.raises(ConfigError, match="telemetry.keep_samples: not supported with engine spark"):
            make()


def test_a_local_master_s_driver_gets_half_the_memory_unless_the_config_names_it():
    from pipeline.engine.spark_engine import local_driver_memory

    gib = 2**30
    assert local_driver_memory({}, 24 * gib) == {"spark.driver.memory": "12g"}
    assert local_driver_memory({}, 1 * gib) == {"spark.driver.memory": "1g"}  # never under Spark's own 1 g
    assert local_driver_memory({"spark.driver.memory": "3g"}, 24 * gib) == {}


def test_a_local_master_keeps_spark_s_sql_warehouse_out_of_the_working_directory(tmp_path):
    from pipeline.engine.spark_engine import local_warehouse_dir

    (where,) = local_warehouse_dir({}).values()
    assert not Path(where).resolve().is_relative_to(Path.cwd().resolve())
    assert not Path(where).resolve().is_relative_to(ROOT)
    assert local_warehouse_dir({"spark.sql.warehouse.dir": str(tmp_path)}) == {}


@pytest.mark.xdist_group("spark")
def test_the_session_s_sql_warehouse_is_not_in_the_checkout(spark):
    where = spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")
    assert not Path(where).resolve().is_relative_to(ROOT)


def test_cli_rejects_an_unknown_engine_in_one_line(cli, capsys):
    assert cli("run", "--engine", "sprak", "--data", SAMPLE) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must be one of duckdb, spark" in err[0]


# -- parity --------------------------------------------------------------------------------
def assert_same_table(ours: pl.DataFrame, theirs: pl.DataFrame, name: str) -> None:
    """Every row equal: integers and texts exactly, floats within 1e-9 relative (column-wise
    in polars: a row-by-row Python loop took tens of seconds over ``smi_hourly``)."""
    assert ours.schema == theirs.schema, f"{name}: columns or types differ"
    assert ours.height == theirs.height, f"{name}: {ours.height} rows on DuckDB, {theirs.height} on Spark"
    exact = [c for c, t in ours.schema.items() if not t.is_float()]
    ours, theirs = (f.sort(exact, nulls_last=True) if exact else f for f in (ours, theirs))
    for col, dtype in ours.schema.items():
        a, b = ours[col], theirs[col]
        if not dtype.is_float():
            assert a.equals(b, null_equal=True), f"{name}.{col} differs"
            continue
        # as pytest.approx(b, rel=1e-9, abs=1e-12), with NaN equal to NaN and null to null
        close = (a - b).abs() <= (b.abs() * 1e-9).clip(lower_bound=1e-12)
        same = ((a.is_null() & b.is_null()) | (a.is_nan() & b.is_nan()) | (a == b) | close).fill_null(False)
        if not same.all():
            i = same.arg_min()
            raise AssertionError(f"{name}.{col}: {a[i]} on DuckDB, {b[i]} on Spark")


@pytest.fixture(scope="module")
def sample_tables(tmp_path_factory):
    """The sample through the stages before stats, on DuckDB: the statistics' inputs (the
    night tests/spark_nights.py shares; copy before changing it)."""
    return sample_night("duckdb", tmp_path_factory).wh


@pytest.mark.spark
@pytest.mark.xdist_group("spark")
def test_the_stats_stage_on_spark_writes_the_same_tables(spark, sample_tables, tmp_path):
    """``fleetfault run --engine spark``'s statistics: the stage on the configured engine."""
    import json
    import shutil

    from pipeline.run import run_pipeline
    from pipeline.warehouse import Warehouse

    cfg = load_config(ROOT / "fleetfault.toml")
    # Every step, fewer groupings of the same AFR step (each costs Spark seconds): two columns,
    # and a time split (the period explode).
    cfg = dataclasses.replace(cfg, stats=dataclasses.replace(cfg.stats, afr_by=["model,batch", "quarter"]))
    tables: list[str] = []  # the stage's tables, named by the DuckDB run
    results = {}
    for engine in ("duckdb", "spark"):
        wh, out = tmp_path / engine / "wh.duckdb", tmp_path / engine / "out"
        wh.parent.mkdir()
        shutil.copy(sample_tables, wh)
        reports, _ = run_pipeline(with_engine(cfg, engine), SAMPLE, wh, out, stages=["stats"])
        assert reports[0].rows_out > 0
        with Warehouse(wh, read_only=True) as w:
            tables = tables or [r[0] for r in w.engine.rows(
                "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'stats_%' "
                "OR table_name = 'failures' ORDER BY 1", step="names")]
            frames = {t: w.engine.pl(f'SELECT * FROM "{t}"', step="read") for t in tables}
        results[engine] = frames, json.loads((out / "metrics" / "stats.json").read_text())
    (ours, our_metrics), (theirs, their_metrics) = results["duckdb"], results["spark"]
    assert ours["failures"].height > 0 and ours["stats_afr"].height > 0  # the sample has something to compare
    assert len(tables) >= 10
    for name in tables:
        assert_same_table(ours[name], theirs[name], name)
    assert our_metrics == their_metrics
