"""A small fleet shaped the way another organisation's data looks, not the way our simulator
writes it: every liberty ``CONTRACT.md`` allows is taken (see ``tests/test_unseen_fleet.py``).

- ``inventory.csv``: upper-case headers in another order, extra columns (RACK, PO_NUMBER,
  NOTES), dates as ``2024/03/05``, ``05.03.2024`` and ``...T..Z``, empty batch and vendor,
  FQDN and upper-case host names, 8-GPU and 4-GPU hosts, a GPU listed twice (pulled and
  re-installed in another host, its first row never
  closed), a row exported twice, a site the config does not name, one unreadable row.
- telemetry: the minimal query real teams run (``timestamp,name,utilization.gpu,memory.used,
  memory.total``: no serial, no index, no bus id) on one host; ``timestamp,index,serial,
  temperature.gpu,power.draw`` on another; a host folder that is not in the inventory; an
  empty file; a host with kernel logs only.
- kernel logs: ``dmesg -T`` with no Xid at all; a syslog with Xids on a bus id that no
  telemetry names; an uptime-only dmesg.
- tickets: one service point, four columns (id, date, serial, description).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2025, 5, 1, 0, 0, 0)
DAYS = 12
LOGS_WRITTEN = (START + timedelta(days=DAYS)).replace(tzinfo=timezone.utc).timestamp()

#: host -> (site, model, vendor, batch, serials by slot)
FQDN = "node-017.cluster.local"
DGX = "DGX-A-12"
KLOGS_ONLY = "node-018.cluster.local"
STRAY = "gpu-spare-03"  # telemetry folder that no inventory row names

FQDN_SERIALS = [f"1321021{n:06d}" for n in range(8)]
DGX_SERIALS = [f"PH{n:04d}A" for n in range(4)]
K_SERIALS = [f"0325{n:09d}" for n in range(4)]
MOVED = FQDN_SERIALS[3]  # pulled from node-017 slot 3, re-installed in node-018 slot 3
SPARE = "1321021999999"  # took slot 3 of node-017


def inventory_text() -> str:
    head = "HOST,SLOT,SERIAL,MODEL,SITE,RACK,Installed_At,REMOVED_AT,BATCH,VENDOR,PO_NUMBER,NOTES"
    rows = [head]
    for slot, s in enumerate(FQDN_SERIALS):
        removed = ""  # MOVED's row too: nobody closed it when the card went to node-018
        rows.append(f"{FQDN},{slot},{s},NVIDIA A100-SXM4-80GB,lab1,R12,2024/03/05,{removed},,,PO-4471,")
    rows.append(f"{FQDN},3,{SPARE},NVIDIA A100-SXM4-80GB,lab1,R12,2025/05/06,,,,PO-5102,spare from depot")
    for slot, s in enumerate(DGX_SERIALS):
        rows.append(f'{DGX},{slot},{s},NVIDIA H100 80GB HBM3,dc-east,"B-4, top",05.03.2024,,H100-Q1,Dell,,"has ""quotes"", commas"')
    rows.append(rows[-4])  # slot 0 exported twice
    for slot, s in enumerate(K_SERIALS[:3]):
        rows.append(f"{KLOGS_ONLY},{slot},{s},Tesla V100-SXM2-32GB,lab1,R13,2019-07-01T08:00:00Z,,,Quanta,,")
    rows.append(f"{KLOGS_ONLY},3,{MOVED},NVIDIA A100-SXM4-80GB,lab1,R13,2025-05-07T09:30:00Z,,,,,re-installed")
    rows.append(f"{KLOGS_ONLY},4,{K_SERIALS[3]},Tesla V100-SXM2-32GB,lab1,R13,last tuesday,,,Quanta,,bad date")
    return "\r\n".join(rows) + "\r\n"


def _times(step_h: int = 6):
    t = START
    while t < START + timedelta(days=DAYS):
        yield t
        t += timedelta(hours=step_h)


def minimal_smi() -> dict[str, str]:
    """``nvidia-smi --query-gpu=timestamp,name,utilization.gpu,memory.used,memory.total --format=csv -l``."""
    files = {}
    for day in range(DAYS):
        lines = ["timestamp, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]"]
        for t in _times():
            if t.date() != (START + timedelta(days=day)).date():
                continue
            for i in range(8):
                util = "[N/A]" if (i == 5 and t.hour == 12) else f"{(37 * i + t.hour) % 101} %"
                lines.append(f"{t:%Y/%m/%d %H:%M:%S}.{100 + i:03d}, NVIDIA A100-SXM4-80GB, {util}, "
                             f"{1000 * i + 3} MiB, 81920 MiB")
        files[f"gpu-{START + timedelta(days=day):%Y-%m-%d}.csv"] = "\n".join(lines) + "\n"
    return files


def serial_smi(serials: list[str]) -> str:
    """``--query-gpu=timestamp,index,serial,temperature.gpu,power.draw --format=csv``."""
    lines = ["timestamp, index, serial, temperature.gpu, power.draw [W]"]
    for t in _times():
        for i, s in enumerate(serials):
            temp = 91 if (i == 2 and t.day > 8) else 45 + i
            power = "[Unknown Error]" if (i == 1 and t.hour == 18) else f"{300.5 + i:.2f} W"
            lines.append(f"{t:%Y/%m/%d %H:%M:%S}.000, {i}, {s}, {temp}, {power}")
    return "\n".join(lines) + "\n"


def dmesg_t_no_xid() -> str:
    """``dmesg -T`` of a quiet host: NVIDIA lines, no Xid."""
    return (
        "[Thu May  1 00:00:03 2025] Linux version 6.5.0-1018-nvidia (buildd@bos03-amd64-040)\n"
        "[Thu May  1 00:00:09 2025] nvidia: loading out-of-tree module taints kernel.\n"
        "[Thu May  1 00:00:10 2025] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08\n"
        "[Fri May  2 13:14:15 2025] nvidia-nvswitch: Probing device 0000:05:00.0\n"
    )


def syslog_xids() -> str:
    """Traditional syslog; Xids on a bus id no telemetry names (that host's query has no bus id)."""
    return (
        f"May  3 04:05:06 {DGX} kernel: [123456.789012] NVRM: Xid (PCI:0000:cb:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        f"May  3 04:05:06 {DGX} kernel: [123456.789100] NVRM: GPU 0000:cb:00.0: GPU has fallen off the bus.\n"
        f"May  4 11:00:00 {DGX} kernel: [200000.000000] NVRM: Xid (PCI:0000:1b:00): 48, pid=2211, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 1.\n"
        f"May  4 11:00:01 {DGX} systemd[1]: Started Session 7 of user root.\n"
    )


def uptime_dmesg() -> str:
    """Plain ``dmesg`` (uptime stamps) on the host that has no telemetry."""
    return (
        "[    0.000000] Linux version 5.4.0-150-generic (buildd@lcy02-amd64-045)\n"
        "[    1.206486] rtc_cmos 00:01: setting system clock to 2025-05-02T06:00:00 UTC (1746165600)\n"
        "[ 7200.123456] NVRM: Xid (PCI:0000:86:00): 63, pid=0, Row Remapper: New row marked for remapping, reset gpu to activate.\n"
        "[ 9000.000001] NVRM: Xid (PCI:0000:86:00): 31, pid=4242, name=train.py, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n"
    )


def tickets_text(replacements: bool) -> str:
    """One service point, four columns, free-text descriptions."""
    rows = ["id,date,serial,description"]
    rows.append(f'INC0001,2025-05-03,{DGX_SERIALS[2]},"GPU running hot (91C) - cleaned filters, monitoring"')
    rows.append("INC0002,2025-05-04,,node-018 training job crashed with MMU fault; user code")
    rows.append(f'INC0003,2025-05-05,{K_SERIALS[0]},"Xid 63 row remap pending, rebooted node, ok now"')
    if replacements:
        rows.append(f"INC0004,2025-05-06,{MOVED},GPU fell off the bus (Xid 79); replaced GPU with spare")
        rows.append(f"INC0005,2025-05-09,{DGX_SERIALS[1]},uncorrectable ECC errors (DBE) - RMA'd the GPU and replaced it")
    return "\n".join(rows) + "\n"


CONFIG = """\
[time]
default_tz = "UTC"

[sites.lab1]
tz = "Europe/Paris"
"""


def build(root: Path, *, replacements: bool = False, minimal_query: bool = True) -> Path:
    """Write the fleet under ``root/data`` and return that folder."""
    data = root / "data"
    (data / "inventory.csv").parent.mkdir(parents=True, exist_ok=True)
    (data / "inventory.csv").write_text(inventory_text(), encoding="utf-8")
    tel = data / "telemetry"
    for name, text in (minimal_smi() if minimal_query else {}).items():
        (tel / FQDN).mkdir(parents=True, exist_ok=True)
        (tel / FQDN / name).write_text(text)
    (tel / DGX).mkdir(parents=True)
    (tel / DGX / "smi.csv").write_text(serial_smi(DGX_SERIALS))
    (tel / DGX / "smi-empty.csv").write_text("")
    (tel / STRAY).mkdir(parents=True)
    (tel / STRAY / "smi.csv").write_text(serial_smi(["1999000000001", "1999000000002"]))
    ker = data / "kernel"
    for host, name, text in [(FQDN, "dmesg-T.log", dmesg_t_no_xid()), (DGX, "syslog.log", syslog_xids()),
                             (KLOGS_ONLY, "dmesg.log", uptime_dmesg())]:
        (ker / host).mkdir(parents=True, exist_ok=True)
        (ker / host / name).write_text(text)
        os.utime(ker / host / name, (LOGS_WRITTEN, LOGS_WRITTEN))  # as rsync -t leaves them
    (data / "tickets" / "helpdesk").mkdir(parents=True)
    (data / "tickets" / "helpdesk" / "export.csv").write_text(tickets_text(replacements))
    return data
