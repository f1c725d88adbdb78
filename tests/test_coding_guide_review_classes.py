"""The error classes found on the spent holdout half, as rules of the guide, each in several
phrasings (English, simplified and traditional Chinese, mixed). Written for these tests; not
copied from the corpus files or the simulator's vocabulary."""

from __future__ import annotations

import pytest

from pipeline.normalize.calibrate import Calibration
from pipeline.normalize.canonical import canonical
from pipeline.normalize.matcher import Matcher
from pipeline.normalize.taxonomy import load_taxonomy


@pytest.fixture(scope="module")
def m() -> Matcher:
    """The rules alone, coding what they are sure of."""
    return Matcher.rules_only()


@pytest.fixture(scope="module")
def product() -> Matcher:
    """As `fleetfault normalize` codes: calibrated scores, the second opinion, the default threshold
    (where a rule's doubt, not the rule itself, sends a ticket to review)."""
    return Matcher.load()


@pytest.fixture(scope="module")
def raw() -> Matcher:
    """Every proposal, before calibration and threshold: what the rules pick."""
    return Matcher(load_taxonomy(), 0.0, calibration=Calibration())


def codes(m, part, symptom, action):
    c = m.match_row(part, symptom, action)
    return c.part_code, c.symptom_code, c.action_code


# -- rule 3: no fault on this server is NONE, not the GPU the alert named ---------------------
@pytest.mark.parametrize("ticket", [
    ("GPU", "Xid 48 on GPU 0", "alert came from another node, ticket raised on the wrong server, closed"),
    ("", "g2 xid 13", "their own job crashed it, told user"),
    ("", "GPU 1 Xid 79 per customer", "no faults found after 8h diag, closed"),
    ("", "全部 GPU 過熱", "機房冷氣壞咗，修好後正常，伺服器冇做任何處理"),
    ("", "定期巡检", "冇发现问题，冇处理"),
    ("", "jobs hang in NFS reads", "cluster NFS server outage, nothing wrong with the node"),
])
def test_rule3_no_fault_is_none_not_the_named_gpu(m, ticket):
    assert codes(m, *ticket)[0] in ("NONE", None)
    assert codes(m, *ticket)[0] != "GPU"


@pytest.mark.parametrize("action", [
    "dcgmi diag -r 4 clean, no fault found, closed",
    "DCGM L4 clean 8h, closed",
    "burn-in came back clean",
])
def test_a_clean_diagnostic_is_no_cleaning(m, action):
    assert codes(m, "", "Xid 79 on GPU 2", action)[2] != "CLEAN"


# -- rule 6 + the taxonomy: a hang while booting is a boot failure ----------------------------
@pytest.mark.parametrize("symptom", [
    "box hangs in bios after update", "node won't post, stuck at 0x92", "開機 stuck 喺 BIOS screen",
    "开机卡在BIOS", "server hangs at boot",
])
def test_a_hang_at_boot_is_a_boot_failure(m, symptom):
    assert codes(m, "", symptom, "BIOS reflashed")[1] == "BOOT_FAILURE"


# -- rule 8: a power-brake slowdown is a power fault, a normal reading no heat ----------------
@pytest.mark.parametrize("symptom", [
    "GPU 全部降頻，power brake 觸發", "all GPU clocks down, HW power brake slowdown active, temps 50 C",
    "GPU 降频, power brake asserted",
])
def test_power_brake_throttling_is_a_power_fault(m, symptom):
    assert codes(m, "", symptom, "power cable reseated")[1] == "POWER_FAULT"


@pytest.mark.parametrize("symptom", [
    "hw_slowdown active (temp 52C)", "HW slowdown active, not thermal, temps 55 C", "n30 slow, hw_slowdown active, didnt check temps",
])
def test_a_slowdown_with_a_normal_or_no_reading_is_no_overheat(m, symptom):
    assert codes(m, "", symptom, "GPU replaced")[1] != "OVERHEAT"


def test_a_normal_reading_is_canonical_as_such():
    assert canonical("temp 52C") == "temperature normal"
    assert canonical("GPU at 93度") == canonical("GPU at 93 C") == "gpu at temperature"
    assert canonical("20 C above its neighbours").startswith("temperature")  # a difference, not a reading


# -- rule 13 + review: spares awaited or two parts with nothing saying which ------------------
@pytest.mark.parametrize("ticket", [
    ("", "GPU 4 drops off the bus", "Replacement GPU and riser on order, unit on hold awaiting parts"),
    ("GPU module / HGX baseboard", "NVLink errors on GPU 3", "Replacement GPU module and HGX baseboard on order; not yet fitted"),
    ("", "3号卡报错", "待厂商备件到货后更换"),
])
def test_a_replacement_on_order_is_not_done(m, ticket):
    assert codes(m, *ticket)[2] != "REPLACE"


@pytest.mark.parametrize("ticket", [
    ("", "host gpu=4 xid#79", "GPU4 + riser ordered, pending"),
    ("GPU", "GPU 6 Xid 79", "Riser and GPU ordered, ETA next week"),
    ("", "g1 xid79 + riser1 aer errs", "fixed"),
    ("", "卡5 xid 79，riser告警", "已下单riser和GPU，待更换"),
])
def test_two_parts_and_no_action_saying_which_go_to_review(product, ticket):
    assert codes(product, *ticket)[0] is None


