"""Benchmark: what the learned layer adds to the rules, on a time split of reviewed tickets.

Two time splits, each: the tickets before the split are the past. The texts the rules left to
review there are answered with their gold code (the most common gold code of the text, as one
answer per text in ``fleetfault review import``; a text whose gold code is empty, undecidable,
gets no answer). The rules with those answers (the matcher's reviewed-answer lookup, today's
review loop) code the tickets after the split: "rules". The learned layer is trained on the
past only (the rules' confident codes and the answers) and fills what the rules left to review
after the split: "rules + learned". Precision and coverage per dimension are those of
``fleetfault evaluate tickets`` (precision on the codes written, coverage = share coded).

* ``sim``: a simulated fleet's tickets (:func:`pipeline.simulate.process.simulate_fleet` and
  the ticket writer only: no telemetry), read by the ticket reader; gold codes from the
  simulator's truth; split at ``--split`` of the days.
* ``corpus``: the hand-written ``tests/data/coding_corpus/dev.csv`` (never ``holdout.csv``),
  in ticket-number order (ZHO-001, DEP-002, ..., the voices interleaved) as time order, split
  in half. 120 past tickets are few: the layer is expected to code nothing at 0.99 there.

The last column, "unguarded", is what the classifier alone would get right if it coded every
non-empty text the rules left empty, with no threshold: whether there is any signal where the
guard refuses to code.

``--audit`` also answers the past tickets the rules did code (a person checked them all), the
most reviewed data a split can give. ``--targets`` lists the precision targets to run.

Run: ``nice python bench/bench_learned.py [--gpus 2000 --days 365 --accel 5 --seed 1] [--targets 0.99,0.95,0.9] [--audit]``
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.config import Config  # noqa: E402
from pipeline.ingest.tickets import load_tickets  # noqa: E402
from pipeline.normalize import learned, stage  # noqa: E402
from pipeline.normalize.evaluate import score  # noqa: E402
from pipeline.normalize.taxonomy import DIMENSIONS  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "coding_corpus" / "dev.csv"
GOLD = [f"{d}_code" for d in DIMENSIONS]


def read_tickets(files: list[Path], point_of) -> pl.DataFrame:
    cfg = Config()
    raw = pl.concat([load_tickets(f, i, point_of(f), cfg).tables["tickets_raw"] for i, f in enumerate(files, 1)])
    return stage.to_tickets(stage.latest(raw))


def sim_tickets(gpus: int, days: int, seed: int, accel: float, split: float) -> tuple[pl.DataFrame, pl.DataFrame, datetime]:
    """A simulated fleet's latest ticket versions, their gold codes and the split instant."""
    from pipeline.simulate.process import DEFAULT_START, simulate_fleet
    from pipeline.simulate.tickets import write_tickets

    sim = simulate_fleet(gpus, days, seed, accel=accel)
    with tempfile.TemporaryDirectory(prefix="bench_learned_") as tmp:
        rows = write_tickets(sim, Path(tmp), {f["serial"]: f["new_serial"] for f in sim.failure_rows})
        tickets = read_tickets(sorted(Path(tmp).glob("*/*")), lambda f: f.parent.name)
    truth = pl.DataFrame([{k: r[k] for k in ("service_point", "ticket_id", *GOLD)} for r in rows])
    return tickets, truth, DEFAULT_START + timedelta(days=days * split)


