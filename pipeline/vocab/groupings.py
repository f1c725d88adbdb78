"""What fleet statistics can be grouped by: the lifetime columns and the calendar periods.

The config checks its groupings (``stats.afr_by``, ``survival_by``, ``compare_by``) against
these names when it is loaded, and the statistics group by them, so a misspelt grouping is
an error before the night starts rather than in the stats stage hours later.
"""

from __future__ import annotations

#: Columns of every GPU lifetime that statistics group by.
GROUP_COLUMNS = ("model", "vendor", "site", "host", "slot", "batch")
#: ``by`` names that split time rather than GPUs (``period`` means month) -> their unit.
PERIODS = {"month": "month", "quarter": "quarter", "period": "month"}


def grouping_problem(by: str, *, periods: bool) -> str | None:
    """Why ``by`` (columns joined by commas: ``"model,batch"``) is no grouping, or None.

    ``periods``: whether a calendar period may split time in this grouping (one at most).

    >>> grouping_problem("model,quarter", periods=True) is None, grouping_problem("modle", periods=False)
    (True, "unknown column 'modle' (choose from model, vendor, site, host, slot, batch)")
    """
    names = [c.strip() for c in by.split(",")]
    allowed = [*GROUP_COLUMNS, *(PERIODS if periods else ())]
    for c in names:
        if c not in allowed:
            return f"unknown column {c!r} (choose from {', '.join(allowed)})"
    if len(set(names)) < len(names):
        return "a column named twice"
    if sum(c in PERIODS for c in names) > 1:
        return "one time period at most (month or quarter)"
    return None
