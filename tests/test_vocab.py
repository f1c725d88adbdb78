"""The shared vocabulary (pipeline/vocab): each Python function and its SQL (and polars) twin
give the same answer on generated input, and no module outside pipeline/vocab quotes SQL by hand."""

from __future__ import annotations

import ast
import gzip
from datetime import date, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.vocab.files import compression_sql, gunzip, open_text, read_bytes, read_head
from pipeline.vocab.hosts import host_key, host_key_pl, host_key_sql
from pipeline.vocab.pci import pci_id, pci_id_parts, pci_id_pl, pci_id_sql
from pipeline.vocab.sql import ident, literal, literals

ROOT = Path(__file__).resolve().parent.parent
CON = duckdb.connect()

# Any text DuckDB can hold (no NUL, no lone surrogates), weighted toward what the twins parse.
_any_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)


def _sql_of(sql_fn, values: list[str | None]) -> list[str | None]:
    frame = pl.DataFrame({"v": values}, schema={"v": pl.Utf8})  # noqa: F841  (DuckDB reads it by name)
    return [r[0] for r in CON.execute(f"SELECT {sql_fn('v')} FROM frame").fetchall()]


def _pl_of(pl_fn, values: list[str | None]) -> list[str | None]:
    return pl.DataFrame({"v": values}, schema={"v": pl.Utf8}).select(pl_fn(pl.col("v"))).to_series().to_list()


def _assert_twins(py_fn, sql_fn, pl_fn, values: list[str | None]) -> None:
    want = [py_fn(v) for v in values]
    assert _sql_of(sql_fn, values) == want
    assert _pl_of(pl_fn, values) == want


# --- host key -------------------------------------------------------------------------------
_label = st.text("abcXYZ019-_İΣß", min_size=0, max_size=8)
_octet = st.integers(0, 999).map(str)
_host = st.one_of(
    st.builds(lambda s, d: ".".join([s, *d]), _label, st.lists(_label, max_size=3)),
    st.builds(lambda *o: ".".join(o), _octet, _octet, _octet, _octet),
    _any_text,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.builds(lambda pad, h, up: pad + (h.upper() if up else h) + pad[::-1],
                          st.sampled_from(["", " ", "\t", " \r\n", "\u00a0"]), _host, st.booleans()),
                min_size=1, max_size=8))
@example(["10.0.0.5", "NODE-017.Cluster.Local", "ΑΣ", "İ.x", "1.2.3.4\n", "", "1.2.3"])
def test_host_key_python_sql_and_polars_agree(names):
    _assert_twins(host_key, host_key_sql, host_key_pl, [*names, None])


def test_host_key_keeps_an_address_whole_and_drops_a_domain_and_the_case():
    assert [host_key(h) for h in ("10.0.0.5", " GPU-017.rack3.dc.example.net\n", "DGX-A-12", "1.2.3")] == \
        ["10.0.0.5", "gpu-017", "dgx-a-12", "1"]


# --- PCI id ---------------------------------------------------------------------------------
_hex = st.text("0123456789abcdefABCDEF", min_size=1, max_size=9)
_pci = st.builds(
    lambda pre, dom, bus, dev, fn, pad: f"{pad}{pre}{dom + ':' if dom is not None else ''}{bus}:{dev}"
                                        f"{'.' + fn if fn is not None else ''}{pad}",
    st.sampled_from(["", "PCI:", "pci:", "Pci:", "PCİ:"]), st.none() | _hex, _hex, _hex,
    st.none() | st.sampled_from(list("0123789a")), st.sampled_from(["", " ", "\t", "\n"]))


@settings(max_examples=80, deadline=None)
@given(st.lists(_pci | _any_text, min_size=1, max_size=8))
@example(["00000000:5D:00.0", "PCI:0000:5d:00", "5d:00.0", "000100000:1:2.7", "0001000f:1:2", "GPU 0"])
def test_pci_id_python_sql_and_polars_agree(texts):
    _assert_twins(pci_id, pci_id_sql, pci_id_pl, [*texts, None])


