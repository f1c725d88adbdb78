"""The report's findings: which groups fail more or less than the fleet, which cannot be judged
yet and how much exposure would judge them, and the leading failure modes.

Reads: ``stats_compare`` (or the same comparison computed on the spot, see
:func:`pipeline.report.reliability.comparisons`), the failures and the coded tickets. Writes
nothing; :mod:`pipeline.report.changes` keeps a snapshot of these findings between reports.

Why a power calculation: a fixed GPU-day threshold cannot say whether a group is judgeable,
because what limits a comparison is the number of *failures* it can expect, which depends on
the fleet's rate. At an AFR of 2% ten GPU-years expect 0.2 failures (nothing can be seen); at
the sample's accelerated 58% they expect six. So a group counts as judgeable when a difference
of ``report.detect_rate_ratio`` (2x by default) against the rest of the fleet would be found
with ``report.power`` (80%) by the same exact conditional test the statistics stage runs, at
the two-sided level ``1 - stats.confidence`` (one comparison; the Benjamini-Hochberg
adjustment across groups is not planned for). The power is computed exactly (Poisson total,
binomial split) while the fleet expects at most a few hundred failures, and from the normal
approximation on the log rate ratio beyond (Breslow & Day, vol. II, 7.2), where it is close::

    ln R >= (z_{1-a/2} + z_{power}) * sqrt(1 / (R lambda T1) + 1 / (lambda T2))

with ``lambda`` the fleet's rate, ``T1`` the group's and ``T2`` the rest's GPU-days. A group
short of it needs its exposure (and the fleet's, at today's mix) multiplied by a factor ``f``:
the figure plans data collection; the verdicts themselves come from the test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import polars as pl
import numpy as np
from scipy.special import gammaln
from scipy.stats import binom, norm, poisson

from pipeline.config import Config
from pipeline.report import reliability, tables
from pipeline.warehouse import Warehouse

#: Verdicts, in the order the findings list them.
MORE, LESS, LIKE, TOO_LITTLE, NO_FAILURES = ("fails more", "fails less", "like the fleet",
                                             "too little exposure", "no failures yet")

#: The comparison test, named as the report names it.
TEST_NAME = "exact conditional test of two Poisson rates, Benjamini–Hochberg adjusted within each dimension"


#: Above this many expected failures the normal approximation stands in for the exact power.
EXACT_LIMIT = 800.0


class _ExactTest:
    """The exact conditional test of one group against the rest, ready for power sums.

    Given ``n`` failures in all, the group's count is binomial with ``p0`` (its share of the
    exposure) under equal rates. The two-sided test (scipy's ``binomtest``: every outcome no
    more likely than the one seen) rejects ``k <= low(n)`` and ``k >= high(n)``; these bounds
    depend only on ``p0``, so each is found once, for the totals a power sum reaches.
    """

    def __init__(self, p0: float, alpha: float):
        self.p0, self.alpha = p0, alpha
        self._bounds: dict[int, tuple[int, int]] = {}

    def _bound(self, n: int) -> tuple[int, int]:
        if n not in self._bounds:
            k = np.arange(n + 1)
            # the pmf from log-gamma directly: scipy's binom.pmf costs several times more per call
            # (bench/RESULTS.md, "Figures that left the docstrings")
            f0 = np.exp(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
                        + k * math.log(self.p0) + (n - k) * math.log1p(-self.p0))
            order = np.sort(f0)
            pval = np.cumsum(order)[np.searchsorted(order, f0 * (1 + 1e-7), side="right") - 1]
            mode = int(np.argmax(f0))
            below, above = k[:mode][pval[:mode] < self.alpha], k[mode:][pval[mode:] < self.alpha]
            self._bounds[n] = (int(below.max()) if below.size else -1, int(above.min()) if above.size else n + 1)
        return self._bounds[n]

    def power(self, mu: float, p1: float) -> float:
        """P(reject) when the total is Poisson(``mu``) and the group's share is ``p1``."""
        spread = 12 * math.sqrt(mu) + 12  # the Poisson mass outside is negligible
        n = np.arange(max(1, int(mu - spread)), int(mu + spread) + 1)
        low, high = np.array([self._bound(int(i)) for i in n]).T
        reject = binom.cdf(low, n, p1) + binom.sf(high - 1, n, p1)
        return float(np.dot(poisson.pmf(n, mu), reject))


