"""Per-dimension alias index: exact lookup, phrase scan, fuzzy matching on one canonical text.

:meth:`AliasIndex.match` codes one text; :meth:`AliasIndex.match_many` codes many at once
with the same result for each, doing the fuzzy step for all of them in one
``rapidfuzz.process.cdist`` call per chunk. The matcher uses ``match_many`` on distinct
texts and ``match`` in the row-by-row baseline the benchmark compares against.

A text is matched in two steps. First the plan: the whole text as an alias (exact), else
every alias named inside it (a regex of all aliases, longest first; ASCII aliases only at
word boundaries; a name right after "no"/"not"/未/没有 does not count), leaving the fuzzy
queries: word n-grams the scan did not explain (typos: "correctble ECC errs"), or, when
nothing strong was named, the whole text and all its word n-grams. Then the finish: fuzzy
hits merged with the named ones and one code chosen.

Scores (0-100): exact whole-text alias 100; named inside a longer text 95; several codes
named and the dimension's rule picks one 88 (part: the head noun of an adjacent pair like
"GPU fan" 92; not adjacent: 70, review); a fuzzy hit caps the score at its rapidfuzz ratio;
weak aliases 80 (review, but the first suggestion).
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple

import numpy as np
from rapidfuzz import fuzz, process

from pipeline.normalize.canonical import is_cjk
from pipeline.normalize.taxonomy import Taxonomy

VAGUE = ""  # pseudo code of a phrase that names nothing

S_EXACT, S_WEAK, S_NAMED, S_HEAD, S_PRIORITY, S_AMBIGUOUS = 100.0, 80.0, 95.0, 92.0, 88.0, 70.0
S_FIRST = 90.0  # several symptoms named, the leading one taken
FUZZY_MIN = 75.0  # below this a fuzzy neighbour is no evidence at all
FUZZY_EXTEND = 88.0  # a typo beside named aliases must be this close to count
_CHUNK = 2048
# "no ...", "not ...", 未/没有/冇/唔 right before a name; "no hardware replaced", "without parts
# replaced": one hardware word may sit between
_NEGATION = re.compile(r"(?:(?<![a-z])(?:(?:no|nothing|without)(?:\s+(?:hardware|hw|parts?|gpus?|cards?|components?|modules?))?"
                       r"|not|non|never)|未|没有|没|无(?!法)|冇|唔)\s*$")
_WORD = re.compile(r"[a-z0-9]+")
_TOKEN = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
EXPLAINED = -1.0  # the strength a negated or announced hit keeps: explained, not evidence
NEG, TODO = "neg", "todo"  # a hit negated ("no ECC errors"), an action announced but not done


def _marker_re(words: Iterable[str], where: str, gap: bool = True) -> re.Pattern | None:
    """Markers at the end (``before``: right before a hit) or the start (``after``: right after
    a hit) of a stretch of canonical text, one word between them and the hit when ``gap``;
    ``any``: anywhere."""
    words = sorted(set(words), key=len, reverse=True)
    if not words:
        return None
    alt = "|".join(re.escape(w) for w in words)
    gap = r"(?:\s*(?:[a-z0-9]+|[\u3400-\u9fff]{1,2}))?" if gap else ""
    if where == "before":
        return re.compile(rf"(?<![a-z0-9])(?:{alt}){gap}\s*$")
    if where == "after":
        return re.compile(rf"^{gap}\s*(?:{alt})(?![a-z0-9])")
    return re.compile(rf"(?<![a-z0-9])(?:{alt})(?![a-z0-9])")


def tokens_between(text: str, start: int, end: int) -> int:
    """Words (a Chinese character is one) in ``text[start:end]``: how far apart two names are."""
    return len(_TOKEN.findall(text, start, end)) if end > start else 0


class Match(NamedTuple):
    """A code for one text in one dimension (code None: nothing found)."""

    code: str | None
    score: float
    how: str  # exact, named, head, priority, ambiguous, fuzzy, weak, vague, empty, none, learned, context


NOTHING = Match(None, 0.0, "none")
EMPTY = Match(None, 0.0, "empty")


class _Plan(NamedTuple):
    text: str
    done: Match | None
    hits: tuple  # ((start, end, code, strength), ...) strong and weak named aliases, vague spans
    queries: tuple  # ((start, end, text), ...) to match fuzzily
    extend: bool  # queries only refine strong hits


class AliasIndex:
    """Aliases of one dimension, ready for exact, scan and fuzzy matching."""

    def __init__(self, tax: Taxonomy, dimension: str):
        self.dimension = dimension
        self.rule = tax.resolve.get(dimension, "priority")
        self.rank = {c: i for i, c in enumerate(tax.priority[dimension])}
        table: dict[str, tuple[str, float]] = {}  # alias -> (code, strength); first claim wins
        for c in tax.codes[dimension].values():
            for a in c.aliases:
                table.setdefault(a, (c.code, S_EXACT))
        if dimension == "symptom":
            for n, c in tax.xid.items():
                table.setdefault(f"xid{n}", (c, S_EXACT))
        fuzzy_too = set(table)
        for c in tax.codes[dimension].values():
            for a in c.weak:
                table.setdefault(a, (c.code, S_WEAK))
                fuzzy_too.add(a)
        for a in tax.vague.get(dimension, ()):
            table.setdefault(a, (VAGUE, 0.0))
            fuzzy_too.add(a)
        self.exact = table
        self.outranks = tax.outranks.get(dimension, ())
        # composed phrases: a verb regex and an object regex per spec, joined at scan time
        self._composed = [(c.code, _trie_regex(list(c.verbs)), _trie_regex(list(c.objects)), c.verb_first)
                          for c in tax.compose.get(dimension, ())]
        mk = tax.markers
        only_actions = dimension == "action"
        # announcing MONITOR or NONE ("will keep under observation") is doing it
        self._passive = tax.no_context.get("action", frozenset()) if only_actions else frozenset()
        self._todo_before = _marker_re(mk.get("not_done_before", ()), "before") if only_actions else None
        self._todo_after = _marker_re(mk.get("not_done_after", ()), "after") if only_actions else None
        # "gpu reset, pending cleared": a device's state word ("Remapped Rows Pending") and its
        # new value follow the action; it was done
        self._state_after = _marker_re(mk.get("done_state_after", ()), "after") if only_actions else None
        self._cause_follows = _marker_re(mk.get("cause_follows", ()), "any")
        self._cause_precedes = _marker_re(mk.get("cause_precedes", ()), "any")
        self._generic = frozenset(mk.get("generic_nouns", ()))
        # a swap to test ("to see if it follows") replaces nothing yet
        self._trial = _marker_re(mk.get("trial", ()), "any") if only_actions else None
        # a test whose result is told has decided: what was replaced after that result was done
        # ("對調，不良跟隨槽位，更換槽位2轉接卡後正常")
        self._trial_verdict = _marker_re(mk.get("trial_verdict", ()), "any") if only_actions else None
        # "Replacement GPU and riser on order": a replacement named as a noun while parts are
        # awaited anywhere in the text is not done yet (CODING-GUIDE 13)
        self._awaiting = _marker_re(mk.get("awaiting", ()), "any") if only_actions else None
        self._noun_replace = frozenset(mk.get("noun_replace", ()))
        self._replaced = tax.guide.replaced if tax.guide is not None and only_actions else frozenset()
        self._scan = _trie_regex([a for a in table if len(a) > 1])
        self.choices = [a for a in table if a in fuzzy_too and (len(a) >= 3 or (is_cjk(a) and len(a) >= 2))]
        self.choice_codes = [table[a] for a in self.choices]
        # A typo changes letters, not the number of words: "nvidia smi" is no typo of "nvidia smi r".
        self._groups: dict[int, tuple[list[str], list[tuple[str, float]]]] = {}
        for a in self.choices:
            names, codes = self._groups.setdefault(_nwords(a), ([], []))
            names.append(a)
            codes.append(table[a])

    # -- one text, many texts -----------------------------------------------------------
    def match(self, text: str) -> Match:
        """Code one canonical text; fuzzy queries go one by one to ``process.extractOne``."""
        plan = self._plan(text)
        if plan.done is not None:
            return plan.done
        best = []
        for _, _, q in plan.queries:
            names, codes = self._groups.get(_nwords(q), ((), ()))
            hit = process.extractOne(q, names, scorer=fuzz.ratio, score_cutoff=FUZZY_MIN) if names else None
            best.append((codes[hit[2]], float(hit[1]), hit[0]) if hit is not None else None)
        return self._finish(plan, best)

    def match_many(self, texts: Iterable[str]) -> list[Match]:
        """Code many canonical texts: the results of :meth:`match`, fuzzy step batched."""
        plans = [self._plan(t) for t in texts]
        queries: dict[str, int] = {}
        for p in plans:
            if p.done is None:
                for _, _, q in p.queries:
                    queries.setdefault(q, len(queries))
        best: list = [None] * len(queries)
        by_n: dict[int, list[str]] = {}
        for q in queries:
            by_n.setdefault(_nwords(q), []).append(q)
        for n, qs in by_n.items():
            if n not in self._groups:
                continue
            names, codes = self._groups[n]
            for lo in range(0, len(qs), _CHUNK):
                # float64 like extractOne, in chunks to bound memory (queries x aliases)
                scores = process.cdist(qs[lo:lo + _CHUNK], names, scorer=fuzz.ratio,
                                       score_cutoff=FUZZY_MIN, dtype=np.float64, workers=1)
                arg = scores.argmax(axis=1)
                top = scores[np.arange(len(arg)), arg]
                for q, j, sc in zip(qs[lo:lo + _CHUNK], arg, top):
                    if sc >= FUZZY_MIN:
                        best[queries[q]] = (codes[j], float(sc), names[j])
        return [p.done if p.done is not None else self._finish(p, [best[queries[q]] for _, _, q in p.queries])
                for p in plans]

    def suggest(self, text: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best codes for a text by fuzzy similarity to their aliases."""
        found: dict[str, float] = {}
        first = self.match(text)
        if first.code:
            found[first.code] = first.score
        words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text)]
        for q in _ngrams(words) or [(0, 0, text)]:
            for _, s, i in process.extract(q[2], self.choices, scorer=fuzz.WRatio, limit=20):
                code = self.choice_codes[i][0]
                if code != VAGUE and s > found.get(code, -1):
                    found[code] = round(float(s), 1)
        return sorted(found.items(), key=lambda kv: (-kv[1], self.rank.get(kv[0], 99)))[:k]

    def scan(self, text: str) -> list[tuple[int, int, str, float, str]]:
        """Every alias named in a canonical text: ``(start, end, code, strength, status)``,
        status ``neg`` after "no"/"not"/未, ``todo`` for an action announced, not done
        ("need to replace", "RMA pending", 待更换), else empty; vague phrases have code ``""``."""
        out = []
        trial = self._trial is not None and self._trial.search(text) is not None
        told = self._trial_verdict.search(text) if trial and self._trial_verdict is not None else None
        awaiting = self._awaiting is not None and self._awaiting.search(text) is not None
        for a, b, code, strength in self._spans(text):
            status = ""
            if code != VAGUE:
                if _NEGATION.search(text, 0, a):
                    status = NEG
                elif trial and code in self._replaced and (told is None or a < told.start()):
                    status = TODO  # the swap done as the test; a replacement after its told result was done
                elif awaiting and code in self._replaced and text[a:b] in self._noun_replace:
                    status = TODO
                elif code not in self._passive and (
                        (self._todo_before is not None and self._todo_before.search(text, 0, a)) or
                        (self._todo_after is not None and self._todo_after.search(text[b:]) and
                         not (self._state_after is not None and self._state_after.search(text[b:])))):
                    status = TODO
            out.append((a, b, code, strength, status))
        return out

    def _spans(self, text: str) -> list[tuple[int, int, str, float]]:
        """Aliases named in the text, and composed phrases ("updated BMC firmware") where they
        are longer than the aliases they overlap."""
        spans = [(m.start(), m.end(), *self.exact[m.group()]) for m in self._scan.finditer(text)] if self._scan else []
        built = []
        for code, verbs, objects, verb_first in self._composed:
            if verbs is None or objects is None:
                continue
            vs = [(m.start(), m.end()) for m in verbs.finditer(text)]
            if not vs:
                continue
            for o0, o1 in ((m.start(), m.end()) for m in objects.finditer(text)):
                for v0, v1 in vs:
                    if v1 <= o0 and tokens_between(text, v1, o0) == 0:
                        built.append((v0, o1, code, S_EXACT))
                    elif not verb_first and o1 <= v0 and tokens_between(text, o1, v0) == 0:
                        built.append((o0, v1, code, S_EXACT))
        if not built:
            return spans
        for b in sorted(built, key=lambda b: b[0] - b[1]):  # longest first
            inside = [s for s in spans if s[0] < b[1] and b[0] < s[1]]
            if all(b[0] <= s[0] and s[1] <= b[1] and (s[1] - s[0]) < (b[1] - b[0]) for s in inside):
                spans = [s for s in spans if s not in inside] + [b]
        return sorted(spans)

    # -- steps ------------------------------------------------------------------------
    def _plan(self, text: str) -> _Plan:
        if not text:
            return _Plan(text, EMPTY, (), (), False)
        hit = self.exact.get(text)
        if hit is not None:
            code, strength = hit
            if code == VAGUE:
                return _Plan(text, Match(None, 0.0, "vague"), (), (), False)
            if strength >= S_EXACT:
                return _Plan(text, Match(code, strength, "exact"), (), (), False)
        # negated or not yet done: explained, not evidence
        hits = [(a, b, VAGUE, EXPLAINED) if status else (a, b, code, strength)
                for a, b, code, strength, status in self.scan(text)]
        strong = any(h[3] >= S_EXACT for h in hits)
        # Fuzzy queries hold a word nothing explained. Beside strong names only typos of
        # 5+ letters, with neighbours so a typo can extend a name ("correctble ecc errors").
        words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text)]
        want = [(we - ws >= 5 or not strong) and not any(h[0] < we and ws < h[1] for h in hits)
                for ws, we, _ in words]
        grams = _ngrams(words, want)
        if strong:
            return _Plan(text, None, tuple(hits), tuple(grams), True)
        whole = ((0, len(text), text),) if len(text) <= 40 and not any(g[2] == text for g in grams) else ()
        return _Plan(text, None, tuple(hits), whole + tuple(grams), False)

    def _finish(self, plan: _Plan, best: list) -> Match:
        """The code from the plan and the best fuzzy alias of each query (or None)."""
        fuzzy = []
        for (start, end, q), hit in zip(plan.queries, best):
            if hit is None:
                continue
            (code, strength), s, alias = hit
            if q[0] != alias[0]:
                continue  # typos keep the first letter; "link" is not "nvlink"
            if any(h[3] == EXPLAINED and h[0] < end and start < h[1] for h in plan.hits):
                continue  # a negated or announced name is no typo of a done one ("to be replaced, parts on order")
            if code != VAGUE and strength >= S_EXACT and (s >= FUZZY_EXTEND or not plan.extend):
                fuzzy.append((start, end, code, s))
        if plan.extend:
            return self._decide(_merge([h for h in plan.hits if h[2] != VAGUE and h[3] >= S_EXACT], fuzzy), plan.text)
        strongest = max(fuzzy, key=lambda f: f[3], default=None)
        floor = self._weak(plan.hits)
        if strongest is not None and strongest[3] > floor.score:
            # a typo in a word of four letters or less is as likely another word ("low"/"slow")
            cap = 99.0 if strongest[1] - strongest[0] >= 5 else S_WEAK
            return Match(strongest[2], round(min(strongest[3], cap), 1), "fuzzy")
        return floor

    def _weak(self, hits) -> Match:
        weak = [h for h in hits if h[2] != VAGUE]
        codes = list(dict.fromkeys(h[2] for h in weak))
        if len(codes) == 1:
            return Match(codes[0], S_WEAK, "weak")
        if codes:
            return Match(min(codes, key=lambda c: self.rank.get(c, len(self.rank))), S_AMBIGUOUS, "weak")
        return Match(None, 0.0, "vague") if hits else NOTHING

    def _decide(self, hits: list, text: str = "") -> Match:
        """One code from the named (and typo) hits, in text order: (start, end, code, score)."""
        cap = min(S_NAMED, min(h[3] for h in hits))
        codes = list(dict.fromkeys(h[2] for h in hits))
        if len(codes) == 1:
            return Match(codes[0], round(cap, 1), "named")
        if self.rule == "first":
            return Match(self.leading(hits, text), round(min(S_FIRST, cap), 1), "first")
        if self.rule == "last":
            last, prev = hits[-1], hits[-2]
            if prev[2] != last[2] and prev[1] + 1 >= last[0]:
                # the head noun, unless it is a bare generic word: "PCIe retimer card" is a retimer
                head = prev if text[last[0]:last[1]] in self._generic else last
                return Match(head[2], round(min(S_HEAD, cap), 1), "head")
            return Match(last[2], S_AMBIGUOUS, "ambiguous")
        code = min(codes, key=lambda c: self.rank.get(c, len(self.rank)))
        return Match(code, round(min(S_PRIORITY, cap), 1), "priority")

    def leading(self, hits: list, text: str) -> str:
        """The leading observation among several named codes (CODING-GUIDE 6-8): codes outranked
        by another named one and names inside a cause clause ("due to fan failure", "风扇故障导致")
        set aside, then the first in the text."""
        def is_cause(h) -> bool:
            before = [m.end() for m in self._cause_follows.finditer(text, 0, h[0])] if self._cause_follows else []
            after = self._cause_precedes.search(text, h[1]) if self._cause_precedes else None
            return (bool(before) and tokens_between(text, before[-1], h[0]) <= 8) or \
                (after is not None and tokens_between(text, h[1], after.start()) <= 6)

        seen = [h for h in hits if not is_cause(h)] or list(hits)
        named = {h[2] for h in seen}
        aside = set()
        for strong, weak, only in self.outranks:
            if strong == "*":  # any other code named: the weaker code's `only` phrases (filler) step aside
                if named - {weak}:
                    aside |= {h for h in seen if h[2] == weak and (not only or text[h[0]:h[1]] in only)}
            elif any(h[2] == strong and (not only or text[h[0]:h[1]] in only) for h in seen):
                # with `only`, just those phrases of the stronger code carry the rank
                aside |= {h for h in seen if h[2] == weak}
        return next((h[2] for h in seen if h not in aside), seen[0][2])


