"""The tickets -> normalize -> link stages together, and ``fleetfault normalize``, with a
stand-in matcher (tests/fake_matcher.py) so only this code is under test."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

import fake_matcher
from pipeline.config import config_from_dict
from pipeline.run import RunContext

CFG = config_from_dict({"sites": {"sha": {"tz": "Asia/Shanghai"}}})

HEADER = "工单号,开单时间,主机名,槽位,序列号,故障部件,故障现象,处理措施,状态\n"
DUMP_1 = HEADER + (
    "SH-1,01/03/2025 10:00,gpu-sha-a01,3,SN:1654620012345,显卡,掉卡,,处理中\n"
    "SH-2,02/03/2025 11:00,gpu-sha-a01,4,1654620012364,风扇,风扇异响,更换,已关闭\n"
)
# A week later the same export again: SH-1 has moved on, SH-3 is new.
DUMP_2 = HEADER + (
    "SH-1,01/03/2025 10:00,gpu-sha-a01,3,SN:1654620012345,显卡,掉卡,更换显卡,已关闭\n"
    "SH-2,02/03/2025 11:00,gpu-sha-a01,4,1654620012364,风扇,风扇异响,更换,已关闭\n"
    "SH-3,25/03/2025 09:00,gpu-sha-a01,3,,板子冒烟,看起来烧了,返厂,处理中\n"
)


@pytest.fixture
def data(tmp_path) -> Path:
    d = tmp_path / "data"
    (d / "tickets" / "sha-sp1").mkdir(parents=True)
    (d / "tickets" / "sha-sp1" / "2025-03-07.csv").write_bytes(DUMP_1.encode("gbk"))
    (d / "tickets" / "sha-sp1" / "2025-03-28.csv").write_bytes(DUMP_2.encode("gbk"))
    (d / "inventory.csv").write_text(
        "serial,model,vendor,host,slot,site,batch,installed_at,removed_at\n"
        "1654620012345,H100,oem,gpu-sha-a01,3,sha,b1,2024-01-01,2025-03-10\n"
        "1654620099001,H100,oem,gpu-sha-a01,3,sha,b2,2025-03-10,\n"
        "1654620012346,H100,oem,gpu-sha-a01,4,sha,b1,2024-01-01,\n"
    )
    return d


def run_stages(wh, data, names=("inventory", "tickets", "normalize", "link")):
    from pipeline.run import resolve_stage

    targets = {"inventory": "pipeline.ingest.inventory:run", "tickets": "pipeline.ingest.tickets:run",
               "normalize": "pipeline.normalize.stage:run", "link": "pipeline.link.tickets:run"}
    ctx = RunContext(CFG, wh, data, data.parent / "out")
    for n in names:
        resolve_stage(targets[n])(ctx)
    return ctx


def test_stages_keep_the_latest_version_code_and_link(wh, data, monkeypatch):
    fake_matcher.install(monkeypatch)
    ctx = run_stages(wh, data)
    t = wh.engine.pl("SELECT * FROM tickets ORDER BY ticket_id", step="test")
    assert t["ticket_id"].to_list() == ["SH-1", "SH-2", "SH-3"]
    sh1, sh2, sh3 = t.to_dicts()
    assert (sh1["status"], sh1["action_text"], sh1["action_code"]) == ("已关闭", "更换显卡", "REPLACE")
    assert (sh1["part_code"], sh1["symptom_code"], sh1["review"]) == ("GPU", "FELL_OFF_BUS", False)
    assert sh1["opened_at"] == datetime(2025, 3, 1, 2, 0)
    assert (sh1["serial"], sh1["serial_text"], sh1["link_method"]) == ("1654620012345", "SN:1654620012345", "serial_exact")
    assert (sh2["serial"], sh2["link_method"]) == ("1654620012346", "serial_fuzzy")  # ...364 for ...346
    # No serial: host+slot on 25 March is the replacement GPU.
    assert (sh3["serial"], sh3["link_method"], sh3["review"]) == ("1654620099001", "host_slot", True)
    assert sh3["part_code"] is None and sh3["action_code"] is None
    assert ctx.report("normalize").rows_out == 3 and "2 of 3 tickets await review" in ctx.report("normalize").notes[0]
    # Idempotent: a second run changes nothing.
    run_stages(wh, data)
    assert wh.engine.pl("SELECT * FROM tickets ORDER BY ticket_id", step="test").equals(t)


def test_reloaded_dump_replaces_its_rows(wh, data, monkeypatch):
    fake_matcher.install(monkeypatch)
    run_stages(wh, data)
    f = data / "tickets" / "sha-sp1" / "2025-03-28.csv"
    f.write_bytes((DUMP_2.replace("板子冒烟", "GPU 冒烟")).encode("gbk"))
    run_stages(wh, data)
    assert wh.engine.scalar("SELECT count(*) FROM tickets_raw", step="test") == 5
    assert wh.engine.scalar("SELECT part_code FROM tickets WHERE ticket_id = 'SH-3'", step="test") == "GPU"


def test_normalize_command_writes_contract_columns(cli, data, tmp_path, monkeypatch):
    from pipeline.normalize.commands import NORMALIZE_COLUMNS

    fake_matcher.install(monkeypatch)
    files = sorted((data / "tickets" / "sha-sp1").iterdir())
    (tmp_path / "fleetfault.toml").write_text('[sites.sha]\ntz = "Asia/Shanghai"\n')
    out = tmp_path / "coded.csv"
    assert cli("normalize", *files, "-o", out) == 0
    got = pl.read_csv(out, infer_schema=False)
    assert got.columns == NORMALIZE_COLUMNS
    assert got["ticket_id"].to_list() == ["SH-1", "SH-2", "SH-3"]
    row = got.row(0, named=True)
    assert (row["serial"], row["service_point"], row["action_code"], row["opened_at"][:19]) == (
        "SN:1654620012345", "sha-sp1", "REPLACE", "2025-03-01T02:00:00")


def test_normalize_command_exits_1_on_rejected_rows_and_on_unknown_layout(cli, tmp_path, monkeypatch, capsys):
    fake_matcher.install(monkeypatch)
    bad = tmp_path / "p" / "t.csv"
    bad.parent.mkdir()
    bad.write_text("Ticket #,Opened,Part,Symptom,Action\nT-1,2025-03-01,GPU,Xid 79,RMA\nT-2,2025-03-01,GPU\n")
    assert cli("normalize", bad, "-o", tmp_path / "o.parquet") == 1
    assert pl.read_parquet(tmp_path / "o.parquet")["ticket_id"].to_list() == ["T-1"]
    assert "t.csv:3: field_count" in capsys.readouterr().err
    odd = tmp_path / "p" / "odd.csv"
    odd.write_text("a,b\n1,2\n")
    assert cli("normalize", odd, "-o", tmp_path / "o.csv") == 1
    assert "odd.csv:-: unrecognised_layout: " in capsys.readouterr().err


def test_formula_cell_is_stored_as_text_and_exported_neutralized(cli, wh, data, tmp_path, monkeypatch):
    fake_matcher.install(monkeypatch)
    f = data / "tickets" / "sha-sp1" / "2025-03-28.csv"
    f.write_bytes(DUMP_2.replace("看起来烧了", "=cmd|' /C calc'!A0").encode("gbk"))
    run_stages(wh, data)
    assert wh.engine.scalar("SELECT symptom_text FROM tickets WHERE ticket_id = 'SH-3'", step="test") == "=cmd|' /C calc'!A0"
    wh.close()
    out = tmp_path / "t.csv"
    assert cli("export", "tickets", "-o", out, "--warehouse", tmp_path / "wh.duckdb") == 0
    got = pl.read_csv(out, infer_schema=False).filter(pl.col("ticket_id") == "SH-3")
    assert got["symptom_text"].item() == "'=cmd|' /C calc'!A0" and got["serial"].item() == "1654620099001"
