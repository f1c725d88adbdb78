"""Every rule of ../shared/CODING-GUIDE.md, each in several phrasings: English, simplified and
traditional Chinese, mixed. The phrasings are written here for these tests, not taken from the
simulator's vocabulary; a rule's number in the guide is in the test's name."""

from __future__ import annotations

import pytest

from pipeline.normalize.matcher import Matcher


@pytest.fixture(scope="module")
def m() -> Matcher:
    return Matcher.rules_only()


def codes(m, part, symptom, action):
    c = m.match_row(part, symptom, action)
    return c.part_code, c.symptom_code, c.action_code


# -- rule 1: the replaced part beats the named part ------------------------------------------
@pytest.mark.parametrize("ticket, part", [
    (("GPU 3", "GPU 3 fell off the bus", "swapped the riser card"), "PCIE_RISER"),
    (("GPU", "NVLink errors on all 8 GPUs", "replaced the HGX baseboard"), "GPU_BASEBOARD"),
    (("GPU 5", "ECC errors on GPU 5", "changed the DIMM in slot B2"), "DIMM"),
    (("GPU", "Xid 79", "riser card replaced, burn-in passed"), "PCIE_RISER"),
    (("显卡", "掉卡", "更换转接卡后恢复"), "PCIE_RISER"),
    (("GPU", "NVLink报错", "更换了HGX基板"), "GPU_BASEBOARD"),
    (("顯卡", "掉卡", "已更換轉接卡"), "PCIE_RISER"),
    (("GPU", "GPU温度高", "风扇模组已更换"), "FAN"),
    (("GPU 2", "GPU 2 link width x8", "PCIe retimer card swapped with spare"), "PCIE_RISER"),
    (("顯卡", "顯卡溫度過高", "更換電源風扇"), "PSU"),
])
def test_rule1_replaced_part_beats_named_part(m, ticket, part):
    assert codes(m, *ticket)[0] == part
    assert codes(m, *ticket)[2] == "REPLACE"


def test_rule1_replace_without_a_part_keeps_the_named_part(m):
    assert codes(m, "PSU 2", "PSU failure", "replaced")[0] == "PSU"
    assert codes(m, "电源", "电源故障", "已更换")[0] == "PSU"


def test_rule1_one_description_column(m):
    t = "GPU3 fell off the bus; swapped the riser card, OK now"
    assert codes(m, t, t, t) == ("PCIE_RISER", "FELL_OFF_BUS", "REPLACE")


# -- rule 2: a software fix with nothing replaced is SOFTWARE --------------------------------
@pytest.mark.parametrize("ticket", [
    ("GPU", "Xid 119 GSP timeout", "upgraded driver to 550.90.07"),
    ("GPU", "GSP报错", "升级驱动后恢复"),
    ("GPU", "NVLink training failure", "flashed VBIOS 96.00.89.00.01"),
    ("BMC", "BMC web UI not loading", "updated BMC firmware"),
    ("主機板", "開機卡住", "更新BIOS韌體"),
    ("显卡", "驱动版本不匹配", "重装驱动"),
    ("NVSwitch", "SXid 12028", "NVSwitch firmware upgrade, fabric manager restarted"),
])
def test_rule2_software_fix_is_software(m, ticket):
    assert codes(m, *ticket)[0] == "SOFTWARE"
    assert codes(m, *ticket)[2] == "REFLASH"


def test_rule2_bmc_reset_or_replaced_stays_bmc(m):
    assert codes(m, "BMC", "BMC hung", "BMC cold reset")[0] == "BMC"
    assert codes(m, "BMC", "BMC dead", "replaced BMC module")[0] == "BMC"
    assert codes(m, "带外", "带外管理无响应", "BMC冷重启")[0] == "BMC"


def test_rule2_replacement_beats_firmware(m):
    assert codes(m, "GPU", "Xid 79", "updated VBIOS, then replaced the GPU")[0] == "GPU"


