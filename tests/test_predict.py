"""Failure prediction: no look-ahead, labels, leakage, calibration, drift check, fallback, CLI.

A toy fleet (:mod:`pipeline.predict.toy`) is written straight into the warehouse tables;
one model is trained per module and shared by the tests that only read it.
"""

from __future__ import annotations

import itertools
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import Config, Predict, config_from_dict
from pipeline.predict import evaluate, explain, model
from pipeline.predict.features import FEATURES, build_features
from pipeline.predict.rank import CONTRACT, rank_gpus
from pipeline.predict.rules import RuleBaseline
from pipeline.predict.toy import write_toy_fleet
from pipeline.predict.train import labelled_frame, train
from pipeline.warehouse import Warehouse

START = date(2025, 1, 1)

#: Two out-of-fold periods instead of four: half the fits (seconds per test). The toy fleet
#: is small, so the promotion bar is lowered to what it holds (2 folds, 5 failed GPUs);
#: the bar itself is tested in test_predict_bar.py.
FAST = config_from_dict({"predict": {"cv_folds": 2, "promotion_min_folds": 2, "promotion_min_failures": 5}})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A toy fleet with features and one promoted model: (warehouse path, models dir, out dir, result)."""
    root = tmp_path_factory.mktemp("predict")
    path, mdir, out = root / "wh.duckdb", root / "models", root / "out"
    with Warehouse(path) as wh:
        write_toy_fleet(wh, gpus=96, days=150, seed=7, start=START, daily_hazard=0.003)
        build_features(wh, Config())
        result = train(wh, FAST, mdir, out)
    return path, mdir, out, result


def _feature_rows(wh: Warehouse, upto: date) -> pd.DataFrame:
    cols = ", ".join(f'"{c}"' for c in ("serial", "day", "pci_bus_id", *FEATURES))
    return wh.con.execute(f"SELECT {cols} FROM features WHERE day <= ? ORDER BY serial, day", [upto]).df()


def test_features_for_a_day_do_not_change_when_later_data_arrives(tmp_path):
    cut = START + timedelta(days=35)
    with Warehouse(tmp_path / "full.duckdb") as full, Warehouse(tmp_path / "cut.duckdb") as part:
        for wh in (full, part):
            write_toy_fleet(wh, gpus=32, days=60, seed=3, start=START)
        part.con.execute("DELETE FROM gpu_days WHERE day > ?", [cut]).fetchall()
        part.con.execute("DELETE FROM xid_events WHERE CAST(ts AS DATE) > ?", [cut]).fetchall()
        part.con.execute("DELETE FROM tickets WHERE CAST(opened_at AS DATE) > ?", [cut]).fetchall()
        build_features(full, Config())
        build_features(part, Config())
        a, b = _feature_rows(full, cut), _feature_rows(part, cut)
    assert len(a) > 32 * 30
    pd.testing.assert_frame_equal(a, b)


def test_link_narrowing_and_heat_are_measured_against_the_gpu_and_its_host(wh):
    write_toy_fleet(wh, gpus=8, days=60, seed=2, start=START, daily_hazard=0.0)
    serial = wh.con.execute("SELECT serial FROM inventory WHERE slot = 3").fetchall()[0][0]
    narrow = [START + timedelta(days=d) for d in (40, 41, 43)]
    hot = START + timedelta(days=45)
    wh.con.execute("UPDATE gpu_days SET pcie_width_min = 16, temp_mean = 60").fetchall()
    wh.con.execute("UPDATE gpu_days SET pcie_width_min = 8 WHERE serial = ? AND day IN (?, ?, ?)", [serial, *narrow]).fetchall()
    wh.con.execute("UPDATE gpu_days SET temp_mean = 70, samples = 360 WHERE serial = ? AND day = ?", [serial, hot]).fetchall()
    build_features(wh, Config())
    rows = wh.con.execute("SELECT day, pcie_narrow_days_7d, temp_vs_host_1d, temp_1d_vs_own_before, samples_vs_own_1d "
                 "FROM features WHERE serial = ? ORDER BY day", [serial]).df()
    rows = rows.set_index(pd.to_datetime(rows["day"]).dt.date)
    assert rows.loc[START + timedelta(days=39), "pcie_narrow_days_7d"] == 0
    assert rows.loc[START + timedelta(days=43), "pcie_narrow_days_7d"] == 3
    assert rows.loc[START + timedelta(days=48), "pcie_narrow_days_7d"] == 1  # day 41 fell out of the week
    assert rows.loc[hot, "temp_vs_host_1d"] == pytest.approx(10)  # its 7 host mates stayed at 60
    assert rows.loc[hot, "temp_1d_vs_own_before"] == pytest.approx(10)
    assert rows.loc[hot, "samples_vs_own_1d"] == pytest.approx(0.25)
    assert rows.loc[hot - timedelta(days=1), "temp_vs_host_1d"] == pytest.approx(0)


def test_labels_mark_the_horizon_before_a_replacement_and_stop_at_it(wh):
    truth = write_toy_fleet(wh, gpus=16, days=90, seed=5, start=START, daily_hazard=0.01)
    build_features(wh, Config())
    failed = truth.filter(pl.col("failed_at").dt.date() < START + timedelta(days=80)).row(0, named=True)
    fday = failed["failed_at"].date()
    rows = wh.con.execute("SELECT day, label, days_to_failure FROM features WHERE serial = ? ORDER BY day", [failed["serial"]]).df()
    days = pd.to_datetime(rows["day"]).dt.date
    assert days.max() == fday - timedelta(days=1)  # no day at or after the replacement
    want = [(fday - d).days <= 7 for d in days]
    assert rows["label"].astype(bool).tolist() == want
    assert rows["days_to_failure"].tolist() == [(fday - d).days for d in days]
    # The last horizon of data cannot be labelled yet for a GPU that did not fail.
    last = wh.con.execute("SELECT max(day) FROM features").fetchall()[0][0]
    assert wh.con.execute("SELECT count(*) FROM features WHERE day > ? AND label = false", [last - timedelta(days=7)]).fetchall()[0][0] == 0


def test_the_trained_model_beats_the_evidence_score_out_of_fold_and_is_calibrated(trained):
    _, mdir, out, result = trained
    assert result.promoted, result.notes
    m = result.metrics
    # the toy fleet's failures follow its batch and slow precursors the evidence score does not weigh
    assert m["model"]["pr_auc"] > m["baseline"]["pr_auc"] and "out-of-fold" in result.notes[0]
    assert m["model"]["ece"] <= 0.05 and m["rules"]["failures"] == m["model"]["failures"]
    pos_rate = m["model"]["positive_gpu_days"] / m["model"]["gpu_days"]
    assert m["model"]["brier"] < pos_rate  # better than always saying "no"
    assert (mdir / f"{result.version}.skops").exists() and (mdir / f"{result.version}.md").exists()
    assert model.current_version(mdir) == result.version
    for f in ("metrics/predict.json", "plots/predict_pr.csv", "plots/predict_calibration.csv"):
        assert (out / f).stat().st_size > 0


def test_shuffling_labels_in_time_drops_the_model_to_chance(trained):
    path, *_ = trained
    with Warehouse(path, read_only=True) as wh:
        first, last = wh.con.execute("SELECT min(day), max(day) FROM features WHERE label IS NOT NULL").fetchall()[0]
        split = model.choose_split(first, last, 180, 30, 30, 7)
        frame = labelled_frame(wh, split.train[0], split.test[1])
    days = pd.to_datetime(frame["day"]).dt.date
    part = {k: ((days >= a) & (days <= b)).to_numpy() for k, (a, b) in
            (("train", split.train), ("cal", split.calibrate), ("test", split.test))}
    y = frame["label"].astype(int).to_numpy()
    # Each GPU's labels are moved to other days of its own history: the features no longer
    # say anything about when it fails.
    rng = np.random.default_rng(0)
    shuffled = frame.assign(y=y).groupby("serial")["y"].transform(lambda s: rng.permutation(s.to_numpy())).to_numpy()
    levels = model.category_levels(frame[part["train"]])
    X = model.design_matrix(frame, levels)
    est = model.fit(X[part["train"]], shuffled[part["train"]], X[part["cal"]], shuffled[part["cal"]])
    auc = evaluate.score(frame[part["test"]], est.predict_proba(X[part["test"]])[:, 1],
                         np.zeros(part["test"].sum(), bool), Predict())["pr_auc"]
    prevalence = y[part["test"]].mean()
    assert auc < 3 * prevalence, (auc, prevalence)


def test_cv_folds_are_in_time_order_a_horizon_apart():
    folds = model.cv_folds(date(2025, 1, 1), date(2025, 6, 30), 180, 30, 7, 4)
    assert len(folds) == 4 and folds[-1].test[1] == date(2025, 6, 30)
    for f, nxt in zip(folds, folds[1:] + [None]):
        assert (f.test[0] - f.train[1]).days == 8 and (f.test[1] - f.test[0]).days == 29
        assert f.train[0] >= date(2025, 1, 1)
        if nxt:
            assert (nxt.test[0] - f.test[1]).days == 1
    young = model.cv_folds(date(2025, 1, 1), date(2025, 2, 10), 180, 30, 7, 4)  # 41 labelled days
    assert len(young) >= 1 and all((f.test[1] - f.test[0]).days == 6 for f in young)
    assert model.cv_folds(date(2025, 1, 1), date(2025, 1, 20), 180, 30, 7, 4) == []


def test_promotion_needs_the_model_to_win_on_most_resamples_of_the_gpus():
    from pipeline.predict.train import PROMOTION_SHARE, bootstrap_wins

    rng = np.random.default_rng(1)
    serial = np.repeat([f"g{i}" for i in range(200)], 10)
    y = np.zeros(len(serial), bool)
    y[rng.choice(len(serial), 25, replace=False)] = True
    frame = pd.DataFrame({"serial": serial, "label": y})
    noise = rng.random(len(y))
    sharp, blunt = noise + 2.0 * y, noise + 0.2 * y  # one ranks every failure first, one barely
    assert bootstrap_wins(frame, sharp, blunt) == 1.0 and bootstrap_wins(frame, blunt, sharp) == 0.0
    one, other = rng.random(len(y)) + 0.5 * y, rng.random(len(y)) + 0.5 * y  # as good as each other
    assert bootstrap_wins(frame, one, other) < PROMOTION_SHARE and bootstrap_wins(frame, other, one) < PROMOTION_SHARE


def test_forward_periods_tile_from_the_first_month_to_the_last_labelled_day():
    from pipeline.predict.backtest import forward_periods

    ps = forward_periods(date(2025, 3, 1), date(2025, 6, 21), 14, 30)
    assert ps[0] == (date(2025, 3, 31), date(2025, 4, 13))
    assert ps[-1][1] == date(2025, 6, 21) and (ps[-1][1] - ps[-1][0]).days < 14  # the last one cut short
    assert all((b[0] - a[1]).days == 1 for a, b in itertools.pairwise(ps))
    assert forward_periods(date(2025, 3, 1), date(2025, 3, 30), 14, 30) == []


def test_walk_forward_replays_each_night_on_its_own_past(trained):
    from dataclasses import replace

    from pipeline.predict.backtest import RANKERS, walk_forward

    path, *_ = trained
    cfg = replace(Config(), predict=replace(Predict(), test_days=15, cv_folds=2))
    with Warehouse(path, read_only=True) as wh:
        res = walk_forward(wh, cfg, periods=3, min_history=60)
    tests = [[date.fromisoformat(d) for d in r["test"]] for r in res["periods"]]
    assert len(tests) == 3
    for t, nxt in zip(tests, tests[1:] + [None]):
        assert (t[1] - t[0]).days == 14
        if nxt:
            assert (nxt[0] - t[1]).days == 1  # test periods tile the time line
    for r in res["periods"]:
        m = r["metrics"]
        assert m["list"] == (m["model"] if r["promoted"] else m["evidence"])
    pooled = res["pooled"]
    assert pooled["list"]["gpu_days"] == sum(r["metrics"]["list"]["gpu_days"] for r in res["periods"])
    for k in RANKERS:
        assert len(res["leads"][k]) == pooled[k]["failures_caught"]
        assert all(1 <= d <= 7 for d in res["leads"][k])


def test_ranked_list_has_the_contract_columns_and_words(trained):
    path, mdir, _, result = trained
    with Warehouse(path) as wh:
        last = wh.con.execute("SELECT max(day) FROM features").fetchall()[0][0]
        table, version, notes = rank_gpus(wh, Config(), mdir, last)
        stored = wh.con.execute("SELECT count(*) FROM predictions WHERE as_of = ?", [last]).fetchall()[0][0]
    assert version == result.version
    assert list(table[CONTRACT].columns) == CONTRACT
    assert stored == len(table) > 0
    assert table["rank"].iloc[0] == 1 and table["rank"].is_monotonic_increasing
    assert table["risk"].is_monotonic_decreasing and table["risk"].between(0, 1).all()
    assert (table["horizon_days"] == 7).all()
    assert table["top_factors"].head(10).notna().all()


def test_a_candidate_no_better_than_the_evidence_score_is_not_promoted(trained, monkeypatch, tmp_path):
    import shutil

    from sklearn.dummy import DummyClassifier

    path, mdir, _, result = trained
    copy, mcopy = tmp_path / "wh.duckdb", tmp_path / "models"
    copy.write_bytes(Path(path).read_bytes())
    shutil.copytree(mdir, mcopy)

    def useless(X_train, y_train, *, seed=0, threads=1):
        return DummyClassifier(strategy="prior").fit(X_train, y_train)

    monkeypatch.setattr(model, "fit_raw", useless)
    with Warehouse(copy) as wh:
        assert "not retrained" in train(wh, FAST, mcopy, None).notes[0]  # a rerun of the night
        res = train(wh, FAST, mcopy, None, force=True)
        row = wh.con.execute("SELECT promoted, reason FROM model_runs WHERE version = ?", [res.version]).fetchall()[0]
        table, version, _ = rank_gpus(wh, Config(), mcopy, wh.con.execute("SELECT max(day) FROM features").fetchall()[0][0])
    assert not res.promoted and row[0] is False and "evidence score's" in row[1]
    assert model.current_version(mcopy) is None and any(f"{result.version} retired" in n for n in res.notes)
    assert version.startswith("evidence")


def test_a_model_saved_with_other_features_is_refused_then_retrained(trained, monkeypatch, tmp_path):
    """A card lists the features its model was trained on: one saved before a feature was
    added or dropped (here: before the tickets' open was counted and ``days_since_ticket``
    dropped) is not fed columns it never saw; the evidence score ranks, and the next night
    retrains instead of reusing it."""
    import json
    import shutil

    from sklearn.dummy import DummyClassifier

    path, mdir, _, result = trained
    copy, mcopy = tmp_path / "wh.duckdb", tmp_path / "models"
    copy.write_bytes(Path(path).read_bytes())
    shutil.copytree(mdir, mcopy)
    card_path = mcopy / f"{result.version}.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))
    old = [c for c in card["features"] if not c.startswith("tickets_opened_") and c != "days_since_ticket_open"]
    card["features"] = old[:old.index("reseats_prior") + 1] + ["days_since_ticket"] + old[old.index("reseats_prior") + 1:]
    card_path.write_text(json.dumps(card), encoding="utf-8")
    monkeypatch.setattr(model, "fit_raw", lambda X, y, *, seed=0, threads=1: DummyClassifier(strategy="prior").fit(X, y))
    with Warehouse(copy) as wh:
        last = wh.con.execute("SELECT max(day) FROM features").fetchall()[0][0]
        _, version, notes = rank_gpus(wh, Config(), mcopy, last)
        res = train(wh, FAST, mcopy, None)
    assert model.current_version(mdir) == result.version  # it was the promoted model
    assert version.startswith("evidence")
    assert any(f"model {result.version} was trained on other features" in n for n in notes)
    assert res.version not in (None, result.version) and not any("not retrained" in n for n in res.notes)


def test_too_little_history_falls_back_to_the_evidence_score(wh, tmp_path):
    from pipeline.predict.stage import run as stage_run
    from pipeline.run import RunContext

    write_toy_fleet(wh, gpus=16, days=20, seed=1, start=START, daily_hazard=0.0)
    build_features(wh, Config())
    res = train(wh, Config(), tmp_path / "models", tmp_path / "out")
    assert res.version is None and "too little history" in res.notes[0]
    last = wh.con.execute("SELECT max(day) FROM features").fetchall()[0][0]
    table, version, notes = rank_gpus(wh, Config(), tmp_path / "models", last)
    assert version == "evidence-prior" and len(table) == 16
    assert any("published prior" in n for n in notes)
    # The nightly stage goes through, with a note and the files DVC expects.
    ctx = RunContext(config_from_dict({"paths": {"models": str(tmp_path / "m")}}), wh, tmp_path, tmp_path / "out")
    stage_run(ctx)
    assert any("too little history" in n for n in ctx.report("predict").notes)
    assert (tmp_path / "out" / "metrics" / "predict.json").exists()
    assert (tmp_path / "out" / "predictions.csv").read_text().startswith(",".join(CONTRACT))


def test_nightly_stage_and_cli(trained, cli, tmp_path, capsys):
    from pipeline.predict.stage import run as stage_run
    from pipeline.run import RunContext

    path, *_ = trained
    copy = tmp_path / "wh.duckdb"
    copy.write_bytes(Path(path).read_bytes())
    cfg = config_from_dict({"paths": {"models": str(tmp_path / "m")}, "predict": {"cv_folds": 2}})
    with Warehouse(copy) as wh:
        ctx = RunContext(cfg, wh, tmp_path, tmp_path / "out")
        stage_run(ctx)
    assert ctx.report("predict").rows_out > 0
    assert (tmp_path / "out" / "predictions.csv").exists()
    assert (tmp_path / "out" / "metrics" / "predict.json").exists()
    # The night run again into a fresh folder: not retrained, the metrics still written.
    with Warehouse(copy) as wh:
        ctx = RunContext(cfg, wh, tmp_path, tmp_path / "out2")
        stage_run(ctx)
    assert any("not retrained" in n for n in ctx.report("predict").notes)
    assert '"model": {' in (tmp_path / "out2" / "metrics" / "predict.json").read_text()

    out = tmp_path / "list.csv"
    assert cli("predict", "-o", out, "--warehouse", copy) == 0
    got = pd.read_csv(out)
    assert list(got.columns) == CONTRACT
    assert cli("predict", "-o", out, "--warehouse", copy, "--as-of", "2025-13-01") == 2
    assert "--as-of" in capsys.readouterr().err
    assert cli("predict", "-o", out, "--warehouse", copy, "--as-of", "2031-01-01") == 2
    assert cli("predict", "-o", out, "--warehouse", tmp_path / "none.duckdb") == 2


def test_top_factors_read_like_a_technician_wrote_them():
    row = {"xid63_7d": 4, "ecc_corr_7d": 2450, "ecc_corr_trend": 10, "temp_vs_model_7d": 12.2, "batch": "B1"}
    contrib = {g: 0.0 for g in explain.GROUPS} | {"xid": 0.3, "ecc": 0.2, "temperature": 0.1}
    assert explain.describe(row, contrib) == "Xid 63 ×4 in 7 days; corrected ECC +350/day; 12 °C above its model's median"
    assert explain.describe({}, {g: 0.0 for g in explain.GROUPS}) == "no unusual signal"
    row = {"pcie_width_deficit_7d": 8, "pcie_narrow_days_7d": 5, "temp_vs_host_7d": 9.6, "samples_vs_own_1d": 0.25}
    contrib = {g: 0.0 for g in explain.GROUPS} | {"pcie": 0.3, "temperature": 0.2, "telemetry": 0.1}
    assert explain.describe(row, contrib) == ("PCIe link 8 lanes below its width on 5 of the last 7 days; "
                                              "10 °C hotter than the other GPUs of its host; "
                                              "reported 25% of its usual samples today")


def test_rule_baseline_risk_never_falls_as_critical_xids_rise():
    f = pd.DataFrame({"xid_crit_7d": [0, 1, 2, 5, 12] * 40, "xid_crit_1d": [0] * 200})
    y = np.random.default_rng(1).random(200) < np.tile([0.0, 0.3, 0.1, 0.5, 0.9], 40)
    p = RuleBaseline().fit(f, y).predict_proba(f)[:5, 1]
    assert (np.diff(p) >= 0).all() and 0 < p[0] < p[-1] < 1


def test_calibration_error_is_zero_for_a_calibrated_predictor():
    rng = np.random.default_rng(2)
    p = rng.random(200_000) * 0.2
    y = (rng.random(len(p)) < p).astype(int)
    assert evaluate.expected_calibration_error(y, p) < 0.005
    assert evaluate.expected_calibration_error(y, np.clip(p * 2, 0, 1)) > 0.05


def test_split_is_in_time_order_with_gaps():
    s = model.choose_split(date(2025, 1, 1), date(2025, 12, 31), 180, 30, 30, 7)
    assert s.train[1] < s.calibrate[0] < s.calibrate[1] < s.test[0] and s.test[1] == date(2025, 12, 31)
    assert (s.calibrate[0] - s.train[1]).days == 8 and (s.test[0] - s.calibrate[1]).days == 8
    assert (s.train[1] - s.train[0]).days == 179
    assert model.choose_split(date(2025, 1, 1), date(2025, 1, 30), 180, 30, 30, 7) is None


@settings(max_examples=200, deadline=None)
@given(span=st.integers(1, 1500), train=st.integers(1, 400), cal=st.integers(1, 90), test=st.integers(1, 90),
       horizon=st.integers(1, 30))
def test_split_never_overlaps_or_leaves_the_data(span, train, cal, test, horizon):
    first = date(2024, 1, 1)
    last = first + timedelta(days=span - 1)
    s = model.choose_split(first, last, train, cal, test, horizon)
    if s is None:
        return
    assert first <= s.train[0] <= s.train[1] and s.test[1] == last
    assert (s.calibrate[0] - s.train[1]).days > horizon and (s.test[0] - s.calibrate[1]).days > horizon
    assert s.calibrate[0] <= s.calibrate[1] < s.test[0] <= s.test[1]
    assert min((b - a).days + 1 for a, b in (s.train, s.calibrate, s.test)) >= 7


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=300))
def test_calibration_error_is_a_share(pairs):
    p = np.array([a for a, _ in pairs])
    y = np.array([int(b) for _, b in pairs])
    assert 0 <= evaluate.expected_calibration_error(y, p) <= 1
    assert 0 <= evaluate.recall_at_precision(y, p, 0.9) <= 1
