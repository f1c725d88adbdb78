"""How good a failure predictor is, judged as the on-call team and spares planning would.

Reads and writes nothing (works on a frame of labelled GPU-days and scores); the stage
writes the results as DVC metrics and plot data. Precision is per GPU-day; recall in the
top-k and top-1% lists, lead time and cost are per failure (a failure is caught when the
GPU was flagged on any of the ``horizon_days`` days before it).

Lead time, the same for model and rules: from the first alert within the horizon before a
failure (the day its replacement ticket was opened) to that day, so 1 to ``horizon_days``:
an earlier alert answers a question the model is not asked (replacement within the
horizon). A breakdown ticketed the same day has no day to be caught on (the replacement
day ends the GPU's rows).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from sklearn.metrics import average_precision_score, brier_score_loss, precision_recall_curve

from pipeline.config import Predict


def recall_at_precision(y: np.ndarray, p: np.ndarray, target: float) -> float:
    """Highest recall at a threshold whose precision is at least ``target`` (0 if none)."""
    if y.sum() == 0:
        return 0.0
    prec, rec, _ = precision_recall_curve(y, p)
    ok = prec >= target
    return float(rec[ok].max()) if ok.any() else 0.0


def expected_calibration_error(y: np.ndarray, p: np.ndarray, bins: int = 10) -> float:
    """ECE over equal-count bins (equal-width bins would put nearly every GPU-day in one)."""
    table = calibration_table(y, p, bins)
    return float((table["count"] * (table["mean_risk"] - table["observed_rate"]).abs()).sum() / max(len(y), 1))


def calibration_table(y: np.ndarray, p: np.ndarray, bins: int = 10) -> pd.DataFrame:
    """Mean predicted risk against the observed rate in equal-count bins of the risk."""
    order = np.argsort(p, kind="stable")
    rows = []
    for chunk in np.array_split(order, min(bins, max(len(p), 1))):
        if len(chunk):
            rows.append({"mean_risk": float(p[chunk].mean()), "observed_rate": float(y[chunk].mean()),
                         "count": len(chunk)})
    return pd.DataFrame(rows, columns=["mean_risk", "observed_rate", "count"])


def pr_curve(y: np.ndarray, p: np.ndarray, points: int = 400) -> pd.DataFrame:
    """Precision-recall curve, thinned to about ``points`` rows for plotting."""
    if y.sum() == 0:
        return pd.DataFrame({"recall": [], "precision": [], "threshold": []})
    prec, rec, thr = precision_recall_curve(y, p)
    keep = np.unique(np.linspace(0, len(thr) - 1, min(points, len(thr))).astype(int))
    return pd.DataFrame({"recall": rec[keep], "precision": prec[keep], "threshold": thr[keep]})


def _top_per_day(frame: pd.DataFrame, risk: np.ndarray, k_of_day) -> np.ndarray:
    """Boolean mask: the ``k_of_day(n)`` highest-risk GPUs of each day (ties by order)."""
    df = pd.DataFrame({"day": frame["day"].to_numpy(), "risk": risk, "i": np.arange(len(risk))})
    df = df.sort_values(["day", "risk", "i"], ascending=[True, False, True], kind="stable")
    rank = df.groupby("day").cumcount().to_numpy()
    size = df.groupby("day")["risk"].transform("size").to_numpy()
    k = np.array([k_of_day(n) for n in size])
    mask = np.zeros(len(risk), dtype=bool)
    mask[df["i"].to_numpy()[rank < k]] = True
    return mask


def _events(frame: pd.DataFrame) -> pd.Series:
    """Failure id of each positive GPU-day (its serial: a serial fails at most once)."""
    return frame["serial"].where(frame["label"].astype(bool))


def caught(frame: pd.DataFrame, flagged: np.ndarray) -> tuple[int, int, list[int]]:
    """(failures caught, failures, lead days of each caught one: first flag to failure)."""
    ev = _events(frame)
    pos = ev.notna().to_numpy()
    n_fail = int(ev[pos].nunique())
    hit = pos & flagged
    lead = pd.Series(frame["days_to_failure"].to_numpy()[hit]).groupby(ev.to_numpy()[hit]).max()
    return len(lead), n_fail, [int(v) for v in lead]


def needless_drains(frame: pd.DataFrame, flagged: np.ndarray, horizon: int) -> int:
    """Drains of GPUs that did not fail: a flag on a negative day, once per GPU per horizon."""
    neg = flagged & ~frame["label"].astype(bool).to_numpy()
    df = frame.loc[neg, ["serial", "day"]].sort_values(["serial", "day"])
    count, last = 0, {}
    for serial, day in zip(df["serial"], pd.to_datetime(df["day"])):
        prev = last.get(serial)
        if prev is None or (day - prev).days > horizon:
            count += 1
            last[serial] = day
    return count


def score(frame: pd.DataFrame, risk: np.ndarray, alert: np.ndarray, cfg: Predict) -> dict:
    """Every metric of one predictor on labelled GPU-days.

    ``risk`` is the calibrated probability, ``alert`` the predictor's own drain decision.
    """
    y = frame["label"].astype(bool).to_numpy().astype(int)
    risk = np.asarray(risk, dtype=float)
    n_days = frame["day"].nunique()
    out: dict[str, float | int | None] = {
        "gpu_days": int(len(y)), "positive_gpu_days": int(y.sum()),
        "pr_auc": float(average_precision_score(y, risk)) if y.sum() else None,
        "brier": float(brier_score_loss(y, risk, pos_label=1)) if len(y) else None,
        "ece": expected_calibration_error(y, risk),
        "recall_at_90_precision": recall_at_precision(y, risk, 0.9),
    }
    for name, k_of_day in (("top1pct", lambda n: max(1, math.ceil(n / 100))), ("topk", lambda n: cfg.top_k)):
        mask = _top_per_day(frame, risk, k_of_day)
        got, n_fail, _ = caught(frame, mask)
        out[f"precision_{name}"] = float(y[mask].mean()) if mask.any() else 0.0
        out[f"recall_{name}"] = got / n_fail if n_fail else None
    got, n_fail, leads = caught(frame, alert)
    drains = needless_drains(frame, alert, cfg.horizon_days)
    out.update({
        "alerts": int(alert.sum()),
        "alert_precision": float(y[alert].mean()) if alert.any() else 0.0,
        "alert_recall_gpu_days": float(alert[y == 1].mean()) if y.sum() else None,
        "failures": n_fail, "failures_caught": got,
        "median_lead_days": float(np.median(leads)) if leads else None,
        "needless_drains": drains,
        "cost_saved": float(got * (cfg.cost_missed_failure - cfg.cost_needless_drain) - drains * cfg.cost_needless_drain),
        "cost_saved_per_day": float(
            (got * (cfg.cost_missed_failure - cfg.cost_needless_drain) - drains * cfg.cost_needless_drain) / max(n_days, 1)),
    })
    return out


def compare(frame: pd.DataFrame, model_risk: np.ndarray, base_risk: np.ndarray, base_alert: np.ndarray,
            cfg: Predict) -> dict:
    """Model and rule baseline side by side, plus the acceptance ratios.

    The model alerts when its calibrated risk exceeds the break-even probability
    ``cost_needless_drain / cost_missed_failure`` (draining then costs less than waiting).
    """
    threshold = cfg.cost_needless_drain / cfg.cost_missed_failure
    model = score(frame, model_risk, model_risk >= threshold, cfg)
    base = score(frame, base_risk, base_alert, cfg)
    y = frame["label"].astype(bool).to_numpy().astype(int)
    base_prec, base_rec = base["alert_precision"], base["alert_recall_gpu_days"] or 0.0
    model_rec = recall_at_precision(y, np.asarray(model_risk), base_prec) if base_prec > 0 else None
    return {
        "model": model, "baseline": base, "alert_threshold": threshold,
        "baseline_precision": base_prec, "baseline_recall": base_rec,
        "model_recall_at_baseline_precision": model_rec,
        "recall_ratio_vs_baseline": (model_rec / base_rec) if model_rec is not None and base_rec > 0 else None,
    }
