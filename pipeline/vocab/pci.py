"""One spelling of a GPU's PCI address: nvidia-smi writes ``00000000:3B:00.0``, the kernel
``PCI:0000:3b:00``, lspci ``3b:00.0``; joins between telemetry, kernel logs and the driver's
own GPU map need them equal.

:func:`pci_id` (Python), :func:`pci_id_sql` (DuckDB SQL) and :func:`pci_id_pl` (a polars
expression) give the same canonical id, the Linux bus id ``dddd:bb:dd.f``: lower case, the
domain with at least four hex digits (``00000000`` -> ``0000``; a wider domain keeps its
significant digits), bus and device two digits, the function ``0`` when not written. Read:
optional blanks around, an optional ``PCI:`` prefix in any (ASCII) case, an optional domain (1-8 hex
digits, elided by lspci), bus and device (1-2 hex digits each), an optional ``.f`` (0-7).
Anything else is not a PCI id: None (SQL NULL), never a guess.
"""

from __future__ import annotations

import re

import polars as pl

from pipeline.vocab._text import folded, folded_pl, folded_sql, matches_sql
from pipeline.vocab.sql import literal

#: The accepted forms, matched against the folded text (:mod:`pipeline.vocab._text`); groups: domain, bus, device, function.
PATTERN = r"(?:pci:)?(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?"
_RE = re.compile(PATTERN)


def pci_id_parts(domain: str | None, bus: str, device: str, function: str | None = None) -> str:
    """The canonical id from its parts as a pattern matched them (hex text).

    >>> pci_id_parts("00000000", "3B", "0")
    '0000:3b:00.0'
    """
    dom = (domain or "").lstrip("0").lower()
    return f"{dom.rjust(4, '0')}:{bus.lower().rjust(2, '0')}:{device.lower().rjust(2, '0')}.{function or '0'}"


def pci_id(text: str | None) -> str | None:
    """The canonical PCI id of ``text``, or None when it is not one.

    Examples
    --------
    >>> pci_id("00000000:5D:00.0"), pci_id("PCI:0000:5d:00"), pci_id("5d:00.0"), pci_id("GPU 0")
    ('0000:5d:00.0', '0000:5d:00.0', '0000:5d:00.0', None)
    """
    if text is None:
        return None
    m = _RE.fullmatch(folded(text))
    return pci_id_parts(*m.groups()) if m else None


def pci_id_sql(expr: str) -> str:
    """SQL of :func:`pci_id` over the text expression ``expr`` (NULL when not a PCI id;
    DuckDB and Spark)."""
    s = folded_sql(expr)
    pattern = literal(f"^{PATTERN}$")

    def part(i: int) -> str:
        return f"regexp_extract({s}, {pattern}, {i})"

    dom = f"trim(LEADING '0' FROM {part(1)})"
    return (f"(CASE WHEN {matches_sql(s, PATTERN)} THEN "
            f"(CASE WHEN length({dom}) > 4 THEN {dom} ELSE lpad({dom}, 4, '0') END) || ':' || "
            f"lpad({part(2)}, 2, '0') || ':' || lpad({part(3)}, 2, '0') || '.' || "
            f"coalesce(nullif({part(4)}, ''), '0') END)")


def pci_id_pl(expr: pl.Expr) -> pl.Expr:
    """Polars expression of :func:`pci_id` over the text expression ``expr`` (null when not a PCI id)."""
    g = folded_pl(expr).str.extract_groups(f"^{PATTERN}$")
    dom = g.struct.field("1").fill_null("").str.strip_chars_start("0")
    return (pl.when(g.struct.field("2").is_not_null())
            .then(pl.concat_str(
                pl.when(dom.str.len_chars() > 4).then(dom).otherwise(dom.str.pad_start(4, "0")), pl.lit(":"),
                g.struct.field("2").str.pad_start(2, "0"), pl.lit(":"), g.struct.field("3").str.pad_start(2, "0"),
                pl.lit("."), g.struct.field("4").fill_null("0")))
            .otherwise(None))
