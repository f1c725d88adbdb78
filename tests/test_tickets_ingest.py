"""Ticket exports as service points really write them: encodings, title rows, extra sheets,
JSON shapes, broken rows, mangled serials, day/month order, overlapping dumps."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import config_from_dict
from pipeline.ingest.tickets.columns import (
    clean_serial, clean_slot, header_zone, infer_dayfirst, map_columns, parse_when,
)
from pipeline.ingest.tickets import load_tickets, point_tz, ticket_files
from pipeline.run import RunContext

CFG = config_from_dict({
    "sites": {"sha": {"tz": "Asia/Shanghai"}, "fra": {"tz": "Europe/Berlin", "service_points": ["eu-depot"]},
              "sjc": {"tz": "America/Los_Angeles"}},
})

GBK_EXPORT = """上海数据中心 GPU 服务器报修工单导出（2025年3月）
工单号,开单时间,主机名,槽位,序列号,故障部件,故障现象,处理措施,状态
SH-20250301-001,05/03/2025 10:11,gpu-sha-a01,3,SN:1654620012345,显卡,掉卡，nvidia-smi 看不到,更换显卡,已关闭
SH-20250301-002,13/03/2025 09:00,gpu-sha-a02,GPU1,1.65462E+12,内存,内存 ECC 报错,更换内存条,处理中
SH-20250301-003,14/03/2025 21:30,gpu-sha-a03,7,1654620099999,风扇,风扇异响,=cmd|' /C calc'!A0,已关闭
"""


def write(path: Path, data: bytes | str, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode(encoding))
    return path


def rows_of(loaded):
    return loaded.tables["tickets_raw"].sort("line_no").to_dicts()


def test_gbk_csv_with_chinese_headers_and_a_title_row(tmp_path):
    f = write(tmp_path / "sha-sp1" / "2025-03.csv", GBK_EXPORT, "gbk")
    got = load_tickets(f, 7, "sha-sp1", CFG)
    rows = rows_of(got)
    assert [r["ticket_id"] for r in rows] == ["SH-20250301-001", "SH-20250301-002", "SH-20250301-003"]
    assert got.rows_read == 3 and got.rows_loaded == 3 and not got.rejects
    first = rows[0]
    # 13/03 in the same file says day first; Shanghai is UTC+8.
    assert first["opened_at"] == datetime(2025, 3, 5, 2, 11)
    assert (first["host"], first["slot"], first["serial"], first["serial_text"]) == (
        "gpu-sha-a01", 3, "1654620012345", "SN:1654620012345")
    assert (first["part_text"], first["symptom_text"], first["action_text"]) == ("显卡", "掉卡，nvidia-smi 看不到", "更换显卡")
    assert rows[1]["slot"] == 1 and rows[1]["serial"] == "1.65462E+12" and rows[1]["status"] == "处理中"
    assert rows[2]["action_text"] == "=cmd|' /C calc'!A0"  # text, exactly as written
    assert first["file_id"] == 7 and first["line_no"] == 3


def test_bom_csv_english_headers_month_first(tmp_path):
    text = ("\ufeffTicket #,Opened,Hostname,Slot,S/N,Failed Part,Symptom,Action Taken,Status\r\n"
            "SJC-1042,03/14/2025 8:05 PM,gpu-sjc-b07,slot 2,1654620054321,GPU,fell off the bus (Xid 79),RMA,Closed\r\n"
            "SJC-1043,03/05/2025 09:00,gpu-sjc-b08,4, 1654620054322 ,PSU,no power,reseat PSU,Open\r\n")
    f = write(tmp_path / "sjc-repair" / "export.csv", text)
    rows = rows_of(load_tickets(f, 1, "sjc-repair", CFG))
    assert rows[0]["ticket_id"] == "SJC-1042" and rows[0]["slot"] == 2
    # 03/05 read month first (14 in the second field decides), Los Angeles is UTC-8 then.
    assert rows[1]["opened_at"] == datetime(2025, 3, 5, 17, 0)
    assert rows[1]["serial"] == "1654620054322"


def test_am_pm_time_is_read(tmp_path):
    assert parse_when("03/14/2025 8:05 PM", "UTC") == datetime(2025, 3, 14, 20, 5)


def test_utf16_tab_separated_excel_unicode_text(tmp_path):
    text = "TicketID\tCreated\tServer\tSN\tComponent\tIssue\tResolution\r\nFRA-7\t2025-03-30 02:30\tgpu-fra-01\t1654620011111\tGPU卡\tXid 48 DBE\t返厂更换\r\n"
    f = write(tmp_path / "eu-depot" / "t.csv", text.encode("utf-16"))
    rows = rows_of(load_tickets(f, 1, "eu-depot", CFG))
    # eu-depot is a service point of fra (Berlin): 02:30 on the spring-forward night does not exist.
    assert rows[0]["opened_at"] == datetime(2025, 3, 30, 1, 30)
    assert rows[0]["part_text"] == "GPU卡" and rows[0]["action_text"] == "返厂更换"


def test_xlsx_title_row_second_sheet_number_cells_and_formula_text(tmp_path):
    import openpyxl

    book = openpyxl.Workbook()
    ws = book.active
    ws.title = "工单"
    ws.append(["Frankfurt depot - GPU tickets - exported 2025-04-01"])
    ws.append([])
    ws.append(["Case No.", "Date", "Node", "GPU Slot", "Serial Number", "Part", "Fault Description", "Repair Action"])
    ws.append(["C-1", datetime(2025, 3, 3, 12, 0), "gpu-fra-02", 5, 1654620012345, "graphics card", "GPU lost", "replaced"])
    ws.append(["C-2", "04.03.2025 08:00", "gpu-fra-03", 0, 1654620012346.0, "DIMM", "=HYPERLINK(\"http://x\")", "reseat"])
    stats = book.create_sheet("Summary")
    stats.append(["Month", "Tickets"])
    stats.append(["2025-03", 2])
    f = tmp_path / "eu-depot" / "april.xlsx"
    f.parent.mkdir(parents=True)
    book.save(f)
    got = load_tickets(f, 1, "eu-depot", CFG)
    rows = rows_of(got)
    assert [r["ticket_id"] for r in rows] == ["C-1", "C-2"] and not got.rejects
    assert rows[0]["serial"] == rows[0]["serial_text"] == "1654620012345"
    assert rows[1]["serial"] == "1654620012346"
    assert rows[0]["opened_at"] == datetime(2025, 3, 3, 11, 0)  # Berlin, UTC+1
    assert rows[1]["opened_at"] == datetime(2025, 3, 4, 7, 0)
    assert rows[1]["symptom_text"] == '=HYPERLINK("http://x")' and rows[1]["sheet"] == "工单"
    assert got.rows_read == got.rows_loaded + len(got.rejects)


@pytest.mark.parametrize("shape", ["list", "records", "jsonl"])
def test_json_shapes(tmp_path, shape):
    recs = [{"ticketId": "J-1", "createdAt": "2025-03-02T10:00:00+08:00", "hostname": "gpu-sha-a01", "sn": "1654620012345",
             "part": "GPU", "symptom": "Xid 79", "action": "reseat", "tags": ["urgent"]},
            {"ticketId": "J-2", "createdAt": 1740967200000, "hostname": "gpu-sha-a02", "sn": None,
             "part": "fan", "symptom": "noise", "action": "replace"}]
    if shape == "list":
        f = write(tmp_path / "sha-json" / "t.json", json.dumps(recs, ensure_ascii=False))
    elif shape == "records":
        f = write(tmp_path / "sha-json" / "t.json", json.dumps({"exported": "2025-03-03", "records": recs}))
    else:
        f = write(tmp_path / "sha-json" / "t.jsonl", "\n".join(json.dumps(r) for r in recs) + "\n")
    rows = rows_of(load_tickets(f, 1, "sha-json", CFG))
    assert [r["ticket_id"] for r in rows] == ["J-1", "J-2"]
    assert rows[0]["opened_at"] == datetime(2025, 3, 2, 2, 0)
    assert rows[1]["opened_at"] == datetime(2025, 3, 3, 2, 0)  # epoch milliseconds are UTC
    assert rows[1]["serial"] is None


def test_jsonl_broken_line_is_quarantined_rest_loaded(tmp_path):
    f = write(tmp_path / "p" / "t.jsonl", '{"ticket_id": "A", "part": "GPU"}\n{"ticket_id": "B", "part": \n{"ticket_id": "C", "part": "fan"}\n')
    got = load_tickets(f, 1, "p", CFG)
    assert [r["ticket_id"] for r in rows_of(got)] == ["A", "C"]
    assert [(r.line_no, r.reason) for r in got.rejects] == [(2, "bad_json")]
    assert got.rows_read == 3


def test_broken_rows_are_quarantined_with_reasons(tmp_path):
    text = ("Ticket #,Opened,Host,Part,Symptom,Action\n"
            "T-1,2025-03-01 10:00,h1,GPU,Xid 79,replace\n"
            "T-2,2025-03-01 11:00,h2,GPU\n"                       # truncated
            "T-3,yesterday-ish,h3,fan,noise,replace\n"            # unreadable date
            ",2025-03-01 12:00,h4,PSU,no power,replace\n"          # no ticket id
            "T-5,2025-03-02 10:00,h5,\"DIMM, slot B2\",ECC,\"replace\nDIMM\"\n"  # quoted newline: fine
            "T-6,2025-03-02 11:00,h6,GPU,hot,clean,EXTRA\n"       # one field too many
            "Ticket #,Opened,Host,Part,Symptom,Action\n")          # header again (pasted dumps): skipped
    f = write(tmp_path / "p" / "t.csv", text)
    got = load_tickets(f, 1, "p", CFG)
    assert [r["ticket_id"] for r in rows_of(got)] == ["T-1", "T-5"]
    assert [(r.line_no, r.reason) for r in got.rejects] == [
        (3, "field_count"), (4, "bad_timestamp"), (5, "missing_ticket_id"), (8, "field_count")]
    assert got.rejects[0].raw == "T-2,2025-03-01 11:00,h2,GPU"
    assert rows_of(got)[1]["action_text"] == "replace\nDIMM"
    assert got.rows_read == got.rows_loaded + len(got.rejects) == 6


def test_undecodable_file_is_quarantined_whole_as_bad_encoding(tmp_path):
    f = write(tmp_path / "p" / "bad.csv", b"Ticket #,Part\nT-1,\xff\xfe\xfa\x80\x80 card\n\x81\n")
    got = load_tickets(f, 1, "p", CFG)
    assert got.rows_loaded == 0 and [r.reason for r in got.rejects] == ["bad_encoding"]
    assert "encoding" in got.rejects[0].detail


def test_configured_encoding_and_columns(tmp_path):
    cfg = config_from_dict({"tickets": {"points": {"odd": {
        "encoding": "big5", "dayfirst": True,
        "columns": {"ticket_id": "Ref", "part_text": "What broke", "opened_at": "When", "symptom_text": "Notes"}}}}})
    f = write(tmp_path / "odd" / "t.csv", "Ref,When,What broke,Notes\nR1,01/02/2025,顯示卡,當機\n", "big5")
    rows = rows_of(load_tickets(f, 1, "odd", cfg))
    assert rows[0]["opened_at"] == datetime(2025, 2, 1) and rows[0]["part_text"] == "顯示卡"


def test_unrecognised_layout_names_the_columns(tmp_path):
    f = write(tmp_path / "p" / "t.csv", "foo,bar,baz\n1,2,3\n")
    got = load_tickets(f, 1, "p", CFG)
    (rej,) = got.rejects
    assert rej.reason == "unrecognised_layout" and rej.line_no is None and got.rows_read == 1
    assert "['foo', 'bar', 'baz']" in rej.detail and "[tickets.points.p.columns]" in rej.detail


@pytest.mark.parametrize("headers, want", [
    (["工单号", "故障部件", "故障现象", "处理措施", "序列号", "开单时间"],
     {"ticket_id": 0, "part_text": 1, "symptom_text": 2, "action_text": 3, "serial": 4, "opened_at": 5}),
    (["ticketId", "serialNumber", "hostName", "failedPart"], {"ticket_id": 0, "serial": 1, "host": 2, "part_text": 3}),
    (["Ticket No.", "SN", "Host/主机名", "槽位", "Symptom"], {"ticket_id": 0, "serial": 1, "slot": 3, "symptom_text": 4}),
    (["Tciket #", "Sympton"], {"ticket_id": 0, "symptom_text": 1}),  # typos
    (["Case #", "Opened (ET)", "Server", "Location", "GPU", "Serial", "Category", "Summary", "Resolution Notes"],
     {"ticket_id": 0, "opened_at": 1, "host": 2, "slot": 4, "serial": 5, "part_text": 6, "title": 7,
      "action_text": 8}),
    (["case_number", "created_utc", "board_sn", "failed_component", "failure_mode", "corrective_action"],
     {"ticket_id": 0, "opened_at": 1, "serial": 2, "part_text": 3, "symptom_text": 4, "action_text": 5}),
])
def test_header_recognition(headers, want):
    got = map_columns(headers)
    assert {k: v for k, v in got.items() if k in want} == want


@pytest.mark.parametrize("cell, want", [
    ("SN:1654620012345", "1654620012345"), ("S/N：1654620012345", "1654620012345"), ("sn 1654620012345", "1654620012345"),
    (1654620012345, "1654620012345"), (1654620012345.0, "1654620012345"), ("1654620012345.0", "1654620012345"),
    ("1.65462E+12", "1.65462E+12"), ("1.654620012345E+12", "1654620012345"), ("'1654620012345", "1654620012345"),
    ("１６５４６２００１２３４５", "1654620012345"), ("pqr-0012 ", "PQR-0012"), ("", None), (None, None),
])
def test_serial_cleaning(cell, want):
    assert clean_serial(cell) == want


def test_slot_and_dayfirst_helpers():
    assert [clean_slot(v) for v in ("GPU3", "slot 7", "#2", "3号卡", 4.0, "n/a")] == [3, 7, 2, 3, 4, None]
    assert infer_dayfirst(["01/02/2025", "25/02/2025"], False) is True
    assert infer_dayfirst(["01/02/2025", "02/25/2025"], True) is False
    assert infer_dayfirst(["01/02/2025"], True) is True


def test_point_zone_resolution():
    assert point_tz(CFG, "eu-depot") == "Europe/Berlin"        # listed under the site
    assert point_tz(CFG, "sha-sp1") == "Asia/Shanghai"         # name starts with the site
    assert point_tz(CFG, "elsewhere") == "UTC"


def test_stage_loads_points_quarantines_and_is_incremental(wh, tmp_path):
    from pipeline.ingest.tickets import run

    data = tmp_path / "data"
    write(data / "tickets" / "sha-sp1" / "2025-03.csv", GBK_EXPORT, "gbk")
    write(data / "tickets" / "p2" / "bad.csv", b"\xff\xfe\xfa\x80\x80\n\x81")
    write(data / "tickets" / "p2" / "notes.txt.bak", "ignored")
    assert [p for p, _ in ticket_files(data)] == ["p2", "sha-sp1"]
    ctx = RunContext(CFG, wh, data, tmp_path / "out")
    run(ctx)
    assert wh.engine.scalar("SELECT count(*) FROM tickets_raw", step="test") == 3
    assert wh.engine.rows("SELECT source_file, reason FROM quarantine", step="test") == [("tickets/p2/bad.csv", "bad_encoding")]
    rep = ctx.report("tickets")
    assert (rep.rows_loaded, rep.rows_quarantined) == (3, 1)
    ctx2 = RunContext(CFG, wh, data, tmp_path / "out")
    run(ctx2)
    assert ctx2.report("tickets").unchanged == 2 and wh.engine.scalar("SELECT count(*) FROM tickets_raw", step="test") == 3


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.integers(), st.floats(allow_nan=True), st.none()))
def test_cell_helpers_never_raise_unexpectedly(value):
    s = clean_serial(value)
    assert s is None or (s == s.strip() and s)
    clean_slot(value)
    try:
        parse_when(value, "Asia/Shanghai", dayfirst=True)
    except ValueError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=20), max_size=12))
def test_map_columns_never_raises_and_uses_each_header_once(headers):
    got = map_columns(headers)
    assert len(set(got.values())) == len(got)


def test_a_zone_named_in_the_header_wins_over_the_points_zone(tmp_path):
    text = "Case #,Opened (ET),created_utc,Summary\nN-1,2025-03-10 09:00,2025-03-10 09:00,GPU lost\n"
    f = write(tmp_path / "sha-noc" / "t.csv", text)
    row = rows_of(load_tickets(f, 1, "sha-noc", CFG))[0]
    assert row["opened_at"] == datetime(2025, 3, 10, 13, 0)  # New York, already on daylight time
    assert header_zone("created_utc") == "UTC" and header_zone("报修时间（北京时间）") == "Asia/Shanghai"


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(["t.csv", "t.json", "t.jsonl"]))
def test_arbitrary_bytes_load_or_are_quarantined_never_raise(tmp_path_factory, data, name):
    f = tmp_path_factory.mktemp("fuzz") / name
    f.write_bytes(b"Ticket #,Opened,Part\n" + data if name == "t.csv" else data)
    got = load_tickets(f, 1, "p", CFG)
    assert all(r.reason and r.detail for r in got.rejects)
    assert got.rows_read == got.rows_loaded + len(got.rejects)
    assert got.tables["tickets_raw"].height == got.rows_loaded
