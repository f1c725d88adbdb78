"""Scoring coded tickets against ground truth.

Reads a coded ticket table (the ``normalize`` contract's columns) and a truth table (the
simulator's ``truth/tickets.csv`` or any gold file with ``service_point, ticket_id`` and the
code columns); writes nothing itself. Joined on ``(service_point, ticket_id)``, it reports
per dimension the precision on automatically coded rows (the ones nobody reviews, so the
ones that must be right), the coverage (share coded automatically; also among the tickets
whose gold code is not empty, since an empty gold code means "a careful engineer could not
decide" and no code is the right answer there), a confusion table of the errors, which is
where new aliases come from, and a reliability table of the scores: codes scoring at least s
are right with about the probability s says when the scores are calibrated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from pipeline.errors import UsageError
from pipeline.normalize.taxonomy import DIMENSIONS

__all__ = ["EvalReport", "score"]

KEYS = ("service_point", "ticket_id")
CUTS = (50.0, 80.0, 90.0, 95.0, 97.0, 98.0, 99.0)


@dataclass(frozen=True)
class EvalReport:
    """What :func:`score` found.

    Attributes
    ----------
    summary : polars.DataFrame
        One row per dimension: ``dimension, tickets, auto, correct, precision, coverage,
        decidable, decided_coverage`` (``decidable``: tickets with a gold code;
        ``decided_coverage``: auto-coded among those).
    confusion : polars.DataFrame
        The errors on auto-coded rows: ``dimension, truth, coded, n`` (most frequent first).
    missed : polars.DataFrame
        Rows left to review, per dimension and true code: ``dimension, truth, n``.
    unmatched_coded, unmatched_truth : int
        Coded rows without truth, truth rows without a coded row.
    reliability : polars.DataFrame
        When the coded table has ``<dimension>_score`` columns: per dimension and cut s,
        ``codes`` auto-coded with a score >= s, their ``precision`` and ``mean_score`` (as a
        probability); calibrated scores have the two close.
    routes : polars.DataFrame
        When the coded table has ``<dimension>_route`` columns (how the rules found each code,
        :meth:`pipeline.normalize.matcher.Matcher.routes`): per dimension and route, ``codes``
        auto-coded, their ``precision`` and ``mean_score``: the calibration holds route by route.
    """

    summary: pl.DataFrame
    confusion: pl.DataFrame
    missed: pl.DataFrame
    unmatched_coded: int
    unmatched_truth: int
    reliability: pl.DataFrame = field(default_factory=pl.DataFrame)
    routes: pl.DataFrame = field(default_factory=pl.DataFrame)

    def passed(self, precision: float = 0.99, coverage: float = 0.95) -> bool:
        """True when every dimension meets both targets (coverage among decidable tickets)."""
        s = self.summary
        return s.height > 0 and bool(((s["precision"] >= precision) & (s["decided_coverage"] >= coverage)).all())


def score(coded: pl.DataFrame, truth: pl.DataFrame) -> EvalReport:
    """Score coded tickets against truth.

    Parameters
    ----------
    coded : polars.DataFrame
        ``service_point, ticket_id`` and ``<dimension>_code`` columns (null: not coded).
    truth : polars.DataFrame
        ``service_point, ticket_id`` and the true ``<dimension>_code`` columns; a dimension
        missing from either table is left out.

    Returns
    -------
    EvalReport

    Examples
    --------
    >>> c = pl.DataFrame({"service_point": ["a", "a"], "ticket_id": ["1", "2"], "part_code": ["GPU", None]})
    >>> t = pl.DataFrame({"service_point": ["a", "a"], "ticket_id": ["1", "2"], "part_code": ["GPU", "FAN"]})
    >>> score(c, t).summary.select("precision", "coverage").row(0)
    (1.0, 0.5)
    """
    for name, df in (("coded", coded), ("truth", truth)):
        missing = [k for k in KEYS if k not in df.columns]
        if missing:
            raise UsageError(f"{name} table lacks {', '.join(missing)} (has: {', '.join(df.columns)}); "
                             "both tables need service_point and ticket_id to be joined")
    dims = [d for d in DIMENSIONS if f"{d}_code" in coded.columns and f"{d}_code" in truth.columns]
    if not dims:
        raise UsageError("no code column in both tables: expected part_code, symptom_code or action_code")
    cols = [f"{d}_code" for d in dims]

    def keyed(df: pl.DataFrame, suffix: str) -> pl.DataFrame:
        return (df.select([pl.col(k).cast(pl.Utf8) for k in KEYS]
                          + [pl.col(c).cast(pl.Utf8).str.strip_chars().replace("", None).alias(c + suffix) for c in cols])
                .unique(subset=list(KEYS), keep="last"))

    c, t = keyed(coded, "_c"), keyed(truth, "_t")
    scores = [f"{d}_score" for d in dims if f"{d}_score" in coded.columns]
    routed = [f"{d}_route" for d in dims if f"{d}_route" in coded.columns]
    if scores or routed:
        c = c.join(coded.select([pl.col(k).cast(pl.Utf8) for k in KEYS] + [pl.col(s).cast(pl.Float64) for s in scores]
                                + [pl.col(r).cast(pl.Utf8) for r in routed])
                   .unique(subset=list(KEYS), keep="last"), on=list(KEYS), how="left")
    j = c.join(t, on=list(KEYS), how="inner")
    rows, confusion, missed, reliable, by_route = [], [], [], [], []
    for d, col in zip(dims, cols):
        got, want = pl.col(col + "_c"), pl.col(col + "_t")
        auto = j.filter(got.is_not_null())
        correct = auto.filter(got == want).height
        decidable = j.filter(want.is_not_null())
        decided = decidable.filter(got.is_not_null()).height
        rows.append({"dimension": d, "tickets": j.height, "auto": auto.height, "correct": correct,
                     "precision": correct / auto.height if auto.height else 1.0,
                     "coverage": auto.height / j.height if j.height else 0.0,
                     "decidable": decidable.height,
                     "decided_coverage": decided / decidable.height if decidable.height else 0.0})
        if f"{d}_score" in scores:
            ok = auto.select((got == want).fill_null(False).alias("ok"), pl.col(f"{d}_score").alias("s"))
            for cut in CUTS:
                sel = ok.filter(pl.col("s") >= cut)
                reliable.append({"dimension": d, "score_at_least": cut, "codes": sel.height,
                                 "precision": sel["ok"].mean() if sel.height else None,
                                 "mean_score": sel["s"].mean() / 100 if sel.height else None})
        if f"{d}_route" in routed:
            by_route.append(auto.group_by(pl.col(f"{d}_route").fill_null("").alias("route")).agg(
                pl.len().alias("codes"), (got == want).fill_null(False).mean().alias("precision"),
                (pl.col(f"{d}_score").mean() / 100 if f"{d}_score" in scores else pl.lit(None, pl.Float64)).alias("mean_score"))
                .with_columns(pl.lit(d).alias("dimension")))
        confusion.append(auto.filter(got != want).group_by(want.alias("truth"), got.alias("coded")).len("n")
                         .with_columns(pl.lit(d).alias("dimension")))
        missed.append(j.filter(got.is_null()).group_by(want.alias("truth")).len("n")
                      .with_columns(pl.lit(d).alias("dimension")))
    conf = (pl.concat(confusion).select("dimension", "truth", "coded", "n")
            .sort(["n", "dimension", "truth"], descending=[True, False, False]))
    miss = pl.concat(missed).select("dimension", "truth", "n").sort(["n", "dimension"], descending=[True, False])
    rel = pl.DataFrame(reliable, schema={"dimension": pl.Utf8, "score_at_least": pl.Float64, "codes": pl.Int64,
                                         "precision": pl.Float64, "mean_score": pl.Float64})
    routes = (pl.concat(by_route).select("dimension", "route", pl.col("codes").cast(pl.Int64), "precision", "mean_score")
              .sort(["dimension", "codes"], descending=[False, True]) if by_route else pl.DataFrame())
    return EvalReport(pl.DataFrame(rows), conf, miss, c.height - j.height, t.height - j.height, rel, routes)
