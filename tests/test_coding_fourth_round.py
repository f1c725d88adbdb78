"""Issue 16, fourth round: holdout3's review-bound classes, fixed as rules, in English and Chinese.

Rules alone (``Matcher.rules_only``: raw scores, no calibration, no second opinion) test what the
rules read; the second opinion's shield and the per-dimension thresholds are tested on their own.
"""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.errors import ConfigError
from pipeline.normalize.calibrate import Calibration, load_calibration
from pipeline.normalize.canonical import canonical
from pipeline.normalize.matcher import Matcher
from pipeline.normalize.prior import shield
from pipeline.normalize.taxonomy import load_taxonomy
from tests.test_coding_third_round import tiny_prior  # noqa: F401  (a second opinion that has only seen risers replaced)


@pytest.fixture(scope="module")
def m():
    return Matcher.rules_only()


# -- a device state word after an action is not "pending" the action ---------------------------
@pytest.mark.parametrize("action", [
    "drained + gpu reset, pending cleared",
    "do gpu reset, pending gone",
    "等 job 跑完做 gpu reset，pending 变 no",
    "处置：GPU 重置后 pending 清除",
    "gpu reset -> pending yes to no",
])
def test_a_reset_that_cleared_a_pending_remap_was_done(m, action):
    assert m.match_row("", "Remapped Rows Pending: Yes (Xid 63)", action).action_code == "REBOOT"


@pytest.mark.parametrize("action", ["replacement pending", "GPU swap pending", "更换 pending"])
def test_an_action_still_pending_is_not_done(m, action):
    assert m.match_row("GPU", "Xid 79", action).action_code != "REPLACE"


# -- NCCL as the workload is no software fault ------------------------------------------------
@pytest.mark.parametrize("symptom, action", [
    ("sxid on nvswitch, every nccl job on that box dies", "fm restart, powercycle ok"),
    ("nvswitch sxid，整机 nccl 失败", "重启 fabricmanager 并整机下电重启恢复"),
    ("nvswitch 出 sxid，成部机 nccl 行唔到", "restart fabric manager 再 power cycle，nccl test pass"),
])
def test_nccl_failing_is_the_workload_not_the_part(m, symptom, action):
    c = m.match_row("", symptom, action)
    assert c.part_code != "SOFTWARE" and c.symptom_code == "NVLINK_ERROR" and c.action_code == "REBOOT"


@pytest.mark.parametrize("action", ["bug in nccl with our topology, rolled back nccl", "nccl 回退到旧版本后正常"])
def test_nccl_rolled_back_is_still_software(m, action):
    assert m.match_row("", "multi-node jobs hang in all-reduce", action).part_code == "SOFTWARE"


# -- a device outside the GPU's path with no symptom word: its own symptom --------------------
@pytest.mark.parametrize("part, symptom, action, want", [
    ("", "smartd[1121]: Device: /dev/nvme1, Critical Warning (0x04): Reliability", "nvme1 replaced", ("STORAGE", "OTHER")),
    ("ibmc", "ibmc 管理口无法登录，业务正常", "处理过程：带内执行 bmc 冷复位后恢复", ("BMC", "OTHER")),
    ("网卡", "网卡 port 冇 link，换过网线都係咁", "换张网卡，link 返嚟", ("NIC", "OTHER")),
    ("系统盘", "系统盘 smart 告警，reallocated sector 超阈值", "换块系统盘", ("STORAGE", "OTHER")),
    ("BMC", "BMC web UI unreachable, host up", "bmc cold reset", ("BMC", "OTHER")),
])
def test_a_part_without_gpu_symptoms_gets_its_own(m, part, symptom, action, want):
    c = m.match_row(part, symptom, action)
    assert (c.part_code, c.symptom_code) == want


@pytest.mark.parametrize("part, symptom, action", [
    ("dimm", "dimm B2 flagged", "dimm reseated"), ("内存", "内存条告警", "内存条换"),  # memory codes: a person decides
    ("网卡", "", "换网卡"), ("NIC", "qwxz", "replaced NIC"),  # nothing said of the part
])
def test_no_symptom_is_implied_for_a_dimm_or_a_field_that_says_nothing_of_the_part(m, part, symptom, action):
    c = m.match_row(part, symptom, action)
    assert c.part_code is not None and c.symptom_code is None


# -- Chinese verbs with a measure word, or after the part ---------------------------------------
@pytest.mark.parametrize("action, part", [
    ("换张网卡 link 返嚟", "NIC"), ("换条 ib 线", "CABLE"), ("內存條換咗", "DIMM"), ("内存条换", "DIMM"),
    ("整个 psu 换", "PSU"), ("换块硬盘", "STORAGE"),
])
def test_chinese_replace_verbs_with_measure_words_or_after_the_part(m, action, part):
    c = m.match_row("", "告警", action)
    assert (c.part_code, c.action_code) == (part, "REPLACE")


