"""Whole tickets as technicians write them outside the simulator: kernel lines pasted in,
nvidia-smi messages, traditional Chinese, sensor names, mixed languages."""

from __future__ import annotations

import pytest

from pipeline.normalize.matcher import Matcher

CASES = [
    (("GPU", "nvidia-smi has failed because it couldn't communicate with the NVIDIA driver", "reinstalled driver 535.129.03"), ("SOFTWARE", "DRIVER_ISSUE", "REFLASH")),
    (("", "[Tue Mar  5 10:11:12 2025] NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", "RMA'd, replacement installed"), ("GPU", "FELL_OFF_BUS", "REPLACE")),
    (("8卡机器", "nvidia-smi 少一张卡，lspci看不到", "重新插拔GPU后恢复"), ("GPU", "FELL_OFF_BUS", "RESEAT")),
    (("电源", "电源黄灯告警，冗余丢失", "更换电源模块"), ("PSU", "POWER_FAULT", "REPLACE")),
    (("HGX board", "SXid 20034 NVSwitch fatal error, NVLink down on all GPUs", "replaced baseboard assembly"), ("GPU_BASEBOARD", "NVLINK_ERROR", "REPLACE")),
    (("Fan Module 3", "FAN3 speed 0 RPM, critical", "swapped fan module"), ("FAN", "FAN_FAULT", "REPLACE")),
    (("顯示卡", "顯卡溫度過高，降頻", "清潔灰塵，改善風道"), ("GPU", "OVERHEAT", "CLEAN")),
    (("DIMM", "Uncorrectable ECC error on DIMM A1", "replaced DIMM A1"), ("DIMM", "MEMORY_UNCORRECTABLE", "REPLACE")),
    (("riser", "GPU link degraded to x8 Gen3 after maintenance", "reseated riser cable"), ("PCIE_RISER", "PCIE_ERROR", "RESEAT")),
    (("N/A", "Customer reported job slowness, DCGM diag passed, could not reproduce", "closed - NFF"), ("NONE", "PERFORMANCE", "NONE")),
    (("GPU3", "Xid 48 DBE, pending row remap", "GPU reset via nvidia-smi -r, row remap completed, monitoring"), ("GPU", "MEMORY_UNCORRECTABLE", "REBOOT")),
    (("NVLink bridge", "nvlink errors between GPU0 and GPU1, P2P bandwidth low", "reseated NVLink bridge"), ("NVLINK_BRIDGE", "NVLINK_ERROR", "RESEAT")),
    (("液冷板", "冷板漏液，GPU温度告警", "更换冷板"), ("COOLING", "PHYSICAL_DAMAGE", "REPLACE")),
    (("IB卡", "IB网卡掉线，链路down", "更换光模块"), ("NIC", "OTHER", "REPLACE")),
    (("系统", "驱动版本不匹配 Driver/library version mismatch", "升级驱动到550"), ("SOFTWARE", "DRIVER_ISSUE", "REFLASH")),
    (("GPU", "GSP固件超时 Xid 119", "重启后恢复"), ("GPU", "GSP_ERROR", "REBOOT")),
    (("主板", "服务器无法开机，不过POST", "更换主板"), ("MOTHERBOARD", "BOOT_FAILURE", "REPLACE")),
    (("gpu", "burn mark on 12VHPWR connector, smell of burning", "card RMA"), ("GPU", "PHYSICAL_DAMAGE", "REPLACE")),
]


@pytest.fixture(scope="module")
def m() -> Matcher:
    """The rules' picks before calibration and threshold: these tests are about reading the
    language; whether a code is sure enough to write is the calibration's (bench/RESULTS.md)."""
    from pipeline.normalize.calibrate import Calibration
    from pipeline.normalize.taxonomy import load_taxonomy

    return Matcher(load_taxonomy(), 0.0, calibration=Calibration())


@pytest.mark.parametrize("texts, codes", CASES, ids=[c[0][1][:30] for c in CASES])
def test_real_ticket(m, texts, codes):
    c = m.match_row(*texts)
    assert (c.part_code, c.symptom_code, c.action_code) == codes
    assert not c.review
