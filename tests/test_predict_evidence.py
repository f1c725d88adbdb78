"""The evidence score on hand-made fleets: what outranks what, distinct risks, the words.

Each fleet is written straight into the warehouse tables (a few GPUs, 40 days of flat
telemetry, one kind of evidence planted per GPU), then features are built and the list
ranked as ``fleetfault predict`` would.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import Config
from pipeline.errors import SchemaError
from pipeline.predict import evidence
from pipeline.predict.evidence_weights import load_weights
from pipeline.predict.features import FEATURES, build_features
from pipeline.predict.rank import rank_gpus
from pipeline.warehouse import Warehouse

START = date(2025, 3, 1)
DAYS = 40
LAST = START + timedelta(days=DAYS - 1)

#: GPU name -> (what is planted, words its first top factor must contain).
PLANTED = {
    "app_only": ("Xid 13 x6 today, 31 x3, 43, 45", "application Xids only"),
    "x79_old": ("one Xid 79, 25 days ago", "Xid 79"),
    "x79_twice": ("Xid 79 twice, 3 days ago", "Xid 79"),
    "x48": ("one Xid 48, 20 days ago", "Xid 48"),
    "x94": ("one Xid 94, 20 days ago", "Xid 94"),
    "x95": ("one Xid 95, 20 days ago", "Xid 95"),
    "ecc_u": ("one uncorrectable ECC error, 20 days ago", "uncorrectable ECC"),
    "remap_fail": ("row remapping failed, 10 days ago", "row remapping failed"),
    "narrow": ("PCIe link at x8 one day, 20 days ago", "PCIe link narrowed"),
    "narrow_long": ("PCIe link at x8 for the last 6 days", "PCIe link narrowed"),
    "nvlink": ("Xid 74 x3 in the last week", "Xid 74"),
    "gsp": ("Xid 119 today", "Xid 119"),
    "pending": ("row remap pending today", "row remap pending"),
    "retired": ("12 retired pages, 4 of them this month", "retired"),
    "ecc_c": ("corrected ECC 400/day this week", "corrected ECC"),
    "hot": ("9 C hotter than its host, model and month this week", "running hot"),
    "reseated": ("reseated twice", "reseated 2 times"),
    "lost": ("no telemetry today while its host mates report", "no telemetry today"),
    "ticket": ("one earlier ticket", "1 earlier ticket"),
    "x79_ticket": ("Xid 79 yesterday and one earlier ticket", "Xid 79"),
    "healthy": ("nothing", "no evidence"),
    "healthy2": ("nothing", "no evidence"),
}


def _day(n: int) -> date:
    return START + timedelta(days=n)


def _ts(n: int, hour: int = 10) -> datetime:
    return datetime.combine(_day(n), datetime.min.time()) + timedelta(hours=hour)


def _fleet(wh: Warehouse) -> None:
    names = list(PLANTED)
    inv, tele, xids, tickets = [], [], [], []
    for i, name in enumerate(names):
        host, slot = f"h{i // 8}", i % 8
        inv.append({"serial": name, "model": "H100 80GB HBM3", "vendor": "OEM", "host": host, "slot": slot,
                    "site": "s", "batch": "b", "installed_at": datetime(2024, 1, 1), "removed_at": None})
        for d in range(DAYS):
            row = {"gpu_key": name, "serial": name, "host": host, "pci_bus_id": f"0000:{16 + slot:02x}:00.0",
                   "gpu_index": slot, "name": "H100 80GB HBM3", "day": _day(d), "samples": 1440, "coverage": 1.0,
                   "temp_mean": 60.0, "temp_max": 65.0, "ecc_corrected_delta": 0.0, "ecc_uncorrected_delta": 0.0,
                   "retired_pages_max": 0.0, "remapped_rows_pending_max": 0.0, "remapped_rows_failed_max": 0.0,
                   "pcie_width_min": 16.0, "pcie_width_max_reported": 16.0}
            if name == "ecc_u" and d == DAYS - 21:
                row["ecc_uncorrected_delta"] = 1.0
            if name == "remap_fail" and d >= DAYS - 11:
                row["remapped_rows_failed_max"] = 1.0
            if name == "narrow" and d == DAYS - 21:
                row["pcie_width_min"] = 8.0
            if name == "narrow_long" and d >= DAYS - 6:
                row["pcie_width_min"] = 8.0
            if name == "pending" and d == DAYS - 1:
                row["remapped_rows_pending_max"] = 1.0
            if name == "retired":
                row["retired_pages_max"] = 8.0 if d < DAYS - 20 else 12.0
            if name == "ecc_c" and d >= DAYS - 7:
                row["ecc_corrected_delta"] = 400.0
            if name == "hot" and d >= DAYS - 7:
                row["temp_mean"] = 69.0
            if name == "lost" and d == DAYS - 1:
                continue  # silent today
            tele.append(row)
    plant = {"app_only": [(DAYS - 1, 13)] * 6 + [(DAYS - 2, 31)] * 3 + [(DAYS - 3, 43), (DAYS - 3, 45)],
             "x79_old": [(DAYS - 26, 79)], "x79_twice": [(DAYS - 4, 79), (DAYS - 4, 79)],
             "x48": [(DAYS - 21, 48)], "x94": [(DAYS - 21, 94)], "x95": [(DAYS - 21, 95)],
             "nvlink": [(DAYS - 2, 74), (DAYS - 3, 74), (DAYS - 5, 74)], "gsp": [(DAYS - 1, 119)],
             "x79_ticket": [(DAYS - 2, 79)]}
    for name, events in plant.items():
        host = f"h{names.index(name) // 8}"
        for n, (d, code) in enumerate(events):
            sev = "app" if code in (13, 31, 43, 45) else "critical"
            xids.append({"serial": name, "host": host, "ts": _ts(d, 1 + n), "xid": code, "severity": sev})
    for name, n_reseat, n_other in (("reseated", 2, 0), ("ticket", 0, 1), ("x79_ticket", 0, 1)):
        host, slot = f"h{names.index(name) // 8}", names.index(name) % 8
        for k in range(n_reseat + n_other):
            # closed the next day: a ticket counts as history from its close, when its outcome is known
            tickets.append({"serial": name, "host": host, "slot": slot, "opened_at": _ts(5 + k),
                            "closed_at": _ts(6 + k), "part_code": "GPU", "action_code": "RESEAT" if k < n_reseat else "MONITOR"})
    wh.insert("inventory", pl.DataFrame(inv).with_columns(file_id=pl.lit(0, pl.Int64),
                                                          removed_at=pl.lit(None, pl.Datetime("us"))))
    wh.insert("gpu_days", pl.DataFrame(tele))
    wh.insert("xid_events", pl.DataFrame(xids).with_row_index("line_no").with_columns(
        event_id=pl.format("e{}", pl.col("line_no")), kind=pl.lit("Xid"), source_file=pl.lit("hand"),
        line_no=pl.col("line_no").cast(pl.Int64) + 1))
    wh.insert("tickets", pl.DataFrame(tickets).with_row_index("n").with_columns(
        ticket_id=pl.format("TK{}", pl.col("n")), service_point=pl.lit("hand"), review=pl.lit(False)).drop("n"))


@pytest.fixture(scope="module")
def ranked(tmp_path_factory):
    root = tmp_path_factory.mktemp("evidence")
    with Warehouse(root / "wh.duckdb") as wh:
        _fleet(wh)
        build_features(wh, Config())
        table, version, notes = rank_gpus(wh, Config(), root / "models", LAST)
        feats = wh.con.execute("SELECT * FROM features WHERE day = ?", [LAST]).df()
    return table.set_index("serial"), version, notes, feats


def test_application_xids_never_outrank_hardware_evidence(ranked):
    table, version, notes, _ = ranked
    assert version == "evidence-prior" and any("published prior" in n for n in notes)
    app = table.loc["app_only"]
    for name in ("x79_old", "x79_twice", "x48", "x94", "x95", "ecc_u", "remap_fail", "narrow", "narrow_long"):
        assert table.loc[name, "rank"] < app["rank"], name
        assert table.loc[name, "risk"] > app["risk"], name
    # application faults alone are no evidence of a GPU fault: the same risk and rank as none
    assert app["risk"] == table.loc["healthy", "risk"] and app["rank"] == table.loc["healthy", "rank"]


def test_different_evidence_never_shares_a_risk_and_equal_evidence_shares_a_rank(ranked):
    table, *_ = ranked
    with_evidence = table.drop(index=["app_only", "healthy", "healthy2"])
    assert with_evidence["risk"].is_unique
    assert table.loc["healthy", "rank"] == table.loc["healthy2", "rank"] == table["rank"].max()
    assert table.loc["x79_twice", "risk"] > table.loc["x79_old", "risk"]  # repeated and recent beats one old
    assert table.loc["x79_ticket", "risk"] > table.loc["ticket", "risk"]
    assert table.loc["narrow_long", "risk"] > table.loc["narrow", "risk"]
    assert (table["risk"] > 0).all() and (table["risk"] < 1).all()
    assert sorted(table["rank"]) == list(table.sort_values("rank")["rank"])


def test_top_factors_name_each_gpus_strongest_evidence_first(ranked):
    table, *_ = ranked
    top = table.sort_values("rank").head(20)
    for name, row in top.iterrows():
        first = row["top_factors"].split("; ")[0]
        assert PLANTED[name][1] in first, (name, row["top_factors"])


def test_the_score_never_falls_when_evidence_is_added(ranked):
    *_, feats = ranked
    base = feats.set_index("serial").loc[["healthy"]].reset_index()
    s0 = evidence.score(base)[0]
    for col in [c for c in evidence.INPUTS if c != "model" and c not in ("samples_vs_own_1d",)]:
        more = base.copy()
        more[col] = (more[col].fillna(0) + 5) if pd.api.types.is_numeric_dtype(more[col]) else more[col]
        assert evidence.score(more)[0] >= s0, col
    app = base.copy()
    app[["xc_app_1d", "xc_app_7d", "xc_app_30d"]] = 50
    assert evidence.score(app)[0] == s0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=12))
def test_order_gives_equal_evidence_one_rank_and_different_evidence_distinct_risks(rows):
    terms = pd.DataFrame(0.0, index=range(len(rows)), columns=list(evidence.TERM_ORDER))
    for i, (a, b, c) in enumerate(rows):
        terms.loc[i, ["xid_fatal", "xid_memory", "heat"]] = [a * 1.0, b * 1.0, c * 1.0]
    risk = np.round(terms.sum(axis=1).to_numpy() / 10, 1)  # coarse: many ties of the sum
    idx, rank, out = evidence.order(risk, terms)
    key = [tuple(terms.iloc[i]) for i in idx]
    for i in range(1, len(idx)):
        assert out[i] <= out[i - 1]
        if key[i] == key[i - 1]:
            assert rank[i] == rank[i - 1] and out[i] == out[i - 1]
        else:
            assert rank[i] == i + 1 and out[i] < out[i - 1]


def test_prior_and_fleet_calibration():
    f = pd.DataFrame({"serial": [f"s{i}" for i in range(4000)], "model": "A100-SXM4-80GB",
                      "xc_fatal_1d": 0.0, "xc_fatal_7d": 0.0, "xc_fatal_30d": 0.0})
    f.loc[:199, ["xc_fatal_1d", "xc_fatal_7d", "xc_fatal_30d"]] = 1.0
    y = np.zeros(len(f))
    y[:40] = 1  # a fifth of the GPUs with a fresh fatal Xid fail, 10 of the rest
    y[1000:1010] = 1
    prior = evidence.EvidenceScore(min_failures=100).fit(f, y)
    p0 = prior.predict_proba(f.iloc[[500]])[0, 1]
    assert prior.source_ == "prior" and p0 == pytest.approx(1 - np.exp(-0.061 / 365 * 7), rel=1e-6)
    fleet = evidence.EvidenceScore(min_failures=5).fit(f, y)
    p = fleet.predict_proba(f)[:, 1]
    assert fleet.source_ == "fleet" and fleet.coef_[1] > 0
    assert p[:200].mean() == pytest.approx(0.2, abs=0.05) and p[200:].mean() == pytest.approx(10 / 3800, rel=0.5)


def test_bad_weights_are_reported_together(tmp_path):
    bad = tmp_path / "w.yaml"
    text = open(load_weights().path, encoding="utf-8").read()
    bad.write_text(text.replace("weight: 0.0", "weight: 0.5").replace("reseats:", "reseatz:"), encoding="utf-8")
    with pytest.raises(SchemaError) as err:
        load_weights(str(bad))
    assert "app.weight must be 0" in str(err.value) and "reseatz" in str(err.value)


def test_replacements_observed_in_telemetry_label_the_days_before_them(tmp_path):
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        _fleet(wh)
        bus = "0000:11:00.0"  # x79_old sits in slot 1 of host h0
        wh.con.execute("INSERT INTO inventory_observed (serial, host, pci_bus_id, first_seen, last_seen) "
               "VALUES (?, 'h0', ?, ?, ?), ('NEW1', 'h0', ?, ?, ?), ('healthy', 'h2', '0000:14:00.0', ?, ?)",
               ["x79_old", bus, _ts(0), _ts(29, 23), bus, _ts(30, 2), _ts(DAYS - 1), _ts(0), _ts(DAYS - 1)]).fetchall()
        build_features(wh, Config())
        rows = wh.con.execute("SELECT day, label FROM features WHERE serial = 'x79_old' ORDER BY day").df()
        other = wh.con.execute("SELECT count(*) FROM features WHERE serial = 'healthy' AND label").fetchall()[0][0]
    days = pd.to_datetime(rows["day"]).dt.date
    assert days.max() == _day(28)  # in service until the day before its last sample's day
    assert rows["label"].astype(bool).tolist() == [(_day(29) - d).days <= 7 for d in days]
    assert other == 0


def test_an_observed_replacement_is_dated_by_its_ticket_still_open_then(tmp_path):
    """A replacement whose ticket's part is not coded is no failure in ``failures``; telemetry
    sees the swap at the GPU's last sample, a day or two after the ticket opened. Dated there,
    the day the ticket opened would be scored, its features counting the ticket's open and its
    label the failure: the ticket would reveal the failure. Dated at the open, it cannot. An
    earlier ticket closed before the swap (a reseat) is another matter and dates nothing."""
    bus = "0000:11:00.0"  # x79_old sits in slot 1 of host h0
    last = {}
    for case in ("uncoded", "reseat_only"):
        with Warehouse(tmp_path / f"{case}.duckdb") as wh:
            _fleet(wh)
            wh.con.execute("INSERT INTO inventory_observed (serial, host, pci_bus_id, first_seen, last_seen) "
                           "VALUES (?, 'h0', ?, ?, ?), ('NEW1', 'h0', ?, ?, ?)",
                           ["x79_old", bus, _ts(0), _ts(29, 23), bus, _ts(30, 2), _ts(DAYS - 1)]).fetchall()
            extra = [("TKB", "GPU", "RESEAT", _ts(24), _ts(25))]
            if case == "uncoded":
                extra.append(("TKA", None, "REPLACE", _ts(28, 9), _ts(30, 12)))
            wh.insert("tickets", pl.DataFrame([
                {"ticket_id": t, "serial": "x79_old", "host": "h0", "slot": 1, "part_code": part, "action_code": act,
                 "opened_at": o, "closed_at": c, "service_point": "hand", "review": False}
                for t, part, act, o, c in extra], schema_overrides={"part_code": pl.Utf8}))
            build_features(wh, Config())
            rows = wh.con.execute("SELECT day, label, tickets_opened_1d, tickets_opened_7d FROM features "
                                  "WHERE serial = 'x79_old' ORDER BY day").df()
        days = pd.to_datetime(rows["day"]).dt.date
        last[case] = days.max()
        fail = _day(28) if case == "uncoded" else _day(29)
        assert rows["label"].astype(bool).tolist() == [(fail - d).days <= 7 for d in days], case
        assert rows["tickets_opened_1d"].sum() == 1 and rows.set_index(days).loc[_day(24), "tickets_opened_1d"] == 1
    assert last == {"uncoded": _day(27), "reseat_only": _day(28)}


def test_track_record_counts_failures_catches_and_false_alarms_per_month(tmp_path):
    from pipeline.predict.toy import write_toy_fleet
    from pipeline.predict.track import track_record
    from pipeline.report.predict_track import section

    with Warehouse(tmp_path / "wh.duckdb") as wh:
        write_toy_fleet(wh, gpus=32, days=70, seed=4, start=START, daily_hazard=0.01)
        build_features(wh, Config())
        replayed = track_record(wh, Config())
        positives = wh.con.execute("SELECT DISTINCT serial, strftime(day, '%Y-%m') AS month FROM features WHERE label").df()
        # a published list for one day: its flags replace the replay's on that day
        day = wh.con.execute("SELECT min(day) FROM features WHERE label").fetchall()[0][0]
        serial = wh.con.execute("SELECT min(serial) FROM features WHERE label AND day = ?", [day]).fetchall()[0][0]
        wh.insert("predictions", pl.DataFrame({"rank": [1], "serial": [serial], "risk": [0.5], "horizon_days": [7],
                                               "as_of": [day], "model_version": ["evidence"]}))
        mixed = track_record(wh, Config())
        html = section(wh)
        stored = wh.con.execute("SELECT count(*) FROM predict_track").fetchall()[0][0]
    assert stored == len(mixed) == len(replayed) >= 2
    assert (replayed["caught"] + replayed["missed"] == replayed["failures"]).all()
    assert replayed["failures"].sum() >= positives["serial"].nunique() > 0  # a horizon may span two months
    assert (replayed["false_alarms"] >= 0).all() and set(replayed["source"]) == {"replayed"}
    assert "mixed" in set(mixed["source"]) and mixed["caught"].sum() >= 1
    assert "How the list has done" in html and "evidence score ranks" in html


def test_failing_gpu_markers_counted_by_the_ingest_raise_the_gpu(tmp_path):
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        _fleet(wh)
        # the telemetry ingest counts [GPU is lost]-style samples per GPU-day
        wh.con.execute("UPDATE gpu_days SET gpu_error_samples = 3 WHERE serial = 'healthy2' AND day = ?", [_day(DAYS - 2)]).fetchall()
        build_features(wh, Config())
        table, *_ = rank_gpus(wh, Config(), tmp_path / "models", LAST)
    table = table.set_index("serial")
    assert table.loc["healthy2", "risk"] > table.loc["healthy", "risk"]
    assert table.loc["healthy2", "top_factors"].startswith("'GPU is lost' / 'requires reset' in nvidia-smi on 1 of the last 7 days")


def test_failing_gpu_markers_weigh_by_days_not_by_the_loggers_sampling_rate():
    from pipeline.predict import evidence

    # one day marked: an hourly logger writes 1 marked sample, a 10-second one 360
    hourly = pd.DataFrame({"lost_markers_7d": [1.0], "lost_marker_days_1d": [0.0], "lost_marker_days_7d": [1.0]})
    fast = hourly.assign(lost_markers_7d=360.0)
    assert evidence.score(hourly)[0] == evidence.score(fast)[0] > 0
    three_days = hourly.assign(lost_marker_days_7d=3.0)
    today = hourly.assign(lost_marker_days_1d=1.0)
    assert evidence.score(three_days)[0] > evidence.score(hourly)[0] and evidence.score(today)[0] > evidence.score(hourly)[0]


def test_a_link_still_narrow_today_weighs_more_than_one_back_at_full_width():
    back = pd.DataFrame({"pcie_narrow_days_1d": [0.0], "pcie_narrow_days_7d": [3.0], "pcie_narrow_days_30d": [3.0]})
    still = back.assign(pcie_narrow_days_1d=1.0)
    assert evidence.score(still)[0] > evidence.score(back)[0] > 0
    # a frame that does not say whether it is narrow today weighs its days fully, as before the column
    assert evidence.score(back.drop(columns="pcie_narrow_days_1d"))[0] == evidence.score(still)[0]


def _fleet_days(rng: np.random.Generator, days: int, gpus: int, fail_narrow: float) -> tuple[pd.DataFrame, np.ndarray]:
    """GPU-days of which 1% have a link narrow today (failing at ``fail_narrow``) and 3% a GSP
    Xid that says nothing (failing at the background rate of 0.05%)."""
    n = days * gpus
    f = pd.DataFrame({"serial": [f"g{i}" for i in range(n)], "model": "H100 80GB HBM3",
                      "day": np.repeat(pd.date_range("2025-03-01", periods=days), gpus)})
    kind = rng.choice(3, size=n, p=[0.01, 0.03, 0.96])
    narrow = (kind == 0).astype(float)
    f = f.assign(pcie_narrow_days_1d=narrow, pcie_narrow_days_7d=3 * narrow, pcie_narrow_days_30d=3 * narrow,
                 xc_gsp_hang_1d=(kind == 1).astype(float), xc_gsp_hang_7d=(kind == 1).astype(float),
                 xc_gsp_hang_30d=(kind == 1).astype(float))
    y = (rng.random(n) < np.where(kind == 0, fail_narrow, 0.0005)).astype(float)
    return f, y


def test_each_kind_of_evidence_gets_its_own_slope_when_later_periods_confirm_it():
    f, y = _fleet_days(np.random.default_rng(3), days=70, gpus=300, fail_narrow=0.3)
    ev = evidence.EvidenceScore(min_failures=5).fit(f, y)
    assert ev.term_coef_ is not None, ev.notes_
    slope = dict(zip(evidence.TERM_ORDER, ev.slopes()))
    assert slope["pcie_narrow"] > ev.coef_[1] > slope["xid_gsp_hang"] >= 0
    assert all(v >= 0 for v in slope.values())  # more evidence never lowers the risk
    assert "a slope per kind of evidence" in ev.notes_[0] and "PR-AUC" in ev.notes_[0]
    p = ev.predict_proba(f)[:, 1]
    assert p[f["pcie_narrow_days_1d"].to_numpy() > 0].mean() == pytest.approx(0.3, abs=0.1)
    # the words follow the contributions: a narrowed link is named before the GSP Xid
    c = ev.contributions(f.head(1).assign(pcie_narrow_days_1d=1.0, pcie_narrow_days_7d=3.0, pcie_narrow_days_30d=3.0,
                                          xc_gsp_hang_1d=1.0, xc_gsp_hang_7d=1.0, xc_gsp_hang_30d=1.0))
    assert c.iloc[0]["pcie_narrow"] > c.iloc[0]["xid_gsp_hang"]


def test_one_slope_for_all_with_few_failures_or_no_dates():
    f, y = _fleet_days(np.random.default_rng(4), days=70, gpus=300, fail_narrow=0.3)
    few = y.copy()
    few[np.flatnonzero(few)[evidence.MIN_REWEIGHT_FAILURES - 1:]] = 0
    assert evidence.EvidenceScore(min_failures=5).fit(f, few).term_coef_ is None
    assert evidence.EvidenceScore(min_failures=5).fit(f.drop(columns="day"), y).term_coef_ is None


def test_the_calibration_bends_above_one_replace_grade_event_and_stays_monotone():
    """Evidence beyond one hardware-fatal Xid is mostly the same fault seen again: a GPU with
    seven fatal Xids is not e^6 times as likely to fail within the week as one with one. The
    calibrated logit bends at the knee, so both groups get their own rate, and more evidence
    still never lowers the risk."""
    rng = np.random.default_rng(5)
    n = 60_000
    events = rng.choice([0, 1, 7], size=n, p=[0.97, 0.02, 0.01])
    f = pd.DataFrame({"serial": [f"s{i // 30}" for i in range(n)], "model": "H100",
                      **{f"xc_fatal_{d}d": events.astype(float) for d in (1, 7, 30)}})
    rate = {0: 0.001, 1: 0.10, 7: 0.30}
    y = (rng.random(n) < pd.Series(events).map(rate).to_numpy()).astype(float)
    ev = evidence.EvidenceScore(min_failures=5).fit(f, y)
    a, b, b_above = ev.coef_
    assert ev.term_coef_ is None and b_above < b, ev.notes_
    p = ev.predict_proba(f)[:, 1]
    for k, r in rate.items():
        assert p[events == k].mean() == pytest.approx(r, rel=0.35), (k, ev.notes_)
    # a straight line cannot: the seven-Xid GPUs would be near-certain, or the one-Xid GPUs far too low
    line = evidence._fit_line(evidence.terms(f).to_numpy(), y, a)
    straight = expit_np(evidence._bent(evidence.score(f), *line))
    assert abs(straight[events == 7].mean() - 0.3) > 0.15 or abs(straight[events == 1].mean() - 0.1) > 0.035
    s = np.linspace(0, 20, 201)
    assert np.all(np.diff(evidence._bent(s, *ev.coef_)) > 0)  # strictly: different evidence, different risk
    # without a GPU above the knee the line stays straight
    low = evidence.EvidenceScore(min_failures=5).fit(f[events < 7], y[events < 7])
    assert low.coef_[2] == low.coef_[1]


def expit_np(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def test_evidence_a_fix_has_answered_weighs_less_until_it_comes_back():
    # a GPU that fell off the bus 3 days ago, was marked lost and ran on a narrowed link
    seen = pd.DataFrame({"xc_fatal_1d": [0.0], "xc_fatal_7d": [1.0], "xc_fatal_30d": [1.0],
                         "lost_marker_days_1d": [0.0], "lost_marker_days_7d": [1.0], "pcie_narrow_days_1d": [0.0],
                         "pcie_narrow_days_7d": [2.0], "pcie_narrow_days_30d": [2.0], "ecc_uncorr_7d": [1.0],
                         "ecc_uncorr_30d": [1.0], "days_since_hw_evidence": [3.0], "days_since_fix": [999.0]})
    fixed = seen.assign(days_since_fix=1.0)  # reseated, the ticket closed 2 days after the evidence
    t_seen, t_fixed = evidence.terms(seen), evidence.terms(fixed)
    f = load_weights().recency["after_fix"]
    for term in ("xid_fatal", "lost_markers", "pcie_narrow"):
        assert 0 < t_fixed[term][0] < t_seen[term][0], term
    assert t_fixed["pcie_narrow"][0] == pytest.approx(f * t_seen["pcie_narrow"][0])
    # memory errors are not answered by a reseat; other terms keep their weight
    assert t_fixed["ecc_uncorrected"][0] == t_seen["ecc_uncorrected"][0] > 0
    assert 0 < evidence.score(fixed)[0] < evidence.score(seen)[0]
    # closed the day the evidence stopped (a lost GPU is marked until its reseat): answered;
    # evidence on a later day than the close is not
    assert evidence.score(seen.assign(days_since_fix=3.0))[0] == evidence.score(fixed)[0]
    assert evidence.score(seen.assign(days_since_fix=4.0))[0] == evidence.score(seen)[0]
    # the fault back today (after the fix) counts in full again, and more than before
    back = fixed.assign(xc_fatal_1d=1.0, xc_fatal_7d=2.0, xc_fatal_30d=2.0, days_since_hw_evidence=0.0)
    assert evidence.score(back)[0] > evidence.score(seen)[0]
    # an older warehouse without the columns is never discounted
    assert evidence.score(seen.drop(columns=["days_since_fix", "days_since_hw_evidence"]))[0] == evidence.score(seen)[0]


def test_features_date_a_fix_by_its_close(tmp_path):
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        _fleet(wh)
        # x79_twice (Xid 79 x2 three days before LAST) reseated, closed two days before LAST;
        # nvlink (Xid 74 the day before yesterday) has a ticket still open;
        # narrow (link narrowed 20 days before LAST) had its riser swapped: a fix, not a failure
        extra = [("TKF1", "x79_twice", "GPU", "RESEAT", _ts(DAYS - 4, 12), _ts(DAYS - 3, 9)),
                 ("TKF2", "nvlink", "GPU", "RESEAT", _ts(DAYS - 2, 12), None),
                 ("TKF3", "narrow", "PCIE_RISER", "REPLACE", _ts(DAYS - 21, 12), _ts(DAYS - 19, 9))]
        names = list(PLANTED)
        wh.insert("tickets", pl.DataFrame([
            {"ticket_id": t, "serial": s, "host": f"h{names.index(s) // 8}", "slot": names.index(s) % 8,
             "part_code": part, "action_code": act, "opened_at": o, "closed_at": c, "service_point": "hand",
             "review": False} for t, s, part, act, o, c in extra], schema_overrides={"closed_at": pl.Datetime("us")}))
        build_features(wh, Config())
        feats = wh.con.execute("SELECT serial, day, days_since_fix, days_since_hw_evidence FROM features "
                               "WHERE day = ?", [LAST]).df().set_index("serial")
        table, *_ = rank_gpus(wh, Config(), tmp_path / "models", LAST)
    assert feats.loc["x79_twice", "days_since_fix"] == 2 and feats.loc["x79_twice", "days_since_hw_evidence"] == 3
    assert feats.loc["nvlink", "days_since_fix"] == 999  # not closed yet: the outcome is not known
    assert feats.loc["narrow_long", "days_since_hw_evidence"] == 0
    assert feats.loc["narrow", "days_since_fix"] == 18 and feats.loc["narrow", "days_since_hw_evidence"] == 20
    assert feats.loc["healthy", "days_since_fix"] == 999 and feats.loc["healthy", "days_since_hw_evidence"] == 999
    table = table.set_index("serial")
    # acted on: below a GPU with the same kind of evidence, older, that nobody has answered
    assert table.loc["x79_twice", "risk"] < table.loc["x79_ticket", "risk"]
    assert table.loc["x79_twice", "risk"] > table.loc["healthy", "risk"]
    # and the words say why
    assert table.loc["x79_twice", "top_factors"].startswith("Xid 79 (fell off the bus) ×2 in 7 days (before a fix 2 days ago)")
    assert "fix" not in table.loc["x79_ticket", "top_factors"]


def test_a_day_s_features_never_use_how_a_later_close_ends(tmp_path):
    """A ticket opened on day 34 and still open on day 36: whether it later ends in a reseat,
    in something else or not at all must not change any feature of days up to 36 (counted from
    the open, the reseat was known before the close). The open itself counts from day 34 in
    every case, whatever the outcome. Ended in the GPU's replacement, the failure is dated by
    that open: the GPU's last scored day is 33, and nothing before it sees the ticket."""
    from pipeline.stats.failures import build_failures

    seen = _day(DAYS - 4)
    cols = ", ".join(f'"{c}"' for c in ("serial", "day", *FEATURES))
    names = list(PLANTED)
    rows, last = {}, {}
    for later in ("open", "RESEAT", "MONITOR", "riser", "replaced"):
        with Warehouse(tmp_path / f"{later}.duckdb") as wh:
            _fleet(wh)
            closed = None if later == "open" else _ts(DAYS - 2, 9)
            part, act = {"riser": ("PCIE_RISER", "REPLACE"), "replaced": ("GPU", "REPLACE"),
                         "open": ("GPU", None)}.get(later, ("GPU", later))
            wh.insert("tickets", pl.DataFrame([
                {"ticket_id": "TKL", "serial": "x79_twice", "host": f"h{names.index('x79_twice') // 8}",
                 "slot": names.index("x79_twice") % 8, "part_code": part, "action_code": act,
                 "opened_at": _ts(DAYS - 6, 12), "closed_at": closed, "service_point": "hand", "review": False}],
                schema_overrides={"closed_at": pl.Datetime("us"), "action_code": pl.Utf8}))
            build_failures(wh, Config().stats)
            build_features(wh, Config())
            rows[later] = wh.con.execute(f"SELECT {cols} FROM features WHERE day <= ? ORDER BY serial, day",
                                         [seen]).df()
            last[later] = wh.con.execute("SELECT tickets_prior, reseats_prior FROM features "
                                         "WHERE serial = 'x79_twice' AND day = ?", [LAST]).fetchone()
    assert len(rows["open"]) == len(PLANTED) * (DAYS - 3)
    for later in ("RESEAT", "MONITOR", "riser"):
        pd.testing.assert_frame_equal(rows[later], rows["open"])
    # the open is known from its day on, the same whatever follows: the test sees the ticket
    gpu = rows["open"][rows["open"]["serial"] == "x79_twice"]
    gpu = gpu.set_index(pd.to_datetime(gpu["day"]).dt.date)
    assert gpu.loc[_day(DAYS - 7), ["tickets_opened_7d", "days_since_ticket_open"]].tolist() == [0, 999]
    assert gpu.loc[_day(DAYS - 6), ["tickets_opened_1d", "tickets_opened_7d", "days_since_ticket_open"]].tolist() == [1, 1, 0]
    assert gpu.loc[seen, ["tickets_opened_1d", "tickets_opened_7d", "days_since_ticket_open"]].tolist() == [0, 1, 2]
    # after the close the outcome is known and counts: the test sees the ticket
    assert last == {"open": (0, 0), "RESEAT": (1, 1), "MONITOR": (1, 0), "riser": (1, 0), "replaced": None}
    # a replacement: its ticket's open is the failure day, never a scored day, so no day before
    # it knows the ticket (a live night, before the close, would see it open: the open counts)
    mine = rows["replaced"]["serial"] == "x79_twice"
    assert pd.to_datetime(rows["replaced"].loc[mine, "day"]).max().date() == _day(DAYS - 7)
    before = rows["open"][(rows["open"]["serial"] != "x79_twice")
                          | (pd.to_datetime(rows["open"]["day"]).dt.date < _day(DAYS - 6))].reset_index(drop=True)
    # (its host mates count the failure from its day on: host_failures_30d, the only difference)
    pd.testing.assert_frame_equal(rows["replaced"].drop(columns="host_failures_30d"),
                                  before.drop(columns="host_failures_30d"))


