"""SQL text quoting, the one place a Python value becomes SQL text.

Stages pass values to SQL either as engine parameters or through :func:`literal`; nothing
else writes quotes into SQL (tests/test_vocab.py parses every module for it). A literal reads
back as its value in DuckDB and in Spark SQL alike: quotes are doubled (standard SQL, which
both accept), and a backslash, which Spark reads as the start of an escape (``'a\\b'`` is
``a`` and a backspace there), is written ``chr(92)`` in a ``concat``. Identifiers go through
:func:`ident` (double quotes: DuckDB's; an engine's dialect has its own).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import date, datetime


def literal(value: object) -> str:
    """``value`` as a SQL literal: text single-quoted with quotes doubled, integers as written,
    floats as DOUBLE, ``None`` as NULL, dates and (naive UTC) timestamps typed. Reading the
    literal back gives ``value`` (a property test checks it in DuckDB).

    Examples
    --------
    >>> literal("it's"), literal(None), literal(3), literal(True), literal(0.5)
    ("'it''s'", 'NULL', '3', 'TRUE', '0.5e0')
    >>> literal("C:" + chr(92) + "logs")
    "concat('C:', chr(92), 'logs')"
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no SQL literal")
        text = repr(float(value))
        # An exponent makes it a DOUBLE: a bare 0.1 is DECIMAL(1,1) in DuckDB and Spark.
        return text if "e" in text else text + "e0"
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            raise ValueError(f"{value!r} has a time zone; SQL timestamps here are naive UTC (convert first)")
        return f"TIMESTAMP '{value.isoformat(sep=' ', timespec='microseconds')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    text = str(value)
    if "\x00" in text:
        raise ValueError("a SQL text literal cannot hold a NUL character")
    parts = ["'" + part.replace("'", "''") + "'" for part in text.split("\\")]
    return parts[0] if len(parts) == 1 else "concat(" + ", chr(92), ".join(parts) + ")"


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
