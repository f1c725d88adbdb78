"""The xid stage end to end: de-duplication, GPU linking, reloads, the catalog and the CLI."""

from __future__ import annotations

import gzip
from datetime import date, datetime
from pathlib import Path

import polars as pl
import pytest

from pipeline.config import config_from_dict
from pipeline.ingest.kernel.stage import CONTRACT_COLUMNS, parse_xid_files
from pipeline.ingest.kernel.catalog import SEVERITIES, SYMPTOMS, classify, load_catalog
from pipeline.run import run_pipeline


UUID = "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
DMESG = f"""[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-045) #115-Ubuntu SMP
[    1.000000] rtc_cmos 00:00: setting system clock to 2024-03-05T02:00:00 UTC (1709604000)
[    6.100000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023
[ 1234.500000] NVRM: GPU at PCI:0000:3b:00: {UUID}
[ 1234.500001] NVRM: GPU Board Serial Number: 1652221012345
[ 1234.500002] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[ 1234.500100] NVRM: The NVIDIA GPU 0000:3b:00.0
[ 1234.500111] NVRM: (PCI ID: 10de:2330) installed in this system has
[ 1234.500122] NVRM: fallen off the bus and is not responding to commands.
[ 2000.000000] NVRM: Xid (PCI:0000:5e:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address
[ 2000.500000] NVRM: Xid (PCI:0000:5e:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address
[ 2100.000000] NVRM: Xid (PCI:0000:c1:00): 777, pid=1, name=x, a code no catalog knows
"""
# The same host's syslog (Shanghai time) holds two of those events again, with uptime stamps.
SYSLOG = """Mar  5 10:20:34 gpu-a01 kernel: [ 1234.500002] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
Mar  5 10:33:20 gpu-a01 kernel: [ 2000.000000] NVRM: Xid (PCI:0000:5e:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address
Mar  5 10:40:00 gpu-a01 kernel: [ 2400.000000] NVRM: Xid (PCI:0000:c1:00): 48, pid=1, name=x, An uncorrectable double bit error (DBE) has been detected on GPU.
"""
INVENTORY = """serial,model,vendor,host,slot,site,batch,installed_at,removed_at
1652221012345,H100 80GB HBM3,acme,gpu-a01,0,sha,b1,2024-01-01,
1652221099999,H100 80GB HBM3,acme,gpu-a01,1,sha,b1,2024-01-01,
1652221000007,H100 80GB HBM3,acme,gpu-a01,2,sha,b1,2024-01-01,
"""


def _data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    k = d / "kernel" / "gpu-a01"
    k.mkdir(parents=True)
    (d / "inventory.csv").write_text(INVENTORY)
    (k / "dmesg-20240305.log").write_text(DMESG)
    (k / "messages-20240305.log").write_text(SYSLOG)
    return d


def _cfg():
    return config_from_dict({"sites": {"sha": {"tz": "Asia/Shanghai"}}})


def _run(d: Path, wh_path: Path, stages=("inventory", "xid")):
    return run_pipeline(_cfg(), d, wh_path, d.parent / "out", stages=list(stages))


def _events(wh_path: Path) -> pl.DataFrame:
    from pipeline.warehouse import Warehouse

    with Warehouse(wh_path, read_only=True) as wh:
        return wh.engine.pl("SELECT * FROM xid_events ORDER BY ts NULLS LAST, xid", step="test")


def test_stage_dedupes_links_and_classifies(tmp_path):
    d = _data(tmp_path)
    reports, code = _run(d, tmp_path / "wh.duckdb")
    assert code == 0
    ev = _events(tmp_path / "wh.duckdb")
    # 79 (dmesg + syslog + the codeless message), 13 twice (a burst, kept), 777, 48
    assert sorted(ev["xid"].to_list()) == [13, 13, 48, 79, 777]
    e79 = ev.filter(pl.col("xid") == 79).row(0, named=True)
    assert e79["copies"] == 2 and e79["serial"] == "1652221012345" and e79["link_method"] == "boot_map"
    assert e79["uuid"] == UUID and e79["severity"] == "critical" and e79["symptom_code"] == "FELL_OFF_BUS"
    assert e79["hardware"] is True and e79["action"] == "RESET_GPU"
    # syslog's own clock wins over boot time + uptime; both agree here
    assert e79["ts"] == datetime(2024, 3, 5, 2, 20, 34)
    unknown = ev.filter(pl.col("xid") == 777).row(0, named=True)
    assert unknown["severity"] == "unknown" and unknown["symptom_code"] is None
    rep = {r.stage: r for r in reports}["xid"]
    assert rep.rows_out == 5 and rep.rows_quarantined == 0


