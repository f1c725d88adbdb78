"""Integrity of the development tickets written in issue 16's second round (dev2.csv, dev3.csv)
and of the first-sight records the calibration is fitted on. Files, not matcher accuracy."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from pipeline.normalize.taxonomy import DIMENSIONS, load_taxonomy
from tests.test_coding_corpus import _read
from tests.test_coding_corpus import _text_key as _key

CORPUS = Path(__file__).parent / "data" / "coding_corpus"
MORE = ("dev2", "dev3", "dev4", "dev5")
COLUMNS = ["ticket_id", "service_point", "voice", "language", "difficulty", "part", "symptom", "action",
           "part_code", "symptom_code", "action_code", "guide_rules"]


@pytest.mark.parametrize("name", MORE)
def test_columns_codes_and_ambiguity(name):
    with open(CORPUS / f"{name}.csv", encoding="utf-8", newline="") as fh:
        assert next(csv.reader(fh)) == COLUMNS
    codes = load_taxonomy().codes
    rows = _read(name)
    assert len({r["ticket_id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["language"] in {"en", "zh-Hans", "zh-Hant", "mixed"}, r["ticket_id"]
        for d in DIMENSIONS:
            assert r[f"{d}_code"] == "" or r[f"{d}_code"] in codes[d], (r["ticket_id"], d)
        empty = any(r[f"{d}_code"] == "" for d in DIMENSIONS)
        assert empty == (r["difficulty"] == "ambiguous"), r["ticket_id"]


def test_no_ticket_repeats_one_of_another_file():
    seen: dict[str, str] = {}
    for name in ("dev", "holdout") + MORE:
        for r in _read(name):
            k = _key(r)
            assert k not in seen, (r["ticket_id"], seen.get(k))
            seen[k] = r["ticket_id"]


def test_first_sight_records_match_their_files():
    """Each record names a ticket of its file, its gold code is that file's, and it was
    written by the rules at the commit in its name (before they were tuned on the file)."""
    for path in sorted((CORPUS / "first_sight").glob("*.csv")):
        name, commit = path.stem.split("_at_")
        assert re.fullmatch(r"[0-9a-f]{7,40}", commit)
        gold = {r["ticket_id"]: r for r in _read(name)}
        with open(path, encoding="utf-8", newline="") as fh:
            recs = list(csv.DictReader(fh))
        assert recs
        for rec in recs:
            row = gold[rec["ticket_id"]]
            assert rec["gold"] == row[f"{rec['dimension']}_code"]
            assert (rec["correct"] == "true") == (rec["code"] == rec["gold"])
