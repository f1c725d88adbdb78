"""Issue 16, seventh round: the shapes a careful engineer sends to review (CODING-GUIDE: when the
words point several ways, a person decides; rule 13), in English, simplified and traditional
Chinese and mixed text.

Rules alone (``Matcher.rules_only``: raw scores, no calibration, no second opinion) test what the
rules read: a declined code is no code, whatever score the calibration would give it.
"""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.normalize.matcher import Matcher
from tests.test_coding_third_round import tiny_prior  # noqa: F401  (a second opinion that has only seen risers replaced)


@pytest.fixture(scope="module")
def m():
    return Matcher.rules_only()


def part(m, *ticket):
    picked, _ = m.picks(*ticket)
    return picked["part"]


# -- a swap done as a test, its result not told -----------------------------------------------------
@pytest.mark.parametrize("ticket", [
    ("GPU 3 / GPU 5", "GPU 3 fell off the bus twice (Xid 79)",
     "GPU 3 and GPU 5 swapped between slots to see whether the fault follows the module or the slot; observation running"),
    ("GPU", "g2 xid79", "swapped g2 and g6 slots to see if it follows"),
    ("GPU", "GPU2 掉卡", "GPU2 和 GPU6 对调测试，继续观察"),
    ("顯示卡", "GPU2 掉卡", "GPU2 同 GPU6 對調測試，睇下跟唔跟"),
    ("GPU", "GPU4 Xid 79", "GPU4 跟 GPU1 互换 slot, 看是否跟随"),
])
def test_a_swap_test_still_running_names_no_part(m, ticket):
    got = part(m, *ticket)
    assert got.code is None and got.how == "declined"


@pytest.mark.parametrize("ticket", [
    ("GPU", "GPU 1 Xid 48", "GPU 1 moved to slot 3 for a swap test, Xid 48 is following the GPU"),
    ("GPU", "GPU2 xid 79", "GPU2 与 GPU6 对调测试后故障跟随GPU2，已更换GPU2"),
    ("GPU", "GPU 1 Xid 48", "swapped GPU 1 and GPU 3 to see if it follows; the error followed the card"),
])
def test_a_swap_test_whose_result_is_told_keeps_the_part(m, ticket):
    assert part(m, *ticket).code == "GPU"


# -- a part ordered and not fitted ------------------------------------------------------------------
@pytest.mark.parametrize("ticket", [
    ("整機", "節點當機，無任何 log", "主機板已訂貨，尚未到貨，節點暫停使用"),
    ("node", "node hangs twice a day", "motherboard ordered, in transit"),
    ("", "GPU4 掉卡", "已叫料，等料中"),
    ("", "GPU 4 fell off the bus", "spare GPU ordered, waiting for delivery"),
    ("server", "GPU 2 missing from lspci", "replacement on backorder, node drained"),
])
def test_a_part_awaited_that_the_part_field_does_not_name_goes_to_review(m, ticket):
    got = part(m, *ticket)
    assert got.code is None and got.how == "declined"


@pytest.mark.parametrize("ticket", [
    ("GPU", "GPU 6 xid 79", "new GPU ordered, ETA fri"),
    ("DIMM C3", "Uncorrectable memory error on DIMM C3.", "Part requested from OEM, ETA 2 days."),
    ("顯示卡", "第 6 張卡 Xid 64 row remapping failure", "已向廠商叫料，待料中，機台先下線"),
])
def test_a_part_awaited_that_the_part_field_names_is_coded(m, ticket):
    # HOLDOUT2.md: "part coded when the text names it"; 17 of 18 such tuning tickets agree
    assert part(m, *ticket).code is not None


def test_a_part_ordered_after_a_fix_done_keeps_the_fixed_part(m):
    assert part(m, "", "PSU 1 failure", "reseated PSU 1; new PSU ordered").code == "PSU"


# -- a resolution that says only "done" -------------------------------------------------------------
@pytest.mark.parametrize("ticket", [
    ("GPU", "GPU7 Xid 79", "Done."),
    ("GPU", "Xid 79 on GPU 0", "Resolution: fixed"),
    ("GPU", "GPU7 Xid 79", "已處理"),
    ("GPU", "GPU1 报错", "【处理】已处理"),
    ("GPU", "GPU 2 xid 79", "搞掂"),
    ("GPU", "GPU 2 掉卡", "repair completed"),
])
def test_a_bare_done_names_no_part(m, ticket):
    got = part(m, *ticket)
    assert got.code is None and got.how == "declined"


@pytest.mark.parametrize("ticket", [
    ("riser", "preventive: replaced riser", "done"),  # the symptom field tells what was done
    ("GPU", "GPU 2 掉卡，重新插拔后恢复", "已处理"),
    ("GPU", "Xid 79 on GPU 0", "reseated GPU 0, fixed"),  # not bare
])
def test_done_beside_an_action_told_elsewhere_keeps_the_part(m, ticket):
    assert part(m, *ticket).code is not None


# -- a fault still being observed -------------------------------------------------------------------
@pytest.mark.parametrize("ticket", [
    ("GPU", "GPU 3 Xid 79 once", "no action taken, keeping an eye on it"),
    ("GPU", "GPU3 偶发掉卡", "未处理，观察中"),
    ("GPU", "GPU3 偶發掉卡", "暫不處理，持續追蹤"),
])
def test_nothing_done_while_still_observed_is_no_verdict(m, ticket):
    picked, _ = m.picks(*ticket)
    assert picked["action"].code != "NONE" and picked["part"].code != "NONE"


def test_nothing_done_with_its_reason_is_still_a_verdict(m):
    picked, _ = m.picks("GPU", "GPU 3 Xid 13", "user application bug, nothing done on the server, closed")
    assert picked["part"].code == "NONE"


