"""Files of many hosts read by one statement per layout give what reading each alone gives."""

from __future__ import annotations

import gzip

import polars as pl
import pytest

from pipeline.ingest.telemetry import batch, load_file
from pipeline.ingest.telemetry.batch import Run, load_runs
from pipeline.ingest.telemetry.read import ExactRead, read_exact, read_unheaded, stage_scratch
from tests.test_smi import HEADER, line, write

ZONES = {"h-utc": "UTC", "h-sha": "Asia/Shanghai", "h-nyc": "America/New_York"}


@pytest.fixture(autouse=True)
def _one_engine():
    """One scratch DuckDB for the test, as the stage has (opening one per file is slow)."""
    with stage_scratch():
        yield


def _day(d: int, hours=(22, 23)) -> list[str]:
    return [line(ts=f"2026/03/{d:02d} {h:02d}:{m:02d}:00.000", idx=i, temp=str(40 + m % 7), ecc=str(m // 20))
            for h in hours for m in range(0, 60, 20) for i in (0, 1)]


def _host(root, host: str, every: bool = True) -> list:
    """A host's files; ``every=False``: the first two only (with a header, and continuing it)."""
    h = root / host
    files = [
        write(h / "a01.csv", HEADER, *_day(1)),
        write(h / "a02.csv", *_day(2)),  # copytruncate: continues the header
        write(h / "a03.csv.gz", HEADER, *_day(3), gz=True),
        write(h / "a04.csv", HEADER, *_day(4), line()[:45]),  # killed mid-line: quarantined, still fast
        write(h / "a05.csv", HEADER, *_day(5)[:2], line().replace(", ", ",", 1), *_day(5)[2:]),  # odd spacing
        write(h / "a06.csv", HEADER, *_day(6)[:2], "", *_day(6)[2:]),  # a blank line
        write(h / "a07.csv", HEADER, *_day(7), end="\r\n"),
        write(h / "a08.csv", HEADER, *_day(8)[:3], line(ts="2026/03/08 23:59:00.000", temp="hot"), *_day(8)[3:]),
        write(h / "a09.csv", HEADER, *_day(9), HEADER, *_day(9, (1,))),  # logger restarted
        write(h / "a10.csv", HEADER, *_day(10, (2,)), line(ts="2026/03/10 02:30:00.000").replace(", ", ",  ")),
    ]
    return files if every else files[:2]


def _single(path, fid, fields, run):
    return load_file(path, fid, host=run.host, tz=run.tz, fields=fields, fast=False)


def test_hosts_share_statements_and_match_file_by_file(tmp_path, monkeypatch):
    runs, fid = [], 0
    for host, tz in ZONES.items():
        items = []
        for p in _host(tmp_path, host):
            fid += 1
            items.append((p, fid))
        runs.append(Run(host, tz, None, items))
    calls = []
    real = batch.fast_batch
    monkeypatch.setattr(batch, "fast_batch", lambda con, items, *a, **k: calls.append(items) or real(con, items, *a, **k))
    got = load_runs(runs, single=_single)
    # one statement per layout, whatever the hosts: plain LF, headerless LF, gzip, CRLF
    assert len(calls) == 4 and {it.host for it in calls[0]} == set(ZONES)
    monkeypatch.setattr(batch, "fast_batch", real)
    for run, results in zip(runs, got):
        fields = None
        for (path, file_id), (loaded, last) in zip(run.items, results):
            alone, fields = load_file(path, file_id, host=run.host, tz=run.tz, fields=fields, fast=False)
            name = f"{run.host}/{path.name}"
            assert (loaded.rows_read, loaded.rows_loaded, loaded.rows_skipped) == \
                (alone.rows_read, alone.rows_loaded, alone.rows_skipped), name
            assert [(r.line_no, r.reason, r.raw) for r in loaded.rejects] == \
                [(r.line_no, r.reason, r.raw) for r in alone.rejects], name
            assert last == fields, name
            a, b = (x.tables["smi_hourly"].sort("gpu_index", "hour") for x in (loaded, alone))
            assert a.equals(b), name
            assert loaded.tables["smi_headers"].rows() == alone.tables["smi_headers"].rows(), name
    # the host's zone shifted each file's hours: the same local day lands on other UTC hours
    hours = {run.host: res[0][0].tables["smi_hourly"]["hour"].min() for run, res in zip(runs, got)}
    assert hours["h-utc"] != hours["h-sha"] != hours["h-nyc"]


def _fast_files(calls):
    return {it.path.name for items in calls for it in items}


def test_a_file_with_a_truncated_line_stays_fast_and_odd_ones_go_line_by_line(tmp_path, monkeypatch):
    files = _host(tmp_path, "h-utc")
    seen = []
    real = batch.fast_batch

    def spy(con, items, *a, **k):
        out = real(con, items, *a, **k)
        seen.extend((it.path.name, r is not None) for it, r in zip(items, out))
        return out

    monkeypatch.setattr(batch, "fast_batch", spy)
    load_runs([Run("h-utc", "UTC", None, [(p, k) for k, p in enumerate(files, 1)])], single=_single)
    fast = dict(seen)
    assert fast["a04.csv"] and fast["a01.csv"] and fast["a09.csv"] and fast["a07.csv"]
    # a comma without its space, a blank line, an unreadable value, a doubled space: line by line
    assert not fast["a05.csv"] and not fast["a06.csv"] and not fast["a08.csv"] and not fast["a10.csv"]


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_unheaded_files_are_quarantined_as_read_exact_does(tmp_path, end):
    rows = _day(1)
    cases = {
        "plain.csv": dict(lines=rows),
        "blank.csv": dict(lines=[*rows[:2], "", "  ", *rows[2:]]),
        "bom.csv": dict(lines=rows, bom=True),
        "cut.csv": dict(lines=[*rows, rows[0][:30]]),
        "tool.csv": dict(lines=[rows[0], "No devices were found", rows[1]]),
        "gz.csv.gz": dict(lines=rows, gz=True),
    }
    for name, kw in cases.items():
        p = write(tmp_path / name, *kw.pop("lines"), end=end, **kw)
        quick, exact = read_unheaded(p), ExactRead()
        assert list(read_exact(p, None, exact)) == []
        assert quick is not None, name
        assert (quick.rows_read, quick.rows_skipped, quick.last_fields) == \
            (exact.rows_read, exact.rows_skipped, exact.last_fields), name
        assert [(r.line_no, r.reason, r.raw, r.detail) for r in quick.rejects] == \
            [(r.line_no, r.reason, r.raw, r.detail) for r in exact.rejects], name
    # a header further down, a damaged gzip, a file that is not text: read_exact decides
    assert read_unheaded(write(tmp_path / "later.csv", *rows[:2], HEADER, *rows[2:], end=end)) is None
    cut = write(tmp_path / "cut.csv.gz", *rows, gz=True)
    cut.write_bytes(cut.read_bytes()[:-30])
    assert read_unheaded(cut) is None
    (tmp_path / "zip.csv").write_bytes(b"PK\x03\x04" + gzip.compress(b"x" * 100))
    assert read_unheaded(tmp_path / "zip.csv") is None


def test_a_statement_that_fails_names_its_file_and_only_that_file_goes_line_by_line(tmp_path):
    files = [write(tmp_path / "h" / f"a{k}.csv", HEADER, *_day(k)) for k in range(1, 5)]
    files[2].write_bytes(files[2].read_bytes().replace(b"NVIDIA H100", b"NVIDIA\x01H100", 1))
    got = load_runs([Run("h", "UTC", None, [(p, k) for k, p in enumerate(files, 1)])], single=_single)[0]
    for (path, fid), (loaded, _) in zip([(p, k) for k, p in enumerate(files, 1)], got):
        alone, _ = load_file(path, fid, host="h", tz="UTC", fields=None, fast=False)
        assert loaded.rows_loaded == alone.rows_loaded == 12
        assert loaded.tables["smi_hourly"].sort("gpu_index", "hour").equals(
            alone.tables["smi_hourly"].sort("gpu_index", "hour"))
    assert pl.concat([r[0].tables["smi_hourly"] for r in got])["file_id"].n_unique() == 4
