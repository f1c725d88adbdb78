"""Issue 16, third round: the second holdout's error classes as rules, and the second opinion.

Each rule is checked with phrasings in English and Chinese (simplified, traditional or
Cantonese) written for this test, not copied from the corpus.
"""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.errors import ConfigError
from pipeline.normalize.canonical import canonical
from pipeline.normalize.matcher import Matcher
from pipeline.normalize.prior import UNDECIDED, doubt, fit
from tests.test_coding_guide import codes, m  # noqa: F401  (m: the rules alone, a fixture)


# -- a device outside the GPU's path has OTHER for its symptom (part_symptoms, rule 10) ----
@pytest.mark.parametrize("ticket", [
    ("HCA", "mlx5_2 not detected in lspci after reboot", "swapped the HCA in slot 2"),
    ("NVMe SSD", "drive hung, controller not responding", "replaced the drive"),
    ("SSD", "SSD overheating, then not detected", "replaced SSD"),
    ("网卡", "网卡识别不到，link down", "更换网卡"),
    ("硬碟", "硬碟掉線 過熱", "更換硬碟"),
])
def test_a_device_outside_the_gpus_path_has_other_for_its_symptom(m, ticket):
    # "not detected", "hung", "overheating" name the GPU's codes; on these parts they are OTHER
    assert codes(m, *ticket)[1] == "OTHER"


@pytest.mark.parametrize("ticket, symptom", [
    (("DIMM", "uncorrectable ECC on DIMM_A1, EDAC", "replaced DIMM_A1"), "MEMORY_UNCORRECTABLE"),
    (("内存", "内存可纠正错误持续增长", "更换内存条"), "MEMORY_CORRECTABLE"),
    (("IB card", "training 30% slower than the other nodes", "replaced the IB card"), "PERFORMANCE"),
])
def test_what_the_part_can_have_stays(m, ticket, symptom):
    assert codes(m, *ticket)[1] == symptom


