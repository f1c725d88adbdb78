"""Benchmark: the xid stage on many small kernel logs against one bare DuckDB read, in one run.

The fleets of issue 18 write one kernel log per host and day. On such a fleet (a
``fleetfault simulate`` folder: ``inventory.csv``, ``kernel/<host>/*``), each round times,
interleaved:

* ``duckdb``: the floor, ONE ``read_csv`` of every line of the same files (the list the stage
  reads), one all-varchar column, ``filename=true``, in a fresh in-memory DuckDB; every line's
  text is materialized (``count(*)``, ``sum(length(line))``);
* ``stage``: ``fleetfault run --stage xid`` as the nightly job runs it (the ingest and the
  ``xid_events`` derivation, registry and transactions included), in-process, on a fresh
  warehouse whose inventory was loaded beforehand (not timed).

Wall and process CPU (all threads) are reported; the target is stage / duckdb <= 10 (wall).

Run: ``nice .venv/bin/python bench/bench_xid_files.py --data DIR [--repeat 3] [--work W]``
(make DIR with ``fleetfault simulate --gpus 512 --days 120 --seed 7 --daily-dmesg-share 1 --out DIR``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import duckdb


def _floor(paths: list[Path]) -> tuple[int, int]:
    from pipeline.vocab.sql import literal, literals

    con = duckdb.connect()  # bare DuckDB, on purpose: the floor the stage is measured against
    try:
        return con.sql(
            f"SELECT count(*), sum(length(line)) FROM read_csv([{literals(str(p) for p in paths)}], "
            f"columns={{'line': 'VARCHAR'}}, header=false, delim={literal(chr(1))}, quote='', escape='', "
            "auto_detect=false, filename=true, strict_mode=false, ignore_errors=true)").fetchall()[0]
    finally:
        con.close()


def _stage(cfg, data: Path, base: Path, work: Path) -> dict:
    from pipeline.run import run_pipeline
    from pipeline.warehouse import Warehouse

    wh = work / "xid.duckdb"
    shutil.copyfile(base, wh)  # a fresh warehouse with the inventory loaded
    reports, _ = run_pipeline(cfg, data, wh, work / "out", stages=["xid"])
    rep = next(r for r in reports if r.stage == "xid")
    with Warehouse(wh, read_only=True) as w:
        raw = w.engine.scalar("SELECT count(*) FROM xid_raw", step="bench")
    wh.unlink()
    return {"files": rep.files, "read": rep.rows_read, "loaded": rep.rows_loaded,
            "quarantined": rep.rows_quarantined, "events": rep.rows_out, "xid_raw": raw}


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", type=Path, default=None, help="folder for the warehouses (default: a temporary one)")
    args = ap.parse_args()

    from pipeline.config import load_config
    from pipeline.ingest.kernel.stage import kernel_files
    from pipeline.run import run_pipeline

    toml = args.data / "truth" / "fleetfault.toml"
    cfg = load_config(toml if toml.is_file() else None)
    paths = [p for ps in kernel_files(args.data).values() for p in ps]
    work = args.work or Path(tempfile.mkdtemp(prefix="fleetfault-xidfiles-"))
    work.mkdir(parents=True, exist_ok=True)
    base = work / "inventory.duckdb"
    base.unlink(missing_ok=True)
    run_pipeline(cfg, args.data, base, work / "out", stages=["inventory"])
    size = sum(p.stat().st_size for p in paths)
    print(f"{len(paths):,} kernel files in {len({p.parent for p in paths})} host folders, {size / 1e6:.1f} MB; "
          f"{args.repeat} rounds, interleaved")
    times: dict[str, list[tuple[float, float]]] = {"duckdb": [], "stage": []}
    for r in range(args.repeat):
        w, c, (lines, chars) = _timed(lambda: _floor(paths))
        times["duckdb"].append((w, c))
        print(f"round {r + 1}: duckdb read_csv {w:7.2f} s wall {c:7.2f} s CPU ({lines:,} lines, {chars:,} chars)")
        w, c, got = _timed(lambda: _stage(cfg, args.data, base, work))
        times["stage"].append((w, c))
        print(f"round {r + 1}: xid stage       {w:7.2f} s wall {c:7.2f} s CPU {got}")
    med = {k: (statistics.median(x for x, _ in v), statistics.median(y for _, y in v)) for k, v in times.items()}
    print(f"median: duckdb {med['duckdb'][0]:.2f} s wall / {med['duckdb'][1]:.2f} s CPU; "
          f"xid stage {med['stage'][0]:.2f} s wall / {med['stage'][1]:.2f} s CPU")
    print(f"xid stage / duckdb: {med['stage'][0] / med['duckdb'][0]:.2f}x wall, "
          f"{med['stage'][1] / med['duckdb'][1]:.2f}x CPU (target <= 10x wall)")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
