"""The simulator's ticket truth follows CODING-GUIDE.md (rule 2: a BMC firmware flash with
nothing replaced is SOFTWARE, though the ticket names the BMC), so its tickets score against
the matcher without any bridging."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.normalize.canonical import canonical
from pipeline.normalize.matcher import Matcher
from pipeline.simulate import vocab
from pipeline.simulate.process import NAMED_PART, SERVICE_EVENTS, simulate_fleet
from pipeline.simulate.tickets import ticket_text


def test_bmc_flash_is_coded_software_and_written_about_the_bmc():
    _, part, _, action, _ = SERVICE_EVENTS["bmc"]
    assert (part, action, NAMED_PART["bmc"]) == ("SOFTWARE", "REFLASH", "BMC")
    bmc_words = {canonical(w) for w in vocab.PART["BMC"]}
    software_words = {canonical(w) for w in vocab.PART["SOFTWARE"]}
    rng = np.random.default_rng(5)
    row = {"kind": "bmc", "part_code": "SOFTWARE", "symptom_code": "OTHER", "action_code": "REFLASH",
           "slot": None, "host": "fra-gpu001", "model": "HGX H100 8-GPU"}
    m = Matcher.load()
    texts = [ticket_text(rng, row, "en", None) for _ in range(40)]
    # the technician writes the BMC (with a modifier, at times mistyped), never a software word
    named = [canonical(p) for p, _, _ in texts]
    assert sum(any(w in n for w in bmc_words) for n in named) >= 30, named
    assert not set(named) & software_words
    # and the matcher, by the guide, codes what it codes of them SOFTWARE
    assert {m.match_row(*t).part_code for t in texts} <= {"SOFTWARE", None}


def test_simulated_bmc_events_are_software_in_the_truth():
    sim = simulate_fleet(64, 365, 3, accel=20)
    rows = pl.DataFrame([{k: r[k] for k in ("kind", "part_code", "action_code")} for r in sim.service_rows])
    bmc = rows.filter(pl.col("kind") == "bmc")
    assert bmc.height > 0
    assert set(bmc["part_code"]) == {"SOFTWARE"} and set(bmc["action_code"]) == {"REFLASH"}
    assert "BMC" not in set(rows["part_code"])  # no event flashes a BMC and calls the BMC the fix