def _bisect(short, lo: float, hi: float, steps: int = 24) -> float:
    """The smallest x in [lo, hi] (log scale) where ``short(x)`` turns false."""
    for _ in range(steps):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if short(mid) else (lo, mid)
    return hi


class _Plan:
    """Power of one group's comparison as its exposure or the true ratio varies."""

    def __init__(self, gpu_days: float, rest_gpu_days: float, fleet_rate: float, confidence: float, power: float):
        self.t1, self.t2, self.rate, self.target = gpu_days, rest_gpu_days, fleet_rate, power
        self.alpha = 1 - confidence
        self.za, self.zb = float(norm.ppf(1 - self.alpha / 2)), float(norm.ppf(power))
        self.p0 = gpu_days / (gpu_days + rest_gpu_days)
        self._exact: _ExactTest | None = None

    def mu(self, ratio: float, f: float = 1.0) -> float:
        """Expected failures in all when the group fails ``ratio`` times the rest's rate."""
        return self.rate * (ratio * self.t1 + self.t2) * f

    def p1(self, ratio: float) -> float:
        return ratio * self.t1 / (ratio * self.t1 + self.t2)

    def approx_total(self, ratio: float) -> float:
        """Failures in all the normal approximation of the binomial test needs."""
        p0, p1 = self.p0, self.p1(ratio)
        return (self.za * math.sqrt(p0 * (1 - p0)) + self.zb * math.sqrt(p1 * (1 - p1))) ** 2 / (p1 - p0) ** 2

    def exact(self) -> _ExactTest:
        if self._exact is None:
            self._exact = _ExactTest(self.p0, self.alpha)
        return self._exact

    def short(self, ratio: float, f: float = 1.0) -> bool:
        """Whether the power falls short of the target (exact while the counts are small)."""
        mu = self.mu(ratio, f)
        if mu > EXACT_LIMIT:
            return mu < self.approx_total(ratio)
        return self.exact().power(mu, self.p1(ratio)) < self.target

    def factor(self, ratio: float) -> float:
        """See :func:`exposure_factor`."""
        guess = self.approx_total(ratio) / self.mu(ratio)  # closed form: a bracket for the exact factor
        lo, hi = guess / 4, guess * 4
        while self.short(ratio, hi):  # the discrete test can need more than the approximation says
            hi *= 2
        return _bisect(lambda f: self.short(ratio, f), lo, hi)

    def detectable(self, top: float = 100.0) -> float:
        """See :func:`detectable_ratio`."""
        return math.inf if self.short(top) else _bisect(self.short, 1.0001, top)


def exact_power(gpu_days: float, rest_gpu_days: float, fleet_rate: float, ratio: float,
                alpha: float = 0.05) -> float:
    """Power of the exact conditional test (two-sided, level ``alpha``) when the group fails
    ``ratio`` times the rest's rate ``fleet_rate`` (failures per GPU-day).

    >>> round(exact_power(1000, 9000, 0.01, 2.0), 2)
    0.72
    """
    mu = fleet_rate * (ratio * gpu_days + rest_gpu_days)
    test = _ExactTest(gpu_days / (gpu_days + rest_gpu_days), alpha)
    return test.power(mu, ratio * gpu_days / (ratio * gpu_days + rest_gpu_days))


def exposure_factor(gpu_days: float, rest_gpu_days: float, fleet_rate: float, ratio: float, *,
                    confidence: float = 0.95, power: float = 0.8) -> float:
    """How many times its exposure (and the rest's, at today's mix) a group needs before a rate
    ratio of ``ratio`` against the rest would be detected with ``power``; at most 1 means it has
    enough. ``fleet_rate`` is failures per GPU-day. Infinite when the fleet has no failures or
    a side has no exposure.

    >>> round(exposure_factor(500, 9000, 0.01, 2.0), 1)  # 500 GPU-days expect 5 failures: not enough
    2.3
    """
    if fleet_rate <= 0 or gpu_days <= 0 or rest_gpu_days <= 0:
        return math.inf
    return _Plan(gpu_days, rest_gpu_days, fleet_rate, confidence, power).factor(ratio)


def detectable_ratio(gpu_days: float, rest_gpu_days: float, fleet_rate: float, *,
                     confidence: float = 0.95, power: float = 0.8) -> float:
    """The smallest rate ratio above 1 that today's exposure would detect with ``power``
    (infinite when not even 100 times the rest's rate would be: too few failures)."""
    if fleet_rate <= 0 or gpu_days <= 0 or rest_gpu_days <= 0:
        return math.inf
    return _Plan(gpu_days, rest_gpu_days, fleet_rate, confidence, power).detectable()


