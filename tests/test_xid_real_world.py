"""Kernel-log lines as real fleets print them: driver generations R470 to R570+, kernels,
journald exports, paste damage and lookalikes that are no events.

The lines are modelled on what operators posted in public bug reports (NVIDIA open-gpu-kernel-
modules issues, gpud and NVSentinel threads) and on the drivers' own formats; PCI ids,
pids, serials and uuids are made up.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.kernel.stage import parse_bytes, parse_xid_files


REF = datetime(2024, 3, 6, 12)
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def parse(text: str | bytes, *, tz: str = "UTC", ref: datetime = REF, host: str = "gpu-a01"):
    data = text.encode() if isinstance(text, str) else text
    return parse_bytes(data, source_file="kern.log", host=host, tz=tz, ref_time=ref)


def events(text, **kw) -> list[dict]:
    fp = parse(text, **kw)
    assert not fp.rejects, fp.rejects
    return fp.events.rows(named=True)


def one(text, **kw) -> dict:
    rows = events(text, **kw)
    assert len(rows) == 1, rows
    return rows[0]


# -- time prefixes from the tools that write kernel logs ----------------------------------
def test_syslog_line_with_the_kernel_uptime_inside():
    row = one("Mar  5 10:11:12 dgx-a100-07 kernel: [  123.456789] NVRM: Xid (PCI:0000:b7:00): 13, pid=2415, "
              "name=python3, Graphics SM Warp Exception on (GPC 4, TPC 0, SM 1): Out Of Range Address\n",
              tz="Europe/Berlin")
    assert (row["host"], row["xid"], row["pci_bus_id"], row["pid"], row["process"]) == (
        "dgx-a100-07", 13, "0000:b7:00.0", 2415, "python3")
    assert row["ts"] == datetime(2024, 3, 5, 9, 11, 12) and row["uptime_s"] == pytest.approx(123.456789)


def test_journalctl_short_precise_keeps_microseconds_in_the_site_zone():
    row = one("Mar 05 10:11:12.654321 gpu-a01 kernel: NVRM: Xid (PCI:0000:3b:00): 31, pid=9183, name=pt_main_thread, "
              "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f12_34560000. "
              "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n", tz="America/Los_Angeles")
    assert row["ts"] == datetime(2024, 3, 5, 18, 11, 12, 654321) and row["xid"] == 31


def test_journalctl_short_monotonic_gives_uptime_and_host():
    row = one("[ 1234.567890] gpu-a01 kernel: NVRM: Xid (PCI:0000:ca:00): 94, pid=2975042, name=python3, "
              "Contained: CE User Channel (0x2). RST: No, D-RST: No\n", host="folder-name")
    assert row["host"] == "gpu-a01" and row["uptime_s"] == pytest.approx(1234.56789) and row["ts"] is None
    assert row["xid"] == 94 and row["message"].startswith("Contained: CE User Channel")


def test_journalctl_short_full_with_weekday_and_zone_name():
    row = one("Tue 2024-03-05 10:11:12 UTC gpu-a01 kernel: " + XID79 + "\n", tz="Asia/Tokyo")
    assert row["ts"] == datetime(2024, 3, 5, 10, 11, 12)
    row = one("Tue 2024-03-05 10:11:12 JST gpu-a01 kernel: " + XID79 + "\n", tz="Asia/Tokyo")
    assert row["ts"] == datetime(2024, 3, 5, 1, 11, 12)


def _journal_entry(message, *, us=1709633472123456, mono=8123456789, ident="kernel", host="gpu-a01", **extra):
    entry = {"__CURSOR": "s=4d1c;i=1a2b;b=9f;m=1e3;t=613;x=77", "__REALTIME_TIMESTAMP": str(us),
             "__MONOTONIC_TIMESTAMP": str(mono), "_BOOT_ID": "9f0e6c2d5b8a4c1e8d7f6a5b4c3d2e1f",
             "PRIORITY": "4", "SYSLOG_FACILITY": "0", "SYSLOG_IDENTIFIER": ident, "_HOSTNAME": host,
             "MESSAGE": message, **extra}
    if ident == "kernel":
        entry.update(_TRANSPORT="kernel", _SOURCE_MONOTONIC_TIMESTAMP=str(mono))
    else:
        entry.update(_TRANSPORT="syslog", _PID="4711")
    return json.dumps(entry)


def test_journalctl_json_lines():
    text = "\n".join([
        _journal_entry("mlx5_core 0000:0c:00.0: mlx5_cmd_out_err:838: QUERY_VPORT_COUNTER failed", us=1709633470000000),
        _journal_entry("NVRM: Xid (PCI:0000:ca:00): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB. "
                       "RST: Yes, D-RST: No"),
    ]) + "\n"
    row = one(text, host="folder-name")
    assert row["ts"] == datetime(2024, 3, 5, 10, 11, 12, 123456)
    assert row["uptime_s"] == pytest.approx(8123.456789) and row["host"] == "gpu-a01"
    assert row["xid"] == 95 and row["message"] == "Uncontained: FBHUB. RST: Yes, D-RST: No" and row["line_no"] == 2


def test_journalctl_json_odd_entries_never_raise():
    text = "\n".join([
        '{"MESSAGE": [78, 86, 82, 77, 58, 32, 88, 105, 100, 32, 40, 80, 67, 73, 58, 48, 48, 48, 48, 58, 51, 98, 58, '
        '48, 48, 41, 58, 32, 55, 57, 44, 32, 255], "__REALTIME_TIMESTAMP": "1709633472000000"}',
        '{"MESSAGE": null, "note": "Xid"}',
        '{"MESSAGE": "NVRM: Xid (PCI:0000:3b:00): 48, DBE (0x00000001)", "__REALTIME_TIMESTAMP": "not a number"}',
        '{"truncated": "NVRM: Xid (PCI:0000:3b:00): 79',
    ]) + "\n"
    fp = parse(text)
    # A byte-array MESSAGE (journald's form for non-UTF-8 text) is decoded before the search
    # (its bad byte replaced); a bad time gives a null ts; a cut line is read as plain text.
    assert fp.events["xid"].to_list() == [79, 48, 79]
    assert fp.events["ts"].to_list() == [datetime(2024, 3, 5, 10, 11, 12), None, None]
    assert fp.events["line_no"].to_list() == [1, 3, 4]


def test_dmesg_human_minute_stamp_with_a_bad_byte_is_no_anchor():
    # found by hypothesis: "[Mar 5 \x800:11]" is not a minute anchor (it used to raise)
    text = (b"[Mar 5 10:11] eth0: link up\n[Mar 5 \x800:11] eth0: link up\n"
            b"[  +0.500000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n")
    fp = parse(text)
    assert fp.events.select("xid", "line_no").rows() == [(79, 3)]


def test_journal_file_with_byte_array_messages_past_its_head_is_searched(tmp_path):
    from pipeline.ingest.kernel.stage import parse_file

    entries = [json.dumps({"MESSAGE": f"audit: type=1400 n={i}", "__REALTIME_TIMESTAMP": "1709633472000000"})
               for i in range(400)]  # well past the 8 KiB head that tells a file's format
    entries.append(json.dumps({"MESSAGE": list(b"NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, \xff"),
                               "__REALTIME_TIMESTAMP": "1709633472000000", "_TRANSPORT": "kernel"}))
    f = tmp_path / "journal.json"
    f.write_text("\n".join(entries) + "\n")
    fp = parse_file(f, host="n1")
    assert fp.events.select("xid", "pci_bus_id", "line_no").rows() == [(79, "0000:3b:00.0", 401)]


def test_journalctl_json_byte_array_message_is_decoded():
    from pipeline.ingest.kernel.journal import from_json

    line = json.dumps({"MESSAGE": list(b"NVRM: Xid (PCI:0000:3b:00): 79, \xff"), "__REALTIME_TIMESTAMP": "1709633472000000"})
    assert from_json(line.encode()).startswith(b"2024-03-05T10:11:12.000000+00:00 kernel: NVRM: Xid (PCI:0000:3b:00): 79,")


def test_journalctl_json_fallen_off_message_is_one_entry_with_newlines():
    msg = ("NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has\n"
           "NVRM: fallen off the bus and is not responding to commands.")
    row = one(_journal_entry(msg) + "\n")
    assert (row["xid"], row["pci_bus_id"], row["shape"]) == (79, "0000:b3:00.0", "fallen_off_bus")


def test_journalctl_json_from_a_user_space_agent_quoting_an_xid_is_no_event():
    text = _journal_entry("health check failed: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
                          ident="gpud") + "\n"
    fp = parse(text)
    assert fp.events.height == 0 and not fp.rejects


def test_json_exports_of_log_shippers():
    xid = "NVRM: Xid (PCI:0000:3b:00): 48, pid=77, name=python3, An uncorrectable double bit error (DBE) has been detected"
    text = "\n".join([
        json.dumps({"@timestamp": "2024-03-05T10:11:12.123Z", "host": {"name": "gpu-a07"}, "message": xid}),  # Elastic
        json.dumps({"time": "2024-03-05T18:11:13+08:00", "log": "[  123.400000] " + xid}),  # Fluent Bit
        json.dumps({"ts": "whatever", "message": "Mar  5 10:11:14 gpu-a09 kernel: " + xid}),  # a raw syslog line
        json.dumps({"time": "yesterday", "msg": xid}),
    ]) + "\n"
    rows = events(text)
    assert [(r["host"], r["ts"], r["uptime_s"]) for r in rows] == [
        ("gpu-a07", datetime(2024, 3, 5, 10, 11, 12, 123000), None),
        ("gpu-a01", datetime(2024, 3, 5, 10, 11, 13), pytest.approx(123.4)),
        ("gpu-a09", datetime(2024, 3, 5, 10, 11, 14), None),
        ("gpu-a01", None, None)]
    assert all(r["xid"] == 48 and r["message"].endswith("has been detected") for r in rows)


def test_journalctl_verbose_entry():
    text = (
        "Tue 2024-03-05 10:11:12.123456 UTC [s=4d1c2b3a;i=1a2b;b=9f0e6c2d;m=1e3f5a7b;t=613a5b;x=77aa]\n"
        "    _SOURCE_MONOTONIC_TIMESTAMP=8123456789\n"
        "    _TRANSPORT=kernel\n"
        "    PRIORITY=4\n"
        "    SYSLOG_FACILITY=0\n"
        "    SYSLOG_IDENTIFIER=kernel\n"
        "    MESSAGE=NVRM: Xid (PCI:0000:3b:00): 119, pid=1682, name=nvidia-smi, Timeout after 6s of waiting for "
        "RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).\n"
        "    _BOOT_ID=9f0e6c2d5b8a4c1e8d7f6a5b4c3d2e1f\n"
        "    _MACHINE_ID=0a1b2c3d4e5f\n"
        "    _HOSTNAME=gpu-h100-12\n"
        "    _RUNTIME_SCOPE=system\n"
        "Tue 2024-03-05 10:11:13.000001 UTC [s=4d1c2b3a;i=1a2c;b=9f0e6c2d;m=1e3f5a7c;t=613a5c;x=77ab]\n"
        "    _TRANSPORT=kernel\n"
        "    MESSAGE=nvidia-uvm: Loaded the UVM driver, major device number 507.\n")
    row = one(text)
    assert row["ts"] == datetime(2024, 3, 5, 10, 11, 12, 123456) and row["host"] == "gpu-h100-12"
    assert row["xid"] == 119 and row["uptime_s"] == pytest.approx(8123.456789)
    assert row["message"].startswith("Timeout after 6s of waiting for RPC response from GPU1 GSP!")


def test_dmesg_x_facility_and_level_prefix_and_dmesg_r_raw_priority():
    rows = events("kern  :warn  : [  123.456789] NVRM: Xid (PCI:0000:3b:00): 120, pid=5, name=nv-fabricmana, "
                  "GSP task exception: The GSP has encountered an error.\n"
                  "kern  :info  : [  123.500000] nvidia-uvm: Loaded the UVM driver, major device number 507.\n"
                  "<4>[  124.400000] NVRM: Xid (PCI:0000:3b:00): 140, pid='<unknown>', name=<unknown>, An uncorrectable "
                  "ECC error detected (possible firmware handling failure) DRAM:-1840132704, LTC:0, MMU:0, PCIE:0\n"
                  "<6>[  124.500000] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context\n")
    assert [(r["xid"], r["uptime_s"]) for r in rows] == [(120, pytest.approx(123.456789)), (140, pytest.approx(124.4))]


def test_talos_style_host_facility_level_and_bracketed_iso_time():
    row = one("192.168.11.119: kern: warning: [2024-03-05T21:27:51.291660856Z]: NVRM: Xid (PCI:0000:01:00): 119, "
              "pid=3120, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU0 GSP!\n")
    assert row["ts"] == datetime(2024, 3, 5, 21, 27, 51, 291660) and row["xid"] == 119


MORE_PREFIXES = [
    ("kern  :warn  : [Tue Mar  5 10:11:12 2024] ", dict(ts=datetime(2024, 3, 5, 10, 11, 12))),  # dmesg -T -x
    ("1709633472.123456 gpu-a01 kernel: ", dict(ts=datetime(2024, 3, 5, 10, 11, 12, 123456), host="gpu-a01")),  # short-unix
    ("<4>1 2024-03-05T10:11:12.123456+00:00 gpu-a01 kernel - - - [  123.4] ",  # RFC 5424 forwarding
     dict(ts=datetime(2024, 3, 5, 10, 11, 12, 123456), uptime_s=123.4, host="gpu-a01")),
    ("<4>Mar  5 10:11:12 gpu-a01 kernel: ", dict(ts=datetime(2024, 3, 5, 10, 11, 12))),  # RFC 3164 with PRI
    ("[  123.456789] [T1234] ", dict(uptime_s=123.456789)),  # CONFIG_PRINTK_CALLER
    ("\ufeff[  123.4] ", dict(uptime_s=123.4)),  # a BOM on the first line
    ("\x00\x00\x00\x00Mar  5 10:11:12 gpu-a01 kernel: ", dict(ts=datetime(2024, 3, 5, 10, 11, 12))),  # NULs after a crash
]


@pytest.mark.parametrize("prefix,expect", MORE_PREFIXES, ids=range(len(MORE_PREFIXES)))
def test_more_prefixes_from_other_tools(prefix, expect):
    row = one(prefix + "NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=x, Graphics Exception\n")
    assert row["xid"] == 13 and row["message"] == "Graphics Exception"
    for k, v in expect.items():
        assert row[k] == (pytest.approx(v) if isinstance(v, float) else v), (k, row)


def test_ansi_colour_codes_and_carriage_returns():
    text = ("\x1b[32m[  123.456789] \x1b[0m\x1b[33mNVRM: Xid (PCI:0000:3b:00): 45, pid=912, name=python3, "
            "Ch 00000010\x1b[0m\r\n"
            "\x1b[32m[Tue Mar  5 10:11:12 2024] \x1b[0mNVRM: Xid (PCI:0000:3b:00): 43, pid=912, name=python3, "
            "Ch 00000010\r\n")
    rows = events(text, tz="Asia/Shanghai")
    assert [r["xid"] for r in rows] == [45, 43]
    assert rows[0]["uptime_s"] == pytest.approx(123.456789) and rows[1]["ts"] == datetime(2024, 3, 5, 2, 11, 12)
    assert all("\r" not in r["message"] and "\x1b" not in r["message"] for r in rows)


def test_xid_line_wrapped_by_a_paste():
    soft = ("Mar  5 10:11:12 gpu-a01 kernel: [  123.456789] NVRM: Xid (PCI:0000:3b:00): 13, pid=1234,\n"
            "    name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Illegal Instruction Encoding\n"
            "Mar  5 10:11:13 gpu-a01 kernel: [  124.000000] nvidia-peermem nv_get_p2p_free_callback:127 ERROR\n")
    row = one(soft)
    assert row["process"] == "python3" and row["message"].endswith("Illegal Instruction Encoding")
    hard = ("[  123.456789] NVRM: Xid (PCI:0000:3b:00): 63, pid=77, name=torchrun, Row Remapper: New row (0x0000\n"
            "0000deadbeef) was marked for remapping, reset gpu to activate.\n"
            "[  124.000000] nvidia 0000:3b:00.0: enabling device (0000 -> 0002)\n")
    row = one(hard)
    assert "(0x00000000deadbeef) was marked" in row["message"]
    # NULs a crash left open the next record; they are no tail
    crash = ("Mar  5 10:11:12 gpu-a01 kernel: [  123.4] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=x, Graphics Exception\n"
             "\x00\x00\x00Mar  5 10:20:00 gpu-a01 kernel: [    0.000000] Linux version 6.8.0-45-generic\n")
    assert one(crash)["message"] == "Graphics Exception"
    # a log without time prefixes: the next line is a record of its own, not a tail
    bare = "NVRM: Xid (PCI:0000:3b:00): 13, pid=1234, name=python3, Graphics Exception\nmlx5_core: link up\n"
    assert one(bare)["message"] == "Graphics Exception"


# -- event shapes across driver generations ------------------------------------------------
SHAPES = [
    # R470: pid but no name
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 13, pid=18361, Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): "
     "Misaligned Address", dict(xid=13, pid=18361, process=None)),
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 48, DBE (0x00000002)", dict(xid=48, pid=None, message="DBE (0x00000002)")),
    ("[  812.1] NVRM: Xid (PCI:0000:86:00): 92, pid=1, name=x, High single-bit ECC error rate",
     dict(xid=92, pci_bus_id="0000:86:00.0")),
    ("[  812.1] NVRM: Xid (PCI:0000:ca:00): 94, pid=2975042, name=python3, Contained: CE User Channel (0x2). "
     "RST: No, D-RST: No", dict(xid=94, pid=2975042, process="python3")),
    ("[  812.1] NVRM: Xid (PCI:0000:ca:00): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, "
     "D-RST: No", dict(xid=95, pid=None, process=None)),
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 74, pid=3311, name=python, NVLink: fatal error detected on link 5"
     "(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)", dict(xid=74)),
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 64, pid='<unknown>', name=<unknown>, Row Remapper Error: (0x00000005e6f0d420) "
     "- All reserved rows for bank are remapped", dict(xid=64)),
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, errorString CTX "
     "SWITCH TIMEOUT, Info 0x58005", dict(xid=109, pid=1797828, process="pt_main_thread")),
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 119, pid=5, name=nvidia-smi, Timeout after 6s of waiting for RPC "
     "response from GPU1 GSP! Expected function 10 (FREE) (0xa55a0040 0x0).", dict(xid=119)),
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 120, pid=5, name=python, GSP task exception: The GSP has encountered "
     "an error", dict(xid=120)),
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 140, pid='<unknown>', name=<unknown>, An uncorrectable ECC error "
     "detected (possible firmware handling failure) DRAM:-1840132704, LTC:0, MMU:0, PCIE:0", dict(xid=140)),
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
     "(GPU Reset Required)", dict(xid=154, recovery_action="GPU Reset Required")),
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 10 (0x004505c6 0x00000000 "
     "0x00000000 0x00000000 0x00000000 0x00000000)", dict(xid=149, fatal=True, subcode="NETIR_LINK_EVT")),
    ("[  812.1] NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot "
     "Required) caused by previous Xid 149", dict(xid=154, recovery_action="Node Reboot Required")),
    ("[  812.1] NVRM: Xid (PCI:0002:00:01): 79, pid=1, name=x, GPU has fallen off the bus.",
     dict(xid=79, pci_bus_id="0002:00:01.0")),
    ("[  812.1] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 43, pid=77, name=python3, Ch 00000009",
     dict(xid=43, gpu_instance="GPU-I:05")),
    ("[  812.1] NVRM: Xid (0000:03:00): 31, Ch 00000001, engmask 00000101, intr 10000000",
     dict(xid=31, pci_bus_id="0000:03:00.0")),
]


@pytest.mark.parametrize("line,expect", SHAPES, ids=[f"xid{e['xid']}-{i}" for i, (_, e) in enumerate(SHAPES)])
def test_event_shapes_across_driver_generations(line, expect):
    row = one(line + "\n")
    for k, v in expect.items():
        assert row[k] == v, (k, row)


def test_nvswitch_sxid_groups_count_once_each():
    pre = "Mar  5 10:11:12 dgx-h100-03 kernel: [ 5012.34{}] nvidia-nvswitch{}: SXid (PCI:0000:{}:00.0): "
    lines = [
        pre.format(1, 3, "86") + "20034, Fatal, Link 46 LTSSM Fault Up",
        pre.format(1, 3, "86") + "20034, Severity 1 Engine instance 46 Sub-engine instance 00",
        pre.format(1, 3, "86") + "20034, Data {0x50610002, 0x10100030, 0x00000000, 0x10100030, 0x00000000, "
                                 "0x00000000, 0x00000000, 0x00000000}",
        "Mar  5 10:11:12 dgx-h100-03 kernel: [ 5012.352] nvidia-nvswitch3: Link 46 reset, state change",
        pre.format(5, 0, "07") + "12028, Non-fatal, Link 32 egress non-posted PRIV error (First)",
        pre.format(5, 0, "07") + "12028, Severity 0 Engine instance 32 Sub-engine instance 00",
        pre.format(5, 0, "07") + "12028, Data {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000}",
    ]
    rows = events("\n".join(lines) + "\n")
    assert [(r["kind"], r["xid"], r["pci_bus_id"], r["fatal"]) for r in rows] == [
        ("SXid", 20034, "0000:86:00.0", True), ("SXid", 12028, "0000:07:00.0", False)]


def test_r570_nvswitch_burst_at_boot_with_a_tail_whose_head_was_lost():
    # dmesg of an HGX H100 at driver load: per link "Non-fatal", "Severity", "Data"; the first
    # line is the Data of a group whose head fell out of the ring buffer: kept, not dropped
    data = "Data {{0x0000002{0}, 0x0000002{0}, 0x00000000, 0x0000002{0}, 0x80005302, 0x00000000, 0x00000000}}"
    lines = ["[   38.175561] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, " + data.format("b")]
    for link, up in ((44, 38.178), (45, 38.187), (46, 38.194)):
        head = "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, "
        lines += [f"[{up:13.6f}] {head}Non-fatal, Link {link} Minion Link DLREQ interrupt",
                  f"[{up + 0.002:13.6f}] {head}Severity 0 Engine instance {link} Sub-engine instance 00",
                  f"[{up + 0.004:13.6f}] {head}" + data.format("c")]
    rows = events("\n".join(lines) + "\n")
    assert [r["message"].split(",")[0] for r in rows] == ["Data {0x0000002b"] + ["Non-fatal"] * 3
    assert {(r["kind"], r["xid"], r["pci_bus_id"]) for r in rows} == {("SXid", 22013, "0000:04:00.0")}


def test_gpu_at_and_board_serial_lines_build_the_map():
    text = ("Mar  5 10:11:12 gpu-a01 kernel: [  812.1] NVRM: GPU at PCI:0000:3b:00: GPU-6a1d7e3c-91b1-2f6e-7c1e-0e6a9b0c1d2e\n"
            "Mar  5 10:11:12 gpu-a01 kernel: [  812.1] NVRM: GPU Board Serial Number: 1652221012345\n"
            "Mar  5 10:11:12 gpu-a01 kernel: [  812.2] " + XID79 + "\n")
    fp = parse(text)
    assert fp.gpu_map.select("pci_bus_id", "uuid", "serial").rows() == [
        ("0000:3b:00.0", "GPU-6a1d7e3c-91b1-2f6e-7c1e-0e6a9b0c1d2e", "1652221012345")]
    assert fp.events["xid"].to_list() == [79]


def test_gpu_map_lines_far_from_any_xid_and_in_journal_json():
    noise = "".join(f"[  {900 + i}.000000] mlx5_core 0000:0c:00.0: mlx5_fw_tracer_handle_traces:{i}: FW tracer event\n"
                    for i in range(200))
    text = ("[  812.100000] NVRM: GPU at PCI:0000:3b:00: GPU-6a1d7e3c-91b1-2f6e-7c1e-0e6a9b0c1d2e\n"
            "[  812.100001] NVRM: GPU Board Serial Number: 1652221012345\n" + noise + f"[ 1500.000000] {XID79}\n")
    fp = parse(text)
    assert fp.gpu_map["serial"].to_list() == ["1652221012345"] and fp.events["line_no"].to_list() == [203]
    text = "\n".join([_journal_entry("NVRM: GPU at PCI:0000:3b:00: GPU-6a1d7e3c-91b1-2f6e-7c1e-0e6a9b0c1d2e"),
                      _journal_entry("NVRM: GPU Board Serial Number: 1652221012345"),
                      _journal_entry(XID79)]) + "\n"
    fp = parse(text)
    assert fp.gpu_map.select("host", "serial").rows() == [("gpu-a01", "1652221012345")]


def test_dmesg_fallen_off_message_with_indented_continuations():
    text = ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
            "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
            "               NVRM: fallen off the bus and is not responding to commands.\n"
            "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
            "[ 1843.439669] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build\n")
    row = one(text)
    assert (row["xid"], row["pci_bus_id"], row["uptime_s"]) == (79, "0000:b3:00.0", pytest.approx(1843.308145))


NOT_EVENTS = [
    "Mar  5 10:11:12 gpu-a01 kernel: [  12.3] xid-exporter[1234]: segfault at 0 ip 00007f3a sp 00007ffd error 4 in xid-exporter[55d0+1000]",
    'Mar  5 10:11:12 gpu-a01 kernel: [  12.3] audit: type=1400 audit(1709633472.120:88): apparmor="DENIED" operation="open" profile="xid-exporter" name="/dev/nvidiactl" pid=1234 comm="xid-exporter"',
    "Mar  5 10:11:12 gpu-a01 xid-exporter[1234]: scraped Xid (PCI:0000:3b:00): 79 from the journal",
    "Mar  5 10:11:12 gpu-a01 gpud[2211]: detected NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.",
    "Mar  5 10:11:12 gpu-a01 dcgm-exporter[900]: level=info msg=\"DCGM_FI_DEV_XID_ERRORS collected\"",
    "Mar  5 10:11:12 gpu-a01 kernel: [  12.3] nvidia-uvm: Loaded the UVM driver, major device number 507.",
    "Mar  5 10:11:12 gpu-a01 kernel: [  12.3] nvidia-peermem nv_mem_client_init:443 INFO nvidia-peermem loaded",
    "Mar  5 10:11:12 gpu-a01 kernel: [  12.3] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023",
    "Mar  5 10:11:12 gpu-a01 kernel: [  12.3] NVRM: GPU0 _kgspIsHeartbeatTimedOut: Heartbeat timed out, diff 6070 timeout 5200",
    "Mar  5 10:11:12 gpu-a01 kernel: [  12.3] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  535.129.03",
    "Mar  5 10:11:12 gpu-a01 kernel: [  12.3] Xid handling: see https://docs.nvidia.com/deploy/xid-errors/",
    # an agent's own JSON log quoting a kernel line, bare and through syslog
    '{"level":"warn","ts":"2025-01-28T06:47:16Z","msg":"known sxid","line":"kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0}"}',
    'Jan 28 06:47:16 gpu-a01 gpud[3121]: {"level":"warn","msg":"known sxid","line":"nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0}"}',
]


@pytest.mark.parametrize("line", NOT_EVENTS)
def test_lines_that_mention_xid_or_the_driver_are_not_events(line):
    fp = parse(line + "\n")
    assert fp.events.height == 0 and not fp.rejects and fp.rows_skipped == 1


# -- years, zones and overlapping logs ------------------------------------------------------
def test_kern_log_year_across_new_year_and_dst_in_the_site_zone():
    text = ("Dec 31 23:59:59 gpu-a01 kernel: [86000.000000] " + XID79 + "\n"
            "Jan  1 00:00:01 gpu-a01 kernel: [86002.000000] " + XID79 + "\n"
            "Mar 30 01:59:59 gpu-a01 kernel: [90000.000000] " + XID79 + "\n"
            "Mar 30 03:00:01 gpu-a01 kernel: [90002.000000] " + XID79 + "\n")
    rows = events(text, tz="Europe/Berlin", ref=datetime(2025, 4, 2))
    assert [r["ts"] for r in rows] == [datetime(2024, 12, 31, 22, 59, 59), datetime(2024, 12, 31, 23, 0, 1),
                                       datetime(2025, 3, 30, 0, 59, 59), datetime(2025, 3, 30, 1, 0, 1)]


def test_dmesg_journal_json_and_kern_log_of_one_host_give_each_event_once(tmp_path):
    host = tmp_path / "gpu-a01"
    host.mkdir()
    boot = datetime(2024, 3, 5, 8, 0, 0, tzinfo=timezone.utc)
    xid = "NVRM: Xid (PCI:0000:3b:00): 63, pid=77, name=torchrun, Row Remapper: New row (0x1) was marked for remapping, reset gpu to activate."
    (host / "dmesg.log").write_text(f"[ 3600.250000] {xid}\n[ 7200.500000] {XID79}\n")
    (host / "kern.log").write_text(f"Mar  5 09:00:00 gpu-a01 kernel: [ 3600.250000] {xid}\n"
                                   f"Mar  5 10:00:00 gpu-a01 kernel: [ 7200.500000] {XID79}\n")
    us = lambda up: str(int((boot.timestamp() + up) * 1e6))  # noqa: E731
    (host / "journal.json").write_text(
        _journal_entry(xid, us=us(3600.25), mono=3600250000) + "\n" + _journal_entry(XID79, us=us(7200.5), mono=7200500000) + "\n")
    with gzip.open(host / "kern.log.1.gz", "wt") as f:  # an older rotation that overlaps the first event
        f.write(f"Mar  5 09:00:00 gpu-a01 kernel: [ 3600.250000] {xid}\n")
    df, rejects = parse_xid_files(sorted(host.iterdir()), tz="UTC")
    assert not rejects
    assert df.select("xid", "uptime_s").rows() == [(63, pytest.approx(3600.25)), (79, pytest.approx(7200.5))]


# -- properties ---------------------------------------------------------------------------
PREFIXES = ["", "[ 1234.567890] ", "<4>[ 1234.5] ", "kern  :err   : [ 12.000001] ", "[Tue Mar  5 10:11:12 2024] ",
            "Mar  5 10:11:12 gpu-a01 kernel: ", "Mar 05 10:11:12.123456 gpu-a01 kernel: [ 9.5] ",
            "2024-03-05T10:11:12.123456+08:00 gpu-a01 kernel: ", "\x1b[32m[ 1.0] \x1b[0m", "kernel: "]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prefix=st.sampled_from(PREFIXES), dom=st.sampled_from(["0000", "00000000", "0002"]),
       bus=st.integers(0, 255), code=st.integers(1, 200),
       tail=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=60),
       eol=st.sampled_from(["\n", "\r\n"]))
def test_any_prefixed_xid_line_parses_to_its_code_and_canonical_pci(prefix, dom, bus, code, tail, eol):
    line = f"{prefix}NVRM: Xid (PCI:{dom}:{bus:02X}:00): {code}, pid=42, name=python3, {tail}{eol}"
    row = one(line)
    assert row["xid"] == code and row["pci_bus_id"] == f"{int(dom, 16):04x}:{bus:02x}:00.0"
    assert row["pid"] == 42 and row["process"] == "python3"
