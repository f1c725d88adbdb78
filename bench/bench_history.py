"""Acceptance bench for the ingest's speed on the shape fleets write (issue 18).

Fleets write one nvidia-smi log and one kernel log per host and day. On such a fleet this
times, in one process and one run:

* ``bare smi`` / ``bare kernel``: ONE DuckDB ``read_csv`` of every line of every telemetry
  (kernel) file, all-varchar, one column, no quoting: what reading the bytes costs;
* ``smi`` / ``xid``: the nightly job's stages on a fresh warehouse (inventory loaded first,
  untimed), each with the derivation run.py runs after it (``gpu_days``, ``xid_events``).

It prints each time and the ratios stage / bare (the issue's target: within 10x each on a
512-GPU x 120-day fleet; smi + xid within 6 minutes on 2 cores for 2,000 GPUs x 365 days).
The bare reads run twice (before and after the stages) and the faster counts, so the page
cache favours the baseline, not the stages.

Run::

    nice .venv/bin/python bench/bench_history.py --data /tmp/f512 \
        --simulate "--gpus 512 --days 120 --seed 7 --daily-dmesg-share 1"

``--simulate`` writes the fleet with ``fleetfault simulate`` first when ``--data`` does not
exist yet (one telemetry file per host and day; ``--daily-dmesg-share 1`` makes the kernel
logs one file per host and day too).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]


def _files(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*") if p.is_file())


def bare_read(files: list[str]) -> tuple[float, int, float]:
    """Wall seconds, lines and CPU seconds (the process's, DuckDB's threads included) for
    one all-varchar ``read_csv`` of every line of ``files``."""
    con = duckdb.connect()
    t0, c0 = time.perf_counter(), time.process_time()
    n = con.sql(
        "SELECT count(*) FROM read_csv($files, columns={'line': 'VARCHAR'}, header=false, delim=chr(1), "
        "quote='', escape='', auto_detect=false, null_padding=true, ignore_errors=true, "
        "strict_mode=false, filename=true)",
        params={"files": files},
    ).fetchall()[0][0]
    return time.perf_counter() - t0, n, time.process_time() - c0


def stage_seconds(data: Path, work: Path, config: Path | None) -> dict[str, tuple[float, float]]:
    """Wall and CPU seconds of the smi and xid stages (run.py's order and derivations) on a
    new warehouse."""
    from pipeline.config import load_config
    from pipeline.run import run_pipeline

    cfg = load_config(config)
    wh, out = work / "bench.duckdb", work / "out"
    run_pipeline(cfg, data, wh, out, stages=["inventory"])
    times = {}
    for stage in ("smi", "xid"):
        t0, c0 = time.perf_counter(), time.process_time()
        run_pipeline(cfg, data, wh, out, stages=[stage])
        times[stage] = (time.perf_counter() - t0, time.process_time() - c0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="the fleet's input folder")
    ap.add_argument("--simulate", default="", help="fleetfault simulate options, used when --data is missing")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--config", type=Path, default=None,
                    help="fleetfault.toml (default: DATA/truth/fleetfault.toml when simulate wrote one: it names "
                         "the fields of the hosts that log without a header, as a site's config would; "
                         "without it their files are quarantined as no_header)")
    args = ap.parse_args()
    if not args.data.exists():
        if not args.simulate:
            sys.exit(f"{args.data} does not exist; give --simulate OPTIONS to write it")
        subprocess.run([sys.executable, "-m", "pipeline.cli", "simulate", *shlex.split(args.simulate),
                        "--out", str(args.data), "-q"], check=True, cwd=ROOT)
    truth = args.data / "truth" / "fleetfault.toml"
    config = args.config or (truth if truth.exists() else None)
    print(f"config: {config or 'defaults'}")
    smi_files, kernel_files = _files(args.data / "telemetry"), _files(args.data / "kernel")
    gz = [f for f in smi_files + kernel_files if f.endswith(".gz")]
    load = [os.getloadavg()[0]]
    print(f"{len(smi_files)} telemetry files, {len(kernel_files)} kernel files ({len(gz)} gzipped)")
    bare = {"smi": [bare_read(smi_files)], "xid": [bare_read(kernel_files)]}
    with tempfile.TemporaryDirectory(prefix="fleetfault-history-") as tmp:
        stages = stage_seconds(args.data, Path(tmp), config)
    bare["smi"].append(bare_read(smi_files))
    bare["xid"].append(bare_read(kernel_files))
    load.append(os.getloadavg()[0])
    result = {"data": str(args.data), "config": str(config or ""), "telemetry_files": len(smi_files), "kernel_files": len(kernel_files)}
    for stage in ("smi", "xid"):
        b_s, lines, _ = min(bare[stage])
        b_cpu = min(b[2] for b in bare[stage])
        wall, cpu = stages[stage]
        result[stage] = {"stage_s": round(wall, 2), "bare_s": round(b_s, 2), "lines": lines,
                         "ratio": round(wall / b_s, 1), "stage_cpu_s": round(cpu, 2), "bare_cpu_s": round(b_cpu, 2),
                         "cpu_ratio": round(cpu / b_cpu, 1)}
        print(f"{stage:4s} stage {wall:8.1f} s ({cpu:8.1f} s CPU)   bare read_csv {b_s:6.2f} s ({b_cpu:6.2f} s CPU, "
              f"{lines:,} lines)   ratio {wall / b_s:5.1f}x wall, {cpu / b_cpu:5.1f}x CPU")
    total = stages["smi"][0] + stages["xid"][0]
    result["load_avg_1min"] = [round(x, 1) for x in load]
    result["smi_plus_xid_s"] = round(total, 1)
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(f"smi + xid: {total:.1f} s ({total / 60:.1f} min); peak RSS {result['peak_rss_mib']} MiB; "
          f"1-minute load average {load[0]:.1f} at the start, {load[1]:.1f} at the end")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