# -- 卡 replaced or reseated is the GPU; named cards win -------------------------------------
@pytest.mark.parametrize("symptom, action, want", [
    ("卡5 温度高，其他卡正常", "换卡后正常", ("GPU", "REPLACE")),
    ("node 卡一直报 xid74 nvlink error", "卡换，nccl tests 跑 2 小时无报错", ("GPU", "REPLACE")),
    ("卡掉了", "卡重新插拔后恢复", ("GPU", "RESEAT")),
    ("网口 link down", "换网卡", ("NIC", "REPLACE")),
    ("掉卡", "更换转接卡", ("PCIE_RISER", "REPLACE")),
])
def test_a_card_replaced_is_the_gpu_unless_named_otherwise(m, symptom, action, want):
    c = m.match_row("", symptom, action)
    assert (c.part_code, c.action_code) == want


# -- a swap whose fault followed the slot did not fix it ------------------------------------
@pytest.mark.parametrize("action", [
    "swapped the card to test, fault followed the slot, replaced the riser",
    "swapped gpu to another slot -> followed the slot. replaced riser for slot 5e",
    "换卡测试，故障跟随槽位，更换转接卡",
    "換卡測試，故障跟隨槽位，更換轉接卡",
])
def test_the_part_after_a_swap_that_followed_the_slot_is_the_fixing_one(m, action):
    assert m.match_row("", "Xid 79, GPU fell off the bus", action).part_code == "PCIE_RISER"


# -- the second opinion does not outvote a replacement of a GPU it misreads ---------------------
@pytest.mark.parametrize("ticket", [
    ("", "GPU 3 fell off the bus", "replaced GPU 3"),
    ("", "3号卡掉卡", "更换 GPU"),
    ("加速卡", "加速卡掉卡", "更换备件"),
])
def test_a_gpu_replaced_keeps_its_score_where_the_opinion_reads_an_unnamed_part(tiny_prior, ticket):
    alone = Matcher(load_taxonomy(), 0.0, calibration=Calibration())
    doubted = Matcher(load_taxonomy(), 0.0, calibration=Calibration(), prior=tiny_prior)
    assert doubted.prior.predict({d: [canonical(t)] for d, t in zip(("part", "symptom", "action"), ticket)}
                                 )["part"][0][0] == "PCIE_RISER"
    assert alone.match_row(*ticket).part_code == doubted.match_row(*ticket).part_code == "GPU"
    assert doubted.match_row(*ticket).part_score == alone.match_row(*ticket).part_score
    frame = pl.DataFrame({"part_text": [ticket[0]], "symptom_text": [ticket[1]], "action_text": [ticket[2]]})
    assert doubted.code_frame(frame).equals(doubted.code_rows(frame))


@pytest.mark.parametrize("ticket", [
    ("GPU", "GPU 3 fell off the bus, riser 3 AER errors", "replaced GPU 3"),  # the riser is named
    ("GPU", "GPU 3 fell off the bus", "reset GPU 3"),  # no fix applied to the GPU
    ("GPU", "GPU 3 fell off the bus", "checked riser, swap"),  # a bare verb, and another part named
])
def test_the_opinion_still_doubts_where_the_ticket_names_its_part_or_nothing_was_replaced(tiny_prior, ticket):
    alone = Matcher(load_taxonomy(), 0.0, calibration=Calibration())
    doubted = Matcher(load_taxonomy(), 0.0, calibration=Calibration(), prior=tiny_prior)
    a, d = alone.match_row(*ticket), doubted.match_row(*ticket)
    if a.part_code == "GPU":
        assert d.part_score < a.part_score


def test_shield_only_for_a_gpu_replaced():
    g = load_taxonomy().guide
    args = dict(action="REPLACE", prior_code="MOTHERBOARD", named=frozenset({"GPU"}), guide=g, share=0.0)
    assert shield("part", "GPU", "acted", **args) == 0.0
    assert shield("part", "GPU", "exact", **args) == 1.0  # the part field's word, no replacement beside it
    assert shield("part", "PSU", "acted", **args) == 1.0
    assert shield("symptom", "GPU", "acted", **args) == 1.0
    assert shield("part", "GPU", "acted", **{**args, "action": "RESEAT"}) == 0.0  # a fix too (fifth round)
    assert shield("part", "GPU", "acted", **{**args, "action": "REBOOT"}) == 1.0
    assert shield("part", "GPU", "acted", **{**args, "prior_code": "?"}) == 1.0  # "could not decide"
    assert shield("part", "GPU", "acted", **{**args, "named": frozenset({"GPU", "MOTHERBOARD"})}) == 1.0
    assert shield("part", "GPU", "acted", **{**args, "prior_code": "GPU"}) == 0.0  # agreeing, if unsure
    assert shield("part", "GPU", "acted", **{**args, "share": 50.0}) == 0.5


