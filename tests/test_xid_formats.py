"""Kernel-log formats and Xid/SXid event shapes, each with lines as real hosts print them."""

from __future__ import annotations

import os
import re
from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.kernel.stage import parse_bytes, parse_file
from pipeline.vocab.pci import pci_id as canonical_pci_text


REF = datetime(2024, 3, 6, 12)
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."


def parse(text: str, *, tz: str = "UTC", ref: datetime = REF, boot=None, host: str = "gpu-a01"):
    return parse_bytes(text.encode(), source_file="k.log", host=host, tz=tz, boot_time=boot, ref_time=ref)


def one(text: str, **kw) -> dict:
    fp = parse(text, **kw)
    assert fp.events.height == 1, fp.events
    return fp.events.row(0, named=True)


# -- time prefixes ---------------------------------------------------------------------
def test_raw_dmesg_uptime_without_boot_time_keeps_uptime_and_null_ts():
    row = one(f"[ 1234.567890] {XID79}\n")
    assert row["uptime_s"] == pytest.approx(1234.56789)
    assert row["ts"] is None and row["xid"] == 79 and row["pci_bus_id"] == "0000:3b:00.0"


def test_raw_dmesg_takes_ts_from_the_rtc_boot_marker_in_the_same_log():
    text = ("[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-045) #115-Ubuntu SMP\n"
            "[    1.000000] rtc_cmos 00:00: setting system clock to 2024-03-05T02:00:01 UTC (1709604001)\n"
            f"[  100.500000] {XID79}\n")
    row = one(text)
    assert row["ts"] == datetime(2024, 3, 5, 2, 1, 40, 500000)
    assert row["ts_source"] == "boot"


def test_raw_dmesg_takes_ts_from_the_configured_boot_time():
    row = one(f"[   60.000000] {XID79}\n", boot=datetime(2024, 3, 5, 8, 0, 0))
    assert row["ts"] == datetime(2024, 3, 5, 8, 1, 0)


def test_raw_dmesg_new_boot_when_uptime_goes_back():
    text = f"[ 5000.0] {XID79}\n[    7.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03\n[   60.0] {XID79}\n"
    fp = parse(text, boot=datetime(2024, 3, 5, 8))
    segs = fp.events["boot_seg"].to_list()
    assert segs == [0, 1]
    # the configured boot time is the last boot's; the earlier boot's time stays unknown
    assert fp.events["ts"].to_list() == [None, datetime(2024, 3, 5, 8, 1)]


def test_dmesg_T_padded_day_in_site_zone():
    row = one(f"[Tue Mar  5 10:11:12 2024] {XID79}\n", tz="Asia/Shanghai")
    assert row["ts"] == datetime(2024, 3, 5, 2, 11, 12)


def test_dmesg_H_relative_deltas_from_the_minute_anchor():
    text = ("[Mar 5 10:11] Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075)\n"
            "[  +0.000000] Command line: BOOT_IMAGE=/vmlinuz-6.8.0-45-generic ro quiet\n"
            f"[  +2.500000] {XID79}\n"
            "[  +0.250000] nvidia 0000:3b:00.0: enabling device (0000 -> 0002)\n"
            "[Mar 5 10:12] NVRM: Xid (PCI:0000:3b:00): 48, pid=77, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.\n"
            "[  +1.250000] NVRM: Xid (PCI:0000:3b:00): 63, pid=77, name=python3, Row Remapper: New row (0x00000000deadbeef) was marked for remapping, reset gpu to activate.\n")
    fp = parse(text)
    assert fp.events["xid"].to_list() == [79, 48, 63]
    assert fp.events["ts"].to_list() == [datetime(2024, 3, 5, 10, 11, 2, 500000),
                                          datetime(2024, 3, 5, 10, 12), datetime(2024, 3, 5, 10, 12, 1, 250000)]


def test_dmesg_iso_with_comma_decimals_and_level_prefix():
    row = one(f"kern  :err   : 2024-03-05T10:11:12,123456+01:00 {XID79}\n")
    assert row["ts"] == datetime(2024, 3, 5, 9, 11, 12, 123456)
    row = one(f"kern  :warn  : 2024-03-05T10:11:12,123456+0100 {XID79}\n")
    assert row["ts"] == datetime(2024, 3, 5, 9, 11, 12, 123456)


