"""Many kernel logs read and parsed in one pass give each file's rows exactly as that file
alone does; the xid stage over many small files keeps the registry's per-file rules."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.kernel.stage import KernelFile, parse_file, parse_files

# Real-looking lines of every kind the prefilter looks for, in many log forms (raw dmesg,
# dmesg -T/-H, syslog, RFC 3339, journald JSON and verbose, pasted and wrapped lines, junk).
LINES = [
    b"[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
    b"[    0.912345] rtc_cmos 00:00: setting system clock to 2024-03-05T10:11:12 UTC (1709633472)",
    b"[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-045) #115-Ubuntu SMP",
    b"Mar  5 10:11:12 gpu-a01 kernel: [ 1234.5] NVRM: Xid (PCI:0000:b3:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error",
    b"Mar  5 10:11:12 gpu-a01 kernel: Linux version 6.1.0 (gcc) #1 SMP",
    b"2024-03-05T10:11:12.123456+08:00 gpu-a01 kernel: NVRM: GPU at PCI:0000:3b:00: GPU-1b2c3d4e-aaaa-bbbb-cccc-0123456789ab",
    b"2024-03-05T10:11:12.123456+08:00 gpu-a01 kernel: NVRM: GPU Board Serial Number: 1650123456789",
    b"[ 99.1] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0)",
    b"[ 99.1] NVRM: installed in this system has fallen off the bus and is not responding to commands.",
    b"[ 99.2] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)",
    b"[Tue Mar  5 10:11:12 2024] nvidia-nvswitch2: SXid (PCI:0000:c1:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
    b"[Tue Mar  5 10:11:12 2024] nvidia-nvswitch2: SXid (PCI:0000:c1:00.0): 20034, Severity 1 Engine instance 30",
    b"kernel: NVRM: Xid (0000:03:00): 14, Channel 00000001",
    b"gpu-b02 gpud[12]: saw NVRM: Xid (PCI:0000:3b:00): 79, quoting the kernel",
    b'{"MESSAGE":"NVRM: Xid (PCI:0000:3b:00): 31, pid=77, name=torchrun, MMU Fault","__REALTIME_TIMESTAMP":"1709633472000000","_HOSTNAME":"n1"}',
    b"Tue 2024-03-05 10:11:12.123456 UTC [s=abc;i=1;b=def;m=1;t=2;x=3]",
    b"    _TRANSPORT=kernel",
    b"    MESSAGE=NVRM: Xid (PCI:0000:3b:00): 63, pid=5, name=x, Row Remapper",
    b"Mar  5 10:11:12 gpu-a01 kernel: [ 1234.5] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=a, Graphics Exception on",
    b" (GPC 1, TPC 0): Out Of Range Address",
    b"-- Boot 0123456789abcdef0123456789abcdef --",
    b"mlx5_core 0000:3b:00.0 ibp59s0: Link up",
    b"[  +0.000123] NVRM: Xid (PCI:0000:3b:00): 94, pid=9, name=y, Contained ECC error",
    b"[Mar 5 10:11] eth0: link up",
    b"\x1b[31m[ 12.5] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\x1b[0m",
    b"\x00\x00\x00Mar  5 10:11:12 h kernel: NVRM: Xid (PCI:0000:3b:00): 119, Timeout\r",
    b"[ 5.0] NVRM: Xid (PCI:0000:zz:00): 13, an id that cannot be read",
    b"\xff\xfe broken bytes NVRM: Xid (PCI:0000:3b:00): 45, pid=3, name=\xe9, Preemptive cleanup",
    b"",
]
ENDS = [b"\n", b"\n", b"\n", b"\r\n", b"\r", b""]  # LF, CRLF, CR only, and lines run together


@st.composite
def log_bytes(draw) -> bytes:
    """Real-looking lines in any order, joined by any line ending, or all by one (a CR-only
    file); the last may be unterminated."""
    lines = draw(st.lists(st.sampled_from(LINES), max_size=25))
    one = draw(st.sampled_from([None, b"\n", b"\r\n", b"\r"]))
    ends = ([one] * len(lines) if one is not None
            else draw(st.lists(st.sampled_from(ENDS), min_size=len(lines), max_size=len(lines))))
    if lines and draw(st.booleans()):
        ends[-1] = b""
    return b"".join(line + end for line, end in zip(lines, ends))


NAMES = ["kern.log", "dmesg-20240305.log", "syslog-20240306", "messages", "journal-20240307.log"]


@st.composite
def log_folders(draw) -> list[tuple[str, str, bytes, bool]]:
    """(host, file name, content, gzip) for a few files over a few hosts."""
    n = draw(st.integers(1, 5))
    content = st.one_of(log_bytes(), log_bytes(), st.binary(max_size=300))  # arbitrary bytes too
    return [(draw(st.sampled_from(["gpu-a01", "gpu-b02"])), f"{k}-{draw(st.sampled_from(NAMES))}",
             draw(content), draw(st.booleans())) for k in range(n)]


def _write(root: Path, files: list[tuple[str, str, bytes, bool]]) -> list[Path]:
    paths = []
    for host, name, data, gz in files:
        path = root / host / (name + (".gz" if gz else ""))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(data) if gz else data)
        os.utime(path, (1709700000, 1709700000))  # year-less stamps take their year from the mtime
        paths.append(path)
    return paths


def _same(a, b) -> None:
    assert a.events.equals(b.events)
    assert a.gpu_map.equals(b.gpu_map)
    assert a.segments.equals(b.segments)
    assert a.rejects == b.rejects
    assert (a.rows_read, a.rows_skipped) == (b.rows_read, b.rows_skipped)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(files=log_folders(), tz=st.sampled_from(["UTC", "Asia/Shanghai", "America/New_York"]))
def test_many_files_in_one_pass_give_each_files_rows(tmp_path_factory, files, tz):
    paths = _write(tmp_path_factory.mktemp("logs"), files)
    together = parse_files([KernelFile(p, p.parent.name, tz) for p in paths])
    for path, got in zip(paths, together):
        _same(got, parse_file(path, tz=tz))
        assert got.rows_read == got.events.height + len(got.rejects)


#: Lines with events of every kind among others, for files that differ only in their line ends
#: (no line of its own holds a CR: that would be a line end too; none starts with UTF-16's
#: byte-order mark, which makes the whole file bad_encoding when it comes first).
EVENT_LINES = [line for line in LINES if b"\r" not in line and not line.startswith(b"\xff\xfe")]
EVENTS = [line for line in EVENT_LINES if b"Xid (PCI:0000:3b:00)" in line and b"gpud" not in line and line[:1] != b" "]


@st.composite
def lines_and_ends(draw) -> tuple[list[bytes], list[bytes], bool]:
    """(lines, each one's end: CR, CRLF or LF, whether the last is terminated), several events among them."""
    lines = draw(st.lists(st.sampled_from(EVENT_LINES), max_size=20))
    for event in draw(st.lists(st.sampled_from(EVENTS), min_size=2, max_size=6)):
        lines.insert(draw(st.integers(0, len(lines))), event)
    one = draw(st.sampled_from([None, b"\r", b"\r\n"]))  # a CR-only file, a CRLF file, or every end its own
    ends = [one] * len(lines) if one is not None else draw(
        st.lists(st.sampled_from([b"\r", b"\r\n", b"\n"]), min_size=len(lines), max_size=len(lines)))
    for k in range(1, len(lines)):  # (CR, an empty line, LF: that is one CRLF, not two line ends)
        if ends[k - 1] == b"\r" and lines[k] == b"" and ends[k] == b"\n":
            ends[k - 1] = b"\r\n"
    return lines, ends, draw(st.booleans())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(log=lines_and_ends(), gz=st.booleans(), tz=st.sampled_from(["UTC", "Asia/Shanghai"]))
def test_line_ends_do_not_change_what_is_read(tmp_path_factory, log, gz, tz):
    """A file whose lines end in CR, CRLF or a mix gives the rows, line numbers and counts
    of the same lines ended by LF, in a batch and alone."""
    lines, ends, terminated = log
    root = tmp_path_factory.mktemp("ends")

    def write(folder: str, seps: list[bytes]) -> Path:
        data = b"".join(line + end for line, end in zip(lines, seps))
        data = data if terminated or not lines else data[:len(data) - len(seps[-1])]
        return _write(root / folder, [("gpu-a01", "kern.log", data, gz)])[0]

    lf, other = write("lf", [b"\n"] * len(lines)), write("other", ends)
    want = parse_file(lf, tz=tz, source_file="kern.log")
    alone = parse_file(other, tz=tz, source_file="kern.log")
    _same(alone, want)
    _same(parse_files([KernelFile(other, "gpu-a01", tz, source_file="kern.log"),
                       KernelFile(lf, "gpu-a01", tz, source_file="kern.log")])[0], want)
    assert want.events.height >= 1


CR_KERN_LOG = """\
Mar  5 10:11:02 gpu-a01 kernel: [    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-045) #115-Ubuntu SMP
Mar  5 10:11:03 gpu-a01 kernel: [    1.204417] mlx5_core 0000:3b:00.0 ibp59s0: Link up
Mar  5 10:11:09 gpu-a01 kernel: [    7.912345] NVRM: GPU at PCI:0000:3b:00: GPU-1b2c3d4e-aaaa-bbbb-cccc-0123456789ab
Mar  5 10:11:09 gpu-a01 kernel: [    7.912346] NVRM: GPU Board Serial Number: 1650123456789
Mar  5 12:40:51 gpu-a01 kernel: [ 8989.120011] NVRM: Xid (PCI:0000:3b:00): 13, pid=4121, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 1, SM 0): Out Of Range Address
Mar  5 12:40:51 gpu-a01 kernel: [ 8989.120301] NVRM: Xid (PCI:0000:3b:00): 13, pid=4121, name=python3, Graphics Exception: ESR 0x50e730=0x102000e 0x50e734=0x0
Mar  5 13:02:17 gpu-a01 kernel: [10275.300122] EXT4-fs (nvme0n1p2): re-mounted. Quota mode: none.
Mar  5 14:18:40 gpu-a01 kernel: [14858.771010] NVRM: Xid (PCI:0000:3b:00): 31, pid=5102, name=pt_main_thread, Ch 00000010, intr 00000000. MMU Fault
Mar  5 15:00:00 gpu-a01 kernel: [17338.000001] NVRM: Xid (PCI:0000:zz:00): 31, an id that cannot be read
Mar  5 16:22:05 gpu-a01 kernel: [22263.410550] NVRM: Xid (PCI:0000:3b:00): 63, pid=5102, name=torchrun, Row Remapper: New row marked for remapping
Mar  5 16:22:06 gpu-a01 kernel: [22264.002000] docker0: port 1(veth1a2b3c) entered forwarding state
Mar  5 17:45:12 gpu-a01 kernel: [27250.991000] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
"""
CR_DMESG = """\
[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-045) #115-Ubuntu SMP
[    0.912345] rtc_cmos 00:00: setting system clock to 2024-03-05T10:11:02 UTC (1709633462)
[    7.912345] NVRM: GPU at PCI:0000:3b:00: GPU-1b2c3d4e-aaaa-bbbb-cccc-0123456789ab
[ 8989.120011] NVRM: Xid (PCI:0000:3b:00): 13, pid=4121, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 1, SM 0)
[ 8989.120301] NVRM: Xid (PCI:0000:3b:00): 13, pid=4121, name=python3, Graphics Exception: ESR 0x50e730=0x102000e
[10275.300122] EXT4-fs (nvme0n1p2): re-mounted. Quota mode: none.
[14858.771010] NVRM: Xid (PCI:0000:3b:00): 31, pid=5102, name=pt_main_thread, Ch 00000010, intr 00000000. MMU Fault
[17338.000001] NVRM: Xid (PCI:0000:zz:00): 31, an id that cannot be read
[22263.410550] NVRM: Xid (PCI:0000:3b:00): 63, pid=5102, name=torchrun, Row Remapper: New row marked for remapping
[27250.991000] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
"""


@pytest.mark.parametrize("name, text", [("kern.log", CR_KERN_LOG), ("dmesg-20240305.log", CR_DMESG)])
def test_a_cr_only_kernel_log_loads_every_event(tmp_path, name, text):
    """A kern.log or dmesg saved with CR line ends (an old Mac export, a serial console
    capture) loads its 5 Xid events, and its unreadable line is quarantined at the line an
    editor shows it on."""
    from pipeline.warehouse import Warehouse

    folder = tmp_path / "data" / "kernel" / "gpu-a01"
    folder.mkdir(parents=True)
    (folder / name).write_bytes(text.replace("\n", "\r").encode())
    want_bad = next(k for k, line in enumerate(text.splitlines(), 1) if "PCI:0000:zz" in line)
    reports, _ = _stage(tmp_path / "data", tmp_path / "w.duckdb")
    rep = next(r for r in reports if r.stage == "xid")
    assert (rep.rows_loaded, rep.rows_quarantined) == (5, 1)
    with Warehouse(tmp_path / "w.duckdb", read_only=True) as w:
        assert w.engine.rows("SELECT xid FROM xid_raw ORDER BY line_no", step="test") == [
            (13,), (13,), (31,), (63,), (79,)]
        assert w.engine.scalar("SELECT count(*) FROM xid_events", step="test") == 5
        assert w.engine.scalar("SELECT count(*) FROM gpu_map WHERE uuid IS NOT NULL", step="test") == 1
        assert w.engine.rows("SELECT line_no, reason FROM quarantine", step="test") == [(want_bad, "bad_xid_line")]


def test_bad_files_among_good_ones_keep_their_verdicts(tmp_path):
    good = b"[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=a, GPU has fallen off the bus.\n"
    files = {"a.log": good, "empty.log": b"", "blank.log": b"\n \n", "cut.log.gz": gzip.compress(good * 50)[:60],
             "garbage.log.gz": b"\x1f\x8bnot gzip at all", "image.log": b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4,
             "utf16.log": "NVRM: Xid (PCI:0000:3b:00): 79, x\n".encode("utf-16"), "z.log": good}
    d = tmp_path / "gpu-a01"
    d.mkdir()
    for name, data in files.items():
        (d / name).write_bytes(data)
    paths = sorted(d.iterdir())
    got = dict(zip((p.name for p in paths), parse_files([KernelFile(p, "gpu-a01") for p in paths])))
    reasons = {name: [(r.reason, r.line_no) for r in fp.rejects] for name, fp in got.items()}
    assert reasons["a.log"] == [] and reasons["z.log"] == []
    assert got["a.log"].events.height == got["z.log"].events.height == 1
    assert reasons["empty.log"] == [("empty_file", None)] and reasons["blank.log"] == [("empty_file", None)]
    assert reasons["garbage.log.gz"] == [("bad_gzip", None)]
    assert reasons["image.log"] == [("binary_file", None)]
    assert reasons["utf16.log"] == [("bad_encoding", None)]
    assert ("bad_gzip", None) in reasons["cut.log.gz"]  # what came before the cut is kept
    for name, fp in got.items():
        assert all(r.detail.startswith(str(d / name)) for r in fp.rejects), name


def _stage(data: Path, wh_path: Path):
    from pipeline.config import config_from_dict
    from pipeline.run import run_pipeline

    return run_pipeline(config_from_dict({}), data, wh_path, data.parent / "out", stages=["xid"])


def test_stage_over_many_small_files_keeps_the_registry_rules(tmp_path):
    from pipeline.warehouse import Warehouse

    data = tmp_path / "data"
    for h in range(3):
        folder = data / "kernel" / f"gpu-{h:02d}"
        folder.mkdir(parents=True)
        for day in range(1, 8):
            lines = [f"[{day * 86400 + k:12.6f}] eth0: link up" for k in range(5)]
            lines.insert(2, f"[{day * 86400 + 2.5:12.6f}] NVRM: Xid (PCI:0000:3b:00): {40 + day}, pid=1, name=a, x")
            (folder / f"dmesg-202403{day:02d}.log").write_text("\n".join(lines) + "\n")
        (folder / "dmesg-20240308.log").write_bytes(b"")  # an empty day
    wh = tmp_path / "w.duckdb"
    reports, code = _stage(data, wh)
    assert code == 1  # the empty files are quarantined, the rest loaded
    rep = next(r for r in reports if r.stage == "xid")
    assert (rep.files, rep.rows_read, rep.rows_loaded, rep.rows_quarantined) == (24, 24, 21, 3)
    with Warehouse(wh, read_only=True) as w:
        per_file = w.engine.rows("SELECT path, rows_read, rows_loaded, rows_quarantined, rows_skipped FROM files "
                                 "WHERE stage = 'xid' ORDER BY path", step="test")
        assert all(read == loaded + quarantined for _, read, loaded, quarantined, _ in per_file)
        assert {p: (read, skipped) for p, read, _, _, skipped in per_file}["kernel/gpu-00/dmesg-20240301.log"] == (1, 5)
        assert w.engine.scalar("SELECT count(*) FROM xid_raw", step="test") == 21
        assert w.engine.rows("SELECT DISTINCT reason FROM quarantine", step="test") == [("empty_file",)]
        assert w.engine.scalar("SELECT count(*) FROM xid_events", step="test") == 21
    reports, code = _stage(data, wh)  # again: nothing new
    rep = next(r for r in reports if r.stage == "xid")
    assert (rep.unchanged, rep.rows_read) == (24, 0)
    changed = data / "kernel" / "gpu-01" / "dmesg-20240303.log"
    changed.write_text(f"[{3 * 86400:12.6f}] NVRM: Xid (PCI:0000:5e:00): 94, pid=2, name=b, y\n"
                       f"[{3 * 86400 + 1:12.6f}] NVRM: Xid (PCI:0000:5e:00): 95, pid=2, name=b, z\n")
    reports, code = _stage(data, wh)
    rep = next(r for r in reports if r.stage == "xid")
    assert (rep.unchanged, rep.rows_read, rep.rows_loaded) == (23, 2, 2)
    with Warehouse(wh, read_only=True) as w:
        rows = w.engine.rows("SELECT xid FROM xid_raw WHERE source_file = 'kernel/gpu-01/dmesg-20240303.log' "
                             "ORDER BY xid", step="test")
        assert rows == [(94,), (95,)]  # the file's old row replaced, not kept beside the new ones
        assert w.engine.scalar("SELECT count(*) FROM xid_raw", step="test") == 22
        assert w.engine.scalar("SELECT count(*) FROM xid_events", step="test") == 22


@pytest.mark.parametrize("max_files", [1, 2, 1000])
def test_batches_cover_every_file_once(tmp_path, max_files):
    from pipeline.ingest.kernel.stage import batches

    files = []
    for k in range(5):
        p = tmp_path / f"{k}.log"
        p.write_bytes(b"x" * (k * 10))
        files.append(KernelFile(p, "h"))
    runs = list(batches(files, max_bytes=25, max_files=max_files))
    assert [f for r in runs for f in r] == files
    assert all(len(r) <= max_files and (len(r) == 1 or sum(f.path.stat().st_size for f in r) <= 25) for r in runs)
    assert pl.Series([len(r) for r in runs]).min() >= 1
