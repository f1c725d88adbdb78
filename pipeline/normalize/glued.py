"""Words glued without a space: ``gpuecc``, ``nvlinkdown``, ``fanfail``, ``psufailure``.

:func:`~pipeline.normalize.canonical.canonical` already splits Latin from Chinese
(``gpu掉卡`` -> ``gpu 掉卡``); two Latin words written as one stay one token, which no
alias names and fuzzy matching cannot reach. :class:`Splitter` splits such a token into two
or three words of the matcher's own vocabulary, and only when that is safe:

- the token is unknown (a vocabulary word is never split: ``nvswitch``, ``baseboard``);
- it is letters only (serials, ``xid79``, ``x8`` keep their digits and are left alone);
- every piece has at least :data:`MIN_PIECE` letters, so ``nvswitch`` cannot become ``nv switch``;
- it is not a typo of a word (``failled`` is "failed", not "fail led"): fuzzy matching
  reads typos better;
- there is exactly one split with the fewest pieces (two readings: left for review).

The canonical text is not changed (it keys stored review answers); the matcher splits the
text it matches, so ``gpuecc`` is coded as ``gpu ecc``.
"""

from __future__ import annotations

import re
from typing import Iterable

from rapidfuzz import fuzz, process

from pipeline.normalize.canonical import ABBREVIATIONS, canonical

__all__ = ["MIN_PIECE", "Splitter", "vocabulary"]

MIN_PIECE = 3
TYPO = 88.0  # a token this close to a word (rapidfuzz ratio, same first letter) is its typo
MAX_TOKEN = 30  # longer letter runs are hashes and base64, not glued words
_LATIN = re.compile(r"[a-z]+")
_TOKEN = re.compile(r"[a-z]{%d,%d}" % (2 * MIN_PIECE, MAX_TOKEN))


def vocabulary(texts: Iterable[str]) -> frozenset[str]:
    """The Latin words of canonical texts (aliases, reviewed answers)."""
    return frozenset(w for t in texts for w in _LATIN.findall(t) if len(w) >= MIN_PIECE)


class Splitter:
    """Splits the glued words of canonical texts into words of ``vocab``; results cached."""

    def __init__(self, vocab: Iterable[str]):
        self.vocab = frozenset(vocab)
        self._by_letter: dict[str, list[str]] = {}
        for w in sorted(self.vocab):
            self._by_letter.setdefault(w[0], []).append(w)
        # "fanfail" is "fan fail"; canonical() writes "fail" as "failure", so the short form
        # is a piece when its expansion is a word.
        self._pieces = self.vocab | {k for k, v in ABBREVIATIONS.items() if v in self.vocab and len(k) >= MIN_PIECE}
        self._tokens: dict[str, str] = {}  # per distinct word: texts repeat their words

    def text(self, key: str) -> str:
        """``key`` (a canonical text) with its glued words split; ``key`` itself if none."""
        words = key.split(" ")
        split = [self.token(w) for w in words]
        return key if split == words else canonical(" ".join(split))

    def token(self, word: str) -> str:
        """One word split with spaces, or unchanged."""
        out = self._tokens.get(word)
        if out is None:
            out = self._split(word)
            self._tokens[word] = out
        return out

    def _split(self, word: str) -> str:
        if word in self.vocab or not _TOKEN.fullmatch(word) or \
                process.extractOne(word, self._by_letter.get(word[0], ()), scorer=fuzz.ratio, score_cutoff=TYPO):
            return word
        for n in (2, 3):
            found = list(self._ways(word, n))
            if found:
                return " ".join(found[0]) if len(found) == 1 else word
        return word

    def _ways(self, word: str, n: int):
        """Every way to cut ``word`` into ``n`` pieces that are all words."""
        if n == 1:
            if word in self._pieces:
                yield (word,)
            return
        for i in range(MIN_PIECE, len(word) - MIN_PIECE * (n - 1) + 1):
            head = word[:i]
            if head in self._pieces:
                for rest in self._ways(word[i:], n - 1):
                    yield (head,) + rest
