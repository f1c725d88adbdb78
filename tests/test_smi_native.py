"""The C reader of clean nvidia-smi blocks (pipeline/ingest/_smiscan.c, smi_native.py).

It must read every value exactly as the SQL cleaning does (DuckDB's TRY_CAST and
try_strptime), decline a block at anything else, and give the hourly facts the other two
paths give, whatever the block size.
"""

from __future__ import annotations

import gzip
import struct
from datetime import datetime, timedelta

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.ingest import smi, smi_native
from pipeline.ingest.smi import load_file

_smiscan = pytest.importorskip("pipeline.ingest._smiscan", reason="the C reader is not built (no C compiler)")

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
CON = duckdb.connect()


def parse(lines: list[str], kinds: str, units: list[str] | None = None, end: str = "\n", last_end: bool = True):
    """The parse of ``lines`` as Python values: (rows, identities per row, ts, value columns),
    or ``(None, offset, why)``."""
    block = (end.join(lines) + (end if last_end else "")).encode("utf-8")
    res = _smiscan.parse(block, kinds.encode(), tuple((u or "").encode() for u in (units or [""] * len(kinds))))
    if res[0] is None:
        return res
    rows, gid, idents, ts, values = res
    cols, it = [], iter(values)
    for k in kinds:
        if k in "nm":
            data, valid, nulls = next(it)
            vals = struct.unpack(f"{rows}{'d' if k == 'n' else 'q'}", data)
            col = [v if valid[r >> 3] >> (r & 7) & 1 else None for r, v in enumerate(vals)]
            assert col.count(None) == nulls
            cols.append(col)
    return rows, [idents[g] for g in struct.unpack(f"{rows}i", gid)], list(struct.unpack(f"{rows}q", ts)), cols


def micros(text: str) -> int:
    return int((datetime.fromisoformat(text) - datetime(1970, 1, 1)).total_seconds() * 1_000_000)


def test_values_read_as_the_sql_cleaning_reads_them():
    rows, ids, ts, (temp, util, mask, pending) = parse([
        "2026/07/03 22:10:46.109, 0, GPU-a, 45, 45 %, 0x0000000000000004, No",
        "2026-07-03T22:10:47, 1, GPU-b, [N/A], 100 %, [N/A], Yes",
        "2026/07/03 22:10:48.5, 0, GPU-a, -3.25, N/A, 12, Not Active",
        "2024-02-29 23:59:59.000001, 1, GPU-b, , 7, 0XfF, Enabled",
    ], "sttnnmn", ["", "", "", "", " %", "", ""], end="\r\n")
    assert rows == 4
    assert ids == [("0", "GPU-a"), ("1", "GPU-b"), ("0", "GPU-a"), ("1", "GPU-b")]
    assert ts == [micros("2026-07-03 22:10:46.109"), micros("2026-07-03 22:10:47"), micros("2026-07-03 22:10:48.5"),
                  micros("2024-02-29 23:59:59.000001")]
    assert temp == [45.0, None, -3.25, None]
    assert util == [45.0, 100.0, None, 7.0]  # the unit is cut; a value without it is read too
    assert mask == [4, None, 12, 255]
    assert pending == [0.0, 1.0, 0.0, 1.0]


def test_a_last_line_without_its_end_and_ignored_cells():
    res = parse(["2026/07/03 22:10:46, 0, é ü anything, 45", "2026/07/03 22:10:47, 0, x, 46"], "stin")
    assert res[0] is None  # (any byte that is not ASCII declines, even in an ignored cell)
    rows, ids, ts, (temp,) = parse(["2026/07/03 22:10:46, 0, [N/A], 45", "2026/07/03 22:10:47, 0, x y, 46\r"],
                                   "stin", last_end=False)
    assert (rows, temp) == (2, [45.0, 46.0])


OK_LINE = "2026/07/03 22:10:46.109, 0, 45, 0x04"


