"""Headerless telemetry files (copytruncate rotation) take their host's nearest fitting header,
before or after them, whatever order the files arrive in."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.telemetry.fields import parse_fields
from pipeline.ingest.telemetry.header_plan import HostFile, fits, plan_starts, scan
from tests.test_smi import _ctx, run_smi, write

A = "timestamp, index, serial, name, temperature.gpu, power.draw [W]"
# The same number of cells in another order: only the values tell which one a file holds.
B = "timestamp, name, index, serial, temperature.gpu, power.draw [W]"
C = "timestamp, index, serial, temperature.gpu"


def _a(day: int, hour: int, temp: int = 50) -> list[str]:
    return [f"2026/07/{day:02d} {hour:02d}:{m:02d}:00.000, {i}, SN{i}, NVIDIA H100 80GB HBM3, {temp + i}, {300 + m}.50 W"
            for m in (0, 20, 40) for i in (0, 1)]


def _b(day: int, hour: int) -> list[str]:
    return [f"2026/07/{day:02d} {hour:02d}:{m:02d}:00.000, NVIDIA H100 80GB HBM3, {i}, SN{i}, {60 + i}, {200 + m}.25 W"
            for m in (0, 30) for i in (0, 1)]


def _c(day: int, hour: int) -> list[str]:
    return [f"2026/07/{day:02d} {hour:02d}:{m:02d}:00.000, 0, SN0, {40 + m // 10}" for m in (0, 30)]


def _fleet(root):
    """One copytruncate host: the collector started on day 3 (header A), restarted with
    query B on day 5; files before day 3 carry no header at all. Another day's file holds a
    query no header of the host names (three cells in four)."""
    h = root / "telemetry" / "h1"
    return [
        write(h / "smi-20260701.csv.gz", *_a(1, 10), gz=True),  # before any header: A is after it
        write(h / "smi-20260702.csv", *_a(2, 10), *_a(2, 11)),
        write(h / "smi-20260703.csv", *_a(3, 9), A, *_a(3, 10)),  # collector started mid-day
        write(h / "smi-20260704.csv", *_a(4, 10)),
        write(h / "smi-20260705.csv", *_a(5, 10), B, *_b(5, 12)),  # restarted with another query
        write(h / "smi-20260706.csv", *_b(6, 10)),  # continues B, though A is as long
        write(h / "smi-20260707.csv", *[x.rsplit(",", 2)[0] for x in _a(7, 10)]),  # fits no header
    ]


def test_fits_checks_the_values_not_only_the_count():
    a, b = parse_fields(A), parse_fields(B)
    assert fits(a, _a(1, 10)) and not fits(b, _a(1, 10))
    assert fits(b, _b(1, 10)) and not fits(a, _b(1, 10))
    assert not fits(parse_fields(C), _a(1, 10))  # another number of cells
    assert fits(a, _a(1, 10) + [_a(1, 10)[0][:25]])  # a last line cut short is allowed


def test_plan_prefers_the_nearest_fitting_header_before_then_after():
    a, b = parse_fields(A), parse_fields(B)

    def f(key, first=None, own_first=None, own_last=None, sample=()):
        return HostFile(key, first is not None, own_first or first, own_last or own_first or first, list(sample))

    files = [f("1", sample=_a(1, 1)), f("2", first=a), f("3", sample=_b(3, 1)), f("4", first=b),
             f("5", sample=_a(5, 1)), f("6", sample=_c(6, 1))]
    got = [(s.source, s.text) for s in plan_starts(files, None)]
    assert got[0] == ("2", A)  # nothing before: the first header after
    assert got[2] == ("4", B)  # A before does not fit its values: B after
    assert got[4] == ("2", A)  # B is nearer before, but only A fits
    assert got[5] == (None, None)  # fits no header and none configured: no_header
    assert plan_starts(files, parse_fields(C))[5].source == "config"


def test_scan_finds_a_header_written_mid_file(tmp_path):
    files = _fleet(tmp_path)
    got = scan(files[2])
    assert got.first_line is None and [f.name for f in got.own_first][:2] == ["timestamp", "index"]
    assert got.sample == _a(3, 9)
    assert scan(files[0]).own_first is None and len(scan(files[0]).sample) == 6


_EVERY: dict[str, bytes] = {}


def _load(tmp_path, wh, data, runs):
    """Load the files of ``runs`` (lists of file names), each list a nightly run."""
    folder = data / "telemetry" / "h1"
    every = _EVERY.setdefault(str(folder), {p.name: p.read_bytes() for p in folder.iterdir()})
    for p in list(folder.iterdir()):
        p.unlink()
    for names in runs:
        for n in names:
            (folder / n).write_bytes(every[n])
        run_smi(_ctx(tmp_path, wh, data))


def _tables(wh):
    hourly = wh.engine.pl("SELECT * EXCLUDE (file_id) FROM smi_hourly", step="test").sort(pl.all())
    days = wh.engine.pl("SELECT * FROM gpu_days", step="test").sort(pl.all())
    quarantine = wh.engine.pl("SELECT source_file, line_no, reason FROM quarantine", step="test").sort(pl.all())
    heads = wh.engine.pl("SELECT f.path, h.start_fields, h.last_fields, h.header_from, h.own_first "
                         "FROM smi_headers h JOIN files f USING (file_id)", step="test").sort("path")
    return hourly, days, quarantine, heads


@pytest.fixture
def stores(tmp_path):
    from pipeline.warehouse import Warehouse

    opened = []

    def make(name):
        w = Warehouse(tmp_path / f"{name}.duckdb")
        w.__enter__()
        opened.append(w)
        return w

    yield make
    for w in opened:
        w.close()


def test_every_file_takes_its_nearest_fitting_header(tmp_path, stores):
    data = tmp_path / "data"
    files = _fleet(data)
    wh = stores("one")
    run_smi(_ctx(tmp_path, wh, data))
    _, days, quarantine, heads = _tables(wh)
    src = {p.rsplit("/", 1)[1]: (s, f) for p, s, _, f, _ in heads.iter_rows()}
    k = "telemetry/h1/"
    assert src["smi-20260701.csv.gz"] == (A, k + "smi-20260703.csv")
    assert src["smi-20260702.csv"] == (A, k + "smi-20260703.csv")
    assert src["smi-20260703.csv"] == (A, k + "smi-20260703.csv")  # its own header, further down
    assert src["smi-20260704.csv"] == (A, k + "smi-20260703.csv")
    assert src["smi-20260705.csv"] == (A, k + "smi-20260703.csv")
    assert src["smi-20260706.csv"] == (B, k + "smi-20260705.csv")
    assert src["smi-20260707.csv"] == (None, None)
    # every line but the unfitting file's is loaded; those stay no_header
    assert set(quarantine["source_file"]) == {k + "smi-20260707.csv"} and set(quarantine["reason"]) == {"no_header"}
    logged = sum(len(p.read_bytes()) > 0 for p in files)  # (all non-empty)
    assert logged == 7 and days["samples"].sum() == 6 + 12 + 12 + 6 + 6 + 4 + 4


def test_arrival_order_does_not_matter(tmp_path, stores):
    data = tmp_path / "data"
    names = [p.name for p in _fleet(data)]
    results = []
    for label, runs in (("one", [names]), ("newest_first", [[n] for n in reversed(names)]),
                        ("oldest_first", [[n] for n in names]), ("middle_out", [names[3:5], names[:3], names[5:]])):
        wh = stores(label)
        _load(tmp_path, wh, data, runs)
        results.append((label, _tables(wh)))
    base = results[0][1]
    for label, got in results[1:]:
        for a, b, what in zip(base, got, ("smi_hourly", "gpu_days", "quarantine", "smi_headers")):
            assert a.equals(b), f"{label}: {what} differs"


def test_a_header_arriving_later_reloads_and_says_why(tmp_path, stores):
    data = tmp_path / "data"
    names = [p.name for p in _fleet(data)]
    wh = stores("later")
    _load(tmp_path, wh, data, [names[:2]])
    assert wh.con.execute("SELECT count(*) FROM quarantine WHERE reason = 'no_header'").fetchall()[0][0] == 18
    _load(tmp_path, wh, data, [names[:3]])
    assert wh.con.execute("SELECT count(*) FROM quarantine").fetchall()[0][0] == 0
    why = dict(wh.con.execute("SELECT f.path, h.reloaded_because FROM smi_headers h JOIN files f USING (file_id) "
                      "WHERE h.reloaded_because IS NOT NULL").fetchall())
    assert set(why) == {"telemetry/h1/smi-20260701.csv.gz", "telemetry/h1/smi-20260702.csv",
                        "telemetry/h1/smi-20260703.csv"}
    assert all("telemetry/h1/smi-20260703.csv" in w and "was no header" in w for w in why.values())
    assert wh.con.execute("SELECT sum(samples) FROM gpu_days").fetchall()[0][0] == 6 + 12 + 12


def test_parse_smi_reads_files_before_the_first_header(tmp_path):
    from pipeline.ingest.telemetry import parse_smi_files

    files = _fleet(tmp_path)
    df, rejects = parse_smi_files(files, tz="UTC")
    assert {r.detail.split(":")[0] for r in rejects} == {str(files[-1])}
    assert df.height == 50 and df["name"].drop_nulls().unique().to_list() == ["NVIDIA H100 80GB HBM3"]
    assert df.filter(pl.col("power_draw") > 250).height == 42  # A: 300-340 W; B (200-230 W) read as B


# -- the sample a headerless file is fitted by, from the stage's peek at its head ------------

_PIECES = [*_a(2, 10), "", "   ", A, "2026/07/02 10:00:00.000, 0, SN0, \u00e9t\u00e9, 50, 300.50 W", "x" * 300]


@settings(max_examples=60, deadline=None)
@given(picks=st.lists(st.integers(0, len(_PIECES) - 1), max_size=40), long=st.integers(0, 12), filler=st.integers(0, 700),
       ends=st.sampled_from(["\n", "\r\n", "\r", "mixed"]), bom=st.booleans(), gz=st.booleans(),
       unterminated=st.booleans())
def test_the_peeks_head_sample_is_the_files(picks, long, filler, ends, bom, gz, unterminated):
    """Where the peek's first bytes settle a headerless file's sample, it is the one the
    header plan would read from the file (line ends, a cut at 64 KiB, BOM, gzip)."""
    import gzip
    import tempfile
    from pathlib import Path

    from pipeline.ingest.telemetry import batch
    from pipeline.ingest.telemetry.header_plan import head_sample

    # (9 KB lines: the 64 KiB head may end before the sample is complete)
    lines = [_PIECES[k] for k in picks] + ["y" * 9000] * long + [_a(3, 10)[k % 6] for k in range(filler)] + [A, *_a(4, 1)]
    if not lines[0].strip() or lines[0] == A:
        lines.insert(0, _a(1, 1)[0])  # the stage takes a sample only of files that start with data
    seps = ["\n", "\r\n", "\r"] if ends == "mixed" else [ends]
    text = "".join(ln + seps[k % len(seps)] for k, ln in enumerate(lines))
    raw = (("\ufeff" if bom else "") + (text.rstrip("\r\n") if unterminated else text)).encode()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "smi.csv"
        path.write_bytes(gzip.compress(raw) if gz else raw)
        pk = batch.peek(path)
        assert pk is not None
        want = head_sample(path)
        assert pk.sample is None or list(pk.sample) == want
        if not gz and (len(raw) < 1 << 16 or not long):  # (short lines: the sample ends within 64 KiB)
            assert pk.sample is not None and list(pk.sample) == want  # settled: the file is not opened again
