"""Benchmark: Xid ingest against the byte-read floor, in one run.

Writes a kernel log of ``--lines`` lines (default 1,000,000) in Ubuntu ``kern.log`` form
(syslog time, host, kernel uptime stamp), about 1% of them NVRM Xid lines and the rest the
mix a GPU host's kernel prints (NIC, NVMe, audit, OOM, AER, systemd ...). Then times, each
``--repeat`` times (median reported):

* ``read``: the floor, ``open(path, 'rb').read()`` of the whole file;
* ``lines``: iterating its lines as bytes (what any line-by-line reader must pay);
* ``prefilter``: for comparison, ``b"Xid" in line or b"NVRM" in line`` on every line (only
  finding the lines, no parsing);
* ``ingest``: :func:`pipeline.ingest.kernel.stage.parse_file`, what the xid stage does with
  a file (read, find, parse, build the frames).

Run: ``.venv/bin/python bench/bench_xid.py [--lines N] [--repeat R] [--gzip]``
"""

from __future__ import annotations

import argparse
import gzip
import random
import statistics
import tempfile
import time
from pathlib import Path

NOISE = [
    "mlx5_core 0000:{bus}:00.0 ibp{n}s0: Link up",
    "EXT4-fs (nvme0n1p2): re-mounted {hex}. Quota mode: none.",
    "IPv6: ADDRCONF(NETDEV_CHANGE): eno{n}: link becomes ready",
    'audit: type=1400 audit({sec}.{ms}:{n}): apparmor="DENIED" operation="open" profile="snap.lxd.daemon" name="/proc/{pid}/mounts" pid={pid} comm="lxd"',
    "Out of memory: Killed process {pid} (python3) total-vm:{a}kB, anon-rss:{b}kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:{n}kB oom_score_adj:0",
    "nvme nvme{n}: I/O {pid} QID {n} timeout, completion polled",
    "bond0: (slave eno{n}): link status definitely up, 25000 Mbps full duplex",
    "TCP: request_sock_TCP: Possible SYN flooding on port 8{n}00. Sending cookies.  Check SNMP counters.",
    "docker0: port {n}(veth{hex}) entered forwarding state",
    "pcieport 0000:{bus}:01.0: AER: Corrected error received: 0000:{bus}:00.0",
    "perf: interrupt took too long ({a} > {b}), lowering kernel.perf_event_max_sample_rate to {a}",
    "systemd-journald[{pid}]: Data hash table of /var/log/journal/{hex}/system.journal has a fill level at 75.0, suggesting rotation.",
    "EDAC skx MC{n}: HANDLING MCE MEMORY ERROR",
    "mlx5_core 0000:{bus}:00.0: mlx5_fw_tracer_handle_traces:{n}:(pid {pid}): FW tracer event",
    "xfs filesystem being remounted at /data supports timestamps until 2038 (0x7fffffff)",
    "NET: Registered PF_INET6 protocol family",
    "usb 1-{n}: new high-speed USB device number {n} using xhci_hcd",
]
XIDS = [
    "NVRM: Xid (PCI:0000:{bus}:00): 13, pid={pid}, name=python3, Graphics SM Warp Exception on (GPC {n}, TPC 1, SM 0): Out Of Range Address",
    "NVRM: Xid (PCI:0000:{bus}:00): 31, pid={pid}, name=pt_main_thread, Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f3a_{hex}",
    "NVRM: Xid (PCI:0000:{bus}:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:{bus}:00): 63, pid={pid}, name=torchrun, Row Remapper: New row (0x{hex}) was marked for remapping, reset gpu to activate.",
    "NVRM: Xid (PCI:0000:{bus}:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link {n} (0x004505c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def make_log(path: Path, n_lines: int, xid_share: float, seed: int = 7) -> int:
    rng = random.Random(seed)
    out, up, n_xid = [], 100.0, 0
    day, sec = 1, 0
    for _ in range(n_lines):
        up += rng.expovariate(1 / 2.0)
        sec += 2
        if sec >= 86400:
            sec, day = 0, day + 1
        month = MONTHS[min((day - 1) // 28, 11)]
        stamp = f"{month} {(day - 1) % 28 + 1:2d} {sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d} gpu-a01 kernel: [{up:12.6f}] "
        is_xid = rng.random() < xid_share
        tpl = rng.choice(XIDS if is_xid else NOISE)
        n_xid += is_xid
        out.append(stamp + tpl.format(bus=rng.choice(["1b", "3b", "5e", "86", "c1"]), n=rng.randint(0, 9),
                                      pid=rng.randint(300, 4_000_000), hex=f"{rng.getrandbits(40):010x}",
                                      a=rng.randint(2500, 90000), b=rng.randint(2500, 9000),
                                      sec=rng.randint(1_700_000_000, 1_800_000_000), ms=rng.randint(100, 999)))
    path.write_bytes(("\n".join(out) + "\n").encode())
    return n_xid


def _timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all threads, user + system)."""
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def _medians(fns: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) time of each function, the functions interleaved in every round so
    that the load of a shared machine falls on all of them alike."""
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            times[k].append(_timed(fn))
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--xid-share", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--gzip", action="store_true", help="bench a gzip-compressed log (the floor then includes gunzip)")
    args = ap.parse_args()

    from pipeline.ingest.kernel.stage import parse_file
    from pipeline.vocab.files import read_bytes

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpu-a01" / "kern.log"
        path.parent.mkdir()
        n_xid = make_log(path, args.lines, args.xid_share)
        if args.gzip:
            gz = path.with_suffix(".log.gz")
            gz.write_bytes(gzip.compress(path.read_bytes(), compresslevel=6))
            path = gz

        def lines():
            with open(path, "rb") as f:
                for _ in (gzip.open(path) if args.gzip else f):
                    pass

        def line_prefilter():  # the textbook alternative: a literal test on every line
            with open(path, "rb") as f:
                src = gzip.open(path) if args.gzip else f
                return [(no, x) for no, x in enumerate(src, 1) if b"Xid" in x or b"NVRM" in x]

        parse_file(path, tz="Asia/Shanghai")  # warm the page cache and imports
        med = _medians({"read": lambda: read_bytes(path)[0], "lines": lines, "prefilter": line_prefilter,
                        "ingest": lambda: parse_file(path, tz="Asia/Shanghai")},
                       args.repeat)
        got = parse_file(path, tz="Asia/Shanghai")
        size = path.stat().st_size / 1e6
    print(f"file: {args.lines:,} lines, {size:.1f} MB{' (gzip)' if args.gzip else ''}, {n_xid:,} Xid lines; "
          f"parsed {got.events.height:,} events; median of {args.repeat}, interleaved")
    print(f"{'':22s} {'wall ms':>9s} {'CPU ms':>9s}   (CPU: this process, all threads; steadier on a shared machine)")
    rows = (("read", "read floor"), ("lines", "line floor"), ("prefilter", "per-line `in`"),
            ("ingest", "xid ingest"))
    for k, label in rows:
        print(f"{label:22s} {med[k][0] * 1000:9.1f} {med[k][1] * 1000:9.1f}")
    for k, label in rows[3:]:
        for i, kind in enumerate(("wall", "CPU")):
            r, ln, ing = med["read"][i], med["lines"][i], med[k][i]
            print(f"{label} / floor ({kind}): {ing / r:.2f}x read floor, {ing / ln:.2f}x line floor")
    assert got.events.height == n_xid, f"parsed {got.events.height} events, wrote {n_xid}"


if __name__ == "__main__":
    main()