def test_bsd_syslog_infers_the_year_across_december_to_january():
    text = ("Dec 31 23:59:58 gpu-a01 kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python3, Graphics Exception: ESR 0x504648=0x80000001\n"
            "Jan  1 00:00:03 gpu-a01 kernel: NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, Ch 00000008, intr 00000000. MMU Fault\n")
    fp = parse(text, ref=datetime(2025, 1, 2))
    assert fp.events["ts"].to_list() == [datetime(2024, 12, 31, 23, 59, 58), datetime(2025, 1, 1, 0, 0, 3)]


def test_year_rollover_survives_lines_without_a_date_in_between():
    text = (f"Dec 31 23:59:58 gpu-a01 kernel: {XID79}\n"
            f"kernel: {XID79}\n"
            f"Jan  1 00:00:03 gpu-a01 kernel: {XID79}\n")
    fp = parse(text, ref=datetime(2025, 1, 1))
    assert fp.events["ts"].to_list() == [datetime(2024, 12, 31, 23, 59, 58), None, datetime(2025, 1, 1, 0, 0, 3)]


def _log(tmp_path, name: str, text: str, mtime: datetime):
    path = tmp_path / "gpu-a01" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    at = mtime.replace(tzinfo=timezone.utc).timestamp()
    os.utime(path, (at, at))
    return parse_file(path).events["ts"].to_list()


def test_bsd_syslog_year_from_a_file_named_by_its_first_day(tmp_path):
    # messages-20241228.log holds a week that ends in January; copied (mtime now) much later
    got = _log(tmp_path, "messages-20241228.log", f"Jan  2 00:00:03 gpu-a01 kernel: {XID79}\n", datetime(2026, 6, 1))
    assert got == [datetime(2025, 1, 2, 0, 0, 3)]


@pytest.mark.parametrize("name", ["syslog-20250301", "kern.log.2025-03-01", "messages-2025-03-01.log"])
def test_a_date_in_the_file_name_wins_over_the_mtime(tmp_path, name):
    # copied in June 2026: the mtime alone would allow March 2026
    got = _log(tmp_path, name, f"Mar  1 10:00:00 gpu-a01 kernel: {XID79}\n", datetime(2026, 6, 1))
    assert got == [datetime(2025, 3, 1, 10)]


def test_a_log_copied_months_later_keeps_its_year(tmp_path):
    # written in May 2025, copied without -p in February 2026: May 2026 would be after the copy
    got = _log(tmp_path, "syslog.log", f"May  3 04:05:06 gpu-a01 kernel: {XID79}\n", datetime(2026, 2, 10))
    assert got == [datetime(2025, 5, 3, 4, 5, 6)]
    # a line may run up to a day past the mtime (clock skew), not more
    assert _log(tmp_path, "a.log", f"Feb 10 20:00:00 gpu-a01 kernel: {XID79}\n", datetime(2026, 2, 10)) == [
        datetime(2026, 2, 10, 20)]
    assert _log(tmp_path, "b.log", f"Feb 12 20:00:00 gpu-a01 kernel: {XID79}\n", datetime(2026, 2, 10)) == [
        datetime(2025, 2, 12, 20)]