def judge(compare: pl.DataFrame, cfg: Config, window_days: float | None) -> pl.DataFrame:
    """Every compared group with its verdict and, for groups that cannot be judged, the
    exposure that would judge them.

    Adds ``verdict``, ``detectable_ratio``, ``needed_gpu_days`` (the group's total), ``more_gpu_days``
    and ``more_days`` (at the group's current pace over the window; null without a window).
    """
    rep, alpha = cfg.report, 1 - cfg.stats.confidence
    rows = []
    for r in compare.iter_rows(named=True):
        t1, t2 = float(r["gpu_days"] or 0), float(r["rest_gpu_days"] or 0)
        k = int(r["failures"] or 0) + int(r["rest_failures"] or 0)
        lam = k / (t1 + t2) if t1 + t2 > 0 else 0.0
        plan = _Plan(t1, t2, lam, cfg.stats.confidence, rep.power) if lam > 0 and t1 > 0 and t2 > 0 else None
        f, rr = math.inf, r["rate_ratio"]
        if r["p_adjusted"] is not None and r["p_adjusted"] < alpha:
            verdict = MORE if rr is None or rr > 1 else LESS
        elif k == 0:
            verdict = NO_FAILURES
        else:
            f = plan.factor(rep.detect_rate_ratio) if plan else math.inf
            verdict = LIKE if f <= 1 else TOO_LITTLE
        # planning figures only where they are the finding: a judged group needs no more data
        needed = t1 * f if verdict == TOO_LITTLE and math.isfinite(f) else None
        more = needed - t1 if needed is not None else None
        rows.append({**r, "verdict": verdict,
                     "detectable_ratio": plan.detectable() if plan else math.inf,
                     "needed_gpu_days": needed, "more_gpu_days": more,
                     "more_days": more / t1 * window_days if more is not None and window_days and t1 > 0 else None})
    schema = {**compare.schema, "verdict": pl.Utf8, "detectable_ratio": pl.Float64, "needed_gpu_days": pl.Float64,
              "more_gpu_days": pl.Float64, "more_days": pl.Float64}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


@dataclass
class Findings:
    """What the Findings section says, gathered once (also what the snapshot keeps)."""

    facts: dict
    groups: pl.DataFrame
    failure_modes: pl.DataFrame = field(default_factory=pl.DataFrame)
    ticket_modes: pl.DataFrame = field(default_factory=pl.DataFrame)

    @property
    def window_days(self) -> float | None:
        lo, hi = self.facts.get("period_start"), self.facts.get("period_end")
        return float((hi - lo).days + 1) if lo and hi else None

    def by_verdict(self, verdict: str) -> pl.DataFrame:
        if not self.groups.height:
            return self.groups
        return self.groups.filter(pl.col("verdict") == verdict)

    def verdict_of(self, dimension: str) -> dict[str, str]:
        """group value -> verdict for one dimension (for the AFR charts and tables)."""
        if not self.groups.height:
            return {}
        part = self.groups.filter(pl.col("dimension") == dimension)
        return dict(zip(part["group_value"].to_list(), part["verdict"].to_list()))


def failure_modes(wh: Warehouse, cfg: Config, top: int = 3) -> pl.DataFrame:
    """The symptoms of the GPU failures, most frequent first (``symptom_code``, ``failures``, ``share``)."""
    df = wh.engine.pl(
        f"SELECT coalesce(symptom_code, '(uncoded)') AS symptom_code, count(*) AS failures "
        f"FROM ({reliability.failure_events_sql(wh, cfg)}) AS f GROUP BY ALL "
        "ORDER BY failures DESC, symptom_code",
        step="report: failure modes of failures",
    )
    if not df.height:
        return df
    return df.with_columns((pl.col("failures") / pl.col("failures").sum()).alias("share")).head(top)


def gather(wh: Warehouse, cfg: Config, facts: dict) -> Findings:
    """The findings from the warehouse; ``facts`` is the report's fleet summary."""
    compare = reliability.comparisons(wh, cfg)
    f = Findings(facts, pl.DataFrame())
    if compare.height:
        f.groups = judge(compare, cfg, f.window_days)
    f.failure_modes = failure_modes(wh, cfg)
    f.ticket_modes = tables.pareto(wh).head(3)
    return f
