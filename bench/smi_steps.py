"""Where the smi stage's CPU goes: each scratch-engine statement's CPU and wall time.

Runs the inventory and smi stages (and ``gpu_days``) on a data folder as
``bench_smi.stage_on_files`` does, with the DuckDB engine's statements timed (by their
first 60 characters; CPU is the process's, DuckDB's threads included). Usage::

    nice python bench/smi_steps.py DATA
"""

from __future__ import annotations

import collections
import sys
import time
from pathlib import Path

from bench_smi import stage_on_files  # (run as a script: bench/ is on the path)

from pipeline.engine.duckdb_engine import DuckDBEngine


def main() -> None:
    data = Path(sys.argv[1])
    acc: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    run = DuckDBEngine._execute

    def timed(self, sql):
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return run(self, sql)
        finally:
            a = acc[" ".join(sql[:60].split())]
            a[0] += 1
            a[1] += time.process_time() - cpu
            a[2] += time.perf_counter() - wall

    DuckDBEngine._execute = timed
    print(stage_on_files(data, data / "truth" / "fleetfault.toml"))
    for sql, (n, cpu, wall) in sorted(acc.items(), key=lambda kv: -kv[1][1])[:15]:
        print(f"{n:5d} statements  cpu {cpu:7.2f} s  wall {wall:7.2f} s  {sql}")


if __name__ == "__main__":
    main()