def _merge(named: list, fuzzy: list) -> list:
    """Named hits plus typo hits; a typo hit that covers named ones replaces them (longest first)."""
    hits = list(named)
    for f in sorted(fuzzy, key=lambda f: (f[0] - f[1], -f[3], f[0])):
        inside = [h for h in hits if h[0] < f[1] and f[0] < h[1]]
        if all(f[0] <= h[0] and h[1] <= f[1] and h[3] >= S_EXACT for h in inside) and \
                not any(h[3] < S_EXACT for h in inside):
            hits = [h for h in hits if h not in inside] + [f]
    return sorted(hits)


def _trie_regex(aliases: list[str]) -> re.Pattern | None:
    """One regex finding every alias, leftmost and then longest, ASCII ends only at word
    boundaries. Built as a trie (longer continuations tried first): a flat alternation of a
    thousand aliases is tried alias by alias at every position and is many times slower."""
    if not aliases:
        return None
    _END = ""
    trie: dict = {}
    for a in aliases:
        node = trie
        for ch in a:
            node = node.setdefault(ch, {})
        node[_END] = True

    def build(node: dict, last: str) -> str:
        alts = [re.escape(ch) + build(child, ch) for ch, child in sorted(node.items()) if ch != _END]
        if _END in node:
            alts.append(r"(?![a-z0-9])" if last.isascii() and last.isalnum() else "")
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    ascii_start = {ch: n for ch, n in trie.items() if ch.isascii() and ch.isalnum()}
    other = {ch: n for ch, n in trie.items() if not (ch.isascii() and ch.isalnum())}
    parts = []
    if ascii_start:
        parts.append(r"(?<![a-z0-9])" + build(ascii_start, ""))
    if other:
        parts.append(build(other, ""))
    return re.compile("|".join(parts))


def _ngrams(words: list[tuple[int, int, str]], want: list[bool] | None = None) -> list[tuple[int, int, str]]:
    """Word 1-, 2- and 3-grams (at least 4 characters) with their spans; with ``want``, only
    those holding a wanted word."""
    if want is not None and not any(want):
        return []
    out = []
    for n in (1, 2, 3):
        for i in range(len(words) - n + 1):
            if want is not None and not any(want[i:i + n]):
                continue
            q = " ".join(w for _, _, w in words[i:i + n])
            if len(q) >= 4:
                out.append((words[i][0], words[i + n - 1][1], q))
    return out


def _nwords(text: str) -> int:
    return text.count(" ") + 1