@pytest.mark.parametrize("bad, why", [
    ("", "blank line"),
    ("2026/07/03 22:10:46.109, 0, 45", "fewer cells"),
    ("2026/07/03 22:10:46.109, 0, 45, 0x04, 1", "more cells"),
    ("2026/07/03 22:10:46.109,0, 45, 0x04", "comma without a space"),
    ("2026/07/03 22:10:46.109, 0, 45,", "comma without a space"),  # a cut line
    ("2026/07/03 22:10:46.109, 0, 4\r5, 0x04", "lone CR"),
    ("2026/07/03 22:10:46.109, 0, 45\xa0, 0x04", "not printable ASCII"),
    ("2026/07/03 22:10:46.109, 0, 45\t, 0x04", "not printable ASCII"),
    ("2026/13/03 22:10:46.109, 0, 45, 0x04", "timestamp"),
    ("2026/7/3 22:10:46.109, 0, 45, 0x04", "timestamp"),  # DuckDB reads it; the reader leaves it to DuckDB
    ("2026/07/03 22:10:46.1234567, 0, 45, 0x04", "timestamp"),
    ("2026/02/29 22:10:46, 0, 45, 0x04", "timestamp"),
    ("2026/07/03 22:10:46., 0, 45, 0x04", "timestamp"),
    ("2026/07/03T22:10:46, 0, 45, 0x04", "timestamp"),
    ("2026/07/03 22:10:46,  0, 45, 0x04", "padded"),
    ("2026/07/03 22:10:46, , 45, 0x04", "empty"),
    ("2026/07/03 22:10:46, 0, 1e3, 0x04", "value"),
    ("2026/07/03 22:10:46, 0, +7, 0x04", "value"),
    ("2026/07/03 22:10:46, 0, nan, 0x04", "value"),
    ("2026/07/03 22:10:46, 0, 4.5.1, 0x04", "value"),
    ("2026/07/03 22:10:46, 0, 45., 0x04", "value"),
    ("2026/07/03 22:10:46, 0, Maybe, 0x04", "value"),
    ("2026/07/03 22:10:46, 0, 45, 0xFFFFFFFFFFFFFFFF", "value"),
    ("2026/07/03 22:10:46, 0, 45, -1", "value"),
    ("2026/07/03 22:10:46, 0, 45, 0x", "value"),
    ("timestamp, index, temperature.gpu, clocks_event_reasons.active", "timestamp"),  # a repeated header
])
def test_declines_what_it_does_not_read_exactly(bad, why):
    res = parse([OK_LINE, bad, OK_LINE], "stnm")
    assert res[0] is None and why in res[2], res
    assert parse([OK_LINE, OK_LINE], "stnm")[0] == 2


def _duck_number(text: str):
    return CON.execute("SELECT TRY_CAST(? AS DOUBLE)", [text]).fetchone()[0]


@SETTINGS
@given(st.from_regex(r"-?[0-9]{1,30}(\.[0-9]{1,30})?", fullmatch=True) | st.floats(allow_nan=False).map(str)
       | st.text("0123456789.-+eE ", max_size=12))
@example("0.1")
@example("-0")
@example("9007199254740993")
@example("123456789012345678901234567890.5")
@example("0.000000000000000000000001")
@example("179769313486231570" + "0" * 291 + ".0")
def test_numbers_are_read_bit_for_bit_as_duckdb_reads_them(text):
    res = parse([f"2026/07/03 22:10:46, 0, {text}"], "stn")
    if res[0] is None:
        return  # declined: DuckDB's reader (and its cast) takes the file
    value = res[3][0][0]
    expected = _duck_number(text)
    if text == "":
        assert value is None  # an empty cell is a marker
    else:
        assert struct.pack("<d", value) == struct.pack("<d", expected), (text, value, expected)


@SETTINGS
@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)), st.integers(0, 6),
       st.sampled_from(["/", "-"]), st.booleans())
def test_timestamps_are_read_as_duckdb_reads_them(dt, digits, sep, t):
    frac = f".{dt.microsecond:06d}"[: digits + 1] if digits else ""
    text = dt.strftime(f"%Y{sep}%m{sep}%d{'T' if t and sep == '-' else ' '}%H:%M:%S") + frac
    res = parse([f"{text}, 0"], "st")
    formats = ["%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S",
               "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"]
    expected = CON.execute("SELECT epoch_us(try_strptime(?, ?))", [text, formats]).fetchone()[0]
    if dt.year < 1000:  # "0999": DuckDB's %Y reads it; the reader takes 4 digits from year 1
        assert res[0] is None or res[2][0] == expected
    else:
        assert res[0] == 1 and res[2][0] == expected, (text, res)


@SETTINGS
@given(st.text(st.sampled_from("0123456789/-: .T"), min_size=15, max_size=28))
def test_odd_timestamps_are_declined_or_read_as_duckdb_reads_them(text):
    res = parse([f"{text}, 0"], "st")
    if res[0] is not None:
        formats = ["%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S",
                   "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"]
        assert res[2][0] == CON.execute("SELECT epoch_us(try_strptime(?, ?))", [text, formats]).fetchone()[0]


# -- whole files: the same facts as the other two paths ------------------------------------------

HEADER = ("timestamp, index, name, serial, uuid, pci.bus_id, driver_version, temperature.gpu, "
          "utilization.gpu [%], memory.used [MiB], power.draw [W], clocks.sm [MHz], fan.speed [%], "
          "clocks_event_reasons.active, ecc.errors.corrected.volatile.total, remapped_rows.pending")