# -- rule 3: no fault found, false alarm, the user's own job, a cause outside: NONE ----------
@pytest.mark.parametrize("ticket, symptom", [
    (("GPU", "job slow", "no fault found, returned to service"), "PERFORMANCE"),
    (("GPU 2", "Xid 13 on GPU 2", "traced to user's job, no action"), "APP_FAULT"),
    (("电源", "掉电", "机房PDU跳闸, 非服务器故障"), "POWER_FAULT"),
    (("显卡", "ECC告警", "误报, 复测正常"), None),
    (("顯卡", "掉卡", "複測正常，無故障"), "FELL_OFF_BUS"),
    (("GPU", "GPU hang reported", "NFF, could not reproduce"), "HANG"),
    (("GPU", "Xid 31 MMU fault", "customer code bug, closed"), "APP_FAULT"),
])
def test_rule3_no_fault_is_none(m, ticket, symptom):
    p, s, _ = codes(m, *ticket)
    assert p == "NONE"
    if symptom:
        assert s == symptom  # a no-fault ticket keeps the symptom that was reported


# -- rule 4: otherwise the part at fault: the one reseated, reset, cleaned -------------------
@pytest.mark.parametrize("ticket, part, action", [
    (("GPU", "GPU link width x8", "reseated the riser"), "PCIE_RISER", "RESEAT"),
    (("GPU", "GPU temperature high", "cleaned the heatsink"), "COOLING", "CLEAN"),
    (("显卡", "PCIe降速", "转接卡重新插拔后恢复"), "PCIE_RISER", "RESEAT"),
    (("GPU", "Xid 79", "reseated GPU"), "GPU", "RESEAT"),
    (("顯卡", "溫度過高", "清潔散熱器灰塵"), "COOLING", "CLEAN"),
    (("NIC", "IB link flapping", "reseated the QSFP cable"), "CABLE", "RESEAT"),
])
def test_rule4_part_acted_on(m, ticket, part, action):
    p, _, a = codes(m, *ticket)
    assert (p, a) == (part, action)


# -- rule 5: vocabulary traps ------------------------------------------------------------------
@pytest.mark.parametrize("text, part", [
    ("HBM3 stack", "GPU"), ("显存", "GPU"), ("顯存", "GPU"), ("memory on GPU 4", "GPU"), ("framebuffer", "GPU"),
    ("内存条", "DIMM"), ("記憶體", "DIMM"), ("host RAM", "DIMM"), ("EDAC", "DIMM"), ("DDR5 RDIMM", "DIMM"),
    ("电源风扇", "PSU"), ("PSU fan", "PSU"), ("電源風扇", "PSU"),
    ("chassis fan", "FAN"), ("系统风扇", "FAN"), ("系統風扇", "FAN"),
    ("2-slot NVLink bridge", "NVLINK_BRIDGE"), ("NVLink橋接器", "NVLINK_BRIDGE"),
    ("NVSwitch tray", "NVSWITCH"), ("NVSwitch board", "NVSWITCH"), ("交换芯片", "NVSWITCH"),
    ("retimer", "PCIE_RISER"), ("PCIe switch board", "PCIE_RISER"), ("轉接卡", "PCIE_RISER"),
    ("cold plate", "COOLING"), ("thermal paste", "COOLING"), ("冷板", "COOLING"), ("液冷泵", "COOLING"),
    ("optical module", "NIC"), ("HCA", "NIC"), ("光模块", "NIC"), ("光模組", "NIC"),
])
def test_rule5_vocabulary_traps(m, text, part):
    assert m.match_row(text, None, None).part_code == part


# -- rule 6: the leading reported observation --------------------------------------------------
@pytest.mark.parametrize("ticket, symptom, part", [
    (("GPU", "GPUs running hot, one chassis fan stuck", "replaced the fan"), "OVERHEAT", "FAN"),
    (("PSU", "PSU fan locked", "replaced PSU"), "FAN_FAULT", "PSU"),
    (("GPU", "GPU温度过高, 检查发现风扇不转", "更换风扇"), "OVERHEAT", "FAN"),
    (("GPU", "風扇故障導致GPU過熱", "更換風扇"), "OVERHEAT", "FAN"),
    (("GPU", "GPU overheating due to a failed fan", "fan swapped"), "OVERHEAT", "FAN"),
])
def test_rule6_leading_observation(m, ticket, symptom, part):
    p, s, _ = codes(m, *ticket)
    assert (s, p) == (symptom, part)


