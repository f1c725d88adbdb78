"""Properties of the nvidia-smi ingest: nothing raises, and every line is accounted for."""

from __future__ import annotations

import gzip

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.telemetry import load_file, parse_smi_files
from pipeline.ingest.telemetry.fields import parse_fields
from pipeline.ingest.telemetry.read import BLANK_CHARS, split_lines

HEADER = ("timestamp, index, name, serial, pci.bus_id, temperature.gpu, utilization.gpu [%], "
          "memory.used [MiB], power.draw [W], clocks_event_reasons.active, ecc.errors.corrected.volatile.total")
ROW = ("2026/07/03 22:{m:02d}:46.109, {i}, NVIDIA H100 80GB HBM3, 165282305455{i}, 00000000:{b:02X}:00.0, "
       "{t}, 45 %, 1234 MiB, 627.40 W, 0x0000000000000004, {e}")
FIELDS = parse_fields("timestamp,index,temperature.gpu")

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _data_lines(raw: bytes) -> int:
    """Lines that are neither blank nor a header: what must be loaded or quarantined."""
    from pipeline.ingest.telemetry.fields import header_fields

    lines = split_lines(raw)  # LF, CRLF or a lone CR ends a line
    if lines:
        lines[0] = lines[0].lstrip("\ufeff")
    return sum(1 for ln in lines if ln.strip(BLANK_CHARS) and header_fields(ln.rstrip("\r")) is None)


def _check(path, raw: bytes) -> None:
    loaded, _ = load_file(path, 1, host="h", tz="Europe/Berlin", fields=FIELDS)
    assert loaded.rows_read == loaded.rows_loaded + len(loaded.rejects)
    whole = [r for r in loaded.rejects if r.line_no is None]  # a file judged whole (sniff): one row
    if whole:
        assert len(loaded.rejects) == loaded.rows_read == 1 and loaded.rows_loaded == 0
    elif not raw.startswith(b"\x1f\x8b"):  # a damaged gzip stream is one bad_gzip line
        assert loaded.rows_read == _data_lines(raw)
    frame = loaded.tables["smi_hourly"]
    assert int(frame["samples"].sum() or 0) == loaded.rows_loaded
    df, rejects = parse_smi_files([path], tz="Europe/Berlin", fields="timestamp,index,temperature.gpu")
    assert df.height + len(rejects) == loaded.rows_read


@SETTINGS
@given(raw=st.binary(max_size=400))
def test_arbitrary_bytes_never_raise(tmp_path, raw):
    p = tmp_path / "x.csv"
    p.write_bytes(raw)
    _check(p, raw)


def _mutations():
    rows = st.lists(
        st.builds(lambda m, i, t, e: ROW.format(m=m, i=i, b=0x18 + i, t=t, e=e),
                  st.integers(0, 59), st.integers(0, 7),
                  st.sampled_from(["45", "[N/A]", "[GPU is lost]", "N/A", "", "4x5"]),
                  st.sampled_from(["0", "3", "[Not Supported]"])),
        min_size=0, max_size=12,
    )

    def mutate(draw_lines, ops):
        lines = list(draw_lines)
        for op, k, cut in ops:
            if not lines:
                lines.append(HEADER)
            j = k % len(lines)
            if op == "truncate":
                lines[j] = lines[j][: cut % (len(lines[j]) + 1)]
            elif op == "duplicate_header":
                lines.insert(j, HEADER)
            elif op == "blank":
                lines.insert(j, "")
            elif op == "garble":
                s = lines[j]
                pos = cut % (len(s) + 1)
                lines[j] = s[:pos] + "\x00,\ufffd\"" + s[pos:]
            elif op == "drop":
                lines.pop(j)
            elif op == "join":
                lines[j] = lines[j] + lines[(j + 1) % len(lines)]
        return lines

    ops = st.lists(st.tuples(st.sampled_from(["truncate", "duplicate_header", "blank", "garble", "drop", "join"]),
                             st.integers(0, 50), st.integers(0, 400)), max_size=6)
    return st.builds(mutate, rows.map(lambda r: [HEADER] + r), ops)


