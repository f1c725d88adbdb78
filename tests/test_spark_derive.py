"""The derived steps on Spark (``fleetfault run --engine spark``): ``gpu_days``, ``xid_events``
(de-duplication and linking), the latest version of each ticket (and so ``tickets``) and
``failures`` come out table for table the same as on DuckDB, and a second run adds nothing.

The night runs on DuckDB, then again on Spark over a copy of that warehouse (a rerun: the
ingest finds every file known, the derived tables are rebuilt on Spark), once, in a module
fixture; the tests only compare. Shares the one local[2] session of the ``spark`` fixture,
on the ``spark`` xdist worker.
"""

from __future__ import annotations

import shutil

import pytest
from polars.testing import assert_frame_equal

from pipeline.config import load_config, with_engine
from tests.conftest import ROOT
from tests.test_spark import SAMPLE, UP_TO_LINK, assert_same_table, sample_tables  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

CFG = load_config(ROOT / "fleetfault.toml")
DERIVED = ("gpu_days", "xid_events", "tickets", "failures")
#: What the ingest stages load: a rerun must leave them as they are.
LOADED = ("smi_hourly", "xid_raw", "gpu_map", "tickets_raw")
#: The SQL step of each derived table (``Engine.execute``'s ``step``): each must run on Spark.
STEPS = {"gpu_days": "gpu_days", "xid_events": "xid: link events to GPUs",
         "tickets": "latest ticket versions", "failures": "failures from tickets"}


def _failures(cfg, wh_path, out):
    """``failures`` as the stats stage builds it (on the configured engine), without the
    statistics that follow (their parity is tests/test_spark.py's)."""
    from pipeline.run import RunContext, open_warehouse
    from pipeline.stats.failures import INPUTS, build_failures

    with open_warehouse(cfg, wh_path) as wh:
        build_failures(wh, cfg.stats, RunContext(cfg, wh, SAMPLE, out).engine_for(INPUTS))


def _tables(wh_path, names) -> dict:
    from pipeline.warehouse import Warehouse

    with Warehouse(wh_path, read_only=True) as wh:
        return {t: wh.engine.pl(f"SELECT * FROM {t}", step="read") for t in names}


@pytest.fixture(scope="module")
def nights(spark, sample_tables, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    """The tables after the night on DuckDB, and after the same night run again on Spark over
    a copy of that warehouse (a rerun: every file is known, the derived tables are rebuilt
    on Spark), with the Spark run's stage reports and the step names Spark ran."""
    from pipeline.engine.base import Engine
    from pipeline.engine.spark_engine import SparkEngine
    from pipeline.run import run_pipeline

    tmp = tmp_path_factory.mktemp("spark_derive")
    duck, wh = tmp / "duckdb.duckdb", tmp / "spark.duckdb"
    shutil.copy(sample_tables, duck)  # inventory..link on DuckDB
    _failures(CFG, duck, tmp / "out_duckdb")
    shutil.copy(duck, wh)
    before = _tables(duck, LOADED)

    on_spark: list[str] = []

    def spy(self, sql, *, step):
        on_spark.append(step)
        return Engine.execute(self, sql, step=step)

    cfg = with_engine(CFG, "spark")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SparkEngine, "execute", spy)
        reports, _ = run_pipeline(cfg, SAMPLE, wh, tmp / "out_spark", stages=UP_TO_LINK)
        _failures(cfg, wh, tmp / "out_spark")
    return (_tables(duck, DERIVED), _tables(wh, DERIVED), on_spark, {r.stage: r for r in reports},
            before, _tables(wh, LOADED))


def test_derived_tables_are_the_same_on_spark(nights):
    ours, theirs, on_spark, _, _, _ = nights
    for table, step in STEPS.items():
        assert step in on_spark, f"{table}: its SQL did not run on Spark"
    assert ours["xid_events"]["serial"].drop_nulls().len() > 0  # linked events to compare
    assert ours["failures"].height > 0 and ours["gpu_days"].height > 0 and ours["tickets"].height > 0
    for table in DERIVED:
        assert_same_table(ours[table], theirs[table], table)


def test_a_rerun_on_spark_adds_no_rows(nights):
    _, _, _, reports, before, after = nights
    for stage in ("smi", "xid", "tickets"):
        assert reports[stage].files > 0 and reports[stage].unchanged == reports[stage].files, stage
        assert reports[stage].rows_loaded == 0, stage
    for table in LOADED:  # rows untouched: equal as stored (and fast to compare)
        assert before[table].height > 0
        assert_frame_equal(before[table], after[table], check_row_order=False, check_exact=True)
