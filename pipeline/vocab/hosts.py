"""One host name for matching: telemetry folders, log lines, tickets and the inventory
spell the same host differently (``dgx-a-12`` / ``DGX-A-12``, ``node-017`` /
``node-017.cluster.local``).

:func:`host_key` (Python), :func:`host_key_sql` (DuckDB SQL) and :func:`host_key_pl` (a
polars expression) give the same key (the SQL reads the same in DuckDB and Spark): without surrounding blanks, ASCII letters in lower case
(:mod:`pipeline.vocab._text` says why only ASCII), without a trailing domain (everything from
the first dot), an IPv4 address kept whole. Two hosts that differ only in their domain share a
key; fleets name hosts uniquely within a site, so that is the intended match. The stored host
is never rewritten: only the comparison uses the key.
"""

from __future__ import annotations

import re

import polars as pl

from pipeline.vocab._text import folded, folded_pl, folded_sql, matches_sql

_IPV4 = r"[0-9]+(\.[0-9]+){3}"
_IPV4_RE = re.compile(_IPV4)


def host_key(name: str | None) -> str | None:
    """The matching key of a host name: ``'Node-017.Cluster.Local'`` -> ``'node-017'``.

    Examples
    --------
    >>> host_key("DGX-A-12"), host_key("node-017.cluster.local"), host_key("10.0.0.5")
    ('dgx-a-12', 'node-017', '10.0.0.5')
    """
    if name is None:
        return None
    h = folded(name)
    return h if _IPV4_RE.fullmatch(h) else h.split(".", 1)[0]


def host_key_sql(expr: str) -> str:
    """SQL of :func:`host_key` over the text expression ``expr`` (DuckDB and Spark)."""
    h = folded_sql(expr)
    return f"(CASE WHEN {matches_sql(h, _IPV4)} THEN {h} ELSE split_part({h}, '.', 1) END)"


def host_key_pl(expr: pl.Expr) -> pl.Expr:
    """Polars expression of :func:`host_key` over the text expression ``expr``."""
    h = folded_pl(expr)
    return pl.when(h.str.contains(f"^{_IPV4}$")).then(h).otherwise(h.str.split_exact(".", 1).struct.field("field_0"))
