"""Acceptance bench of issue 21: the nightly list replayed over simulated fleets' histories.

For each ``--fleet`` folder (``FLEET/sim`` a ``fleetfault simulate`` output, ``FLEET/wh.duckdb``
its warehouse; both made here when missing, the seed read from the folder name ``sSEED``)
the features are rebuilt as the nightly stage's first step does, then every test period of
``--test-days`` from the fleet's 31st day on is replayed as its night would run it
(:func:`pipeline.predict.backtest.replay`: time-ordered cross-validation, promotion against
the evidence score, the final model). One warehouse per fleet serves every as-of night.

Each history of ``--histories`` (days since the fleet's first day) pools the periods that end
within it, over all fleets, and judges ``list``, ``evidence``, ``model``, ``rules`` and an
``oracle`` that knows from the simulator's truth which GPUs carry a precursor that day
(ranked first; the rest by the evidence score): the ceiling of the top-20 metrics. It
prints the tables of the protocol in bench/RESULTS.md and writes every number to ``--json``.
Usage (the protocol's command)::

    nice python bench/bench_predict_walk.py --fleet /tmp/wf/s61403 --histories 60,120 --test-days 14 --json accept.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_predict import median_interval

FLEETFAULT = [sys.executable, "-m", "pipeline"]
BEFORE = ["inventory", "smi", "xid", "tickets", "normalize", "link", "stats"]
RANKERS = ("list", "evidence", "model", "rules", "oracle")
#: Days apart the pooled fleets' calendars are put, so that "the day's top 20" never mixes fleets.
FLEET_OFFSET_DAYS = 10_000

log = logging.getLogger("bench_predict_walk")


def prepare(fleet: Path, gpus: int, days: int) -> None:
    """Simulate and ingest (the stages before predict) a fleet whose folder lacks them."""
    sim, wh = fleet / "sim", fleet / "wh.duckdb"
    if not (sim / "truth" / "params.json").exists():
        m = re.fullmatch(r"s(\d+)", fleet.name)
        if not m:
            sys.exit(f"--fleet {fleet}: no simulator output in it and no seed in its name (expected sSEED)")
        subprocess.run(FLEETFAULT + ["simulate", "--gpus", str(gpus), "--days", str(days), "--seed", m.group(1),
                                     "--interval", "3600", "--out", str(sim), "-q"], check=True)
    if not wh.exists():
        cmd = FLEETFAULT + ["run", "--data", str(sim), "--warehouse", str(wh), "--out", str(fleet / "out"), "-q",
                            "--config", str(sim / "truth" / "fleetfault.toml")]
        code = subprocess.run(cmd + [x for s in BEFORE for x in ("--stage", s)], check=False).returncode
        if code not in (0, 1):  # 1: some rows quarantined, the rest loaded
            sys.exit(f"ingest of {sim} failed (exit {code})")


def carriers(truth: Path) -> pd.DataFrame:
    """``serial, precursor, carry_from`` (first UTC day the precursor shows) of every truth
    failure, precursor ``none`` included (its ``carry_from`` is null)."""
    f = pd.read_csv(truth / "failures.csv", dtype={"serial": str})
    start = pd.to_datetime(f["failed_at"]) - pd.to_timedelta(f["lead_days"].fillna(0), unit="D")
    return pd.DataFrame({"serial": f["serial"], "precursor": f["precursor"].fillna("none"),
                         "carry_from": start.dt.normalize().where(f["precursor"].fillna("none") != "none")})


def replay_fleet(fleet: Path, test_days: int, seed: int, with_model: bool = True,
                 max_history: int | None = None, from_day: int = 30) -> tuple[list, pd.DataFrame, pd.Timestamp, dict]:
    """(nights, truth carriers, first day, timings) of one fleet: the test periods from day
    ``from_day`` (0-based, after the first day) on; with ``max_history`` only those ending
    within that many days of the first (no longer history pools the others)."""
    from pipeline.config import load_config
    from pipeline.predict.backtest import forward_periods, replay
    from pipeline.predict.features import build_features, data_range
    from pipeline.warehouse import Warehouse

    cfg = load_config(fleet / "sim" / "truth" / "fleetfault.toml")
    cfg = dataclasses.replace(cfg, predict=dataclasses.replace(cfg.predict, test_days=test_days))
    t0 = time.perf_counter()
    with Warehouse(fleet / "wh.duckdb") as wh:
        build_features(wh, cfg)
        t_feat = time.perf_counter() - t0
        first = data_range(wh)[0]
        last = wh.engine.scalar("SELECT max(day) FROM features WHERE label IS NOT NULL", step="bench: last labelled day")
        periods = forward_periods(first, last, test_days, from_day)
        if max_history is not None:
            periods = [p for p in periods if p[1] <= first + timedelta(days=max_history - 1)]
        nights = replay(wh, cfg, periods, seed=seed, with_model=with_model)
    timing = {"features_s": t_feat, "replay_s": time.perf_counter() - t0 - t_feat}
    log.info("%s: features %.0f s, %d nights replayed in %.0f s", fleet, t_feat, len(nights), timing["replay_s"])
    return nights, carriers(fleet / "sim" / "truth"), pd.Timestamp(first), timing


def pooled(fleets: list[tuple[str, list, pd.DataFrame, pd.Timestamp]], history: int) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """The GPU-days of every period ending within ``history`` days, over all fleets (serials
    prefixed and calendars set apart per fleet), each ranker's risk, and the truth of their
    failures."""
    frames, risks, truths = [], {k: [] for k in RANKERS}, []
    for i, (name, nights, truth, first) in enumerate(fleets):
        keep = [n for n in nights if pd.Timestamp(n.test[1]) <= first + timedelta(days=history - 1)]
        if not keep:
            continue
        f = pd.concat([n.frame for n in keep], ignore_index=True)
        day = pd.to_datetime(f["day"])
        carry = f[["serial"]].merge(truth, on="serial", how="left")
        on = (carry["carry_from"].notna() & (day >= carry["carry_from"])).to_numpy()
        ev = np.concatenate([n.risks["evidence"] for n in keep])
        for k in RANKERS[:-1]:
            risks[k].append(np.concatenate([n.risks[k] for n in keep]))
        risks["oracle"].append(np.where(on, 1.0 + ev, ev) / 2.0)  # carriers first, then the evidence order
        f = f.assign(serial=f"{name}:" + f["serial"].astype(str), day=(day + timedelta(days=i * FLEET_OFFSET_DAYS)).dt.date)
        frames.append(f)
        truths.append(truth.assign(serial=f"{name}:" + truth["serial"]))
    if not frames:
        return pd.DataFrame(), {}, pd.DataFrame()
    return (pd.concat(frames, ignore_index=True), {k: np.concatenate(v) for k, v in risks.items()},
            pd.concat(truths, ignore_index=True))


def pooled_dumps(fleets: list[Path], dumps: list[Path], history: int) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """As :func:`pooled`, from the ``--dump`` files of single-fleet runs (``DUMP/HISTORY.parquet``,
    one per fleet, in the same order): runs made apart, on other days or machines, pooled."""
    frames, risks, truths = [], {k: [] for k in RANKERS}, []
    for i, (fleet, dump) in enumerate(zip(fleets, dumps, strict=True)):
        path = dump / f"{history}.parquet"
        if not path.exists():
            continue
        f = pd.read_parquet(path)
        if not f["serial"].astype(str).str.startswith(f"{fleet.name}:").all():
            sys.exit(f"--from-dump {dump}: not a dump of {fleet.name} alone (its serials are not {fleet.name}:...)")
        for k in RANKERS:
            risks[k].append(f.pop(f"risk_{k}").to_numpy())
        frames.append(f.assign(day=(pd.to_datetime(f["day"]) + timedelta(days=i * FLEET_OFFSET_DAYS)).dt.date))
        truth = carriers(fleet / "sim" / "truth")
        truths.append(truth.assign(serial=f"{fleet.name}:" + truth["serial"]))
    if not frames:
        return pd.DataFrame(), {}, pd.DataFrame()
    return (pd.concat(frames, ignore_index=True), {k: np.concatenate(v) for k, v in risks.items()},
            pd.concat(truths, ignore_index=True))


def _leads_by_serial(frame: pd.DataFrame, flagged: np.ndarray) -> pd.Series:
    """Lead days (first flag within the horizon to the failure) of each caught failure, by serial."""
    hit = frame["label"].astype(bool).to_numpy() & flagged
    return pd.Series(frame["days_to_failure"].to_numpy()[hit]).groupby(frame["serial"].to_numpy()[hit]).max()


def judge_history(frame: pd.DataFrame, risks: dict, truth: pd.DataFrame, cfg) -> dict:
    from pipeline.predict import evaluate
    from pipeline.predict.backtest import judge

    res = judge(frame, risks, cfg)
    y = frame["label"].astype(bool).to_numpy()
    base = float(y.mean())
    failed = pd.Series(frame.loc[y, "serial"].unique())
    kind = truth.drop_duplicates("serial").set_index("serial")["precursor"].reindex(failed).fillna("none")
    with_pre = set(kind[kind != "none"].index)
    top = {}
    for k in RANKERS:
        p = res["pooled"][k]
        mask = evaluate._top_per_day(frame, risks[k], lambda n: cfg.predict.alert_top)
        leads = _leads_by_serial(frame, mask)
        top[k] = {"recall": p["recall_topk"], "lift": (p["precision_topk"] / base) if base else None,
                  "caught_with_precursor": int(sum(s in with_pre for s in leads.index))}
    alert_leads = {k: _leads_by_serial(frame, a) for k, a in res["alerts"].items()}
    pre = {k: sorted(int(v) for s, v in lead.items() if s in with_pre) for k, lead in alert_leads.items()}
    by_kind = {}
    for kname in sorted(set(kind)):
        serials = set(kind[kind == kname].index)
        by_kind[kname] = {"failures": len(serials),
                          **{k: int(sum(s in serials for s in alert_leads[k].index)) for k in ("list", "rules")}}
    return {"gpu_days": len(y), "positive_rate": base, "failures": len(failed),
            "failures_with_precursor": len(with_pre), "pooled": {k: v for k, v in res["pooled"].items()},
            "ratios": res["ratios"], "top20": top, "leads_all": res["leads"], "leads_precursor": pre,
            "by_precursor": by_kind}


def table(name: str, h: dict) -> str:
    P, T = h["pooled"], h["top20"]
    L = ["list", "evidence", "model", "rules"]
    rows = [(f"**{name}**: {h['gpu_days']:,} GPU-days, {h['failures']} failures ({h['failures_with_precursor']} with a "
             "precursor by the truth)"), "", "| pooled | " + " | ".join(RANKERS) + " |", "|---" * (len(RANKERS) + 1) + "|"]

    def line(label, cells):
        rows.append(f"| {label} | " + " | ".join(cells) + " |")

    g = lambda v, f="{:.3f}": "—" if v is None else f.format(v)
    line("failures caught at the alert", [f"{P[k]['failures_caught']} / {P[k]['failures']}" for k in L] + ["—"])
    line("recall at the rules' precision / rules' recall",
         [g(h["ratios"][k]["ratio"], "{:.2f}x") for k in L[:3]] + ["1x", "—"])
    line("top-20-per-day recall (failures)", [g(T[k]["recall"]) for k in RANKERS])
    line("top-20-per-day lift", [g(T[k]["lift"], "{:.1f}") for k in RANKERS])
    line("median lead at the alert, failures with a precursor",
         [g(float(np.median(h["leads_precursor"][k])) if h["leads_precursor"][k] else None, "{:.1f}") for k in L] + ["—"])
    line("median lead at the alert, all caught", [g(P[k]["median_lead_days"], "{:.1f}") for k in L] + ["—"])
    line("ECE", [g(P[k]["ece"], "{:.4f}") for k in L] + ["—"])
    line("PR-AUC (GPU-days)", [g(P[k]["pr_auc"]) for k in L] + ["—"])
    line("needless drains", [str(P[k]["needless_drains"]) for k in L] + ["—"])
    rows.append("")
    lo, hi, share = median_interval(h["leads_precursor"]["list"])
    rows.append(f"- list: lead days of caught failures with a precursor {h['leads_precursor']['list']}; median {lo:g} "
                f"to {hi:g} in 95% of bootstrap resamples, >= 3 in {share:.0%}")
    rows.append("- caught at the alert by precursor kind (list / rules of failures): " + "; ".join(
        f"{k} {v['list']}/{v['rules']} of {v['failures']}" for k, v in h["by_precursor"].items()))
    return "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleet", type=Path, action="append", required=True, help="sSEED folder: sim/ and wh.duckdb.")
    ap.add_argument("--histories", default="60,120", help="Days of history to pool periods within, comma-separated.")
    ap.add_argument("--test-days", type=int, default=14, help="Length of a replayed test period.")
    ap.add_argument("--gpus", type=int, default=2000, help="Fleet size when a fleet has to be simulated.")
    ap.add_argument("--days", type=int, default=120, help="Days simulated when a fleet has to be simulated.")
    ap.add_argument("--seed", type=int, default=0, help="The model's random seed.")
    ap.add_argument("--from-day", type=int, default=30, help="First test day, in days after the fleet's first "
                    "(default 30: every night from the first month on); a later one replays only the late nights "
                    "of a long history, e.g. whether the model is promoted once a year is known.")
    ap.add_argument("--evidence-only", action="store_true", help="Fit no trees: the evidence score ranks every "
                    "night and stands in for the model (a development look, not the protocol's measure).")
    ap.add_argument("--json", type=Path, help="Write every number here.")
    ap.add_argument("--dump", type=Path, help="Also write each history's pooled GPU-days with every ranker's risk "
                    "as HISTORY.parquet in this folder (for a closer look at what a ranker missed).")
    ap.add_argument("--from-dump", type=Path, action="append", help="Replay nothing: pool the --dump folders of "
                    "earlier single-fleet runs, one per --fleet in the same order (the fleet gives the truth).")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from pipeline.config import load_config

    if a.from_dump:
        if len(a.from_dump) != len(a.fleet):
            sys.exit("--from-dump: give one per --fleet, in the same order")
        cfg = load_config(a.fleet[0] / "sim" / "truth" / "fleetfault.toml")
        out = {"fleets": [str(f) for f in a.fleet], "from_dumps": [str(d) for d in a.from_dump], "histories": {}}
        for h in (int(x) for x in a.histories.split(",")):
            frame, risks, truth = pooled_dumps(a.fleet, a.from_dump, h)
            if frame.empty:
                continue
            out["histories"][h] = res = judge_history(frame, risks, truth, cfg)
            print(table(f"{h}-day history, pooled from dumps of {', '.join(f.name for f in a.fleet)}", res))
        if a.json:
            a.json.write_text(json.dumps(out, indent=1, default=str))
        return

    fleets, timings = [], {}
    histories = [int(x) for x in a.histories.split(",")]
    for fleet in a.fleet:
        prepare(fleet, a.gpus, a.days)
        nights, truth, first, timings[fleet.name] = replay_fleet(fleet, a.test_days, a.seed, not a.evidence_only,
                                                                 max(histories), a.from_day)
        fleets.append((fleet.name, nights, truth, first))
    cfg = load_config(a.fleet[0] / "sim" / "truth" / "fleetfault.toml")
    out = {"fleets": [str(f) for f in a.fleet], "test_days": a.test_days, "timings": timings, "histories": {},
           "nights": {name: [{"test": [str(n.test[0]), str(n.test[1])], "promoted": n.promoted, "reason": n.reason,
                              "evidence_source": n.evidence_source, "evidence_notes": n.evidence_notes}
                             for n in nights] for name, nights, _, _ in fleets}}
    for h in histories:
        frame, risks, truth = pooled(fleets, h)
        if frame.empty:
            continue
        res = judge_history(frame, risks, truth, cfg)
        out["histories"][h] = res
        if a.dump:
            a.dump.mkdir(parents=True, exist_ok=True)
            frame.assign(**{f"risk_{k}": v for k, v in risks.items()}).to_parquet(a.dump / f"{h}.parquet")
        print(table(f"{h}-day history, {', '.join(f.name for f in a.fleet)}", res))
    for name, nights in out["nights"].items():
        print(f"{name}: promoted on {sum(n['promoted'] for n in nights)} of {len(nights)} nights")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