def test_a_ticket_opened_lately_raises_the_gpu_until_a_fix_answers_it():
    base = pd.DataFrame({"tickets_opened_1d": [0.0], "tickets_opened_7d": [0.0], "tickets_opened_30d": [0.0],
                         "days_since_ticket_open": [999.0], "days_since_fix": [999.0]})
    today = base.assign(tickets_opened_1d=1.0, tickets_opened_7d=1.0, tickets_opened_30d=1.0, days_since_ticket_open=0.0)
    week = today.assign(tickets_opened_1d=0.0, days_since_ticket_open=3.0)
    month = week.assign(tickets_opened_7d=0.0, days_since_ticket_open=20.0)
    s = [evidence.score(f)[0] for f in (today, week, month, base)]
    assert s[0] > s[1] > s[2] > s[3] == 0  # recent reports weigh more; none, nothing
    # closed by a fix after the open: answered, weighs less (the fix then counts as an earlier ticket)
    fixed = week.assign(days_since_fix=1.0)
    assert 0 < evidence.terms(fixed)["ticket_opened"][0] < evidence.terms(week)["ticket_opened"][0]
    assert evidence.terms(week.assign(days_since_fix=5.0))["ticket_opened"][0] == evidence.terms(week)["ticket_opened"][0]
    from pipeline.predict.evidence_words import describe

    assert describe(today.iloc[0].to_dict(), evidence.terms(today).iloc[0].to_dict()) == "1 ticket opened on this GPU today"
    assert describe(fixed.iloc[0].to_dict(), evidence.terms(fixed).iloc[0].to_dict()) == \
        "1 ticket opened on this GPU in 7 days (a fix closed 1 day ago)"
