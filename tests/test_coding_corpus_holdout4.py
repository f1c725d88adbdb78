"""Integrity of the fourth blind holdout, ``tests/data/coding_corpus/holdout4.csv``.

The file is an evaluation set the ticket coder has never seen (``HOLDOUT4.md``). These checks
only keep it well formed, frozen and new; they never run the coder on it, so that it can be
measured once, later, without having been tuned on.
"""
import csv
import hashlib
import re
from collections import Counter
from pathlib import Path

# The taxonomy's code lists are the copy kept in the holdout3 test; importing its contract
# comparison runs it here too (it skips cleanly without ../shared/CONTRACT.md).
from tests.test_coding_corpus_holdout3 import (
    DIFFICULTIES,
    GOLD,
    HAN,
    LANGUAGES,
    test_code_lists_match_the_contract,  # noqa: F401  (collected here: runs in this file too)
)

CORPUS = Path(__file__).parent / "data" / "coding_corpus"
FILE = CORPUS / "holdout4.csv"
# Pinned so that any edit is deliberate: change it together with HOLDOUT4.md's "Changes".
SHA256 = "05777ca58bc99f8185b0dde8bba6e5a8b6a41af024422e4dff92532f27388e8e"

VOICES = {"RBT": "remed_bot", "BRF": "br_field", "WCO": "colo_wechat", "TWB": "tw_burnin",
          "GCS": "cloud_support", "RCV": "rma_receiving", "SBD": "slack_digest", "UNI": "hpc_email",
          "CLB": "cn_ailab", "RAT": "rack_accept", "HTL": "cn_hotline", "FRF": "fr_field",
          "TWN": "tw_noc"}
TEXT = ("part", "symptom", "action")


def _read(path):
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _digest(*fields):
    return hashlib.sha256("\x1f".join(fields).encode("utf-8")).hexdigest()


def check_frozen_and_in_the_corpus_format(path, sha256):
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    with (CORPUS / "dev.csv").open(encoding="utf-8", newline="") as dev, \
            path.open(encoding="utf-8", newline="") as mine:
        assert next(csv.reader(mine)) == next(csv.reader(dev))


def check_every_row_is_well_tagged_and_coded(path, voices):
    """Gold codes from the taxonomy, empty exactly on ambiguous rows; ids voice-prefixed;
    Chinese characters exactly on the rows not tagged `en`; guide rules 1-13."""
    for r in _read(path):
        tid = r["ticket_id"]
        assert all(r[c] in allowed or not r[c] for c, allowed in GOLD.items()), tid
        assert (r["difficulty"] == "ambiguous") == (not all(r[c] for c in GOLD)), tid
        prefix, _, number = tid.partition("-")
        assert voices.get(prefix) == r["voice"] and re.fullmatch(r"\d{3}", number), tid
        assert r["service_point"] == "coding_corpus", tid
        assert {r["difficulty"]} <= DIFFICULTIES and {r["language"]} <= LANGUAGES, tid
        assert r["symptom"].strip() or r["part"].strip(), tid
        assert bool(HAN.search("".join(r[c] for c in TEXT))) != (r["language"] == "en"), tid
        rules = [x for x in r["guide_rules"].split(",") if x]
        assert all(x.isdigit() and 1 <= int(x) <= 13 for x in rules), tid


def check_size_voices_and_no_text_twice(path):
    rows = _read(path)
    assert len(rows) >= 500 and len({r["voice"] for r in rows}) >= 10
    assert len({r["ticket_id"] for r in rows}) == len(rows)
    assert Counter(tuple(r[c] for c in TEXT) for r in rows).most_common(1)[0][1] == 1


def check_nothing_is_shared_with_the_other_corpus_files(path):
    """Neither a ticket (its three fields), nor a long symptom text, nor an id of this file is
    in another corpus file of the folder (first_sight/ holds scores, no ticket text): the
    holdout is new text. Compared by hash, so nobody editing this file has to read the others."""
    tickets, symptoms, ids = set(), set(), set()
    for other in sorted(CORPUS.glob("*.csv")):
        for r in _read(other) if other != path else ():
            tickets.add(_digest(*(r.get(c) or "" for c in TEXT)))
            symptoms.add(_digest((r.get("symptom") or "").strip()))
            ids.add(_digest(r.get("ticket_id") or ""))
    assert tickets, f"no other corpus file found next to {path.name}"
    for r in _read(path):
        assert _digest(*(r[c] for c in TEXT)) not in tickets, r["ticket_id"]
        long_symptom = len(r["symptom"].strip()) >= 40
        assert not long_symptom or _digest(r["symptom"].strip()) not in symptoms, r["ticket_id"]
        assert _digest(r["ticket_id"]) not in ids, r["ticket_id"]


def checks_for(path, sha256, voices):
    """The four checks bound to one holdout file, by name, so that a later holdout's test
    (holdout5, holdout6) is one parametrized test whose failure names the property broken."""
    return {
        "frozen_and_in_the_corpus_format":
            lambda: check_frozen_and_in_the_corpus_format(path, sha256),
        "every_row_is_well_tagged_and_coded":
            lambda: check_every_row_is_well_tagged_and_coded(path, voices),
        "size_voices_and_no_text_twice": lambda: check_size_voices_and_no_text_twice(path),
        "nothing_is_shared_with_the_other_corpus_files":
            lambda: check_nothing_is_shared_with_the_other_corpus_files(path),
    }


# The checks take the file as an argument so that later holdouts (holdout5) import and reuse them.
def test_frozen_and_in_the_corpus_format():
    check_frozen_and_in_the_corpus_format(FILE, SHA256)


def test_every_row_is_well_tagged_and_coded():
    check_every_row_is_well_tagged_and_coded(FILE, VOICES)


def test_size_voices_and_no_text_twice():
    check_size_voices_and_no_text_twice(FILE)


def test_nothing_is_shared_with_the_other_corpus_files():
    check_nothing_is_shared_with_the_other_corpus_files(FILE)