def test_a_rollover_inside_a_copied_file(tmp_path):
    text = "".join(f"{d} gpu-a01 kernel: {XID79}\n" for d in ("Nov 30 23:00:00", "Dec 31 23:59:58", "Jan  1 00:00:03",
                                                                "Jan 15 08:00:00"))
    got = _log(tmp_path, "kern.log", text, datetime(2025, 9, 1))  # copied in September
    assert got == [datetime(2024, 11, 30, 23), datetime(2024, 12, 31, 23, 59, 58), datetime(2025, 1, 1, 0, 0, 3),
                   datetime(2025, 1, 15, 8)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(day=st.dates(min_value=date(2020, 1, 1), max_value=date(2030, 12, 31)),
       late=st.integers(min_value=0, max_value=300))
def test_no_year_less_line_is_dated_after_its_file_was_written(day, late):
    line = datetime.combine(day, datetime.min.time()).replace(hour=13)
    mtime = line + timedelta(days=late)
    text = f"{line:%b} {line.day:2d} {line:%H:%M:%S} gpu-a01 kernel: {XID79}\n"
    got = parse(text, ref=mtime).events["ts"][0]
    assert got == line  # the latest year at or before the mtime is the line's own


def test_local_times_across_dst_in_the_site_zone():
    text = "".join(f"Mar 10 {t} gpu-a01 kernel: {XID79}\n" for t in ("01:59:59", "03:00:01"))
    text += f"Nov  3 01:30:00 gpu-a01 kernel: {XID79}\n"
    fp = parse(text, tz="America/New_York", ref=datetime(2024, 11, 5))
    assert fp.events["ts"].to_list() == [datetime(2024, 3, 10, 6, 59, 59), datetime(2024, 3, 10, 7, 0, 1),
                                          datetime(2024, 11, 3, 5, 30)]  # fall back: first 01:30


def test_syslog_line_with_kernel_uptime_stamp_keeps_both_and_dates_the_boot():
    text = (f"Mar  5 10:11:12 gpu-b07 kernel: [ 1234.567890] {XID79}\n"
            "Mar  5 10:11:12 gpu-b07 kernel: [ 1300.000000] NVRM: Xid (PCI:0000:5e:00): 94, pid=5, name=vllm, Contained: SM (0x1). RST: No, D-RST: No\n")
    fp = parse(text, tz="Europe/Berlin")
    rows = fp.events.rows(named=True)
    assert rows[0]["host"] == "gpu-b07" and rows[0]["uptime_s"] == pytest.approx(1234.56789)
    assert rows[0]["ts"] == datetime(2024, 3, 5, 9, 11, 12) and rows[0]["ts_source"] == "wall"


def test_rfc3339_rsyslog_with_microseconds_and_offset():
    row = one(f"2024-03-05T10:11:12.345678+08:00 sha-gpu001 kernel: [ 8123.456789] {XID79}\n", tz="UTC")
    assert row["ts"] == datetime(2024, 3, 5, 2, 11, 12, 345678)
    assert row["host"] == "sha-gpu001" and row["uptime_s"] == pytest.approx(8123.456789)


def test_journalctl_short_and_short_iso():
    row = one(f"Mar 05 10:11:12 sjc-gpu004 kernel: {XID79}\n", tz="America/Los_Angeles")
    assert row["ts"] == datetime(2024, 3, 5, 18, 11, 12)
    row = one(f"2024-03-05T10:11:12+0800 sha-gpu001 kernel: {XID79}\n")
    assert row["ts"] == datetime(2024, 3, 5, 2, 11, 12)


def test_kernel_lines_with_no_time_at_all():
    row = one(f"kernel: {XID79}\n")
    assert row["ts"] is None and row["uptime_s"] is None and row["host"] == "gpu-a01"


# -- event shapes ----------------------------------------------------------------------
@pytest.mark.parametrize("text, expect", [
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
     {"xid": 79, "pid": 1234, "process": "python", "message": "GPU has fallen off the bus."}),
    ("NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
     {"xid": 13, "pid": None, "process": None}),
    ("NVRM: Xid (PCI:0000:3b:00): 119, Timeout waiting for RPC from GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).",
     {"xid": 119, "pid": None, "process": None, "message": "Timeout waiting for RPC from GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8)."}),
    ("NVRM: Xid (PCI:0000:3b:00): 31, pid=88123, name=ray::IDLE, Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f3a_12340000",
     {"xid": 31, "pid": 88123, "process": "ray::IDLE"}),
    ("NVRM: Xid (PCI:0000:3b:00): 43, pid=9, name=python3.10 -u train.py, Ch 00000008",
     {"xid": 43, "process": "python3.10 -u train.py", "message": "Ch 00000008"}),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.",
     {"xid": 79, "pid": None, "process": None, "message": "GPU has fallen off the bus."}),
    ("NVRM: Xid (0000:03:00): 14, Channel 00000001", {"xid": 14, "pci_bus_id": "0000:03:00.0", "message": "Channel 00000001"}),
    ("NVRM: Xid (PCI:0000:01:00 GPU-I:05): 43, pid=2277, name=torchrun, Ch 00000010",
     {"xid": 43, "pci_bus_id": "0000:01:00.0", "gpu_instance": "GPU-I:05"}),
    ("NVRM: Xid (PCI:0002:c1:00): 48, pid=1, name=x, An uncorrectable double bit error (DBE) has been detected on GPU.",
     {"xid": 48, "pci_bus_id": "0002:c1:00.0"}),
    ("NVRM: Xid (PCI:00000000:3B:00): 92, pid=1, name=x, High single-bit ECC error rate", {"pci_bus_id": "0000:3b:00.0"}),
    ("NVRM: Xid (PCI:0000:07:00): 45, pid=2, name=x, Ch 00000010, caused by previous Xid 149",
     {"xid": 45, "message": "Ch 00000010, caused by previous Xid 149"}),
    ("NVRM: Xid (PCI:0000:07:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x004505c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
     {"xid": 149, "fatal": True, "subcode": "NETIR_LINK_EVT"}),
    ("NVRM: Xid (PCI:0000:07:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 12 (0x00000000 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
     {"xid": 145, "fatal": False, "subcode": "RLW_REMAP"}),
    ("NVRM: Xid (PCI:0000:07:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
     {"xid": 154, "recovery_action": "Node Reboot Required"}),
])
def test_xid_event_shapes(text, expect):
    row = one(f"[ 2000.000001] {text}\n")
    assert row["kind"] == "Xid"
    for k, v in expect.items():
        assert row[k] == v, (k, row)


