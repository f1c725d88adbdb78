"""Benchmark: ``fleetfault simulate`` time and peak memory, and what a 10,000-GPU year costs.

Runs the simulator in a fresh child process per size (so each peak RSS is that run's alone),
reports wall time, CPU time, peak RSS, rows and bytes written, then extrapolates linearly in
telemetry rows (the writer's work is one vectorized pass per host and week of samples, so
time is proportional to rows; memory is not: the history grows with GPUs x days, the
per-host working set does not).

Run: ``.venv/bin/python bench/bench_simulate.py [--sizes 500x30,2000x30] [--interval 600]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, resource, sys, time
from pipeline.simulate import simulate
gpus, days, interval, out = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
t = time.perf_counter(); c = time.process_time()
sim = simulate(gpus, days, 1, out, interval=interval)
print(json.dumps({"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "hosts": len(sim.hosts), "failures": len(sim.failure_rows), "tickets": len(sim.service_rows)}))
"""


def run(gpus: int, days: int, interval: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "fleet"
        proc = subprocess.run([sys.executable, "-c", CHILD, str(gpus), str(days), str(interval), str(out)],
                              check=True, capture_output=True, text=True)
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        files = [p for p in out.rglob("*") if p.is_file()]
        res["files"] = len(files)
        res["bytes"] = sum(p.stat().st_size for p in files)
    res["rows"] = gpus * days * 86400 / interval
    res.update(gpus=gpus, days=days, interval=interval)
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500x30,2000x30", help="GPUSxDAYS,... (default 500x30,2000x30)")
    ap.add_argument("--interval", type=float, default=600.0, help="seconds between samples (default 600)")
    ap.add_argument("--target", default="10000x365", help="size to extrapolate to (default 10000x365)")
    ap.add_argument("--target-interval", type=float, default=300.0, help="interval of the target (default 300)")
    args = ap.parse_args(argv)
    results = []
    for size in args.sizes.split(","):
        g, d = (int(x) for x in size.split("x"))
        t0 = time.perf_counter()
        r = run(g, d, args.interval)
        r["child_wall_s"] = time.perf_counter() - t0
        results.append(r)
        print(f"{g:>6} GPUs x {d:>3} days @ {args.interval:.0f}s: {r['rows'] / 1e6:6.2f} M rows, "
              f"wall {r['wall_s']:7.1f} s, cpu {r['cpu_s']:7.1f} s ({1e6 * r['cpu_s'] / r['rows']:.1f} us/row), "
              f"peak RSS {r['peak_rss_mb']:6.0f} MB, {r['files']} files, {r['bytes'] / 1e6:.1f} MB written, "
              f"{r['failures']} failures, {r['tickets']} tickets", flush=True)
    big = max(results, key=lambda r: r["rows"])
    tg, td = (int(x) for x in args.target.split("x"))
    rows = tg * td * 86400 / args.target_interval
    cpu = big["cpu_s"] / big["rows"] * rows
    size = big["bytes"] / big["rows"] * rows
    print(f"extrapolated {tg} GPUs x {td} days @ {args.target_interval:.0f}s: {rows / 1e9:.2f} G rows, "
          f"~{cpu / 3600:.1f} CPU-hours, ~{size / 1e9:.0f} GB on disk; peak RSS grows only with the event "
          f"history (see the two sizes above), not with rows")


if __name__ == "__main__":
    main()
