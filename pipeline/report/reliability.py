"""Reliability tables for the report: AFR, survival, Weibull shapes and flagged groups.

Reads: the statistics stage's tables (``stats_*``) when they hold rows; otherwise a small
fallback computed here from ``inventory``, ``failures`` (or GPU-replacement ``tickets``) and
the span of the records, so a report can be drawn before the statistics stage has run.
Writes nothing. Each function returns a polars frame, empty when there is nothing to show.

The fallback follows the contract's definitions (a failure is a GPU replacement linked to an
inventory serial; exposure is GPU-days inside the window the records cover, with delayed
entry) but is simpler than the statistics stage: no minimum-exposure marking beyond a flag,
no slot or period groupings. The report says which source it used.
"""

from __future__ import annotations

import logging
import warnings

import polars as pl
from scipy import stats as sps

from pipeline.config import Config
from pipeline.warehouse import Warehouse

log = logging.getLogger(__name__)

AFR_COLUMNS = ["gpus", "gpu_days", "failures", "afr_pct", "afr_ci_low_pct", "afr_ci_high_pct"]


def stats_table(wh: Warehouse, name: str) -> pl.DataFrame | None:
    """A statistics table as polars when it exists and has rows, else None."""
    if not wh.table_exists(name):
        return None
    df = wh.pl(f'SELECT * FROM "{name}"', step=f"report: read {name}")
    return df if df.height else None


def _grouped(wh: Warehouse, name: str, by: str) -> pl.DataFrame | None:
    """The rows of a statistics table for one grouping, ``group_value`` renamed to ``by``."""
    st = stats_table(wh, name)
    if st is None:
        return None
    rows = st.filter(pl.col("grouping") == by)
    return rows.rename({"group_value": by}) if rows.height else None


def window(wh: Warehouse, cfg: Config) -> tuple:
    """The observation window (first day, last day): the config's, else what the records span."""
    lo, hi = wh.sql(
        """
        SELECT min(d), max(d) FROM (
            SELECT day AS d FROM gpu_days
            UNION ALL SELECT CAST(opened_at AS DATE) FROM tickets
            UNION ALL SELECT CAST(ts AS DATE) FROM xid_events
            UNION ALL SELECT CAST(failed_at AS DATE) FROM failures)
        """,
        step="report: window",
    )[0]
    from datetime import date

    if cfg.stats.window_start:
        lo = date.fromisoformat(cfg.stats.window_start)
    if cfg.stats.window_end:
        hi = date.fromisoformat(cfg.stats.window_end)
    return lo, hi


def failure_events(wh: Warehouse, cfg: Config) -> pl.DataFrame:
    """One row per failure (serial, failed_at): the ``failures`` table, or, before the
    statistics stage has filled it, the linked tickets that match the failure definition."""
    if wh.scalar("SELECT count(*) FROM failures"):
        return wh.pl("SELECT serial, failed_at, ticket_id, part_code, symptom_code FROM failures",
                     step="report: failures")
    return wh.pl(
        """
        SELECT serial, min(opened_at) AS failed_at, any_value(ticket_id) AS ticket_id,
               any_value(part_code) AS part_code, any_value(symptom_code) AS symptom_code
        FROM tickets
        WHERE serial IS NOT NULL AND opened_at IS NOT NULL
          AND list_contains(?, part_code) AND list_contains(?, action_code)
        GROUP BY serial, CAST(opened_at AS DATE)
        """,
        [list(cfg.stats.failure_parts), list(cfg.stats.failure_actions)],
        step="report: failures from tickets",
    )


def lifetimes(wh: Warehouse, cfg: Config) -> pl.DataFrame:
    """One row per inventory GPU: entry and exit age (days) inside the window, and whether
    it failed (``stats_lifetimes`` when the statistics stage wrote it). A replacement ends the
    GPU's exposure even if the inventory still lists it."""
    st = stats_table(wh, "stats_lifetimes")
    if st is not None:
        return st.select(pl.col("id").alias("serial"), "model", "vendor", "batch", "site", "failed",
                         pl.col("entry_age_days").alias("entry_days"), pl.col("exit_age_days").alias("exit_days"),
                         "gpu_days")
    lo, hi = window(wh, cfg)
    if lo is None:
        return pl.DataFrame()
    fails = failure_events(wh, cfg)
    wh.con.register("_report_failures", fails.to_arrow())
    try:
        return wh.pl(
            """
            WITH f AS (SELECT serial, min(CAST(failed_at AS DATE)) AS fail_day FROM _report_failures
                       WHERE CAST(failed_at AS DATE) BETWEEN $lo AND $hi GROUP BY serial),
            g AS (
                SELECT i.serial, i.model, i.vendor, i.batch, i.site,
                       coalesce(CAST(i.installed_at AS DATE), $lo) AS born,
                       greatest(coalesce(CAST(i.installed_at AS DATE), $lo), $lo) AS start_day,
                       least(coalesce(CAST(i.removed_at AS DATE), $hi), $hi, coalesce(f.fail_day, $hi)) AS end_day,
                       f.fail_day IS NOT NULL AS failed
                FROM inventory i LEFT JOIN f USING (serial))
            SELECT serial, model, vendor, batch, site, failed,
                   date_diff('day', born, start_day) AS entry_days,
                   date_diff('day', born, end_day) AS exit_days,
                   greatest(date_diff('day', start_day, end_day), 0) AS gpu_days
            FROM g WHERE end_day >= start_day
            """,
            {"lo": lo, "hi": hi},
            step="report: lifetimes",
        )
    finally:
        wh.con.unregister("_report_failures")