# -- per-dimension thresholds ---------------------------------------------------------------
def test_the_calibration_thresholds_are_each_dimensions_own(tmp_path):
    p = tmp_path / "cal.yaml"
    p.write_text(Calibration({}, "", {"part": 99.0, "symptom": 93.0, "action": 80.0}).to_yaml(), encoding="utf-8")
    cal = load_calibration(p)
    assert cal.thresholds == {"part": 99.0, "symptom": 93.0, "action": 80.0}
    per = Matcher(load_taxonomy(), None, calibration=cal)
    assert per.thresholds == cal.thresholds
    c = per.match_row("GPU", "Xid 79", "更换GPU")  # raw 95-100 in every dimension
    assert c.part_code is None and c.symptom_code == "FELL_OFF_BUS" and c.action_code == "REPLACE"
    one = Matcher(load_taxonomy(), 90.0, calibration=cal)  # a number: one threshold for all
    assert one.thresholds == {"part": 90.0, "symptom": 90.0, "action": 90.0}
    one.threshold = 85.0
    assert one.threshold == 85.0 and set(one.thresholds.values()) == {85.0}


def test_a_bad_threshold_in_a_calibration_file_is_a_clear_error(tmp_path):
    p = tmp_path / "cal.yaml"
    p.write_text("version: 1\nthresholds: {part: 140, colour: 50}\npoints: {}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_calibration(p)
    assert "thresholds.part" in str(e.value) and "thresholds.colour" in str(e.value)


def test_the_bundled_calibration_names_a_threshold_per_dimension():
    cal = load_calibration()
    assert set(cal.thresholds) == {"part", "symptom", "action"}
    assert Matcher.load().thresholds == cal.thresholds


# -- the cached second opinion follows its examples -----------------------------------------
def test_a_changed_examples_file_is_fitted_anew(tmp_path, monkeypatch):
    from pipeline.normalize.prior import load_prior

    monkeypatch.setenv("FLEETFAULT_CACHE", str(tmp_path / "cache"))
    rows = [("GPU", f"GPU {i} hot", f"replaced GPU {i}", "GPU", "OVERHEAT", "REPLACE") for i in range(6)]
    rows += [("PSU", f"PSU {i} failed", f"reseated PSU {i}", "PSU", "POWER_FAULT", "RESEAT") for i in range(6)]
    ex = pl.DataFrame(rows, schema=["part_text", "symptom_text", "action_text", "part_code", "symptom_code",
                                    "action_code"], orient="row")
    path = tmp_path / "examples.csv"
    ex.write_csv(path)
    first = load_prior(path)
    cached = sorted((tmp_path / "cache" / "coding_prior").glob("*.pkl"))
    assert len(cached) == 1 and first is not None
    ex.with_columns(pl.when(pl.col("part_code") == "PSU").then(pl.lit("FAN")).otherwise(pl.col("part_code"))
                    .alias("part_code")).write_csv(path)
    second = load_prior(path)
    assert len(list((tmp_path / "cache" / "coding_prior").glob("*.pkl"))) == 2
    got = second.predict({"part": ["psu"], "symptom": ["psu failed"], "action": ["reseated psu"]})
    assert got["part"][0][0] == "FAN"


# -- a server that will not power on did not start ------------------------------------------
@pytest.mark.parametrize("symptom", [
    "Server will not power on, no LEDs, BMC reachable",
    "System does not power on; PSUs green.",
    "n-261 node dead, no power on at all, bmc up",
    "Server cannot power on, press power button nothing happen",
    "服务器上电后无法开机，电源指示灯闪烁",
    "部機開唔到機",
])
def test_a_server_that_will_not_power_on_is_a_boot_failure(m, symptom):
    assert m.match_row("", symptom, "motherboard replaced").symptom_code == "BOOT_FAILURE"


@pytest.mark.parametrize("symptom", ["PSU1 failed, server will not power on", "电源模块故障告警"])
def test_a_power_part_reported_failing_stays_a_power_fault(m, symptom):
    assert m.match_row("", symptom, "replaced PSU1").symptom_code == "POWER_FAULT"


def test_an_opinion_beyond_doubt_outvotes_the_shield(tiny_prior):
    """Fifth round: the tiny opinion reads a riser at 0.96 (>= prior.OUTVOTES) for "GPU board" | swap:
    it keeps its say (on the simulator's tickets such opinions were right: "rier card" | RMA)."""
    from pipeline.normalize.prior import OUTVOTES

    ticket = ("GPU board", "GPU 3 fell off the bus", "swap, new sn 1650523300396")
    alone = Matcher(load_taxonomy(), 0.0, calibration=Calibration())
    doubted = Matcher(load_taxonomy(), 0.0, calibration=Calibration(), prior=tiny_prior)
    got = doubted.prior.predict({d: [canonical(t)] for d, t in zip(("part", "symptom", "action"), ticket)})["part"]
    assert got[0][0] == "PCIE_RISER" and got[1][0] >= OUTVOTES
    assert doubted.match_row(*ticket).part_score < alone.match_row(*ticket).part_score
