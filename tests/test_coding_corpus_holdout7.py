"""Integrity of ``tests/data/coding_corpus/holdout7.csv``, the seventh blind holdout
(``HOLDOUT7.md``): frozen by its hash, well formed, and sharing no ticket with the other corpus
files. The coder is never run on it here: the integrator measures it once, untuned.
"""
import pytest

# Imported so that holdout3's check of the taxonomy's code lists against CONTRACT.md runs here.
# (It skips cleanly without ../shared.)
from tests.test_coding_corpus_holdout3 import test_code_lists_match_the_contract  # noqa: F401
from tests.test_coding_corpus_holdout4 import CORPUS, checks_for

# Id prefix -> voice (HOLDOUT7.md describes each one).
VOICES = {"TEL": "telco_edge", "PWC": "warranty_clerk", "LAJ": "loss_adjuster",
          "VFX": "render_wrangler", "HMI": "hospital_bme", "JJB": "zh_shift_handover",
          "TLS": "tw_line_startup", "MTB": "mt_bilingual", "FSU": "ev_feishu",
          "STT": "call_transcript"}

# Pinned so that any edit is deliberate: change it together with HOLDOUT7.md's "Changes".
SHA256 = "8dd9be3cd1fc125c322160c3891093179f9107c4b4818be4c938dadc263e0f04"
CHECKS = checks_for(CORPUS / "holdout7.csv", SHA256, VOICES)


@pytest.mark.parametrize("check", CHECKS)
def test_holdout7_integrity(check):
    CHECKS[check]()