@SETTINGS
@given(lines=_mutations(), crlf=st.booleans(), gz=st.booleans(), bom=st.booleans())
def test_mutated_real_looking_files_reconcile(tmp_path, lines, crlf, gz, bom):
    text = ("\ufeff" if bom else "") + ("\r\n" if crlf else "\n").join(lines)
    raw = text.encode("utf-8")
    p = tmp_path / ("x.csv.gz" if gz else "x.csv")
    p.write_bytes(gzip.compress(raw) if gz else raw)
    _check(p, raw)


# -- the fast path never loads what the exact path would quarantine -----------------------------

FAST_HEADER = ("timestamp, index, serial, temperature.gpu, utilization.gpu [%], power.draw [W], "
               "clocks_event_reasons.active, ecc.errors.corrected.volatile.total, remapped_rows.pending")
_CELLS = {  # per column: plain values first, then oddities
    "ts": ["2026/07/03 22:{m:02d}:46.109", "2026/07/03 23:{m:02d}:01.5", "2026-07-03 22:{m:02d}:46",
           "2026/13/03 22:10:46.109", "", "[N/A]", "22:{m:02d}"],
    "index": ["0", "1", "01", "[N/A]", "x", ""],
    "temp": ["45", "-3", "45.5", "1e3", "+7", "[N/A]", "N/A", "", "[GPU is lost]", "[Unknown Error]", "[Oops",
             "nan", "NaN", "inf", "-inf", "Infinity", "4x5", "Yes", "0x10", " 45"],
    "util": ["45 %", "0 %", "45", "x %", "%", "nan %", "[N/A]", "Yes", "-inf %"],
    "power": ["627.40 W", "60 W", "627.40", "W", "[Not Supported]", "1.2.3 W"],
    "mask": ["0x0000000000000004", "0x40", "4", "-1", "0xFFFFFFFFFFFFFFFF", "0x", "zz", "[N/A]", ""],
    "ecc": ["0", "3", "1.5", "-1", "[N/A]", "nan", "inf", "Enabled"],
    "pending": ["No", "Yes", "0", "[N/A]", "Maybe", "Not Active"],
}


@st.composite
def _fast_files(draw):
    n = draw(st.integers(1, 8))
    rows = []
    for k in range(n):
        cells = [draw(st.sampled_from(v[:2]) if draw(st.integers(0, 3)) else st.sampled_from(v))
                 for v in _CELLS.values()]
        cells[0] = cells[0].format(m=k)
        cells.insert(2, "165282305455" + cells[1][-1:])
        rows.append(", ".join(cells))
    return [FAST_HEADER] + rows


@SETTINGS
@given(lines=_fast_files(), crlf=st.booleans(), cut_last=st.booleans())
def test_fast_path_agrees_with_the_exact_path(tmp_path, monkeypatch, lines, crlf, cut_last):
    """Whatever the fast path makes of a file (unreadable values flagged and found from the
    aggregates, rejected lines judged) is what the line-by-line path makes of it: same
    hourly facts, same quarantined lines, same counts."""
    from polars.testing import assert_frame_equal

    from tests.test_smi import only_line_by_line

    end = "\r\n" if crlf else "\n"
    text = end.join(lines) + end
    if cut_last:
        text = text[: len(text) - len(end) - len(lines[-1]) // 2]
    p = tmp_path / "h" / "x.csv"
    p.parent.mkdir(exist_ok=True)
    p.write_text(text)

    def hourly():
        loaded, _ = load_file(p, 1, host="h", tz="Europe/Berlin", fields=None)
        frame = loaded.tables["smi_hourly"].sort("gpu_index", "serial", "hour", "ts_first", nulls_last=True)
        return loaded, frame

    fast_loaded, fast = hourly()
    with monkeypatch.context() as m:
        only_line_by_line(m)
        exact_loaded, exact = hourly()
    assert (fast_loaded.rows_read, fast_loaded.rows_loaded) == (exact_loaded.rows_read, exact_loaded.rows_loaded)
    assert [(r.line_no, r.reason) for r in fast_loaded.rejects] == [(r.line_no, r.reason) for r in exact_loaded.rejects]
    assert_frame_equal(fast, exact, check_dtypes=False, rel_tol=1e-9)
