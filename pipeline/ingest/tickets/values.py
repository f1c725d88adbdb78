"""What a ticket export's values say about a column, whatever its header says.

A header can lie or say nothing (``Resolution`` holding ``Done``, ``Asset`` holding host
names, ``No.`` holding ticket numbers). :func:`profile` reads a sample of a column's values
and says how well they fit each kind of ticket field: dates look like dates, serials like
serials, host names like host names (and match the inventory when one is known), ticket ids
are short and distinct, statuses come from a workflow's few words, and free text is text.
The layout recogniser (:mod:`pipeline.ingest.tickets.layout`) weighs these fits against the
header's words.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime

from pipeline.vocab.hosts import host_key
from pipeline.ingest.tickets.columns import cell_text, clean_serial, parse_when

#: Values read per column: enough to judge, few enough to be instant on any export.
SAMPLE_ROWS = 200

KINDS = ("id", "date", "serial", "host", "slot", "status", "text")


@dataclass(frozen=True)
class Known:
    """The inventory's hosts (as :func:`host_key`) and serials: values found there are
    strong evidence whatever the header says."""

    hosts: frozenset[str] = frozenset()
    serials: frozenset[str] = frozenset()

    @classmethod
    def of(cls, hosts, serials) -> Known:
        return cls(frozenset(k for h in hosts if (k := host_key(cell_text(h))) is not None),
                   frozenset(s for v in serials if (s := clean_serial(v)) is not None))


@dataclass
class Profile:
    """How a column's sampled values fit each kind: the share of non-empty values that fit."""

    n: int = 0
    fits: dict[str, float] = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)
    #: Share of the values found among the inventory's hosts / serials (None: no inventory).
    known_host: float | None = None
    known_serial: float | None = None

    def fit(self, kind: str) -> float | None:
        """None when the column had no value to judge by."""
        return self.fits.get(kind, 0.0) if self.n else None


def values_of(cell: object) -> list:
    """A cell's values: a cell from a list of part swaps holds one per swap."""
    if isinstance(cell, list):
        return [v for v in cell if cell_text(v) is not None]
    return [] if cell_text(cell) is None else [cell]


