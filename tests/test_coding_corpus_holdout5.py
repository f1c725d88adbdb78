"""Integrity of the fifth blind holdout, ``tests/data/coding_corpus/holdout5.csv``.

The file is an evaluation set the ticket coder has never seen (``HOLDOUT5.md``). These checks
only keep it well formed, frozen and new; they never run the coder on it, so that it can be
measured once, later, without having been tuned on.
"""
import pytest

# The checks are holdout4's, taking the file as an argument; the contract comparison of the
# holdout3 test (the taxonomy's code lists) is imported so that it runs in this file too.
from tests.test_coding_corpus_holdout3 import (
    test_code_lists_match_the_contract,  # noqa: F401  (collected here: runs in this file too)
)
from tests.test_coding_corpus_holdout4 import CORPUS, checks_for

FILE = CORPUS / "holdout5.csv"
# Pinned so that any edit is deliberate: change it together with HOLDOUT5.md's "Changes".
SHA256 = "a78bb2a53ff41423426a0a05a6aee52a6ad0da8872bb507166e3d1db2ed29861"

VOICES = {"NHT": "night_hands", "JON": "jp_outsource_noc", "HKC": "hk_colo",
          "RMP": "rma_pipeline", "CFA": "cn_fa_report", "KFE": "kr_oem_fe",
          "MAC": "mining_ai_chat", "DDP": "de_depot", "UHD": "uni_helpdesk", "MXF": "mx_field",
          "TFI": "tw_fab_it"}


# One test per check, named after it, so a failure says which property broke.
CHECKS = checks_for(FILE, SHA256, VOICES)


@pytest.mark.parametrize("check", CHECKS)
def test_holdout5_integrity(check):
    CHECKS[check]()
