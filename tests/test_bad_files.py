"""Every bad file is quarantined whole with a reason that names what is wrong, for every
input kind, and the night goes on (exit 1, every output written); a wholly unreadable
inventory is one line naming the file (exit 2)."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import duckdb
import pytest

from pipeline.cli import main
from pipeline.ingest.sniff import file_problem, problem_of, read_judged
from pipeline.vocab.files import read_bytes

SMI_HEADER = ("timestamp, name, pci.bus_id, serial, uuid, index, temperature.gpu, utilization.gpu [%], "
              "memory.used [MiB], power.draw [W]")
SMI_LINE = ("2025/03/01 08:{m:02d}:05.222, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 1650523300349, "
            "GPU-0fbd6a98-0d94-7e0b-4a8b-bbad5ab5943c, 0, 62, 100 %, 50729 MiB, 644.56 W")
KERNEL = ("2025-03-01T03:01:07+0000 h1 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=0, name=x, "
          "GPU has fallen off the bus.\n")
INVENTORY = ("serial,model,vendor,host,slot,site,batch,installed_at,removed_at\n"
             "1650523300349,H100 80GB HBM3,OEM-A,h1,0,sha,B1,2024-01-01,\n")
TICKETS = "ticket_id,opened_at,serial,description\nT1,2025-03-02 10:00,1650523300349,GPU fell off the bus; replaced\n"


def _noise(n: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(n)


def _smi_text(lines: int = 30) -> str:
    return "\n".join([SMI_HEADER] + [SMI_LINE.format(m=i % 60) for i in range(lines)]) + "\n"


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "empty_file"),
    (b"\n  \r\n\t\n", "empty_file"),
    (gzip.compress(mtime=0, data=b""), "empty_file"),
    (b"\x1f\x8b" + _noise(300), "bad_gzip"),
    (_noise(3000), "binary_file"),
    (gzip.compress(mtime=0, data=_noise(3000)), "binary_file"),
    (b"\x89PNG\r\n\x1a\n" + _noise(200), "binary_file"),
    (b"LPKSHHRH" + _noise(200), "binary_file"),
    (_smi_text().encode("utf-16"), "bad_encoding"),
    (_smi_text().encode("utf-16-le"), "bad_encoding"),
    ("时间,温度,显卡掉卡\n".encode("gbk") * 40, "bad_encoding"),
    (_smi_text().encode(), None),
    (gzip.compress(mtime=0, data=_smi_text().encode()), None),
    (KERNEL.encode() + b"\x00" * 5000 + KERNEL.encode(), None),  # a crash's NUL padding is not binary
    ("caf\xe9 na\xefve line\n".encode("latin-1") * 50, None),  # a few stray bytes are the reader's business
    (_smi_text(2000).encode() + _noise(3000), None),  # only the head is judged
    (gzip.compress(mtime=0, data=_smi_text(2000).encode() + _noise(3000)), None),
    (_noise(100_000), "binary_file"),
])
def test_file_problem_names_what_is_wrong(tmp_path, data, reason):
    path = tmp_path / "f.csv.gz"
    path.write_bytes(data)
    got = file_problem(path)
    assert (got.reason if got else None) == reason, got
    # A reader that reads the whole file once gets the same verdict, whatever it decodes.
    for flags in ({}, {"utf16": True, "legacy": True}, {"gzip": False}, {"legacy": True, "gzip": False}):
        assert problem_of(data, **flags) == file_problem(path, **flags), flags
        assert read_judged(path, **flags) == (data, file_problem(path, **flags)), flags


def test_an_unreadable_file_read_whole_is_named(tmp_path):
    assert read_judged(tmp_path / "missing.log") == (b"", file_problem(tmp_path / "missing.log"))
    assert read_judged(tmp_path)[1].reason == "unreadable_file"  # a folder


def test_ticket_and_inventory_readers_judge_with_their_own_encodings(tmp_path):
    gbk = tmp_path / "t.csv"
    gbk.write_bytes("工单号,故障描述\nT1,显卡掉卡\n".encode("gbk") * 40)
    assert file_problem(gbk, utf16=True, legacy=True) is None  # tickets decode GBK and UTF-16
    u16 = tmp_path / "u.csv"
    u16.write_bytes(TICKETS.encode("utf-16"))
    assert file_problem(u16, utf16=True, legacy=True) is None
    gz = tmp_path / "g.csv"
    gz.write_bytes(gzip.compress(TICKETS.encode()))
    assert file_problem(gz, gzip=False).reason == "binary_file" and "gunzip" in file_problem(gz, gzip=False).detail


def test_gzip_damage_finds_a_cut_or_a_tail_of_garbage(tmp_path):
    whole = gzip.compress(_smi_text(2000).encode())
    cases = {"ok": whole + gzip.compress(b"second member\n"), "cut": whole[: len(whole) // 2],
             "garbage": whole + b"not gzip", "plain": b"plain text\n"}
    found = {}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        found[name] = read_bytes(tmp_path / name)[1]
    assert found["ok"] is None and found["plain"] is None
    assert "cut short" in found["cut"] and "garbage" in found["garbage"]


def _layout(root: Path) -> Path:
    """A one-GPU night with good files and a broken file of every kind beside them."""
    data = root / "data"
    smi, kern, tick = data / "telemetry" / "h1", data / "kernel" / "h1", data / "tickets" / "sha-sp1"
    for d in (smi, kern, tick):
        d.mkdir(parents=True)
    (data / "inventory.csv").write_text(INVENTORY)
    (smi / "smi-20250301.csv").write_text(_smi_text())
    (smi / "empty.csv").write_bytes(b"")
    (smi / "empty.csv.gz").write_bytes(gzip.compress(b""))
    (smi / "noise.csv.gz").write_bytes(_noise(4000))
    (smi / "noise-in-gzip.csv.gz").write_bytes(gzip.compress(_noise(4000)))
    (smi / "broken.csv.gz").write_bytes(b"\x1f\x8b\x08\x00" + _noise(500))
    (smi / "powershell.csv").write_bytes(_smi_text().encode("utf-16"))
    (kern / "kern.log").write_text(KERNEL)
    (kern / "kern.log.1.gz").write_bytes(_noise(3000))
    (kern / "dmesg.log").write_bytes(b"")
    lines = "".join(KERNEL.replace("pid=0", f"pid={i}") + f"noise {_noise(30, i).hex()}\n" for i in range(400))
    cut = gzip.compress(lines.encode())
    (kern / "syslog.2.gz").write_bytes(cut[: len(cut) // 2])
    (tick / "good.csv").write_text(TICKETS)
    (tick / "zero.csv").write_bytes(b"")
    (tick / "noise.csv").write_bytes(_noise(2000))
    (tick / "cut.json").write_text('[{"ticket_id": "T2", "opened_at": "2025-03-03", "description": "GPU fel')
    (tick / "none.json").write_text("[]")
    (tick / "cut.xlsx").write_bytes(b"PK\x03\x04" + _noise(300))
    (tick / "noise.xlsx").write_bytes(_noise(300))
    (tick / "old.xls").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + _noise(600))
    return data


def test_bad_files_are_quarantined_and_the_night_goes_on(tmp_path, capsys):
    data, wh, out = _layout(tmp_path), tmp_path / "w.duckdb", tmp_path / "out"
    assert main(["run", "--data", str(data), "--warehouse", str(wh), "--out", str(out), "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--warehouse {wh}" in err[0]  # the hint names the warehouse used
    con = duckdb.connect(str(wh), read_only=True)
    whole = dict(con.execute("SELECT source_file, reason FROM quarantine WHERE line_no IS NULL").fetchall())
    assert whole == {
        "telemetry/h1/empty.csv": "empty_file", "telemetry/h1/empty.csv.gz": "empty_file",
        "telemetry/h1/noise.csv.gz": "binary_file", "telemetry/h1/noise-in-gzip.csv.gz": "binary_file",
        "telemetry/h1/broken.csv.gz": "bad_gzip", "telemetry/h1/powershell.csv": "bad_encoding",
        "kernel/h1/kern.log.1.gz": "binary_file", "kernel/h1/dmesg.log": "empty_file",
        "kernel/h1/syslog.2.gz": "bad_gzip",  # cut short: its events before the cut are loaded
        "tickets/sha-sp1/zero.csv": "empty_file", "tickets/sha-sp1/noise.csv": "binary_file",
        "tickets/sha-sp1/cut.xlsx": "bad_xlsx",
        "tickets/sha-sp1/noise.xlsx": "bad_xlsx", "tickets/sha-sp1/old.xls": "bad_xls",
    }
    # A JSON dump cut short keeps its whole records; the damage is quarantined where it starts.
    assert con.execute("SELECT DISTINCT reason FROM quarantine WHERE source_file = 'tickets/sha-sp1/cut.json'"
                       ).fetchall() == [("bad_json",)]
    # Per file, read = loaded + quarantined; every file is registered, the empty ones too.
    files = con.execute("SELECT path, rows_read, rows_loaded, rows_quarantined FROM files").fetchall()
    assert len(files) == 1 + 7 + 4 + 8
    assert all(read == loaded + rej for _, read, loaded, rej in files)
    loaded = {p: n for p, _, n, _ in files}
    assert loaded["telemetry/h1/smi-20250301.csv"] == 30 and loaded["tickets/sha-sp1/good.csv"] == 1
    assert loaded["kernel/h1/kern.log"] == 1 and loaded["kernel/h1/syslog.2.gz"] > 0
    # Every output of the night was written, and the report lists the files that gave nothing.
    for name in ("report.html", "predictions.csv", "fleetfault.prom"):
        assert (out / name).stat().st_size > 0, name
    report = (out / "report.html").read_text()
    assert "Files that gave no rows" in report and "tickets/sha-sp1/zero.csv" in report
    assert "empty_file" in report


def test_a_zero_byte_ticket_export_alone_no_longer_stops_the_night(tmp_path):
    data = tmp_path / "data"
    (data / "tickets" / "p").mkdir(parents=True)
    (data / "inventory.csv").write_text(INVENTORY)
    (data / "tickets" / "p" / "export.csv").write_bytes(b"")
    assert main(["run", "--data", str(data), "--warehouse", str(tmp_path / "w.duckdb"),
                 "--out", str(tmp_path / "out"), "-q"]) == 1
    assert (tmp_path / "out" / "report.html").exists()


@pytest.mark.parametrize(("content", "says"), [
    (b"", "empty_file"),
    (_noise(2000), "binary_file"),
    (gzip.compress(mtime=0, data=INVENTORY.encode()), "gunzip"),
    (INVENTORY.encode("utf-16"), "bad_encoding"),
    (b"just,some,words\nno,serial,here\n", "lacks the columns"),
])
def test_an_unreadable_inventory_is_one_line_naming_the_file(tmp_path, capsys, content, says):
    data = tmp_path / "data"
    data.mkdir()
    (data / "inventory.csv").write_bytes(content)
    assert main(["run", "--data", str(data), "--warehouse", str(tmp_path / "w.duckdb"),
                 "--out", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(data / "inventory.csv") in err[0] and says in err[0], err


def test_a_bad_inventory_row_is_quarantined_with_its_line(tmp_path):
    from pipeline.ingest.inventory import read_inventory

    path = tmp_path / "inventory.csv"
    huge = '"' + "x" * 200_000 + '"'
    path.write_text(INVENTORY + f"S2,H100,OEM-A,h1,1,sha,B1,{huge},\nS3,H100,OEM-A,h1,2,sha,B1,2024-01-01,\n")
    got = read_inventory(path, 1)
    assert [(r.line_no, r.reason) for r in got.rejects] == [(3, "bad_csv")]
    assert got.rows_loaded == 2 and got.rows_read == got.rows_loaded + len(got.rejects)


def test_an_inventory_with_mac_line_ends_is_read(tmp_path):
    from pipeline.ingest.inventory import read_inventory

    path = tmp_path / "inventory.csv"
    path.write_bytes((INVENTORY + "S2,H100,OEM-A,h1,1,sha,B1,2024-01-01,\n").replace("\n", "\r").encode())
    got = read_inventory(path, 1)
    assert got.rows_loaded == 2 and got.rejects == []


def test_inventory_slots_that_are_no_slot_are_quarantined(tmp_path):
    """Found by the fuzz campaign: 1e309 raised OverflowError, 10**21 broke the table's column."""
    from pipeline.ingest.inventory import read_inventory

    path = tmp_path / "inventory.csv"
    rows = "".join(f"S{i},H100,OEM-A,h1,{slot},sha,B1,2024-01-01,\n" for i, slot in
                   enumerate(["1e309", "1000000000000000000000", "3.5", "-1", "nan", "GPU7"], start=2))
    path.write_text(INVENTORY + rows)
    got = read_inventory(path, 1)
    assert [(r.line_no, r.reason) for r in got.rejects] == [(n, "bad_slot") for n in range(3, 8)]
    assert got.tables["inventory"]["slot"].to_list() == [0, 7]


