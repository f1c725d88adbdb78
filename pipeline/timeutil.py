"""Local wall-clock times to UTC, the one conversion every ingest stage needs.

Logs print local time without a zone. Across a DST change an hour repeats (fall back: the
first occurrence is taken) and an hour is skipped (spring forward: such a time cannot
exist, it is shifted forward like a clock would be). Neither raises.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import polars as pl


def local_to_utc_expr(expr: pl.Expr, tz: str) -> pl.Expr:
    """A polars expression turning naive local datetimes in ``tz`` into naive UTC."""
    if tz in ("UTC", "Etc/UTC", "Z"):
        return expr
    # non_existent='null' then a +1h retry gives the clock-forward answer for skipped times.
    first = expr.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
    shifted = (expr + pl.duration(hours=1)).dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
    return (
        pl.coalesce(first, shifted)
        .dt.convert_time_zone("UTC")
        .dt.replace_time_zone(None)
    )


def local_to_utc(ts: datetime, tz: str) -> datetime:
    """One naive local time to naive UTC; an aware time is just converted."""
    if ts.tzinfo is not None:
        return ts.astimezone(timezone.utc).replace(tzinfo=None)
    zone = ZoneInfo(tz)
    aware = ts.replace(tzinfo=zone, fold=0)
    # A skipped time does not round-trip: move it forward by the gap, as a clock would.
    roundtrip = aware.astimezone(timezone.utc).astimezone(zone).replace(tzinfo=None)
    if roundtrip != ts:
        aware = (ts + timedelta(hours=1)).replace(tzinfo=zone, fold=0)
    return aware.astimezone(timezone.utc).replace(tzinfo=None)


def parse_datetime(text: str | None, tz: str = "UTC", *, dayfirst: bool = False) -> datetime | None:
    """Parse a date or datetime in common forms; zone-less ones are read in ``tz``.

    Returns naive UTC, or None for empty text. Raises ValueError when unreadable.
    """
    if text is None:
        return None
    s = str(text).strip()
    if not s:
        return None
    s2 = s.replace("/", "-").replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(s2)
    except ValueError:
        dt = None
        fmts = ["%d-%m-%Y %H:%M:%S", "%d-%m-%Y %H:%M", "%d-%m-%Y", "%m-%d-%Y %H:%M:%S", "%m-%d-%Y %H:%M", "%m-%d-%Y"]
        if not dayfirst:
            fmts = fmts[3:] + fmts[:3]
        for fmt in fmts + ["%Y%m%d", "%Y%m%d %H%M%S", "%d.%m.%Y", "%d.%m.%Y %H:%M"]:
            try:
                dt = datetime.strptime(s2, fmt)
                break
            except ValueError:
                continue
        if dt is None:
            raise ValueError(f"unreadable date/time {s!r}") from None
    return local_to_utc(dt, tz)
