"""The matcher: ticket text to part, symptom and action codes, with a score and a review flag.

Reads a ticket frame's ``part_text``, ``symptom_text`` and ``action_text``; writes the codes
and scores of the ``normalize`` contract. Each field is coded in its own dimension first
(exact alias, alias named inside the text, Xid numbers, fuzzy); a field that says nothing
confident is then filled from the other fields: a part named in the symptom or action text
(显存 ECC -> GPU, "replaced PSU" -> PSU, NFF -> NONE), a part the symptom implies (掉卡 ->
GPU), an action written in the symptom field (重新插拔后恢复 -> RESEAT). A code whose score is
below ``normalize.auto_threshold`` is left empty and the ticket goes to review; answers
from review (``learned``) code that text, and near variants of it, from then on. Words
glued without a space (``gpuecc``, ``psufailure``) are matched split into the words of the
aliases and answers (:mod:`pipeline.normalize.glued`); the canonical text stays as it is.

:meth:`Matcher.code_frame` canonicalizes and matches each distinct text once (fuzzy step in
one ``rapidfuzz.process.cdist`` call) and joins the codes back; :meth:`Matcher.match_row`
does the same for one ticket and is the row-by-row baseline of ``bench/bench_normalize.py``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process

from pipeline.errors import UsageError
from pipeline.normalize._index import AliasIndex, Match
from pipeline.normalize.calibrate import Calibration, load_calibration
from pipeline.normalize.canonical import canonical
from pipeline.normalize.glued import Splitter, vocabulary
from pipeline.normalize.guide import Evidence, Reader, decide
from pipeline.normalize.prior import PRIOR_SHIELD, Prior, band, doubt, load_prior, shield
from pipeline.normalize.taxonomy import DIMENSIONS, Taxonomy, load_taxonomy

if TYPE_CHECKING:
    from pipeline.config import Config

__all__ = ["DIMENSIONS", "Coded", "Matcher", "OUTPUT_COLUMNS"]

log = logging.getLogger(__name__)

OUTPUT_COLUMNS = ("part_code", "part_score", "symptom_code", "symptom_score",
                  "action_code", "action_score", "review")
LEARNED_NEAR = 90.0  # a text this close (rapidfuzz ratio) to a reviewed one takes its code
PRIOR_PENALTIES = ("prior_disagrees", "prior_unsure", "prior_undecided")  # doubt()'s points, in its order
RULES_THRESHOLD = 85.0  # Matcher.rules_only's: the raw score at which the guide counts a match confident
CONFIDENT = 85.0  # the raw score at which a field's match counts in the guide's rules
DEFAULT_THRESHOLD = 96.0  # the threshold of a dimension the calibration names none for
#: The route group of every code of a description-only ticket (one text in all three fields): the
#: rules read the resolution and the part from the same words as the symptom, and the labelled set
#: shows such codes right less often than the same rule's in a ticket with its fields apart
DESC_ROUTE = "description"


@dataclass(frozen=True, slots=True)
class Coded:
    """The codes of one ticket (a code is None when it scored below the threshold)."""

    part_code: str | None
    part_score: float
    symptom_code: str | None
    symptom_score: float
    action_code: str | None
    action_score: float
    review: bool


class Matcher:
    """Codes ticket texts to the taxonomy.

    Parameters
    ----------
    taxonomy : Taxonomy
    threshold : float, optional
        Scores at or above are coded automatically (``normalize.auto_threshold``); None: each
        dimension's threshold in the calibration (``thresholds:``), else :data:`DEFAULT_THRESHOLD`.
    learned : iterable of (dimension, text, code)
        Reviewed answers.
    prior : Prior, optional
        A second opinion (:mod:`pipeline.normalize.prior`): a rule code it disagrees with, or
        agrees with only weakly, loses points (``penalties: prior_disagrees, prior_unsure``).
    raw : bool
        Scores are the calibration's input (the rule's score less its doubt points), not
        calibrated: what a calibration is fitted on (``bench/bench_coding_corpus.py --records``).

    Examples
    --------
    >>> m = Matcher.load()
    >>> m.match_row("显卡", "掉卡, Xid 79", "重新插拔后恢复").action_code
    'RESEAT'
    """

    def __init__(self, taxonomy: Taxonomy, threshold: float | None = DEFAULT_THRESHOLD,
                 learned: Iterable[tuple[str, str, str]] = (), calibration: Calibration | None = None,
                 prior: Prior | None = None, raw: bool = False):
        self.taxonomy = taxonomy
        self.prior = prior
        self.raw = raw
        self.calibration = calibration if calibration is not None else Calibration()
        self.thresholds = {d: float(threshold) if threshold is not None else
                           self.calibration.thresholds.get(d, DEFAULT_THRESHOLD) for d in DIMENSIONS}
        self.index = {d: AliasIndex(taxonomy, d) for d in DIMENSIONS}
        self._reader = Reader(taxonomy, self.index)
        self._penalty = {t: taxonomy.penalties.get(t, 0.0) for t in taxonomy.penalties}
        self._learned: dict[str, dict[str, str]] = {d: {} for d in DIMENSIONS}
        self._learned_keys: dict[str, list[str]] = {d: [] for d in DIMENSIONS}
        self.learn(learned)

    @property
    def threshold(self) -> float:
        """The auto-code threshold: the one of every dimension, or the highest where they differ."""
        return max(self.thresholds.values())

    @threshold.setter
    def threshold(self, value: float) -> None:
        self.thresholds = {d: float(value) for d in DIMENSIONS}

    @classmethod
    def load(cls, cfg: Config | None = None, learned: Iterable[tuple[str, str, str]] = (), prior: bool = True) -> Matcher:
        """The matcher the config asks for: its taxonomy (bundled, replaced or extended)
        and threshold, plus reviewed answers; ``prior=False``: without the second opinion (what
        only reads the rules, :meth:`routes`, need not fit it)."""
        if cfg is None:
            return cls(load_taxonomy(), None, learned, load_calibration(), load_prior() if prior else None)
        n = cfg.normalize
        path = cfg.resolve(n.taxonomy) if n.taxonomy else None
        extra = cfg.resolve(n.extra_aliases) if n.extra_aliases else None
        calib = getattr(n, "calibration", None)
        return cls(load_taxonomy(path, extra), n.auto_threshold, learned,
                   load_calibration(cfg.resolve(calib) if calib else None),
                   load_prior() if prior and getattr(n, "prior", True) else None)

    @classmethod
    def rules_only(cls, threshold: float = RULES_THRESHOLD, learned: Iterable[tuple[str, str, str]] = ()) -> Matcher:
        """The bundled taxonomy's rules alone: raw scores (no calibration, no second opinion),
        coded at ``threshold``: what the rules decide when they are sure, for testing a rule
        apart from how often such codes turn out right."""
        return cls(load_taxonomy(), threshold, learned, Calibration())

    def learn(self, learned: Iterable[tuple[str, str, str]]) -> None:
        """Add reviewed answers: ``(dimension, text, code)``; that text (and near variants)
        is coded ``code`` from now on. The latest answer for a text wins."""
        bad = []
        for dimension, text, code in learned:
            if dimension not in DIMENSIONS or code not in self.taxonomy.codes[dimension]:
                bad.append(f"{dimension}:{code}")
                continue
            key = canonical(text)
            if key:
                self._learned[dimension][key] = code
        if bad:
            raise UsageError(f"reviewed answers name unknown codes: {', '.join(sorted(set(bad)))}; "
                             f"allowed: " + "; ".join(f"{d}: {', '.join(self.taxonomy.codes[d])}" for d in DIMENSIONS))
        self._learned_keys = {d: list(v) for d, v in self._learned.items()}
        # glued words split into words of the aliases and answers ("gpuecc" -> "gpu ecc")
        self._glued = Splitter(vocabulary([a for i in self.index.values() for a in i.exact] +
                                          [k for keys in self._learned_keys.values() for k in keys]))

    # -- one text / one ticket ----------------------------------------------------------
    def match_text(self, dimension: str, text: str | None) -> Match:
        """The code of one raw text in one dimension, before context from other fields."""
        return self._match(dimension, canonical(text))

    def _match(self, dimension: str, key: str) -> Match:
        learned = self._learned[dimension]
        if key in learned:
            return Match(learned[key], 100.0, "learned")
        own = self.index[dimension].match(self._glued.text(key))
        if learned and key and (own.code is None or own.score < self.thresholds[dimension]):
            hit = process.extractOne(key, self._learned_keys[dimension], scorer=fuzz.ratio,
                                     score_cutoff=LEARNED_NEAR)
            if hit is not None:
                return Match(learned[hit[0]], round(float(hit[1]), 1), "learned")
        return own

    def match_row(self, part_text: str | None, symptom_text: str | None, action_text: str | None) -> Coded:
        """Code one ticket, text by text (the row-by-row path)."""
        keys = (canonical(part_text), canonical(symptom_text), canonical(action_text))
        return self._resolve(keys, lambda d, k: self._match(d, k), self.evidence, self._opinions([keys])[0])

    def picks(self, part_text: str | None, symptom_text: str | None, action_text: str | None
              ) -> tuple[dict[str, Match], dict[str, set[str]]]:
        """The guide's match per dimension for one ticket (raw score and how it was found: ``acted``
        is a part an action done beside it names) and the doubt tags of each, before any doubt
        points or calibration: what a code's score is made from."""
        keys = (canonical(part_text), canonical(symptom_text), canonical(action_text))
        return decide(self.taxonomy, CONFIDENT, self._match, self.evidence, keys)

    def routes(self, df: pl.DataFrame) -> pl.DataFrame:
        """Per ticket of ``df`` (``part_text, symptom_text, action_text``), the calibration route
        of each dimension's code (:func:`route_of`: how the guide's rules found it; None where
        they found none): ``part_route, symptom_route, action_route``, the row order kept."""
        _check(df)
        cols = [f"{d}_text" for d in DIMENSIONS]
        texts = df.select([pl.col(c).cast(pl.Utf8).fill_null("") for c in cols])
        memo: dict[tuple[str, str, str], tuple] = {}
        out = []
        for row in texts.iter_rows():
            if row not in memo:
                keys = tuple(canonical(t) for t in row)
                picked, _ = decide(self.taxonomy, CONFIDENT, self._match, self.evidence, keys)
                memo[row] = tuple(route_of(picked[d].how, keys) if picked[d].code else None for d in DIMENSIONS)
            out.append(memo[row])
        return pl.DataFrame(out, schema={f"{d}_route": pl.Utf8 for d in DIMENSIONS}, orient="row")

    def named_parts(self, keys: tuple[str, str, str], ev=None) -> frozenset[str]:
        """The part codes a ticket's canonical texts name (not denied: "not the riser" names none)."""
        ev = ev or self.evidence
        return frozenset(p[2] for k in keys for p in ev(k).parts)

    def code_rows(self, df: pl.DataFrame) -> pl.DataFrame:
        """:meth:`code_frame` done one row at a time (the benchmark's baseline)."""
        _check(df)
        rows = [self.match_row(p, s, a) for p, s, a in
                zip(df["part_text"], df["symptom_text"], df["action_text"])]
        return _attach(df, pl.DataFrame([_as_row(c) for c in rows], schema=_SCHEMA, orient="row"))

    # -- a whole frame -------------------------------------------------------------------
    def code_frame(self, df: pl.DataFrame) -> pl.DataFrame:
        """Code every ticket of a frame.

        Parameters
        ----------
        df : polars.DataFrame
            With ``part_text``, ``symptom_text``, ``action_text`` (nullable strings) and any
            other columns, which are kept.

        Returns
        -------
        polars.DataFrame
            The same rows plus ``part_code, part_score, symptom_code, symptom_score,
            action_code, action_score, review``.
        """
        _check(df)
        cols = [f"{d}_text" for d in DIMENSIONS]
        texts = df.select([pl.col(c).cast(pl.Utf8).fill_null("") for c in cols])
        raw = pl.concat([texts[c] for c in cols]).unique().to_list()
        canon = [canonical(t) for t in raw]
        keys = texts.select([pl.col(c).replace_strict(raw, canon, default="", return_dtype=pl.Utf8)
                             .alias(f"_{d}") for c, d in zip(cols, DIMENSIONS)])
        distinct = sorted(set(canon))
        found: dict[tuple[str, str], Match] = {}
        for d in DIMENSIONS:
            for key, m in zip(distinct, self._match_many(d, distinct)):
                found[(d, key)] = m
        evidence = {k: self.evidence(k) for k in distinct}
        triples = keys.unique()
        rows = list(triples.iter_rows())
        coded = [self._resolve(t, lambda d, k: found[(d, k)], evidence.__getitem__, o)
                 for t, o in zip(rows, self._opinions(rows))]
        table = pl.concat([triples, pl.DataFrame([_as_row(c) for c in coded], schema=_SCHEMA, orient="row")],
                          how="horizontal")
        joined = keys.join(table, on=list(keys.columns), how="left", maintain_order="left", nulls_equal=True)
        log.info("coded %d tickets from %d distinct texts, %d distinct combinations",
                 df.height, len(distinct), triples.height)
        return _attach(df, joined.select(_SCHEMA.keys()))

    def _match_many(self, dimension: str, keys: list[str]) -> list[Match]:
        """:meth:`_match` for many canonical texts at once."""
        learned = self._learned[dimension]
        out = self.index[dimension].match_many([self._glued.text(k) for k in keys])
        out = [Match(learned[k], 100.0, "learned") if k in learned else m for k, m in zip(keys, out)]
        if not learned:
            return out
        todo = [i for i, (k, m) in enumerate(zip(keys, out))
                if k and m.how != "learned" and (m.code is None or m.score < self.thresholds[dimension])]
        if todo:
            choices = self._learned_keys[dimension]
            scores = process.cdist([keys[i] for i in todo], choices, scorer=fuzz.ratio,
                                   score_cutoff=LEARNED_NEAR, dtype=np.float64, workers=1)
            for row, i in enumerate(todo):
                j = int(scores[row].argmax())
                if scores[row, j] >= LEARNED_NEAR:
                    out[i] = Match(learned[choices[j]], round(float(scores[row, j]), 1), "learned")
        return out

    # -- the guide across fields -------------------------------------------------------
    def evidence(self, key: str) -> Evidence:
        """The parts and actions a canonical text names, where, and what surrounds them."""
        return self._reader.read(self._glued.text(key))

    def _opinions(self, triples: list[tuple[str, str, str]]) -> list[dict[str, tuple[str, float, float]] | None]:
        """The prior's (code, probability, probability of "undecided") per dimension for each (part, symptom, action)
        canonical triple, in one call for all of them; None each without a prior."""
        if self.prior is None or not triples:
            return [None] * len(triples)
        got = self.prior.predict({d: [t[i] for t in triples] for i, d in enumerate(DIMENSIONS)})
        # a description-only export (one text in all three fields) is asked too: the prior's
        # examples hold every hand-written ticket in that layout as well (bench_coding_corpus.examples)
        return [{d: (got[d][0][i], float(got[d][1][i]), float(got[d][2][i])) for d in DIMENSIONS}
                for i in range(len(triples))]

    def _resolve(self, keys: tuple[str, str, str], get, ev, opinion: dict[str, tuple[str, float, float]] | None = None) -> Coded:
        picked, tags = decide(self.taxonomy, CONFIDENT, get, ev, keys)
        named = self.named_parts(keys, ev)
        out = []
        for d in DIMENSIONS:
            m = picked[d]
            if m.code is None:
                out += [None, round(m.score, 1)]
                continue
            doubt_ = sum(self._penalty.get(t, 0.0) for t in tags[d])
            if opinion is not None and m.how != "learned":  # a person's answer is not second-guessed
                doubt_ += doubt(m.code, *opinion[d], *(self._penalty.get(t, 0.0) for t in PRIOR_PENALTIES)) * shield(
                    d, m.code, m.how, picked["action"].code, opinion[d][0], named, self.taxonomy.guide,
                    self._penalty.get(PRIOR_SHIELD, 100.0), opinion[d][1])
            if self.raw:
                out += [m.code, round(m.score - doubt_, 1)]
                continue
            # a tenth of a point per penalty point orders codes within one calibrated step: a
            # conflicting cue always lowers the score, if only a little where the labelled set
            # shows it does not matter
            # calibrated on the route that found the code (calibrate.Calibration.routes)
            cal, route = self.calibration.score, route_of(m.how, keys)
            if opinion is not None and m.how != "learned":
                # the opinion's band: a table fitted on codes the opinion stood to alike, where the
                # labelled set holds enough of them (calibrate.MIN_BAND), else the route's
                route = f"{route}:{band(m.code, opinion[d][0], opinion[d][1])}"
            score = max(0.0, round(min(cal(d, m.score, route), cal(d, m.score - doubt_, route)) - doubt_ / 10.0, 1))
            out += [m.code if score >= self.thresholds[d] else None, score]
        p, ps, s, ss, a, as_ = out
        return Coded(p, ps, s, ss, a, as_, p is None or s is None or a is None)

    def suggest(self, dimension: str, text: str, k: int = 3) -> list[tuple[str, float]]:
        """The ``k`` most likely codes for a text, best first, for a person to choose from.

        >>> Matcher.load().suggest("part", "graphics crad")[0][0]
        'GPU'
        """
        if dimension not in DIMENSIONS:
            raise UsageError(f"dimension {dimension!r}: choose one of {', '.join(DIMENSIONS)}")
        key = canonical(text)
        first = self._match(dimension, key)
        out = [(first.code, first.score)] if first.code else []
        for code, s in self.index[dimension].suggest(self._glued.text(key), k + 1):
            if code not in {c for c, _ in out}:
                out.append((code, s))
        return out[:k]


