"""SQL text quoting, the one place a Python value becomes SQL text.

Stages pass values to SQL either as engine parameters or through :func:`literal`; nothing
else writes quotes into SQL (a test greps for it). Identifiers go through :func:`ident`.
Both follow standard SQL, which DuckDB and Spark SQL (with ANSI quoting of literals) accept.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime


def literal(value: object) -> str:
    """``value`` as a SQL literal: text single-quoted with quotes doubled, numbers as written,
    ``None`` as NULL, dates and timestamps typed.

    Examples
    --------
    >>> literal("it's"), literal(None), literal(3), literal(True)
    ("'it''s'", 'NULL', '3', 'TRUE')
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{value!r} has no SQL literal")
        return repr(value)
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value:%Y-%m-%d %H:%M:%S.%f}'"
    if isinstance(value, date):
        return f"DATE '{value:%Y-%m-%d}'"
    text = str(value)
    if "\x00" in text:
        raise ValueError("a SQL text literal cannot hold a NUL character")
    return "'" + text.replace("'", "''") + "'"


def literals(values: Iterable[object]) -> str:
    """A comma-separated list of literals for ``IN (...)``; ``NULL`` when there are none
    (so ``x IN (NULL)`` matches nothing rather than being a syntax error).

    >>> literals(["a", "b'c"])
    "'a', 'b''c'"
    """
    out = ", ".join(literal(v) for v in values)
    return out or "NULL"


def ident(name: str) -> str:
    """A double-quoted identifier, inner double quotes doubled.

    >>> ident("batch")
    '"batch"'
    """
    if "\x00" in name:
        raise ValueError("a SQL identifier cannot hold a NUL character")
    return '"' + name.replace('"', '""') + '"'
