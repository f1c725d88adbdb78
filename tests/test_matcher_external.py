"""The matcher on real fault labels: the InfiniteHBD GPU-cluster fault trace (StepFun,
SIGCOMM 2025), whose Class and Desc fields are what an operations team wrote."""

from __future__ import annotations

import json

import pytest

from pipeline.normalize.matcher import Matcher

EXPECTED = {  # (Class, Desc) -> (part_code, symptom_code); None: left to review
    ("GPU", "GPU DBE(Double Bit ECC) > Threshold"): ("GPU", "MEMORY_UNCORRECTABLE"),
    ("GPU", "GPU SBE(Single Bit ECC) > Threshold"): ("GPU", "MEMORY_CORRECTABLE"),
    ("GPU", "GPU Temperature High"): ("GPU", "OVERHEAT"),
    ("GPU", "GPU Lost"): ("GPU", "FELL_OFF_BUS"),
    ("GPU", "GPU device not found"): ("GPU", "FELL_OFF_BUS"),
    ("GPU", "GPU PCI link width low"): ("GPU", "PCIE_ERROR"),
    ("GPU", "nvidia-smi Timeout"): ("GPU", "HANG"),
    ("GPU", "GPU P2P Bandwidth Low"): ("GPU", "PERFORMANCE"),
    ("GPU", "GPU xid Error"): ("GPU", None),  # an Xid without its number says nothing
    ("Power Supply", "Power Supply Failure detected"): ("PSU", "POWER_FAULT"),
    ("Power Supply", "Redundancy Lost"): ("PSU", "POWER_FAULT"),
    ("Fan", "Redundancy Lost"): ("FAN", "FAN_FAULT"),
    ("Fan", "Speed Critical (Sensor)"): ("FAN", "FAN_FAULT"),
    ("NIC", "NIC PCI link Width low"): ("NIC", "PCIE_ERROR"),
    ("Parameter Plane Cable", "Link Down"): ("CABLE", None),  # which link? a person decides
    ("Riser Card", "RiserCard Fault"): ("PCIE_RISER", None),
    ("RAID Card", "Bus Correctable error"): ("STORAGE", "PCIE_ERROR"),
    ("Motherboard", "Motherboard Failed"): ("MOTHERBOARD", None),
    ("CPU", "Machine Check Exception ( Uncorrectable )"): ("CPU", "OTHER"),
    ("Firmware", "Firmware mismatch"): ("SOFTWARE", "DRIVER_ISSUE"),
    ("Operating System", "Kernel Panic"): ("SOFTWARE", "OTHER"),
}


@pytest.fixture(scope="module")
def m() -> Matcher:
    return Matcher.rules_only()


@pytest.fixture
def labels(external):
    trace = json.loads((external / "infinitehbd-fault-trace" / "fault_trace.json").read_text())
    return [(e["fault_type"]["Class"], e["fault_type"]["Desc"]) for e in trace if e["event_type"] == "fault_start"]


def test_real_fault_labels_code_as_an_engineer_would(m, labels):
    seen = set(labels)
    assert set(EXPECTED) <= seen, "the trace changed"
    for (cls, desc), (part, symptom) in EXPECTED.items():
        c = m.match_row(cls, desc, None)
        assert (c.part_code, c.symptom_code) == (part, symptom), (cls, desc, c)


def test_hardware_faults_are_mostly_coded(m, labels):
    """Every hardware-class fault of the 584 gets a part; most get a symptom."""
    hardware = [(c, d) for c, d in labels if c not in {"Unknown Error", "System Crash", "Stress Test Failure",
                                                         "Other Failures", "Training Task Troubleshooting",
                                                         "Change", "Test", "Software Tool"}]
    coded = [m.match_row(c, d, None) for c, d in hardware]
    assert all(x.part_code for x in coded)
    assert sum(x.symptom_code is not None for x in coded) / len(coded) > 0.75
