"""Issue 16, sixth round: a calibration per route (how a code was found), a second opinion for
description-only exports, and this round's review-bound classes as rules, in English and Chinese.

Rules alone (``Matcher.rules_only``: raw scores, no calibration, no second opinion) test what the
rules read; the calibration's routes are tested on hand-made tables.
"""

from __future__ import annotations

import pytest

from pipeline.errors import ConfigError
from pipeline.normalize.calibrate import MIN_ROUTE, Calibration, cross_validate, fit, load_calibration, route_groups
from pipeline.normalize.matcher import DESC_ROUTE, Matcher, route_of
from pipeline.normalize.taxonomy import load_taxonomy
from tests.test_coding_third_round import tiny_prior  # noqa: F401  (a second opinion that has only seen risers replaced)


@pytest.fixture(scope="module")
def m():
    return Matcher.rules_only()


# -- a table per route --------------------------------------------------------------------------
def test_a_route_is_scored_by_its_own_table_then_its_group_then_the_dimension():
    c = Calibration({"part": ((0.0, 0.5),)}, routes={"part": {"acted": ((0.0, 0.999),), DESC_ROUTE: ((0.0, 0.7),)}})
    assert c.score("part", 90.0, "acted") == 99.9
    assert c.score("part", 90.0, "context") == 50.0  # no table of its own: the dimension's
    assert c.score("part", 90.0, None) == 50.0
    assert c.score("part", 90.0, f"{DESC_ROUTE}:acted") == 70.0  # the group's, not the fielded route's
    assert route_groups(f"{DESC_ROUTE}:acted") == [f"{DESC_ROUTE}:acted", DESC_ROUTE]


def test_route_tables_survive_the_yaml_and_bad_ones_are_named(tmp_path):
    c = Calibration({"part": ((50.0, 0.5), (90.0, 0.9))}, thresholds={"part": 95.0},
                    routes={"part": {"acted": ((80.0, 0.99),)}, "action": {f"{DESC_ROUTE}:named": ((0.0, 0.8),)}})
    p = tmp_path / "cal.yaml"
    p.write_text(c.to_yaml(), encoding="utf-8")
    back = load_calibration(p)
    assert back.routes == c.routes and back.points == c.points and back.thresholds == c.thresholds
    p.write_text("version: 1\nroutes:\n  part:\n    acted: [[90, 0.9], [80, 0.95]]\n  wing: {acted: [[1, 0.5]]}\n",
                 encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_calibration(p)
    text = str(e.value)
    assert "routes.part.acted" in text and "routes.wing" in text


def _labelled(n_good: int, n_bad_route: int) -> tuple[dict, dict, dict]:
    """Raw 80 codes: a route right all but once in ``n_good``, and a route right half the time."""
    raw = [80.0] * (n_good + n_bad_route)
    ok = [True] * (n_good - 1) + [False] + [i % 2 == 0 for i in range(n_bad_route)]
    routes = ["acted"] * n_good + ["context"] * n_bad_route
    return {"part": raw}, {"part": ok}, {"part": routes}


def test_a_route_right_far_more_often_than_its_dimension_scores_higher():
    raw, ok, routes = _labelled(400, 200)
    pooled = fit(raw, ok, per_score=False)
    routed = fit(raw, ok, per_score=False, routes=routes)
    assert routed.score("part", 80.0, "acted") >= 99.0 > pooled.score("part", 80.0, "acted")
    assert routed.score("part", 80.0, "context") < 60.0
    # out of fold too: the route's codes score near its own rate
    folds = {"part": [i % 5 for i in range(600)]}
    oof = cross_validate(raw, ok, folds, per_score=False, routes=routes)["part"]
    assert min(oof[:400]) >= 98.0 and max(oof[400:]) < 60.0


def test_a_small_route_shares_the_dimensions_table():
    raw, ok, routes = _labelled(MIN_ROUTE - 1, 200)
    got = fit(raw, ok, per_score=False, routes=routes)
    assert "acted" not in got.routes["part"] and "context" in got.routes["part"]
    assert got.score("part", 80.0, "acted") == got.score("part", 80.0)


def test_the_matcher_scores_a_code_on_the_route_that_found_it():
    cal = Calibration({"part": ((0.0, 0.5),), "symptom": ((0.0, 0.99),), "action": ((0.0, 0.99),)},
                      routes={"part": {"acted": ((0.0, 0.999),)}})
    mm = Matcher(load_taxonomy(), 90.0, calibration=cal)
    acted = mm.match_row("", "GPU 3 fell off the bus, Xid 79", "replaced GPU 3")
    assert acted.part_code == "GPU" and acted.part_score == 99.9
    named = mm.match_row("GPU", "GPU 3 fell off the bus, Xid 79", "monitoring")
    assert named.part_code is None and named.part_score == 50.0


# -- description-only exports ------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "GPU 3 fell off the bus (Xid 79); replaced GPU 3",
    "卡3掉卡 Xid 79，已更换卡3",
    "第3張卡跌咗落 bus，換咗張卡",
])
def test_a_description_only_ticket_is_routed_apart(m, text):
    from pipeline.normalize.canonical import canonical

    keys = (canonical(text),) * 3
    assert route_of("acted", keys) == f"{DESC_ROUTE}:acted"
    assert route_of("acted", (keys[0], keys[0], "")) == "acted"
    assert route_of("acted", ("", "", "")) == "acted"