def test_reloading_unchanged_and_overlapping_rotated_logs_adds_no_duplicates(tmp_path):
    d = _data(tmp_path)
    wh = tmp_path / "wh.duckdb"
    _run(d, wh)
    before = _events(wh)
    _run(d, wh)  # unchanged: skipped
    # logrotate: the old file is compressed, and the new one repeats its tail (copytruncate race)
    k = d / "kernel" / "gpu-a01"
    (k / "messages-20240305.log").unlink()
    (k / "messages-20240305.log.gz").write_bytes(gzip.compress(SYSLOG.encode()))
    tail = SYSLOG.splitlines(keepends=True)[-1]
    (k / "messages-20240306.log").write_text(tail + "Mar  6 09:00:00 gpu-a01 kernel: [90000.000000] NVRM: Xid (PCI:0000:c1:00): 64, pid=1, name=x, Row Remapper: Failed to remap a row.\n")
    _run(d, wh)
    after = _events(wh)
    assert after.height == before.height + 1
    # the vanished plain file's rows stay (history is kept), its .gz and the new file's tail join it
    assert after.filter(pl.col("xid") == 48)["copies"].to_list() == [3]


@pytest.mark.parametrize(("folder", "inv_host", "tel_host"), [
    ("gpu-b02", "gpu-b02", "gpu-b02"),
    ("gpu-b02.lab.example", "GPU-B02", "gpu-b02.lab"),  # one machine, spelled three ways
])
def test_link_through_telemetry_then_inventory(tmp_path, folder, inv_host, tel_host):
    from pipeline.warehouse import Warehouse

    d = tmp_path / "data"
    k = d / "kernel" / folder
    k.mkdir(parents=True)
    (d / "inventory.csv").write_text(
        "serial,model,vendor,host,slot,site,batch,installed_at,removed_at\n"
        f"OLD1,A100,acme,{inv_host},1,,b1,2023-01-01,2024-03-01\n"
        f"NEW1,A100,acme,{inv_host},1,,b1,2024-03-01,\n")
    (k / "journal.log").write_text(
        "2024-03-05T10:00:00+0000 gpu-b02 kernel: NVRM: Xid (PCI:0000:41:00): 94, pid=1, name=x, Contained: SM (0x1). RST: No, D-RST: No\n"
        "2024-03-10T10:00:00+0000 gpu-b02 kernel: NVRM: Xid (PCI:0000:41:00): 95, pid=1, name=x, Uncontained: FBHUB. RST: Yes, D-RST: No\n"
        "2024-02-10T10:00:00+0000 gpu-b02 kernel: NVRM: Xid (PCI:0000:41:00): 63, pid=1, name=x, Row Remapper: New row marked for remapping, reset gpu to activate.\n")
    wh_path = tmp_path / "wh.duckdb"
    _run(d, wh_path, stages=("inventory",))
    with Warehouse(wh_path) as wh:  # telemetry says: that PCI id is index 1, serial TELE1 on Mar 5 only
        wh.insert("gpu_days", pl.DataFrame({
            "gpu_key": ["TELE1", f"bus:{tel_host}/0000:41:00.0"], "serial": ["TELE1", None], "host": [tel_host] * 2,
            "pci_bus_id": ["0000:41:00.0"] * 2, "gpu_index": [1, 1], "day": [date(2024, 3, 5), date(2024, 3, 9)],
            "samples": [10, 10]}))
    _run(d, wh_path, stages=("xid",))
    ev = _events(wh_path)
    got = {r["xid"]: (r["serial"], r["link_method"]) for r in ev.iter_rows(named=True)}
    assert got == {94: ("TELE1", "telemetry"), 95: ("NEW1", "inventory"), 63: ("OLD1", "inventory")}
    assert set(ev["host"]) == {folder}  # the lines' "gpu-b02" is the folder's machine


def test_a_line_naming_another_machine_keeps_its_own_name(tmp_path):
    k = tmp_path / "node-018.cluster.local"
    k.mkdir()
    line = "May  3 04:05:06 {} kernel: NVRM: Xid (PCI:0000:86:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
    (k / "syslog.log").write_text(line.format("NODE-018") + line.format("node-019.cluster.local").replace("04:05", "04:06")
                                  + line.format("10.0.0.18").replace("04:05", "04:07"))
    df, _ = parse_xid_files([k / "syslog.log"])
    assert sorted(df["host"]) == ["10.0.0.18", "node-018.cluster.local", "node-019.cluster.local"]


def test_parse_xid_files_contract_columns_and_dedupe(tmp_path):
    d = _data(tmp_path)
    files = sorted((d / "kernel" / "gpu-a01").iterdir())
    df, rejects = parse_xid_files(files, tz="Asia/Shanghai")
    assert df.columns == CONTRACT_COLUMNS and not rejects
    assert sorted(df["xid"].to_list()) == [13, 13, 48, 79, 777]
    assert df["host"].unique().to_list() == ["gpu-a01"]


