"""The engine seam: named steps, one error type, Spark only on request."""

from __future__ import annotations

import builtins
from datetime import datetime

import polars as pl
import pytest

from pipeline.engine import DuckDBEngine, get_engine
from pipeline.errors import DependencyMissing, EngineError, UsageError


def test_duckdb_engine_runs_named_steps_and_registers_frames():
    eng = get_engine("duckdb")
    eng.register("units", pl.DataFrame({"id": ["a", "b"], "n": [1, 2]}))
    assert eng.rows("SELECT sum(n) FROM units", step="sum") == [(3,)]
    eng.create_table("doubled", "SELECT id, n * 2 AS n FROM units")
    assert eng.pl("SELECT * FROM doubled ORDER BY id", step="read")["n"].to_list() == [2, 4]
    eng.execute("CREATE TEMP TABLE t (x INTEGER)", step="ddl")
    assert eng.rows("SELECT count(*) FROM t", step="count") == [(0,)]


def test_a_failing_step_names_itself_and_shows_the_sql():
    eng = DuckDBEngine()
    with pytest.raises(EngineError) as info:
        eng.rows("SELECT no_such_column FROM (SELECT 1 AS x)", step="stats: afr by model")
    assert info.value.step == "stats: afr by model"
    assert "SELECT no_such_column" in str(info.value) and "--- SQL ---" in str(info.value)


def test_dialect_periods_cover_start_through_end():
    eng = DuckDBEngine()
    d = eng.dialect
    sql = (f"SELECT period_start FROM (SELECT {d.timestamp(datetime(2025, 1, 15))} AS a, "
           f"{d.timestamp(datetime(2025, 7, 1))} AS b) AS s {d.explode_periods('a', 'b', 'quarter')} ORDER BY 1")
    assert [r[0] for r in eng.rows(sql, step="periods")] == [datetime(2025, 1, 1), datetime(2025, 4, 1), datetime(2025, 7, 1)]


def test_unknown_engine_is_a_usage_error():
    with pytest.raises(UsageError, match="choose one of duckdb, spark"):
        get_engine("postgres")


def test_spark_without_pyspark_says_which_extra(monkeypatch):
    real_import = builtins.__import__

    def no_pyspark(name, *args, **kwargs):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ImportError("No module named 'pyspark'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyspark)
    with pytest.raises(DependencyMissing, match=r"pip install 'fleetfault\[spark\]'"):
        get_engine("spark")


def test_core_import_does_not_load_spark():
    import subprocess
    import sys

    code = "import sys, pipeline.stats, pipeline.engine; assert 'pyspark' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
    # The whole DuckDB path: the nightly job's module and the command line with every command.
    code = ("import pipeline.run, pipeline.cli; import sys; "
            "assert not any(m.startswith('pyspark') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.spark
@pytest.mark.xdist_group("spark")
def test_spark_and_duckdb_give_the_same_rates(spark):
    import pipeline.stats as st
    from pipeline.stats.sources import from_frame

    frame = st.lifetime_frame(pl.DataFrame({
        "id": [f"g{i}" for i in range(40)],
        "start": [f"2024-{1 + i % 12:02d}-01" for i in range(40)],
        "end": [f"2025-{1 + i % 12:02d}-15" for i in range(40)],
        "failed": [str(int(i % 3 == 0)) for i in range(40)],
        "vendor": ["Dell" if i % 2 else "HPE" for i in range(40)],
    }))
    spark = get_engine("spark", spark=spark)
    for by in (["vendor"], ["vendor", "quarter"], ["month"]):
        ours = st.afr(from_frame(frame), by=by).sort(by)
        theirs = st.afr(from_frame(frame, spark), by=by).sort(by)
        assert ours["failures"].to_list() == theirs["failures"].to_list()
        assert ours["gpu_days"].to_list() == pytest.approx(theirs["gpu_days"].to_list())

    # The exposure steps too: failures and lifetimes from inventory and tickets.
    from pipeline.config import Stats
    from tests.test_stats_exposure import gpu, ticket

    inv = pl.DataFrame([gpu("S1", datetime(2024, 6, 1), datetime(2025, 2, 1)), gpu("S2", datetime(2025, 2, 1)),
                        gpu("S3", datetime(2023, 1, 1), slot=1), gpu("S4", datetime(2023, 1, 1), slot=2)],
                       schema=["serial", "model", "vendor", "host", "slot", "site", "batch", "installed_at", "removed_at"],
                       orient="row")
    tickets = pl.DataFrame([ticket("T1", datetime(2025, 1, 31), "S1"), ticket("T2", datetime(2025, 5, 1), "S3"),
                            ticket("T3", datetime(2024, 5, 1), "S4")],
                           schema=["ticket_id", "opened_at", "serial", "part_code", "action_code", "symptom_code", "closed_at"],
                           orient="row")
    cfg = Stats(window_start="2025-01-01", window_end="2025-12-31")
    results = []
    for engine in (get_engine("duckdb"), spark):
        engine.register("inventory", inv)
        engine.register("tickets", tickets)
        results.append(st.lifetimes(engine, cfg).frame().select("id", "entry_at", "exit_at", "failed", "gpu_days"))
    assert results[0].to_dicts() == results[1].to_dicts()


def _repair_quantiles(engine) -> list[tuple]:
    d = engine.dialect
    engine.register("hours", pl.DataFrame({"h": [1.0, 2.0, 3.0, 10.0]}))
    return engine.rows(f"SELECT {d.quantile('h', 0.5)}, {d.quantile('h', 0.9)} FROM hours", step="quantiles")


def test_dialect_quantile_interpolates_between_rows():
    assert _repair_quantiles(get_engine("duckdb")) == [(2.5, pytest.approx(7.9))]


@pytest.mark.spark
def test_spark_quantile_is_duckdbs():
    pytest.importorskip("pyspark")
    assert _repair_quantiles(get_engine("spark")) == _repair_quantiles(get_engine("duckdb"))


def test_the_engine_hands_out_pandas_typed_as_duckdb_does():
    eng = DuckDBEngine()
    sql = ("SELECT * FROM (VALUES (DATE '2025-01-02', 1::INTEGER, 2::BIGINT, true, 1.0::DOUBLE, 'a'), "
           "(NULL, NULL, 3, NULL, NULL, NULL)) AS t(d, i, j, b, x, s)")
    import pandas.testing

    pandas.testing.assert_frame_equal(eng.pandas(sql, step="pandas"), eng.con.sql(sql).df())
