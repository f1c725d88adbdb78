"""Benchmark: the telemetry and kernel-log ingest on Spark local[1], local[2] and DuckDB.

Simulates a fleet (``fleetfault simulate``: one telemetry and one kernel file per host and
day), then, on the same files:

* ``duckdb``: the single-machine job's ``inventory``, ``smi`` and ``xid`` stages into a
  DuckDB warehouse (stage times from the run's own report);
* ``spark local[N]``: for each ``--masters`` entry, in a fresh process (one Spark session
  each), :func:`pipeline.engine.spark_ingest.ingest` of the ``xid`` and ``smi`` stages into
  the Parquet table layer; the session start (with its Python workers started and the
  parsers imported in them) is timed apart, and a second ingest of the unchanged files (the
  registry skips them all) is timed as ``rerun``.

Spark's time here is the parse (the same parser code in every engine) plus its per-job and
per-file overheads: the speed-up of local[2] over local[1] is what a second core buys, and
the gap to DuckDB is that overhead, which a cluster's many cores have to pay back.

Run: ``nice python bench/bench_spark.py --gpus 64 --days 30 [--interval 600] [--masters local[1],local[2]]``
(every host writes one kernel file a day unless ``--daily-dmesg-share`` says otherwise)
(``--data DIR`` reuses a simulated fleet; ``--json FILE`` keeps the numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _config(data: Path):
    from pipeline.config import load_config

    own = data / "truth" / "fleetfault.toml"  # the simulator's config for its fleet (sites, zones)
    return load_config(own if own.exists() else ROOT / "fleetfault.toml")


def _zones(cfg, data: Path) -> dict[str, str]:
    import polars as pl

    from pipeline.vocab.hosts import host_key

    inv = pl.read_csv(data / "inventory.csv", columns=["host", "site"], infer_schema=False)
    return {host_key(h): cfg.site_tz(s) for h, s in inv.unique("host").iter_rows() if h}


def _files(data: Path, source: str) -> int:
    return sum(1 for p in (data / source).rglob("*") if p.is_file())


def run_duckdb(data: Path, work: Path) -> dict:
    from pipeline.run import run_pipeline

    t0 = time.perf_counter()
    reports, _ = run_pipeline(_config(data), data, work / "wh.duckdb", work / "out", stages=["inventory", "smi", "xid"])
    by = {r.stage: r for r in reports}
    return {"engine": "duckdb", "start_s": 0.0, "smi_s": by["smi"].seconds, "xid_s": by["xid"].seconds,
            "rows": by["smi"].rows_read + by["xid"].rows_read, "total_s": round(time.perf_counter() - t0, 1)}


def _warm(batches):
    import pipeline.ingest.telemetry  # noqa: F401
    import pipeline.ingest.kernel  # noqa: F401

    yield from batches


def run_spark(data: Path, work: Path, master: str) -> dict:
    """In this process: one session, both stages, then the rerun."""
    from pipeline.config import SparkSettings
    from pipeline.engine.parquet_tables import ParquetTableStore
    from pipeline.engine.spark_ingest import ingest
    from pipeline.engine.spark_engine import spark_session

    cfg, zones = _config(data), _zones(_config(data), data)
    t0 = time.perf_counter()
    spark = spark_session(SparkSettings(master=master, app_name="fleetfault-bench", conf={"spark.ui.enabled": "false"}))
    # Start the Python workers and import the parsers in each (what the first ingest of a
    # session would pay): counted with the session start, not the ingest.
    slots = spark.sparkContext.defaultParallelism
    spark.range(slots, numPartitions=slots).mapInArrow(_warm, "id BIGINT").count()
    out = {"engine": f"spark {master}", "start_s": round(time.perf_counter() - t0, 1)}
    store = ParquetTableStore(spark, str(work / "tables"))
    rows = 0
    for stage in ("xid", "smi"):
        t = time.perf_counter()
        res = ingest(spark, store, stage, data, cfg, zones=zones)
        out[f"{stage}_s"] = round(time.perf_counter() - t, 1)
        rows += res.rows_read
    t = time.perf_counter()
    again = [ingest(spark, store, stage, data, cfg, zones=zones) for stage in ("xid", "smi")]
    out["rerun_s"] = round(time.perf_counter() - t, 1)
    assert all(r.unchanged == r.files for r in again), "the rerun found changed files"
    out["rows"] = rows
    out["total_s"] = round(time.perf_counter() - t0, 1)
    spark.stop()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--interval", type=float, default=600.0, help="seconds between nvidia-smi samples")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--daily-dmesg-share", type=float, default=1.0,
                    help="share of hosts writing one kernel file a day (the many-small-files case)")
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--data", type=Path, help="an existing simulated fleet (else one is written)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run one engine in this process
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        result = run_duckdb(args.data, args.work) if args.worker == "duckdb" else run_spark(args.data, args.work, args.worker)
        print("RESULT " + json.dumps(result))
        return

    with tempfile.TemporaryDirectory(prefix="bench_spark_") as tmp:
        tmp = Path(tmp)
        data = args.data
        if data is None:
            from pipeline.simulate.writer import simulate

            data = tmp / "fleet"
            t = time.perf_counter()
            simulate(args.gpus, args.days, args.seed, data, interval=args.interval,
                     daily_dmesg_share=args.daily_dmesg_share)
            print(f"simulated {args.gpus} GPUs x {args.days} days in {time.perf_counter() - t:.0f}s: "
                  f"{_files(data, 'telemetry')} telemetry and {_files(data, 'kernel')} kernel files", flush=True)
        results = []
        for engine in ["duckdb", *args.masters.split(",")]:
            work = tmp / engine.replace("[", "_").replace("]", "")
            work.mkdir()
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            proc = subprocess.run([sys.executable, __file__, "--worker", engine, "--data", str(data), "--work", str(work)],
                                  capture_output=True, text=True, env=env)
            line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            if proc.returncode or not line:
                sys.exit(f"{engine} failed:\n{proc.stderr[-3000:]}")
            results.append(json.loads(line[0][7:]))
            print(json.dumps(results[-1]), flush=True)
    print("\n| engine | session start s | xid s | smi s | xid + smi s | rerun (nothing new) s |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['engine']} | {r['start_s']} | {r['xid_s']} | {r['smi_s']} | {r['xid_s'] + r['smi_s']:.1f} | "
              f"{r.get('rerun_s', '')} |")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results}, indent=2))


if __name__ == "__main__":
    main()
