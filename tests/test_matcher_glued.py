"""Words glued without a space are coded like their spaced forms; known words stay whole."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.normalize.canonical import canonical
from pipeline.normalize.glued import Splitter
from pipeline.normalize.matcher import Matcher


@pytest.fixture(scope="module")
def m() -> Matcher:
    return Matcher.rules_only()


@pytest.mark.parametrize("glued, spaced", [
    ("GPUECC报错", "GPU ECC 报错"), ("NVLINKdown", "NVLink down"), ("fanfail", "fan fail"),
    ("PSUfailure", "PSU failure"), ("gpu掉卡", "gpu 掉卡"), ("nvlinkerror", "nvlink error"),
    ("thermalthrottling", "thermal throttling"), ("replacedGPU", "replaced GPU"), ("GPUreseat", "GPU reseat"),
    ("GPU fell off the bus, RMAreplaced", "GPU fell off the bus, RMA replaced"),
])
def test_glued_words_code_like_spaced_ones(m, glued, spaced):
    assert m._glued.text(canonical(glued)) == canonical(spaced)
    got, want = m.match_row(glued, glued, glued), m.match_row(spaced, spaced, spaced)
    assert (got.part_code, got.symptom_code, got.action_code) == (want.part_code, want.symptom_code, want.action_code)
    assert any((got.part_code, got.symptom_code, got.action_code))


def test_glued_words_in_a_frame(m):
    import polars as pl
    # (a plain "ECC报错" is an ECC error of unknown kind: left to review; a DBE is uncorrectable)
    df = pl.DataFrame({"part_text": ["PSU", "fan", "GPU"], "symptom_text": ["PSUfailure", "fanfail", "GPUDBE报错"],
                       "action_text": ["replacedPSU", "swapped", "RMA"]})
    coded = m.code_frame(df)
    assert coded["symptom_code"].to_list() == ["POWER_FAULT", "FAN_FAULT", "MEMORY_UNCORRECTABLE"]
    assert coded["action_code"].to_list()[0] == "REPLACE"
    assert coded.drop(coded.columns[:3]).rows() == m.code_rows(df).drop(coded.columns[:3]).rows()


@pytest.mark.parametrize("word", ["failled", "nvswitch", "nvlink", "baseboard", "riser", "reseat", "reseated",
                                  "overheating", "powersupply", "retimer", "xid79", "x8", "sn7hj2k9lq"])
def test_known_words_and_digits_are_not_split(m, word):
    assert m._glued.token(word) == word


def test_ambiguous_and_short_pieces_are_not_split():
    s = Splitter({"pow", "power", "ring", "erring", "gpu", "ecc", "nv"})
    assert s.token("powerring") == "powerring"  # power ring / pow erring
    assert s.token("gpuecc") == "gpu ecc"
    assert s.token("nvecc") == "nvecc"  # pieces of two letters are too short to trust
    assert s.token("gpueccgpu") == "gpu ecc gpu"


def test_learned_words_join_the_vocabulary():
    m = Matcher.rules_only(learned=[("part", "widget", "GPU")])
    assert m._glued.text("widget gpuecc") == "widget gpu ecc"
    assert m._glued.token("gpuwidget") == "gpu widget"


@given(st.text(alphabet="gpuecnvlinkdowfasrt掉卡 1x", max_size=30))
def test_splitting_never_raises_and_is_idempotent(m, text):
    once = m._glued.text(canonical(text))
    assert m._glued.text(once) == once
    assert canonical(once) == once
