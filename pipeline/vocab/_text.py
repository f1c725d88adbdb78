"""The text folding the vocabulary's twins share: trim ASCII blanks, lower-case ASCII letters;
and a whole-text regular-expression match in the SQL both DuckDB and Spark read.

Only ASCII: Python, DuckDB and polars fold the rest of Unicode differently (``İ``, a final
``Σ``, letters newer than one engine's tables), so wider folding would make twins disagree;
host names and PCI ids are ASCII anyway.
"""

from __future__ import annotations

import string

import polars as pl

from pipeline.vocab.sql import literal

#: Trimmed from both ends: space, tab, CR, LF (a cell's or a log field's stray blanks).
BLANKS = " \t\r\n"
_FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def folded(text: str) -> str:
    """``text`` without surrounding blanks, its ASCII letters in lower case."""
    return text.strip(BLANKS).translate(_FOLD)


def folded_sql(expr: str) -> str:
    """SQL of :func:`folded` (DuckDB and Spark)."""
    blanks = " || ".join(f"chr({ord(c)})" for c in BLANKS)
    return (f"translate(trim(BOTH {blanks} FROM {expr}), "
            f"{literal(string.ascii_uppercase)}, {literal(string.ascii_lowercase)})")


def matches_sql(expr: str, pattern: str) -> str:
    """SQL: whether all of ``expr`` matches the regular expression ``pattern``, written with
    what DuckDB and Spark share (``regexp_extract``; each has its own match function)."""
    return f"(regexp_extract({expr}, {literal(f'^({pattern})$')}, 1) <> '')"


def folded_pl(expr: pl.Expr) -> pl.Expr:
    """Polars expression of :func:`folded`."""
    return expr.str.strip_chars(BLANKS).str.replace_many(list(string.ascii_uppercase), list(string.ascii_lowercase))
