"""Ticket exports in layouts fleetfault was not built against (``tests/data/ticket_layouts``):
every ticket's host, slot, serial, texts and part swap read as a person would read them.

Each folder holds exports written by hand after what a real tool writes (ServiceNow, Jira,
Zendesk, an OEM RMA portal, Chinese 运维平台 and 工单 systems, a GBK vendor portal, a Big5
web portal, a colo's weekly dumps), an ``expected.json`` with the latest version of every
ticket, and sometimes the ``inventory.csv`` whose hosts and serials are evidence. Also here:
a layout that is unsure is quarantined whole, and the property that no column fills two
text roles.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import config_from_dict
from pipeline.ingest.inventory import read_inventory
from pipeline.ingest.tickets.columns import FIELD_ALIASES
from pipeline.ingest.tickets.layout import recognise
from pipeline.ingest.tickets.readers import SUFFIXES
from pipeline.ingest.tickets.swaps import is_gpu_part
from pipeline.ingest.tickets.values import Known
from pipeline.ingest.tickets import load_tickets
from pipeline.normalize.stage import latest

CORPUS = Path(__file__).parent / "data" / "ticket_layouts"
LAYOUTS = sorted(p.name for p in CORPUS.iterdir() if (p / "expected.json").is_file())
CFG = config_from_dict({})
FIELDS = ("opened_at", "status", "host", "slot", "serial", "part_text", "symptom_text", "action_text",
          "swap_part_text", "removed_serial", "installed_serial")


def known_of(folder: Path) -> Known | None:
    inv = folder / "inventory.csv"
    if not inv.is_file():
        return None
    frame = pl.DataFrame(read_inventory(inv, 0).tables["inventory"])
    return Known.of(frame["host"].to_list(), frame["serial"].to_list())


def read_layout(folder: Path, known: Known | None) -> tuple[pl.DataFrame, list]:
    exports = sorted(f for f in folder.iterdir() if f.suffix.lower() in SUFFIXES and f.name != "inventory.csv")
    frames, rejects = [], []
    for i, f in enumerate(exports, start=1):
        got = load_tickets(f, i, folder.name, CFG, source=f.name, known=known)
        assert got.rows_read == got.rows_loaded + len(got.rejects)
        frames.append(got.tables["tickets_raw"])
        rejects += [(f.name, r.line_no, r.reason, r.detail) for r in got.rejects]
    return latest(pl.concat(frames)).sort("ticket_id"), rejects


def test_the_corpus_has_at_least_eight_layouts():
    assert len(LAYOUTS) >= 8, LAYOUTS


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_ticket_of_a_layout_is_read_as_expected(layout):
    folder = CORPUS / layout
    want = json.loads((folder / "expected.json").read_text(encoding="utf-8"))["tickets"]
    got, rejects = read_layout(folder, known_of(folder))
    assert rejects == []
    rows = {r["ticket_id"]: r for r in got.to_dicts()}
    assert sorted(rows) == sorted(t["ticket_id"] for t in want)
    for t in want:
        row = dict(rows[t["ticket_id"]], opened_at=rows[t["ticket_id"]]["opened_at"].isoformat())
        assert {f: row[f] for f in FIELDS} == {f: t[f] for f in FIELDS}, t["ticket_id"]


def test_a_host_column_without_a_host_word_needs_the_inventory():
    """The colo's ``Asset`` column is the host only because its values are the inventory's hosts."""
    folder = CORPUS / "overlapping_dumps_csv"
    got, _ = read_layout(folder, None)
    assert got["host"].is_null().all()
    got, _ = read_layout(folder, known_of(folder))
    assert got["host"].is_not_null().all()


def test_inventory_serials_in_the_old_and_new_sn_columns_do_not_move_the_serial():
    """The vendor's Old SN / New SN are the inventory's serials too: still removed and installed."""
    folder = CORPUS / "gbk_vendor_csv"
    want = {t["ticket_id"]: t for t in json.loads((folder / "expected.json").read_text(encoding="utf-8"))["tickets"]}
    serials = {s for t in want.values() for s in (t["serial"], t["removed_serial"], t["installed_serial"]) if s}
    got, rejects = read_layout(folder, Known.of([], serials))
    assert rejects == []
    for r in got.to_dicts():
        t = want[r["ticket_id"]]
        assert (r["serial"], r["removed_serial"], r["installed_serial"]) == (
            t["serial"], t["removed_serial"], t["installed_serial"])


def test_a_serial_column_without_a_serial_word_is_found_by_the_inventory():
    rows = [["T-1", "1652221034411", "GPU lost"], ["T-2", "1652221034502", "hot"], ["T-3", "1652221034733", "ok"]]
    headers = ["Ticket #", "Asset Tag", "Symptom"]
    assert "serial" not in recognise(headers, rows).columns
    lay = recognise(headers, rows, known=Known.of([], ["1652221034411", "1652221034502", "1652221034733"]))
    assert lay.columns["serial"] == 1 and lay.chosen["serial"].by == "inventory"


def test_two_host_columns_are_told_apart_by_the_inventory():
    """``Hostname`` and ``Server`` (holding the rack position) are equally good words: without an
    inventory that is unsure; with one, the column of its hosts is the host."""
    headers = ["Ticket #", "Server", "Hostname", "Symptom"]
    rows = [["T-1", "R14-U22", "gpu-017", "GPU lost"], ["T-2", "R15-U02", "gpu-021", "hot"],
            ["T-3", "R16-U10", "gpu-030", "fan"]]
    lay = recognise(headers, rows)
    assert not lay.ok and lay.problems[0].startswith("host:")
    lay = recognise(headers, rows, known=Known.of(["gpu-017", "gpu-021", "gpu-030"], []))
    assert lay.ok and lay.columns["host"] == 2


def test_overlapping_dumps_keep_each_ticket_once_at_its_latest():
    got, _ = read_layout(CORPUS / "overlapping_dumps_csv", known_of(CORPUS / "overlapping_dumps_csv"))
    assert got["ticket_id"].is_unique().all()
    assert got.filter(pl.col("ticket_id") == "RH-30112")["updated_at"].item() == datetime(2025, 4, 12, 17, 20)


# -- unsure layouts ----------------------------------------------------------------------

def write(path: Path, text: str | bytes, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode(encoding))
    return path


def test_two_symptom_columns_that_differ_are_unsure_and_quarantined(tmp_path):
    f = write(tmp_path / "p" / "t.csv", "Ticket #,Problem,Issue,Action\n"
                                        "T-1,GPU fell off the bus,customer job died,RMA\n"
                                        "T-2,fan noise,rack 12 loud,replaced fan\n")
    got = load_tickets(f, 1, "p", CFG)
    assert got.rows_loaded == 0 and got.rows_read == 1
    (rej,) = got.rejects
    assert rej.reason == "unrecognised_layout"
    assert "symptom_text: 'Problem' (100) and 'Issue' (100)" in rej.detail
    assert "Columns seen: ['Ticket #', 'Problem', 'Issue', 'Action']" in rej.detail
    block = rej.detail[rej.detail.index("[tickets.points.p]"):rej.detail.index("\n(")]
    cfg = config_from_dict(_toml(block))  # the block pastes as it is, and reads the file
    assert cfg.tickets.points["p"].columns["symptom_text"] == "Problem"
    again = load_tickets(f, 1, "p", cfg)
    assert again.rows_loaded == 2 and not again.rejects


def test_a_header_contradicted_by_its_values_loses_its_role():
    """``Serial`` holding free text is not the serial; ``Resolution`` of Done/Fixed is not the action."""
    lay = recognise(["Ticket", "Serial", "Summary", "Resolution", "Comment"],
                    [["T-1", "card makes noise", "GPU hot", "Done", "cleaned the filter"],
                     ["T-2", "see attached", "fan", "Fixed", "replaced fan 2"]])
    assert "serial" not in lay.columns
    assert lay.columns["action_text"] == 4 and lay.ok


def test_a_required_role_missing_names_the_best_guess():
    lay = recognise(["No.", "When", "What happened"],
                    [["17", "2025-03-05", "GPU 3 dropped off the bus during the nightly job, replaced"],
                     ["18", "2025-03-06", "Fan 2 reads 0 RPM; reseated the fan module, fine since"]])
    assert not lay.ok and "no ticket_id column" in lay.problems
    block = lay.config_block("p")
    assert 'ticket_id = "No."' in block and 'symptom_text = "What happened"' in block


def test_free_text_that_fills_no_role_keeps_the_symptom_out_of_the_action(tmp_path):
    """No action column but a ``Notes`` column of free text: what was done may be there, so
    the action is left empty (for review), not read from the symptom ("RMA requested")."""
    text = ("Ticket #,Symptom,Notes\n"
            "T-1,GPU fell off the bus; RMA requested,Reseated the card and ran dcgmi diag level 3: passed\n"
            "T-2,Fan noise,Cleaned the dust filter on the front of the chassis\n")
    row = load_tickets(write(tmp_path / "p" / "t.csv", text), 1, "p", CFG).tables["tickets_raw"].row(0, named=True)
    assert row["action_text"] is None and row["part_text"] == row["symptom_text"] == "GPU fell off the bus; RMA requested"
    text = "Ticket #,Symptom\nT-1,GPU fell off the bus; RMA requested\n"  # the description is all there is
    row = load_tickets(write(tmp_path / "p" / "u.csv", text), 1, "p", CFG).tables["tickets_raw"].row(0, named=True)
    assert row["action_text"] == row["symptom_text"]


def test_jira_and_case_numbers_of_one_ticket_are_not_rivals():
    lay = recognise(["rmaNumber", "caseNumber", "problem"], [["R-1", "C-9", "x y z"], ["R-2", "C-3", "a b"]])
    assert lay.ok and lay.columns["ticket_id"] == 0


def test_is_gpu_part():
    assert all(map(is_gpu_part, ["GPU Module", "H100 SXM5 80GB", "显卡", "GPU", "Graphics card"]))
    assert not any(map(is_gpu_part, ["GPU Baseboard", "GPU riser", "Fan Module", "电源", "NVLink bridge", None]))


def _toml(block: str) -> dict:
    import tomllib

    return tomllib.loads(block)


# -- no column fills two text roles -------------------------------------------------------

TEXT_ROLES = ("part_text", "title", "symptom_text", "description", "action_text", "swap_part_text")
_HEADERS = st.one_of(st.sampled_from([a for r in (*TEXT_ROLES, "ticket_id", "serial", "host") for a in FIELD_ALIASES[r]]),
                     st.text(max_size=12))
_CELLS = st.one_of(st.none(), st.text(max_size=30), st.integers(0, 10**13),
                   st.sampled_from(["GPU fell off the bus", "Done", "2025-03-05 14:22", "1652221034411", "gpu-017"]))


@settings(max_examples=100, deadline=None)
@given(st.lists(_HEADERS, min_size=1, max_size=10).flatmap(
    lambda hs: st.tuples(st.just(hs), st.lists(st.lists(_CELLS, min_size=len(hs), max_size=len(hs)), max_size=6))))
def test_no_column_fills_two_text_roles(case):
    headers, rows = case
    lay = recognise(headers, rows)
    cols = [c for r, c in lay.columns.items()]
    assert len(cols) == len(set(cols))  # no column fills two roles of any kind
    text_cols = [lay.columns[r] for r in TEXT_ROLES if r in lay.columns] + [j for js in lay.more.values() for j in js]
    assert len(text_cols) == len(set(text_cols))
    for c in lay.chosen.values():
        assert 0 <= c.score <= 100


def test_fault_ticket_words_of_ops_platforms_and_helpdesks_are_read():
    """故障单号 / 上报时间 / 节点IP / 更换备件 (a 运维平台 fault export) and Card / Fix Applied
    (a helpdesk export): each header names its role, nothing is left unused."""
    lay = recognise(["故障单号", "上报时间", "节点IP", "卡位", "更换备件", "故障描述", "维修结果"],
                    [["SH002303", "2025-03-04 05:19", "10.20.0.42", "第3卡", "加速卡0", "卡死4小时", "更换GPU"],
                     ["SH002304", "2025-03-05 11:02", "10.20.0.43", "第5卡", "", "掉卡", "重启"]])
    assert lay.ok
    assert {r: lay.columns[r] for r in ("ticket_id", "opened_at", "host", "slot", "part_text")} == \
        {"ticket_id": 0, "opened_at": 1, "host": 2, "slot": 3, "part_text": 4}
    lay = recognise(["Incident", "Reported On", "Host", "Card", "Issue Summary", "Fix Applied"],
                    [["INC-1", "03/02/2025 01:05", "sjc-gpu009", "card #7", "XID 120", "GPU reset"],
                     ["INC-2", "03/03/2025 00:17", "sjc-gpu014", "card #2", "temp alarm", "replaced part"]])
    assert lay.ok and lay.columns["slot"] == 3 and lay.columns["action_text"] == 5
