"""Raw dmesg written once a day: uptime-only lines dated from their host's boots, whatever
file holds the boot marker, and boots no file marks bounded by the days in the file names."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.kernel.stage import parse_xid_files
from pipeline.ingest.kernel.boots import boot_table, day_window

TZ = "Asia/Shanghai"  # local days start at 16:00 UTC
B0 = datetime(2025, 2, 20, 3, 0, 0)  # booted before the data: no file marks it
B1 = datetime(2025, 3, 3, 10, 0, 0)  # rebooted inside the data: the 03-03 file marks it
#: (UTC time, PCI bus, code) of each Xid
XIDS = [(datetime(2025, 3, 1, 2, 0, 5), "3b", 79), (datetime(2025, 3, 2, 9, 30, 0), "86", 48),
        (datetime(2025, 3, 3, 5, 0, 0), "3b", 13), (datetime(2025, 3, 3, 11, 0, 0), "86", 94),
        (datetime(2025, 3, 4, 8, 0, 0), "3b", 63)]
MSG = {79: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
       48: "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the "
           "framebuffer at partition 6, subpartition 0.",
       13: "pid=2351, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address",
       94: "pid=1853, name=pt_main_thread, Contained: SM (0x1). RST: No, D-RST: No",
       63: "pid='<unknown>', name=<unknown>, Row Remapper: New row (0x0000000a2c) was marked for remapping, "
           "reset gpu to activate."}


def _up(t: datetime) -> float:
    return ((t - B1) if t >= B1 else (t - B0)).total_seconds()


def _line(up: float, text: str) -> str:
    return f"[{up:12.6f}] {text}"


def _files(folder: Path) -> list[Path]:
    """``dmesg`` appended to a file per local day (Asia/Shanghai)."""
    lines: list[tuple[datetime, str]] = []
    for t, bus, code in XIDS:
        lines.append((t, _line(_up(t), f"NVRM: Xid (PCI:0000:{bus}:00): {code}, {MSG[code]}")))
    boot = [(0.0, "Linux version 5.15.0-119-generic (buildd@lcy02-amd64-075) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) "
                  "11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #129-Ubuntu SMP"),
            (1.703717, "rtc_cmos 00:01: setting system clock to 2025-03-03T10:00:01 UTC (1740996001)"),
            (6.2, "nvidia: module license 'NVIDIA' taints kernel.")]
    lines += [(B1 + timedelta(seconds=up), _line(up, text)) for up, text in boot]
    # noise each day so that a file's uptimes span more than its Xids
    for d in range(4):
        t = datetime(2025, 2, 28, 16, 30) + timedelta(days=d)
        lines.append((t, _line(_up(t), "perf: interrupt took too long (2504 > 2500), lowering kernel.perf_event_max_sample_rate to 79800")))
    folder.mkdir(parents=True, exist_ok=True)
    by_day: dict[str, list[str]] = {}
    for t, text in sorted(lines):
        local = t + timedelta(hours=8)
        by_day.setdefault(f"dmesg-{local:%Y%m%d}.log", []).append(text)
    out = []
    for name, body in sorted(by_day.items()):
        (folder / name).write_text("\n".join(body) + "\n")
        out.append(folder / name)
    return out


def test_day_window_is_the_local_day_in_utc():
    assert day_window(Path("dmesg-20250303.log"), TZ) == (datetime(2025, 3, 2, 16), datetime(2025, 3, 3, 16))
    assert day_window(Path("dmesg-boot-20250303-101112.log"), TZ) is None  # named for an instant
    assert day_window(Path("kern.log"), TZ) is None


def test_uptime_only_lines_are_dated_from_the_hosts_boots(tmp_path):
    files = _files(tmp_path / "node-7")
    df, rejects = parse_xid_files(files, tz=TZ)
    assert not rejects and df.height == len(XIDS)
    got = {r["xid"]: r for r in df.iter_rows(named=True)}
    for t, _, code in XIDS:
        r = got[code]
        if t >= B1:  # after the marker, in its file or the next day's: exact to the second
            assert r["ts_quality"] == "exact" and abs((r["ts"] - t).total_seconds()) <= 1, code
            assert r["ts_error_s"] == 0
        else:  # the unmarked boot: within a day, flagged estimated, the truth inside the interval
            assert r["ts_quality"] == "estimated", code
            assert abs((r["ts"] - t).total_seconds()) <= 86400
            assert abs((r["ts"] - t).total_seconds()) <= r["ts_error_s"] + 1


@pytest.mark.parametrize("order", ["oldest_first", "newest_first", "shuffled"])
def test_file_order_does_not_change_the_dates(tmp_path, order):
    files = _files(tmp_path / "node-7")
    base, _ = parse_xid_files(files, tz=TZ)
    again = {"oldest_first": files, "newest_first": files[::-1], "shuffled": files[2:] + files[:2]}[order]
    got, _ = parse_xid_files(again, tz=TZ)
    cols = ["ts", "xid", "ts_quality", "ts_error_s", "uptime_s"]
    assert got.select(cols).sort("xid").equals(base.select(cols).sort("xid"))


def test_a_configured_boot_dates_an_unmarked_one_exactly(tmp_path):
    files = _files(tmp_path / "node-7")
    df, _ = parse_xid_files(files, tz=TZ, boot_time=B0)
    early = df.filter(pl.col("xid").is_in([79, 48, 13]))
    assert early["ts_quality"].to_list() == ["exact"] * 3
    assert sorted(early["ts"].to_list()) == [t for t, _, c in XIDS if c in (79, 48, 13)]


def test_spans_of_two_unmarked_boots_are_not_merged():
    day = timedelta(days=1)
    d0 = datetime(2025, 3, 1)
    segs = pl.DataFrame({
        "file_id": [1, 2, 3], "host": ["h"] * 3, "boot_seg": [0, 0, 0],
        "up_first": [86400.0 * 10, 86400.0 * 11 - 40000, 3600.0], "up_last": [86400.0 * 10 + 600, 86400.0 * 11 + 900, 7200.0],
        "boot_at": [None, None, None], "day_lo": [d0, d0 + day, d0 + 2 * day],
        "day_hi": [d0 + day, d0 + 2 * day, d0 + 3 * day],
    }, schema_overrides={"boot_seg": pl.Int32, "boot_at": pl.Datetime("us")})
    t = boot_table(segs)
    assert t["quality"].to_list() == ["estimated"] * 3
    assert t["boot"][0] == t["boot"][1] and t["boot"][2] != t["boot"][0]
    assert t["error_s"][0] < t["error_s"][2]  # two days' files bound a boot tighter than one


def test_stage_arrival_order_gives_identical_events(tmp_path):
    from pipeline.config import config_from_dict
    from pipeline.ingest import kernel
    from pipeline.link.xid import derive
    from pipeline.run import RunContext
    from pipeline.warehouse import Warehouse

    stash = _files(tmp_path / "stash" / "node-7")
    cfg = config_from_dict({"time": {"default_tz": TZ}})
    tables = []
    for label, runs in (("one", [stash]), ("newest_first", [[p] for p in stash[::-1]]),
                        ("oldest_first", [[p] for p in stash])):
        data = tmp_path / label
        folder = data / "kernel" / "node-7"
        folder.mkdir(parents=True)
        with Warehouse(tmp_path / f"{label}.duckdb") as wh:
            for batch in runs:
                for p in batch:
                    (folder / p.name).write_bytes(p.read_bytes())
                ctx = RunContext(cfg, wh, data, tmp_path / "out")
                kernel.run(ctx)
                derive(ctx)  # (as pipeline.run does after the stage)
            tables.append(wh.engine.pl("SELECT * FROM xid_events ORDER BY event_id", step="test"))
    assert tables[0].height == len(XIDS)
    assert tables[0].filter(pl.col("ts_quality") == "estimated").height == 3
    for other in tables[1:]:
        assert other.equals(tables[0])


def test_a_banner_in_a_log_with_clocks_marks_the_boot_for_the_dmesg_files(tmp_path):
    """The reboot's dmesg lost its rtc_cmos line; /var/log/messages (local clock, no uptime)
    still holds the kernel's banner: that boot is dated from it, exactly."""
    import os

    files = _files(tmp_path / "node-7")
    for p in files:
        p.write_text("".join(x + "\n" for x in p.read_text().splitlines() if "rtc_cmos" not in x))
    local = B1 + timedelta(hours=8)
    messages = tmp_path / "node-7" / "messages"
    messages.write_text(
        f"{local:%b} {local.day:2d} {local:%H:%M:%S} node-7 kernel: Linux version 5.15.0-119-generic "
        "(buildd@lcy02-amd64-075) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0) #129-Ubuntu SMP\n"
        f"{local:%b} {local.day:2d} {local:%H:%M:%S} node-7 kernel: Command line: BOOT_IMAGE=/vmlinuz ro quiet\n")
    written = (B1 + timedelta(days=1)).timestamp()
    os.utime(messages, (written, written))
    without, _ = parse_xid_files(files, tz=TZ)
    with_banner, _ = parse_xid_files(files + [messages], tz=TZ)
    after = [c for t, _, c in XIDS if t >= B1]
    assert set(without.filter(pl.col("xid").is_in(after))["ts_quality"]) == {"estimated"}
    got = with_banner.filter(pl.col("xid").is_in(after)).sort("xid")
    assert set(got["ts_quality"]) == {"exact"}
    want = sorted((c, t) for t, _, c in XIDS if t >= B1)
    for (code, t), ts in zip(want, got["ts"].to_list()):
        assert abs((ts - t).total_seconds()) <= 1, code


