"""bench/bench_spark_history.py on a small simulated fleet: each engine's stages run and load
the same rows, and the ratios come out of the times. Uses the one local[2] session of the
``spark`` fixture (in process, the running session is the one measured)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_spark_history", ROOT / "bench" / "bench_spark_history.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bench_times_each_engine_on_the_same_rows(spark, tmp_path, monkeypatch):
    bench = _bench()
    data = tmp_path / "fleet"
    subprocess.run([sys.executable, "-m", "pipeline.cli", "simulate", "--gpus", "8", "--days", "2", "--interval",
                    "3600", "--seed", "3", "--daily-dmesg-share", "1", "--out", str(data), "-q"], check=True, cwd=ROOT)
    config = data / "truth" / "fleetfault.toml"
    results = {e: bench.measure(e, data, tmp_path / "work", config) for e in ("duckdb", "local[2]")}
    duck, ours = results["duckdb"], results["local[2]"]
    assert duck["smi_rows"] > 0  # (two days of eight GPUs may log no Xid)
    assert (ours["smi_rows"], ours["xid_rows"]) == (duck["smi_rows"], duck["xid_rows"])
    assert ours["master"].startswith("local")
    summary = bench.ratios(results)
    assert set(summary) == {"duckdb_s", "local[2]_s", "local[2]/duckdb"}
    assert summary["local[2]/duckdb"] == pytest.approx(summary["local[2]_s"] / summary["duckdb_s"], abs=0.01)