def _lines(n: int) -> list[str]:
    out = []
    for k in range(n):
        i, m = k % 4, k // 4
        ecc = (m * 7 + i) // 5 if m % 50 else 0  # a reset now and then
        out.append(f"2026/07/03 {20 + m // 60 % 4:02d}:{m % 60:02d}:{i:02d}.{k % 1000:03d}, {i}, NVIDIA H100 80GB HBM3, "
                   f"16528230545{i}, GPU-5f1ba2c4-8a5e-7a4c-b3c1-0a4f2e9a1c{i:02d}, 00000000:{0x18 + i:02X}:00.0, "
                   f"550.54.15, {30 + (k * 7) % 50}, {k % 101} %, {1000 + k} MiB, {100 + (k % 997) / 7:.2f} W, "
                   f"{1400 + k % 500} MHz, {'[N/A]' if i == 3 else f'{k % 100} %'}, 0x{(1 << (k % 8)):016x}, "
                   f"{ecc}, {'Yes' if k % 13 == 0 else 'No'}")
    return out


def _three_ways(path, monkeypatch):
    used = []
    real = smi_native.hourly
    with monkeypatch.context() as m:
        m.setattr(smi_native, "hourly", lambda *a, **k: used.append(r := real(*a, **k)) or r)
        native = load_file(path, 1, host="h", tz="Europe/Berlin", fields=None)[0]
        m.setattr(smi_native, "hourly", lambda *a, **k: None)
        fast = load_file(path, 1, host="h", tz="Europe/Berlin", fields=None)[0]
        m.setattr(smi, "_fast_path", lambda *a, **k: None)
        exact = load_file(path, 1, host="h", tz="Europe/Berlin", fields=None)[0]
    return used[0] is not None, native, fast, exact


def _facts(loaded):
    return loaded.tables["smi_hourly"].sort("gpu_index", "hour", "ts_first")


@pytest.mark.parametrize("gz, end, block, cut", [
    (False, "\n", 1 << 20, False), (False, "\r\n", 997, False), (True, "\n", 4096, False),
    (False, "\n", 333, True), (False, "\r\n", 64, False),
])
def test_whole_files_give_the_same_facts_on_every_path(tmp_path, monkeypatch, gz, end, block, cut):
    from polars.testing import assert_frame_equal

    monkeypatch.setattr(smi_native, "BLOCK_BYTES", block)  # many blocks, lines cut at their ends
    text = end.join([HEADER, *_lines(2000)]) + ("" if cut else end)
    p = tmp_path / "h" / ("a.csv.gz" if gz else "a.csv")
    p.parent.mkdir()
    p.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    took, native, fast, exact = _three_ways(p, monkeypatch)
    assert took
    for loaded in (native, fast):
        assert (loaded.rows_read, loaded.rows_loaded, loaded.rejects) == (exact.rows_read, exact.rows_loaded, [])
    assert_frame_equal(_facts(native), _facts(fast), check_dtypes=False, rel_tol=1e-12)
    # (the exact path reads a last line without its end as a block of its own: its hour
    # comes in two partial rows, which gpu_days combines)
    if not cut:
        assert_frame_equal(_facts(native), _facts(exact), check_dtypes=False, rel_tol=1e-12)
    assert exact.rows_loaded == 2000


def test_a_declined_file_falls_back_and_nothing_is_lost(tmp_path, monkeypatch):
    # A line cut short in the middle of the file (a crash, then a restart without a header):
    # the reader declines the file, DuckDB's reader quarantines the line, counts reconcile.
    lines = _lines(40)
    p = tmp_path / "h" / "a.csv"
    p.parent.mkdir()
    p.write_text("\n".join([HEADER, *lines[:20], lines[20][:37], *lines[21:]]) + "\n")
    took, native, fast, exact = _three_ways(p, monkeypatch)
    assert not took
    for loaded in (native, fast, exact):
        assert (loaded.rows_read, loaded.rows_loaded) == (40, 39)
        assert [(r.line_no, r.reason) for r in loaded.rejects] == [(22, "truncated_line")]


@pytest.mark.parametrize("tail, reason", [
    ("2026/07/03 23:59:59.999, 1, NVIDIA H100 80GB HBM3, 165282305451, GPU-5f1b", "truncated_line"),
    ("Unable to determine the device handle for GPU0000:5D:00.0: Unknown Error", "gpu_unreachable"),
    (_lines(1)[0] + ", 7", "extra_fields"),
])
def test_a_last_line_cut_short_is_quarantined_by_the_reader(tmp_path, monkeypatch, tail, reason):
    # The log was copied while nvidia-smi was writing it: the last line has no end.
    lines = _lines(40)
    p = tmp_path / "h" / "a.csv"
    p.parent.mkdir()
    p.write_text("\n".join([HEADER, *lines, tail]))
    monkeypatch.setattr(smi_native, "BLOCK_BYTES", 1000)
    took, native, fast, exact = _three_ways(p, monkeypatch)
    assert took
    for loaded in (native, fast, exact):
        assert (loaded.rows_read, loaded.rows_loaded) == (41, 40)
        assert [(r.line_no, r.reason, r.raw) for r in loaded.rejects] == [(42, reason, tail)]
    assert _facts(native).equals(_facts(fast))


