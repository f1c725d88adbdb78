"""nvidia-smi CSV ingest: every real quirk from a realistic line, facts, the stage, the CLI."""

from __future__ import annotations

import gzip
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pipeline.ingest.telemetry import batch, derive_gpu_days
from pipeline.ingest.telemetry import stage as smi
from pipeline.ingest.telemetry import load_file, parse_smi_files
from pipeline.ingest.telemetry.fields import header_fields, parse_fields

HEADER = ("timestamp, index, name, serial, uuid, pci.bus_id, driver_version, temperature.gpu, "
          "utilization.gpu [%], memory.used [MiB], power.draw [W], clocks.sm [MHz], fan.speed [%], "
          "clocks_throttle_reasons.active, ecc.errors.corrected.volatile.total, "
          "ecc.errors.uncorrected.volatile.total, remapped_rows.pending, ecc.mode.current")


def line(ts="2026/07/03 22:10:46.109", idx=0, temp="45", power="627.40 W", ecc="0", mask="0x0000000000000004",
         serial="1652823054551", util="45 %", pending="No", fan="[N/A]"):
    return (f"{ts}, {idx}, NVIDIA H100 80GB HBM3, {serial}, GPU-5f1ba2c4-8a5e-7a4c-b3c1-0a4f2e9a1c{idx:02d}, "
            f"00000000:{0x18 + idx:02X}:00.0, 596.59, {temp}, {util}, 1234 MiB, {power}, 1980 MHz, {fan}, "
            f"{mask}, {ecc}, 0, {pending}, Enabled")


