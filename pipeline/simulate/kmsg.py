"""The text of kernel messages: NVRM Xid lines per code, SXid triples, AER reports, boot and noise.

Reads nothing, writes nothing: :func:`event_lines` turns one kernel event into the message
lines a real driver prints (without the log prefix, which kernel.py adds per format).
Messages follow real driver output (NVIDIA's Xid catalogue and driver logs seen in the wild);
hex values, channels, GPCs, links and pids vary so that lines are not templates to memorise.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

APPS = ("python3", "python", "pt_main_thread", "torchrun", "nccl-tests", "all_reduce_perf", "vllm", "ray::IDLE",
        "trtllm-serve", "tritonserver", "deepspeed", "megatron", "dcgmi", "nvidia-smi", "java", "jupyter-lab")


def pid_name(rng: np.random.Generator, old: bool, unknown: bool = False) -> str:
    if unknown:
        return "pid='<unknown>', name=<unknown>, " if not old else "pid=0, "
    pid = int(rng.integers(900, 4_000_000))
    return f"pid={pid}, " if old else f"pid={pid}, name={APPS[int(rng.integers(len(APPS)))]}, "


def _hex(rng, digits: int) -> str:
    return f"0x{int(rng.integers(0, 16 ** min(digits, 15))):0{digits}x}"


def xid_text(code: int, rng: np.random.Generator, ecc: str) -> list[str]:
    """The message part(s) of one Xid; several entries mean several Xid lines of the same code."""
    ch = f"Ch {int(rng.choice([8, 9, 10, 16, 24, 32, 0x70, 0x1f8])):08x}"
    gpc, tpc, sm = int(rng.integers(0, 8)), int(rng.integers(0, 9)), int(rng.integers(0, 2))
    if code == 13:
        kind = ["Out Of Range Address", "Illegal Instruction Encoding", "Misaligned Address",
                "Illegal Instruction Parameter", "Invalid Address Space"][int(rng.integers(5))]
        out = [f"Graphics SM Warp Exception on (GPC {gpc}, TPC {tpc}, SM {sm}): {kind}",
               f"Graphics SM Global Exception on (GPC {gpc}, TPC {tpc}, SM {sm}): Multiple Warp Errors"]
        out += [f"Graphics Exception: ESR 0x5{int(rng.integers(0x10000, 0xfffff)):05x}=0x{int(rng.integers(1, 2**28)):x} "
                f"0x5{int(rng.integers(0x10000, 0xfffff)):05x}=0x{int(rng.integers(0, 64)):x}"]
        return out
    if code == 31:
        eng = ["GRAPHICS GPCCLIENT_T1_0", "GRAPHICS GPCCLIENT_T1_3", "CE3 HUBCLIENT_CE1", "GRAPHICS GPCCLIENT_GPM"][int(rng.integers(4))]
        typ = ["FAULT_PDE ACCESS_TYPE_VIRT_READ", "FAULT_PTE ACCESS_TYPE_VIRT_WRITE", "FAULT_PDE ACCESS_TYPE_VIRT_ATOMIC"][int(rng.integers(3))]
        addr = f"0x{int(rng.integers(0x7f00, 0x7fff)):x}_{int(rng.integers(0, 2**32)):08x}"
        return [f"{ch}, intr 00000000. MMU Fault: ENGINE {eng} faulted @ {addr}. Fault is of type {typ}"]
    if code in (43, 45):
        return [ch]
    if code == 8:
        return [f"{ch}, errorString CTX SWITCH TIMEOUT, Info 0x{int(rng.integers(0x1000, 0xfffff)):x}"]
    if code == 48:
        return [f"An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
                f"partition {int(rng.integers(0, 16))}, subpartition {int(rng.integers(0, 2))}."]
    if code == 62:
        return [f"{int(rng.integers(0, 9999)):04x}({int(rng.integers(0, 9999)):04x}) {_hex(rng, 8)[2:]} {_hex(rng, 8)[2:]}"]
    if code == 63:
        if ecc == "retire":
            return [f"Dynamic Page Retirement: New page retired, reboot to activate. ({_hex(rng, 16)})."]
        return [f"Row Remapper: New row ({_hex(rng, 16)}) was marked for remapping, reset gpu to activate."]
    if code == 64:
        if ecc == "retire":
            return [f"Dynamic Page Retirement: Fatal error, unable to retire page ({_hex(rng, 16)})."]
        return [f"Row Remapper: Failed to mark row ({_hex(rng, 16)}) for remapping, remapping resources exhausted."]
    if code == 74:
        link = int(rng.integers(0, 18))
        return [f"NVLink: fatal error detected on link {link}(0x0, 0x0, 0x{int(rng.choice([0x10000, 0x20000, 0x400])):x}, 0x0, 0x0, 0x0, 0x0)"]
    if code == 79:
        return ["GPU has fallen off the bus."]
    if code == 94:
        unit = ["SM (0x1)", "SM (0x2)", "L2 (0x4)", "FBHUB (0x8)"][int(rng.integers(4))]
        return [f"Contained: {unit}. RST: No, D-RST: No"]
    if code == 95:
        return [f"Uncontained: {['FBHUB', 'LTC', 'HSHUB'][int(rng.integers(3))]}. RST: Yes, D-RST: No"]
    if code == 109:
        return [f"{ch}, errorString CTX SWITCH TIMEOUT, Info 0x{int(rng.integers(0x1000, 0xfffff)):x}"]
    if code == 119:
        fn = [(76, "GSP_RM_CONTROL", "0x20800a4c 0x4"), (10, "FREE", "0xa55a0040 0x0"), (103, "GSP_RM_ALLOC", "0x2080 0x4")][int(rng.integers(3))]
        return [f"Timeout after {int(rng.choice([6, 45]))}s of waiting for RPC response from GPU{int(rng.integers(0, 8))} GSP! "
                f"Expected function {fn[0]} ({fn[1]}) ({fn[2]})."]
    if code == 120:
        return [f"GSP task exception: (task 1 raised error code 0x{int(rng.integers(1, 32)):x} for reason 0x0 at "
                f"0x{int(rng.integers(0x100000, 0xffffff)):x}) (0 more errors skipped)"]
    return [f"{ch}"]


SXID_TEXT = {
    12028: ("Non-fatal, Link {link} egress non-posted PRIV error (First)", 0),
    19084: ("Non-fatal, Link {link} AN1 Heartbeat Timeout Error", 0),
    20034: ("Fatal, Link {link} LTSSM Fault Up", 1),
    11004: ("Fatal, Link {link} ingress invalid ACL", 1),
}


def sxid_lines(code: int, rng: np.random.Generator) -> list[str]:
    """The three-line SXid group the NVSwitch driver prints."""
    sw = int(rng.integers(0, 4))
    bus = ["05", "06", "07", "08"][sw]
    link = int(rng.integers(0, 64))
    text, sev = SXID_TEXT[code]
    head = f"nvidia-nvswitch{sw}: SXid (PCI:0000:{bus}:00.0): {code}, "
    data = ", ".join(f"0x{int(v):08x}" for v in rng.integers(0, 2**16, 9) * (rng.random(9) < 0.3))
    return [head + text.format(link=link),
            head + f"Severity {sev} Engine instance {link} Sub-engine instance {int(rng.integers(0, 4)):02d}",
            head + "Data {" + data + "}"]


def aer_lines(bus: str, pci_id: str, rng: np.random.Generator) -> list[str]:
    """A corrected PCIe error report against the GPU (its root port one bus below)."""
    root = f"0000:{int(bus, 16) - 1:02x}:01.0"
    dev = f"0000:{bus}:00.0"
    kind = [("Physical Layer", "Receiver ID", "00000001", "[ 0] RxErr"),
            ("Data Link Layer", "Transmitter ID", "00001000", "[12] Timeout"),
            ("Data Link Layer", "Transmitter ID", "00000080", "[ 7] BadDLLP")][int(rng.integers(3))]
    return [f"pcieport {root}: AER: Corrected error received: {dev}",
            f"nvidia {dev}: PCIe Bus Error: severity=Corrected, type={kind[0]}, ({kind[1]})",
            f"nvidia {dev}:   device [{pci_id}] error status/mask={kind[2]}/0000e000",
            f"nvidia {dev}:    {kind[3]:<22} (First)"]


def falloff_lines(bus: str, pci_id: str) -> list[str]:
    return [f"NVRM: The NVIDIA GPU 0000:{bus}:00.0", f"NVRM: (PCI ID: {pci_id}) installed in this system has",
            "NVRM: fallen off the bus and is not responding to commands."]


KERNELS = ("5.15.0-105-generic", "5.15.0-119-generic", "6.8.0-45-generic", "4.18.0-513.24.1.el8_9.x86_64",
           "5.14.0-427.13.1.el9_4.x86_64")


def boot_lines(driver: str, kernel: str, buses: tuple[str, ...], rng: np.random.Generator,
               boot_utc: datetime | None = None) -> list[tuple[float, str]]:
    """(uptime seconds, message) of a boot: kernel banner, the RTC setting the clock (when the
    boot time is given), the NVIDIA module load, device enables."""
    out = [(0.0, f"Linux version {kernel} (buildd@lcy02-amd64-0{int(rng.integers(10, 99))}) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #{int(rng.integers(100, 130))}-Ubuntu SMP"),
           (0.0, f"Command line: BOOT_IMAGE=/vmlinuz-{kernel} root=UUID={_hex(rng, 8)[2:]}-{_hex(rng, 4)[2:]}-{_hex(rng, 4)[2:]}-{_hex(rng, 4)[2:]}-{_hex(rng, 12)[2:]} ro quiet splash pci=realloc iommu=pt"),
           (0.0, "x86/fpu: Supporting XSAVE feature 0x001: 'x87 floating point registers'")]
    if boot_utc is not None:
        epoch = int((boot_utc - datetime(1970, 1, 1)).total_seconds()) + 2
        stamp = (boot_utc + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%S")
        out.append((float(rng.uniform(1.2, 2.2)), f"rtc_cmos 00:01: setting system clock to {stamp} UTC ({epoch})"))
    t = float(rng.uniform(4.0, 9.0))
    out.append((t, "nvidia: module license 'NVIDIA' taints kernel."))
    out.append((t + 0.01, f"nvidia-nvlink: Nvlink Core is being initialized, major device number {int(rng.integers(230, 511))}"))
    for b in buses:
        t += float(rng.uniform(0.001, 0.02))
        out.append((t, f"nvidia 0000:{b}:00.0: enabling device (0000 -> 0002)"))
    out.append((t + 0.05, f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {driver}  Sun May 12 19:39:15 UTC 2024"))
    out.append((t + 0.2, f"nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  {driver}  Sun May 12 19:30:26 UTC 2024"))
    out.append((t + 0.4, "[drm] [nvidia-drm] [GPU ID 0x00001800] Loading driver"))
    return out


NOISE = (
    "perf: interrupt took too long ({a} > {b}), lowering kernel.perf_event_max_sample_rate to {c}",
    "mlx5_core 0000:{bus}:00.0 ibp{n}s0: Link up",
    "mlx5_core 0000:{bus}:00.0: mlx5_fw_tracer_handle_traces:{n}:(pid {pid}): FW tracer event",
    "EXT4-fs (nvme0n1p2): re-mounted {uuid}. Quota mode: none.",
    "IPv6: ADDRCONF(NETDEV_CHANGE): eno{n}: link becomes ready",
    "audit: type=1400 audit({sec}.{ms}:{n}): apparmor=\"DENIED\" operation=\"open\" profile=\"snap.lxd.daemon\" name=\"/proc/{pid}/mounts\" pid={pid} comm=\"lxd\"",
    "Out of memory: Killed process {pid} (python3) total-vm:{a}kB, anon-rss:{b}kB, file-rss:0kB, shmem-rss:{c}kB, UID:1000 pgtables:{n}kB oom_score_adj:0",
    "nvme nvme{n}: I/O {pid} QID {n} timeout, completion polled",
    "bond0: (slave eno{n}): link status definitely up, 25000 Mbps full duplex",
    "IPMI message handler: version 39.2",
    "TCP: request_sock_TCP: Possible SYN flooding on port 8{n}00. Sending cookies.  Check SNMP counters.",
    "docker0: port {n}(veth{uuid8}) entered forwarding state",
    "infiniband mlx5_{n}: mlx5_ib_modify_qp:{a}:(pid {pid}): modify QP 0x{uuid8} to RESET failed",
    "xfs filesystem being remounted at /data supports timestamps until 2038 (0x7fffffff)",
    "EDAC skx MC{n}: HANDLING MCE MEMORY ERROR",
    "mce: [Hardware Error]: Machine check events logged",
    "nvidia-uvm: Loaded the UVM driver, major device number {major}.",
    "hrtimer: interrupt took {b} ns",
    "watchdog: BUG: soft lockup - CPU#{n} stuck for 22s! [kworker/{n}:1:{pid}]",
)


def noise_line(rng: np.random.Generator) -> str:
    t = NOISE[int(rng.integers(len(NOISE)))]
    return t.format(a=int(rng.integers(2500, 90000)), b=int(rng.integers(2500, 9000)), c=int(rng.integers(20000, 80000)),
                    bus=["5e", "86", "c1", "41"][int(rng.integers(4))], n=int(rng.integers(0, 9)),
                    pid=int(rng.integers(300, 4_000_000)), uuid=_hex(rng, 12)[2:], uuid8=_hex(rng, 7)[2:],
                    sec=int(rng.integers(1.7e9, 1.8e9)), major=int(rng.integers(230, 511)), ms=int(rng.integers(100, 999)))
