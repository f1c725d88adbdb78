"""Ticket exports that cannot be read, or whose layout is unsure: each is quarantined with a
reason that says what is wrong, the rest of the night runs, and the run exits 1.
Also ``fleetfault tickets inspect``, and a pasted config block reading a quarantined export."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import openpyxl

from pipeline.config import config_from_dict
from pipeline.ingest.tickets import load_tickets

CFG = config_from_dict({})
GOOD = "Ticket #,Opened,Host,Slot,Serial,Part,Symptom,Action\nT-1,2025-03-05 10:00,gpu-001,3,1654620012345,GPU,Xid 79,RMA\n"
UNSURE = ("Ticket #,Opened,Problem,Issue,Action\n"
          "U-1,2025-03-05 10:00,GPU fell off the bus,job 881 died,replaced GPU\n"
          "U-2,2025-03-06 10:00,fan noise,rack 12 loud,cleaned\n")
RECORDS = [{"id": f"J-{i}", "created": "2025-03-05T10:00:00Z", "symptom": "Xid 79", "action": "reseat"} for i in range(3)]


def write(path: Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode(encoding))
    return path


def reasons(got) -> list[tuple[int | None, str]]:
    return [(r.line_no, r.reason) for r in got.rejects]


def test_an_empty_export_is_empty_file(tmp_path):
    for name in ("t.csv", "t.json", "t.xlsx"):
        got = load_tickets(write(tmp_path / "p" / name, b""), 1, "p", CFG)
        assert reasons(got) == [(None, "empty_file")] and got.rows_read == 1, name
    got = load_tickets(write(tmp_path / "p" / "blank.csv", b"\xef\xbb\xbf \r\n\r\n"), 1, "p", CFG)
    assert reasons(got) == [(None, "empty_file")]


def test_a_json_dump_cut_short_keeps_its_whole_records(tmp_path):
    text = json.dumps({"data": {"list": RECORDS}}, indent=2)
    cut = text[: text.index('"J-2"') + 10]  # killed while writing the third record
    got = load_tickets(write(tmp_path / "p" / "t.json", cut), 1, "p", CFG)
    assert [r["ticket_id"] for r in got.tables["tickets_raw"].to_dicts()] == ["J-0", "J-1"]
    assert reasons(got) == [(3, "bad_json")] and "cut short" in got.rejects[0].detail
    assert got.rows_read == got.rows_loaded + len(got.rejects) == 3


def test_a_json_export_that_is_not_json_is_bad_json(tmp_path):
    got = load_tickets(write(tmp_path / "p" / "t.json", "<html>Session expired, please log in</html>"), 1, "p", CFG)
    assert [r.reason for r in got.rejects] == ["bad_json"] and got.rows_loaded == 0


def test_a_workbook_cut_short_is_bad_xlsx(tmp_path):
    book = openpyxl.Workbook()
    book.active.append(["Ticket #", "Part"])
    book.save(tmp_path / "whole.xlsx")
    cut = (tmp_path / "whole.xlsx").read_bytes()[:300]  # a download that stopped early
    got = load_tickets(write(tmp_path / "p" / "cut.xlsx", cut), 1, "p", CFG)
    assert reasons(got) == [(None, "bad_xlsx")]


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    write(data / "inventory.csv", "serial,model,vendor,host,slot,site,batch,installed_at,removed_at\n"
                                  "1654620012345,H100,oem,gpu-001,3,s,b1,2024-01-01,\n")
    write(data / "tickets" / "good" / "t.csv", GOOD)
    write(data / "tickets" / "good" / "empty.csv", b"")
    write(data / "tickets" / "good" / "cut.json", json.dumps(RECORDS)[:-40])
    write(data / "tickets" / "good" / "broken.xlsx", b"PK\x03\x04" + bytes(200))
    write(data / "tickets" / "odd" / "t.csv", UNSURE)
    return data


def test_the_night_goes_on_past_bad_exports_and_exits_1(cli, tmp_path, capsys):
    data = _data(tmp_path)
    wh, out = tmp_path / "wh.duckdb", tmp_path / "out"
    assert cli("run", "--data", data, "--warehouse", wh, "--out", out, "--quiet") == 1
    assert (out / "report.html").stat().st_size > 0
    con = duckdb.connect(str(wh), read_only=True)
    try:
        got = dict(con.sql("SELECT source_file, list(reason ORDER BY reason) FROM quarantine "
                           "WHERE stage = 'tickets' GROUP BY 1").fetchall())
        loaded = [r[0] for r in con.sql("SELECT ticket_id FROM tickets_raw ORDER BY 1").fetchall()]
    finally:
        con.close()
    assert got == {"tickets/good/empty.csv": ["empty_file"], "tickets/good/cut.json": ["bad_json"],
                   "tickets/good/broken.xlsx": ["bad_xlsx"],
                   "tickets/odd/t.csv": ["unrecognised_layout"]}
    assert loaded == ["J-0", "J-1", "T-1"]
    assert "layout unsure" in capsys.readouterr().out


def test_a_pasted_config_block_reads_the_quarantined_export_next_night(cli, tmp_path, capsys):
    """The export is unchanged, yet read again: the quarantine said its layout was unsure."""
    import tomllib

    data = tmp_path / "data"
    write(data / "tickets" / "odd" / "t.csv", UNSURE)
    wh, out = tmp_path / "wh.duckdb", tmp_path / "out"
    assert cli("run", "--data", data, "--warehouse", wh, "--out", out, "--stage", "tickets", "--quiet") == 1
    with duckdb.connect(str(wh), read_only=True) as con:
        detail = con.execute("SELECT detail FROM quarantine WHERE reason = 'unrecognised_layout'").fetchone()[0]
    block = detail[detail.index("[tickets.points.odd]"):detail.index("\n(")]
    assert tomllib.loads(block)["tickets"]["points"]["odd"]["columns"]["symptom_text"] == "Problem"
    write(tmp_path / "fleetfault.toml", block + "\n")
    assert cli("run", "--data", data, "--warehouse", wh, "--out", out, "--stage", "tickets", "--quiet",
               "--config", tmp_path / "fleetfault.toml") == 0
    with duckdb.connect(str(wh), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM quarantine").fetchone()[0] == 0
        assert con.execute("SELECT list(symptom_text ORDER BY ticket_id) FROM tickets_raw").fetchone()[0] == [
            "GPU fell off the bus", "fan noise"]


def test_tickets_inspect_prints_roles_samples_and_a_block(cli, tmp_path, capsys):
    data = _data(tmp_path)
    assert cli("tickets", "inspect", data / "tickets" / "good" / "t.csv") == 0
    out = capsys.readouterr().out
    assert out.startswith("OK ")
    assert "serial" in out and "1654620012345" in out and 'serial = "Serial"' in out
    assert "[tickets.points.good.columns]" in out
    assert cli("tickets", "inspect", data / "tickets" / "odd" / "t.csv", data / "tickets" / "good" / "empty.csv") == 1
    out = capsys.readouterr().out
    assert "UNSURE" in out and "'Problem' (100) and 'Issue' (100)" in out and "NOT READ" in out and "empty_file" in out


def test_tickets_inspect_skips_a_pivot_sheet_as_the_run_does(cli, capsys):
    book = Path(__file__).parent / "data" / "ticket_layouts" / "cn_xlsx_title_totals" / "华东一区工单汇总-2025-04.xlsx"
    assert cli("tickets", "inspect", book) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK ") and "SKIPPED" in out and "'统计'" in out and "'字典'" not in out  # hidden
    assert 'slot = "故障卡位"' in out and "第3卡 | GPU8 | 5" in out