def test_a_journal_boot_id_carries_a_marker_to_another_file(tmp_path, monkeypatch):
    """``journalctl -k -o short-monotonic`` exports: the boot's first file holds the RTC
    marker; a later export, named for no day, shares only the boot id."""
    boot = "8c1c4a7e6f2b4b0e9d3c5a1f2e7d9b04"
    other = "1f0e2d3c4b5a69788796a5b4c3d2e1f0"
    host = tmp_path / "node-7"
    host.mkdir()
    first = host / "journal-k.1.log"
    first.write_text(
        f"-- Boot {boot} --\n"
        "[    0.000000] node-7 kernel: Linux version 5.15.0-119-generic (buildd@lcy02-amd64-075) #129-Ubuntu SMP\n"
        "[    1.703717] node-7 kernel: rtc_cmos 00:01: setting system clock to 2025-03-03T10:00:01 UTC (1740996001)\n"
        f"[ 3600.000000] node-7 kernel: NVRM: Xid (PCI:0000:86:00): 94, {MSG[94]}\n")
    later = host / "journal-k.log"
    later.write_text(
        f"-- Boot {boot} --\n"
        f"[80000.000000] node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 63, {MSG[63]}\n"
        f"-- Boot {other} --\n"
        f"[  500.000000] node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 13, {MSG[13]}\n")
    df, rejects = parse_xid_files([later, first], tz=TZ)
    got = {r["xid"]: (r["ts"], r["ts_quality"]) for r in df.iter_rows(named=True)}
    assert not rejects
    for code, up in ((94, 3600), (63, 80000)):  # 63: dated through the shared boot id
        ts, quality = got[code]
        assert quality == "exact" and abs((ts - (B1 + timedelta(seconds=up))).total_seconds()) <= 1, code
    assert got[13] == (None, "unknown")  # another boot, marked nowhere, its file named for no day
    assert parse_xid_files([first, later], tz=TZ)[0].equals(df)  # the order files are given in does not matter
