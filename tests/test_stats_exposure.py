"""Failures and exposure from a hand-built warehouse: the edge cases the rates rest on."""

from __future__ import annotations

from datetime import datetime as D

import polars as pl
import pytest

import pipeline.stats as st
from pipeline.config import Stats
from pipeline.engine import DuckDBEngine
from pipeline.stats.failures import derive_failures

INV_COLS = ["serial", "model", "vendor", "host", "slot", "site", "batch", "installed_at", "removed_at"]
WINDOW = Stats(window_start="2025-01-01", window_end="2025-12-31", min_gpu_days=100.0)


def load(wh, inventory: list[tuple], tickets: list[tuple] = ()) -> None:
    inv = pl.DataFrame(inventory, schema={
        "serial": pl.Utf8, "model": pl.Utf8, "vendor": pl.Utf8, "host": pl.Utf8, "slot": pl.Int32,
        "site": pl.Utf8, "batch": pl.Utf8, "installed_at": pl.Datetime("us"), "removed_at": pl.Datetime("us"),
    }, orient="row").with_columns(file_id=pl.lit(1, pl.Int64), line_no=pl.int_range(2, pl.len() + 2, dtype=pl.Int64))
    wh.insert("inventory", inv)
    if tickets:
        tk = pl.DataFrame(list(tickets), schema={
            "ticket_id": pl.Utf8, "opened_at": pl.Datetime("us"), "serial": pl.Utf8, "part_code": pl.Utf8,
            "action_code": pl.Utf8, "symptom_code": pl.Utf8, "closed_at": pl.Datetime("us"),
        }, orient="row").with_columns(service_point=pl.lit("sha-sp1"), review=pl.lit(False))
        wh.insert("tickets", tk)


def gpu(serial, installed, removed=None, *, model="H100 80GB HBM3", batch="B1", host="gpu-a01", slot=0):
    return (serial, model, "Dell", host, slot, "sha", batch, installed, removed)


def ticket(tid, opened, serial, part="GPU", action="REPLACE", symptom="FELL_OFF_BUS", closed=None):
    return (tid, opened, serial, part, action, symptom, closed)


def life(wh, cfg=WINDOW) -> dict[str, dict]:
    frame = st.lifetimes(wh, cfg).frame()
    return {r["id"]: r for r in frame.iter_rows(named=True)}


def test_delayed_entry_counts_exposure_from_the_window_not_the_install(wh):
    load(wh, [gpu("S1", D(2022, 3, 1))])
    row = life(wh)["S1"]
    assert row["entry_at"] == D(2025, 1, 1)
    assert row["gpu_days"] == pytest.approx(365.0)
    assert row["entry_age_days"] == pytest.approx((D(2025, 1, 1) - D(2022, 3, 1)).days)
    assert row["exit_reason"] == "censored" and not row["failed"]


def test_censoring_at_the_end_of_data(wh):
    # No window in the config: the data's first and last day bound it.
    load(wh, [gpu("S1", D(2020, 1, 1)), gpu("S2", D(2020, 1, 1), slot=1)],
         [ticket("T1", D(2025, 2, 10, 8), "S1"), ticket("T2", D(2025, 4, 20, 17), "S2", action="RESEAT")])
    lt = st.lifetimes(wh, Stats())
    assert (lt.window.start, lt.window.end, lt.window.source) == (D(2025, 2, 10), D(2025, 4, 21), "data")
    rows = {r["id"]: r for r in lt.frame().iter_rows(named=True)}
    assert rows["S2"]["exit_at"] == D(2025, 4, 21) and rows["S2"]["exit_reason"] == "censored"
    assert rows["S1"]["failed"] and rows["S1"]["exit_at"] == D(2025, 2, 10, 8)


def test_replacement_ends_exposure_even_when_inventory_still_lists_the_gpu(wh):
    load(wh, [gpu("S1", D(2024, 1, 1))], [ticket("T1", D(2025, 3, 1), "S1")])
    row = life(wh)["S1"]
    assert row["failed"] and row["exit_at"] == D(2025, 3, 1)
    assert row["gpu_days"] == pytest.approx(59.0)


def test_decommission_is_a_removal_not_a_failure(wh):
    load(wh, [gpu("S1", D(2024, 1, 1), D(2025, 7, 1))])
    row = life(wh)["S1"]
    assert not row["failed"] and row["exit_reason"] == "removed"
    assert st.afr(wh, cfg=WINDOW)["failures"][0] == 0


def test_ticket_written_after_the_swap_still_counts(wh):
    load(wh, [gpu("S1", D(2024, 1, 1), D(2025, 3, 1)), gpu("S2", D(2025, 3, 1))],
         [ticket("T1", D(2025, 3, 3), "S1")])
    rows = life(wh)
    assert rows["S1"]["failed"] and rows["S1"]["exit_at"] == D(2025, 3, 1)


