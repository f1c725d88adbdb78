"""Intervals, comparisons, survival and Weibull against scipy and lifelines on the same data."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst
from scipy.stats import chi2, poisson

import pipeline.stats as st
from pipeline.errors import UsageError
from pipeline.stats.comparisons import compare_groups, sentence
from pipeline.stats.kaplan_meier import survival_table


def test_poisson_interval_matches_the_chi_square_formula():
    lo, hi = st.poisson_interval(10, 1000.0)
    assert lo == pytest.approx(chi2.ppf(0.025, 20) / 2 / 1000)
    assert hi == pytest.approx(chi2.ppf(0.975, 22) / 2 / 1000)
    assert st.poisson_interval(0, 10.0) == (0.0, pytest.approx(3.68887945 / 10))
    assert all(math.isnan(x) for x in st.poisson_interval(3, 0.0))


@settings(max_examples=200, deadline=None)
@given(k=hst.integers(0, 5000), t=hst.floats(1e-3, 1e7), conf=hst.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_poisson_interval_brackets_the_estimate(k, t, conf):
    lo, hi = st.poisson_interval(k, t, conf)
    assert 0 <= lo <= k / t <= hi
    # the exact interval's ends are where the tail probabilities equal alpha/2
    if k > 0:
        assert poisson.sf(k - 1, lo * t) == pytest.approx((1 - conf) / 2, rel=1e-4, abs=1e-9)
    assert poisson.cdf(k, hi * t) == pytest.approx((1 - conf) / 2, rel=1e-4, abs=1e-9)


def test_a_small_group_is_marked_and_its_interval_is_wide():
    from pipeline.stats.rates import add_rates

    counts = pl.DataFrame({"model": ["A", "B"], "gpus": [3, 900], "gpu_days": [300.0, 90000.0], "failures": [1, 40]})
    out = add_rates(counts, ["model"], confidence=0.95, min_gpu_days=3650.0)
    a, b = out.row(0, named=True), out.row(1, named=True)
    assert a["low_exposure"] and not b["low_exposure"]
    assert a["afr_pct"] > b["afr_pct"] and a["afr_ci_low_pct"] < b["afr_ci_high_pct"]  # not shown worse
    assert a["afr_ci_high_pct"] - a["afr_ci_low_pct"] > 10 * (b["afr_ci_high_pct"] - b["afr_ci_low_pct"])


def test_rate_ratio_interval_and_exact_test():
    r = st.rate_ratio_test(30, 1000.0, 40, 4000.0)
    assert r["rate_ratio"] == pytest.approx(3.0)
    assert r["rr_ci_low"] < 3.0 < r["rr_ci_high"] and r["rr_ci_low"] > 1.5
    assert r["p_value"] < 1e-4
    same = st.rate_ratio_test(10, 1000.0, 40, 4000.0)
    assert same["p_value"] == pytest.approx(1.0) and same["rr_ci_low"] < 1 < same["rr_ci_high"]
    none = st.rate_ratio_test(5, 100.0, 0, 1000.0)
    assert none["rate_ratio"] is None and none["rr_ci_high"] is None and none["rr_ci_low"] > 0
    assert st.rate_ratio_test(0, 100.0, 0, 100.0)["p_value"] is None


def test_compare_flags_the_outlier_with_a_procurement_sentence():
    counts = pl.DataFrame({"batch": ["B-2024-07", "B-2024-01", "B-2023-11", "B-2023-05"],
                           "gpu_days": [20000.0, 60000.0, 50000.0, 2000.0], "failures": [31, 28, 22, 1]})
    out = compare_groups(counts, "batch", models={"B-2024-07": "H100"})
    flagged = out.filter(pl.col("flagged"))
    assert flagged["group_value"].to_list() == ["B-2024-07"]
    s = flagged["sentence"][0]
    assert s.startswith("batch B-2024-07 of H100 fails ") and "× the rate of the rest of the fleet, 95% CI " in s
    assert (out["p_adjusted"] >= out["p_value"]).all()
    assert out.filter(pl.col("group_value") == "B-2023-05")["sentence"][0] is None


def test_sentence_reads_like_the_issue():
    r = {"rate_ratio": 3.1, "rr_ci_low": 2.2, "rr_ci_high": 4.3}
    assert sentence("batch", "B-2024-07", "H100", r, 0.95) == \
        "batch B-2024-07 of H100 fails 3.1× the rate of the rest of the fleet, 95% CI 2.2–4.3"


@pytest.mark.parametrize("shape, ci, pattern", [
    (0.55, (0.45, 0.66), "infant mortality"), (1.02, (0.8, 1.25), "random"), (2.6, (2.5, 2.7), "wear-out")])
def test_weibull_shape_in_words(shape, ci, pattern):
    assert st.describe_shape(shape, *ci)[0] == pattern


def _lifetimes(seed: int, n: int = 400, shape: float = 1.0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    birth = np.datetime64("2020-01-01") + rng.integers(0, 1000, n).astype("timedelta64[D]")
    window = np.datetime64("2023-01-01")
    death = birth + (rng.weibull(shape, n) * 900).astype("timedelta64[D]") + np.timedelta64(1, "D")
    end = np.minimum(death, np.datetime64("2025-01-01"))
    keep = end > window
    return st.lifetime_frame(pl.DataFrame({
        "id": [f"g{i}" for i in range(n)], "start": birth.astype(str), "entry": str(window), "end": end.astype(str),
        "failed": (death <= np.datetime64("2025-01-01")).astype(int).astype(str),
        "vendor": rng.choice(["Dell", "HPE"], n),
    }).filter(pl.Series(keep)))


def test_kaplan_meier_is_lifelines_with_delayed_entry():
    from lifelines import KaplanMeierFitter

    frame = _lifetimes(1, shape=1.6)
    ours = survival_table(frame, "vendor")
    for vendor in ("Dell", "HPE"):
        sub = frame.filter(pl.col("vendor") == vendor)
        kmf = KaplanMeierFitter().fit(sub["exit_age_days"].to_numpy(), sub["failed"].to_numpy(),
                                      entry=sub["entry_age_days"].to_numpy())
        rows = ours.filter((pl.col("vendor") == vendor) & (pl.col("events") > 0))
        expected = kmf.survival_function_at_times(rows["t_days"].to_numpy()).to_numpy()
        np.testing.assert_allclose(rows["survival"].to_numpy(), expected, rtol=1e-10)
        et = kmf.event_table.loc[rows["t_days"].to_numpy()]
        assert rows["at_risk"].to_list() == et["at_risk"].astype(int).tolist()
        assert (rows["ci_low"] <= rows["survival"]).all() and (rows["survival"] <= rows["ci_high"]).all()
    assert ours.columns == ["vendor", "t_days", "at_risk", "events", "survival", "ci_low", "ci_high"]


def test_weibull_recovers_a_wear_out_shape():
    fits = st.weibull(_lifetimes(2, n=1500, shape=2.5))
    row = fits.row(0, named=True)
    assert row["pattern"] == "wear-out" and row["shape_ci_low"] < 2.5 < row["shape_ci_high"] + 0.3


def test_lifetime_table_errors_name_the_problem(tmp_path):
    bad = tmp_path / "rma.csv"
    for text, problem in [
        ("id,start,end\nA,2024-01-01,2024-05-01\n", r"missing column\(s\) \['failed'\]"),
        ("id,start,end,failed\nA,2024-01-01,sometime,1\n", "'end' has a value that is not a date: 'sometime'"),
        ("id,start,end,failed\nA,2024-05-01,2024-01-01,1\n", "'end' before 'start'"),
        ("id,start,end,failed\nA,2024-01-01,2024-05-01,maybe\n", "must be 0/1"),
        ("id,start,end,failed\nA,2024-01-01,2024-05-01,1\nA,2024-01-01,2024-06-01,0\n", "appears more than once"),
    ]:
        bad.write_text(text)
        with pytest.raises(UsageError, match=problem):
            st.read_lifetime_table(bad)
    good = tmp_path / "ok.csv"
    good.write_text("id,start,end,failed,vendor\nA,2024-01-01,2024-05-01,1,Dell\nB,2024-01-01,2025-01-01,0,HPE\n")
    with pytest.raises(UsageError, match="unknown column.*choose from vendor"):
        st.afr(good, by="model")
    rates = st.afr(good, by="vendor")
    assert rates["failures"].to_list() == [1, 0] and rates["gpu_days"].to_list() == [121.0, 366.0]