def test_pci_id_spellings_of_one_gpu_are_one_id():
    same = ["00000000:5D:00.0", "0000:5d:00.0", "PCI:0000:5d:00", "5d:00.0", " 0:5D:0 "]
    assert {pci_id(t) for t in same} == {"0000:5d:00.0"} == {pci_id_parts("00000000", "5D", "00")}
    assert pci_id("0001000f:01:02.7") == "1000f:01:02.7"  # a wide domain keeps its digits
    assert [pci_id(t) for t in ("GPU 0", "5d", "0000:5d:00.8", "0000:5d:100.0", "")] == [None] * 5


# --- SQL literals and identifiers -------------------------------------------------------------
_value = st.one_of(
    st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), _any_text,
    st.floats(allow_nan=False, allow_infinity=False),
    st.dates(min_value=date(1, 1, 1)), st.datetimes(min_value=datetime(1, 1, 1)),
)


@settings(max_examples=150, deadline=None)
@given(_value)
@example("it's; DROP TABLE x; --")
@example(0.1)
def test_a_literal_reads_back_as_its_value(value):
    got = CON.execute(f"SELECT {literal(value)}").fetchone()[0]
    assert got == value and type(got) is type(value)


@settings(max_examples=100, deadline=None)
@given(st.lists(_any_text, max_size=5), _any_text)
def test_literals_make_an_in_list(values, probe):
    want = probe in values if values else None  # IN (NULL): matches nothing, not an error
    assert CON.execute(f"SELECT {literal(probe)} IN ({literals(values)})").fetchone()[0] == want


@settings(max_examples=100, deadline=None)
@given(_any_text.filter(lambda s: s.strip() != ""))
def test_an_identifier_names_its_column(name):
    assert CON.execute(f"SELECT 1 AS {ident(name)}").description[0][0] == name


#: Text that Spark and DuckDB read differently unless quoted with care: quotes, backslashes
#: (an escape in Spark), what follows a backslash there, line ends, non-ASCII.
TRICKY = ["it's", "a\\b", "\\", "\\'", "''", "C:\\logs\\n", "x\\u0041", "line\nbreak", "ΑΣ İ 显卡", "", " "]


def test_tricky_text_reads_back_in_duckdb():
    assert list(CON.execute("SELECT " + ", ".join(literal(v) for v in TRICKY)).fetchone()) == TRICKY


@pytest.mark.spark
def test_a_literal_reads_back_as_its_value_in_spark_too():
    pytest.importorskip("pyspark")
    from pipeline.engine import get_engine

    spark = get_engine("spark")
    values = [*TRICKY, None, True, 7, -2**63, 0.1, 1e300, date(2025, 3, 4), datetime(2025, 3, 4, 5, 6, 7, 89)]
    got = spark.rows("SELECT " + ", ".join(f"{literal(v)} AS c{i}" for i, v in enumerate(values)), step="vocab: literals")
    assert list(got[0]) == values
    assert spark.scalar(f"SELECT {literal(TRICKY[1])} IN ({literals(TRICKY)})", step="vocab: in") is True
    # The SQL twins read the same in Spark: the spellings the property tests above start from.
    hosts = ["10.0.0.5", "NODE-017.Cluster.Local", " dgx-a-12\t", "1.2.3", "1.2.3.4.5", "ΑΣ.x", "İ", "a\\b.c", "", None]
    pcis = ["00000000:5D:00.0", "PCI:0000:5d:00", "pci:5d:0", "5d:00.0", " 0001000f:1:2.7\n", "0000:5d:00.8", "GPU 0",
            "x\\0000:5d:00.0", "", None]
    frame = pl.DataFrame({"h": hosts, "p": pcis}, schema={"h": pl.Utf8, "p": pl.Utf8})
    spark.register("vocab_twins", frame)
    got = spark.rows(f"SELECT {host_key_sql('h')}, {pci_id_sql('p')} FROM vocab_twins", step="vocab: twins")
    assert sorted(got, key=repr) == sorted(zip(map(host_key, hosts), map(pci_id, pcis)), key=repr)


