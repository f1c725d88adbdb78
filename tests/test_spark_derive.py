"""The derived steps on Spark (``fleetfault run --engine spark``): ``gpu_days``, ``xid_events``
(de-duplication and linking), the latest version of each ticket (and so ``tickets``) and
``failures`` come out table for table the same as on DuckDB.

The sample's night up to ``link`` on DuckDB and on Spark (the ingest on Spark too) are the
ones tests/spark_nights.py shares with the ingest and statistics parity tests; here
``failures`` is built on each engine over a copy of its warehouse, and the tables compared.
That a rerun adds nothing is tests/test_spark_run.py's (a second night on Spark, tickets
included). Shares the one local[2] session of the ``spark`` fixture, on the ``spark`` xdist
worker.
"""

from __future__ import annotations

import pytest

from pipeline.config import load_config, with_engine
from tests.conftest import ROOT
from tests.spark_nights import SAMPLE, sample_night
from tests.test_spark import assert_same_table

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


def _tables(wh_path, names) -> dict:
    from pipeline.warehouse import Warehouse

    with Warehouse(wh_path, read_only=True) as wh:
        return {t: wh.engine.pl(f"SELECT * FROM {t}", step="read") for t in names}


@pytest.fixture(scope="module")
def nights(spark, tmp_path_factory):
    """The derived tables of the sample's night on DuckDB and on Spark (``failures`` built
    on each engine), and the SQL steps Spark ran."""
    from pipeline.engine.base import Engine
    from pipeline.engine.spark_engine import SparkEngine

    tmp = tmp_path_factory.mktemp("spark_derive")
    out = {}
    on_spark = list(sample_night("spark", tmp_path_factory).steps)

    def spy(self, sql, *, step):
        on_spark.append(step)
        return Engine.execute(self, sql, step=step)

    for engine in ("duckdb", "spark"):
        wh = sample_night(engine, tmp_path_factory).copy_to(tmp / engine)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(SparkEngine, "execute", spy)
            _failures(with_engine(CFG, engine), wh, tmp / engine / "out")
        out[engine] = _tables(wh, DERIVED)
    return out["duckdb"], out["spark"], on_spark


def test_derived_tables_are_the_same_on_spark(nights):
    ours, theirs, on_spark = nights
    for table, step in STEPS.items():
        assert step in on_spark, f"{table}: its SQL did not run on Spark"
    assert ours["xid_events"]["serial"].drop_nulls().len() > 0  # linked events to compare
    assert ours["failures"].height > 0 and ours["gpu_days"].height > 0 and ours["tickets"].height > 0
    for table in DERIVED:
        assert_same_table(ours[table], theirs[table], table)