def test_part_symptoms_is_checked_against_the_codes(tmp_path):
    from pipeline.normalize.taxonomy import load_taxonomy

    extra = tmp_path / "extra.yaml"
    extra.write_text("part_symptoms:\n  NIC: [NOT_A_SYMPTOM]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="part_symptoms.NIC"):
        load_taxonomy(None, extra)


# -- "reinstalled" beside software is a reinstall of the driver (REFLASH) --------------------
@pytest.mark.parametrize("ticket", [
    ("", "driver/library version mismatch after the image rollout", "reinstalled 550.127.05 and rebooted"),
    ("", "NVRM: API mismatch between client and kernel module", "reinstalled the kmod + userspace, reboot"),
    ("驱动", "nvidia-smi 报 driver/library version mismatch", "重新安装驱动并重启"),
    ("驅動", "驅動程式版本不符", "重新安裝驅動程式後正常"),
])
def test_a_reinstall_beside_software_is_a_reflash(m, ticket):
    assert codes(m, *ticket)[2] == "REFLASH"


@pytest.mark.parametrize("ticket", [
    ("GPU", "GPU 3 fell off the bus", "reinstalled the GPU in its slot"),
    ("GPU", "3号卡掉卡", "重新安装 GPU 卡后恢复"),
])
def test_a_reinstalled_card_is_still_a_reseat(m, ticket):
    assert codes(m, *ticket)[2] == "RESEAT"


# -- a slowdown told with no thermal cause is PERFORMANCE (rule 8) -------------------------
@pytest.mark.parametrize("ticket", [
    ("GPU", "GPU 5 25% slower in HPL, no throttle reasons, temps fine", "replaced GPU 5"),
    ("GPU", "5号卡比其他卡慢两成，无降频，温度正常", "更换5号卡后恢复"),
    ("GPU", "5號卡效能比其他卡低，無降頻", "更換5號卡"),
])
def test_a_slowdown_with_no_thermal_cause_is_performance(m, ticket):
    assert codes(m, *ticket)[1] == "PERFORMANCE"


@pytest.mark.parametrize("ticket", [
    ("GPU", "GPU 温度正常，但 HBM 温度 96 度", "更换冷板"),
    ("", "gpu_temp fine but memory_temp 97C", "cold plate replaced"),
])
def test_fine_temperatures_beside_another_hot_reading_stay_heat(m, ticket):
    assert codes(m, *ticket)[1] == "OVERHEAT"


# -- routine checks and a scheduler's own doing are no fault (rule 3) ----------------------
@pytest.mark.parametrize("ticket", [
    ("GPU", "Routine check finished, all GPUs healthy", "No action required"),
    ("GPU", "【巡检】设备运行正常，无告警", "无"),
    ("GPU", "Xid 45 on every rank, jobs killed", "slurm preempted them, expected, no action"),
    ("GPU", "Xid 45 好多，job 俾人 kill 咗", "係 scheduler preempt，唔使處理"),
])
def test_routine_checks_and_preemption_are_no_fault(m, ticket):
    assert codes(m, *ticket)[0] == "NONE"


@pytest.mark.parametrize("ticket", [
    ("GPU", "调度报 2号卡丢失", "到现场 8 卡都在，dcgmi diag 通过，未发现异常，恢复业务"),
    ("GPU", "scheduler says g2 missing", "all 8 there, diag pass, no fault found, back in pool"),
])
def test_a_verdict_then_back_in_service_is_no_fault_monitored(m, ticket):
    assert codes(m, *ticket)[0] == "NONE" and codes(m, *ticket)[2] == "MONITOR"


@pytest.mark.parametrize("ticket", [
    ("GPU", "Xid 119 GSP timeout on GPU 1", "驱动从 535 升级到 550 后恢复，未更换硬件"),
    ("GPU", "GSP 逾時", "驅動版本由 535 升級至 550"),
])
def test_a_driver_version_bump_written_from_to_is_software(m, ticket):
    assert codes(m, *ticket)[0] == "SOFTWARE" and codes(m, *ticket)[2] == "REFLASH"


# -- the second opinion -------------------------------------------------------------------
def test_doubt_points():
    assert doubt("GPU", None, 0.0, 0.0, 40, 40, 60) == 0.0  # no opinion
    assert doubt("GPU", "PCIE_RISER", 0.9, 0.0, 40, 40, 60) == 40  # another code
    assert doubt("GPU", UNDECIDED, 0.6, 0.6, 40, 40, 60) == 40  # "a person could not decide"
    assert doubt("GPU", "GPU", 0.95, 0.0, 40, 40, 60) == 0.0  # sure agreement
    weak = doubt("GPU", "GPU", 0.4, 0.0, 40, 40, 60)
    assert 0 < weak < doubt("GPU", "GPU", 0.4, 0.3, 40, 40, 60)


@pytest.fixture(scope="module")
def tiny_prior():
    """A second opinion fitted on a few examples: it has only seen risers replaced."""
    rows = [("GPU", f"GPU {i} fell off the bus", f"replaced riser {i}", "PCIE_RISER", "FELL_OFF_BUS", "REPLACE")
            for i in range(8)]
    rows += [("GPU", f"卡{i}掉卡", f"更换转接卡{i}", "PCIE_RISER", "FELL_OFF_BUS", "REPLACE") for i in range(8)]
    rows += [("PSU", f"PSU {i} failed", f"swapped PSU {i}", "PSU", "POWER_FAULT", "REPLACE") for i in range(8)]
    rows += [("PSU", f"PSU {i} failed", f"reseated PSU {i}", "PSU", "POWER_FAULT", "RESEAT") for i in range(8)]
    ex = pl.DataFrame(rows, schema=["part_text", "symptom_text", "action_text", "part_code", "symptom_code",
                                    "action_code"], orient="row")
    return fit(ex, canonical)


def test_a_code_the_second_opinion_disagrees_with_loses_points(tiny_prior):
    from pipeline.normalize.calibrate import Calibration
    from pipeline.normalize.taxonomy import load_taxonomy

    alone = Matcher(load_taxonomy(), 0.0, calibration=Calibration())
    doubted = Matcher(load_taxonomy(), 0.0, calibration=Calibration(), prior=tiny_prior)
    ticket = ("GPU", "GPU 3 fell off the bus", "reseated GPU 3")  # the rules: GPU; the opinion: a riser
    assert alone.match_row(*ticket).part_code == doubted.match_row(*ticket).part_code == "GPU"
    assert doubted.match_row(*ticket).part_score <= alone.match_row(*ticket).part_score - 40
    frame = pl.DataFrame({"part_text": [ticket[0]], "symptom_text": [ticket[1]], "action_text": [ticket[2]]})
    assert doubted.code_frame(frame).equals(doubted.code_rows(frame))


def test_a_reviewed_answer_is_not_second_guessed(tiny_prior):
    from pipeline.normalize.calibrate import Calibration
    from pipeline.normalize.taxonomy import load_taxonomy

    mm = Matcher(load_taxonomy(), 0.0, [("part", "the shiny box", "FAN")], Calibration(), prior=tiny_prior)
    assert mm.match_row("the shiny box", None, None).part_score == 100.0

# ruff: noqa: F811  (m, the rules-alone fixture, is imported from test_coding_guide)
