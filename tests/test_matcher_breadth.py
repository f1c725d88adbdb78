"""The language of real tickets (issue 16 item 3): OEM part numbers and names, Xid spellings,
quoted nvidia-smi / NVML / dmesg / ipmitool messages, Cantonese, German- and Singapore-English,
Slack shorthand, full-width characters, glued words. Written for these tests from knowledge of
how such tickets read, not from the simulator's vocabulary."""

from __future__ import annotations

import pytest

from pipeline.normalize.matcher import Matcher


@pytest.fixture(scope="module")
def m() -> Matcher:
    """The rules' picks before calibration and threshold: these tests are about reading the
    language; whether a code is sure enough to write is the calibration's (bench/RESULTS.md)."""
    from pipeline.normalize.calibrate import Calibration
    from pipeline.normalize.taxonomy import load_taxonomy

    return Matcher(load_taxonomy(), 0.0, calibration=Calibration())


@pytest.mark.parametrize("ticket, codes", [
    # OEM part numbers: the prefix names the part
    (("PWS-2K04A-1R", "PSU1 failure detected", "PWS-2K04A-1R replaced"), ("PSU", "POWER_FAULT", "REPLACE")),
    (("GPU", "GPU 4 link width x8", "RSC-G2FR-A66 riser swapped"), ("PCIE_RISER", "PCIE_ERROR", "REPLACE")),
    (("HGX", "SXid 20034 on all NVSwitches", "935-24287-0000-000 baseboard replaced"), ("GPU_BASEBOARD", "NVLINK_ERROR", "REPLACE")),
    (("GPU", "GPU3 12VHPWR melted", "CBL-PWEX-1040 replaced, GPU3 inspected OK"), ("CABLE", "PHYSICAL_DAMAGE", "REPLACE")),
    # quoted tool output
    (("", 'nvidia-smi: "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"', "reseated GPU"),
     ("GPU", "FELL_OFF_BUS", "RESEAT")),
    (("", "Failed to initialize NVML: Driver/library version mismatch", "reinstalled nvidia-driver-550"),
     ("SOFTWARE", "DRIVER_ISSUE", "REFLASH")),
    (("GPU", "nvidia-smi -q: Volatile Uncorr. ECC 4, Remapped Rows Pending: Yes", "GPU reset"), ("GPU", "MEMORY_UNCORRECTABLE", "REBOOT")),
    (("Fan", "ipmitool sel: Fan3 | Lower Critical going low", "fan 3 swapped"), ("FAN", "FAN_FAULT", "REPLACE")),
    # Xid spellings
    (("GPU", "XID_48", "RMA"), ("GPU", "MEMORY_UNCORRECTABLE", "REPLACE")),
    (("GPU", "xid#79", "RMA"), ("GPU", "FELL_OFF_BUS", "REPLACE")),
    (("GPU", "ＸＩＤ　７９", "RMA"), ("GPU", "FELL_OFF_BUS", "REPLACE")),
    (("GPU", "Xids 74 on GPU 2", "RMA"), ("GPU", "NVLINK_ERROR", "REPLACE")),
    # Cantonese and traditional Chinese
    (("部機", "GPU3 唔見咗，Xid 79", "插返張卡就搞掂"), ("GPU", "FELL_OFF_BUS", "RESEAT")),
    (("電源", "PDU 跳掣", "機房搞掂，部機冇做嘢"), ("NONE", "POWER_FAULT", None)),
    (("風扇", "風扇唔轉", "換咗風扇"), ("FAN", "FAN_FAULT", "REPLACE")),
    # German- and Singapore-English
    (("Netzteil", "Netzteil ausgefallen", "Netzteil getauscht"), ("PSU", "POWER_FAULT", "REPLACE")),
    (("Lüfter 3", "Lüfterausfall", "Lüfter neu gesteckt"), ("FAN", "FAN_FAULT", "RESEAT")),
    (("GPU", "GPU 2 cannot detect already, Xid 79", "kindly do the needful, GPU replaced"), ("GPU", "FELL_OFF_BUS", "REPLACE")),
    # Slack shorthand, glued words, typos
    (("", "g3 xid79 again", "swappedriser, stable"), ("PCIE_RISER", "FELL_OFF_BUS", "REPLACE")),
    (("", "g5 dbe", "replcaed g5"), ("GPU", "MEMORY_UNCORRECTABLE", "REPLACE")),
    (("", "psu2 dead", "psu2 swapped"), ("PSU", None, "REPLACE")),
])
def test_real_ticket_language(m, ticket, codes):
    c = m.match_row(*ticket)
    got = (c.part_code, c.symptom_code, c.action_code)
    assert all(want is None or g == want for g, want in zip(got, codes)), got
