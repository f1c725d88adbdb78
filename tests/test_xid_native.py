"""The native kernel-log scanner finds exactly the lines the pure-Python one finds.

:mod:`pipeline.ingest._xidscan` is optional (built at install where a C compiler is); the
tests that need it skip, naming why, where it is not built. The other xid test files run
every test with both scanners through the ``scanner`` fixture defined here.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.kernel import scan as xid_scan
from pipeline.ingest.kernel.stage import parse_bytes, parse_file

REF = datetime(2024, 3, 6, 12)
NOT_BUILT = ("the native scanner pipeline.ingest._xidscan is not built (no C compiler at install); "
             "the pure-Python scanner is in use")


@pytest.fixture(params=["native", "python"])
def scanner(request, monkeypatch):
    """Run a test with the native scanner, then with the pure-Python one."""
    if request.param == "native" and xid_scan._xidscan is None:
        pytest.skip(NOT_BUILT)
    monkeypatch.setenv("FLEETFAULT_XID_NATIVE", "1" if request.param == "native" else "0")
    assert xid_scan.native() is (request.param == "native")
    return request.param


@pytest.fixture
def xidscan():
    if xid_scan._xidscan is None:
        pytest.skip(NOT_BUILT)
    return xid_scan._xidscan


# Real-looking lines of every kind the scanner looks for, in many log forms.
LINES = [
    b"[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
    b"[    0.912345] rtc_cmos 00:00: setting system clock to 2024-03-05T10:11:12 UTC (1709633472)",
    b"Mar  5 10:11:12 gpu-a01 kernel: [ 1234.5] NVRM: Xid (PCI:0000:b3:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error",
    b"2024-03-05T10:11:12.123456+08:00 gpu-a01 kernel: NVRM: GPU at PCI:0000:3b:00: GPU-1b2c3d4e-aaaa-bbbb-cccc-0123456789ab",
    b"2024-03-05T10:11:12.123456+08:00 gpu-a01 kernel: NVRM: GPU Board Serial Number: 1650123456789",
    b"[ 99.1] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0)",
    b"[ 99.1] NVRM: installed in this system has fallen off the bus and is not responding to commands.",
    b"[ 99.1] NVRM: fallen off the bus",
    b"[Tue Mar  5 10:11:12 2024] nvidia-nvswitch2: SXid (PCI:0000:c1:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
    b"[Tue Mar  5 10:11:12 2024] nvidia-nvswitch2: SXid (PCI:0000:c1:00.0): 20034, Severity 1 Engine instance 30",
    b"kernel: NVRM: Xid (0000:03:00): 14, Channel 00000001",
    b'{"MESSAGE":"NVRM: Xid (PCI:0000:3b:00): 31, pid=77, name=torchrun, MMU Fault","__REALTIME_TIMESTAMP":"1709633472000000","_HOSTNAME":"n1"}',
    b"Tue 2024-03-05 10:11:12.123456 UTC [s=abc;i=1;b=def;m=1;t=2;x=3]",
    b"    _TRANSPORT=kernel",
    b"    MESSAGE=NVRM: Xid (PCI:0000:3b:00): 63, pid=5, name=x, Row Remapper",
    b"Mar  5 10:11:12 gpu-a01 kernel: [ 1234.5] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=a, Graphics Exception on",
    b" (GPC 1, TPC 0): Out Of Range Address",
    b"continued text of a pasted line",
    b"mlx5_core 0000:3b:00.0 ibp59s0: Link up",
    b"audit: type=1400 apparmor=\"DENIED\" operation=\"open\" NETDEV_CHANGE XFS V NV NVR NVRM: GPU Xi X",
    b"[  +0.000123] NVRM: Xid (PCI:0000:3b:00): 94, pid=9, name=y, Contained ECC error",
    b"[Mar 5 10:11] eth0: link up",
    b"\x1b[31m[ 12.5] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\x1b[0m",
    b"\x00\x00\x00Mar  5 10:11:12 h kernel: NVRM: Xid (PCI:0000:3b:00): 119, Timeout\r",
    b"",
    b"Xid",
    b"m cl setting system clock tsetting system clock to",
]

_mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.sampled_from(
        [b"\n", b"\r", b"\x00", b"X", b"V", b"Xid", b"NV", b"m cl", b"\n ", b"\t", b"{", b"\xff"])),
    st.tuples(st.just("cut"), st.integers(0, 10**6), st.integers(1, 40)),
)


@st.composite
def logs(draw) -> bytes:
    """Real-looking lines, joined by any line ending, then mutated a little."""
    lines = draw(st.lists(st.sampled_from(LINES), max_size=30))
    ends = draw(st.lists(st.sampled_from([b"\n", b"\n", b"\n", b"\r\n", b"\r", b""]), min_size=len(lines),
                         max_size=len(lines)))
    data = bytearray(b"".join(line + end for line, end in zip(lines, ends)))
    for kind, at, arg in draw(st.lists(_mutation, max_size=6)):
        at = at % (len(data) + 1)
        if kind == "flip" and data and at < len(data):
            data[at] = arg
        elif kind == "insert":
            data[at:at] = arg
        elif kind == "cut":
            del data[at:at + arg]
    return bytes(data)


# The fixtures used keep no state between examples (the module; an environment variable set each time).
_CHECKS = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
ANY_LOG = st.one_of(logs(), st.binary(max_size=400), st.text(max_size=300).map(str.encode))


def _streamed(data: bytes, head: int, chunk: int, simd: int) -> tuple:
    """The native scan of ``data`` as read from a file: ``head`` bytes given, the rest read."""
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(head)
        return xid_scan._xidscan.scan_fd(f.fileno(), xid_scan.is_uptime(data), data[:head], chunk, simd)


@settings(max_examples=300, deadline=None, suppress_health_check=_CHECKS)
@given(data=ANY_LOG, head=st.integers(0, 10**6), chunk=st.integers(1, 300), simd=st.sampled_from([0, 1, 2]))
def test_native_scan_finds_what_the_python_scanner_finds(xidscan, monkeypatch, data, head, chunk, simd):
    monkeypatch.setenv("FLEETFAULT_XID_NATIVE", "0")
    both = xid_scan.candidate_lines(data)  # (with the boot banners both paths add alike)
    monkeypatch.setenv("FLEETFAULT_XID_NATIVE", "1")
    assert xid_scan.candidate_lines(data) == both
    expect = xid_scan.candidate_lines_py(data)
    found = xidscan.scan(data, xid_scan.is_uptime(data), simd=simd)
    streamed = _streamed(data, head % (len(data) + 1), chunk, simd)
    assert streamed == found
    lines, special, n_lines = found
    assert (xid_scan._rewrite(lines, special, data), n_lines) == expect
    lines = xid_scan._rewrite(streamed[0], streamed[1], None)
    assert lines is None or lines == expect[0]


@settings(max_examples=120, deadline=None, suppress_health_check=_CHECKS)
@given(data=ANY_LOG)
def test_native_and_python_scanners_give_the_same_events(xidscan, monkeypatch, data):
    def parsed(flag: str):
        monkeypatch.setenv("FLEETFAULT_XID_NATIVE", flag)
        fp = parse_bytes(data, source_file="k.log", host="h", tz="Europe/Berlin", ref_time=REF)
        return fp.events.to_dicts(), fp.gpu_map.to_dicts(), fp.rejects, fp.rows_skipped

    assert parsed("1") == parsed("0")


def _files_agree(path, monkeypatch, chunk: int = 1 << 18) -> xid_scan.Scanned | bytes:
    """parse_file gives the same with both scanners; returns what the native read gave."""
    monkeypatch.setenv("FLEETFAULT_XID_NATIVE", "0")
    slow = parse_file(path, tz="UTC")
    monkeypatch.setenv("FLEETFAULT_XID_NATIVE", "1")
    fast = parse_file(path, tz="UTC")
    assert fast.events.to_dicts() == slow.events.to_dicts()
    assert fast.gpu_map.to_dicts() == slow.gpu_map.to_dicts()
    assert (fast.rows_skipped, fast.rejects) == (slow.rows_skipped, slow.rejects)
    got = xid_scan.read_scanned(path, chunk)
    want = xid_scan.candidate_lines_py(xid_scan.read_bytes(path))
    assert xid_scan.candidate_lines(got) == want
    return got


@pytest.mark.parametrize("data", [
    b"", b"\n", b"\n\n\n", b"Xid", b"NVRM: Xid (PCI:0000:3b:00): 79, x",  # no trailing newline
    b"\r".join(LINES), b"\x00" * 5000 + b"\n".join(LINES) + b"\x00" * 70,  # CR only; NULs
    b"\n".join(LINES) + b"\n",
    b"\n" * 70_000 + b"\n".join(LINES) * 40,  # newline counts held per byte lane must not overflow
])
def test_odd_files_read_in_chunks(xidscan, tmp_path, monkeypatch, data):
    path = tmp_path / "h" / "kern.log"
    path.parent.mkdir()
    path.write_bytes(data)
    for chunk in (1, 3, 64, 1 << 18):
        _files_agree(path, monkeypatch, chunk)


def test_a_line_longer_than_the_buffer_is_read_whole(xidscan, tmp_path, monkeypatch):
    path = tmp_path / "h" / "kern.log"
    path.parent.mkdir()
    long = b"[ 5.0] NVRM: Xid (PCI:0000:3b:00): 13, " + b"x" * 3_000_000 + b" Xid"
    short = b"[ 6.0] NVRM: Xid (PCI:0000:3b:00): 79, y"
    path.write_bytes(b"[ 1.0] boot\n" + long + b"\n" + short + b"\n" + b"z" * 500_000)
    got = _files_agree(path, monkeypatch, chunk=4096)
    assert isinstance(got, xid_scan.Scanned)
    assert got.lines == [(2, long), (3, short)]
    assert got.n_lines == 4


def test_formats_that_need_the_whole_file_are_read_whole(xidscan, tmp_path, monkeypatch):
    d = tmp_path / "h"
    d.mkdir()
    plain = b"\n".join(LINES[:11]) + b"\n"
    (d / "kern.log").write_bytes(plain)
    (d / "kern.log.gz").write_bytes(gzip.compress(plain))
    (d / "human.log").write_bytes(b"[Mar 5 10:11] eth0: up\n[  +0.5] " + LINES[0][15:] + b"\n")
    (d / "verbose.log").write_bytes(b"\n".join(LINES[12:15]) + b"\n")
    assert isinstance(_files_agree(d / "kern.log", monkeypatch), xid_scan.Scanned)
    for name in ("kern.log.gz", "human.log", "verbose.log"):
        assert isinstance(_files_agree(d / name, monkeypatch), bytes), name
    assert xid_scan.read_scanned(d / "kern.log.gz") == plain


def test_the_switch_and_a_missing_extension_fall_back_to_python(tmp_path, monkeypatch):
    path = tmp_path / "h" / "kern.log"
    path.parent.mkdir()
    path.write_bytes(b"\n".join(LINES) + b"\n")
    monkeypatch.setenv("FLEETFAULT_XID_NATIVE", "0")
    assert not xid_scan.native()
    assert isinstance(xid_scan.read_scanned(path), bytes)
    want = parse_file(path).events.to_dicts()
    monkeypatch.setenv("FLEETFAULT_XID_NATIVE", "1")
    monkeypatch.setattr(xid_scan, "_xidscan", None)
    assert not xid_scan.native()
    assert parse_file(path).events.to_dicts() == want


def test_read_errors_are_raised(xidscan):
    r, w = os.pipe()
    os.close(w)
    os.close(r)
    with pytest.raises(OSError):
        xidscan.scan_fd(r, False)
