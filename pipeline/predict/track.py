"""How the list has done so far on this fleet: caught, missed, false alarms and lead time per month.

Reads ``features`` (labelled GPU-days) and ``predictions`` (the lists the nightly runs
published); writes ``predict_track``. A GPU counts as flagged on a day when it was in that
day's top ``predict.alert_top`` with some evidence: from the published list where one exists
for the day, else from the evidence score replayed on the day's features (its weights are
not fitted to the outcome, so replaying it looks ahead only through its calibration, which
does not change the order). A failure is caught when its GPU was flagged on one of the
horizon's days before it, its lead the days from the first such flag; a false alarm is a
flag on a GPU that was not replaced within the horizon, once per GPU per horizon.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl

from pipeline.config import Config
from pipeline.predict import evaluate, evidence
from pipeline.warehouse import Warehouse

COLUMNS = ["month", "source", "failures", "caught", "missed", "false_alarms", "median_lead_days", "gpu_days"]


def track_record(wh: Warehouse, cfg: Config) -> pd.DataFrame:
    """One row per month of labelled days (see the module doc); also replaces ``predict_track``."""
    p = cfg.predict
    cols = ", ".join(f'"{c}"' for c in ("serial", "host", "day", "label", "days_to_failure", *evidence.INPUTS))
    frame = wh.engine.pandas(f"SELECT {cols} FROM features WHERE label IS NOT NULL ORDER BY day, serial", step="predict: track")
    if not len(frame):
        out = pd.DataFrame(columns=COLUMNS)
        _store(wh, out)
        return out
    s = evidence.score(frame)
    flagged = _top_per_day(frame, s, p.alert_top) & (s > 0)
    source = np.full(len(frame), "replayed", dtype=object)
    published = wh.engine.pandas("SELECT serial, as_of AS day, rank FROM predictions", step="predict: published lists")
    if len(published):
        key = frame[["serial", "day"]].merge(published, on=["serial", "day"], how="left")
        have_list = set(pd.to_datetime(published["day"]).dt.date)
        days = pd.to_datetime(frame["day"]).dt.date
        on = days.isin(have_list).to_numpy()
        flagged = np.where(on, (key["rank"].fillna(np.inf) <= p.alert_top).to_numpy(), flagged)
        source[on] = "published"
    frame = frame.assign(month=pd.to_datetime(frame["day"]).dt.strftime("%Y-%m"), flagged=flagged, source=source)
    rows = []
    for month, g in frame.groupby("month", sort=True):
        f = g["flagged"].to_numpy()
        got, n, leads = evaluate.caught(g, f)
        rows.append({"month": month, "source": "published" if (g["source"] == "published").all() else
                     ("replayed" if (g["source"] == "replayed").all() else "mixed"),
                     "failures": n, "caught": got, "missed": n - got,
                     "false_alarms": evaluate.needless_drains(g, f, p.horizon_days),
                     "median_lead_days": float(np.median(leads)) if leads else None, "gpu_days": len(g)})
    out = pd.DataFrame(rows, columns=COLUMNS)
    _store(wh, out)
    return out


def _top_per_day(frame: pd.DataFrame, s: np.ndarray, k: int) -> np.ndarray:
    df = pd.DataFrame({"day": frame["day"].to_numpy(), "s": s, "i": np.arange(len(s))})
    df = df.sort_values(["day", "s", "i"], ascending=[True, False, True], kind="stable")
    mask = np.zeros(len(s), dtype=bool)
    mask[df["i"].to_numpy()[df.groupby("day").cumcount().to_numpy() < k]] = True
    return mask


def _store(wh: Warehouse, out: pd.DataFrame) -> None:
    with wh.transaction():
        wh.clear("predict_track")
        if len(out):
            wh.insert("predict_track", pl.from_pandas(out, schema_overrides={"median_lead_days": pl.Float64}))