def test_sxid_with_severity_and_data_lines_is_one_event():
    text = ("[ 2001.500000] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 20034, Fatal, Link 46 LTSSM Fault Up\n"
            "[ 2001.500009] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 20034, Severity 1 Engine instance 46 Sub-engine instance 00\n"
            "[ 2001.500018] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 20034, Data {0x00000000, 0x00000000, 0x0000a1f0, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000}\n"
            "[ 2002.000000] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 19084, Non-fatal, Link 12 AN1 Heartbeat Timeout Error\n")
    fp = parse(text)
    assert fp.events.select("kind", "xid", "pci_bus_id", "fatal").rows() == [
        ("SXid", 20034, "0000:86:00.0", True), ("SXid", 19084, "0000:05:00.0", False)]
    assert fp.rows_read == 2 and not fp.rejects


def test_fallen_off_the_bus_message_without_a_code_is_an_xid_79():
    text = ("[ 8123.456789] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
            "[ 8123.456800] NVRM: (PCI ID: 10de:2330) installed in this system has\n"
            "[ 8123.456811] NVRM: fallen off the bus and is not responding to commands.\n")
    row = one(text)
    assert (row["kind"], row["xid"], row["pci_bus_id"], row["shape"]) == ("Xid", 79, "0000:b3:00.0", "fallen_off_bus")


def test_unrelated_lines_and_paste_artefacts_are_skipped_not_quarantined():
    text = ("$ sudo dmesg -T | grep -i xid\n"
            "grep: /var/log/syslog.1: Permission denied\n"
            "[  12.345678] xhci_hcd 0000:00:14.0: Xid-like text: XHCI host controller\n"
            "[  13.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\n"
            "[  14.000000] nvidia-smi reports Xid events: none\n"
            f"> \x1b[31m[ 1234.567890] {XID79}\x1b[0m\r\n"
            "--\n")
    fp = parse(text)
    assert fp.events.height == 1 and fp.events["xid"][0] == 79 and fp.events["uptime_s"][0] == pytest.approx(1234.56789)
    assert not fp.rejects and fp.rows_skipped == 6


def test_a_line_that_looks_like_an_event_but_cannot_be_read_is_quarantined():
    fp = parse("[ 2005.0] NVRM: Xid (PCI:0000:3b:0\n[ 2006.0] NVRM: Xid (PCI:0000:3b:00): , pid=1\n")
    assert fp.events.height == 0
    assert [r.reason for r in fp.rejects] == ["bad_xid_line", "bad_xid_line"]
    assert [r.line_no for r in fp.rejects] == [1, 2]