# -- rule 1: which part the replacement or reseat was said of ---------------------------------
@pytest.mark.parametrize("ticket, part", [
    (("GPU", "GPU 5 has fallen off the bus", "Riser assembly replaced. GPU 5 retested successfully."), "PCIE_RISER"),
    (("GPU H100", "GPU5 Xid 74 NVLink fatal errors", "Replaced NVSwitch tray, GPU5 left in place"), "NVSWITCH"),
    (("GPU", "GPU 6 off the bus", "Found the MCIO cable loose and reconnected it. GPU 6 visible again."), "CABLE"),
    (("", "GPU3 Xid 79，更换GPU后仍掉卡，最终更换riser", None), "PCIE_RISER"),
    (("", "gpu5 又 fall off bus，换了卡还是掉", "最后换了 riser 才好"), "PCIE_RISER"),
    (("", "all GPU clocks going down, power brake slowdown", "Power cable of PSU 1 was loose, plugged back"), "CABLE"),
])
def test_the_part_the_fix_was_said_of(raw, ticket, part):
    assert codes(raw, *ticket)[0] == part


def test_a_verdict_is_no_modifier_of_the_part_after_it(m):
    # "未发现异常 内存测试通过": no memory fault, nothing done but watching
    assert codes(m, "", "内存 CE 计数超阈值", "未发现异常，内存测试通过，继续观察")[0] in ("NONE", None)


@pytest.mark.parametrize("ticket", [
    ("", "n30 slow, hw_slowdown active, didnt check temps", "reboot fixed it"),
    ("", "GPU clocks low, HW Slowdown active, power not logged", "GPU6 replaced"),
    ("", "clocks_event_reasons.hw_slowdown: Active, jobs slow", "node rebooted"),
])
def test_rule8_a_hardware_slowdown_of_unknown_cause_is_no_performance_code(m, ticket):
    assert codes(m, *ticket)[1] is None


@pytest.mark.parametrize("action, code", [
    ("bmc fw 13.2 -> 13.5, sensors back", "REFLASH"),
    ("driver 535.104 → 550.90, ok now", "REFLASH"),
    ("VBIOS 96.00.5E.00.01 => 96.00.89.00.01", "REFLASH"),
])
def test_a_version_bump_is_an_update(raw, action, code):
    assert codes(raw, "", "GPU 3 Xid 79", action)[2] == code


def test_a_number_sign_is_no_negation(raw):
    assert codes(raw, "", "GPU No.2 is not detected by nvidia-smi", "GPU No.2 was exchanged to new one")[::2] == ("GPU", "REPLACE")


@pytest.mark.parametrize("action", [
    "the power brake cable between the PSU backplane and the GPU board was loose; we reconnected it",
    "cable from the riser to the GPU reseated",
    "电源线从PSU到主板松了，重新插好",
])
def test_a_cables_ends_are_not_the_part_fixed(raw, action):
    assert codes(raw, "", "GPU 3 power brake slowdown", action)[0] == "CABLE"


@pytest.mark.parametrize("ticket", [
    ("", "Something is wrong with the server.", "Investigating now."),
    ("", "node 7 jobs 30% slower than on the other nodes", "under investigation"),
])
def test_filler_and_investigation_are_no_observation(m, ticket):
    assert codes(m, *ticket)[1] != "OTHER"


@pytest.mark.parametrize("symptom, code", [
    ("GPU not showing up in nvidia-smi", "FELL_OFF_BUS"), ("lspci does not show the GPU", "FELL_OFF_BUS"),
    ("PSU2 lost input", "POWER_FAULT"), ("没输入", "POWER_FAULT"), ("PSU2 fan loud", "FAN_FAULT"),
    ("训练变慢", "PERFORMANCE"), ("DIMM error uncorrectable", "MEMORY_UNCORRECTABLE"),
    ("bmc 无法连线", "OTHER"), ("iLO not reachable", "OTHER"), ("机器起不来，卡在自检", "BOOT_FAILURE"),
])
def test_plain_phrasings_of_other_writers(raw, symptom, code):
    assert raw.match_text("symptom", symptom).code == code


@pytest.mark.parametrize("ticket, codes_", [
    (("", "GPU 6 not detected", "No part replaced. MCIO cable was unseated; reseated. GPU 6 detected."), ("CABLE", "FELL_OFF_BUS", "RESEAT")),
    (("GPU", "GPU 6 Temperatur zu hoch, throttling", "Wärmeleitpaste erneuert"), ("COOLING", "OVERHEAT", "REPLACE")),
    (("", "GPU 1 Xid 79", "Kein Fehler gefunden, Ticket geschlossen"), ("NONE", "FELL_OFF_BUS", "NONE")),
    (("", "nvlink error between gpu 4 and 5", "bridge loose, push back in, ok liao"), ("NVLINK_BRIDGE", "NVLINK_ERROR", "RESEAT")),
])
def test_a_part_reported_well_after_the_fix_is_its_result_and_other_voices(raw, ticket, codes_):
    assert codes(raw, *ticket) == codes_


@pytest.mark.parametrize("ticket", [
    ("component=unknown", "event=health_check_failed", "resolution=none"),
    ("", "[WARN] host=n-1100 check=gpu_health status=UNKNOWN", "closed"),
])
def test_a_bare_none_or_unknown_is_no_finding(product, ticket):
    p, s, _ = codes(product, *ticket)
    assert p is None and s is None
