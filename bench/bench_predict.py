"""Benchmark and acceptance check: the nightly ``predict`` stage on a simulated fleet.

Runs the ingest, normalize, link and stats stages of ``fleetfault run`` on a simulator
output (once; ``--skip-ingest`` reuses the warehouse), then the ``predict`` stage alone in a
fresh process, measuring its wall time and peak RSS, and reads the evaluation it wrote
(``OUT/metrics/predict.json``: the model's pooled out-of-fold days next to the evidence
score). With ``--periods N`` it then replays each night's decision over N consecutive test
periods (:mod:`pipeline.predict.backtest`) and judges the pooled test days for the
published list, the evidence score, the model and the critical-Xid rules: one period holds
too few failures for a median lead time. Writes its section of ``bench/RESULTS.md``. Usage::

    nice fleetfault simulate --gpus 300 --days 120 --seed 31337 --interval 3600 --accel 4 --out /tmp/eval/sim
    nice python bench/bench_predict.py --data /tmp/eval/sim --work /tmp/eval/work --periods 3
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLEETFAULT = [sys.executable, "-m", "pipeline"]
BEFORE = ["inventory", "smi", "xid", "tickets", "normalize", "link", "stats"]


def _run(args: list[str], work: Path) -> tuple[float, int, int]:
    """(wall seconds, peak RSS bytes, exit code) of one command, through GNU time."""
    rss = work / "peak_rss.txt"
    t0 = time.perf_counter()
    code = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(rss), *args], cwd=HERE.parent).returncode
    wall = time.perf_counter() - t0
    return wall, int(rss.read_text().split()[-1]) * 1024, code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="A `fleetfault simulate` output folder.")
    ap.add_argument("--work", type=Path, required=True, help="Folder for the warehouse, models and outputs.")
    ap.add_argument("--skip-ingest", action="store_true", help="Reuse the warehouse in --work.")
    ap.add_argument("--toy", metavar="GPUS,DAYS,SEED", help="Fill the warehouse with pipeline.predict.toy instead "
                    "of ingesting --data (a timing run at fleet scale when ingest is too slow to wait for).")
    ap.add_argument("--no-write", action="store_true", help="Do not update bench/RESULTS.md.")
    ap.add_argument("--config", type=Path, help="fleetfault.toml for the runs (a simulator writes one in truth/).")
    ap.add_argument("--note", default="", help="A sentence for RESULTS.md on how --data was made (e.g. a subset).")
    ap.add_argument("--periods", type=int, default=0, help="Also replay the nightly retraining over this many "
                    "consecutive test periods (walk-forward) and judge the pooled test days.")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    wh, out = a.work / "wh.duckdb", a.work / "out"
    common = ["run", "--data", str(a.data), "--warehouse", str(wh), "--out", str(out), "-q"]
    common += ["--config", str(a.config)] if a.config else []
    ingest_s = None
    if a.toy:
        gpus, days, seed = (int(x) for x in a.toy.split(","))
        _toy(wh, gpus, days, seed)
        a.data.mkdir(parents=True, exist_ok=True)
    elif not a.skip_ingest:
        ingest_s, _, code = _run(FLEETFAULT + common + [x for s in BEFORE for x in ("--stage", s)], a.work)
        print(f"stages before predict: {ingest_s:.0f} s (exit {code})", flush=True)
    for f in (a.work / "models").glob("*"):
        f.unlink()  # train from scratch: the bench measures a full nightly retraining
    wall, peak, code = _run(FLEETFAULT + common + ["--stage", "predict"], a.work)
    metrics = json.loads((out / "metrics" / "predict.json").read_text())
    walk = _walk_forward(wh, a.config, a.periods) if a.periods else None
    if a.toy:
        res_data = f"toy fleet {a.toy} (pipeline.predict.toy, not the simulator)"
    params = json.loads((a.data / "truth" / "params.json").read_text()) if (a.data / "truth" / "params.json").exists() else {}
    res = {"predict_seconds": wall, "predict_peak_rss": peak, "exit": code, "ingest_seconds": ingest_s,
           "metrics": metrics, "data": res_data if a.toy else str(a.data), "accel": params.get("accel"),
           "simulate": _simulate_command(params), "size": None if a.toy else _data_size(a.data, wh), "note": a.note,
           "walk_forward": walk}
    print(json.dumps(res, indent=2, default=str))
    if not a.no_write:
        write_results(res, HERE / "RESULTS.md", "nice python bench/bench_predict.py " + shlex.join(sys.argv[1:]))


def _walk_forward(wh: Path, config: Path | None, periods: int) -> dict:
    """Walk-forward metrics on the features the stage just wrote, with its wall time."""
    from pipeline.config import Config, load_config
    from pipeline.predict.backtest import walk_forward
    from pipeline.warehouse import Warehouse

    t0 = time.perf_counter()
    with Warehouse(wh, read_only=True) as w:
        res = walk_forward(w, load_config(config) if config else Config(), periods)
    res["seconds"] = time.perf_counter() - t0
    print(f"walk-forward over {len(res['periods'])} periods: {res['seconds']:.0f} s", flush=True)
    return res


def _simulate_command(params: dict) -> str | None:
    """The ``fleetfault simulate`` command that wrote the data (from ``truth/params.json``)."""
    if not params:
        return None
    return (f"fleetfault simulate --gpus {params['gpus']} --days {params['days']} --seed {params['seed']} "
            f"--interval {params['interval_s']:g} --accel {params['accel']:g} --start {params['start'][:10]}")


def _data_size(data: Path, wh: Path) -> str:
    """Input files read and what the warehouse made of them (GPUs, GPU-days, events, failures)."""
    files = {d: sum(1 for _ in (data / d).rglob("*") if not _.is_dir()) for d in ("telemetry", "kernel", "tickets")}
    from pipeline.vocab.sql import literal
    from pipeline.warehouse import Warehouse

    with Warehouse(wh) as w:
        e = w.engine
        gpus, gpu_days, d0, d1 = e.rows("SELECT count(DISTINCT serial), count(*), min(day), max(day) FROM gpu_days",
                                        step="bench: fleet size")[0]
        xids = e.scalar("SELECT count(*) FROM xid_events", step="bench: xid events")
        fails = e.scalar(f"SELECT count(*) FROM failures WHERE CAST(failed_at AS DATE) BETWEEN {literal(d0)} AND {literal(d1)}",
                         step="bench: failures")
    return (f"{files['telemetry']:,} telemetry, {files['kernel']:,} kernel-log and {files['tickets']:,} ticket files; "
            f"{gpus:,} GPUs with telemetry, {gpu_days:,} GPU-days from {d0} to {d1}, {xids:,} Xid/SXid events, "
            f"{fails} GPU replacements in that range")


def _toy(wh: Path, gpus: int, days: int, seed: int) -> None:
    from pipeline.predict.toy import write_toy_fleet
    from pipeline.warehouse import Warehouse

    wh.unlink(missing_ok=True)
    t0 = time.perf_counter()
    with Warehouse(wh) as w:
        write_toy_fleet(w, gpus=gpus, days=days, seed=seed, daily_hazard=0.0004)
    print(f"toy fleet written in {time.perf_counter() - t0:.0f} s", flush=True)


def _g(v, fmt="{:.3f}") -> str:
    return "—" if v is None else fmt.format(v)


ROWS = [("PR-AUC", "pr_auc"), ("recall at 90% precision", "recall_at_90_precision"),
        ("precision, top 1% per day", "precision_top1pct"), ("recall (failures), top 1% per day", "recall_top1pct"),
        ("precision, top-k per day", "precision_topk"), ("recall (failures), top-k per day", "recall_topk"),
        ("alert precision", "alert_precision"), ("failures caught / failures", None),
        ("median lead, days", "median_lead_days"), ("Brier", "brier"), ("ECE (10 equal-count bins)", "ece"),
        ("expected cost saved", "cost_saved")]


def _metric_lines(m: dict, what: str) -> list[str]:
    """The model-vs-evidence-score table of one evaluation and its three acceptance lines."""
    mo, ba = m["model"], m["baseline"]
    lines = [f"| metric ({what}) | model | evidence score |", "|---|---|---|"]  # "baseline": the evidence score
    for label, key in ROWS:
        if key is None:
            lines.append(f"| {label} | {mo['failures_caught']} / {mo['failures']} | {ba['failures_caught']} / {ba['failures']} |")
        else:
            fmt = "{:,.0f}" if key == "cost_saved" else "{:.3f}"
            lines.append(f"| {label} | {_g(mo[key], fmt)} | {_g(ba[key], fmt)} |")
    ratio = m.get("recall_ratio_vs_baseline")
    return lines + [
        "",
        f"- model recall at the baseline's precision ({_g(m['baseline_precision'])}): "
        f"{_g(m['model_recall_at_baseline_precision'])} vs the baseline's {_g(m['baseline_recall'])} = "
        f"**{_g(ratio, '{:.2f}')}×** (target ≥ 1.2×: {'met' if ratio is not None and ratio >= 1.2 else 'NOT met'})",
        f"- median lead {_g(mo['median_lead_days'], '{:.1f}')} days (target ≥ 3: "
        f"{'met' if (mo['median_lead_days'] or 0) >= 3 else 'NOT met'}); ECE {_g(mo['ece'], '{:.4f}')} "
        f"(target ≤ 0.05: {'met' if mo['ece'] is not None and mo['ece'] <= 0.05 else 'NOT met'})",
    ]


def _walk_lines(w: dict) -> list[str]:
    """Per-period rows, then the pooled table of the four rankers and the lead times."""
    from pipeline.predict.backtest import RANKERS

    lines = [f"Walk-forward: {len(w['periods'])} consecutive test periods, each night replayed on its own past "
             "(time-ordered cross-validation, promotion against the evidence score, final model), "
             f"{w['seconds']:.0f} s in all. `list` is what the night published (the model if promoted, else "
             "the evidence score).", "",
             "| test period | failures | caught: list / evidence / model / rules | promoted | evidence calibrated on |",
             "|---|---|---|---|---|"]
    for r in w["periods"]:
        m = r["metrics"]
        lines.append(f"| {' to '.join(r['test'])} | {m['list']['failures']} | "
                     + " / ".join(str(m[k]["failures_caught"]) for k in RANKERS)
                     + f" | {'yes' if r['promoted'] else 'no'} | {r['evidence_source']} |")
    if w.get("pooled") is None:
        return lines + [""]
    P = w["pooled"]
    rows = [("PR-AUC (GPU-days)", "pr_auc", "{:.3f}"), ("failures caught at the alert", None, None),
            ("alert precision (GPU-days)", "alert_precision", "{:.3f}"),
            ("recall (failures), top alert_top per day", "recall_topk", "{:.3f}"),
            ("precision, top alert_top per day", "precision_topk", "{:.3f}"),
            ("recall (failures), top 1% per day", "recall_top1pct", "{:.3f}"),
            ("median lead, days", "median_lead_days", "{:.1f}"), ("needless drains", "needless_drains", "{:.0f}"),
            ("ECE", "ece", "{:.4f}"), ("Brier", "brier", "{:.5f}")]
    lines += ["", "| pooled | " + " | ".join(RANKERS) + " |", "|---" * (len(RANKERS) + 1) + "|"]
    for label, key, fmt in rows:
        if key is None:
            cells = [f"{P[k]['failures_caught']} / {P[k]['failures']}" for k in RANKERS]
        else:
            cells = [_g(P[k][key], fmt) for k in RANKERS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for k, r in w["ratios"].items():
        lines.append(f"- {k}: recall at the rules' precision {_g(r['recall_at_rules_precision'])} vs the rules' "
                     f"{_g(r['rules_recall'])} = {_g(r['ratio'], '{:.2f}')}x")
    lines.append(f"- alerts: the rules on any critical Xid in 7 days; the others at the break-even risk "
                 f"{w['alert_threshold']:.3f}")
    for k in RANKERS:
        if w["leads"].get(k):
            lo, hi, share = median_interval(w["leads"][k])
            lines.append(f"- {k}: lead days of caught failures {w['leads'][k]}; median {lo:g} to {hi:g} in 95% of "
                         "bootstrap resamples")
    return lines + [""]


def median_interval(leads: list[int], draws: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """(2.5th, 97.5th percentile, share >= 3 days) of the median lead over resampled caught failures:
    with a few dozen failures the point median moves by a day when two or three change."""
    import numpy as np

    if not leads:
        return float("nan"), float("nan"), 0.0
    a = np.asarray(leads, dtype=float)
    med = np.median(a[np.random.default_rng(seed).integers(0, len(a), (draws, len(a)))], axis=1)
    return float(np.percentile(med, 2.5)), float(np.percentile(med, 97.5)), float((med >= 3).mean())


def write_results(res: dict, path: Path, command: str) -> None:
    m = res["metrics"]
    mo = m.get("model")
    lines = [
        "## predict: failure prediction (nightly stage)", "",
        f"Command: `{command}` ({os.cpu_count()} CPUs shared with other jobs; the stage runs with "
        "`predict.threads = 1`).",
        f"Data: {res['data']}" + (f", written by `{res['simulate']}`." if res.get("simulate") else ".")
        + (f" {res['note']}" if res.get("note") else "")
        + (f" Input: {res['size']}." if res.get("size") else ""), "",
        f"- predict stage (features, time-ordered cross-validation, retraining, ranking, explanations, track record): **{res['predict_seconds']:.0f} s**, "
        f"peak RSS **{res['predict_peak_rss'] / 2**20:.0f} MiB**"
        + (f"; the stages before it took {res['ingest_seconds']:.0f} s" if res["ingest_seconds"] else ""), "",
    ]
    if res.get("walk_forward"):
        lines += _walk_lines(res["walk_forward"])
    if mo is None:  # no model trained: the stage's notes say why
        lines += [f"The nightly stage trained no model: {'; '.join(m.get('notes') or [])}", ""]
    else:
        lines += [
            f"The nightly stage's pooled out-of-fold days {m['test_start']} to {m['test_end']}, horizon "
            f"{m['horizon_days']} days, {mo['gpu_days']:,} GPU-days, {mo['positive_gpu_days']} positive "
            f"({mo['failures']} failures); promoted: {m.get('promoted')} ({m.get('reason')}):", "",
            *_metric_lines(m, "out-of-fold"),
            f"- both alert above the break-even risk {m['alert_threshold']:.3f} (cost of a needless drain / "
            "cost of a missed failure).", "",
        ]
    section = "\n".join(lines)
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    start = text.find("## predict:")
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + (text[end + 1:] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


if __name__ == "__main__":
    main()