def test_an_inventory_date_past_the_calendar_end_is_quarantined(tmp_path):
    """Found by the fuzz campaign: 9999-12-31 23:30 in New York is past datetime's end in UTC."""
    from pipeline.ingest.inventory import read_inventory

    path = tmp_path / "inventory.csv"
    path.write_text("serial,host,installed_at\nS1,h1,9999-12-31 23:30\nS2,h1,2024-01-01\n")
    got = read_inventory(path, 1, "America/New_York")
    assert [(r.line_no, r.reason) for r in got.rejects] == [(2, "bad_timestamp")] and got.rows_loaded == 1


def test_a_telemetry_gzip_cut_short_keeps_the_lines_before_the_cut(tmp_path):
    from pipeline.ingest.telemetry import load_file

    text = "\n".join([SMI_HEADER] + [SMI_LINE.format(m=i % 60).replace("644.56", f"{600 + i % 97}.{i:05d}")
                                     for i in range(20000)]) + "\n"
    whole = gzip.compress(text.encode())
    path = tmp_path / "h1" / "smi.csv.gz"
    path.parent.mkdir()
    path.write_bytes(whole[: len(whole) * 2 // 3])
    loaded, _ = load_file(path, 1, host="h1", tz="UTC", fields=None)
    assert [r.reason for r in loaded.rejects][-1] == "bad_gzip"
    assert 10000 < loaded.rows_loaded < 20000  # the lines before the cut, not none of them
    assert loaded.rows_read == loaded.rows_loaded + len(loaded.rejects)
