"""Walk-forward evaluation: the nightly decision replayed over many consecutive test periods.

Reads ``features`` (labelled GPU-days); writes nothing. For each of ``periods`` consecutive
test periods (the latest last) the night before it is replayed exactly as
:func:`pipeline.predict.train.train` would run it on the labels known that night: the
time-ordered cross-validation, the promotion decision, the final model and the evidence
score calibrated on the same past. The period's GPU-days are then scored by four rankers:
``list`` (what the night would have published: the model if promoted, else the evidence
score), ``evidence``, ``model`` (the candidate, promoted or not) and ``rules`` (critical
Xids in 7 days). The periods are pooled and judged once: one 30-day period of a small fleet
holds a handful of failures.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import date, timedelta

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from pipeline.config import Config
from pipeline.predict import evaluate, model
from pipeline.predict.rules import RuleBaseline, rule_alert
from pipeline.predict.train import cross_validate, labelled_frame, new_evidence, promotion
from pipeline.warehouse import Warehouse

log = logging.getLogger(__name__)

RANKERS = ("list", "evidence", "model", "rules")


def walk_forward_periods(first: date, last: date, test_days: int, periods: int, min_history: int) -> list[tuple[date, date]]:
    """Up to ``periods`` test periods tiling back from ``last``, oldest first, each with at
    least ``min_history`` days of data before it."""
    out = []
    for j in range(periods):
        t1 = last - timedelta(days=j * test_days)
        t0 = t1 - timedelta(days=test_days - 1)
        if (t0 - first).days < min_history:
            break
        out.append((t0, t1))
    return out[::-1]


def walk_forward(wh: Warehouse, cfg: Config, periods: int, *, seed: int = 0, min_history: int = 30) -> dict:
    """Per-period and pooled metrics of the four rankers.

    Returns ``{"periods": [{"test", "promoted", "reason", "metrics": {ranker: score}}...],
    "pooled": {ranker: score}, "ratios": {...}, "leads": {ranker: [days...]}}``; see
    :func:`evaluate.score` for a score's keys (``topk`` is the day's top ``alert_top``).
    """
    p = dataclasses.replace(cfg.predict, top_k=cfg.predict.alert_top)
    first, last = wh.sql("SELECT min(day), max(day) FROM features WHERE label IS NOT NULL",
                         step="predict: labelled range")[0]
    if first is None:
        return {"periods": [], "pooled": None, "leads": {}}
    frame = labelled_frame(wh, first, last)
    day = pd.to_datetime(frame["day"]).dt.date.to_numpy()
    y = frame["label"].astype(bool).to_numpy().astype(int)
    threshold = p.cost_needless_drain / p.cost_missed_failure
    rows, tests, risks = [], [], {k: [] for k in RANKERS}
    with threadpool_limits(p.threads, "openmp"):
        for t0, t1 in walk_forward_periods(first, last, p.test_days, periods, min_history):
            known = t0 - timedelta(days=p.horizon_days + 1)  # the last day whose label the night knew
            past = (day >= max(first, known - timedelta(days=p.train_days - 1))) & (day <= known)
            test = frame[(day >= t0) & (day <= t1)].reset_index(drop=True)
            ev = new_evidence(p).fit(frame[past], y[past])
            r = {"evidence": ev.predict_proba(test)[:, 1]}
            rules = RuleBaseline().fit(frame[past], y[past])
            r["rules"] = rules.predict_proba(test)[:, 1]
            folds = model.cv_folds(first, known, p.train_days, p.test_days, p.horizon_days, p.cv_folds)
            cv = cross_validate(frame[day <= known].reset_index(drop=True), folds, p, seed=seed) if folds else "no fold"
            if isinstance(cv, str):
                promoted, reason = False, cv
                r["model"] = r["evidence"]
            else:
                promoted, reason = promotion(cv, p)
                levels = model.category_levels(frame[past])
                est = model.fit_raw(model.design_matrix(frame[past], levels), y[past], seed=seed, threads=p.threads)
                r["model"] = model.calibrate(est.predict_proba(model.design_matrix(test, levels))[:, 1], cv.calibration)
            r["list"] = r["model"] if promoted else r["evidence"]
            metrics = {k: evaluate.score(test, r[k], _alert(k, test, r[k], threshold), p) for k in RANKERS}
            rows.append({"test": [str(t0), str(t1)], "promoted": promoted, "reason": reason,
                         "evidence_source": ev.source_, "metrics": metrics})
            log.info("walk-forward %s..%s: %d failures; caught list %d, evidence %d, model %d, rules %d; %s",
                     t0, t1, metrics["list"]["failures"], *(metrics[k]["failures_caught"] for k in RANKERS),
                     "promoted" if promoted else "evidence ranks")
            tests.append(test)
            for k in RANKERS:
                risks[k].append(r[k])
    if not tests:
        return {"periods": rows, "pooled": None, "leads": {}}
    test = pd.concat(tests, ignore_index=True)
    pooled_risk = {k: np.concatenate(v) for k, v in risks.items()}
    alerts = {k: _alert(k, test, pooled_risk[k], threshold) for k in RANKERS}
    pooled = {k: evaluate.score(test, pooled_risk[k], alerts[k], p) for k in RANKERS}
    yt = test["label"].astype(bool).to_numpy().astype(int)
    rp, rr = pooled["rules"]["alert_precision"], pooled["rules"]["alert_recall_gpu_days"] or 0.0
    ratios = {}
    for k in ("list", "evidence", "model"):
        rec = evaluate.recall_at_precision(yt, pooled_risk[k], rp) if rp > 0 else None
        ratios[k] = {"recall_at_rules_precision": rec, "rules_recall": rr,
                     "ratio": (rec / rr) if rec is not None and rr > 0 else None}
    return {"periods": rows, "pooled": pooled, "ratios": ratios, "alert_threshold": threshold,
            "leads": {k: sorted(evaluate.caught(test, a)[2]) for k, a in alerts.items()}}


def _alert(ranker: str, frame: pd.DataFrame, risk: np.ndarray, threshold: float) -> np.ndarray:
    """The rules alert on any critical Xid in 7 days; the others at the break-even risk."""
    return rule_alert(frame) if ranker == "rules" else np.asarray(risk) >= threshold
