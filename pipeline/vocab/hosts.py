"""One host name for matching: telemetry folders, log lines, tickets and the inventory
spell the same host differently (``dgx-a-12`` / ``DGX-A-12``, ``node-017`` /
``node-017.cluster.local``).

:func:`host_key` (Python) and :func:`host_key_sql` (DuckDB) give the same key: lower case,
without a trailing domain (everything from the first dot), an IPv4 address kept whole.
Two hosts that differ only in their domain share a key; fleets name hosts uniquely within
a site, so that is the intended match. The stored host is never rewritten: only the
comparison uses the key.
"""

from __future__ import annotations

import re

_IPV4 = re.compile(r"^[0-9]+(\.[0-9]+){3}$")


def host_key(name: str | None) -> str | None:
    """The matching key of a host name: ``'Node-017.Cluster.Local'`` -> ``'node-017'``.

    Examples
    --------
    >>> host_key("DGX-A-12"), host_key("node-017.cluster.local"), host_key("10.0.0.5")
    ('dgx-a-12', 'node-017', '10.0.0.5')
    """
    if name is None:
        return None
    h = name.strip().lower()
    return h if _IPV4.match(h) else h.split(".", 1)[0]


def host_key_sql(expr: str) -> str:
    """DuckDB SQL of :func:`host_key` over the text expression ``expr``."""
    h = f"lower(trim({expr}))"
    return f"(CASE WHEN regexp_full_match({h}, '[0-9]+(\\.[0-9]+){{3}}') THEN {h} ELSE split_part({h}, '.', 1) END)"