def corpus_tickets() -> tuple[pl.DataFrame, pl.DataFrame, datetime]:
    """dev.csv with an opened_at from ticket-number order (one ticket an hour), gold, the middle."""
    tickets = read_tickets([CORPUS], lambda f: "coding_corpus")
    gold = pl.read_csv(CORPUS, infer_schema=False).select("service_point", "ticket_id", *GOLD)
    order = sorted(tickets["ticket_id"].to_list(), key=lambda t: (int(re.sub(r"\D", "", t) or 0), t))
    start = datetime(2026, 1, 1)
    at = {t: start + timedelta(hours=i) for i, t in enumerate(order)}
    tickets = tickets.with_columns(pl.col("ticket_id").replace_strict(at, return_dtype=pl.Datetime("us")).alias("opened_at"))
    return tickets, gold, start + timedelta(hours=len(order) // 2)


def answers_for(past: pl.DataFrame, truth: pl.DataFrame, audit: bool) -> list[tuple[str, str, str]]:
    """One answer per (dimension, canonical text) the rules left to review (all texts: audit)."""
    j = past.join(truth.rename({c: f"gold_{c}" for c in GOLD}), on=["service_point", "ticket_id"])
    out = []
    for d in DIMENSIONS:
        votes: dict[str, Counter] = {}
        first: dict[str, str] = {}
        for text, code, gold in j.select(f"{d}_text", f"{d}_code", f"gold_{d}_code").iter_rows():
            key = stage.canonical_key(text or "")
            if not key or not gold or (code is not None and not audit):
                continue
            votes.setdefault(key, Counter())[gold] += 1
            first.setdefault(key, text)
        out += [(d, first[k], v.most_common(1)[0][0]) for k, v in sorted(votes.items())]
    return out


def measure(name: str, tickets: pl.DataFrame, truth: pl.DataFrame, cut: datetime, targets: list[float],
            audit: bool) -> list[dict]:
    cfg = Config()
    rules0 = stage.code(tickets, stage.load_matcher(cfg))
    past0 = rules0.filter(pl.col("opened_at") < cut)
    answers = answers_for(past0, truth, audit)
    rules = stage.code(tickets, stage.load_matcher(cfg, answers))
    past, future = rules.filter(pl.col("opened_at") < cut), rules.filter(pl.col("opened_at") >= cut)
    n_ans = Counter(a[0] for a in answers)
    print(f"\n== {name}: {past.height} tickets before {cut:%Y-%m-%d %H:%M}, {future.height} after; "
          f"answers {dict(n_ans)}{' (audit: every past text)' if audit else ''}")
    base = score(future, truth).summary
    data = learned.examples(past, answers, stage.canonical_key)
    unguarded = {d: _unguarded(d, data[d], future, truth) for d in DIMENSIONS}
    out = []
    for target in targets:
        t0 = time.perf_counter()
        layer = learned.train(data, target)
        filled, rows = learned.fill(future, layer, stage.canonical_key)
        secs = time.perf_counter() - t0
        both = score(filled, truth).summary
        for d, b, r in zip(DIMENSIONS, base.iter_rows(named=True), both.iter_rows(named=True)):
            m = layer.models[d]
            mine = rows.filter(pl.col("dimension") == d).join(
                truth.select("service_point", "ticket_id", pl.col(f"{d}_code").alias("gold")), on=["service_point", "ticket_id"])
            right = mine.filter(pl.col("code") == pl.col("gold")).height
            out.append({"split": name, "target": target, "dimension": d, "tickets": b["tickets"],
                        "rules_precision": b["precision"], "rules_coverage": b["coverage"],
                        "learned_precision": r["precision"], "learned_coverage": r["coverage"],
                        "filled": mine.height, "filled_right": right,
                        "threshold": m.threshold, "why": m.reason, "seconds": round(secs, 1),
                        "unguarded": unguarded[d]})
    return out


def _unguarded(d: str, data, future: pl.DataFrame, truth: pl.DataFrame) -> str:
    """right/candidates if the classifier coded every text the rules left empty, no threshold:
    whether there is signal at all where the guard refuses to code."""
    if data["label"].nunique() < 2:
        return "-"
    canon = stage.canonical_key
    todo = future.filter(pl.col(f"{d}_code").is_null()).join(
        truth.select("service_point", "ticket_id", pl.col(f"{d}_code").alias("gold")), on=["service_point", "ticket_id"])
    texts = {f"{x}_text": [canon(t or "") for t in todo[f"{x}_text"]] for x in DIMENSIONS}
    keep = [i for i, t in enumerate(texts[f"{d}_text"]) if t]
    if not keep:
        return "0/0"
    ctx = learned._context(texts, d)
    frame = pd.DataFrame({"own": [texts[f"{d}_text"][i] for i in keep], "context": [ctx[i] for i in keep]})
    code, _ = learned.predict(learned._fit(data), frame)
    gold = [todo["gold"][i] for i in keep]
    return f"{sum(c == g for c, g in zip(code, gold))}/{len(keep)}"


def show(rows: list[dict]) -> None:
    print("| split | target | dim | tickets | rules P | rules C | +learned P | +learned C | filled (right) | threshold | layer says | unguarded |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        thr = "-" if r["threshold"] is None else f"{r['threshold']:.3f}"
        print(f"| {r['split']} | {r['target']} | {r['dimension']} | {r['tickets']} | {r['rules_precision']:.4f} | "
              f"{r['rules_coverage']:.4f} | {r['learned_precision']:.4f} | {r['learned_coverage']:.4f} | "
              f"{r['filled']} ({r['filled_right']}) | {thr} | {r['why']} | {r['unguarded']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=2000)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--accel", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--split", type=float, default=0.5, help="share of the simulated days before the split")
    ap.add_argument("--targets", default="0.99,0.95,0.9")
    ap.add_argument("--audit", action="store_true", help="answer every past text, not only those left to review")
    ap.add_argument("--only", choices=["sim", "corpus"], default=None)
    args = ap.parse_args()
    targets = [float(t) for t in args.targets.split(",")]
    rows = []
    if args.only in (None, "sim"):
        t0 = time.perf_counter()
        tickets, truth, cut = sim_tickets(args.gpus, args.days, args.seed, args.accel, args.split)
        print(f"simulated {tickets.height} tickets ({args.gpus} GPUs, {args.days} days, accel {args.accel}, "
              f"seed {args.seed}) in {time.perf_counter() - t0:.0f}s")
        rows += measure("sim", tickets, truth, cut, targets, args.audit)
    if args.only in (None, "corpus"):
        tickets, truth, cut = corpus_tickets()
        rows += measure("corpus dev", tickets, truth, cut, targets, args.audit)
    show(rows)


if __name__ == "__main__":
    main()
