"""Integrity of the hand-written coding corpus (tests/data/coding_corpus).

These tests guard the files, not the matcher: the columns the tools read, gold codes that
exist in the taxonomy, the fixed split (same voice x difficulty mix in both halves, no ticket
in both), and a frozen holdout. Matcher accuracy on the corpus is measured by
``fleetfault evaluate tickets`` (bench/RESULTS.md), not here.
"""

from __future__ import annotations

import csv
import hashlib
import re
import unicodedata
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.tickets.columns import map_columns
from pipeline.normalize.evaluate import score
from pipeline.normalize.taxonomy import DIMENSIONS, load_taxonomy

CORPUS = Path(__file__).parent / "data" / "coding_corpus"
HALVES = ("dev", "holdout")
COLUMNS = ["ticket_id", "service_point", "voice", "language", "difficulty", "part", "symptom", "action",
           "part_code", "symptom_code", "action_code", "guide_rules"]
VOICES = {"zh_ops": "ZHO", "depot": "DEP", "oem_fe": "OEM", "zh_hant_site": "ZHT", "nonnative": "NNE",
          "slack": "SLK", "rma_lab": "RMA", "auto_mon": "MON"}
LANGUAGES = {"en", "zh-Hans", "zh-Hant", "mixed"}
DIFFICULTIES = {"easy", "medium", "hard", "ambiguous"}
PER_VOICE = 60
# The holdout is measured once, at the end; it is never edited after the split. A change here
# must come with a line under "Changes" in the corpus README saying what was fixed and why.
HOLDOUT_SHA256 = "875a19a81e6d382e2dda99f4e881e4d0b53ff75e6df19d0e5f43e290416963d6"


def _read(half: str) -> list[dict[str, str]]:
    with open(CORPUS / f"{half}.csv", encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def halves() -> dict[str, list[dict[str, str]]]:
    return {h: _read(h) for h in HALVES}


def _text_key(row: dict[str, str]) -> str:
    """The ticket's words with case, width and spacing folded: a near-copy still collides."""
    s = unicodedata.normalize("NFKC", " ".join(row[f] for f in ("part", "symptom", "action"))).lower()
    return re.sub(r"\s+", " ", s).strip()


@pytest.mark.parametrize("half", HALVES)
def test_header_is_the_documented_one_and_the_ticket_reader_maps_it(half):
    with open(CORPUS / f"{half}.csv", encoding="utf-8", newline="") as fh:
        header = next(csv.reader(fh))
    assert header == COLUMNS
    # `fleetfault normalize` must read the files without a config: the three text columns and
    # the id map to the ticket fields, and no gold or metadata column is taken for text.
    mapped = {f: header[i] for f, i in map_columns(header).items()}
    assert mapped == {"ticket_id": "ticket_id", "part_text": "part", "symptom_text": "symptom",
                      "action_text": "action"}


@pytest.mark.parametrize("half", HALVES)
def test_cells_hold_allowed_values(halves, half):
    codes = load_taxonomy().codes
    for row in halves[half]:
        where = f"{half}.csv {row['ticket_id']}"
        assert row["service_point"] == "coding_corpus", where
        assert row["voice"] in VOICES and row["ticket_id"].startswith(VOICES[row["voice"]] + "-"), where
        assert row["language"] in LANGUAGES, where
        assert row["difficulty"] in DIFFICULTIES, where
        assert any(row[f].strip() for f in ("part", "symptom", "action")), f"{where}: no text"
        for d in DIMENSIONS:
            code = row[f"{d}_code"]
            assert code == "" or code in codes[d], f"{where}: {d}_code {code!r} is not in the taxonomy"
        # An empty gold code is the definition of an ambiguous ticket, and only of one.
        empty = any(row[f"{d}_code"] == "" for d in DIMENSIONS)
        assert empty == (row["difficulty"] == "ambiguous"), where
        rules = [int(r) for r in row["guide_rules"].split(",") if r]
        assert all(1 <= r <= 13 for r in rules), where


def test_ids_unique_and_no_ticket_in_both_halves(halves):
    ids = [r["ticket_id"] for h in HALVES for r in halves[h]]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    keys = {h: Counter(_text_key(r) for r in halves[h]) for h in HALVES}
    for h in HALVES:
        assert not [k for k, n in keys[h].items() if n > 1], f"duplicate ticket text in {h}.csv"
    assert not set(keys["dev"]) & set(keys["holdout"]), "a ticket text is in both halves"


def test_split_is_stratified_by_voice_and_difficulty(halves):
    dev, hold = (Counter((r["voice"], r["difficulty"]) for r in halves[h]) for h in HALVES)
    assert len(halves["dev"]) == len(halves["holdout"]) == len(VOICES) * PER_VOICE // 2
    for voice in VOICES:
        assert sum(dev[voice, d] + hold[voice, d] for d in DIFFICULTIES) == PER_VOICE, voice
        for d in DIFFICULTIES:
            assert abs(dev[voice, d] - hold[voice, d]) <= 1, (voice, d, dev[voice, d], hold[voice, d])
            assert dev[voice, d] + hold[voice, d] >= 4, (voice, d)


def test_mix_of_difficulty_language_and_guide_rules(halves):
    rows = halves["dev"] + halves["holdout"]
    n = len(rows)
    diff = Counter(r["difficulty"] for r in rows)
    assert 0.2 <= diff["hard"] / n <= 0.35, diff
    assert diff["ambiguous"] / n >= 0.05, diff
    lang = Counter(r["language"] for r in rows)
    assert all(lang[x] >= 30 for x in LANGUAGES), lang
    # Every rule of the guide, in English and in Chinese (or mixed) text, more than once.
    seen = Counter((int(x), r["language"] == "en") for r in rows for x in r["guide_rules"].split(",") if x)
    for rule in range(1, 14):
        assert seen[rule, True] >= 2 and seen[rule, False] >= 2, (rule, seen[rule, True], seen[rule, False])


def test_gold_files_are_read_by_evaluate(halves):
    # The gold file is a valid --truth table: scored against itself, every code is right and
    # the empty gold codes count as not coded.
    truth = pl.read_csv(CORPUS / "dev.csv", infer_schema=False)
    report = score(truth, truth)
    assert report.unmatched_coded == report.unmatched_truth == 0
    assert report.summary["precision"].to_list() == [1.0, 1.0, 1.0]
    assert report.summary["coverage"].to_list() == [
        sum(r[f"{d}_code"] != "" for r in halves["dev"]) / len(halves["dev"]) for d in DIMENSIONS]


def test_holdout_is_frozen():
    digest = hashlib.sha256((CORPUS / "holdout.csv").read_bytes()).hexdigest()
    assert digest == HOLDOUT_SHA256, (
        "holdout.csv changed: it is measured once and never edited; fix only clear coding errors, "
        "note each under 'Changes' in tests/data/coding_corpus/README.md, then update HOLDOUT_SHA256")
