"""The taxonomy file and canonical text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import ConfigError
from pipeline.normalize.canonical import canonical
from pipeline.normalize.matcher import Matcher
from pipeline.normalize.taxonomy import DIMENSIONS, load_taxonomy

CONTRACT = {
    "part": "GPU GPU_BASEBOARD NVSWITCH NVLINK_BRIDGE PCIE_RISER FAN PSU COOLING MOTHERBOARD CPU DIMM "
            "STORAGE NIC CABLE BMC SOFTWARE NONE",
    "symptom": "FELL_OFF_BUS MEMORY_UNCORRECTABLE MEMORY_CORRECTABLE ROW_REMAP OVERHEAT FAN_FAULT POWER_FAULT "
               "NVLINK_ERROR PCIE_ERROR GSP_ERROR HANG PERFORMANCE APP_FAULT DRIVER_ISSUE PHYSICAL_DAMAGE "
               "BOOT_FAILURE OTHER",
    "action": "REPLACE RESEAT REBOOT REFLASH CLEAN MONITOR NONE",
}


def test_bundled_taxonomy_has_exactly_the_contract_codes():
    tax = load_taxonomy()
    for d in DIMENSIONS:
        assert set(tax.codes[d]) == set(CONTRACT[d].split())
        for c in tax.codes[d].values():
            assert c.description, f"{d}.{c.code} has no description"
            assert len(c.aliases) >= 3, f"{d}.{c.code} has too few aliases"


def test_bundled_taxonomy_speaks_english_and_both_chinese_scripts():
    tax = load_taxonomy()
    gpu = tax.codes["part"]["GPU"].aliases
    assert {"gpu", "显卡", "加速卡", "sxm module"} <= set(gpu)
    # traditional aliases are stored in canonical (simplified) form and match either script
    assert canonical("顯卡") == "显卡"
    assert Matcher(tax).match_text("part", "顯示卡").code == "GPU"


def test_extend_with_own_aliases_and_codes(tmp_path):
    extra = tmp_path / "mine.yaml"
    extra.write_text(
        "dimensions:\n"
        "  part:\n"
        "    GPU: {aliases: [大卡, compute brick]}\n"
        "    OPTICAL_SWITCH: {description: OCS, aliases: [ocs, 光交换机]}\n", encoding="utf-8")
    tax = load_taxonomy(extra=extra)
    m = Matcher(tax)
    assert m.match_text("part", "大卡").code == "GPU"
    assert m.match_text("part", "OCS").code == "OPTICAL_SWITCH"
    assert m.match_text("part", "显卡").code == "GPU"  # the bundled aliases are kept


def test_replace_via_config(tmp_path):
    from pipeline.config import config_from_dict

    own = tmp_path / "own.yaml"
    own.write_text(
        "dimensions:\n"
        "  part: {BOARD: {description: any board, aliases: [board, 板]}}\n"
        "  symptom: {DEAD: {description: dead, aliases: [dead, 坏了]}}\n"
        "  action: {SWAP: {description: swap, aliases: [swap, 换]}}\n", encoding="utf-8")
    cfg = config_from_dict({"normalize": {"taxonomy": str(own)}})
    m = Matcher.load(cfg)
    assert m.match_row("board", "dead", "换").part_code == "BOARD"
    assert m.match_row("显卡", "dead", "换").part_code is None


@pytest.mark.parametrize("yaml_text, needle", [
    ("dimensions:\n  part: {A: {aliases: [xy]}, B: {aliases: [XY]}}\n", "claimed by both"),
    ("dimensions:\n  colour: {RED: [red]}\n", "unknown dimension"),
    ("dimensions:\n  part: {A: [a]}\n  symptom: {S: [s]}\n  action: {X: [x]}\nxid: {79: NOPE}\n", "not a symptom code"),
    ("dimensions:\n  part: {A: [a]}\n  symptom: {S: [s]}\n  action: {X: [x]}\nresolve: {part: vote}\n", "not one of"),
    ("dimensions:\n  part: {A: [a]}\n  symptom: {S: [s]}\n  action: {X: [x]}\nimplies_symptom: {A: NOPE}\n", "implies_symptom"),
    ("dimensions:\n  part: {A: [a]}\n  symptom: {S: [s]}\n  action: {X: [x]}\nno_context: {action: [NOPE]}\n", "no_context"),
    ("[unclosed", "not valid YAML"),
])
def test_bad_taxonomy_is_a_config_error(tmp_path, yaml_text, needle):
    p = tmp_path / "t.yaml"
    p.write_text(yaml_text, encoding="utf-8")
    with pytest.raises(ConfigError, match=needle):
        load_taxonomy(p)


def test_missing_taxonomy_file_names_the_setting(tmp_path):
    with pytest.raises(ConfigError, match="normalize.taxonomy"):
        load_taxonomy(tmp_path / "nope.yaml")


@pytest.mark.parametrize("raw, canon", [
    ("Customer reports: ＧＰＵ#3 (SN 1652345678901) fell off the bus, XID: 79", "gpu fell off bus xid79"),
    ("客户反馈 H100 顯卡 掉卡了", "显卡掉卡"),
    ("Tesla V100-SXM2-32GB OAM module", "oam module"),
    ("H100 SXM5 80GB", "gpu"),
    ("sha-gpu126 GPU1GSP报错", "gpu gsp 报错"),
    ("-", "none"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=2314", "nvrm xid79 pid"),
    ("GPU 0000:3b:00.0 link width x8", "gpu link width x8"),
    ("PSU2 fan", "psu fan"),
    ("第3张卡 重新插拔后恢复", "卡重新插拔后恢复"),
    ("SXid 12028 on NVSwitch 2", "sxid on nvswitch"),
    ("1.65462E+12", ""),
    (None, ""),
    ("  \t ", ""),
])
def test_canonical_examples(raw, canon):
    assert canonical(raw) == canon


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_canonical_is_idempotent(t):
    once = canonical(t)
    assert canonical(once) == once
    assert once == once.strip() and "  " not in once
