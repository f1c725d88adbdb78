"""A fleet's ingest and derivation on Spark ``local[1]``, ``local[2]`` and on DuckDB, in one run (issue 19).

For each engine, on a fresh warehouse (inventory loaded first, untimed), this times the
nightly job's ``smi`` and ``xid`` stages as ``fleetfault run`` runs them: on DuckDB the
single-machine stages; on Spark the Spark ingest (files hashed and parsed as Spark tasks
into the Parquet store, the committed rows copied into the warehouse) and the steps derived
after each (``gpu_days``, ``xid_events``) on Spark SQL. Each Spark master runs in its own
process (a JVM has one master); the session's start is timed apart and not counted.

It prints each engine's seconds and the ratios: local[1] / local[2] (what the second core
buys) and Spark / DuckDB.

Run::

    nice .venv/bin/python bench/bench_spark_history.py --data /tmp/f64 \
        --simulate "--gpus 64 --days 30 --seed 7 --daily-dmesg-share 1"

``--simulate`` writes the fleet with ``fleetfault simulate`` first when ``--data`` does not
exist yet. The fleet's ``truth/fleetfault.toml`` is the config when simulate wrote one (the
fields of its headerless hosts).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("duckdb", "local[1]", "local[2]")
STAGES = ("smi", "xid")


def measure(engine: str, data: Path, work: Path, config: Path | None, extra: dict[str, str] | None = None) -> dict:
    """Seconds of the session start and of each stage (with its derivation) on ``engine``:
    ``duckdb`` or a Spark master. In this process: a Spark session already running is used
    as it is (its master wins over ``engine``)."""
    import dataclasses

    from pipeline.config import load_config, with_engine
    from pipeline.run import run_pipeline

    cfg = load_config(config)
    out = {"engine": engine, "session_s": 0.0}
    if engine != "duckdb":
        from pipeline.engine.spark_engine import spark_session

        cores = re.fullmatch(r"local\[(\d+)\]", engine)
        # as many shuffle partitions as cores (Spark's 200 default is per-task overhead here)
        conf = {"spark.sql.shuffle.partitions": cores.group(1)} if cores else {}
        spark = dataclasses.replace(cfg.engine.spark, master=engine, conf={**conf, **cfg.engine.spark.conf, **(extra or {})})
        cfg = with_engine(dataclasses.replace(cfg, engine=dataclasses.replace(cfg.engine, spark=spark)), "spark")
        t0 = time.perf_counter()
        session = spark_session(spark)
        out["session_s"] = round(time.perf_counter() - t0, 2)
        out["master"] = session.sparkContext.master
    wh = work / engine.replace("[", "").replace("]", "").replace("*", "all") / "bench.duckdb"
    run_pipeline(cfg, data, wh, wh.parent / "out", stages=["inventory"])
    for stage in STAGES:
        t0 = time.perf_counter()
        reports, _ = run_pipeline(cfg, data, wh, wh.parent / "out", stages=[stage])
        out[stage] = round(time.perf_counter() - t0, 2)
        out[f"{stage}_rows"] = sum(r.rows_loaded for r in reports)
    return out


def ratios(results: dict[str, dict]) -> dict[str, float]:
    """smi + xid seconds per engine, and local[1] / local[2], Spark / DuckDB."""
    total = {e: sum(r[s] for s in STAGES) for e, r in results.items()}
    out = {f"{e}_s": round(t, 2) for e, t in total.items()}
    if "local[1]" in total and "local[2]" in total:
        out["local[1]/local[2]"] = round(total["local[1]"] / total["local[2]"], 2)
    for e in total:
        if e != "duckdb" and "duckdb" in total:
            out[f"{e}/duckdb"] = round(total[e] / total["duckdb"], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="the fleet's input folder")
    ap.add_argument("--simulate", default="", help="fleetfault simulate options, used when --data is missing")
    ap.add_argument("--engines", default=",".join(ENGINES), help="comma-separated: duckdb and Spark masters")
    ap.add_argument("--config", type=Path, default=None, help="fleetfault.toml (default: DATA/truth/fleetfault.toml)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the Spark masters, e.g. spark.driver.memory=6g (repeatable)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: one engine, JSON on stdout
    ap.add_argument("--work", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    truth = args.data / "truth" / "fleetfault.toml"
    config = args.config or (truth if truth.exists() else None)
    extra = dict(kv.split("=", 1) for kv in args.conf)
    if args.one:
        print(json.dumps(measure(args.one, args.data, args.work, config, extra)))
        return
    if not args.data.exists():
        if not args.simulate:
            sys.exit(f"{args.data} does not exist; give --simulate OPTIONS to write it")
        subprocess.run([sys.executable, "-m", "pipeline.cli", "simulate", *shlex.split(args.simulate),
                        "--out", str(args.data), "-q"], check=True, cwd=ROOT)
        config = args.config or (truth if truth.exists() else None)
    files = {s: sum(1 for p in (args.data / s).rglob("*") if p.is_file()) for s in ("telemetry", "kernel")}
    print(f"config: {config or 'defaults'}; {files['telemetry']} telemetry files, {files['kernel']} kernel files")
    results = {}
    with tempfile.TemporaryDirectory(prefix="fleetfault-spark-history-") as tmp:
        for engine in args.engines.split(","):
            cmd = [sys.executable, __file__, "--data", str(args.data), "--one", engine, "--work", tmp]
            if config:
                cmd += ["--config", str(config)]
            cmd += [f"--conf={kv}" for kv in args.conf]
            load = os.getloadavg()[0]  # the machine is shared: the load says how much of it we had
            # stdout carries the result; stderr (Spark's log, a failure's traceback) passes through
            done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
            if done.returncode:
                sys.exit(f"{engine}: the measurement failed (exit {done.returncode}; its stderr is above)")
            results[engine] = json.loads(done.stdout.strip().splitlines()[-1])
            r = results[engine]
            r["load_1min"] = [round(load, 1), round(os.getloadavg()[0], 1)]
            print(f"{engine:9s} smi {r['smi']:8.1f} s   xid {r['xid']:8.1f} s   (session start {r['session_s']:.1f} s, "
                  f"not counted; rows {r['smi_rows']:,} + {r['xid_rows']:,}; load {r['load_1min'][0]} -> "
                  f"{r['load_1min'][1]})", flush=True)
    summary = ratios(results)
    print("  ".join(f"{k} {v}" for k, v in summary.items()))
    if args.json:
        args.json.write_text(json.dumps({"data": str(args.data), "files": files, "engines": results,
                                         "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
