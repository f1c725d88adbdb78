"""What a cell means is declared once (pipeline.ingest.telemetry.fields) and read in SQL: the
Python twins (markers, times) agree with that SQL, and the header plan fits a header to a
headerless file's lines with that same SQL."""

from __future__ import annotations

from datetime import datetime

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingest.telemetry import load_file
from pipeline.ingest.telemetry.fields import (FALSE_WORDS, TIMESTAMP_FORMATS, TRUE_WORDS, Field, clean_sql,
                                              header_fields, is_marker, is_time, marker_sql)
from pipeline.ingest.telemetry.header_plan import fits, values_read
from pipeline.vocab.sql import literal

FIELDS = [Field("timestamp"), Field("index"), Field("temperature.gpu"), Field("power.draw", "W"),
          Field("clocks_event_reasons.active"), Field("remapped_rows.pending")]

_number = st.one_of(st.integers(-10**6, 10**9).map(str),
                    st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: f"{x:.2f}"))
_cells = st.one_of(
    _number,
    _number.map(lambda x: x + " W"), _number.map(lambda x: x + " %"),
    st.sampled_from(["", "N/A", "[N/A]", "[Not Supported]", "[GPU is lost]", "[Unknown Error]", "[GPU requires reset]",
                     "[Oops", "nan", "inf", "-inf", "Infinity", "x", "W", "0x", "zz", *TRUE_WORDS, *FALSE_WORDS]),
    st.integers(0, 2**64 - 1).map(lambda x: f"0x{x:016X}"),
    # (years from 1000: strftime writes year 999 unpadded, which only DuckDB then reads)
    st.tuples(st.sampled_from(TIMESTAMP_FORMATS), st.datetimes(datetime(1000, 1, 1))).map(lambda p: p[1].strftime(p[0])),
    st.tuples(st.integers(0, 0xFFFF), st.integers(0, 255), st.integers(0, 31), st.integers(0, 7)).map(
        lambda p: f"{p[0]:08X}:{p[1]:02X}:{p[2]:02X}.{p[3]}"),
    st.text(st.characters(codec="utf-8", exclude_characters=",\r\n\x00"), max_size=12).map(str.strip),
)


@settings(max_examples=30, deadline=None)
@given(cells=st.lists(_cells, min_size=1, max_size=20))
def test_python_twins_agree_with_the_sql(cells):
    con = duckdb.connect()
    values = ", ".join(f"({literal(c)})" for c in cells)
    rows = con.execute(f"SELECT {marker_sql('c')}, {clean_sql(Field('timestamp'), 'c')} IS NOT NULL "
                       f"FROM (VALUES {values}) t(c)").fetchall()
    for cell, (marker, time) in zip(cells, rows):
        assert is_marker(cell) == marker, cell
        assert is_time(cell) == time, cell


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(_cells, min_size=len(FIELDS), max_size=len(FIELDS)), min_size=1, max_size=6))
def test_a_header_fits_the_lines_it_loads_without_rejects(tmp_path, rows):
    """The header plan fits a header to a headerless file's lines with the loader's own
    cell meaning: lines that load under a header without a reject fit it."""
    header = ", ".join(f"{f.name} [{f.unit}]" if f.unit else f.name for f in FIELDS)
    lines = [", ".join(r) for r in rows]
    path = tmp_path / "h" / "a.csv"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join([header, *lines]) + "\n")
    loaded, _ = load_file(path, 1, host="h", tz="UTC", fields=None)
    if not loaded.rejects and loaded.rows_loaded == len(lines):
        assert fits(header_fields(header), lines)
    assert fits(header_fields(header), lines) == all(values_read(FIELDS, [[c.strip() for c in r] for r in rows]))