def route_of(how: str, keys: tuple[str, str, str]) -> str:
    """The calibration route of a code found ``how`` in a ticket of canonical texts ``keys``."""
    return f"{DESC_ROUTE}:{how}" if keys[0] and keys[0] == keys[1] == keys[2] else how


_SCHEMA = {"part_code": pl.Utf8, "part_score": pl.Float64, "symptom_code": pl.Utf8,
           "symptom_score": pl.Float64, "action_code": pl.Utf8, "action_score": pl.Float64,
           "review": pl.Boolean}


def _as_row(c: Coded) -> tuple:
    return (c.part_code, c.part_score, c.symptom_code, c.symptom_score, c.action_code, c.action_score, c.review)


def _check(df: pl.DataFrame) -> None:
    missing = [f"{d}_text" for d in DIMENSIONS if f"{d}_text" not in df.columns]
    if missing:
        raise UsageError(f"ticket frame lacks {', '.join(missing)} (has: {', '.join(df.columns)})")


def _attach(df: pl.DataFrame, coded: pl.DataFrame) -> pl.DataFrame:
    """``df`` without any earlier codes, with ``coded`` beside it (coding twice = once)."""
    return pl.concat([df.drop([c for c in OUTPUT_COLUMNS if c in df.columns]), coded], how="horizontal")