def write(path: Path, *lines: str, end: str = "\n", bom: bool = False, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = ("\ufeff" if bom else "") + end.join(lines) + (end if lines else "")
    raw = data.encode("utf-8")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def only_line_by_line(m):
    """Turn the fast path off (``m``: a monkeypatch): every file is read line by line."""
    m.setattr(batch, "fast_batch", lambda con, items, *a, **k: [None] * len(items))


def run_smi(ctx):
    """The smi stage and the derivation the nightly job runs after it."""
    smi.run(ctx)
    derive_gpu_days(ctx.wh)


def parse(*paths, **kw):
    df, rejects = parse_smi_files(paths, **kw)
    return df, rejects


# -- values --------------------------------------------------------------------------------

def test_units_markers_words_masks_and_identity(tmp_path):
    f = write(tmp_path / "h1" / "gpu.csv", HEADER, line(), line(idx=1, temp="[GPU is lost]", power="[Unknown Error]",
                                                                 mask="0x0000000000000060", pending="Yes", serial="[N/A]"))
    df, rejects = parse(f, tz="UTC")
    assert rejects == []
    assert df.columns[:7] == ["ts", "host", "gpu_index", "name", "serial", "uuid", "pci_bus_id"]
    r0, r1 = df.row(0, named=True), df.row(1, named=True)
    assert r0["ts"] == datetime(2026, 7, 3, 22, 10, 46, 109000)
    assert r0["host"] == "h1" and r0["gpu_index"] == 0 and r0["name"] == "NVIDIA H100 80GB HBM3"
    assert r0["pci_bus_id"] == "0000:18:00.0" and r1["pci_bus_id"] == "0000:19:00.0"
    assert r0["power_draw"] == pytest.approx(627.40) and r0["memory_used"] == 1234 and r0["utilization_gpu"] == 45
    assert r0["clocks_sm"] == 1980
    assert r0["fan_speed"] is None and r1["temperature_gpu"] is None and r1["power_draw"] is None
    assert r0["clocks_throttle_reasons_active"] == 4 and r1["clocks_throttle_reasons_active"] == 0x60
    assert r0["remapped_rows_pending"] == 0 and r1["remapped_rows_pending"] == 1 and r0["ecc_mode_current"] == 1
    assert r0["driver_version"] == "596.59" and df.schema["driver_version"] == pl.Utf8
    assert r1["serial"] is None


def test_documented_aliases_take_the_short_query_name():
    assert [f.column for f in parse_fields("timestamp,gpu_name,gpu_bus_id,clocks.sm,memory.used")] == [
        "ts", "name", "pci_bus_id", "clocks_sm", "memory_used"]
    header = header_fields("timestamp, name, pci.bus_id, clocks.current.sm [MHz], clocks.current.memory [MHz], "
                           "clocks.current.graphics [MHz], clocks.current.video [MHz], "
                           "retired_pages.single_bit_ecc.count, clocks_throttle_reasons.active, "
                           "clocks_event_reasons.active")
    assert [f.column for f in header] == [
        "ts", "name", "pci_bus_id", "clocks_sm", "clocks_mem", "clocks_gr", "clocks_video", "retired_pages_sbe",
        "clocks_throttle_reasons_active", "clocks_event_reasons_active"]
    assert [f.kind for f in header[3:8]] == ["num"] * 5
    assert header_fields("Enabled, Disabled") is None
    assert header_fields("2026/07/03 22:10:46.109, 0, 45") is None
    assert [f.unit for f in header_fields("\ufefftimestamp, memory.used [MiB]\r\n")] == ["", "MiB"]


def test_noheader_nounits_with_fields_and_local_zone(tmp_path):
    f = write(tmp_path / "h" / "a.csv", "2026/07/03 22:10:46.109, 0, H100, 45, 627.40", "2026/07/03 22:10:56.109, 1, H100, 46, 600")
    df, rejects = parse(f, fields="timestamp,index,gpu_name,temperature.gpu,power.draw", tz="Asia/Shanghai")
    assert rejects == []
    assert df["ts"].to_list()[0] == datetime(2026, 7, 3, 14, 10, 46, 109000)
    assert df["name"].to_list() == ["H100", "H100"] and df["power_draw"].to_list() == [627.4, 600.0]
    assert df["serial"].null_count() == 2  # not queried: null, but present


def test_headerless_without_fields_is_quarantined_as_no_header(tmp_path):
    f = write(tmp_path / "h" / "a.csv", line(), line(idx=1))
    df, rejects = parse(f)
    assert df.height == 0 and [r.reason for r in rejects] == ["no_header", "no_header"]
    assert [r.line_no for r in rejects] == [1, 2]


def test_headerless_file_continues_the_last_header_seen(tmp_path):
    a = write(tmp_path / "h" / "a.csv", HEADER, line())
    b = write(tmp_path / "h" / "b.csv", line(ts="2026/07/03 23:00:00.000"))
    df, rejects = parse(a, b)
    assert rejects == [] and df.height == 2 and df["power_draw"].to_list() == [627.4, 627.4]


def test_repeated_and_changed_headers_mid_file(tmp_path):
    f = write(tmp_path / "h" / "a.csv", HEADER, line(), HEADER, line(idx=1),
              "timestamp, index, temperature.gpu", "2026/07/03 22:11:00.000, 0, 51")
    df, rejects = parse(f)
    assert rejects == [] and df.height == 3
    assert df["temperature_gpu"].to_list() == [45, 45, 51]
    assert df["power_draw"].to_list()[2] is None


def test_truncated_garbled_crlf_bom_and_counts(tmp_path):
    good = line()
    f = write(tmp_path / "h" / "a.csv", HEADER, good, good[:57], good.replace("627.40 W", "6#7.4 W"), "",
              line(ts="2026/07/03 2x:10:46.109"), good, end="\r\n", bom=True)
    df, rejects = parse(f)
    assert df.height == 2
    assert [(r.line_no, r.reason) for r in rejects] == [(3, "truncated_line"), (4, "bad_value"), (6, "bad_timestamp")]
    assert "power.draw" in rejects[1].detail


def test_gzip_empty_and_header_only_files(tmp_path):
    g = write(tmp_path / "h" / "a.csv.gz", HEADER, line(), gz=True)
    e = write(tmp_path / "h" / "b.csv")
    ho = write(tmp_path / "h" / "c.csv", HEADER)
    df, rejects = parse(g, e, ho)
    assert df.height == 1  # a header-only file is fine; a 0-byte one is quarantined whole
    assert [(r.line_no, r.reason) for r in rejects] == [(None, "empty_file")] and str(e) in rejects[0].detail


def test_dst_repeated_and_skipped_hours_do_not_crash(tmp_path):
    f = write(tmp_path / "h" / "a.csv", "timestamp, index, temperature.gpu",
              "2026/03/08 02:30:00.000, 0, 40",  # does not exist in Los Angeles
              "2026/11/01 01:30:00.000, 0, 41")  # happens twice
    df, rejects = parse(f, tz="America/Los_Angeles")
    assert rejects == []
    assert df["ts"].to_list() == [datetime(2026, 3, 8, 10, 30), datetime(2026, 11, 1, 8, 30)]


def test_real_captures_parse_with_zero_quarantine(external, tmp_path):
    files = sorted((external / "nvidia_gpu_exporter" / "query_gpu_csv").glob("*.csv"))
    assert files
    df, rejects = parse(*files)
    assert rejects == []
    assert df.height == len(files) and df.width > 200
    assert set(df["clocks_event_reasons_gpu_idle"].drop_nulls().to_list()) <= {0, 1}
    assert df["display_mode"].null_count() == df.height  # [Requested functionality has been deprecated]
    assert df["clocks_event_reasons_active"].dtype == pl.Int64
    assert all(p.startswith("0000:") for p in df["pci_bus_id"].to_list())
    distinct = {header_fields(f.read_text().splitlines()[0]).__repr__(): f for f in files}
    for i, f in enumerate(distinct.values()):
        loaded, _ = load_file(f, i, host="h", tz="UTC", fields=None)
        assert loaded.rejects == [] and loaded.rows_loaded == 1


# -- hourly facts, fast and exact paths ------------------------------------------------------

def _hourly(path, **kw):
    loaded, _ = load_file(path, 7, host="h1", tz=kw.pop("tz", "UTC"), fields=kw.pop("fields", None))
    return loaded, loaded.tables["smi_hourly"].sort("gpu_index", "hour", "ts_first")


def test_fast_and_exact_paths_agree(tmp_path, monkeypatch):
    lines = [line(ts=f"2026/07/03 {h:02d}:{m:02d}:00.000", idx=i, temp=str(40 + m % 7), ecc=str(m // 20))
             for h in (22, 23) for m in range(0, 60, 10) for i in (0, 1)]
    f = write(tmp_path / "h" / "a.csv", HEADER, *lines)
    taken = []
    real = batch.fast_batch
    monkeypatch.setattr(batch, "fast_batch", lambda *a, **k: taken.extend(r := real(*a, **k)) or r)
    fast_loaded, fast = _hourly(f)  # one DuckDB read_csv
    assert taken and taken[0] is not None
    only_line_by_line(monkeypatch)
    exact_loaded, exact = _hourly(f)  # line by line
    assert fast_loaded.rows_loaded == exact_loaded.rows_loaded == 24
    assert fast.equals(exact)
    assert fast["samples"].to_list() == [6, 6, 6, 6] and fast["ecc_corrected_delta"].to_list() == [2, 2, 2, 2]


def test_dirty_file_quarantines_and_reconciles(tmp_path):
    f = write(tmp_path / "h" / "a.csv", HEADER, line(), line()[:30], line(idx=1), HEADER, line(idx=1))
    loaded, hourly = _hourly(f)
    assert loaded.rows_read == 4 and loaded.rows_loaded == 3 and [r.reason for r in loaded.rejects] == ["truncated_line"]
    assert hourly["samples"].sum() == 3


# -- the stage, the warehouse and gpu_days -----------------------------------------------------

def _ctx(tmp_path, wh, data):
    from pipeline.config import config_from_dict
    from pipeline.run import RunContext

    cfg = config_from_dict({"sites": {"sha": {"tz": "Asia/Shanghai"}}})
    return RunContext(cfg, wh, data, tmp_path / "out")


def test_gpu_days_coverage_from_the_sampling_interval(tmp_path, wh):
    """Coverage is samples x interval over the day: the interval from within the hours for
    frequent samples, else the GPU's usual gap between hours (hourly logs)."""
    from datetime import timedelta

    data = tmp_path / "data"
    hdr = "timestamp, index, serial, temperature.gpu"
    t0 = datetime(2026, 7, 3)

    def stamp(t):
        return t.strftime("%Y/%m/%d %H:%M:%S.000")

    fast = [f"{stamp(t0 + timedelta(seconds=s))}, 0, SN-FAST, 40" for s in range(0, 7200, 10)]  # 2 h at 10 s
    hourly = [f"{stamp(t0 + timedelta(hours=h, seconds=5))}, 1, SN-HOURLY, 40" for h in range(48)]
    hourly.insert(30, f"{stamp(t0 + timedelta(hours=29, seconds=6))}, 1, SN-HOURLY, 40")  # a pair 1 s apart
    sparse = [f"{stamp(t0 + timedelta(hours=h))}, 2, SN-SPARSE, 40" for h in (0, 1, 2, 3, 30)]
    write(data / "telemetry" / "h1" / "gpu.csv", hdr, *sorted(fast + hourly + sparse))
    run_smi(_ctx(tmp_path, wh, data))
    got = {(k, d.isoformat()): round(c, 4) for k, d, c in wh.con.execute("SELECT gpu_key, day, coverage FROM gpu_days").fetchall()}
    assert got[("SN-FAST", "2026-07-03")] == round(720 * 10 / 86400, 4)  # 2 of 24 hours
    assert got[("SN-HOURLY", "2026-07-03")] == 1.0
    assert got[("SN-HOURLY", "2026-07-04")] == 1.0  # (was 2.2e-5: the pair's 1 s taken for the interval)
    assert got[("SN-SPARSE", "2026-07-03")] == round(4 * 3600 / 86400, 4)  # 4 hourly samples, then silence
    assert got[("SN-SPARSE", "2026-07-04")] == round(3600 / 86400, 4)  # one sample: one usual gap, not a day


def test_stage_gpu_days_ecc_resets_and_idempotence(tmp_path, wh):
    data = tmp_path / "data"
    (data / "inventory.csv").parent.mkdir(parents=True)
    (data / "inventory.csv").write_text(
        "serial,model,vendor,host,slot,site,batch,installed_at,removed_at\n"
        "SN-LINKED,H100,OEM,h1,1,sha,B1,2024-01-01,\n")
    hdr = "timestamp, index, serial, temperature.gpu, ecc.errors.corrected.volatile.total, clocks_event_reasons.active"
    write(data / "telemetry" / "h1" / "gpu.csv.1",
          hdr, "2026/07/03 10:00:00.000, 0, SN0, 40, 5, 0x0000000000000000",
          "2026/07/03 10:30:00.000, 0, SN0, 60, 7, 0x0000000000000040",
          "2026/07/03 10:30:00.000, 1, [N/A], 50, 0, 0x0000000000000000")
    # copytruncate: the live file has no header; the reboot reset the counter to 0.
    live = write(data / "telemetry" / "h1" / "gpu.csv",
                 "2026/07/03 11:00:00.000, 0, SN0, 50, 1, 0x0000000000000004",
                 "2026/07/03 11:30:00.000, 0, SN0, 50, 3, 0x0000000000000000")
    from pipeline.ingest.inventory import run as inventory_run

    ctx = _ctx(tmp_path, wh, data)
    inventory_run(ctx)
    run_smi(ctx)
    rep = ctx.report("smi")
    assert (rep.files, rep.rows_read, rep.rows_loaded, rep.rows_quarantined) == (2, 5, 5, 0)
    days = wh.engine.pl("SELECT * FROM gpu_days ORDER BY gpu_key", step="test")
    assert days["gpu_key"].to_list() == ["SN-LINKED", "SN0"]
    sn0 = days.row(1, named=True)
    assert sn0["day"].isoformat() == "2026-07-03" and sn0["samples"] == 4
    assert sn0["ecc_corrected_delta"] == 2 + 3  # 5->7, then reset to 0 and up to 3
    assert sn0["temp_min"] == 40 and sn0["temp_max"] == 60 and sn0["temp_mean"] == 50
    assert sn0["throttle_thermal_share"] == 0.25 and sn0["throttle_power_share"] == 0.25
    hours = wh.con.execute("SELECT hour FROM smi_hourly WHERE serial = 'SN0' ORDER BY hour").fetchall()
    assert hours[0][0] == datetime(2026, 7, 3, 2)  # Shanghai 10:00 -> 02:00 UTC

    ctx2 = _ctx(tmp_path, wh, data)
    run_smi(ctx2)
    assert ctx2.report("smi").unchanged == 2
    assert wh.con.execute("SELECT count(*) FROM gpu_days").fetchall()[0][0] == 2
    # A changed file replaces its rows (and still continues the rotated file's header).
    write(live, "2026/07/03 11:00:00.000, 0, SN0, 50, 1, 0x0000000000000004")
    ctx3 = _ctx(tmp_path, wh, data)
    run_smi(ctx3)
    assert ctx3.report("smi").rows_loaded == 1 and ctx3.report("smi").rows_quarantined == 0
    assert wh.con.execute("SELECT samples FROM gpu_days WHERE gpu_key = 'SN0'").fetchall()[0][0] == 3


def test_rotation_order_is_oldest_first():
    names = [Path(n) for n in ["gpu.csv", "gpu.csv.1", "gpu.csv.2.gz", "a-2026-07-02.csv", "a-2026-07-01.csv"]]
    assert [p.name for p in smi.rotation_order(names)] == [
        "a-2026-07-01.csv", "a-2026-07-02.csv", "gpu.csv.2.gz", "gpu.csv.1", "gpu.csv"]


# -- the command line ---------------------------------------------------------------------------

def test_cli_parse_smi(tmp_path, cli, capsys):
    f = write(tmp_path / "h9" / "a.csv", HEADER, line(), line()[:40])
    out = tmp_path / "o.parquet"
    assert cli("parse", "smi", f, "-o", out) == 1
    df = pl.read_parquet(out)
    assert df.height == 1 and df["host"].to_list() == ["h9"]
    assert "truncated_line" in capsys.readouterr().err
    assert cli("parse", "smi", f, "--tz", "Mars/Base", "-o", out) == 2
    g = write(tmp_path / "h9" / "b.csv", "2026/07/03 22:10:46.109, 3, 70")
    assert cli("parse", "smi", g, "--fields", "timestamp,index,temperature.gpu", "--host", "x", "-o", tmp_path / "o.csv") == 0
    assert duckdb.sql(f"select host, gpu_index, temperature_gpu from '{tmp_path / 'o.csv'}'").fetchall() == [("x", 3, 70)]


def test_the_line_names_its_host(tmp_path):
    f = write(tmp_path / "folder-host" / "a.csv", "timestamp, hostname, index, temperature.gpu",
              "2026/07/03 22:10:46.109, node-7, 0, 45", "2026/07/03 22:10:46.109, [N/A], 1, 46")
    _, hourly = _hourly(f)
    assert hourly["host"].to_list() == ["node-7", "h1"]
    df, _ = parse(f)
    assert df["host"].to_list() == ["node-7", "folder-host"]


def test_keep_samples_writes_parquet_by_day(tmp_path, wh):
    from pipeline.config import config_from_dict
    from pipeline.run import RunContext

    data = tmp_path / "data"
    write(data / "telemetry" / "h1" / "gpu.csv", HEADER, line(ts="2026/07/03 23:59:59.000"), line(ts="2026/07/04 00:00:01.000"))
    cfg = config_from_dict({"telemetry": {"keep_samples": True, "samples_dir": str(tmp_path / "samples")}})
    run_smi(RunContext(cfg, wh, data, tmp_path / "out"))
    days = sorted(p.parent.name for p in (tmp_path / "samples").glob("day=*/*.parquet"))
    assert days == ["day=2026-07-03", "day=2026-07-04"]
    assert pl.read_parquet(tmp_path / "samples" / "day=2026-07-04" / "h1__gpu.csv.parquet")["power_draw"].to_list() == [627.4]


def test_truncated_last_line_stays_on_the_fast_path(tmp_path, monkeypatch):
    f = write(tmp_path / "h" / "a.csv", HEADER, line(), line(idx=1), end="\r\n")
    f.write_bytes(f.read_bytes() + line(idx=2)[:50].encode())  # the logger was killed mid-line
    taken = []
    real = batch.fast_batch
    monkeypatch.setattr(batch, "fast_batch", lambda *a, **k: taken.extend(r := real(*a, **k)) or r)
    fast, _ = _hourly(f)
    assert taken and taken[0] is not None
    assert [(r.line_no, r.reason) for r in fast.rejects] == [(4, "truncated_line")]
    assert fast.rows_read == 3 and fast.rows_loaded == 2
    only_line_by_line(monkeypatch)
    exact, _ = _hourly(f)
    assert [(r.line_no, r.reason, r.raw) for r in exact.rejects] == [(r.line_no, r.reason, r.raw) for r in fast.rejects]


def test_nvidia_smi_error_messages_are_quarantined_under_their_own_reasons(tmp_path, monkeypatch):
    # A GPU that stops answering leaves nvidia-smi's message in place of its row; the driver
    # going away leaves others. Neither is a cut-off line, and the lost GPU is named.
    f = write(tmp_path / "h" / "a.csv", HEADER, line(),
              "Unable to determine the device handle for GPU0000:5D:00.0: Unknown Error",
              "Unable to determine the device handle for gpu 0000:5E:00.0: GPU is lost.  Reboot the system to recover this GPU",
              line(idx=1), "No devices were found", "Failed to initialize NVML: Driver/library version mismatch",
              "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
              "latest NVIDIA driver is installed and running.", line(idx=2)[:40])
    want = [(3, "gpu_unreachable", "GPU 0000:5d:00.0: Unknown Error"),
            (4, "gpu_unreachable", "GPU 0000:5e:00.0: GPU is lost.  Reboot the system to recover this GPU"),
            (6, "no_devices", "nvidia-smi: No devices were found"),
            (7, "nvml_init_failed", "nvidia-smi: Failed to initialize NVML: Driver/library version mismatch"),
            (8, "driver_unreachable", None), (9, "truncated_line", None)]

    def got(rejects):
        return [(r.line_no, r.reason, w[2] and r.detail) for r, w in zip(rejects, want)]

    fast, _ = _hourly(f)
    assert got(fast.rejects) == want and fast.rows_read == 8 and fast.rows_loaded == 2
    only_line_by_line(monkeypatch)
    exact, _ = _hourly(f)
    assert got(exact.rejects) == want
    _, rejects = parse(f, tz="UTC")
    assert [(r.line_no, r.reason) for r in rejects] == [w[:2] for w in want]


@pytest.mark.parametrize("fast", [True, False])
def test_a_lone_carriage_return_ends_a_line_on_both_paths(tmp_path, monkeypatch, fast):
    # Old Mac tools end lines with a lone CR; DuckDB's reader and the line-by-line path
    # both end a line there, so such a file is read, not one long quarantined line.
    if not fast:
        only_line_by_line(monkeypatch)
    f = tmp_path / "h" / "a.csv"
    f.parent.mkdir()
    # (the last line, unterminated, has a comma without its space: cells are split at commas)
    f.write_bytes(b"2026/07/03 22:10:46.109, 0, 45\r2026/07/03 22:10:47.109, 0, 46\r2026/07/03 22:10:48.109, 0,4")
    loaded, hourly = _hourly(f, fields=parse_fields("timestamp,index,temperature.gpu"))
    assert (loaded.rows_read, loaded.rows_loaded, loaded.rejects) == (3, 3, [])
    assert hourly["temp_max"].to_list() == [46] and hourly["temp_min"].to_list() == [4]
    g = tmp_path / "h" / "b.csv"
    g.write_bytes(b"x\ry")
    loaded, _ = _hourly(g, fields=parse_fields("timestamp,index,temperature.gpu"))
    assert loaded.rows_read == 2 and [r.reason for r in loaded.rejects] == ["truncated_line"] * 2


def test_mixed_line_ends_read_alike(tmp_path, monkeypatch):
    lines = [line(ts=f"2026/07/03 22:{m:02d}:00.000", idx=i) for m in range(4) for i in (0, 1)]
    f = tmp_path / "h" / "a.csv"
    f.parent.mkdir()
    f.write_bytes(("\r\n".join([HEADER] + lines[:3]) + "\n" + "\r".join(lines[3:]) + "\n").encode())
    fast, fast_rows = _hourly(f)
    only_line_by_line(monkeypatch)
    exact, exact_rows = _hourly(f)
    assert fast.rows_loaded == exact.rows_loaded == 8 and not fast.rejects and fast_rows.equals(exact_rows)


def test_a_marker_mid_file_stays_on_the_fast_path(tmp_path, monkeypatch):
    # A GPU lost later prints a marker where the first lines had numbers: cells are text
    # until the one SQL cleaning reads them, so the file is not read line by line.
    f = write(tmp_path / "h" / "a.csv", HEADER, line(), line(idx=1, temp="[GPU is lost]", ecc="[GPU is lost]"),
              line(ts="2026/07/03 22:10:47.109"))
    monkeypatch.setattr(smi, "_line_by_line", lambda *a, **k: pytest.fail("read line by line"))
    loaded, hourly = _hourly(f)
    assert loaded.rows_loaded == 3 and not loaded.rejects
    assert hourly.filter(pl.col("gpu_index") == 1)["temp_n"].to_list() == [0]
    assert hourly.filter(pl.col("gpu_index") == 0)["temp_n"].to_list() == [2]


def test_headerless_file_is_loaded_once_its_hosts_header_arrives(tmp_path, wh):
    # The live (copytruncated, headerless) file arrives a run before the rotated one with
    # the header: first quarantined as no_header, then loaded, once, with nothing doubled.
    data = tmp_path / "data"
    hdr = "timestamp, index, serial, temperature.gpu"
    live = ["2026/07/03 11:00:00.000, 0, SN0, 50", "2026/07/03 11:30:00.000, 0, SN0, 52"]
    write(data / "telemetry" / "h1" / "gpu.csv", *live)

    def run():
        ctx = _ctx(tmp_path, wh, data)
        run_smi(ctx)
        rep = ctx.report("smi")
        return rep, wh.con.execute("SELECT reason, count(*) FROM quarantine GROUP BY ALL").fetchall()

    rep, quarantined = run()
    assert (rep.files, rep.rows_loaded, rep.rows_quarantined) == (1, 0, 2) and quarantined == [("no_header", 2)]
    write(data / "telemetry" / "h1" / "gpu.csv.1", hdr, "2026/07/03 10:00:00.000, 0, SN0, 40")
    rep, quarantined = run()
    assert (rep.files, rep.unchanged, rep.rows_read, rep.rows_loaded, rep.rows_quarantined) == (2, 0, 3, 3, 0)
    assert quarantined == [] and wh.con.execute("SELECT count(*) FROM files").fetchall()[0][0] == 2
    assert wh.con.execute("SELECT sum(samples) FROM gpu_days").fetchall()[0][0] == 3
    rep, quarantined = run()  # and the next run changes nothing
    assert (rep.files, rep.unchanged, rep.rows_loaded) == (2, 2, 0)
    assert wh.con.execute("SELECT sum(samples) FROM smi_hourly").fetchall()[0][0] == 3 and wh.con.execute("SELECT count(*) FROM files").fetchall()[0][0] == 2
