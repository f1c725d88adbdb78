"""Issue 16, fifth round: the obvious cue is the wrong one, as rules, in English and Chinese.

Rules alone (``Matcher.rules_only``: raw scores, no calibration, no second opinion) test what the
rules read: a request is not an action, a replacement that did not help is not the fix, nothing
done to the server is ``NONE``, a reading no sensor gives is ``OTHER``, Chinese measure words.
"""

from __future__ import annotations

import pytest

from pipeline.normalize.canonical import canonical
from pipeline.normalize.matcher import Matcher


@pytest.fixture(scope="module")
def m():
    return Matcher.rules_only()


# -- Chinese replace verbs with a measure word (canonical text drops 了) -----------------------
@pytest.mark.parametrize("part, action, want", [
    ("网卡", "换了一个光模块，链路起来了", "NIC"),
    ("内存", "帮客户换了一根内存B2，备件客户自己寄的", "DIMM"),
    ("", "换了一块主板后正常", "MOTHERBOARD"),
    ("風扇", "換了一個風扇，轉速正常", "FAN"),
    ("電源", "電源1 整個換了", "PSU"),
    ("电源", "电源1整个换了", "PSU"),
])
def test_a_replace_verb_with_a_measure_word_replaces(m, part, action, want):
    c = m.match_row(part, "告警", action)
    assert (c.part_code, c.action_code) == (want, "REPLACE")


# -- a request is not the action ----------------------------------------------------------------
@pytest.mark.parametrize("symptom", [
    'Customer: "GPU 7 at 90C, please replace the GPU"',
    "user says gpu3 fell off, pls replace it",
    "客户来电称 GPU 5 温度过高，要求更换 GPU",
    "客戶要求更換 GPU 5",
    "用户希望换卡",
    "请更换 GPU3",
])
def test_a_requested_replacement_was_not_done(m, symptom):
    ev = m.evidence(canonical(symptom))
    assert ev.actions and not any(done for _, _, _, done, _ in ev.actions)


def test_canonical_keeps_the_words_of_a_request():
    assert canonical("please replace the GPU") == "please replace gpu"
    assert canonical("请更换GPU") == "请更换 gpu"


# -- a replacement that did not help is not the fix (CODING-GUIDE 1, 11) -------------------------
@pytest.mark.parametrize("action, want", [
    ("Eng: we swapped GPU 4 last month; this time the fault stayed with the slot. Replaced the HGX baseboard.",
     "GPU_BASEBOARD"),
    ("GPU 6 replaced; the new GPU dropped too within 2 days; second visit replaced the UBB, stable since",
     "GPU_BASEBOARD"),
    ("上次换过 GPU 4，这次故障跟随槽位，更换 GPU 底板后恢复", "GPU_BASEBOARD"),
    ("replaced the riser, still fell off the bus a day later; replaced the GPU, stable", "GPU"),
    ("先換轉接卡仍然掉卡，最後更換 GPU 後正常", "GPU"),
])
def test_the_later_replacement_after_a_failed_one_is_the_part(m, action, want):
    c = m.match_row("GPU", "Xid 79 fell off the bus", action)
    assert (c.part_code, c.action_code) == (want, "REPLACE")


@pytest.mark.parametrize("action", [
    "replaced GPU 3; later replaced riser 3",
    "更换 GPU3，之后更换转接卡",
])
def test_two_replacements_of_two_parts_with_no_failure_said_go_to_a_person(m, action):
    picked, tags = m.picks("GPU", "Xid 79", action)
    assert "two_parts" in tags["part"]


# -- nothing done to the server: NONE (CODING-GUIDE 3) -------------------------------------------
@pytest.mark.parametrize("symptom, action", [
    ("GPU 7 at 90C, please replace the GPU",
     "Eng: GPU 7 is fine. The blanking panel was missing; DC fitted the panel. No change on the server."),
    ("GPU 5 温度过高降频，要求更换 GPU", "检查 GPU 正常，机位上方缺少盲板，已告知客户机房加装盲板，服务器未做处理"),
    ("4号机训练速度掉了一半，GPU 温度都在 85 度以上", "机房空调坏了一台，物业修好以后温度就下来了，服务器没动"),
    ("8 張卡功耗被限制在 400W", "測試櫃 PDU 只有一路市電，廠務補接第二路後正常，機台未動"),
    ("GPU3 燒機 dmesg 出現 Xid 13", "確認為測試程式版本錯誤，改用正確版本測試程式後 PASS，未換料"),
    ("Xid 31 on GPU 0 during the user's job", "reproduced with their script on a healthy host; no host action"),
])
def test_nothing_done_to_the_server_is_none(m, symptom, action):
    c = m.match_row("GPU", symptom, action)
    assert (c.part_code, c.action_code) == ("NONE", "NONE")


@pytest.mark.parametrize("action, want", [
    ("root cause a PCIe hotplug bug in kernel 6.5; kernel pinned back to 5.15.0-119; no hardware touched", "SOFTWARE"),
    ("We have put back the iLO firmware 1.48, no hardware touched", "SOFTWARE"),
    ("重新插拔卡2后恢复，未换料", "GPU"),
    ("reseated GPU 2, no hardware changed", "GPU"),
])
def test_untouched_hardware_beside_a_fix_keeps_the_fix(m, action, want):
    c = m.match_row("GPU", "Xid 79 fell off the bus", action)
    assert c.part_code == want and c.action_code != "NONE"


