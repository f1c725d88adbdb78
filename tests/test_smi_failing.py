"""Samples of a failing GPU ([Unknown Error], [GPU requires reset], [GPU is lost]) are nulls
in the values and a count per GPU and day in ``gpu_days.gpu_error_samples``, whichever path
reads the file."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.ingest.telemetry import load_file, parse_smi_files
from pipeline.ingest.telemetry.batch import load_files
from tests.test_smi import HEADER, _ctx, line, only_line_by_line, run_smi, write


def _lines() -> list[str]:
    out = []
    for m in range(0, 60, 5):
        ts = f"2026/07/03 10:{m:02d}:00.000"
        lost = 25 <= m < 45  # GPU 1 falls off the bus for 20 minutes, asks for a reset after
        marker = "[GPU is lost]" if m < 40 else "[GPU requires reset]"
        out.append(line(ts=ts, idx=0, serial="SN0"))
        out.append(line(ts=ts, idx=1, serial="SN1", temp=marker if lost else "51", power=marker if lost else "300.00 W",
                        ecc="[Unknown Error]" if lost else "0"))
    out.append(line(ts="2026/07/03 11:00:00.000", idx=0, serial="SN0", fan="[Not Supported]"))  # a field it lacks: no error
    return out


@pytest.mark.parametrize("fast", [True, False])
def test_one_file_counts_the_failing_samples(tmp_path, monkeypatch, fast):
    if not fast:
        only_line_by_line(monkeypatch)
    f = write(tmp_path / "h1" / "a.csv", HEADER, *_lines())
    loaded, _ = load_file(f, 1, host="h1", tz="UTC", fields=None)
    hourly = loaded.tables["smi_hourly"]
    got = dict(hourly.group_by("gpu_index").agg(pl.col("gpu_error_n").sum()).iter_rows())
    assert got == {0: 0, 1: 4} and not loaded.rejects
    df, rejects = parse_smi_files([f], tz="UTC")
    lost = df.filter(pl.col("gpu_index") == 1, pl.col("temperature_gpu").is_null())
    assert lost.height == 4 and lost["power_draw"].null_count() == 4 and not rejects


def test_batched_files_count_alike_and_reach_gpu_days(tmp_path, wh):
    data = tmp_path / "data"
    lines = _lines()
    write(data / "telemetry" / "h1" / "a.csv", HEADER, *lines[:12])
    write(data / "telemetry" / "h1" / "b.csv", HEADER, *lines[12:])
    items = [(p, k) for k, p in enumerate(sorted((data / "telemetry" / "h1").iterdir()), 1)]
    res = load_files(items, host="h1", tz="UTC", fields=None,
                     single=lambda p, i, flds: load_file(p, i, host="h1", tz="UTC", fields=flds))
    assert sum(int(r[0].tables["smi_hourly"]["gpu_error_n"].sum()) for r in res) == 4
    run_smi(_ctx(tmp_path, wh, data))
    days = dict(wh.con.execute("SELECT gpu_index, gpu_error_samples FROM gpu_days").fetchall())
    assert days == {0: 0, 1: 4}
