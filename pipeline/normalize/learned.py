"""A learned layer beside the rules: it codes what the rules left to review, and only where it
is as sure as the threshold asks.

Reads a coded ticket frame (``part_text``, ``symptom_text``, ``action_text`` and the
``normalize`` code and score columns); writes the same frame with some empty codes filled.
It learns from the codes already there that a person or the rules stand behind: reviewed
answers (the matcher codes their texts as ``learned``) and confident automatic codes. Per
dimension a character n-gram TF-IDF of each field (which reads Chinese without a tokenizer and
typos without a dictionary) feeds a logistic regression; its probability is calibrated on
out-of-fold predictions (:func:`pipeline.normalize.calibrate.fit`), so the score it writes
means what a rule's score means. It never changes a code the rules wrote.

Why a model at all: the rules need an alias for every way of saying a thing, and a site says
the same few things in its own words over and over; after a few weeks of review those words
are in the answers, and their neighbours ("风扇模组3不转了" after "风扇模组2不转") are coded too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.normalize.calibrate import Calibration, fit
from pipeline.normalize.canonical import canonical
from pipeline.normalize.taxonomy import DIMENSIONS

__all__ = ["LearnedLayer", "MIN_EXAMPLES"]

log = logging.getLogger(__name__)

MIN_EXAMPLES = 40  # fewer coded tickets in a dimension: nothing is learned for it
MIN_PER_CODE = 2  # a code seen once cannot be checked out of fold
FOLDS = 4
FIELDS = ("part_text", "symptom_text", "action_text")


@dataclass
class _Model:
    vectorizers: list
    clf: object
    calibration: Calibration


class LearnedLayer:
    """Char n-gram TF-IDF + logistic regression per dimension, calibrated out of fold.

    Parameters
    ----------
    threshold : float
        A code is written when its calibrated score (0-100) is at least this
        (``normalize.auto_threshold``, the rules' threshold).
    seed : int
        For the folds and the solver.

    Examples
    --------
    >>> layer = LearnedLayer(threshold=95.0).fit(coded_frame)                    # doctest: +SKIP
    >>> filled = layer.fill(coded_frame, matcher.unknown(coded_frame))           # doctest: +SKIP
    """

    def __init__(self, threshold: float, seed: int = 0):
        self.threshold = float(threshold)
        self.seed = seed
        self.models_: dict[str, _Model] = {}

    def fit(self, coded: pl.DataFrame, min_score: float | None = None) -> LearnedLayer:
        """Learn from the codes of ``coded`` scoring at least ``min_score`` (default: the threshold)."""
        floor = self.threshold if min_score is None else float(min_score)
        texts = _texts(coded)
        for d in DIMENSIONS:
            col, score = f"{d}_code", f"{d}_score"
            if col not in coded.columns:
                continue
            ok = (coded[col].is_not_null() & (coded[score].fill_null(0) >= floor)).to_numpy()
            y = coded[col].to_numpy()[ok]
            codes, counts = np.unique(y.astype(str), return_counts=True)
            keep = np.isin(y.astype(str), codes[counts >= MIN_PER_CODE])
            if keep.sum() < MIN_EXAMPLES or len(set(y[keep])) < 2:
                log.info("learned layer: %s has %d usable codes, nothing learned", d, int(keep.sum()))
                continue
            rows = [t for t, k in zip((texts[i] for i in np.flatnonzero(ok)), keep) if k]
            self.models_[d] = self._fit_one(rows, y[keep].astype(str))
        return self

    def _fit_one(self, rows: list[tuple[str, str, str]], y: np.ndarray) -> _Model:
        from sklearn.model_selection import StratifiedKFold

        folds = min(FOLDS, int(np.unique(y, return_counts=True)[1].min()))
        probs, right = [], []
        if folds >= 2:
            split = StratifiedKFold(n_splits=folds, shuffle=True, random_state=self.seed)
            for train, test in split.split(np.zeros(len(y)), y):
                vecs, clf = self._train([rows[i] for i in train], y[train])
                p = clf.predict_proba(_matrix(vecs, [rows[i] for i in test]))
                best = p.argmax(axis=1)
                probs += list(100.0 * p[np.arange(len(best)), best])
                right += list(clf.classes_[best] == y[test])
        vecs, clf = self._train(rows, y)
        # no out-of-fold evidence: the model's probabilities are not trusted at all
        calib = fit({"m": probs}, {"m": right}) if probs else Calibration({"m": ((0.0, 0.0), (100.0, 0.0))})
        return _Model(vecs, clf, calib)

    def _train(self, rows, y):
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        vecs = []
        for i in range(len(FIELDS)):
            v = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), min_df=1, sublinear_tf=True)
            docs = [r[i] or " " for r in rows]
            v.fit(docs)
            vecs.append(v)
        clf = LogisticRegression(C=5.0, max_iter=2000, random_state=self.seed)
        clf.fit(_matrix(vecs, rows), y)
        return vecs, clf

    def predict(self, frame: pl.DataFrame) -> dict[str, tuple[list[str | None], list[float]]]:
        """Per learned dimension: the model's code and calibrated score (0-100) for every row."""
        texts = _texts(frame)
        out = {}
        for d, m in self.models_.items():
            if not texts:
                out[d] = ([], [])
                continue
            p = m.clf.predict_proba(_matrix(m.vectorizers, texts))
            best = p.argmax(axis=1)
            scores = [m.calibration.score("m", 100.0 * float(v)) for v in p[np.arange(len(best)), best]]
            out[d] = ([str(c) for c in m.clf.classes_[best]], scores)
        return out

    def fill(self, coded: pl.DataFrame, unknown: dict[str, pl.Series]) -> pl.DataFrame:
        """``coded`` with each empty code the model is sure enough of filled in (``review``
        recomputed); codes the rules wrote are kept as they are.

        Only where ``unknown[dimension]`` is true: the rules proposed nothing because the
        field's words are new to them (:meth:`Matcher.unknown`). Where the rules read the text
        and doubted it (an ECC error of unknown kind, two parts, "pls check"), a careful
        engineer would not decide either, and neither does the model: on the coding corpus's
        time split it filled such tickets wrongly 6 times in 8.
        """
        if not self.models_ or coded.height == 0:
            return coded
        found = self.predict(coded)
        cols = []
        for d, (codes, scores) in found.items():
            model_code = pl.Series(codes, dtype=pl.Utf8)
            model_score = pl.Series(scores, dtype=pl.Float64)
            take = (coded[f"{d}_code"].is_null() & (coded[f"{d}_score"].fill_null(0) == 0)
                    & unknown[d] & (model_score >= self.threshold))
            cols += [pl.when(take).then(model_code).otherwise(coded[f"{d}_code"]).alias(f"{d}_code"),
                     pl.when(take).then(model_score).otherwise(coded[f"{d}_score"]).alias(f"{d}_score")]
        out = coded.with_columns(cols)
        n = sum(int((out[f"{d}_code"].is_not_null() & coded[f"{d}_code"].is_null()).sum()) for d in found)
        log.info("learned layer filled %d codes", n)
        return out.with_columns(pl.any_horizontal([pl.col(f"{d}_code").is_null() for d in DIMENSIONS]).alias("review"))


def _texts(frame: pl.DataFrame) -> list[tuple[str, str, str]]:
    """The canonical (part, symptom, action) text of each row; each distinct text canonicalized once."""
    seen: dict[str, str] = {}
    cols = []
    for c in FIELDS:
        raw = frame[c].cast(pl.Utf8).fill_null("").to_list() if c in frame.columns else [""] * frame.height
        cols.append([seen[t] if t in seen else seen.setdefault(t, canonical(t)) for t in raw])
    return list(zip(*cols))


def _matrix(vecs, rows):
    from scipy.sparse import hstack

    return hstack([v.transform([r[i] or " " for r in rows]) for i, v in enumerate(vecs)]).tocsr()