# -- a reading no GPU sensor gives is the sensor's fault: OTHER (CODING-GUIDE 10) ----------------
@pytest.mark.parametrize("text", ["GPU temp reads 255 C", "temperature N/A", "Temp: N/A", "GPU3 温度显示 255℃",
                                  "監控顯示 GPU0 溫度 0 度", "gpu2 temp 0C in the BMC"])
def test_canonical_marks_a_bogus_reading(text):
    assert "bogus reading" in canonical(text)
    assert canonical(canonical(text)) == canonical(text)


@pytest.mark.parametrize("text", ["GPU 5 at 92C", "温度 88 度", "HBM 105C", "temp 52C"])
def test_canonical_keeps_a_real_reading(text):
    assert "bogus" not in canonical(text)


@pytest.mark.parametrize("symptom", [
    "tpe1-gpu-105 監控顯示 GPU0 溫度 0 度",
    "GPU 3 temperature reads 255 C in nvidia-smi",
    "GPU temp N/A in DCGM, over-temp alarm",
    "监控显示 GPU2 温度 255℃ 告警",
])
def test_a_bogus_temperature_is_other_not_overheat(m, symptom):
    assert m.match_row("GPU", symptom, "BMC firmware updated").symptom_code == "OTHER"


# -- memory words: 可校正 (Taiwan), 纠错, volatile uncorrectable --------------------------------
@pytest.mark.parametrize("symptom, want", [
    ("燒機 log 顯示 GPU5 記憶體 ECC 可校正錯誤持續增加", "MEMORY_CORRECTABLE"),
    ("系统日志一直刷内存纠错，EDAC报DIMM_B2", "MEMORY_CORRECTABLE"),
    ("nvidia-smi 裡 volatile uncorrectable 有計數", "MEMORY_UNCORRECTABLE"),
    ("volatile uncorrectable count 2 on GPU 5", "MEMORY_UNCORRECTABLE"),
])
def test_memory_words(m, symptom, want):
    assert m.match_row("", symptom, "").symptom_code == want


# -- a version changed back is a reflash ---------------------------------------------------------
@pytest.mark.parametrize("action", ["kernel pinned back to 5.15.0-119", "We have put back the iLO firmware 1.48",
                                    "reverted the driver to 535", "driver pinned to 535.183"])
def test_a_version_put_back_is_a_reflash(m, action):
    assert m.match_row("", "Xid 79", action).action_code == "REFLASH"


# -- done at the customer's request is done; below a threshold nothing is -----------------------
@pytest.mark.parametrize("part, action, want", [
    ("显卡", "按客户要求整机断电，拔电源线等一分钟再上电，卡4回来了", "REBOOT"),
    ("显卡", "按客户要求把卡6拔出来重新插了一下，开机正常", "RESEAT"),
    ("GPU", "GPU 2 was exchanged according to the customer's request.", "REPLACE"),
    ("GPU", "GPU 2 swapped as requested", "REPLACE"),
])
def test_an_action_done_at_the_customers_request_was_done(m, part, action, want):
    c = m.match_row(part, "Xid 79", action)
    assert c.action_code == want and c.part_code == "GPU"  # the power cords pulled in a power cycle are no part


@pytest.mark.parametrize("symptom, action", [
    ("卡2 显存可纠正错误计数持续增长，无不可纠正", "未达换卡阈值，持续观察"),
    ("GPU 3 可更正ECC錯誤數不斷上升", "未到更換標準，繼續觀察。"),
    ("Single bit ECC errors are increasing on GPU 6", "It is below the exchange criteria of the vendor. We will observe it weekly."),
])
def test_below_the_replacement_threshold_is_monitoring(m, symptom, action):
    assert m.match_row("", symptom, action).action_code == "MONITOR"


@pytest.mark.parametrize("part, action, want", [
    ("GPU", "现场检查发现是 PCIe Switch 板有问题，换了 switch 板", ("PCIE_RISER", "REPLACE")),
    ("顯示卡", "發現機箱內導風罩漏裝，補裝導風罩後 74°C", ("COOLING", "REPLACE")),
    ("4號風扇", "之後拆出4號風扇清咗啲塵，再開機就正常", ("FAN", "CLEAN")),
    ("ventilateur 3", "Ventilator 3 replaced", ("FAN", "REPLACE")),
    ("alimentation", "Alimentation 2 replaced", ("PSU", "REPLACE")),
    ("GPU", "驱动从 550 降回 535 之后速度恢复了", ("SOFTWARE", "REFLASH")),
])
def test_more_words_of_real_tickets(m, part, action, want):
    c = m.match_row(part, "告警 alarm", action)
    assert (c.part_code, c.action_code) == want


@pytest.mark.parametrize("action", ["远程指导客户重置 GPU 7，pending 清零", "gpu reset, pending 归零"])
def test_a_reset_that_zeroed_pending_was_done(m, action):
    assert m.match_row("GPU", "Xid 63 pending remap", action).action_code == "REBOOT"


# -- the shield gives way to an opinion beyond doubt ---------------------------------------------
def test_the_shield_gives_way_to_an_opinion_beyond_doubt():
    from pipeline.normalize.prior import OUTVOTES, shield
    from pipeline.normalize.taxonomy import load_taxonomy

    args = dict(action="REPLACE", prior_code="PCIE_RISER", named=frozenset({"GPU"}), guide=load_taxonomy().guide, share=0.0)
    assert shield("part", "GPU", "acted", **args, p=0.5) == 0.0  # "GPU board" | "swap": the replacement's part
    assert shield("part", "GPU", "acted", **args, p=OUTVOTES) == 1.0  # "rier card" | "RMA": a riser misspelt
    assert shield("part", "GPU", "acted", **{**args, "prior_code": "GPU"}, p=0.99) == 0.0  # agreeing
