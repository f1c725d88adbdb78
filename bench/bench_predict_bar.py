"""How often the promotion rule promotes a ranker that is no better: a null simulation.

The nightly training promotes the trees over the evidence score when their pooled
out-of-fold PR-AUC is higher and they win in at least ``PROMOTION_SHARE`` of
``PROMOTION_RESAMPLES`` resamples of the out-of-fold GPUs (each GPU's days drawn together;
:func:`pipeline.predict.train.bootstrap_wins`). Read as a one-sided test, that should
promote a ranker exactly as good as the incumbent about 1 time in 10. A percentile bootstrap
is too narrow when the clusters that carry the signal are few (Hesterberg, "What teachers
should know about the bootstrap", The American Statistician 69(4), 2015, section 3: the
bootstrap distribution's spread is biased low by sqrt((n-1)/n) and its percentile interval
undercovers in small samples), and here those clusters are the failed GPUs: PR-AUC is set by
where the positives rank, so with k failures the comparison rests on k GPUs.

This bench reads no fleet. It draws a pooled out-of-fold period shaped like a fleet's
(``--gpus`` GPUs, ``--days`` days, k failed GPUs whose last ``horizon`` days are positive,
a GPU effect and day noise), and two rankers that are the same signal plus independent noise
of the same size: exchangeable, so neither is better. For each k it reports the share of
draws the rule promotes (the false-promotion rate) and, with ``--better``, the share it
promotes a ranker whose noise is smaller (its power). The least k whose false-promotion
rate is at most the nominal 10% is the promotion bar's failure count.

Usage::

    nice -n 19 ionice -c3 python bench/bench_predict_bar.py --failures 5,7,10,15,20,30,40 --draws 400
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipeline.predict.train import PROMOTION_RESAMPLES, PROMOTION_SHARE


def draw_period(rng: np.random.Generator, gpus: int, days: int, failures: int, horizon: int,
                signal: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gpu index, label, latent evidence) of every GPU-day of one pooled period."""
    gpu = np.repeat(np.arange(gpus), days)
    day = np.tile(np.arange(days), gpus)
    y = np.zeros(gpus * days, dtype=bool)
    failed = rng.choice(gpus, failures, replace=False)
    fail_day = rng.integers(1, days + 1, failures)  # the failure ends the GPU's rows on that day
    keep = np.ones(len(y), dtype=bool)
    for g, d in zip(failed, fail_day, strict=True):
        rows = gpu == g
        keep &= ~(rows & (day >= d))
        y |= rows & (day >= d - horizon) & (day < d)
    latent = rng.normal(0, 1, gpus)[gpu] + rng.normal(0, 1, len(y)) + signal * y
    return gpu[keep], y[keep], latent[keep]


def ranker(rng: np.random.Generator, gpu: np.ndarray, latent: np.ndarray, noise: float) -> np.ndarray:
    """The latent evidence seen through noise of its own, per GPU and per day."""
    return latent + noise * (rng.normal(0, 1, gpu.max() + 1)[gpu] + rng.normal(0, 1, len(gpu)))


def ap_resampled(gpu: np.ndarray, y: np.ndarray, score: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """PR-AUC (average precision, sklearn's definition without ties) under each row of
    ``weights`` (resamples x GPUs: how often each GPU was drawn).

    Only the positives' precisions enter it, so for each positive the rows ranked at or
    above it are counted per GPU once, and each resample is a matrix product.
    """
    pos = np.flatnonzero(y)
    gpus = weights.shape[1]
    above_all = np.zeros((len(pos), gpus))
    above_pos = np.zeros((len(pos), gpus))
    order = np.argsort(-score, kind="stable")
    rank = np.empty(len(score), dtype=np.int64)
    rank[order] = np.arange(len(score))
    for i, p in enumerate(pos):
        ahead = order[: rank[p] + 1]
        above_all[i] = np.bincount(gpu[ahead], minlength=gpus)
        above_pos[i] = np.bincount(gpu[ahead], weights=y[ahead], minlength=gpus)
    w_pos = weights[:, gpu[pos]]  # resamples x positives
    drawn = w_pos > 0  # a positive not drawn has no rows above it to divide by
    precision = np.where(drawn, weights @ above_pos.T, 0.0) / np.where(drawn, weights @ above_all.T, 1.0)
    total = w_pos.sum(axis=1)
    return np.where(total > 0, (w_pos * precision).sum(axis=1) / np.maximum(total, 1e-12), np.nan)


def promotes(rng: np.random.Generator, gpu: np.ndarray, y: np.ndarray, model: np.ndarray, incumbent: np.ndarray,
             resamples: int, share: float) -> bool:
    """The nightly rule: higher pooled PR-AUC, and higher in ``share`` of the GPU resamples."""
    gpus = gpu.max() + 1
    weights = np.vstack([np.ones(gpus), rng.multinomial(gpus, np.full(gpus, 1 / gpus), size=resamples)])
    a, b = ap_resampled(gpu, y, model, weights), ap_resampled(gpu, y, incumbent, weights)
    if not a[0] > b[0]:
        return False
    valid = ~np.isnan(a[1:])
    return bool(valid.any() and (a[1:][valid] > b[1:][valid]).mean() >= share)


def rate(hits: int, n: int) -> dict:
    """The share and its Wilson 95% interval."""
    z, p = 1.96, hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return {"share": p, "low": max(0.0, centre - half), "high": min(1.0, centre + half), "draws": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--failures", default="5,7,10,15,20,30,40", help="Failed GPUs in the pooled period, comma-separated.")
    ap.add_argument("--draws", type=int, default=400, help="Simulated periods per failure count.")
    ap.add_argument("--gpus", type=int, default=2000)
    ap.add_argument("--days", type=int, default=28, help="Days pooled (two 14-day folds by default).")
    ap.add_argument("--horizon", type=int, default=7)
    ap.add_argument("--signal", type=float, default=4.0, help="How far a positive day's evidence stands out.")
    ap.add_argument("--noise", type=float, default=1.0, help="Each ranker's own noise (sd, per GPU and per day).")
    ap.add_argument("--better", type=float, default=0.5, help="The better ranker's noise, for the power (0: skip).")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    print(f"seed {a.seed}; rule: higher PR-AUC and wins in {PROMOTION_SHARE:.0%} of {PROMOTION_RESAMPLES} resamples")
    rng = np.random.default_rng(a.seed)
    out = {"args": vars(a) | {"json": str(a.json)}, "rows": []}
    print("| failures | promoted, equal rankers (95% interval) | promoted, better ranker (95% interval) |")
    print("|---|---|---|")
    for k in (int(x) for x in a.failures.split(",")):
        null = power = 0
        for _ in range(a.draws):
            gpu, y, latent = draw_period(rng, a.gpus, a.days, k, a.horizon, a.signal)
            inc = ranker(rng, gpu, latent, a.noise)
            null += promotes(rng, gpu, y, ranker(rng, gpu, latent, a.noise), inc, PROMOTION_RESAMPLES, PROMOTION_SHARE)
            if a.better:
                power += promotes(rng, gpu, y, ranker(rng, gpu, latent, a.better), inc, PROMOTION_RESAMPLES,
                                  PROMOTION_SHARE)
        row = {"failures": k, "null": rate(null, a.draws), "power": rate(power, a.draws) if a.better else None}
        out["rows"].append(row)
        cell = lambda r: "—" if r is None else f"{r['share']:.3f} ({r['low']:.3f}-{r['high']:.3f})"
        print(f"| {k} | {cell(row['null'])} | {cell(row['power'])} |", flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
