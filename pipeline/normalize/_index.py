"""Per-dimension alias index: exact lookup, phrase scan, fuzzy fallback on one canonical text.

:meth:`AliasIndex.match` codes one text; :meth:`AliasIndex.match_many` codes many at once
with the same result for each, doing the fuzzy step for all of them in one
``rapidfuzz.process.cdist`` call. The matcher uses ``match_many`` on distinct texts and
``match`` in the row-by-row baseline the benchmark compares against.

Scores (0-100): exact whole-text alias 100 (weak alias 80); named inside a longer text 95
(weak 80); several codes named and the dimension's rule picks one 88 (part: the head noun of
an adjacent pair like "GPU fan" 92; not adjacent: 70, review); fuzzy: the rapidfuzz ratio
of the closest alias to a word n-gram or the whole text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

import numpy as np
from rapidfuzz import fuzz, process

from pipeline.normalize.canonical import is_cjk
from pipeline.normalize.taxonomy import Taxonomy

VAGUE = ""  # pseudo code of a phrase that names nothing

S_EXACT, S_WEAK, S_NAMED, S_HEAD, S_PRIORITY, S_AMBIGUOUS = 100.0, 80.0, 95.0, 92.0, 88.0, 70.0
FUZZY_MIN = 75.0  # below this a fuzzy neighbour is no evidence at all
_FUZZY_MIN_LEN = 4
_CHUNK = 2048
_NEGATION = re.compile(r"(?:(?<![a-z])(?:no|not|non|without|never)|未|没有|没|无(?!法))\s*$")
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class Match:
    """A code for one text in one dimension (code None: nothing found)."""

    code: str | None
    score: float
    how: str  # exact, named, head, priority, ambiguous, fuzzy, vague, empty, none


NOTHING = Match(None, 0.0, "none")
EMPTY = Match(None, 0.0, "empty")


class AliasIndex:
    """Aliases of one dimension, ready for exact, scan and fuzzy matching."""

    def __init__(self, tax: Taxonomy, dimension: str):
        self.dimension = dimension
        self.rule = tax.resolve.get(dimension, "priority")
        self.rank = {c: i for i, c in enumerate(tax.priority[dimension])}
        # alias -> (code, strength); later entries never override earlier ones
        table: dict[str, tuple[str, float]] = {}
        for c in tax.codes[dimension].values():
            for a in c.aliases:
                table.setdefault(a, (c.code, S_EXACT))
        if dimension == "symptom":
            for n, c in tax.xid.items():
                table.setdefault(f"xid{n}", (c, S_EXACT))
        for c in tax.codes[dimension].values():
            for a in c.weak:
                table.setdefault(a, (c.code, S_WEAK))
        for a in tax.vague.get(dimension, ()):
            table.setdefault(a, (VAGUE, 0.0))
        self.exact = table
        scan = sorted((a for a in table if len(a) > 1), key=lambda a: (-len(a), a))
        self._scan = re.compile("|".join(_bounded(a) for a in scan)) if scan else None
        self.choices = [a for a in table if len(a) >= _FUZZY_MIN_LEN or (is_cjk(a) and len(a) >= 2)]
        self.choice_codes = [table[a] for a in self.choices]

    # -- one text ---------------------------------------------------------------------
    def match(self, text: str) -> Match:
        """Code one canonical text (exact, scan, then fuzzy with ``process.extractOne``)."""
        first = self._direct(text)
        if first is not None:
            return first
        best_i, best_s = -1, 0.0
        for q in _queries(text):
            hit = process.extractOne(q, self.choices, scorer=fuzz.ratio, score_cutoff=FUZZY_MIN)
            if hit is not None and hit[1] > best_s:
                best_i, best_s = hit[2], hit[1]
        return self._fuzzy(best_i, best_s)

    def match_many(self, texts: Iterable[str]) -> list[Match]:
        """Code many canonical texts: same results as :meth:`match`, fuzzy step batched."""
        texts = list(texts)
        out: list[Match | None] = [self._direct(t) for t in texts]
        pending = [i for i, m in enumerate(out) if m is None]
        queries: dict[str, int] = {}
        per_text = {i: [queries.setdefault(q, len(queries)) for q in _queries(texts[i])] for i in pending}
        best_choice = np.zeros(len(queries), dtype=np.int64)
        best_score = np.zeros(len(queries), dtype=np.float64)
        qs = list(queries)
        for lo in range(0, len(qs) if self.choices else 0, _CHUNK):
            # float64 like extractOne, in chunks to bound memory (queries x aliases)
            scores = process.cdist(qs[lo:lo + _CHUNK], self.choices, scorer=fuzz.ratio,
                                   score_cutoff=FUZZY_MIN, dtype=np.float64, workers=1)
            best_choice[lo:lo + _CHUNK] = scores.argmax(axis=1)
            best_score[lo:lo + _CHUNK] = scores.max(axis=1)
        for i in pending:
            best_i, best_s = -1, 0.0
            for qi in per_text[i]:
                s = float(best_score[qi])
                if s >= FUZZY_MIN and s > best_s:
                    best_i, best_s = int(best_choice[qi]), s
            out[i] = self._fuzzy(best_i, best_s)
        return out  # type: ignore[return-value]

    def suggest(self, text: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best codes for a text by fuzzy similarity to their aliases."""
        found: dict[str, float] = {}
        first = self._direct(text)
        if first is not None and first.code:
            found[first.code] = first.score
        for q in _queries(text) or [text]:
            for alias, s, i in process.extract(q, self.choices, scorer=fuzz.WRatio, limit=20):
                code = self.choice_codes[i][0]
                if code != VAGUE and s > found.get(code, -1):
                    found[code] = round(float(s), 1)
        return sorted(found.items(), key=lambda kv: (-kv[1], self.rank.get(kv[0], 99)))[:k]

    # -- steps ------------------------------------------------------------------------
    def _direct(self, text: str) -> Match | None:
        """Exact or scan result, or None when only fuzzy matching is left."""
        if not text:
            return EMPTY
        hit = self.exact.get(text)
        if hit is not None:
            code, strength = hit
            return Match(None, 0.0, "vague") if code == VAGUE else Match(code, strength, "exact")
        if self._scan is None:
            return None
        hits = []  # (start, end, code, strength)
        for m in self._scan.finditer(text):
            code, strength = self.exact[m.group()]
            if code != VAGUE and not _NEGATION.search(text, 0, m.start()):
                hits.append((m.start(), m.end(), code, strength))
            elif code == VAGUE:
                hits.append((m.start(), m.end(), VAGUE, 0.0))
        named = [h for h in hits if h[2] != VAGUE]
        if not named:
            return Match(None, 0.0, "vague") if hits else None
        strong = [h for h in named if h[3] >= S_EXACT]
        use = strong or named
        codes = list(dict.fromkeys(h[2] for h in use))
        if len(codes) == 1:
            return Match(codes[0], S_NAMED if strong else S_WEAK, "named")
        return self._resolve(text, use, bool(strong))

    def _resolve(self, text: str, hits: list, strong: bool) -> Match:
        cap = S_NAMED if strong else S_WEAK
        if self.rule == "last":
            last = hits[-1]
            prev = hits[-2]
            if prev[2] != last[2] and not text[prev[1]:last[0]].strip():
                return Match(last[2], min(S_HEAD, cap), "head")
            return Match(last[2], S_AMBIGUOUS, "ambiguous")
        code = min((h[2] for h in hits), key=lambda c: self.rank.get(c, len(self.rank)))
        return Match(code, min(S_PRIORITY, cap), "priority")

    def _fuzzy(self, i: int, score: float) -> Match:
        if i < 0:
            return NOTHING
        code, strength = self.choice_codes[i]
        if code == VAGUE:
            return Match(None, 0.0, "vague")
        return Match(code, round(min(score, 99.0) * (1.0 if strength >= S_EXACT else 0.8), 1), "fuzzy")


def _bounded(alias: str) -> str:
    """Regex for an alias; ASCII ends must not run into other letters or digits."""
    head = r"(?<![a-z0-9])" if alias[0].isascii() and alias[0].isalnum() else ""
    tail = r"(?![a-z0-9])" if alias[-1].isascii() and alias[-1].isalnum() else ""
    return head + re.escape(alias) + tail


def _queries(text: str) -> list[str]:
    """What fuzzy matching compares with aliases: the whole (short) text and word n-grams."""
    out = []
    if len(text) <= 40:
        out.append(text)
    words = _WORD.findall(text)
    for n in (1, 2, 3):
        for i in range(len(words) - n + 1):
            q = " ".join(words[i:i + n])
            if len(q) >= _FUZZY_MIN_LEN and q not in out:
                out.append(q)
    return out
