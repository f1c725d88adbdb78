"""Benchmark: the derived steps (gpu_days, xid_events, latest ticket versions, failures) on
DuckDB and on Spark, over the same warehouse.

The stages before them (``inventory`` .. ``link``) run once on DuckDB; each engine then
rebuilds the derived tables on its own copy of that warehouse. For Spark, handing a step's
input tables over (Arrow, from the warehouse: :meth:`pipeline.run.RunContext.engine_for`)
is timed apart from the step itself (its SQL, and writing the rows back). The session's
start is not in the figures.

Run: ``nice python bench/bench_spark_derive.py [--data data/sample] [--master local[2]]
[--json FILE]`` (``--data``: a fleet in the input layout, e.g. from ``fleetfault simulate``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UP_TO_LINK = ["inventory", "smi", "xid", "tickets", "normalize", "link"]


def _steps(cfg):
    """(name, input tables, function(wh, engine) -> rows) of each derived step."""
    from pipeline.ingest.telemetry import gpu_days
    from pipeline.ingest.tickets import latest_sql
    from pipeline.link import xid
    from pipeline.stats import failures

    def latest(wh, engine):
        return engine.arrow(latest_sql(dialect=engine.dialect), step="latest ticket versions").num_rows

    return [
        ("gpu_days", gpu_days.INPUTS, lambda wh, engine: gpu_days.derive_gpu_days(wh, engine)),
        ("xid_events", xid.INPUTS, lambda wh, engine: xid.derive_xid_events(wh, None, engine)),
        ("latest tickets", ("tickets_raw",), latest),
        ("failures", failures.INPUTS, lambda wh, engine: failures.build_failures(wh, cfg.stats, engine)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "sample")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from pipeline.config import SparkSettings, load_config
    from pipeline.engine.spark_engine import SparkEngine
    from pipeline.run import run_pipeline
    from pipeline.vocab.sql import ident
    from pipeline.warehouse import Warehouse

    own = args.data / "truth" / "fleetfault.toml"
    cfg = load_config(own if own.exists() else ROOT / "fleetfault.toml")
    work = Path(tempfile.mkdtemp(prefix="bench_spark_derive_"))
    t0 = time.perf_counter()
    run_pipeline(cfg, args.data, work / "base.duckdb", work / "out", stages=UP_TO_LINK)
    print(f"inventory..link on DuckDB: {time.perf_counter() - t0:.1f} s")

    results: dict = {"data": str(args.data), "master": args.master, "steps": {}}
    t0 = time.perf_counter()
    spark = SparkEngine(settings=SparkSettings(master=args.master, conf={"spark.ui.enabled": "false"}))
    results["spark_start_s"] = round(time.perf_counter() - t0, 1)
    for engine_name in ("duckdb", "spark"):
        path = work / f"{engine_name}.duckdb"
        shutil.copy(work / "base.duckdb", path)
        with Warehouse(path) as wh:
            for name, inputs, step in _steps(cfg):
                engine, hand = wh.engine, 0.0
                if engine_name == "spark":
                    engine, t0 = spark, time.perf_counter()
                    for table in inputs:
                        spark.register(table, wh.engine.arrow(f"SELECT * FROM {ident(table)}", step="hand over"))
                    hand = time.perf_counter() - t0
                t0 = time.perf_counter()
                rows = step(wh, engine)
                took = time.perf_counter() - t0
                results["steps"].setdefault(name, {})[engine_name] = {
                    "rows": rows, "seconds": round(took, 2), "hand_over_s": round(hand, 2)}
                print(f"{name:15s} {engine_name:7s} rows {rows:>8}  step {took:7.2f} s  hand-over {hand:6.2f} s")
    spark.spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
