"""Where the smi stage's time goes on a fleet folder, by named step (issue 18).

Runs the inventory stage (untimed), then the smi stage with its ``gpu_days`` derivation on
a fresh warehouse, with every engine and registry statement timed by its step name (CPU
seconds of the process, DuckDB's threads included, and wall seconds). What no statement
accounts for is the stage's Python: probing files, the header plan, per-file results.
``--profile`` adds a cProfile of that Python (CPU-time clock; it slows Python ~2x).
Usage::

    nice python bench/smi_parts.py DATA [--config DATA/truth/fleetfault.toml] [--profile] [--keep W.duckdb]

``--keep`` copies the warehouse out, to time ``gpu_days`` alone on it again.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import resource
import shutil
import tempfile
import time
from pathlib import Path

import duckdb

from pipeline import warehouse
from pipeline.config import load_config
from pipeline.engine.base import Engine
from pipeline.run import run_pipeline

TABLES = ("files", "smi_hourly", "smi_headers", "quarantine", "gpu_days")


def _timed(acc: dict, fn):
    def run(self, sql, *args, step=None, **kw):
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return fn(self, sql, *args, step=step, **kw)
        finally:
            a = acc[step]
            a[0] += 1
            a[1] += time.process_time() - cpu
            a[2] += time.perf_counter() - wall
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--config", type=Path, default=None, help="default: DATA/truth/fleetfault.toml when present")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sort", default="cumulative", help="the profile's order (pstats: cumulative, tottime, ...)")
    ap.add_argument("--keep", type=Path, default=None, help="copy the warehouse here at the end")
    args = ap.parse_args()
    truth = args.data / "truth" / "fleetfault.toml"
    cfg = load_config(args.config or (truth if truth.exists() else None))
    acc: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    Engine.execute = _timed(acc, Engine.execute)
    warehouse.Warehouse._sql = _timed(acc, warehouse.Warehouse._sql)
    with tempfile.TemporaryDirectory(prefix="fleetfault-smi-parts-") as tmp:
        wh, out = Path(tmp) / "parts.duckdb", Path(tmp) / "out"
        run_pipeline(cfg, args.data, wh, out, stages=["inventory"])
        acc.clear()
        prof = cProfile.Profile(time.process_time) if args.profile else None
        cpu, wall = time.process_time(), time.perf_counter()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        if prof:
            prof.enable()
        run_pipeline(cfg, args.data, wh, out, stages=["smi"])
        if prof:
            prof.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        end = resource.getrusage(resource.RUSAGE_SELF)
        con = duckdb.connect(str(wh), read_only=True)
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}
        con.close()
        if args.keep:
            shutil.copyfile(wh, args.keep)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"smi stage + gpu_days: {cpu:.1f} s CPU, {wall:.1f} s wall, peak RSS {rss:.0f} MiB; {counts}")
    # (system time and minor page faults: memory handed back and touched again shows here)
    print(f"  user {end.ru_utime - ru.ru_utime:.2f} s, system {end.ru_stime - ru.ru_stime:.2f} s, "
          f"{end.ru_minflt - ru.ru_minflt} minor page faults, load {os.getloadavg()[0]:.1f}")
    stmts = 0.0
    for step, (n, c, w) in sorted(acc.items(), key=lambda kv: -kv[1][1]):
        stmts += c
        if c >= 0.01:
            print(f"{n:6d} statements  {c:8.2f} s CPU  {w:8.2f} s wall  {step}")
    print(f"{'':6s} rest (Python)  {cpu - stmts:8.2f} s CPU")
    if prof:
        pstats.Stats(prof).sort_stats(args.sort).print_stats(40)


if __name__ == "__main__":
    main()