def test_values_without_a_literal_raise():
    for bad in (float("nan"), float("inf"), "a\x00b", datetime(2025, 1, 1).astimezone()):
        with pytest.raises(ValueError):
            literal(bad)


# --- possibly-gzipped files ---------------------------------------------------------------------
_line = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FFF, blacklist_categories=("Cs",),
                              blacklist_characters="\x7f\x85\u2028\u2029"), min_size=1, max_size=20)


@settings(max_examples=15, deadline=None)
@given(st.lists(_line, min_size=1, max_size=20), st.booleans(), st.sampled_from(["log.csv", "log.csv.gz", "log"]))
def test_python_and_duckdb_read_the_same_text_gzipped_or_not_whatever_the_name(tmp_path_factory, lines, gz, name):
    path = tmp_path_factory.mktemp("f") / name
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    with open_text(path) as f:
        python = f.read().splitlines()
    sql = (f"SELECT line FROM read_csv({literal(str(path))}, columns={{'line': 'VARCHAR'}}, header=false, "
           f"delim={literal(chr(1))}, quote='', escape='', compression={compression_sql(path)})")
    assert [r[0] for r in CON.execute(sql).fetchall()] == python == lines
    assert read_bytes(path) == (data, None) and read_head(path, 1 << 16)[1] == data[: 1 << 16]


def test_a_damaged_gzip_keeps_what_comes_before_the_break():
    whole = gzip.compress(b"line 1\n" * 500)
    assert gunzip(whole + gzip.compress(b"member 2\n")) == (b"line 1\n" * 500 + b"member 2\n", None)
    assert gunzip(whole + b"\x00" * 9) == (b"line 1\n" * 500, None)  # NUL padding is no damage
    assert "garbage" in gunzip(whole + b"not gzip")[1]
    kept, damage = gunzip(whole[: len(whole) // 2])
    assert "cut short" in damage and (b"line 1\n" * 500).startswith(kept)
    assert gunzip(b"plain\n") == (b"plain\n", None)


# --- no SQL quoting by hand ---------------------------------------------------------------------
#: Modules that still quote SQL by hand, each with the lane that removes it; the test fails
#: when one no longer does, so the list only shrinks (the integrator drops it at the merge).
ALLOWED: dict[str, str] = {}  # file -> why it may still quote by hand (none may)


def _operands(node: ast.AST) -> list[ast.AST]:
    """The operands of a chain of ``+``, leftmost first."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _operands(node.left) + _operands(node.right)
    return [node]


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def hand_quoting(source: str) -> set[int]:
    """Lines that double single quotes by hand or put a value between single quotes in built
    text (an f-string or a ``+`` chain): SQL literals made without :func:`literal`."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace" \
                and [_text(a) for a in node.args] == ["'", "''"]:
            lines.add(node.lineno)
        parts = node.values if isinstance(node, ast.JoinedStr) else \
            _operands(node) if isinstance(node, ast.BinOp) else []
        for a, b, c in zip(parts, parts[1:], parts[2:]):
            if (_text(a) or "").endswith("'") and _text(b) is None and (_text(c) or "").startswith("'"):
                lines.add(node.lineno)
    return lines


def test_hand_quoting_is_found():
    found = hand_quoting("a = f\"x = '{v}'\"\nb = \"'\" + v + \"'\"\nc = v.replace(\"'\", \"''\")\n"
                         "d = f\"x = {literal(v)}\"\ne = \"'\" + v\nf = f'{v} is {w}'\n")
    assert found == {1, 2, 3}


def test_no_sql_quoting_by_hand_outside_vocab():
    found = {}
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith("pipeline/vocab/") and (lines := hand_quoting(path.read_text(encoding="utf-8"))):
            found[rel] = sorted(lines)
    offenders = {f: lines for f, lines in found.items() if f not in ALLOWED}
    assert offenders == {}, f"quote SQL values with pipeline.vocab.sql.literal/literals: {offenders}"
    clean = [f for f in ALLOWED if f not in found]
    assert clean == [], f"no hand quoting left in {clean}: remove them from ALLOWED"
