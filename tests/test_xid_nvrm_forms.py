"""The driver's codeless lines, in every prefix style fleetfault reads.

The lines are the forms quoted in public bug reports: ``NVRM: GPU 0000:01:00.0: GPU has
fallen off the bus.`` printed next to the Xid 79 line (NVIDIA/NVSentinel#155, leptonai/gpud
#1209), ``NVRM: GPU at PCI:0000:65:00: GPU has fallen off the bus.`` and ``NVRM: GPU at
0000:01:00.0 has fallen off the bus.`` of older drivers (Bumblebee-Project/Bumblebee#554),
``NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)`` retried at boot
(Cyridd/cmpunlocker#4), and ``NVRM: Xid (PCI:...): 79, GPU has fallen off the bus.`` as
reports paste it with the id elided.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from pipeline.ingest.kernel.stage import parse_xid_files

T0 = datetime(2024, 3, 5, 10, 11, 12, 123456)  # UTC; the host's zone is UTC
UP0 = 86012.5

#: (seconds after T0, text) - one GPU falls off and fails to come back; another falls off
#: with no Xid line at all; a report pastes an Xid with its id elided.
LINES = [
    (0.0, "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
    (0.000091, "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus."),
    (0.4, "NVRM: GPU 0000:01:00.0: GPU serial number is 0."),
    (20.0, "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)"),
    (20.0004, "NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0"),
    (20.13, "NVRM: osInitNvMapping: *** Cannot attach gpu"),
    (20.1301, "NVRM: RmInitAdapter: osInitNvMapping failed, bailing out of RmInitAdapter"),
    (20.1302, "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)"),
    (100.0, "NVRM: GPU 0000:41:00.0: GPU has fallen off the bus."),
    (160.0, "NVRM: GPU at PCI:0000:65:00: GPU has fallen off the bus."),
    (170.0, "NVRM: GPU at 0000:81:00.0 has fallen off the bus."),
    (230.0, "NVRM: Xid (PCI:...): 145, pid=2961, name=python3, RLW_REMAP Nonfatal XC0 i0 Link 00 (0x0004bb03 0x00000000)"),
    (240.0, "NVRM: RmInitAdapter failed! (0x26:0xffff:1114)"),
]
EXPECTED = [("Xid", 79, "0000:01:00.0", 0.0), ("RmInitAdapter", 0, "0000:01:00.0", 20.0),
            ("Xid", 79, "0000:41:00.0", 100.0), ("Xid", 79, "0000:65:00.0", 160.0),
            ("Xid", 79, "0000:81:00.0", 170.0), ("Xid", 145, None, 230.0), ("RmInitAdapter", 0, None, 240.0)]


def _stamp(style: str, dt: float) -> str:
    t = T0 + timedelta(seconds=dt)
    up = UP0 + dt
    return {
        "dmesg": f"[{up:12.6f}] ",
        "dmesg_T": f"[{t:%a %b} {t.day:2d} {t:%H:%M:%S %Y}] ",
        "dmesg_iso": f"{t:%Y-%m-%dT%H:%M:%S},{t.microsecond:06d}+00:00 ",
        "dmesg_x_iso": f"kern  :err   : {t:%Y-%m-%dT%H:%M:%S},{t.microsecond:06d}+00:00 ",
        "syslog": f"{t:%b} {t.day:2d} {t:%H:%M:%S} gpu-a01 kernel: ",
        "kern_log": f"{t:%b} {t.day:2d} {t:%H:%M:%S} gpu-a01 kernel: [{up:12.6f}] ",
        "rfc3339": f"{t.isoformat(timespec='microseconds')}+00:00 gpu-a01 kernel: ",
        "journal_iso": f"{t:%Y-%m-%dT%H:%M:%S}+0000 gpu-a01 kernel: ",
        "journal_precise": f"{t:%b} {t.day:02d} {t:%H:%M:%S}.{t.microsecond:06d} gpu-a01 kernel: ",
        "journal_unix": f"{t.replace(tzinfo=timezone.utc).timestamp():.6f} gpu-a01 kernel: ",
        "journal_monotonic": f"[{up:12.6f}] gpu-a01 kernel: ",
        "rfc5424": f"<3>1 {t.isoformat(timespec='microseconds')}+00:00 gpu-a01 kernel - - - ",
    }[style]


STYLES = ["dmesg", "dmesg_T", "dmesg_H", "dmesg_iso", "dmesg_x_iso", "syslog", "kern_log", "rfc3339",
          "journal_iso", "journal_precise", "journal_unix", "journal_monotonic", "rfc5424", "journal_json"]


BANNER = ("Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) (x86_64-linux-gnu-gcc-13 (Ubuntu 13.2.0-23ubuntu4) "
          "13.2.0, GNU ld (GNU Binutils for Ubuntu) 2.42) #45-Ubuntu SMP PREEMPT_DYNAMIC")


def _log(style: str) -> str:
    noise = BANNER  # the boot's first line: where the line has a clock and no uptime, a boot mark
    if style == "journal_json":
        out = []
        for dt, text in [(-1.0, noise)] + LINES:
            t = T0 + timedelta(seconds=dt)
            us = int(t.replace(tzinfo=timezone.utc).timestamp() * 1e6)
            out.append(json.dumps({"__REALTIME_TIMESTAMP": str(us), "_HOSTNAME": "gpu-a01", "_TRANSPORT": "kernel",
                                   "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": text,
                                   "_SOURCE_MONOTONIC_TIMESTAMP": str(int((UP0 + dt) * 1e6))}))
        return "\n".join(out) + "\n"
    if style == "dmesg_H":  # a minute anchor, then deltas from the line before
        out = [f"[{T0:%b}{T0.day:2d} {T0:%H:%M}] {noise}"]
        prev = -T0.second - T0.microsecond / 1e6
        for dt, text in LINES:
            out.append(f"[  +{dt - prev:.6f}] {text}")
            prev = dt
        return "\n".join(out) + "\n"
    return "".join(_stamp(style, dt) + text + "\n" for dt, text in [(-1.0, noise)] + LINES)


@pytest.mark.parametrize("style", STYLES)
def test_codeless_forms_in_every_prefix_style(tmp_path, style):
    path = tmp_path / "gpu-a01" / f"{style}.log"
    path.parent.mkdir()
    path.write_text(_log(style))
    written = (T0 + timedelta(hours=1)).replace(tzinfo=timezone.utc).timestamp()
    os.utime(path, (written, written))  # year-less stamps take their year from the file's mtime
    df, rejects = parse_xid_files([path], tz="UTC", boot_time=T0 - timedelta(seconds=UP0))
    assert rejects == []
    got = [(r["kind"], r["xid"], r["pci_bus_id"]) for r in df.sort("ts", "line_no").iter_rows(named=True)]
    assert got == [(k, x, p) for k, x, p, _ in EXPECTED], style
    # every event is dated, to the second (dmesg -H: the minute anchor, then its deltas)
    want = [T0 + timedelta(seconds=dt) for *_, dt in EXPECTED]
    for ts, w in zip(df.sort("ts", "line_no")["ts"].to_list(), want):
        assert abs((ts - w).total_seconds()) < 1.0, style
    assert set(df["ts_quality"]) == {"exact"}
    # the banner marks the boot where the line has a clock and no uptime
    from pipeline.ingest.kernel.stage import parse_file

    marks = parse_file(path, tz="UTC").segments.filter(pl.col("boot_seg") < 0)["boot_at"].to_list()
    clock_only = style in ("dmesg_T", "dmesg_iso", "dmesg_x_iso", "syslog", "rfc3339", "journal_iso",
                           "journal_precise", "journal_unix", "rfc5424", "dmesg_H")
    assert len(marks) == (1 if clock_only else 0), style
    if marks:  # (dmesg -H's anchor line is stamped to the minute)
        assert abs((marks[0] - (T0 - timedelta(seconds=1))).total_seconds()) < (60 if style == "dmesg_H" else 1)


def test_the_one_line_fall_merges_with_its_xid_79_across_files(tmp_path):
    """A host keeping dmesg and syslog: the Xid line in one, the one-line message in the
    other, 0.1 ms apart: one event."""
    a = tmp_path / "gpu-a01" / "dmesg.log"
    a.parent.mkdir()
    a.write_text(_stamp("dmesg_T", 0.0) + LINES[0][1] + "\n")
    b = tmp_path / "gpu-a01" / "syslog.log"
    b.write_text(_stamp("syslog", 0.000091) + LINES[1][1] + "\n")
    written = (T0 + timedelta(hours=1)).replace(tzinfo=timezone.utc).timestamp()
    os.utime(b, (written, written))
    df, _ = parse_xid_files([a, b], tz="UTC")
    assert df.select("kind", "xid", "pci_bus_id").rows() == [("Xid", 79, "0000:01:00.0")]


def test_an_elided_id_is_counted_on_its_host(tmp_path):
    from pipeline.config import config_from_dict
    from pipeline.ingest import kernel
    from pipeline.link.xid import derive
    from pipeline.run import RunContext
    from pipeline.warehouse import Warehouse

    data = tmp_path / "data"
    path = data / "kernel" / "gpu-a01" / "kern.log"
    path.parent.mkdir(parents=True)
    path.write_text(_log("kern_log"))
    with Warehouse(tmp_path / "w.duckdb") as wh:
        ctx = RunContext(config_from_dict({}), wh, data, tmp_path / "out")
        kernel.run(ctx)
        derive(ctx)  # (as pipeline.run does after the stage)
        rows = wh.con.execute("SELECT host, kind, xid, count(*) FROM xid_events WHERE pci_bus_id IS NULL GROUP BY ALL ORDER BY 2").fetchall()
        classes = wh.con.execute("SELECT DISTINCT severity, symptom_code, mnemonic FROM xid_events WHERE kind = 'RmInitAdapter'").fetchall()
    assert rows == [("gpu-a01", "RmInitAdapter", 0, 1), ("gpu-a01", "Xid", 145, 1)]
    assert classes == [("critical", "BOOT_FAILURE", "RM_INIT_ADAPTER_FAILED")]  # classified, not 'unknown'
    assert pl.DataFrame(rows, orient="row").height == 2
