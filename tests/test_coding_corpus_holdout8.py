"""Integrity of ``tests/data/coding_corpus/holdout8.csv``, the eighth blind holdout.

``HOLDOUT8.md`` says how it was written and coded. The file is frozen by its hash, well formed,
and shares no ticket with the other corpus files. The coder is never run on it here: the
integrator measures it once, untuned.
"""
import pytest

# The contract comparison is collected here too (it skips cleanly without ../shared).
from tests.test_coding_corpus_holdout3 import test_code_lists_match_the_contract  # noqa: F401
from tests.test_coding_corpus_holdout4 import CORPUS, checks_for

# Pinned so that any edit is deliberate: change it together with HOLDOUT8.md's "Changes".
SHA256 = "ba3ba1dfb43170323e460831cea19b9c2dfbdab95060055fabd0a6c3e1dfaa6f"

# Id prefix -> voice, one writer each (the table in HOLDOUT8.md).
VOICES = dict(
    BPO="broadcast_playout",    # a TV broadcaster's playout and encoding engineers
    NVS="nv_enterprise_case",   # a GPU vendor's enterprise support cases
    STM="storage_team",         # a storage team receiving misrouted GPU tickets
    GXP="gxp_deviation",        # a pharma site's GxP deviation records
    CGX="cloud_gaming",         # a cloud-gaming provider's PoP operations
    PLF="pl_field",             # Polish field engineers writing English
    SZR="sz_repair_shop",       # a Shenzhen repair shop's simplified-Chinese shorthand
    ZSC="cn_video_edge",        # a smart-city video-analytics edge project, simplified Chinese
    TSD="tw_si_dispatch",       # a Taiwanese system integrator's dispatch sheets
    JHB="johor_build",          # a Johor data-centre build team, Malaysian English and Chinese
)
CHECKS = checks_for(CORPUS / "holdout8.csv", SHA256, VOICES)


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_holdout8_integrity(check):
    CHECKS[check]()