def poisson_interval(k: int, exposure_days: float, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (chi-square) Poisson interval of an annualized rate in percent."""
    if exposure_days <= 0:
        return float("nan"), float("nan")
    a = 1 - confidence
    years = exposure_days / 365.0
    low = sps.chi2.ppf(a / 2, 2 * k) / 2 if k > 0 else 0.0
    high = sps.chi2.ppf(1 - a / 2, 2 * k + 2) / 2
    return 100 * low / years, 100 * high / years


def afr(wh: Warehouse, cfg: Config, by: str) -> pl.DataFrame:
    """AFR per group of ``by`` (model, vendor, batch, ...) with its exact interval."""
    st = _grouped(wh, "stats_afr", by)
    if st is not None:
        return st.select([by, *AFR_COLUMNS, "low_exposure"]).sort("afr_pct", descending=True, nulls_last=True)
    life = lifetimes(wh, cfg)
    if not life.height:
        return pl.DataFrame()
    grouped = (
        life.with_columns(pl.col(by).fill_null("(unknown)"))
        .group_by(by)
        .agg(pl.len().alias("gpus"), pl.col("gpu_days").sum().cast(pl.Float64),
             pl.col("failed").sum().cast(pl.Int64).alias("failures"))
    )
    return (_with_rates(grouped, cfg.stats.confidence)
            .with_columns((pl.col("gpu_days") < cfg.stats.min_gpu_days).alias("low_exposure"))
            .sort("afr_pct", descending=True, nulls_last=True))


def _with_rates(df: pl.DataFrame, confidence: float) -> pl.DataFrame:
    ci = [poisson_interval(k, e, confidence) for k, e in zip(df["failures"], df["gpu_days"])]
    return df.with_columns(
        pl.when(pl.col("gpu_days") > 0).then(100 * pl.col("failures") / (pl.col("gpu_days") / 365.0)).alias("afr_pct"),
        pl.Series("afr_ci_low_pct", [c[0] for c in ci], dtype=pl.Float64),
        pl.Series("afr_ci_high_pct", [c[1] for c in ci], dtype=pl.Float64),
    )


def fleet_afr(wh: Warehouse, cfg: Config) -> dict:
    """The whole fleet's AFR with its interval, as a dict (empty without data)."""
    st = _grouped(wh, "stats_afr", "")
    if st is not None:
        return st.select("failures", "gpu_days", *AFR_COLUMNS[3:]).row(0, named=True)
    life = lifetimes(wh, cfg)
    if not life.height:
        return {}
    k, e = int(life["failed"].sum()), float(life["gpu_days"].sum())
    low, high = poisson_interval(k, e, cfg.stats.confidence)
    return {"failures": k, "gpu_days": e, "afr_pct": 100 * k / (e / 365) if e else None,
            "afr_ci_low_pct": low, "afr_ci_high_pct": high}


def survival(wh: Warehouse, cfg: Config, by: str = "model") -> pl.DataFrame:
    """Kaplan-Meier curves per group (contract columns), with delayed entry."""
    st = _grouped(wh, "stats_survival", by)
    if st is not None:
        return st.select(by, "t_days", "at_risk", "events", "survival", "ci_low", "ci_high").sort(by, "t_days")
    life = lifetimes(wh, cfg)
    if not life.height:
        return pl.DataFrame()
    from lifelines import KaplanMeierFitter

    frames = []
    for (group,), part in life.with_columns(pl.col(by).fill_null("(unknown)")).group_by([by]):
        part = part.filter(pl.col("exit_days") > pl.col("entry_days"))
        if part.height < 2:
            continue
        kmf = KaplanMeierFitter(alpha=1 - cfg.stats.confidence)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kmf.fit(part["exit_days"].to_numpy(), part["failed"].to_numpy(), entry=part["entry_days"].to_numpy())
        et = kmf.event_table
        ci = kmf.confidence_interval_survival_function_
        frames.append(pl.DataFrame({
            by: [str(group)] * len(et),
            "t_days": et.index.to_numpy().astype(float),
            "at_risk": et["at_risk"].to_numpy().astype("int64"),
            "events": et["observed"].to_numpy().astype("int64"),
            "survival": kmf.survival_function_.iloc[:, 0].to_numpy(),
            "ci_low": ci.iloc[:, 0].to_numpy(),
            "ci_high": ci.iloc[:, 1].to_numpy(),
        }))
    return pl.concat(frames).sort(by, "t_days") if frames else pl.DataFrame()


def weibull_words(shape: float | None, low: float | None, high: float | None) -> str:
    """The Weibull shape in a procurement reader's words."""
    if shape is None or shape != shape:
        return "too few failures to fit a Weibull shape"
    if high is not None and high < 1:
        return "infant mortality: the hazard falls with age (early failures dominate)"
    if low is not None and low > 1:
        return "wear-out: the hazard rises with age"
    return "consistent with a constant (random) failure rate"


def weibull(wh: Warehouse, cfg: Config, by: str = "model") -> pl.DataFrame:
    """Weibull shape per group with its interval and the words for it."""
    st = _grouped(wh, "stats_weibull", by)
    if st is not None:
        return st.select(by, pl.col("units").alias("gpus"), "failures", "shape", "shape_ci_low", "shape_ci_high",
                         "pattern", pl.col("interpretation").alias("words")).sort(by)
    life = lifetimes(wh, cfg)
    if not life.height:
        return pl.DataFrame()
    from lifelines import WeibullFitter

    rows = []
    for (group,), part in life.with_columns(pl.col(by).fill_null("(unknown)")).group_by([by]):
        part = part.filter(pl.col("exit_days") > pl.col("entry_days"))
        shape = low = high = None
        if int(part["failed"].sum()) >= 2:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    wf = WeibullFitter(alpha=1 - cfg.stats.confidence).fit(
                        part["exit_days"].to_numpy(), part["failed"].to_numpy(), entry=part["entry_days"].to_numpy())
                ci = wf.confidence_intervals_.loc["rho_"]
                shape, low, high = float(wf.rho_), float(ci.iloc[0]), float(ci.iloc[1])
            except Exception as exc:  # lifelines raises several kinds on degenerate data
                log.info("weibull fit for %s=%s failed: %s", by, group, exc)
        rows.append({by: str(group), "gpus": part.height, "failures": int(part["failed"].sum()),
                     "shape": shape, "shape_ci_low": low, "shape_ci_high": high,
                     "words": weibull_words(shape, low, high)})
    return pl.DataFrame(rows).sort(by)


def flagged(wh: Warehouse, cfg: Config, groups: tuple[str, ...] = ("batch", "vendor", "model")) -> pl.DataFrame:
    """Groups that fail more than the rest of the fleet: rate ratio, interval, corrected p."""
    st = stats_table(wh, "stats_compare")
    if st is not None:
        return (st.filter(pl.col("flagged") & pl.col("sentence").is_not_null())
                .rename({"dimension": "by", "group_value": "group", "rr_ci_low": "ratio_ci_low",
                         "rr_ci_high": "ratio_ci_high"})
                .sort("rate_ratio", descending=True, nulls_last=True))
    life = lifetimes(wh, cfg)
    if not life.height:
        return pl.DataFrame()
    total_k, total_e = int(life["failed"].sum()), float(life["gpu_days"].sum())
    a = 1 - cfg.stats.confidence
    tests = []
    for by in groups:
        g = afr(wh, cfg, by) if by in life.columns else pl.DataFrame()
        for row in g.iter_rows(named=True):
            k, e = int(row["failures"]), float(row["gpu_days"])
            k_rest, e_rest = total_k - k, total_e - e
            if e <= 0 or e_rest <= 0 or k + k_rest == 0:
                continue
            # Conditional on k + k_rest failures, k is binomial with p = e / (e + e_rest) under H0.
            p0 = e / (e + e_rest)
            test = sps.binomtest(k, k + k_rest, p0, alternative="greater")
            ci = sps.binomtest(k, k + k_rest, p0).proportion_ci(1 - a, method="exact")
            to_ratio = lambda p: (p / (1 - p)) * (e_rest / e) if p < 1 else float("inf")  # noqa: E731
            ratio = (k / e) / (k_rest / e_rest) if k_rest else float("inf")
            tests.append({"by": by, "group": str(row[by]), "failures": k, "gpu_days": e,
                          "afr_pct": row["afr_pct"], "rate_ratio": ratio,
                          "ratio_ci_low": to_ratio(ci.low), "ratio_ci_high": to_ratio(ci.high),
                          "p_value": test.pvalue})
    if not tests:
        return pl.DataFrame()
    df = pl.DataFrame(tests)
    df = df.with_columns((pl.col("p_value") * len(tests)).clip(upper_bound=1.0).alias("p_adjusted"))
    df = df.filter((pl.col("p_adjusted") < a) & (pl.col("rate_ratio") > 1)).sort("rate_ratio", descending=True)
    sentences = [
        f"{r['by']} {r['group']} fails {r['rate_ratio']:.1f}× the rest of the fleet's rate "
        f"({r['failures']} failures in {r['gpu_days']:,.0f} GPU-days, AFR {r['afr_pct']:.1f}%), "
        f"{cfg.stats.confidence:.0%} CI {r['ratio_ci_low']:.1f}–{r['ratio_ci_high']:.1f}×"
        for r in df.iter_rows(named=True)
    ]
    return df.with_columns(pl.Series("sentence", sentences, dtype=pl.Utf8))
