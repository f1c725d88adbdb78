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
from pipeline.predict.train import (
    cross_validate,
    labelled_frame,
    new_evidence,
    promotion,
)
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


def forward_periods(first: date, last: date, test_days: int, min_history: int) -> list[tuple[date, date]]:
    """Test periods of ``test_days`` tiling forward from ``first + min_history`` to ``last``
    (the last one shorter when the days run out): the nights of a fleet from its first
    month on, as a team that started using fleetfault on ``first`` would have lived them."""
    out, t0 = [], first + timedelta(days=min_history)
    while t0 <= last:
        t1 = min(last, t0 + timedelta(days=test_days - 1))
        out.append((t0, t1))
        t0 = t1 + timedelta(days=1)
    return out


@dataclasses.dataclass
class Night:
    """One replayed test period: its GPU-days, each ranker's risk, and the night's decision."""

    test: tuple[date, date]
    frame: pd.DataFrame
    risks: dict[str, np.ndarray]
    promoted: bool
    reason: str
    evidence_source: str
    evidence_notes: list[str] = dataclasses.field(default_factory=list)


def replay(wh: Warehouse, cfg: Config, periods: list[tuple[date, date]], *, seed: int = 0,
           with_model: bool = True) -> list[Night]:
    """Each test period scored as its night would have scored it, on the labels it knew.

    The night before ``t0`` knows the labels up to a horizon before it; it runs the
    time-ordered cross-validation, decides the promotion against the evidence score, fits
    the final model and calibrates the evidence score on that past only. Without
    ``with_model`` the evidence score ranks every night and stands in for the model (a
    quick look at the evidence score alone: no trees are fitted).
    """
    p = dataclasses.replace(cfg.predict, top_k=cfg.predict.alert_top)
    first, last = wh.engine.rows("SELECT min(day), max(day) FROM features WHERE label IS NOT NULL",
                                  step="predict: labelled range")[0]
    if first is None or not periods:
        return []
    frame = labelled_frame(wh, first, last)
    day = pd.to_datetime(frame["day"]).dt.date.to_numpy()
    y = frame["label"].astype(bool).to_numpy().astype(int)
    weights_file = str(cfg.resolve(p.evidence_file)) if p.evidence_file else None
    nights, fits = [], {}
    with threadpool_limits(p.threads, "openmp"):
        for t0, t1 in periods:
            known = t0 - timedelta(days=p.horizon_days + 1)  # the last day whose label the night knew
            past = (day >= max(first, known - timedelta(days=p.train_days - 1))) & (day <= known)
            test = frame[(day >= t0) & (day <= t1)].reset_index(drop=True)
            if not len(test) or not past.any():
                continue
            ev = new_evidence(p, weights_file).fit(frame[past], y[past])
            r = {"evidence": ev.predict_proba(test)[:, 1]}
            rules = RuleBaseline().fit(frame[past], y[past])
            r["rules"] = rules.predict_proba(test)[:, 1]
            folds = model.cv_folds(first, known, p.train_days, p.test_days, p.horizon_days, p.cv_folds)
            if not with_model:
                cv = "model not replayed"
            elif folds:
                cv = cross_validate(frame[day <= known].reset_index(drop=True), folds, p, seed=seed,
                                    weights_file=weights_file, fits=fits)
            else:
                cv = "no fold"
            if isinstance(cv, str):
                promoted, reason = False, cv
                r["model"] = r["evidence"]
            else:
                promoted, reason = promotion(cv, p)
                levels = model.category_levels(frame[past])
                est = model.fit_raw(model.design_matrix(frame[past], levels), y[past], seed=seed, threads=p.threads)
                r["model"] = model.calibrate(est.predict_proba(model.design_matrix(test, levels))[:, 1], cv.calibration)
            r["list"] = r["model"] if promoted else r["evidence"]
            nights.append(Night((t0, t1), test, r, promoted, reason, ev.source_, list(ev.notes_)))
            log.info("replayed %s..%s: %d GPU-days, %s", t0, t1, len(test),
                     "promoted" if promoted else "evidence ranks")
    return nights


def judge(frame: pd.DataFrame, risks: dict[str, np.ndarray], cfg: Config) -> dict:
    """Every ranker of ``risks`` scored on ``frame`` (pooled GPU-days), the recall of each at
    the rules' alert precision against the rules' own, and the lead days of caught failures."""
    p = dataclasses.replace(cfg.predict, top_k=cfg.predict.alert_top)
    threshold = p.cost_needless_drain / p.cost_missed_failure
    alerts = {k: _alert(k, frame, r, threshold) for k, r in risks.items()}
    pooled = {k: evaluate.score(frame, risks[k], alerts[k], p) for k in risks}
    y = frame["label"].astype(bool).to_numpy().astype(int)
    rp, rr = pooled["rules"]["alert_precision"], pooled["rules"]["alert_recall_gpu_days"] or 0.0
    ratios = {}
    for k in (k for k in risks if k != "rules"):
        rec = evaluate.recall_at_precision(y, risks[k], rp) if rp > 0 else None
        ratios[k] = {"recall_at_rules_precision": rec, "rules_recall": rr,
                     "ratio": (rec / rr) if rec is not None and rr > 0 else None}
    return {"pooled": pooled, "ratios": ratios, "alert_threshold": threshold, "alerts": alerts,
            "leads": {k: sorted(evaluate.caught(frame, a)[2]) for k, a in alerts.items()}}


def walk_forward(wh: Warehouse, cfg: Config, periods: int, *, seed: int = 0, min_history: int = 30) -> dict:
    """Per-period and pooled metrics of the four rankers.

    Returns ``{"periods": [{"test", "promoted", "reason", "metrics": {ranker: score}}...],
    "pooled": {ranker: score}, "ratios": {...}, "leads": {ranker: [days...]}}``; see
    :func:`evaluate.score` for a score's keys (``topk`` is the day's top ``alert_top``).
    """
    span = wh.engine.rows("SELECT min(day), max(day) FROM features WHERE label IS NOT NULL", step="predict: labelled range")[0]
    if span[0] is None:
        return {"periods": [], "pooled": None, "leads": {}}
    nights = replay(wh, cfg, walk_forward_periods(span[0], span[1], cfg.predict.test_days, periods, min_history),
                    seed=seed)
    rows = []
    for n in nights:
        metrics = judge(n.frame, n.risks, cfg)["pooled"]
        rows.append({"test": [str(n.test[0]), str(n.test[1])], "promoted": n.promoted, "reason": n.reason,
                     "evidence_source": n.evidence_source, "metrics": metrics})
    if not nights:
        return {"periods": rows, "pooled": None, "leads": {}}
    test = pd.concat([n.frame for n in nights], ignore_index=True)
    res = judge(test, {k: np.concatenate([n.risks[k] for n in nights]) for k in RANKERS}, cfg)
    res.pop("alerts")
    return {"periods": rows, **res}


def _alert(ranker: str, frame: pd.DataFrame, risk: np.ndarray, threshold: float) -> np.ndarray:
    """The rules alert on any critical Xid in 7 days; the others at the break-even risk."""
    return rule_alert(frame) if ranker == "rules" else np.asarray(risk) >= threshold
