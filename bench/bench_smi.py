"""Benchmark: nvidia-smi CSV ingest on >= 1 GB of generated logs.

Measures, in one run and each as the median of ``--repeat`` runs in a fresh process (so
peak RSS is that method's own):

- ``floor``: reading the file's bytes in Python (the I/O floor);
- ``duckdb_bare``: a bare streaming DuckDB aggregation of the same file (auto-detected
  CSV, GPU x hour groups, max of the same raw columns the facts use, no cleaning);
- ``pandas``: a straightforward pandas implementation (chunked ``read_csv``, units stripped
  with ``.str``, ``to_numeric``/``to_datetime``, group by GPU and hour);
- ``fleetfault``: the smi stage of ``fleetfault run`` on the file, into a fresh warehouse
  (registry and sha256, DuckDB's reader, cleaning, hourly facts, insert, ``gpu_days``).

Writes its section of ``bench/RESULTS.md``. Usage::

    nice python bench/bench_smi.py --size-gb 1.0 --repeat 3
    nice python bench/bench_smi.py --methods duckdb_bare,fleetfault --interleave --no-write

Many small files (one per host and day, as fleets and the simulator write them): ``--files
DATA`` runs the inventory and smi stages on ``DATA`` in a fresh process and prints the smi
stage's CPU and wall time, the load average and the files and rows it read. ``--code DIR``
imports ``pipeline`` from another checkout (``git archive REV | tar -x -C DIR``), for a
before/after comparison in one session::

    nice python bench/bench_smi.py --files data/sample --code /tmp/before
    nice python bench/bench_smi.py --files data/sample
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
HEADER = ("timestamp, index, name, serial, uuid, pci.bus_id, driver_version, temperature.gpu, temperature.memory, "
          "utilization.gpu [%], utilization.memory [%], memory.used [MiB], memory.total [MiB], power.draw [W], "
          "clocks.current.sm [MHz], fan.speed [%], clocks_event_reasons.active, ecc.errors.corrected.volatile.total, "
          "ecc.errors.uncorrected.volatile.total, retired_pages.pending, remapped_rows.pending, remapped_rows.failure, "
          "pcie.link.width.current, pcie.link.width.max")
FACT_COLUMNS = ["temperature.gpu", "temperature.memory", "utilization.gpu [%]", "memory.used [MiB]", "power.draw [W]",
                "clocks.current.sm [MHz]", "fan.speed [%]", "clocks_event_reasons.active",
                "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
                "remapped_rows.pending", "remapped_rows.failure", "pcie.link.width.current", "pcie.link.width.max"]


def generate(path: Path, size_gb: float, seed: int = 7) -> Path:
    """An 8-GPU host sampled every second (``-l 1``), as nvidia-smi writes it."""
    import numpy as np
    import polars as pl

    target = int(size_gb * (1 << 30))
    if path.exists() and path.stat().st_size >= target:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    start = np.datetime64("2026-07-01T00:00:00")
    with open(path, "w") as f:
        f.write(HEADER + "\n")
        t0 = 0
        while f.tell() < target:
            n_t = 50_000
            secs = np.repeat(np.arange(t0, t0 + n_t), 8)
            idx = np.tile(np.arange(8), n_t)
            n = len(secs)
            ts = (start + secs.astype("timedelta64[s]")).astype(str)
            ms = rng.integers(0, 1000, n)
            temp = rng.integers(30, 85, n)
            df = pl.DataFrame({
                "ts": [s.replace("-", "/").replace("T", " ") for s in ts], "ms": ms, "i": idx, "temp": temp,
                "mtemp": temp + 4, "util": rng.integers(0, 101, n), "mutil": rng.integers(0, 101, n),
                "mem": rng.integers(0, 81559, n), "pw": rng.uniform(60, 700, n).round(2),
                "sm": rng.integers(210, 1981, n), "mask": rng.choice([0, 0, 0, 4, 0x20, 0x40], n),
                "ecc": (secs // 3600) % 7,
            })
            line = pl.format(
                "{}.{}, {}, NVIDIA H100 80GB HBM3, 165282305455{}, GPU-5f1ba2c4-8a5e-7a4c-b3c1-0a4f2e9a1c0{}, "
                "00000000:{}:00.0, 550.54.15, {}, {}, {} %, {} %, {} MiB, 81559 MiB, {} W, {} MHz, [N/A], 0x{}, {}, 0, "
                "[N/A], No, No, 16, 16",
                "ts", pl.col("ms").cast(pl.Utf8).str.zfill(3), "i", "i", "i",
                (pl.col("i") * 16 + 0x18).map_elements(lambda v: f"{v:02X}", return_dtype=pl.Utf8),
                "temp", "mtemp", "util", "mutil", "mem", pl.col("pw").map_elements(lambda v: f"{v:.2f}", return_dtype=pl.Utf8),
                "sm", pl.col("mask").map_elements(lambda v: f"{v:016X}", return_dtype=pl.Utf8), "ecc",
            )
            f.write("\n".join(df.select(line).to_series().to_list()) + "\n")
            t0 += n_t
    return path


# -- the methods (each runs in its own process) ------------------------------------------------

def m_floor(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while block := f.read(16 << 20):
            n += len(block)
    return n


def m_duckdb_bare(path: Path) -> int:
    import duckdb

    aggs = ", ".join(f'max("{c}")' for c in FACT_COLUMNS)
    rows = duckdb.connect().sql(
        f'SELECT "index", "serial", "uuid", "pci.bus_id", date_trunc(\'hour\', "timestamp") AS h, count(*), {aggs} '
        f"FROM read_csv('{path}') GROUP BY ALL"
    ).fetchall()
    return len(rows)


def m_pandas(path: Path) -> int:
    import pandas as pd

    parts = []
    for chunk in pd.read_csv(path, skipinitialspace=True, chunksize=1_000_000, dtype=str):
        df = pd.DataFrame({"index": chunk["index"].astype(int), "serial": chunk["serial"]})
        df["ts"] = pd.to_datetime(chunk["timestamp"], format="%Y/%m/%d %H:%M:%S.%f")
        for c in FACT_COLUMNS:
            s = chunk[c].str.replace(r"\s*(%|MiB|W|MHz)$", "", regex=True)
            s = s.replace({"[N/A]": None, "Yes": "1", "No": "0"})
            if c == "clocks_event_reasons.active":
                df[c] = s.map(lambda v: int(v, 16) if isinstance(v, str) else None)
            else:
                df[c] = pd.to_numeric(s, errors="coerce")
        df["hour"] = df["ts"].dt.floor("h")
        parts.append(df.groupby(["index", "serial", "hour"]).agg(
            {c: ["count", "sum", "min", "max"] for c in FACT_COLUMNS}))
    out = pd.concat(parts)
    return len(out)


def m_fleetfault(path: Path) -> int:
    """The smi stage of ``fleetfault run`` on a data folder holding just this file (as
    ``telemetry/bench/``): registry and digest, the batch reader, hourly facts, gpu_days."""
    import tempfile

    from pipeline.config import config_from_dict
    from pipeline.ingest.telemetry import derive_gpu_days
    from pipeline.ingest.telemetry import stage as smi
    from pipeline.run import RunContext
    from pipeline.warehouse import Warehouse

    with tempfile.TemporaryDirectory() as d, Warehouse(Path(d) / "w.duckdb") as wh:
        data = Path(d) / "data"
        (data / "telemetry" / "bench").mkdir(parents=True)
        (data / "telemetry" / "bench" / path.name).symlink_to(path.resolve())
        ctx = RunContext(config_from_dict({}), wh, data, Path(d) / "out")
        smi.run(ctx)
        derive_gpu_days(wh)
        rep = ctx.report("smi")
        assert rep.rows_quarantined == 0 and rep.files == 1, rep
        return rep.rows_read


def stage_on_files(data: Path, config: Path | None = None) -> dict:
    """The smi stage on a data folder (after the inventory stage) in a fresh warehouse,
    with ``config`` (default: the repository's fleetfault.toml)."""
    import tempfile

    from pipeline.config import load_config
    from pipeline.run import DERIVE_AFTER, STAGES, RunContext, resolve_stage
    from pipeline.warehouse import Warehouse

    stages = dict(STAGES)
    cfg = load_config(config or HERE.parent / "fleetfault.toml")
    with tempfile.TemporaryDirectory() as d, Warehouse(Path(d) / "w.duckdb") as wh:
        ctx = RunContext(cfg, wh, data, Path(d) / "out")
        resolve_stage(stages["inventory"])(ctx)
        cpu, wall = time.process_time(), time.perf_counter()
        resolve_stage(stages["smi"])(ctx)
        resolve_stage(DERIVE_AFTER["smi"])(ctx)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        rep = ctx.report("smi")
        return {"files": rep.files, "rows_read": rep.rows_read, "rows_quarantined": rep.rows_quarantined,
                "cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "cpu_ms_per_file": round(1000 * cpu / max(rep.files, 1), 1),
                "load_avg": [round(x, 2) for x in os.getloadavg()], "gpu_days": wh.con.execute("SELECT count(*) FROM gpu_days").fetchall()[0][0],
                "smi_hourly": wh.con.execute("SELECT count(*) FROM smi_hourly").fetchall()[0][0],
                "code": str(Path(sys.modules["pipeline"].__file__).parent.parent)}


METHODS = {"floor": m_floor, "duckdb_bare": m_duckdb_bare, "pandas": m_pandas, "fleetfault": m_fleetfault}


def one(method: str, path: Path) -> dict:
    t, cpu = time.perf_counter(), time.process_time()
    result = METHODS[method](path)
    secs, cpu = time.perf_counter() - t, time.process_time() - cpu  # CPU: all the process's threads
    # VmHWM, not ru_maxrss: the latter survives fork+exec and would report the parent's peak.
    status = Path("/proc/self/status").read_text()
    rss = int(next(x for x in status.splitlines() if x.startswith("VmHWM")).split()[1]) * 1024
    return {"method": method, "seconds": secs, "cpu_seconds": cpu, "peak_rss": rss, "result": result,
            "load_avg": [round(x, 2) for x in os.getloadavg()]}


def one_run(method: str, path: Path) -> dict:
    """One run of a method in a fresh process (so peak RSS is that method's own)."""
    out = subprocess.run([sys.executable, __file__, "--one", method, str(path)], check=True,
                         capture_output=True, text=True, cwd=HERE.parent)
    run = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  {method}: {run['seconds']:.2f} s, CPU {run['cpu_seconds']:.2f} s, "
          f"peak RSS {run['peak_rss'] / 2**20:.0f} MiB, load {run['load_avg']}", flush=True)
    return run


