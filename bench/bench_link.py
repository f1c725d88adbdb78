"""Tickets to failures, end to end, on a simulated fleet whose tickets the field wrote.

Simulates a fleet (``fleetfault simulate --ticket-layouts field``, optionally with
``--stale-inventory``), runs the stages up to ``stats`` and compares with the truth:

- GPU&REPLACE precision and recall over tickets (coded part GPU and action REPLACE);
- the share of tickets about a known GPU linked to exactly that serial (and how many were
  linked to a wrong one), overall and per service point;
- per batch: the true AFR inside the 95% interval; the bad batch flagged;
- failures counted and GPU-days against the truth.

Usage (from the repository root, with the project's venv)::

    nice python bench/bench_link.py --work /tmp/bl --gpus 512 --days 180 --accel 12
    nice python bench/bench_link.py --work /tmp/bl10 --gpus 512 --days 180 --accel 12 --stale-inventory 0.1

``--column-map`` adds each field point's columns to the config, so that linking can be
measured where the ticket reader does not yet recognise a layout by itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from pipeline.simulate.field_layouts import COLUMN_MAP

BAD_BATCH = "H100-2024Q2"
STAGES = ("inventory", "smi", "xid", "tickets", "normalize", "link", "stats")

def sh(cmd: list[str], log: Path) -> tuple[int, float]:
    t0 = time.perf_counter()
    with log.open("a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    return rc, time.perf_counter() - t0


def write_config(data: Path, column_map: bool) -> Path:
    params = json.loads((data / "truth" / "params.json").read_text())
    start = datetime.fromisoformat(params["start"])
    end = datetime.fromisoformat(params["end"])
    text = (data / "truth" / "fleetfault.toml").read_text()
    # Batches are compared with the truth per (vendor, batch): the RMA stock of one model
    # comes from each of its vendors under one batch name.
    text += (f'\n[stats]\nwindow_start = "{start:%Y-%m-%d}"\nwindow_end = "{end - timedelta(days=1):%Y-%m-%d}"\n'
             'afr_by = ["model", "vendor", "batch", "vendor,batch"]\n')
    if column_map:
        for point, cols in COLUMN_MAP.items():
            text += f"\n[tickets.points.{point}.columns]\n" + "".join(f'{k} = "{v}"\n' for k, v in cols.items())
    cfg = data.parent / "bench.toml"
    cfg.write_text(text, encoding="utf-8")
    return cfg


def measure(wh: Path, truth: Path) -> dict:
    con = duckdb.connect(str(wh), read_only=True)
    con.execute(f"CREATE TEMP VIEW tt AS SELECT * FROM read_csv('{truth}/tickets.csv', all_varchar=true)")
    con.execute(f"CREATE TEMP VIEW tg AS SELECT * FROM read_csv('{truth}/groups.csv')")
    j = """FROM tt LEFT JOIN tickets w ON w.service_point = tt.service_point AND w.ticket_id = tt.ticket_id"""
    tp, pred, true_n, found = con.execute(f"""
        SELECT count(*) FILTER (WHERE w.part_code = 'GPU' AND w.action_code = 'REPLACE'
                                AND tt.part_code = 'GPU' AND tt.action_code = 'REPLACE'),
               (SELECT count(*) FROM tickets WHERE part_code = 'GPU' AND action_code = 'REPLACE'),
               count(*) FILTER (WHERE tt.part_code = 'GPU' AND tt.action_code = 'REPLACE'),
               count(w.ticket_id)
        {j}""").fetchone()
    link = con.execute(f"""
        SELECT tt.service_point, count(*) AS n, count(*) FILTER (WHERE w.serial = tt.serial) AS right,
               count(*) FILTER (WHERE w.serial IS NOT NULL AND w.serial <> tt.serial) AS wrong
        {j} WHERE coalesce(tt.serial, '') <> '' GROUP BY ALL ORDER BY 1""").fetchall()
    n_link = sum(r[1] for r in link)
    right = sum(r[2] for r in link)
    wrong = sum(r[3] for r in link)
    batches = con.execute("""
        SELECT tg.vendor || ' / ' || tg.batch, tg.true_afr_pct, a.afr_ci_low_pct, a.afr_ci_high_pct, a.failures, tg.failures
        FROM tg JOIN stats_afr a ON a.grouping = 'vendor,batch' AND a.group_value = tg.vendor || ' / ' || tg.batch
        WHERE tg.gpu_days > 0 ORDER BY 1""").fetchall()
    covered = [b for b in batches if b[2] <= b[1] <= b[3]]
    flagged = con.execute("SELECT any_value(flagged) FROM stats_compare WHERE dimension = 'batch' AND group_value = ?",
                          [BAD_BATCH]).fetchone()[0]
    fleet = con.execute("SELECT failures, gpu_days FROM stats_afr WHERE grouping = '' LIMIT 1").fetchone()
    true_fail, true_days = con.execute("SELECT sum(failures), sum(gpu_days) FROM tg").fetchone()
    methods = dict(con.execute("SELECT coalesce(link_method, '(unlinked)'), count(*) FROM tickets GROUP BY 1").fetchall())
    observed = con.execute("SELECT count(*) FROM inventory_observed").fetchone()[0]
    stale = con.execute("SELECT count(*) FROM inventory_stale").fetchone()[0]
    n_truth = con.execute("SELECT count(*) FROM tt").fetchone()[0]
    con.close()
    return {
        "tickets_truth": n_truth, "tickets_loaded": found,
        "gpu_replace_precision": tp / pred if pred else None, "gpu_replace_recall": tp / true_n if true_n else None,
        "gpu_replace": {"true_positive": tp, "predicted": pred, "truth": true_n},
        "serial_linked_right": right / n_link if n_link else None, "serial_tickets": n_link, "serial_wrong": wrong,
        "serial_by_point": {r[0]: {"tickets": r[1], "right": r[2], "wrong": r[3]} for r in link},
        "batches": len(batches), "batches_covered": len(covered),
        "batch_coverage": len(covered) / len(batches) if batches else None,
        "batch_rows": [list(b) for b in batches], "bad_batch_flagged": bool(flagged),
        "failures": fleet[0], "failures_truth": int(true_fail), "failures_ratio": fleet[0] / true_fail if true_fail else None,
        "gpu_days": fleet[1], "gpu_days_truth": float(true_days),
        "gpu_days_error": fleet[1] / true_days - 1 if true_days else None,
        "link_methods": methods, "inventory_observed_rows": observed, "inventory_stale_rows": stale,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="folder for the fleet, warehouse and logs")
    ap.add_argument("--gpus", type=int, default=512)
    ap.add_argument("--days", type=int, default=180)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--accel", type=float, default=12.0)
    ap.add_argument("--interval", type=float, default=3600.0)
    ap.add_argument("--ticket-layouts", default="field")
    ap.add_argument("--stale-inventory", type=float, default=0.0)
    ap.add_argument("--column-map", action="store_true", help="name the field points' columns in the config")
    ap.add_argument("--skip-sim", action="store_true", help="reuse WORK/data")
    ap.add_argument("--from-stage", choices=STAGES, help="reuse WORK/data and the warehouse; rerun from this stage on")
    ap.add_argument("--stats-only", action="store_true", help="the same as --from-stage stats")
    args = ap.parse_args(argv)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    data, wh, log = work / "data", work / "wh.duckdb", work / "bench.log"
    py = [sys.executable, "-m", "pipeline"]
    times = {}
    if args.stats_only:
        args.from_stage = "stats"
    if not (args.skip_sim or args.from_stage):
        rc, times["simulate_s"] = sh(py + ["simulate", "--gpus", str(args.gpus), "--days", str(args.days), "--seed",
                                           str(args.seed), "--accel", str(args.accel), "--interval", str(args.interval),
                                           "--ticket-layouts", args.ticket_layouts, "--stale-inventory",
                                           str(args.stale_inventory), "-q", "-o", str(data)], log)
        if rc:
            print(f"simulate failed ({rc}); see {log}", file=sys.stderr)
            return 2
    if not args.from_stage:
        wh.unlink(missing_ok=True)
    cfg = write_config(data, args.column_map)
    cmd = py + ["run", "--data", str(data), "--warehouse", str(wh), "--out", str(work / "out"), "--config", str(cfg)]
    for s in STAGES[STAGES.index(args.from_stage):] if args.from_stage else STAGES:
        cmd += ["--stage", s]
    rc, times["run_s"] = sh(cmd, log)
    if rc not in (0, 1):
        print(f"run failed ({rc}); see {log}", file=sys.stderr)
        return 2
    result = {"args": {k: str(v) for k, v in vars(args).items()}, "run_exit": rc, **times,
              **measure(wh, data / "truth")}
    (work / "result.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "batch_rows"}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
