"""The fast path (many files per DuckDB ``read_csv``) and the line-by-line path give the same
tables, through ``gpu_days``, on generated files with the edges real logs have: an
unterminated last line (cut mid-cell, or with a comma and no space), LF, CRLF, lone-CR and
mixed line ends, missing and extra cells, units or none, a header or none (the host's
header, else ``telemetry.fields``)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.telemetry.read import split_lines
from tests.test_smi import only_line_by_line, run_smi

HEADER = ("timestamp, index, serial, temperature.gpu, utilization.gpu [%], power.draw [W], "
          "clocks_event_reasons.active, ecc.errors.corrected.volatile.total, remapped_rows.pending")
FIELDS = HEADER.replace(" ", "").replace("[%]", "").replace("[W]", "")

SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

_VALUES = {  # per column: plain values first, then oddities (markers, words, units, garbage)
    "index": ["0", "1", "[N/A]", "x"],
    "temp": ["45", "51", "[N/A]", "[GPU is lost]", "nan", "4x5"],
    "util": ["45 %", "7", "[N/A]", "x %"],
    "power": ["627.40 W", "60.5", "[Not Supported]", "W"],
    "mask": ["0x0000000000000004", "0x40", "[N/A]", "zz"],
    "ecc": ["0", "3", "[Unknown Error]", "-1"],
    "pending": ["No", "Yes", "[N/A]", "Maybe"],
}


@st.composite
def _line(draw, day: int, k: int) -> str:
    ts = f"2026/07/{day:02d} {10 + k // 6:02d}:{(k * 10) % 60:02d}:00.000"
    cells = [draw(st.sampled_from(v[:2]) if draw(st.integers(0, 4)) else st.sampled_from(v))
             for v in _VALUES.values()]
    cells = [ts, cells[0], f"SN{cells[0][-1:]}", *cells[1:]]
    shape = draw(st.integers(0, 9))
    if shape == 0:
        cells = cells[:draw(st.integers(1, len(cells) - 1))]  # missing cells
    elif shape == 1:
        cells = cells + ["7"]  # an extra cell
    return ", ".join(cells)


@st.composite
def _file(draw, day: int) -> bytes:
    n = draw(st.integers(1, 8))
    lines = [draw(_line(day, k)) for k in range(n)]
    if draw(st.booleans()):
        lines.insert(0, HEADER)
    ends = draw(st.sampled_from(["\n", "\r\n", "\r", "mixed"]))
    text = ""
    for ln in lines:
        text += ln + (draw(st.sampled_from(["\n", "\r\n", "\r"])) if ends == "mixed" else ends)
    last = draw(st.integers(0, 3))
    if last == 1:  # the logger was killed mid-line
        text = text.rstrip("\r\n")[: -draw(st.integers(1, 12))]
    elif last == 2:  # unterminated, the last cell glued with a comma and no space
        text = text.rstrip("\r\n") + ",9"
    elif last == 3:
        text = text.rstrip("\r\n")  # unterminated, otherwise whole
    return text.encode()


@st.composite
def _host(draw) -> list[bytes]:
    return [draw(_file(day)) for day in range(1, draw(st.integers(1, 3)) + 1)]


def _tables(tmp_path, name: str, files: list[bytes], monkeypatch, *, fast: bool) -> dict:
    from pipeline.config import config_from_dict
    from pipeline.run import RunContext
    from pipeline.warehouse import Warehouse

    data = tmp_path / name / "data"
    folder = data / "telemetry" / "h1"
    folder.mkdir(parents=True)
    for day, raw in enumerate(files, 1):
        (folder / f"smi-2026-07-{day:02d}.csv").write_bytes(raw)
    cfg = config_from_dict({"telemetry": {"fields": FIELDS.split(",")}})
    with monkeypatch.context() as m:
        if not fast:
            only_line_by_line(m)
        with Warehouse(":memory:") as wh:
            ctx = RunContext(cfg, wh, data, tmp_path / name / "out")
            run_smi(ctx)
            rep = ctx.report("smi")
            hourly = wh.engine.pl("SELECT * EXCLUDE (file_id) FROM smi_hourly", step="test").sort("host", "gpu_index", "serial", "hour",
                                                                               "ts_first", "samples", nulls_last=True)
            out = {
                "counts": (rep.rows_read, rep.rows_loaded, rep.rows_quarantined),
                "files": wh.con.execute("SELECT split_part(path, '/', -1), rows_read, rows_loaded, rows_skipped "
                                "FROM files ORDER BY 1").fetchall(),
                "quarantine": wh.con.execute("SELECT split_part(source_file, '/', -1), line_no, reason, raw "
                                     "FROM quarantine ORDER BY ALL").fetchall(),
                "hourly": hourly,
                "gpu_days": wh.engine.pl("SELECT * FROM gpu_days", step="test").sort("gpu_key", "day"),
            }
            run_smi(RunContext(cfg, wh, data, tmp_path / name / "out"))  # a rerun loads nothing twice
            assert wh.con.execute("SELECT sum(samples) FROM smi_hourly").fetchall()[0][0] == (hourly["samples"].sum() if hourly.height else None)
    return out


@SETTINGS
@given(files=_host())
def test_fast_and_line_by_line_paths_give_the_same_tables(tmp_path_factory, monkeypatch, files):
    from polars.testing import assert_frame_equal

    tmp = tmp_path_factory.mktemp("paths")
    fast = _tables(tmp, "fast", files, monkeypatch, fast=True)
    exact = _tables(tmp, "exact", files, monkeypatch, fast=False)
    assert fast["counts"] == exact["counts"]
    assert fast["files"] == exact["files"]
    assert fast["quarantine"] == exact["quarantine"]
    assert_frame_equal(fast["hourly"], exact["hourly"], check_dtypes=False, rel_tol=1e-9)
    assert_frame_equal(fast["gpu_days"], exact["gpu_days"], check_dtypes=False, rel_tol=1e-9)
    # every line is loaded, quarantined or skipped (blank or a header), file by file
    for name, read, loaded, skipped in exact["files"]:
        quarantined = sum(1 for q in exact["quarantine"] if q[0] == name)
        assert read == loaded + quarantined
        raw = files[int(name[-6:-4]) - 1]
        assert read + skipped == len([ln for ln in split_lines(raw)]) or any(
            q[0] == name and q[1] is None for q in exact["quarantine"])
