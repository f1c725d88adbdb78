"""Acceptance check for logs of fleets fleetfault was not built against (issue 17).

Simulates a fleet where a share of hosts writes nvidia-smi with copytruncate rotation whose
header is only where the collector restarted (it ran before the data began), and a share
writes raw ``dmesg`` to a file per local day (boots before and inside the data), runs
``fleetfault run`` over it with the fleet's own config, and measures:

* telemetry rows per host: rows loaded (registry) over data rows written (every non-blank,
  non-header line of the host's files, cut lines included), worst host and per style;
* Xid dating on the daily-dmesg hosts: each event's time against the truth (the boot in
  ``truth/boots.csv`` whose uptime puts the line on its file's local day), split by
  ``ts_quality``: boots a file marks (``exact``) and boots none marks (``estimated``).

Run: ``nice .venv/bin/python bench/bench_logs.py --gpus 96 --days 30 --seed 17 --accel 8``
(``--code DIR`` runs another checkout's pipeline on the same data, for a before/after).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]


def _lines(path: Path) -> list[str]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace").splitlines()


def _written_rows(folder: Path) -> int:
    from pipeline.ingest.telemetry.fields import header_fields

    return sum(1 for p in folder.iterdir() for x in _lines(p) if x.strip() and header_fields(x) is None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, default=96)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--accel", type=float, default=8.0)
    ap.add_argument("--share", type=float, default=0.4, help="share of hosts in each unusual style")
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose pipeline runs (default: this one)")
    ap.add_argument("--keep", type=Path, default=None, help="folder to keep the data and warehouse in")
    args = ap.parse_args()
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="fleetfault-logs-"))
    data, wh = tmp / "data", tmp / "fleet.duckdb"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not (data / "truth" / "hosts.csv").exists():
        subprocess.run([sys.executable, "-m", "pipeline", "simulate", "--gpus", str(args.gpus), "--days", str(args.days),
                        "--seed", str(args.seed), "--accel", str(args.accel), "--out", str(data), "-q",
                        "--copytruncate-share", str(args.share), "--daily-dmesg-share", str(args.share)],
                       check=True, env=env)
    wh.unlink(missing_ok=True)
    t0 = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "pipeline", "run", "--data", str(data), "--warehouse", str(wh),
                          "--out", str(tmp / "out"), "--config", str(data / "truth" / "fleetfault.toml")],
                         env={**os.environ, "PYTHONPATH": str(args.code)}, cwd=args.code, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    print(f"fleetfault run ({args.code}): exit {run.returncode}, {wall:.1f} s")
    hosts = {r["host"]: r for r in csv.DictReader(open(data / "truth" / "hosts.csv"))}
    con = duckdb.connect(str(wh), read_only=True)
    loaded = dict(con.execute(
        "SELECT split_part(path, '/', 2), sum(rows_loaded) FROM files WHERE stage = 'smi' GROUP BY 1").fetchall())
    print("\ntelemetry rows loaded / written, per host")
    worst: dict[str, float] = {}
    for h, r in sorted(hosts.items()):
        folder = data / "telemetry" / h
        if not folder.is_dir():
            continue
        written = _written_rows(folder)
        ratio = (loaded.get(h) or 0) / written if written else 1.0
        worst[r["telemetry_format"]] = min(worst.get(r["telemetry_format"], 1.0), ratio)
        print(f"  {h:12s} {r['telemetry_format']:20s} {loaded.get(h) or 0:8d} / {written:8d} = {ratio:.4f}")
    print("  worst per style: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(worst.items())))
    # Xid dating on the daily-dmesg hosts
    boots: dict[str, list[datetime]] = {}
    for r in csv.DictReader(open(data / "truth" / "boots.csv")):
        boots.setdefault(r["host"], []).append(datetime.fromisoformat(r["booted_at"]))
    daily = [h for h, r in hosts.items() if r["kernel_format"] == "dmesg_raw_daily"]
    cols = ["ts_quality", "ts_error_s"] if "ts_quality" in {c[0] for c in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'xid_events'").fetchall()} else []
    sel = ", ".join(["host", "uptime_s", "ts", "source_file"] + cols)
    rows = con.execute(f"SELECT {sel} FROM xid_events WHERE host IN (SELECT unnest(?::VARCHAR[]))", [daily]).fetchall()
    from pipeline.ingest.kernel.boots import day_window

    stats: dict[str, list[float]] = {}
    undated = 0
    for row in rows:
        host, up, ts, src = row[:4]
        quality = row[4] if cols else ("exact" if ts is not None else "unknown")
        tz = hosts[host]["tz"]
        lo, hi = day_window(Path(src), tz)
        bs = sorted(boots[host])
        truth = [b + timedelta(seconds=up) for k, b in enumerate(bs)
                 if (k + 1 == len(bs) or b + timedelta(seconds=up) < bs[k + 1])
                 and lo - timedelta(minutes=5) <= b + timedelta(seconds=up) < hi + timedelta(minutes=5)]
        if ts is None:
            undated += 1
            continue
        err = abs((ts - truth[0]).total_seconds()) if truth else float("inf")
        stats.setdefault(quality, []).append(err)
    print(f"\nXids on daily-dmesg hosts ({len(daily)} hosts): {len(rows)} events, {undated} without a time")
    for q, errs in sorted(stats.items()):
        errs.sort()
        print(f"  {q:9s}: {len(errs):5d} events, error median {errs[len(errs) // 2]:.1f} s, max {errs[-1]:.1f} s, "
              f"within 1 s: {sum(e <= 1 for e in errs)}, within 1 day: {sum(e <= 86400 for e in errs)}")
    links = con.execute("SELECT coalesce(link_method, 'unlinked'), count(*) FROM xid_events "
                        "WHERE host IN (SELECT unnest(?::VARCHAR[])) GROUP BY 1 ORDER BY 1", [daily]).fetchall()
    print("  linked to a GPU: " + ", ".join(f"{m} {n}" for m, n in links))
    print(f"\ndata and warehouse in {tmp}")


if __name__ == "__main__":
    main()