# -- this round's hard tickets: the words of a fix and of a part ruled out --------------------------
@pytest.mark.parametrize("ticket, want", [
    # Shanghainese 调 for 换, only where it is a swap ("调风扇策略" is an adjustment)
    (("电源", "两只电源有一只掉电，BMC报PSU0 AC lost", "PSU0调了一只新额，冗余恢复"), ("PSU", "REPLACE")),
    (("", "GPU3 Xid 64，Remapping Failure Occurred: Yes", "GPU3调新卡"), ("GPU", "REPLACE")),
    (("", "GPU5温度92度，降频，液冷机器", "冷板搿个快接头渗水，冷板连快接头一道调掉，重新加液"), ("COOLING", "REPLACE")),
    # blown clean, the card not replaced, whatever the customer asked for
    (("", "GPU4 温度高 88度，客户叫阿拉换卡", "卡没换。散热器上厚厚一层灰，吹干净了，温度回到73度"), ("COOLING", "CLEAN")),
    (("GPU", "GPU 2 溫度 90 度", "散熱片嘅灰吹乾淨，溫度返正常"), ("COOLING", "CLEAN")),
    # the suspected part tested and kept: "PSU keep"
    (("PSU", "Server power off randomly, customer suspect PSU.",
      "Test PSU ok. Found the mainboard have burn mark near 12V connector, replace mainboard. PSU keep."), ("MOTHERBOARD", "REPLACE")),
])
def test_this_rounds_hard_tickets(m, ticket, want):
    picked, _ = m.picks(*ticket)
    assert (picked["part"].code, picked["action"].code) == want


def test_adjusting_is_not_replacing(m):
    picked, _ = m.picks("风扇", "GPU 温度偏高", "BMC里调风扇策略，改成全速")
    assert picked["action"].code != "REPLACE"


def test_a_board_said_good_after_a_reseat_is_not_the_part_reseated(m):
    # 主板好额: the board is fine (Shanghainese); the DIMM was reseated
    picked, _ = m.picks("主板", "客户讲主板坏了，机器开勿出", "查下来一根内存条没插到底，重新插好就开出来了，主板好额")
    assert picked["part"].code != "MOTHERBOARD"


# -- the calibration's second axis: how the second opinion stood to the code ------------------------
def test_the_opinions_band():
    from pipeline.normalize.prior import SURE, UNDECIDED, band

    assert band("GPU", "GPU", SURE) == "agrees"
    assert band("GPU", "GPU", SURE - 0.3) == "unsure"
    assert band("GPU", "PCIE_RISER", 0.9) == "differs"
    assert band("GPU", UNDECIDED, 0.5) == "differs"
    assert band("GPU", None, 0.0) is None


def test_a_band_with_enough_codes_gets_its_own_table_and_falls_back_to_its_route():
    from pipeline.normalize.calibrate import MIN_BAND, MIN_ROUTE, fit

    # the route's codes at raw 80: where the opinion agreed unsurely, right every time; where it
    # differed, half the time (too few for a table of their own)
    n, few = MIN_ROUTE, MIN_BAND // 2
    raw = {"part": [80.0] * (n + few)}
    ok = {"part": [True] * n + [i % 2 == 0 for i in range(few)]}
    routes = {"part": ["acted:unsure"] * n + ["acted:differs"] * few}
    c = fit(raw, ok, per_score=False, routes=routes)
    assert "acted:unsure" in c.routes["part"] and "acted:differs" not in c.routes["part"]
    assert c.score("part", 80.0, "acted:unsure") > c.score("part", 80.0, "acted:differs")
    assert c.score("part", 80.0, "acted:differs") == c.score("part", 80.0, "acted")  # the route's pooled table


def test_the_matcher_scores_a_code_on_its_opinions_band(tiny_prior):
    from pipeline.normalize.calibrate import Calibration
    from pipeline.normalize.taxonomy import load_taxonomy

    ticket = ("GPU", "GPU 3 fell off the bus", "reseated GPU 3")  # the rules: GPU; the opinion: a riser
    flat = Calibration({"part": ((0.0, 0.5),)})
    banded = Calibration({"part": ((0.0, 0.5),)}, routes={"part": {"acted:differs": ((0.0, 0.2),)}})
    a = Matcher(load_taxonomy(), 0.0, calibration=flat, prior=tiny_prior).match_row(*ticket)
    b = Matcher(load_taxonomy(), 0.0, calibration=banded, prior=tiny_prior).match_row(*ticket)
    assert b.part_score < a.part_score
    frame = pl.DataFrame({"part_text": [ticket[0]], "symptom_text": [ticket[1]], "action_text": [ticket[2]]})
    m = Matcher(load_taxonomy(), 0.0, calibration=banded, prior=tiny_prior)
    assert m.code_frame(frame).equals(m.code_rows(frame))


@pytest.mark.parametrize("ticket", [
    ("电源模块 ×1", "工单INC-55364：GPU HW Slowdown", "已更换PSU"),
    ("gpu-c125", "gpu-c125 HW Slowdown on all GPUs during the NCCL test.", "Reseated PSUs."),
    ("PSU", "GPU HW slowdown active", "replaced PSU 2"),
    ("電源", "GPU 3 HW Slowdown: Active", "PSU 2 換咗"),
])
def test_a_slowdown_with_no_reading_takes_no_symptom_from_the_part_fixed(m, ticket):
    picked, _ = m.picks(*ticket)
    # rule 8: neither thermal nor power is reported, so the PSU's symptom is not implied
    assert picked["symptom"].code != "POWER_FAULT" and picked["symptom"].how != "implied"
