"""Integrity of the third blind holdout, ``tests/data/coding_corpus/holdout3.csv``.

The file is an evaluation set the ticket coder has never seen (``HOLDOUT3.md``). These checks
only keep it well formed and frozen; they never run the coder on it, so that it can be measured
once, later, without having been tuned on.
"""
import csv
import hashlib
import re
from collections import Counter
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "data" / "coding_corpus"
FILE = CORPUS / "holdout3.csv"
CONTRACT = Path(__file__).resolve().parents[1].parent / "shared" / "CONTRACT.md"
# Pinned so that any edit is deliberate: change it together with HOLDOUT3.md's "Changes".
SHA256 = "5f4ab6212a8474403e4214e47767df25db66b53d1d71063b13cf3f6016987059"

# The code lists of CONTRACT.md's "unified code taxonomy", copied so that the test runs without
# /work/shared; test_code_lists_match_the_contract checks the copy when the contract is there.
PARTS = {"GPU", "GPU_BASEBOARD", "NVSWITCH", "NVLINK_BRIDGE", "PCIE_RISER", "FAN", "PSU",
         "COOLING", "MOTHERBOARD", "CPU", "DIMM", "STORAGE", "NIC", "CABLE", "BMC", "SOFTWARE",
         "NONE"}
SYMPTOMS = {"FELL_OFF_BUS", "MEMORY_UNCORRECTABLE", "MEMORY_CORRECTABLE", "ROW_REMAP", "OVERHEAT",
            "FAN_FAULT", "POWER_FAULT", "NVLINK_ERROR", "PCIE_ERROR", "GSP_ERROR", "HANG",
            "PERFORMANCE", "APP_FAULT", "DRIVER_ISSUE", "PHYSICAL_DAMAGE", "BOOT_FAILURE", "OTHER"}
ACTIONS = {"REPLACE", "RESEAT", "REBOOT", "REFLASH", "CLEAN", "MONITOR", "NONE"}
GOLD = {"part_code": PARTS, "symptom_code": SYMPTOMS, "action_code": ACTIONS}

VOICES = {"KRC": "kr_cloud", "JPD": "jp_dc", "HKS": "hk_site", "CNH": "cn_hyper",
          "OFA": "oem_fa", "HPC": "hpc_slurm", "ALB": "alert_bridge", "SLO": "slack_ops",
          "DEF": "de_field", "SGF": "sg_field", "INN": "in_noc", "WCX": "wechat_mix",
          "RES": "cn_resident", "TWO": "tw_odm"}
LANGUAGES = {"en", "zh-Hans", "zh-Hant", "mixed"}
DIFFICULTIES = {"easy", "medium", "hard", "ambiguous"}
HAN = re.compile(r"[\u4e00-\u9fff]")


def _rows():
    with FILE.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_file_is_the_frozen_one():
    assert hashlib.sha256(FILE.read_bytes()).hexdigest() == SHA256


def test_header_is_the_corpus_format():
    with (CORPUS / "dev.csv").open(encoding="utf-8", newline="") as f:
        header = next(csv.reader(f))
    with FILE.open(encoding="utf-8", newline="") as f:
        assert next(csv.reader(f)) == header


def test_gold_codes_are_taxonomy_codes_and_empty_only_when_ambiguous():
    for r in _rows():
        for column, allowed in GOLD.items():
            assert r[column] == "" or r[column] in allowed, (r["ticket_id"], column, r[column])
        empty = any(r[c] == "" for c in GOLD)
        assert empty == (r["difficulty"] == "ambiguous"), r["ticket_id"]


def test_tags_ids_and_text():
    rows = _rows()
    assert len(rows) >= 500
    assert len({r["ticket_id"] for r in rows}) == len(rows)
    texts = Counter((r["part"], r["symptom"], r["action"]) for r in rows)
    assert max(texts.values()) == 1
    for r in rows:
        prefix, number = r["ticket_id"].split("-")
        assert VOICES[prefix] == r["voice"] and re.fullmatch(r"\d{3}", number), r["ticket_id"]
        assert r["service_point"] == "coding_corpus"
        assert r["difficulty"] in DIFFICULTIES and r["language"] in LANGUAGES, r["ticket_id"]
        assert r["symptom"].strip() or r["part"].strip(), r["ticket_id"]
        has_han = bool(HAN.search(r["part"] + r["symptom"] + r["action"]))
        assert has_han == (r["language"] != "en"), r["ticket_id"]
        assert all(x.isdigit() and 1 <= int(x) <= 13
                   for x in filter(None, r["guide_rules"].split(","))), r["ticket_id"]
    assert len({r["voice"] for r in rows}) >= 10


def test_code_lists_match_the_contract():
    if not CONTRACT.exists():
        pytest.skip("../shared/CONTRACT.md is not here")
    text = CONTRACT.read_text(encoding="utf-8")
    taxonomy = text[text.index("## The unified code taxonomy"):]
    sections = re.split(r"^(part_code|symptom_code|action_code) —", taxonomy, flags=re.M)
    found = {name: set(re.findall(r"`([A-Z_]+)`", body))
             for name, body in zip(sections[1::2], sections[2::2])}
    assert found == GOLD