# -- rule 7: memory, strongest first -------------------------------------------------------------
@pytest.mark.parametrize("text, symptom", [
    ("Xid 48 DBE, then Xid 64 row remapping failure", "ROW_REMAP"),
    ("SBE count high and one DBE", "MEMORY_UNCORRECTABLE"),
    ("uncorrectable ECC, then row remap pending", "MEMORY_UNCORRECTABLE"), ("uncorrectable ECC, then row remapping failure", "ROW_REMAP"),
    ("显存单比特错误很多, 出现一次双比特错误", "MEMORY_UNCORRECTABLE"),
    ("可糾正錯誤過多，並有不可糾正錯誤", "MEMORY_UNCORRECTABLE"),
    ("retired pages at the limit", "ROW_REMAP"),
    ("Xid 63", "ROW_REMAP"), ("Xid 94", "MEMORY_UNCORRECTABLE"), ("Xid 95", "MEMORY_UNCORRECTABLE"),
    ("Xid 140", "MEMORY_UNCORRECTABLE"), ("Xid 92", "MEMORY_CORRECTABLE"), ("correctable ECC count 4k", "MEMORY_CORRECTABLE"),
    ("行重映射失败, 伴随ECC不可纠正", "ROW_REMAP"),
])
def test_rule7_memory_precedence(m, text, symptom):
    assert m.match_text("symptom", text).code == symptom


# -- rule 8: slowdowns ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, symptom", [
    ("training slow, HW thermal slowdown active", "OVERHEAT"),
    ("job slow, power brake slowdown asserted", "POWER_FAULT"),
    ("训练变慢, GPU过热降频", "OVERHEAT"),
    ("效能下降，溫度過高", "OVERHEAT"),
    ("NCCL bus bandwidth low", "PERFORMANCE"),
    ("训练速度下降", "PERFORMANCE"),
])
def test_rule8_slowdowns(m, text, symptom):
    assert m.match_text("symptom", text).code == symptom


# -- rule 9: Xids by their documented meaning ----------------------------------------------------
@pytest.mark.parametrize("text, symptom", [
    ("XID-79", "FELL_OFF_BUS"), ("xid:79", "FELL_OFF_BUS"), ("报Xid 79", "FELL_OFF_BUS"), ("GPU has fallen off the bus", "FELL_OFF_BUS"),
    ("Xid 74", "NVLINK_ERROR"), ("SXid 20034", "NVLINK_ERROR"), ("出現Xid74", "NVLINK_ERROR"),
    ("Xid 119", "GSP_ERROR"), ("XID 120", "GSP_ERROR"),
    ("Xid 8", "HANG"), ("Xid 109", "HANG"), ("nvidia-smi timed out", "HANG"),
    ("Xid 13", "APP_FAULT"), ("Xid 31", "APP_FAULT"), ("Xid 43", "APP_FAULT"), ("Xid 45", "APP_FAULT"),
])
def test_rule9_xids(m, text, symptom):
    assert m.match_text("symptom", text).code == symptom


# -- rule 10: what the taxonomy has no code for is OTHER ----------------------------------------
@pytest.mark.parametrize("text", [
    "network link down", "IB port flapping", "disk SMART failure", "RAID degraded", "CPU machine check exception",
    "BMC unreachable", "InfoROM corrupted", "status LED blinking amber on the front panel", "silent wrong results",
    "preventive replacement", "routine inspection",
    "网卡链路抖动", "硬盘SMART告警", "CPU MCE报错", "BMC无法访问", "InfoROM损坏", "例行巡检", "预防性更换",
    "硬碟故障", "網路斷線",
])
def test_rule10_other(m, text):
    assert m.match_text("symptom", text).code == "OTHER"


