"""Walk-forward evaluation: the nightly retraining replayed over many consecutive test periods.

Reads ``features`` (labelled GPU-days); writes nothing. One 30-day test period of a
2,000-GPU fleet holds about ten failures, so one failure moves the median lead time by
days and the recall by ten points. Here each of ``periods`` consecutive test periods (the
latest last) gets its own candidate, trained and calibrated only on the days before it
exactly as :func:`pipeline.predict.train.train` would have done that night (sliding
window, horizon gaps); the periods' test days are then pooled and scored once, each
GPU-day judged by the model that would have been live on it.
"""

from __future__ import annotations

import logging
from datetime import date, timedelta

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from pipeline.config import Config, Predict
from pipeline.predict import evaluate, model
from pipeline.predict.rules import rule_alert
from pipeline.predict.train import Fitted, fit_split, labelled_frame
from pipeline.warehouse import Warehouse

log = logging.getLogger(__name__)


def walk_forward_splits(first: date, last: date, p: Predict, periods: int, min_train_days: int = 60) -> list[model.Split]:
    """Up to ``periods`` splits whose test periods tile the days back from ``last``, oldest
    first; a split's training window is cut at ``first`` and must keep ``min_train_days``."""
    out = []
    for j in range(periods):
        s = model.periods_ending(first, last - timedelta(days=j * p.test_days), p.train_days,
                                 p.calibration_days, p.test_days, p.horizon_days)
        if (s.train[1] - s.train[0]).days + 1 < min_train_days:
            break
        out.append(s)
    return out[::-1]


def walk_forward(wh: Warehouse, cfg: Config, periods: int, *, seed: int = 0, min_train_days: int = 60) -> dict:
    """Per-period and pooled metrics (model next to the rules), see :func:`evaluate.compare`.

    Returns ``{"periods": [{"split", "metrics" | "note"}...], "pooled": compare(...) or None,
    "leads": {"model": [...], "baseline": [...]}, "full_window": {"periods", "pooled", "leads"}}``
    (lead days of each caught failure, pooled; ``full_window``: the periods whose training
    window had all ``train_days``, the nightly model once the warehouse holds enough history).
    """
    p = cfg.predict
    first, last = wh.sql("SELECT min(day), max(day) FROM features WHERE label IS NOT NULL",
                         step="predict: labelled range")[0]
    if first is None:
        return {"periods": [], "pooled": None, "leads": {}}
    splits = walk_forward_splits(first, last, p, periods, min_train_days)
    if not splits:
        return {"periods": [], "pooled": None, "leads": {}}
    frame = labelled_frame(wh, splits[0].train[0], last)
    day = pd.to_datetime(frame["day"]).dt.date.to_numpy()
    rows, done = [], []
    with threadpool_limits(p.threads, "openmp"):
        for s in splits:
            sub = frame[(day >= s.train[0]) & (day <= s.test[1])].reset_index(drop=True)
            fitted = fit_split(sub, s, p, seed=seed)
            if isinstance(fitted, str):
                rows.append({"split": s.to_dict(), "note": fitted})
                continue
            rows.append({"split": s.to_dict(), "metrics": fitted.metrics})
            done.append((fitted, s))
            m = fitted.metrics
            log.info("walk-forward %s..%s: %d failures, PR-AUC %.3f vs %.3f, lead %s vs %s", *s.test,
                     m["model"]["failures"], m["model"]["pr_auc"] or 0, m["baseline"]["pr_auc"] or 0,
                     m["model"]["median_lead_days"], m["baseline"]["median_lead_days"])
    if not done:
        return {"periods": rows, "pooled": None, "leads": {}}
    full = [f for f, s in done if (s.train[1] - s.train[0]).days + 1 == p.train_days]
    return {"periods": rows, **pooled([f for f, _ in done], p),
            "full_window": {"periods": len(full), **(pooled(full, p) if full else {"pooled": None, "leads": {}})}}


def pooled(done: list[Fitted], p: Predict) -> dict:
    """All periods' test days scored as one (and each caught failure's lead, for a histogram)."""
    test = pd.concat([f.test for f in done], ignore_index=True)
    risk, base_risk = np.concatenate([f.risk for f in done]), np.concatenate([f.base_risk for f in done])
    metrics = evaluate.compare(test, risk, base_risk, rule_alert(test), p)
    alerts = {"model": risk >= metrics["alert_threshold"], "baseline": rule_alert(test)}
    return {"pooled": metrics, "leads": {k: sorted(evaluate.caught(test, a)[2]) for k, a in alerts.items()}}
