"""Calibrated scores (issue 16 item 2): the table's fit and checks, and the reliability table.
The learned layer (item 4) has its own tests in test_learned.py."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.errors import ConfigError
from pipeline.normalize.calibrate import Calibration, fit, load_calibration, reliability
from pipeline.normalize.matcher import Matcher


def test_fit_is_calibrated_on_its_own_data():
    raw = [100.0] * 200 + [90.0] * 50 + [70.0] * 20
    ok = [True] * 198 + [False] * 2 + [True] * 45 + [False] * 5 + [True] * 8 + [False] * 12
    cal = fit({"part": raw}, {"part": ok})
    assert cal.score("part", 100.0) > cal.score("part", 90.0) > cal.score("part", 70.0)
    assert cal.score("part", 100.0) == pytest.approx(99.0, abs=1.0)
    assert cal.score("part", 90.0) == pytest.approx(90.0, abs=3.0)
    assert cal.score("part", 70.0) == pytest.approx(40.0, abs=6.0)
    # below anything seen: no more than the raw score says
    assert cal.score("part", 30.0) <= 30.0


def test_calibration_round_trips_and_bad_tables_are_config_errors(tmp_path):
    cal = fit({"action": [95.0] * 30 + [80.0] * 10}, {"action": [True] * 29 + [False] + [True] * 6 + [False] * 4})
    path = tmp_path / "cal.yaml"
    path.write_text(cal.to_yaml(), encoding="utf-8")
    again = load_calibration(path)
    assert again.score("action", 95.0) == cal.score("action", 95.0)
    path.write_text("points:\n  action: [[90, 1.5]]\n  colour: [[1, 0.5]]\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_calibration(path)
    assert "0-1" in str(e.value) and "colour" in str(e.value)
    with pytest.raises(ConfigError, match="not found"):
        load_calibration(tmp_path / "missing.yaml")


def test_no_table_keeps_raw_scores():
    assert Calibration().score("part", 87.3) == 87.3


def test_reliability_rows():
    rows = reliability([99.0, 99.0, 91.0, 60.0], [True, True, False, True], cuts=(50, 95))
    assert rows[0]["codes"] == 4 and rows[1]["codes"] == 2 and rows[1]["precision"] == 1.0


def test_threshold_trades_precision_for_coverage():
    tickets = pl.DataFrame({"part_text": ["GPU", "GPU / PSU", "riser", None],
                            "symptom_text": ["Xid 79", "Xid 79", "GPU fell off the bus", "GPU 當機"],
                            "action_text": ["RMA", "checked", "swapped the riser", "重新開機"]})
    covered = Matcher.load()
    counts = []
    for thr in (50.0, 85.0, 99.9):
        covered.threshold = thr
        counts.append(int(covered.code_frame(tickets)["part_code"].is_not_null().sum()))
    assert counts[0] >= counts[1] >= counts[2] and counts[0] > counts[2]


def test_evaluate_counts_empty_gold_and_reports_reliability():
    from pipeline.normalize.evaluate import score

    truth = pl.DataFrame({"service_point": ["a"] * 4, "ticket_id": ["1", "2", "3", "4"],
                          "part_code": ["GPU", "FAN", None, "PSU"]})
    coded = truth.with_columns(pl.Series("part_code", ["GPU", "FAN", "GPU", None]),
                               pl.Series("part_score", [99.0, 92.0, 91.0, 40.0]))
    r = score(coded, truth)
    row = r.summary.row(0, named=True)
    # a code where a careful engineer could not decide is an error; coverage counts decidable tickets
    assert row["precision"] == pytest.approx(2 / 3) and row["decidable"] == 3
    assert row["decided_coverage"] == pytest.approx(2 / 3)
    rel = {x["score_at_least"]: x for x in r.reliability.iter_rows(named=True)}
    assert rel[90.0]["codes"] == 3 and rel[95.0]["codes"] == 1 and rel[95.0]["precision"] == 1.0


def test_out_of_fold_scores_come_from_tables_that_never_saw_the_code():
    from pipeline.normalize.calibrate import cross_validate

    # fold 0: twenty codes at raw 100, all wrong; folds 1-3: sixty at raw 100, all right
    raw = {"part": [100.0] * 80}
    ok = {"part": [False] * 20 + [True] * 60}
    folds = {"part": [0] * 20 + [1, 2, 3] * 20}
    oof = cross_validate(raw, ok, folds)["part"]
    in_sample = fit(raw, ok).score("part", 100.0)
    # the other folds promise ~98% for fold 0's codes (all wrong): out of fold shows the
    # table's promise on codes it did not see, in sample its own luck
    assert min(oof[:20]) > 95 > in_sample
    assert max(oof[20:]) < 100


def test_the_threshold_is_the_lowest_score_keeping_the_precision():
    from pipeline.normalize.calibrate import threshold_for

    scores = [99.0] * 50 + [95.0] * 50 + [90.0] * 10
    right = [True] * 50 + [True] * 49 + [False] + [False] * 10
    assert threshold_for(scores, right, 0.99) == 95.0  # 99 of 100 at >= 95
    assert threshold_for(scores, right, 0.9) == 90.0
    assert threshold_for(scores, [False] * 110, 0.5) is None  # unreachable: say so, do not guess