def test_cli_parse_xid(tmp_path, cli):
    d = _data(tmp_path)
    k = d / "kernel" / "gpu-a01"
    out = tmp_path / "xid.csv"
    assert cli("parse", "xid", k / "dmesg-20240305.log", k / "messages-20240305.log", "--tz", "Asia/Shanghai", "-o", out) == 0
    df = pl.read_csv(out)
    assert df.columns == CONTRACT_COLUMNS and df.height == 5
    bad = tmp_path / "bad.log"
    bad.write_text("[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, ok\n[ 2.0] NVRM: Xid (PCI:0000:3b\n")
    assert cli("parse", "xid", bad, "-o", tmp_path / "b.parquet") == 1
    assert pl.read_parquet(tmp_path / "b.parquet").height == 1
    assert cli("parse", "xid", bad, "--tz", "Mars/Olympus", "-o", out) == 2
    assert cli("parse", "xid", tmp_path / "missing.log", "-o", out) == 2


def test_catalog_is_complete_and_valid():
    cat = load_catalog()
    xids = cat.filter(pl.col("kind") == "Xid")
    assert xids.height >= 40 and cat.filter(pl.col("kind") == "SXid").height >= 5
    assert set(cat["severity"]) <= set(SEVERITIES) and set(cat["symptom_code"]) <= set(SYMPTOMS)
    assert cat["source"].str.starts_with("NVIDIA").all() and cat["mnemonic"].is_not_null().all()
    for code, symptom in [(48, "MEMORY_UNCORRECTABLE"), (63, "ROW_REMAP"), (74, "NVLINK_ERROR"),
                          (79, "FELL_OFF_BUS"), (119, "GSP_ERROR"), (13, "APP_FAULT"), (92, "MEMORY_CORRECTABLE")]:
        assert classify("Xid", code)["symptom_code"] == symptom
    assert classify("SXid", 20034)["mnemonic"] == "SXID_NVLDL"
    assert classify("Xid", 4242)["severity"] == "unknown"


def test_catalog_knows_the_driver_failing_to_bring_a_gpu_up():
    row = classify("RmInitAdapter", 0)
    assert (row["severity"], row["symptom_code"], row["mnemonic"]) == ("critical", "BOOT_FAILURE", "RM_INIT_ADAPTER_FAILED")
    assert row["hardware"] is False and "osinit.c" in row["source"]
    assert classify("RmInitAdapter", 1)["severity"] == "unknown"  # only the code the parser writes


def test_export_xid_has_contract_columns(tmp_path, cli):
    d = _data(tmp_path)
    wh = tmp_path / "wh.duckdb"
    _run(d, wh)
    out = tmp_path / "x.csv"
    assert cli("export", "xid", "--warehouse", wh, "-o", out) == 0
    assert pl.read_csv(out).columns == CONTRACT_COLUMNS + ["serial"]


@pytest.mark.parametrize("name", ["kern.log", "kern.log.1", "syslog.2.gz", "dmesg-T-20240305-1010.log"])
def test_kernel_files_picks_rotations(tmp_path, name):
    from pipeline.ingest.kernel.stage import kernel_files

    (tmp_path / "kernel" / "h").mkdir(parents=True)
    (tmp_path / "kernel" / "h" / name).write_text("x\n")
    (tmp_path / "kernel" / "h" / "notes.txt").write_text("x\n")
    assert [p.name for p in kernel_files(tmp_path)["h"]] == [name]


def test_configured_boot_time_dates_only_its_own_boots_dmesg_dump(tmp_path):
    # one dmesg dump per boot, each named by the time it was saved (when the next boot came)
    d = tmp_path / "data"
    k = d / "kernel" / "gpu-c03"
    k.mkdir(parents=True)
    xid = "NVRM: Xid (PCI:0000:3b:00): 31, pid=7, name=python3, Ch 00000010, intr 00000000. MMU Fault"
    (k / "dmesg-20250306-0048.log").write_text(f"[86400.000000] {xid}\n[172800.000000] {xid}\n")
    (k / "dmesg-20250325-1159.log").write_text(f"[  100.000000] {xid}\n")
    cfg = config_from_dict({"kernel": {"boot_times": {"gpu-c03": "2025-03-04T00:00:00+00:00"}}})
    run_pipeline(cfg, d, tmp_path / "wh.duckdb", tmp_path / "out", stages=["xid"])
    ev = _events(tmp_path / "wh.duckdb")
    assert ev.filter(pl.col("source_file").str.contains("20250306"))["ts"].to_list() == [
        datetime(2025, 3, 5), datetime(2025, 3, 6)]
    later = ev.filter(pl.col("source_file").str.contains("20250325")).row(0, named=True)
    assert later["ts"] is None and later["uptime_s"] == 100.0


def test_stage_without_kernel_logs_derives_an_empty_table(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    reports, code = run_pipeline(_cfg(), d, tmp_path / "wh.duckdb", tmp_path / "out", stages=["xid"])
    assert code == 0 and _events(tmp_path / "wh.duckdb").height == 0
    assert any("no kernel logs" in n for r in reports for n in r.notes)