def test_gpus_replaced_twice_in_one_slot(wh):
    load(wh, [gpu("S1", D(2024, 6, 1), D(2025, 2, 1)),
              gpu("S2", D(2025, 2, 1), D(2025, 5, 1), batch="RMA"),
              gpu("S3", D(2025, 5, 1), batch="RMA")],
         [ticket("T1", D(2025, 1, 31), "S1"), ticket("T2", D(2025, 4, 30), "S2")])
    rows = life(wh)
    assert [rows[s]["failed"] for s in ("S1", "S2", "S3")] == [True, True, False]
    by_slot = st.afr(wh, by="host,slot", cfg=WINDOW)
    assert by_slot["failures"].to_list() == [2] and by_slot["gpus"].to_list() == [3]
    assert by_slot["gpu_days"][0] == pytest.approx(363.0)  # a day between each ticket and its swap
    repeats = st.lifetimes(wh, WINDOW)  # the slot shows up as a repeat offender too
    from pipeline.stats import modes
    rep = modes.repeat_offenders(repeats.engine, repeats.window, ["GPU"], 120)
    assert rep.filter(pl.col("level") == "slot")["serials"].to_list() == ["S1 -> S2"]


def test_failures_before_the_first_record_or_window_are_not_counted(wh):
    load(wh, [gpu("S1", D(2023, 1, 1)), gpu("S2", D(2025, 6, 1), slot=1)],
         [ticket("T1", D(2024, 11, 5), "S1"),      # before the window: S1 left before it opened
          ticket("T2", D(2025, 5, 1), "S2")])      # before S2 was installed: an earlier life's ticket
    rows = life(wh)
    assert "S1" not in rows
    assert not rows["S2"]["failed"] and rows["S2"]["entry_at"] == D(2025, 6, 1)
    fleet = st.afr(wh, cfg=WINDOW)
    assert fleet["failures"][0] == 0 and fleet["gpus"][0] == 1


def test_zero_failures_gives_an_upper_bound_only(wh):
    load(wh, [gpu(f"S{i}", D(2024, 1, 1), slot=i) for i in range(10)])
    row = st.afr(wh, cfg=WINDOW).row(0, named=True)
    assert row["failures"] == 0 and row["afr_pct"] == 0.0 and row["afr_ci_low_pct"] == 0.0
    # -ln(0.025) ... the exact bound: chi2(0.975, 2)/2 = 3.689 failures in 3650 GPU-days
    assert row["afr_ci_high_pct"] == pytest.approx(3.6889 / 3650 * 365 * 100, rel=1e-3)


def test_a_group_with_no_exposure(wh):
    load(wh, [gpu("S1", D(2024, 1, 1)), gpu("S2", D(2026, 3, 1), batch="B-future", slot=1)])
    engine = DuckDBEngine(wh.con)
    lt = st.lifetimes(engine, WINDOW)
    assert "S2" not in lt.frame()["id"].to_list()
    by_batch = st.afr(lt, by="batch", cfg=WINDOW)
    assert by_batch["batch"].to_list() == ["B1"]
    # A lifetime table can carry a group whose units have no time at risk: reported, rates null.
    frame = st.lifetime_frame(pl.DataFrame({"id": ["a", "b"], "start": ["2025-01-01", "2025-02-01"],
                                            "end": ["2025-06-01", "2025-02-01"], "failed": ["0", "0"],
                                            "batch": ["B1", "B2"]}))
    from pipeline.stats.rates import add_rates
    counts = frame.group_by("batch").agg(pl.len().alias("gpus"), pl.col("gpu_days").sum(),
                                         pl.col("failed").sum().alias("failures"))
    rates = add_rates(counts, ["batch"], confidence=0.95, min_gpu_days=100.0)
    b2 = rates.filter(pl.col("batch") == "B2").row(0, named=True)
    assert b2["gpu_days"] == 0 and b2["afr_pct"] is None and b2["afr_ci_high_pct"] is None and b2["low_exposure"]


def test_failure_definition_comes_from_the_config(wh):
    load(wh, [gpu("S1", D(2024, 1, 1)), gpu("S2", D(2024, 1, 1), slot=1), gpu("S3", D(2024, 1, 1), slot=2)],
         [ticket("T1", D(2025, 3, 1), "S1"), ticket("T1b", D(2025, 3, 1), "S1"),  # two points, one swap
          ticket("T2", D(2025, 4, 1), "S2", part="GPU_BASEBOARD"),
          ticket("T3", D(2025, 5, 1), "S3", action="RESEAT")])
    engine = DuckDBEngine(wh.con)
    derive_failures(engine, WINDOW)
    assert engine.rows("SELECT serial, ticket_id FROM _ff_failures ORDER BY serial", step="t") == [("S1", "T1")]
    wider = Stats(failure_parts=["GPU", "GPU_BASEBOARD"], window_start="2025-01-01", window_end="2025-12-31")
    assert st.afr(wh, cfg=wider)["failures"][0] == 2


def test_monthly_split_keeps_the_totals(wh):
    load(wh, [gpu("S1", D(2024, 1, 1)), gpu("S2", D(2025, 2, 15), slot=1), gpu("S3", D(2024, 1, 1), slot=2)],
         [ticket("T1", D(2025, 6, 10), "S1"), ticket("T3", D(2025, 8, 1), "S3")])
    total = st.afr(wh, cfg=WINDOW).row(0, named=True)
    for period in ("month", "quarter"):
        split = st.afr(wh, by=period, cfg=WINDOW)
        assert split["gpu_days"].sum() == pytest.approx(total["gpu_days"])
        assert split["failures"].sum() == total["failures"] == 2
    months = st.afr(wh, by="month", cfg=WINDOW)
    assert months.height == 12 and months.filter(pl.col("month") == "2025-06")["failures"][0] == 1
    q = st.afr(wh, by="model,quarter", cfg=WINDOW)
    assert q["quarter"].to_list() == ["2025-Q1", "2025-Q2", "2025-Q3", "2025-Q4"]
