"""The statistics on real data: Titan's GPU lifetimes (ORNL, SC20), through a lifetime table.

``gc_summary_loc.csv`` has one row per board: operating seconds, last seen, the paper's
failure flag ``dead`` and the batch (old: first installed before 2016; new: the 2017
replacements). The paper's findings to reproduce: 5,089 boards died; the old batch fails far
more than the new; among old boards cage 2 (top of the cabinet, hottest air) fails most.
"""

from __future__ import annotations

import polars as pl
import pytest

import pipeline.stats as st


@pytest.fixture(scope="module")
def titan_csv(tmp_path_factory):
    from tests.conftest import EXTERNAL

    src = EXTERNAL / "titan-gpu-lifetimes" / "gc_summary_loc.csv"
    if not src.exists():
        pytest.skip("Titan lifetimes are not in ../shared/data/external")
    raw = pl.read_csv(src, schema_overrides={"SN": pl.Utf8})
    last = raw["last"].str.to_datetime("%Y-%m-%d %H:%M:%S")
    out = tmp_path_factory.mktemp("titan") / "titan.csv"
    raw.select(
        pl.col("SN").alias("id"), (last - pl.duration(seconds=pl.col("time"))).alias("start"), last.alias("end"),
        pl.col("dead").cast(pl.Int8).alias("failed"), "batch", "cage", "node",
    ).write_csv(out)
    return out


def test_titan_old_batch_fails_much_more(titan_csv, cli):
    curves = st.survival(titan_csv, by="batch")
    end = curves.group_by("batch").agg(pl.col("survival").min(), pl.col("events").sum())
    s = dict(zip(end["batch"].to_list(), end["survival"].to_list()))
    events = dict(zip(end["batch"].to_list(), end["events"].to_list()))
    assert events["old"] + events["new"] == 5089  # the paper's dead boards
    assert s["old"] < 0.7 and s["new"] > 0.95
    rates = st.afr(titan_csv, by="batch,cage")
    old = rates.filter(pl.col("batch") == "old").sort("cage")["afr_pct"].to_list()
    assert old[0] < old[1] < old[2]  # cage 0 > 1 > 2 in survival, as the paper found
    fits = st.weibull(titan_csv, by="batch")
    assert fits.filter(pl.col("group_value") == "old")["pattern"][0] == "wear-out"
    # the same through the command line, with the Weibull fits beside
    assert cli("survival", "--by", "batch", "--lifetimes", titan_csv, "-o", "km.csv") == 0
    assert pl.read_csv("km_weibull.csv")["group_value"].to_list() == ["new", "old"]