def test_turned_off_by_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEETFAULT_SMI_NATIVE", "0")
    assert not smi_native.available()
    p = tmp_path / "h" / "a.csv"
    p.parent.mkdir()
    p.write_text("\n".join([HEADER, *_lines(8)]) + "\n")
    assert smi_native.hourly(duckdb.connect(), p, smi.header_fields(HEADER), 1) is None
    assert load_file(p, 1, host="h", tz="UTC", fields=None)[0].rows_loaded == 8


def test_plan_leaves_fields_it_does_not_read_to_sql():
    from pipeline.ingest.smi_fields import parse_fields

    assert smi_native.plan(parse_fields("timestamp,index,temperature.gpu,memory.used [MiB]")).kinds == b"stnn"
    assert smi_native.plan(parse_fields("timestamp,name,utilization.gpu")) is None  # GPUs numbered by line order
    assert smi_native.plan(parse_fields("index,temperature.gpu")) is None  # no timestamp
    # a single throttle-reason field (Active / Not Active) is read by the SQL
    assert smi_native.plan(parse_fields("timestamp,index,clocks_throttle_reasons.hw_slowdown")) is None


def test_real_captures_agree_on_every_path(external, tmp_path, monkeypatch):
    """Each real capture (200+ fields, markers, deprecated fields, MIG rows), looped as
    ``nvidia-smi -l 1`` would write it: the C reader takes it and agrees with the other paths."""
    from polars.testing import assert_frame_equal

    files = sorted((external / "nvidia_gpu_exporter" / "query_gpu_csv").glob("*.csv"))
    assert files
    distinct = {f.read_text().splitlines()[0]: f for f in files}  # one capture per field list
    for k, f in enumerate(distinct.values()):
        header, row = f.read_text().splitlines()[:2]
        stamp = row.split(", ", 1)[0]
        t0 = datetime.strptime(stamp[:19], "%Y/%m/%d %H:%M:%S")
        rows = [row.replace(stamp, (t0 + timedelta(seconds=s)).strftime("%Y/%m/%d %H:%M:%S") + stamp[19:], 1)
                for s in range(0, 7200, 60)]
        p = tmp_path / "h" / f"{k}.csv"
        p.parent.mkdir(exist_ok=True)
        p.write_text("\n".join([header, *rows]) + "\n")
        took, native, fast, exact = _three_ways(p, monkeypatch)
        assert took, f.name
        for loaded in (native, fast):
            assert (loaded.rows_read, loaded.rows_loaded, loaded.rejects) == (len(rows), len(rows), [])
            assert_frame_equal(_facts(loaded), _facts(exact), check_dtypes=False, rel_tol=1e-12)


@pytest.fixture(scope="module")
def scalar_reader(tmp_path_factory):
    """The reader built without SSE2 (as on aarch64 hosts), or a skip where no compiler is."""
    import importlib.util
    import shlex
    import subprocess
    import sysconfig
    from pathlib import Path

    src = Path(smi_native.__file__).with_name("_smiscan.c")
    out = tmp_path_factory.mktemp("scalar") / ("_smiscan" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [*shlex.split(sysconfig.get_config_var("LDSHARED") or "cc -shared"), "-O2", "-fPIC", "-DSMISCAN_SCALAR",
           f"-I{sysconfig.get_paths()['include']}", str(src), "-o", str(out)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no C compiler to build the scalar reader")
    spec = importlib.util.spec_from_file_location("_smiscan", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_sse2_and_the_byte_loop_builds_read_alike(scalar_reader):
    """Same rows, values, identities and declines (reason and place) from both builds, on
    blocks of real-looking lines cut anywhere, with CRLF and stray bytes."""
    import random

    from pipeline.ingest.smi_fields import header_fields

    p = smi_native.plan(header_fields(HEADER))
    lines = [x.encode() for x in _lines(200)]
    rnd = random.Random(7)
    accepted = 0
    for _ in range(600):
        block = bytearray(b"\n".join(lines[: rnd.randint(0, 200)]) + (b"\n" if rnd.random() < 0.8 else b""))
        if rnd.random() < 0.5:
            block = block.replace(b"\n", b"\r\n")
        for _ in range(rnd.randint(0, 2)):
            if block:
                block[rnd.randrange(len(block))] = rnd.choice(b"\r\n,\x00\xff a0[")
        fast = _smiscan.parse(bytes(block), p.kinds, p.units)
        assert fast == scalar_reader.parse(bytes(block), p.kinds, p.units)
        accepted += fast[0] is not None
    assert 100 < accepted < 600
