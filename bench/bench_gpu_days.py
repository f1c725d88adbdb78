"""The ``gpu_days`` step alone on a warehouse that holds ``smi_hourly`` (issue 18).

Runs :func:`~pipeline.ingest.telemetry.gpu_days.gpu_days_sql` (this tree's, or the one of
git revision ``--rev``) into a temporary table, on a scratch DuckDB that attaches the
warehouse read-only, with the warehouse's memory limit (40% of RAM unless ``--memory``).
Prints its CPU seconds (the process's, DuckDB's threads included), wall seconds, peak RSS
and the peak size of DuckDB's temp directory (what it spilled), sampled every 0.2 s.

Usage::

    nice python bench/bench_gpu_days.py WAREHOUSE.duckdb [--rev GITREV] [--memory 2GB] [--scratch DIR]

A warehouse of a year: ``bench/smi_parts.py DATA --keep W.duckdb`` on the 2,000 x 365 fleet.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import duckdb

from pipeline.engine.dialect import DuckDBDialect
from pipeline.vocab.sql import literal

ROOT = Path(__file__).resolve().parents[1]


def step_sql(rev: str | None) -> str:
    """``gpu_days_sql`` of this tree, or of git revision ``rev``."""
    if rev is None:
        from pipeline.ingest.telemetry.gpu_days import gpu_days_sql
    else:
        text = subprocess.run(["git", "show", f"{rev}:pipeline/ingest/telemetry/gpu_days.py"], cwd=ROOT,
                              check=True, capture_output=True, text=True).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(text)
        try:
            spec = importlib.util.spec_from_file_location("gpu_days_at_rev", f.name)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        finally:
            os.unlink(f.name)
        gpu_days_sql = mod.gpu_days_sql
    return gpu_days_sql(DuckDBDialect())


def _dir_bytes(folder: Path) -> int:
    try:
        return sum(p.stat().st_size for p in folder.iterdir())
    except FileNotFoundError:
        return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("warehouse", type=Path)
    ap.add_argument("--rev", default=None, help="take gpu_days_sql from this git revision (default: this tree)")
    ap.add_argument("--memory", default=None, help="DuckDB memory_limit (default: 40%% of RAM, as the warehouse)")
    ap.add_argument("--scratch", type=Path, default=None, help="where the temp directory goes (default: TMPDIR)")
    args = ap.parse_args()
    sql = step_sql(args.rev)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    memory = args.memory or f"{max(total * 0.4 / 2**30, 1.0):.1f}GB"
    with tempfile.TemporaryDirectory(dir=args.scratch, prefix="bench-gpu-days-") as tmp:
        spill = Path(tmp) / "spill"
        con = duckdb.connect(str(Path(tmp) / "scratch.duckdb"))
        con.execute(f"SET memory_limit = {literal(memory)}")
        con.execute(f"SET temp_directory = {literal(str(spill))}")
        con.execute(f"ATTACH {literal(str(args.warehouse))} AS wh (READ_ONLY)")
        con.execute("USE wh")
        peak, stop = [0], threading.Event()

        def watch() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _dir_bytes(spill))
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        con.execute(f"CREATE TEMP TABLE gpu_days_bench AS {sql}")
        r1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - w0
        stop.set()
        watcher.join()
        rows = con.execute("SELECT count(*) FROM gpu_days_bench").fetchall()[0][0]
        con.close()
    print(f"gpu_days ({args.rev or 'this tree'}): {rows:,} rows; user {r1.ru_utime - r0.ru_utime:.1f} s, "
          f"system {r1.ru_stime - r0.ru_stime:.1f} s, wall {wall:.1f} s; peak temp dir {peak[0] / 2**30:.2f} GiB; "
          f"peak RSS {r1.ru_maxrss / 2**20:.2f} GiB; memory_limit {memory}")


if __name__ == "__main__":
    main()
