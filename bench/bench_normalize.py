"""Benchmark: coding ticket text, frame path against the same matcher row by row, in one run.

Builds ``--tickets`` tickets (default 100,000) with the simulator's ticket writer
(:func:`pipeline.simulate.tickets.ticket_text`: sentence frames, slot references, models,
host names, abbreviations, typos, full-width characters, new serials in the action text)
for the service events of :data:`pipeline.simulate.process.SERVICE_EVENTS`, in English,
Chinese and mixed. Then, on the same frame and the same :class:`Matcher`:

* ``frame``: :meth:`Matcher.code_frame`: canonical text once per distinct raw text, the
  alias scan once per distinct canonical text, the fuzzy step for all of them in
  ``rapidfuzz.process.cdist`` calls, context across fields once per distinct combination,
  joined back;
* ``rows``: :meth:`Matcher.code_rows`: a plain loop calling :meth:`Matcher.match_row` on
  every ticket (canonical text, scan and ``process.extractOne`` per field, no caching).

It checks that both give identical codes, scores and review flags, and reports the
precision on auto-coded rows and the coverage against the codes the tickets were written
from (the simulator's truth follows CODING-GUIDE.md: a BMC firmware flash is ``SOFTWARE``).
``--rows N`` times the row loop on the first N tickets only and scales it (for a
quick look; the reported results use the full run).

Run: ``.venv/bin/python bench/bench_normalize.py [--tickets N] [--seed S] [--rows N]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl


def make_tickets(n: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``n`` simulator-style tickets and their true codes."""
    from pipeline.simulate.fleet import MODELS
    from pipeline.simulate.process import SERVICE_EVENTS
    from pipeline.simulate.tickets import POINT_STYLE, ticket_text

    rng = np.random.default_rng(seed)
    events = list(SERVICE_EVENTS.values())
    weights = np.array([e[0] for e in events]) / sum(e[0] for e in events)
    points = list(POINT_STYLE)
    rows, truth = [], []
    for i in range(n):
        rate, part, symptoms, action, scope = events[int(rng.choice(len(events), p=weights))]
        point = points[int(rng.integers(len(points)))]
        model = MODELS[int(rng.integers(len(MODELS)))]
        row = {"part_code": part, "symptom_code": symptoms[int(rng.integers(len(symptoms)))],
               "action_code": action, "slot": int(rng.integers(8)) if scope == "gpu" else None,
               "host": f"{point[:3]}-gpu{int(rng.integers(1, 400)):03d}", "model": model.inventory_name}
        new_sn = f"{model.serial_prefix}{int(rng.integers(10**6)):06d}" if action == "REPLACE" else None
        p, s, a = ticket_text(rng, row, POINT_STYLE[point][0], new_sn)
        tid = f"T{i:07d}"
        rows.append((point, tid, p, s, a))
        truth.append((point, tid, row["part_code"], row["symptom_code"], row["action_code"]))
    tickets = pl.DataFrame(rows, schema=["service_point", "ticket_id", "part_text", "symptom_text", "action_text"],
                           orient="row")
    return tickets, pl.DataFrame(truth, schema=["service_point", "ticket_id", "part_code", "symptom_code",
                                                "action_code"], orient="row")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tickets", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=0, help="time the row loop on this many tickets and scale")
    args = ap.parse_args()

    from pipeline.normalize.evaluate import score
    from pipeline.normalize.matcher import Matcher

    t0 = time.perf_counter()
    tickets, truth = make_tickets(args.tickets, args.seed)
    distinct = {c: tickets[c].n_unique() for c in ("part_text", "symptom_text", "action_text")}
    print(f"tickets: {tickets.height:,} built in {time.perf_counter() - t0:.1f}s; distinct raw texts {distinct}")

    matcher = Matcher.load()
    t0, c0 = time.perf_counter(), time.process_time()
    fast = matcher.code_frame(tickets)
    t_frame, c_frame = time.perf_counter() - t0, time.process_time() - c0
    print(f"frame: {t_frame:.2f}s wall, {c_frame:.2f}s CPU ({tickets.height / t_frame:,.0f} tickets/s)")

    subset = tickets.head(args.rows) if args.rows else tickets
    t0, c0 = time.perf_counter(), time.process_time()
    slow = matcher.code_rows(subset)
    scale = tickets.height / subset.height
    t_rows, c_rows = (time.perf_counter() - t0) * scale, (time.process_time() - c0) * scale
    scaled = " (scaled)" if args.rows else ""
    print(f"rows:  {t_rows:.2f}s wall, {c_rows:.2f}s CPU{scaled} ({tickets.height / t_rows:,.0f} tickets/s)")

    same = fast.head(subset.height).equals(slow)
    print(f"identical codes, scores and review flags: {same}")
    print(f"speed-up: {t_rows / t_frame:.1f}x wall, {c_rows / c_frame:.1f}x CPU")
    report = score(fast, truth)
    for r in report.summary.iter_rows(named=True):
        print(f"  {r['dimension']:<8} precision {100 * r['precision']:.2f}%  coverage {100 * r['coverage']:.2f}%")
    if not same:
        raise SystemExit("frame and row results differ")


if __name__ == "__main__":
    main()
