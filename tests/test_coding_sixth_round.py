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
    n = 2 * MIN_ROUTE  # four folds of five still hold MIN_ROUTE of it
    raw, ok, routes = _labelled(n, n)
    pooled = fit(raw, ok, per_score=False)
    routed = fit(raw, ok, per_score=False, routes=routes)
    assert routed.score("part", 80.0, "acted") >= 99.0 > pooled.score("part", 80.0, "acted")
    assert routed.score("part", 80.0, "context") < 60.0
    # out of fold too: the route's codes score near its own rate
    folds = {"part": [i % 5 for i in range(2 * n)]}
    oof = cross_validate(raw, ok, folds, per_score=False, routes=routes)["part"]
    assert min(oof[:n]) >= 98.0 and max(oof[n:]) < 60.0


def test_a_small_route_shares_the_dimensions_table():
    raw, ok, routes = _labelled(MIN_ROUTE - 1, MIN_ROUTE)
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


# -- CODING-GUIDE 4: a cleaning or reseat whose text names one part, away from the verb -----------
@pytest.mark.parametrize("part, symptom, action, want", [
    ("GPU 5", "GPU 5 running hot, 92C, thermal slowdown",
     "heatsink fins full of lint and dust; after a good cleaning it is back to 65C", "COOLING"),
    ("GPU", "GPU3 温度 90 度 降频", "开箱检查散热片积满灰尘，清灰之后温度回落到 68 度", "COOLING"),
    ("顯示卡", "GPU2 溫度過高 降頻", "打開機箱見散熱片塞滿灰塵，清潔後溫度回落", "COOLING"),
    ("GPU 2", "GPU 2 fell off the bus", "its aux power cable was only half inserted in the socket; after a reseat it is back",
     "CABLE"),
    ("显卡", "卡6 掉卡", "检查发现卡6的辅助供电线松脱，重新插紧后识别正常", "CABLE"),
    ("GPU", "GPU 2 掉卡", "检查发现供电线没插到底，重新插拔后恢复", "CABLE"),
    ("GPU", "第4張卡唔見咗", "條供電線冇插實，重新插好之後見返", "CABLE"),
])
def test_the_one_part_a_cleaning_or_reseat_text_names_was_acted_on(m, part, symptom, action, want):
    c = m.match_row(part, symptom, action)
    assert c.part_code == want and c.action_code in ("CLEAN", "RESEAT")


def test_a_cleaning_text_naming_two_parts_leaves_the_part_to_a_person(m):
    picked, tags = m.picks("GPU", "卡3 温度高", "散热片和系统风扇都积灰严重，清灰后温度正常")
    assert picked["part"].how != "acted" and "two_parts" in tags["part"]


# -- CODING-GUIDE 3: "nothing done", with the reason, is no fault of the server -----------------
@pytest.mark.parametrize("part, symptom, action", [
    ("GPU 1", "Xid 31 on GPU 1 during a user's job",
     "the user's own kernel wrote past its buffer; told them, no action on our side. Closed"),
    ("GPU", "all GPUs in rack 12 running hot",
     "The CRAC unit for that aisle had failed; facilities repaired it. No action on the servers."),
    ("GPU", "GPU 温度高告警", "机房空调故障导致进风温度高，机房修复后恢复，服务器侧未做任何操作"),
    ("顯示卡", "GPU 高溫告警", "冷通道門未關好造成熱回流，機房已處理，伺服器未處理"),
])
def test_nothing_done_for_a_cause_outside_the_server_is_part_none(m, part, symptom, action):
    c = m.match_row(part, symptom, action)
    assert (c.part_code, c.action_code) == ("NONE", "NONE")


@pytest.mark.parametrize("symptom, action", [
    ("Xid 79 on GPU 3", "waiting for the customer's logs, no action yet"),
    ("Xid 79 on GPU 3", "closed"),
    ("GPU3 掉卡", "等待客户回复，暂未处理"),
    ("第3張卡掉卡", "仲等緊客回覆，未有處理"),
])
def test_nothing_done_yet_or_said_bare_is_no_verdict(m, symptom, action):
    assert m.match_row("GPU", symptom, action).part_code != "NONE"
