"""Benchmark: the smi stage on many small telemetry files against one bare DuckDB read.

Fleets write one nvidia-smi file per host and day. This times, in one run (so contention
on a shared machine hits both sides alike):

- ``bare``: ONE DuckDB ``read_csv`` of every line of every telemetry file, all text, one
  column per line, nothing parsed or cleaned (the floor for reading those files);
- ``stage``: the smi stage as ``fleetfault run --stage inventory --stage smi`` runs it, into
  a fresh warehouse: registry and sha256 per file, header plan, reading, cleaning, hourly
  facts, insert, quarantine, then the ``gpu_days`` derivation. The inventory stage runs
  first and is not timed.

``bare`` runs before and after the stage (the file cache is warm for both: the first
untimed pass warms it); its median is the reference. Prints one JSON line; the ratio
``stage / bare`` is the figure (target: within 10x). Usage::

    nice python bench/bench_smi_files.py /work/benchdata/f512x120
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench_smi import stage_on_files  # (run as a script: bench/ is on the path)


def bare(data: Path) -> dict:
    """Every line of every telemetry file through one DuckDB ``read_csv``, as text."""
    import duckdb

    files = sorted(str(p) for p in (data / "telemetry").glob("*/*") if p.is_file())
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    t, cpu = time.perf_counter(), time.process_time()
    # \x01 never occurs in a log: each line is one text cell; gzip by extension.
    n, chars = con.execute(
        "SELECT count(*), sum(length(line)) FROM read_csv(?, columns={'line': 'VARCHAR'}, header=false, "
        "delim='\x01', quote='', escape='', auto_detect=false, null_padding=true, ignore_errors=true, "
        "strict_mode=false)", [files]).fetchone()
    return {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - cpu, "files": len(files),
            "lines": n, "chars": chars}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path, help="a data folder in the input layout (fleetfault simulate --out)")
    ap.add_argument("--config", type=Path, default=None,
                    help="fleetfault.toml (default: DATA/truth/fleetfault.toml, as simulate writes it)")
    args = ap.parse_args()
    config = args.config or args.data / "truth" / "fleetfault.toml"
    bare(args.data)  # warm the file cache for both sides
    before = bare(args.data)
    st = stage_on_files(args.data, config)  # inventory untimed; smi stage and gpu_days timed
    after = bare(args.data)
    ref = statistics.median([before["seconds"], after["seconds"]])
    ref_cpu = statistics.median([before["cpu_seconds"], after["cpu_seconds"]])
    print(json.dumps({
        "bare_s": [round(before["seconds"], 2), round(after["seconds"], 2)],
        "bare_cpu_s": [round(before["cpu_seconds"], 2), round(after["cpu_seconds"], 2)],
        "bare_lines": before["lines"], "files": before["files"], "stage": st,
        "stage_over_bare": round(st["wall_s"] / ref, 1), "stage_over_bare_cpu": round(st["cpu_s"] / ref_cpu, 1),
        "load_avg": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
