"""Keeps ``tests/data/coding_corpus/holdout6.csv``, the sixth blind holdout, frozen, well formed
and new (see ``HOLDOUT6.md``). Nothing here runs the ticket coder on it: the file is measured
once, later, by the integrator, and must not have been tuned on before then.
"""
import pytest

from tests.test_coding_corpus_holdout3 import (  # the taxonomy's code lists against the contract
    test_code_lists_match_the_contract,  # noqa: F401  (collected here: runs in this file too)
)
from tests.test_coding_corpus_holdout4 import CORPUS, checks_for

FILE = CORPUS / "holdout6.csv"
# Pinned so that any edit is deliberate: change it together with HOLDOUT6.md's "Changes".
SHA256 = "f6747eb7dc6848967df95fe747b53db85a90573136782fd09b89ef6bebce6970"

# Id prefix -> voice; the voices are described in HOLDOUT6.md.
VOICES = {"SCC": "sov_cloud_chg", "VNP": "vn_partner", "SHC": "sh_colo_chat",
          "LQC": "cdu_site", "FAB": "fabric_team", "SPW": "spares_wh", "AUD": "hk_ins_audit",
          "RFB": "refurb_intake", "THC": "tw_hpc", "OWP": "oem_warranty",
          "MKH": "marketplace_host"}
CHECKS = checks_for(FILE, SHA256, VOICES)


@pytest.mark.parametrize("check", CHECKS)
def test_holdout6_integrity(check):
    CHECKS[check]()
