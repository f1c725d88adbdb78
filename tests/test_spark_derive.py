"""The derived steps on Spark (``fleetfault run --engine spark``): ``gpu_days``, ``xid_events``
(de-duplication and linking), the latest version of each ticket (and so ``tickets``) and
``failures`` come out table for table the same as on DuckDB, and a second run adds nothing.

The night runs once on each engine (and once more on Spark) in a module fixture; the tests
only compare. Shares the one local[2] session of the ``spark`` fixture, on the ``spark``
xdist worker.
"""

from __future__ import annotations

import shutil

import pytest

from pipeline.config import load_config, with_engine
from tests.conftest import ROOT
from tests.test_spark import SAMPLE, UP_TO_LINK, assert_same_table, sample_tables  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

CFG = load_config(ROOT / "fleetfault.toml")
DERIVED = ("gpu_days", "xid_events", "tickets", "failures")
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


def _tables(wh_path) -> dict:
    from pipeline.warehouse import Warehouse

    with Warehouse(wh_path, read_only=True) as wh:
        return {t: wh.engine.pl(f"SELECT * FROM {t}", step="read") for t in DERIVED}


@pytest.fixture(scope="module")
def nights(spark, sample_tables, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    """The derived tables on DuckDB; on Spark (with the step names Spark ran); and on Spark
    again over the same warehouse (with that run's stage reports)."""
    from pipeline.engine.base import Engine
    from pipeline.engine.spark_engine import SparkEngine
    from pipeline.run import run_pipeline

    tmp = tmp_path_factory.mktemp("spark_derive")
    duck = tmp / "duckdb.duckdb"
    shutil.copy(sample_tables, duck)  # inventory..link on DuckDB
    _failures(CFG, duck, tmp / "out_duckdb")

    on_spark: list[str] = []

    def spy(self, sql, *, step):
        on_spark.append(step)
        return Engine.execute(self, sql, step=step)

    cfg = with_engine(CFG, "spark")
    wh, out = tmp / "spark.duckdb", tmp / "out_spark"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SparkEngine, "execute", spy)
        run_pipeline(cfg, SAMPLE, wh, out, stages=UP_TO_LINK)
        _failures(cfg, wh, out)
    first = _tables(wh)
    reports, _ = run_pipeline(cfg, SAMPLE, wh, out, stages=UP_TO_LINK)
    _failures(cfg, wh, out)
    return _tables(duck), first, on_spark, {r.stage: r for r in reports}, _tables(wh)


def test_derived_tables_are_the_same_on_spark(nights):
    ours, theirs, on_spark, _, _ = nights
    for table, step in STEPS.items():
        assert step in on_spark, f"{table}: its SQL did not run on Spark"
    assert ours["xid_events"]["serial"].drop_nulls().len() > 0  # linked events to compare
    assert ours["failures"].height > 0 and ours["gpu_days"].height > 0 and ours["tickets"].height > 0
    for table in DERIVED:
        assert_same_table(ours[table], theirs[table], table)


def test_a_rerun_on_spark_adds_no_rows(nights):
    _, first, _, reports, again = nights
    for stage in ("smi", "xid", "tickets"):
        assert reports[stage].files > 0 and reports[stage].unchanged == reports[stage].files, stage
        assert reports[stage].rows_loaded == 0, stage
    for table in DERIVED:
        assert_same_table(first[table], again[table], f"{table} (rerun)")
