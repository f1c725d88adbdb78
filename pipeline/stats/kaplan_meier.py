"""Kaplan-Meier survival curves by age, per group: lifelines does the statistics.

Age is days since install (``birth_at``). A GPU installed before the window enters the risk
set at its age at the window start (delayed entry, lifelines' ``entry=``), so the curve is
not biased towards the survivors of the years before the records; removal and the window
end censor. Rows: age 0, then one per age with failures.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import polars as pl
from lifelines.exceptions import StatError

from pipeline.stats.rates import NONE_LABEL

log = logging.getLogger(__name__)

SURVIVAL_COLUMNS = ["t_days", "at_risk", "events", "survival", "ci_low", "ci_high"]


def _groups(frame: pl.DataFrame, by: str | None):
    """(label, sub-frame) per group; the whole frame as 'fleet' without ``by``."""
    if not by:
        yield "fleet", frame
        return
    for (value,), sub in frame.group_by([by], maintain_order=False):
        yield (NONE_LABEL if value is None else str(value)), sub


def kaplan_meier(frame: pl.DataFrame, *, confidence: float = 0.95):
    """Fit lifelines' :class:`~lifelines.KaplanMeierFitter` with delayed entry on a lifetimes frame."""
    from lifelines import KaplanMeierFitter

    kmf = KaplanMeierFitter(alpha=1 - confidence)
    with warnings.catch_warnings():
        # lifelines warns when early ages have nobody at risk yet (delayed entry): expected here
        warnings.simplefilter("ignore", category=UserWarning)
        kmf.fit(frame["exit_age_days"].to_numpy(), event_observed=frame["failed"].to_numpy(),
                entry=frame["entry_age_days"].to_numpy())
    return kmf


def _degenerate_km(frame: pl.DataFrame) -> pl.DataFrame:
    """Kaplan-Meier where lifelines refuses: with delayed entry the risk set can empty out
    (S(t) reaches 0 while later entrants are still to come). The product-limit estimate
    over lifelines' own event table is still defined; its interval is not, so it is null."""
    from lifelines.utils import survival_table_from_events

    et = survival_table_from_events(frame["exit_age_days"].to_numpy(), frame["failed"].to_numpy(),
                                    birth_times=frame["entry_age_days"].to_numpy())
    at_risk = et["at_risk"].to_numpy().astype(float)
    hazard = np.divide(et["observed"].to_numpy(), at_risk, out=np.zeros_like(at_risk), where=at_risk > 0)
    surv = np.cumprod(1.0 - hazard)
    t = et.index.to_numpy(dtype=float)
    keep = (et["observed"].to_numpy() > 0) | (t == t.min())
    return pl.DataFrame({
        "t_days": t[keep], "at_risk": et["at_risk"].to_numpy()[keep].astype("int64"),
        "events": et["observed"].to_numpy()[keep].astype("int64"), "survival": surv[keep],
        "ci_low": [None] * int(keep.sum()), "ci_high": [None] * int(keep.sum()),
    }, schema={"t_days": pl.Float64, "at_risk": pl.Int64, "events": pl.Int64, "survival": pl.Float64,
               "ci_low": pl.Float64, "ci_high": pl.Float64})


def km_rows(kmf) -> pl.DataFrame:
    """The survival table's rows from a fitted KaplanMeierFitter."""
    et = kmf.event_table
    sf = kmf.survival_function_.iloc[:, 0]
    ci = kmf.confidence_interval_survival_function_
    t = et.index.to_numpy(dtype=float)
    events = et["observed"].to_numpy()
    keep = (events > 0) | (t == t.min() if len(t) else np.array([], bool))
    rows = {
        "t_days": t[keep],
        "at_risk": et["at_risk"].to_numpy()[keep].astype("int64"),
        "events": events[keep].astype("int64"),
        "survival": sf.reindex(t).to_numpy()[keep],
        "ci_low": ci.iloc[:, 0].reindex(t).to_numpy()[keep],
        "ci_high": ci.iloc[:, 1].reindex(t).to_numpy()[keep],
    }
    out = pl.DataFrame(rows, schema={"t_days": pl.Float64, "at_risk": pl.Int64, "events": pl.Int64,
                                     "survival": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64})
    return out.with_columns(pl.col(c).fill_nan(None) for c in ("survival", "ci_low", "ci_high"))


def _origin(rows: pl.DataFrame) -> pl.DataFrame:
    """The age-0 row: everyone alive (at risk: those observed from install on)."""
    return pl.DataFrame({"t_days": [0.0], "at_risk": [0], "events": [0], "survival": [1.0],
                         "ci_low": [1.0], "ci_high": [1.0]}, schema=rows.schema)


def survival_table(frame: pl.DataFrame, by: str | None, *, confidence: float = 0.95) -> pl.DataFrame:
    """Kaplan-Meier rows per group: the ``by`` column (as text), then the survival columns."""
    name = by or "group"
    parts = []
    for label, sub in _groups(frame, by):
        if sub.height == 0:
            continue
        try:
            rows = km_rows(kaplan_meier(sub, confidence=confidence))
        except StatError as exc:
            log.info("%s %s: %s; product-limit estimate without interval", name, label, exc)
            rows = _degenerate_km(sub)
        if rows["t_days"][0] > 0:
            rows = pl.concat([_origin(rows), rows])
        parts.append(rows.with_columns(pl.lit(label).alias(name)).select([name] + SURVIVAL_COLUMNS))
    if not parts:
        return pl.DataFrame(schema={name: pl.Utf8, "t_days": pl.Float64, "at_risk": pl.Int64, "events": pl.Int64,
                                    "survival": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64})
    return pl.concat(parts).sort([name, "t_days"])