@pytest.mark.parametrize("text", [
    "GPU 2 fell off the bus; replaced riser 2",
    "卡2掉卡，更换转接卡2",
    "第2張卡掉卡，更換轉接卡2",
])
def test_a_description_only_ticket_gets_a_second_opinion(tiny_prior, text):
    alone = Matcher(load_taxonomy(), 0.0, calibration=Calibration())
    asked = Matcher(load_taxonomy(), 0.0, calibration=Calibration(), prior=tiny_prior)
    from pipeline.normalize.canonical import canonical

    assert asked._opinions([(canonical(text),) * 3])[0] is not None
    # the opinion has seen tickets like this one only with their fields apart: where it reads the
    # same code less than surely, the rules' score falls; it never rises
    a, b = alone.match_row(text, text, text), asked.match_row(text, text, text)
    assert a.part_code == b.part_code == "PCIE_RISER"
    assert b.part_score <= a.part_score


# -- the reliability table per route -------------------------------------------------------------
def test_routes_say_how_the_rules_found_each_code(m):
    import polars as pl

    df = pl.DataFrame({"part_text": ["GPU", "", "卡3掉卡，已更换转接卡3"],
                       "symptom_text": ["Xid 79", "GPU 3 fell off the bus", "卡3掉卡，已更换转接卡3"],
                       "action_text": ["replaced GPU 3", "qwxz", "卡3掉卡，已更换转接卡3"]})
    r = m.routes(df)
    assert r.columns == ["part_route", "symptom_route", "action_route"]
    assert r.row(0)[0] == "acted" and r.row(1)[2] is None
    assert all(x.startswith(f"{DESC_ROUTE}:") for x in r.row(2))


def test_evaluate_reports_precision_per_route():
    import polars as pl

    from pipeline.normalize.evaluate import score

    keys = {"service_point": ["a"] * 4, "ticket_id": ["1", "2", "3", "4"]}
    coded = pl.DataFrame({**keys, "part_code": ["GPU", "GPU", "PSU", None], "part_score": [99.0, 98.0, 97.0, 40.0],
                          "part_route": ["acted", "acted", "context", "context"]})
    truth = pl.DataFrame({**keys, "part_code": ["GPU", "PCIE_RISER", "PSU", "FAN"]})
    got = {r["route"]: r for r in score(coded, truth).routes.iter_rows(named=True)}
    assert got["acted"]["codes"] == 2 and got["acted"]["precision"] == 0.5 and got["acted"]["mean_score"] == 0.985
    assert got["context"]["codes"] == 1 and got["context"]["precision"] == 1.0
    assert score(coded.drop("part_route"), truth).routes.height == 0