def test_gpu_map_from_gpu_at_and_board_serial_lines():
    text = ("[ 1234.5] NVRM: GPU at PCI:0000:3b:00: GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901\n"
            "[ 1234.5] NVRM: GPU Board Serial Number: 1652221012345\n"
            "[ 1234.5] NVRM: GPU at PCI:0000:5e:00: GPU-aaaaaaaa-5f60-7182-93a4-b5c6d7e8f901\n"
            "[ 1234.5] NVRM: GPU Board Serial Number: \n"
            f"[ 1234.6] {XID79}\n")
    fp = parse(text)
    assert fp.gpu_map.select("pci_bus_id", "uuid", "serial").rows() == [
        ("0000:3b:00.0", "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901", "1652221012345"),
        ("0000:5e:00.0", "GPU-aaaaaaaa-5f60-7182-93a4-b5c6d7e8f901", None)]


def test_line_numbers_and_gzip(tmp_path):
    import gzip

    from pipeline.ingest.kernel.stage import parse_file

    lines = [f"[ {i}.000000] usb 1-{i}: new high-speed USB device" for i in range(1, 50)]
    lines[40] = f"[ 41.000000] {XID79}"
    p = tmp_path / "h9" / "kern.log.1.gz"
    p.parent.mkdir()
    p.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    fp = parse_file(p)
    assert fp.events["line_no"].to_list() == [41] and fp.events["host"][0] == "h9"


def test_truncated_gzip_keeps_what_decompresses(tmp_path):
    import gzip

    from pipeline.ingest.kernel.stage import parse_file

    text = "".join(f"[ {i}.000000] {XID79}\n" for i in range(1, 2001)).encode()
    p = tmp_path / "h1" / "kern.log.2.gz"
    p.parent.mkdir()
    whole = gzip.compress(text)
    p.write_bytes(whole[: len(whole) * 2 // 3])
    fp = parse_file(p)
    assert 100 < fp.events.height < 2000
    assert fp.events["line_no"].to_list() == list(range(1, fp.events.height + 1))


def test_canonical_pci_text():
    assert canonical_pci_text("00000000:3B:00.0") == "0000:3b:00.0"
    assert canonical_pci_text("PCI:0000:3b:00") == "0000:3b:00.0"
    assert canonical_pci_text("nonsense") is None


# -- properties ------------------------------------------------------------------------
_FRAGMENTS = st.sampled_from([
    "NVRM: ", "Xid ", "SXid ", "(PCI:", "0000:3b:00", ".0", "): ", "79", ", pid=", "'<unknown>'", ", name=",
    "[ 12.5] ", "[Tue Mar  5 10:11:12 2024] ", "Mar  5 10:11:12 h kernel: ", "2024-03-05T10:11:12+0800 h kernel: ",
    "\n", " ", ",", "(", ")", ":", "GPU at PCI:0000:3b:00: GPU-1234abcd", "The NVIDIA GPU 0000:b3:00.0",
    "fallen off the bus", "Severity 1", "Data {0x0}", "[  +0.5] ", "[Mar 5 10:11] ", "Feb 30 10:11:12 h kernel: ",
])
_CANON = re.compile(r"[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=300), st.lists(_FRAGMENTS, max_size=40).map("".join),
                 st.binary(max_size=300).map(lambda b: b + b"Xid (PCI:0000:3b:00): 79, \xff\xfe\n")))
def test_arbitrary_text_never_raises_and_events_are_well_formed(text):
    data = text if isinstance(text, bytes) else text.encode()
    fp = parse_bytes(data, source_file="k.log", host="h", tz="Europe/Berlin", ref_time=REF)
    assert fp.rows_read == fp.events.height + len(fp.rejects)
    for row in fp.events.iter_rows(named=True):
        assert isinstance(row["xid"], int)
        assert row["pci_bus_id"] is None or _CANON.fullmatch(row["pci_bus_id"])
        assert row["kind"] in ("Xid", "SXid")
