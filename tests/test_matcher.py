"""The matcher: hard pairs technicians write, context across fields, learning, the frame path."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import UsageError
from pipeline.normalize.canonical import canonical
from pipeline.normalize.matcher import DIMENSIONS, OUTPUT_COLUMNS, Matcher


@pytest.fixture(scope="module")
def m() -> Matcher:
    """The rules alone, coding what they are sure of (the calibrated product is measured on
    hand-written tickets in bench/bench_coding_corpus.py)."""
    return Matcher.rules_only()


def code(m, part=None, symptom=None, action=None):
    c = m.match_row(part, symptom, action)
    return c.part_code, c.symptom_code, c.action_code


@pytest.fixture(scope="module")
def proposals() -> Matcher:
    """The rules' proposals before calibration and threshold: what the guide's rules pick,
    whatever the bundled calibration then says of a code from another field (on hand-written
    tickets seen for the first time, a part inferred from the symptom was right only about
    seven times in ten, so such codes may go to review)."""
    from pipeline.normalize.calibrate import Calibration
    from pipeline.normalize.taxonomy import load_taxonomy

    return Matcher(load_taxonomy(), 0.0, calibration=Calibration())


# -- hard pairs (issue 6 acceptance) ----------------------------------------------------
@pytest.mark.parametrize("text, part", [
    ("内存", "DIMM"), ("内存条故障", "DIMM"), ("記憶體", "DIMM"), ("system memory", "DIMM"),
    ("显存", "GPU"), ("顯存", "GPU"), ("GPU memory (HBM3)", "GPU"), ("HBM", "GPU"),
    ("电源风扇", "PSU"), ("PSU fan", "PSU"), ("power supply fan", "PSU"), ("電源風扇", "PSU"),
    ("GPU fan", "FAN"), ("显卡风扇", "FAN"), ("system fan #3", "FAN"), ("风扇", "FAN"),
    ("NVSwitch", "NVSWITCH"), ("NVSwitch tray", "NVSWITCH"), ("nvswtich", "NVSWITCH"), ("交换芯片", "NVSWITCH"),
    ("NVLink bridge", "NVLINK_BRIDGE"), ("nvlink桥接器", "NVLINK_BRIDGE"), ("NVLink brdige", "NVLINK_BRIDGE"),
    ("riser card", "PCIE_RISER"), ("PCIe riser", "PCIE_RISER"), ("转接卡", "PCIE_RISER"), ("retimer", "PCIE_RISER"),
    ("HGX baseboard", "GPU_BASEBOARD"), ("GPU基板", "GPU_BASEBOARD"), ("GPU tray", "GPU_BASEBOARD"),
    ("UBB", "GPU_BASEBOARD"),
    ("NFF", "NONE"), ("无故障", "NONE"), ("No Fault Found", "NONE"), ("复测正常", "NONE"), ("無故障", "NONE"),
    ("显卡", "GPU"), ("GPU卡", "GPU"), ("加速卡", "GPU"), ("graphics card", "GPU"), ("SXM module", "GPU"),
    ("ＧＰＵ", "GPU"), ("H100 SXM5 80GB", "GPU"), ("graphcis card", "GPU"),
])
def test_part_hard_pairs(m, text, part):
    assert m.match_row(text, None, None).part_code == part


@pytest.mark.parametrize("text, action", [
    ("重新插拔后恢复", "RESEAT"), ("重新插拔後恢復", "RESEAT"), ("reseated the card, OK now", "RESEAT"),
    ("re-seat GPU", "RESEAT"), ("插拔", "RESEAT"),
    ("RMA", "REPLACE"), ("返厂", "REPLACE"), ("RMA'd to vendor", "REPLACE"), ("更换显卡", "REPLACE"),
    ("swapped with spare", "REPLACE"), ("replcaed GPU", "REPLACE"), ("返廠維修", "REPLACE"),
    ("升级驱动", "REFLASH"), ("刷VBIOS", "REFLASH"), ("driver upgraded to 550.54", "REFLASH"),
    ("updated firmware", "REFLASH"), ("升級驅動", "REFLASH"), ("更换驱动版本", "REFLASH"),
    ("reboot", "REBOOT"), ("nvidia-smi -r", "REBOOT"), ("重启后恢复", "REBOOT"), ("power cycled node", "REBOOT"),
    ("清灰", "CLEAN"), ("cleaned dust from heatsink", "CLEAN"),
    ("继续观察", "MONITOR"), ("returned to service, monitoring", "MONITOR"),
    ("无", "NONE"), ("no action", "NONE"),
    ("reseat did not help, replaced GPU", "REPLACE"), ("未更换, 重新插拔", "RESEAT"),
])
def test_action_hard_pairs(m, text, action):
    assert m.match_row(None, None, text).action_code == action


@pytest.mark.parametrize("text, symptom", [
    ("掉卡", "FELL_OFF_BUS"), ("GPU has fallen off the bus", "FELL_OFF_BUS"), ("Xid 79", "FELL_OFF_BUS"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "FELL_OFF_BUS"),
    ("nvidia-smi shows ERR!", "FELL_OFF_BUS"), ("GPU Lost", "FELL_OFF_BUS"), ("识别不到GPU", "FELL_OFF_BUS"),
    ("Xid 48", "MEMORY_UNCORRECTABLE"), ("DBE", "MEMORY_UNCORRECTABLE"),
    ("GPU DBE(Double Bit ECC) > Threshold", "MEMORY_UNCORRECTABLE"), ("显存ECC不可纠正", "MEMORY_UNCORRECTABLE"),
    ("GPU SBE(Single Bit ECC) > Threshold", "MEMORY_CORRECTABLE"), ("Xid 92", "MEMORY_CORRECTABLE"),
    ("row remap failure", "ROW_REMAP"), ("Xid 64", "ROW_REMAP"), ("行重映射失败", "ROW_REMAP"),
    ("GPU Temperature High", "OVERHEAT"), ("过热降频", "OVERHEAT"), ("thermal throttling", "OVERHEAT"),
    ("fan speed critical", "FAN_FAULT"), ("风扇不转", "FAN_FAULT"),
    ("Power Supply Failure detected", "POWER_FAULT"), ("掉电", "POWER_FAULT"),
    ("SXid 12028", "NVLINK_ERROR"), ("Xid 74 NVLink error", "NVLINK_ERROR"), ("nvlink报错", "NVLINK_ERROR"),
    ("GPU PCI link width low", "PCIE_ERROR"), ("PCIe AER errors", "PCIE_ERROR"), ("pcie降速", "PCIE_ERROR"),
    ("GSP RPC timeout, Xid 119", "GSP_ERROR"), ("nvidia-smi Timeout", "HANG"), ("卡死", "HANG"),
    ("GPU P2P Bandwidth Low", "PERFORMANCE"), ("性能下降", "PERFORMANCE"),
    ("Xid 13 graphics engine exception", "APP_FAULT"), ("Xid 31", "APP_FAULT"), ("应用崩溃", "APP_FAULT"),
    ("driver/library version mismatch", "DRIVER_ISSUE"), ("驱动加载失败", "DRIVER_ISSUE"),
    ("burnt smell, scorched connector", "PHYSICAL_DAMAGE"), ("漏液", "PHYSICAL_DAMAGE"),
    ("no POST", "BOOT_FAILURE"), ("无法开机", "BOOT_FAILURE"),
    ("Xid 79 after Xid 13", "FELL_OFF_BUS"), ("overheating due to fan failure", "OVERHEAT"),
])
def test_symptom_hard_pairs(m, text, symptom):
    assert m.match_row(None, text, None).symptom_code == symptom


# -- context across fields -------------------------------------------------------------
def test_vague_part_takes_the_symptoms_part(m, proposals):
    assert code(proposals, "服务器", "掉卡", "重新插拔后恢复") == ("GPU", "FELL_OFF_BUS", "RESEAT")
    assert code(proposals, None, "Xid 79", "RMA")[0] == "GPU"
    assert code(proposals, "node", "fan speed critical", "replaced")[0] == "FAN"


def test_part_named_in_symptom_or_action(m, proposals):
    assert code(proposals, "", "内存 uncorrectable ECC", "replaced")[0] == "DIMM"
    assert code(proposals, "", "显存 uncorrectable ECC", "replaced")[0] == "GPU"
    assert code(proposals, "host", "power failure", "replaced PSU")[0] == "PSU"
    assert code(proposals, "", "reported hang", "NFF, returned to service")[0] == "NONE"


def test_action_written_in_symptom_field(m):
    assert code(m, "GPU", "掉卡, 重新插拔后恢复", None)[2] == "RESEAT"


def test_own_field_wins_over_context(m):
    assert code(m, "riser", "掉卡", "replaced")[0] == "PCIE_RISER"


def test_negation_is_not_evidence(m):
    assert m.match_text("symptom", "no fan failure, GPU lost").code == "FELL_OFF_BUS"


def test_nothing_confident_goes_to_review(m):
    c = m.match_row("asdf qwerty", "", "")
    assert c.part_code is None and c.review
    assert m.match_row("GPU", "Xid 79", "RMA").review is False


def test_threshold_from_config():
    from pipeline.config import config_from_dict

    strict = Matcher.load(config_from_dict({"normalize": {"auto_threshold": 99.9}}))
    assert strict.threshold == 99.9
    assert strict.match_row("graphcis crad", "Xid 79", "RMA").part_code is None


# -- learning from review --------------------------------------------------------------
def test_learned_answers_code_the_text_and_near_variants():
    m = Matcher.load(learned=[("part", "机柜顶部模块", "FAN"), ("action", "厂商工程师上门处理", "REPLACE")])
    assert m.match_row("机柜顶部模块", None, None).part_code == "FAN"
    assert m.match_row("机柜顶部模块!", None, None).part_code == "FAN"
    assert m.match_row(None, None, "厂商工程师上门处理了").action_code == "REPLACE"
    frame = pl.DataFrame({"part_text": ["机柜顶部模块"], "symptom_text": ["x"], "action_text": ["厂商工程师上门处理了"]})
    out = m.code_frame(frame)
    assert out["part_code"][0] == "FAN" and out["action_code"][0] == "REPLACE"


def test_learned_unknown_code_is_a_usage_error():
    with pytest.raises(UsageError, match="NOT_A_CODE"):
        Matcher.load(learned=[("part", "x", "NOT_A_CODE")])


def test_suggest_ranks_codes(m):
    top = m.suggest("part", "grpahic crad", k=3)
    assert top[0][0] == "GPU" and len(top) <= 3
    assert all(0 <= s <= 100 for _, s in top)
    with pytest.raises(UsageError):
        m.suggest("colour", "x")


# -- the frame path --------------------------------------------------------------------
TICKETS = pl.DataFrame({
    "ticket_id": ["T1", "T2", "T3", "T4", "T5", "T6"],
    "part_text": ["显卡", "GPU", None, "PSU fan", "graphcis card", "GPU"],
    "symptom_text": ["掉卡 SN:1652345678901", "Xid 48 DBE", "Xid 79", "fan noise", "overheeting", "Xid 48 DBE"],
    "action_text": ["重新插拔后恢复", "RMA", "返厂", "replaced", None, "RMA"],
})


def test_code_frame_matches_row_by_row():
    m = Matcher.load()  # as `fleetfault normalize` codes: calibration and second opinion included
    fast = m.code_frame(TICKETS)
    slow = m.code_rows(TICKETS)
    assert fast.equals(slow)
    assert fast.columns == TICKETS.columns + list(OUTPUT_COLUMNS)
    # T3 ("Xid 79", 返厂, no part written): the GPU is inferred from the symptom, which the
    # calibration rates below the threshold, so it goes to review; T4 ("PSU fan", the guide's
    # trap: a PSU) is a code the second opinion doubts; T5 (a typo) has no action, and with nothing
    # done the opinion gives "could not decide" enough weight (0.11) to leave its part to a person too
    assert fast["part_code"].to_list() == ["GPU", "GPU", None, None, None, "GPU"]
    assert fast["symptom_code"].to_list() == ["FELL_OFF_BUS", "MEMORY_UNCORRECTABLE", "FELL_OFF_BUS", "FAN_FAULT",
                                              "OVERHEAT", "MEMORY_UNCORRECTABLE"]
    assert fast["review"].to_list() == [False, False, True, True, True, False]


def test_code_frame_needs_the_text_columns(m):
    with pytest.raises(UsageError, match="action_text"):
        m.code_frame(pl.DataFrame({"part_text": ["x"], "symptom_text": ["y"]}))


def test_code_frame_empty(m):
    empty = TICKETS.head(0)
    assert m.code_frame(empty).height == 0


# -- properties ------------------------------------------------------------------------
text = st.one_of(st.none(), st.text(max_size=60),
                 st.sampled_from(["GPU", "掉卡", "Xid 79", "RMA", "重新插拔", "PSU fan", "ＧＰＵ　掉卡"]))
_ALLOWED = {d: Matcher.load().taxonomy.allowed(d) for d in DIMENSIONS}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=text, s=text, a=text)
def test_arbitrary_text_never_raises_and_codes_are_allowed(m, p, s, a):
    c = m.match_row(p, s, a)
    for d, v in (("part", c.part_code), ("symptom", c.symptom_code), ("action", c.action_code)):
        assert v is None or v in _ALLOWED[d]
    for score in (c.part_score, c.symptom_score, c.action_score):
        assert 0 <= score <= 100
    assert c.review == (None in (c.part_code, c.symptom_code, c.action_code))
    # normalizing twice equals once: the canonical text codes the same
    assert m.match_row(canonical(p), canonical(s), canonical(a)) == c


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(text, text, text), max_size=12))
def test_frame_equals_rows_and_coding_twice_equals_once(m, rows):
    df = pl.DataFrame(rows, schema={"part_text": pl.Utf8, "symptom_text": pl.Utf8, "action_text": pl.Utf8},
                      orient="row")
    once = m.code_frame(df)
    assert once.equals(m.code_rows(df))
    assert m.code_frame(once).equals(once)


def test_generic_symptom_takes_the_parts_symptom(m):
    assert code(m, "Fan", "Redundancy Lost", "replaced")[:2] == ("FAN", "FAN_FAULT")
    assert code(m, "PSU", "failed", "replaced")[:2] == ("PSU", "POWER_FAULT")
    # missing or unreadable symptom text is not generic: a person decides
    assert code(m, "Fan", None, "replaced")[1] is None
    assert code(m, "Fan", "qwxz", "replaced")[1] is None


def test_short_typos_are_only_suggestions(m):
    assert m.match_text("symptom", "low").code in (None, "PERFORMANCE")
    assert m.match_text("symptom", "low").score < m.threshold
    assert m.match_text("action", "sawp").score < m.threshold


def test_xid_without_number_names_no_symptom(m):
    assert m.match_row("GPU", "GPU xid Error", "RMA").symptom_code is None


def test_passive_words_in_the_description_are_not_the_action(m):
    assert code(m, "GPU", "monitoring alert - Xid 13", None)[2] is None
    assert code(m, "GPU", "Xid 79, 重新插拔后恢复", None)[2] == "RESEAT"


def test_a_failed_job_is_a_consequence_not_the_symptom(m):
    assert code(m, "GPU", "training slow (job 709 failed)", "closed")[1] == "PERFORMANCE"
