"""Where a Spark night's time goes: the wired ``smi`` and ``xid`` stages on one Spark master,
with the time of each phase summed (issue 19).

The phases are the Spark ingest's parse job (``spark_ingest._parse_job``: the tasks parse
and write their Parquet files; before they wrote them themselves, ``replace_partitions``: a
Spark write per table, the parse running lazily in the first), the table store's methods
(``commit``: the tasks' files published, then the registry; ``rewrite_files``: the header
plan's ``smi_headers`` write-back; ``read``), the warehouse's copy of the committed rows
(``Warehouse.adopt``), the derived steps' SQL on Spark (``SparkEngine.execute``) and the Spark
ingest as a whole (``spark_stages._ingest``: what it adds is the hash job and the task lists).
A phase the code under test lacks is left out, so the same script times an older tree.

Run::

    nice .venv/bin/python bench/bench_spark_phases.py --data /tmp/f64 --master "local[2]"

on a fleet written by ``fleetfault simulate`` (its ``truth/fleetfault.toml`` is the config).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import tempfile
import time
from pathlib import Path


def timed(totals: dict, counts: dict, owner, name: str) -> None:
    """Wrap ``owner.name`` so that its seconds and calls add up in ``totals``/``counts``."""
    real = getattr(owner, name)
    label = f"{getattr(owner, '__name__', owner)}.{name}"

    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            totals[label] += time.perf_counter() - t0
            counts[label] += 1

    setattr(owner, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="the fleet's input folder")
    ap.add_argument("--master", default="local[2]", help="the Spark master")
    args = ap.parse_args()

    from pipeline import warehouse
    from pipeline.config import load_config, with_engine
    from pipeline.engine import parquet_tables, spark_engine, spark_ingest, spark_stages
    from pipeline.run import run_pipeline

    truth = args.data / "truth" / "fleetfault.toml"
    cfg = load_config(truth if truth.exists() else None)
    cores = args.master[len("local["):-1] if args.master.startswith("local[") else None
    conf = {"spark.sql.shuffle.partitions": cores} if cores and cores.isdigit() else {}
    spark = dataclasses.replace(cfg.engine.spark, master=args.master, conf={**conf, **cfg.engine.spark.conf})
    cfg = with_engine(dataclasses.replace(cfg, engine=dataclasses.replace(cfg.engine, spark=spark)), "spark")
    t0 = time.perf_counter()
    spark_engine.spark_session(spark)
    print(f"session start {time.perf_counter() - t0:.1f} s (not counted)")

    totals: dict[str, float] = collections.defaultdict(float)
    counts: dict[str, int] = collections.Counter()
    store = parquet_tables.ParquetTableStore
    for owner, name in [(spark_ingest, "_parse_job"), (store, "replace_partitions"), (store, "commit"),
                        (store, "rewrite_files"), (store, "read"), (warehouse.Warehouse, "adopt"),
                        (spark_engine.SparkEngine, "execute"), (spark_stages, "_ingest")]:
        if hasattr(owner, name):
            timed(totals, counts, owner, name)
    with tempfile.TemporaryDirectory(prefix="fleetfault-spark-phases-") as tmp:
        wh = Path(tmp) / "wh.duckdb"
        run_pipeline(cfg, args.data, wh, Path(tmp) / "out", stages=["inventory"])
        for stage in ("smi", "xid"):
            t0 = time.perf_counter()
            run_pipeline(cfg, args.data, wh, Path(tmp) / "out", stages=[stage])
            print(f"{stage} (with its derived step) {time.perf_counter() - t0:.1f} s")
    for label in sorted(totals, key=totals.get, reverse=True):
        print(f"{totals[label]:8.1f} s  {counts[label]:4d} calls  {label}")


if __name__ == "__main__":
    main()
