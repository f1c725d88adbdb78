"""Benchmark: reading a fleet's kernel logs for the xid stage, judged and decompressed.

Times, over every file under ``DATA/kernel/``, interleaved ``--repeat`` times (median):

* ``head then whole``: :func:`pipeline.ingest.sniff.file_problem` (reads the head) and then
  :func:`pipeline.vocab.files.read_bytes` (reads the file again): what the stage did before;
* ``one read``: :func:`pipeline.ingest.sniff.read_judged` and
  :func:`pipeline.vocab.files.gunzip` of the same bytes: what the stage does now.

Both give the same verdicts and the same bytes (tests/test_bad_files.py).

Run: ``nice .venv/bin/python bench/bench_kernel_read.py --data DIR [--repeat 5]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from pipeline.ingest import sniff
from pipeline.vocab.files import gunzip, read_bytes


def head_then_whole(paths: list[Path]) -> None:
    for p in paths:
        if sniff.file_problem(p) is None:
            read_bytes(p)


def one_read(paths: list[Path]) -> None:
    for p in paths:
        raw, problem = sniff.read_judged(p)
        if problem is None:
            gunzip(raw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    paths = sorted(p for p in (args.data / "kernel").rglob("*") if p.is_file())
    ways = {"head then whole": head_then_whole, "one read": one_read}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(args.repeat):
        for name, way in ways.items():
            wall, cpu = time.perf_counter(), time.process_time()
            way(paths)
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    print(f"{len(paths):,} files; median of {args.repeat}, interleaved")
    for name, got in times.items():
        print(f"{name:16s} {statistics.median(w for w, _ in got) * 1000:7.0f} ms wall "
              f"{statistics.median(c for _, c in got) * 1000:7.0f} ms CPU")


if __name__ == "__main__":
    main()