def measure(method: str, path: Path, repeat: int) -> dict:
    return _summary(method, [one_run(method, path) for _ in range(repeat)])


def _summary(method: str, runs: list[dict]) -> dict:
    return {"method": method, "seconds": statistics.median(r["seconds"] for r in runs),
            "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
            "runs": [round(r["seconds"], 2) for r in runs], "peak_rss": max(r["peak_rss"] for r in runs),
            "load_avg": [r["load_avg"][0] for r in runs], "result": runs[-1]["result"]}


def write_results(res: dict[str, dict], path: Path, size: int, command: str, *, interleaved: bool = False) -> None:
    ff, bare, pd_ = res["fleetfault"], res["duckdb_bare"], res["pandas"]
    order = "round-robin (one run of each method in turn, so a change in the machine's load hits all alike)" \
        if interleaved else "one method after another"
    lines = [
        "## smi: nvidia-smi CSV ingest",
        "",
        f"Command: `{command}` (run in the repository root; {os.cpu_count()} CPUs, shared with other jobs).",
        f"Input: one generated log of {size / 2**30:.2f} GiB ({size:,} bytes, {ff['result']:,} samples, 24 fields, "
        f"8 GPUs sampled every second). Runs: {order}, each in a fresh process; times are medians of the runs "
        "listed. CPU: the process's CPU time, all threads (less sensitive to other jobs than wall time). "
        "Load: the 1-minute load average at the end of each run.",
        "",
        "| method | median s | runs | median CPU s | MB/s | peak RSS MiB | load |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in [m for m in ("floor", "duckdb_bare", "pandas", "fleetfault") if m in res]:
        r = res[m]
        lines.append(f"| {m} | {r['seconds']:.2f} | {r['runs']} | {r['cpu_seconds']:.2f} | "
                     f"{size / 2**20 / r['seconds']:.0f} | {r['peak_rss'] / 2**20:.0f} | {r['load_avg']} |")
    ratio_bare = ff["seconds"] / bare["seconds"]
    ratio_pd = pd_["seconds"] / ff["seconds"]
    rss_ratio = ff["peak_rss"] / size
    lines += [
        "",
        f"- fleetfault / bare DuckDB: **{ratio_bare:.2f}x** wall (target <= 1.25x: "
        f"{'met' if ratio_bare <= 1.25 else 'NOT met'}); CPU {ff['cpu_seconds'] / bare['cpu_seconds']:.2f}x"
        + (f"; per round (same load for both) {ff['paired_ratios']}, median "
           f"{statistics.median(ff['paired_ratios']):.2f}x" if ff.get("paired_ratios") else ""),
        f"- pandas / fleetfault: **{ratio_pd:.1f}x** faster (target >= 6x: {'met' if ratio_pd >= 6 else 'NOT met'})",
        f"- fleetfault peak RSS / input: **{rss_ratio:.2f}** (target <= 0.5: {'met' if rss_ratio <= 0.5 else 'NOT met'})",
        "- fleetfault's time includes its imports, the registry's sha256 of the file, the insert and the gpu_days rebuild.",
        "",
        "",
    ]
    section = "\n".join(lines)
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    start = text.find("## smi:")
    if start >= 0:
        end = text.find("\n## ", start + 1)
        sub = text.find("\n### smi: many small files", start, end if end >= 0 else None)
        kept = text[sub + 1:end + 1 if end >= 0 else None].rstrip("\n") + "\n\n" if sub >= 0 else ""
        text = text[:start] + section + kept + (text[end + 1:] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--methods", default="floor,duckdb_bare,pandas,fleetfault")
    ap.add_argument("--one", nargs=2, metavar=("METHOD", "FILE"), help=argparse.SUPPRESS)
    ap.add_argument("--no-write", action="store_true", help="Do not update bench/RESULTS.md.")
    ap.add_argument("--interleave", action="store_true", help="Run the methods round-robin instead of one after another.")
    ap.add_argument("--files", type=Path, metavar="DATA", help="Time the smi stage on DATA's many small files instead.")
    ap.add_argument("--code", type=Path, metavar="DIR", help="With --files: import pipeline from this checkout.")
    args = ap.parse_args()
    if args.files:
        sys.path.insert(0, str((args.code or HERE.parent).resolve()))
        print(json.dumps(stage_on_files(args.files.resolve())))
        return
    if args.one:
        sys.path.insert(0, str(HERE.parent))
        print(json.dumps(one(args.one[0], Path(args.one[1]))))
        return
    path = generate(DATA / f"smi_{args.size_gb:g}gb.csv", args.size_gb)
    size = path.stat().st_size
    print(f"input {path} ({size / 2**30:.2f} GiB)", flush=True)
    methods = args.methods.split(",")
    if args.interleave:  # round-robin, so that a change in the machine's load hits every method alike
        per: dict[str, list[dict]] = {m: [] for m in methods}
        for _ in range(args.repeat):
            for m in methods:
                per[m].append(one_run(m, path))
        res = {m: _summary(m, runs) for m, runs in per.items()}
        if "fleetfault" in per and "duckdb_bare" in per:  # each round's own ratio: same load for both
            paired = [f["seconds"] / b["seconds"] for f, b in zip(per["fleetfault"], per["duckdb_bare"])]
            res["fleetfault"]["paired_ratios"] = [round(x, 2) for x in paired]
            print(f"fleetfault / duckdb_bare per round: {[round(x, 2) for x in paired]}, "
                  f"median {statistics.median(paired):.2f}", flush=True)
    else:
        res = {m: measure(m, path, args.repeat) for m in methods}
    if not args.no_write and set(res) == set(METHODS):
        cmd = ("nice " if os.nice(0) > 0 else "") + "python bench/bench_smi.py " + " ".join(sys.argv[1:])
        write_results(res, HERE / "RESULTS.md", size, cmd.strip(), interleaved=args.interleave)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