def profile(cells: list, known: Known | None = None) -> Profile:
    """The fits of one column's sampled cells (see :data:`KINDS`)."""
    values = [v for c in cells[:SAMPLE_ROWS] for v in values_of(c)]
    texts = [cell_text(v) for v in values]
    n = len(values)
    prof = Profile(n=n, samples=list(dict.fromkeys(t for t in texts if t))[:3])
    if not n:
        return prof
    distinct = len(set(texts)) / n
    judged: dict[tuple[type, str], float] = {}  # a column repeats its values: judge each once
    dates = []
    for v, t in zip(values, texts):
        if (type(v), t) not in judged:
            judged[type(v), t] = _is_date(v, t)
        dates.append(judged[type(v), t])
    fits = {
        "id": sum(_is_id(t) for t in texts) / n * min(1.0, distinct / 0.9),
        "date": sum(dates) / n,
        "serial": sum(_is_serial(t) and d < 1 for t, d in zip(texts, dates)) / n,
        "host": sum(_is_host(t) for t in texts) / n,
        "slot": sum(_is_slot(v, t) for v, t in zip(values, texts)) / n,
        "text": sum(_is_text(t) and d < 1 for t, d in zip(texts, dates)) / n,
    }
    workflow = sum(bool(_WORKFLOW.match(_canon(t))) for t in texts) / n
    few = len(set(texts)) <= max(3, n // 4) and max(len(t) for t in texts) <= 40
    fits["status"] = max(workflow, 0.8 if few and fits["text"] > 0.5 else 0.0)
    fits["workflow"] = workflow
    fits["ip"] = sum(bool(_IPV4.match(t)) for t in texts) / n
    prof.fits = fits
    if known is not None and known.hosts:
        prof.known_host = sum(host_key(t) in known.hosts for t in texts) / n
    if known is not None and known.serials:
        prof.known_serial = sum(clean_serial(t) in known.serials for t in texts) / n
    return prof


def agree(a: list, b: list) -> float | None:
    """Share of rows where two columns hold the same value (dates: the same day), among the
    rows where both hold one; None when no row holds both. Two columns that agree are one
    field exported twice (ServiceNow's Opened and Created), not rivals."""
    both = [(x, y) for x, y in zip(a, b) if values_of(x) and values_of(y)]
    if not both:
        return None
    same = 0
    for x, y in both:
        tx, ty = cell_text(x), cell_text(y)
        if tx == ty or clean_serial(tx) == clean_serial(ty):
            same += 1
            continue
        try:
            dx, dy = parse_when(x, "UTC"), parse_when(y, "UTC")
        except (ValueError, OverflowError, TypeError):
            continue
        same += dx is not None and dy is not None and abs((dx - dy).total_seconds()) <= 86400
    return same / len(both)


# -- the kinds --------------------------------------------------------------------

def _canon(t: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", t).strip().lower())


#: The words of ticket workflows: states and resolution codes, not what was observed or done.
_WORKFLOW = re.compile(
    r"^(?:not\s+)?(?:new|open|opened|reopened|closed|close|resolved|done|fixed|solved|pending|on hold|in progress|"
    r"work in progress|assigned|active|cancel+ed|duplicate|declined|incomplete|unresolved|won'?t (?:fix|do)|"
    r"cannot reproduce|not reproducible|awaiting \w+|waiting for \w+|completed?|rejected|approved|shipped|"
    r"已?关闭|已?解决|已?完成|处理中|待处理|已受理|已取消|已驳回|挂起|新建|已?關閉|已?解決|處理中|待處理|已結案|結案)"
    r"(?:\s*[(（][^)）]*[)）])?$")
#: What every date spelling parse_when reads has somewhere: 2025-03-05, 05/03/25, 5.3.2025,
#: 2025年3月, 20250305, 05/Mar/25, Mar 5 (a cheap test before the costly one).
_DATE_SHAPE = re.compile(r"\d{1,4}\s*[-/.年]\s*\d|\d{8}|\d\s*[-/ ]?\s*[A-Za-z]{3}|[A-Za-z]{3,9}\.?\s+\d")
_ID = re.compile(r"^\w[\w\-./#:]{0,39}$")
_SERIAL = re.compile(r"^[A-Z0-9][A-Z0-9\-]{5,29}$")
_SCI = re.compile(r"^\d\.\d+E\+\d+$")
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+)*$")
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_SLOT = re.compile(r"^(?:gpu|slot|card|卡|槽位?|位置|no\.?|#)?\s*[#＃]?\s*(\d{1,2})\s*(?:号|號|卡|槽)?(?:卡|槽)?$", re.I)
_SLOT_CN = re.compile(r"^第\s*(\d{1,2})\s*(?:张|張|块|塊|号|號)?\s*(?:卡|槽|块|塊)$")


def _is_id(t: str) -> bool:
    """One short token (``INC0012345``, ``OPS-4711``, ``工单-17``), not words or a date."""
    return bool(_ID.match(t)) and not re.fullmatch(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}.*", t)


def _is_date(v: object, t: str) -> float:
    """1 for a date, 0.3 for bare digits that could be an epoch (or a 13-digit serial), else 0."""
    if isinstance(v, (datetime, date)):
        return 1.0
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        # A number is a date as an Excel day number, or perhaps as epoch (milli)seconds.
        return 1.0 if 20000 <= v < 80000 else 0.7 if 1e9 <= v < 1e10 or 1e12 <= v < 1e13 else 0.0
    if re.fullmatch(r"\d+(\.\d+)?", t) and not isinstance(v, (int, float)):
        try:
            return 0.3 if parse_when(t, "UTC") else 0.0
        except (ValueError, OverflowError):
            return 0.0
    # A date has a month name, a weekday and AM/PM at most: more words are a sentence.
    if len(t) > 40 or not _DATE_SHAPE.search(t) or len(re.findall(r"[^\W\d_]{2,}", t)) > 3:
        return 0.0
    for dayfirst in (False, True):  # the order is the point's, decided later over the whole column
        try:
            return 1.0 if parse_when(v, "UTC", dayfirst=dayfirst) else 0.0
        except (ValueError, OverflowError):
            continue
    return 0.0


def _is_serial(t: str) -> bool:
    if len(t) > 40:
        return False
    s = clean_serial(t) or ""
    if _SCI.match(s):
        return True
    stripped = re.sub(r"^(?:s/?n|serial(?:\s*(?:no|number))?)\s*[:：#]?\s*", "", t.strip().strip("'\""), flags=re.I)
    return (bool(_SERIAL.match(s)) and sum(c.isdigit() for c in s) >= 3
            and not any(c.islower() for c in stripped) and " " not in stripped.strip())


def _is_host(t: str) -> bool:
    if _IPV4.match(t):
        return True
    return (len(t) <= 253 and bool(_HOST.match(t)) and any(c.isalpha() for c in t)
            and any(c.isdigit() or c in "-." for c in t))


def _is_slot(v: object, t: str) -> bool:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v).is_integer() and 0 <= v <= 31
    s = unicodedata.normalize("NFKC", t).strip()
    m = _SLOT.match(s) or _SLOT_CN.match(s)
    return bool(m) and int(m.group(1)) <= 31


def _is_text(t: str) -> bool:
    """Words: letters (Latin or CJK), not a lone code-like token such as a serial or host."""
    if not re.search(r"[^\W\d_]", t):
        return False
    if " " not in t.strip() and not re.search(r"[\u3400-\u9fff]", t):
        return not (any(c.isdigit() for c in t) and len(t) >= 6)
    return True
