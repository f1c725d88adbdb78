"""The bundled sample's tickets through normalize: every GPU replacement coded automatically.

The sample (data/sample, README) has 6 GPU replacements; `failures` counts the tickets coded part
GPU and action REPLACE. A second opinion that read "GPU board" as a riser and 疑似加速卡 beside a
high temperature as cooling once sent two of them to review, and `failures` counted 4.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.normalize.matcher import Matcher

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample"


@pytest.fixture(scope="module")
def matcher():
    return Matcher.load()


@pytest.mark.parametrize("part, symptom, action", [
    ("GPU board (H100 80GB HBM3)", "fra-gpu002: #3 ECC DBE (after power event)", "swap, new sn 1650523300396"),  # RZ1-003501
    ("疑似加速卡 (H100 80GB HBM3)", "H100 80GB HBM3 high temp，host sha-gpu002", "更换备件"),  # SHA2-001666
    ("GPU module", "GPU 3 running hot", "GPU module swapped"),
    ("OAM module", "OAM 2 not detected", "replaced OAM module"),
    ("SXM module", "double bit ECC on GPU 6", "swap, new sn 1652223011187"),
    ("显卡", "显卡温度高", "更换显卡"),
    ("算力卡", "算力卡掉卡", "更换备件"),
    ("GPU卡", "GPU卡温度过高", "更换GPU卡"),
    ("顯示卡", "顯示卡溫度過高", "更換顯示卡"),
    ("", "GPU 2 overheats at idle", "replaced GPU 2"),
    ("", "卡5 温度高，其他卡正常", "更换 GPU 后温度正常"),
])
def test_a_gpu_named_and_replaced_is_coded_automatically(matcher, part, symptom, action):
    c = matcher.match_row(part, symptom, action)
    assert (c.part_code, c.action_code) == ("GPU", "REPLACE"), c


def test_a_replacement_of_another_part_beside_a_gpu_is_not_a_gpu(matcher):
    c = matcher.match_row("GPU", "GPU 5 fell off the bus", "replaced the riser card, GPU 5 stable")
    assert c.part_code in ("PCIE_RISER", None), c


def test_every_gpu_replacement_of_the_sample_is_coded(matcher):
    from pipeline.config import load_config
    from pipeline.ingest.tickets import load_tickets
    from pipeline.normalize import stage

    cfg = load_config(ROOT / "fleetfault.toml")
    exports = sorted(p for p in (SAMPLE / "tickets").rglob("*") if p.is_file())
    raw = pl.concat([load_tickets(p, i, p.parent.name, cfg).tables["tickets_raw"] for i, p in enumerate(exports)])
    coded = stage.code(stage.latest(raw), Matcher.load(cfg))
    replaced = coded.filter((pl.col("part_code") == "GPU") & (pl.col("action_code") == "REPLACE"))
    truth = pl.read_csv(SAMPLE / "truth" / "failures.csv", infer_schema=False)
    assert truth.height == 6
    assert sorted(replaced["ticket_id"]) == sorted(truth["ticket_id"])