# -- rule 11: the strongest action -------------------------------------------------------------
@pytest.mark.parametrize("text, action", [
    ("rebooted, then reseated the card", "RESEAT"),
    ("reseated first, still failing, replaced", "REPLACE"),
    ("updated driver and cleaned dust", "REFLASH"),
    ("重启后继续观察", "REBOOT"),
    ("清灰并重启", "CLEAN"),
    ("重新插拔無效，已更換", "REPLACE"),
])
def test_rule11_strongest_action(m, text, action):
    assert m.match_row("GPU", "Xid 79", text).action_code == action


# -- rule 12: action phrasings; a reboot told as history is not the action -----------------------
@pytest.mark.parametrize("text, action", [
    ("RMA", "REPLACE"), ("返厂", "REPLACE"), ("swapped with a spare", "REPLACE"), ("exchanged", "REPLACE"),
    ("change new", "REPLACE"), ("re-applied thermal paste", "REPLACE"), ("fitted the missing baffle", "REPLACE"),
    ("new seated", "RESEAT"), ("重新插拔", "RESEAT"), ("re-plugged the power cable", "RESEAT"),
    ("BMC cold reset", "REBOOT"), ("power cycled the node", "REBOOT"), ("nvidia-smi -r", "REBOOT"),
    ("driver downgrade to 535", "REFLASH"), ("flashed VBIOS", "REFLASH"), ("刷固件", "REFLASH"), ("更新韌體", "REFLASH"),
])
def test_rule12_action_phrasings(m, text, action):
    assert m.match_row(None, None, text).action_code == action


@pytest.mark.parametrize("symptom", [
    "rebooted twice, still falls off the bus",
    "GPU missing again after reboot",
    "重启后仍然掉卡",
    "重開機後依舊掉卡",
    "already power cycled, did not help, Xid 79",
])
def test_rule12_reboot_as_history_is_not_the_action(m, symptom):
    assert m.match_row("GPU", symptom, None).action_code is None


@pytest.mark.parametrize("symptom", ["掉卡, 重启后恢复", "Xid 79, rebooted and it recovered", "掉卡，重開機後恢復"])
def test_rule12_a_reboot_that_resolved_is_the_action(m, symptom):
    assert m.match_row("GPU", symptom, None).action_code == "REBOOT"


# -- rule 13: a part ordered but not fitted is not a replacement ---------------------------------
@pytest.mark.parametrize("text", [
    "replacement GPU ordered, awaiting parts", "need to RMA the card", "RMA pending", "待更换显卡", "已申请备件, 待更换",
    "建議更換", "will replace PSU next maintenance window",
])
def test_rule13_not_yet_replaced(m, text):
    assert m.match_row("GPU", "Xid 79", text).action_code != "REPLACE"


def test_rule13_what_was_done_so_far(m):
    assert m.match_row("PSU", "PSU failure", "reseated PSU; new PSU ordered").action_code == "RESEAT"
    assert m.match_row("GPU", "掉卡", "重新插拔，备件待更换").action_code == "RESEAT"


# -- scores: conflicting cues lower them (issue 16, item 2) ---------------------------------------
def test_a_replaced_part_other_than_the_named_one_lowers_the_part_score(m):
    plain = m.match_row("riser", "Xid 79", "replaced riser").part_score
    conflict = m.match_row("GPU", "Xid 79", "replaced riser").part_score
    assert conflict < plain


def test_negation_lowers_the_score(m):
    plain = m.match_row("GPU", "GPU lost after maintenance", "RMA").symptom_score
    assert m.match_row("GPU", "GPU lost, no ECC errors", "RMA").symptom_score < plain
    assert m.match_row("GPU", "GPU lost, not the riser", "RMA").symptom_score < plain
    assert m.match_row("GPU", "掉卡, 未发现异常", "RMA").part_score < m.match_row("GPU", "掉卡", "RMA").part_score


def test_two_parts_named_without_an_action_on_one_lower_the_score(m):
    assert m.match_row("GPU / PSU", "Xid 79", "checked").part_score < m.match_row("PSU", "Xid 79", "checked").part_score


@pytest.mark.parametrize("symptom", ["broken", "pls check", "有问题", "有問題", "not working"])
def test_vague_entries_are_not_coded(m, symptom):
    assert m.match_row("GPU", symptom, "RMA").symptom_code is None
