"""A second opinion on every rule code: a text classifier fitted on labelled tickets.

Reads labelled example tickets (``pipeline/declared/coding_examples.csv``: the three ticket
texts and the gold part, symptom and action codes, an empty code where a careful engineer could
not decide, and an optional ``weight``; built by ``bench/bench_coding_corpus.py --write-examples``
from the hand-written corpus, the plain phrasings of ``pipeline/declared/coding_phrases.csv`` at
a higher weight, and simulator tickets); answers, per dimension, the code it finds most likely for a ticket and its
probability. The matcher (:mod:`pipeline.normalize.matcher`) lowers a rule code's score when
this opinion differs from the rule's ("GPU" named, the classifier reads a riser swap; the
classifier reads "a person could not decide"), or agrees only weakly: on hand-written tickets
the rules' codes the classifier disagreed with were right about half the time, the ones it
agreed with far more often (bench/RESULTS.md, issue 16). Its opinion never writes a code; it
only sends a code to review, and it does not outvote a GPU that a replacement names
(:func:`shield`).

The classifier is the learned layer's (:func:`pipeline.normalize.learned.new_estimator`:
character n-gram TF-IDF of the dimension's own text and of the other two, into a logistic
regression). It is fitted on first use and kept in a cache folder
(``$FLEETFAULT_CACHE`` or ``~/.cache/fleetfault``), keyed by a hash of the examples and the
scikit-learn version and the code that makes its features (``canonical.py``, ``learned.py``), so
a changed examples file is fitted anew and a run after the first loads it in a fraction of a second.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl

from pipeline.normalize.taxonomy import DIMENSIONS

__all__ = ["BANDS", "PRIOR_SHIELD", "UNDECIDED", "Prior", "band", "default_examples_path", "doubt", "fit", "load_prior",
           "read_examples", "shield"]

log = logging.getLogger(__name__)

#: The label of an example whose gold code is empty (a careful engineer could not decide).
UNDECIDED = "?"
#: An agreeing opinion at least this probable takes no points: on hand-written tickets the rule
#: codes it agreed with at 0.8 or more were right 997-1000 times in 1,000 (bench/RESULTS.md)
SURE = 0.8
#: Bump when the features, the estimator or the label scheme change: cached fits are redone.
PRIOR_VERSION = 1
EXAMPLE_COLUMNS = ("part_text", "symptom_text", "action_text", "part_code", "symptom_code", "action_code")


def default_examples_path() -> Path:
    return Path(__file__).resolve().parent.parent / "declared" / "coding_examples.csv"


def read_examples(path: str | Path | None = None) -> pl.DataFrame:
    """The example tickets (texts and codes as strings, missing ones ``""``), with ``weight``: an
    optional column of the file, 1 where absent (the phrasebook's plain phrasings weigh more)."""
    path = Path(path) if path else default_examples_path()
    df = pl.read_csv(path, infer_schema=False)
    missing = [c for c in EXAMPLE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: coding examples lack {', '.join(missing)}")
    weight = pl.col("weight").cast(pl.Float64) if "weight" in df.columns else pl.lit(1.0)
    return df.select([pl.col(c).fill_null("") for c in EXAMPLE_COLUMNS] + [weight.fill_null(1.0).alias("weight")])


def context_of(keys: dict[str, Sequence[str]], dimension: str) -> list[str]:
    """The other two canonical texts of each ticket, joined as the learned layer joins them."""
    others = [keys[d] for d in DIMENSIONS if d != dimension]
    return [" | ".join(t) for t in zip(*others)]


@dataclass
class Prior:
    """One fitted classifier per dimension."""

    models: dict[str, object]

    def predict(self, keys: dict[str, Sequence[str]]) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``keys[dimension]``: canonical texts, one per ticket. Per dimension, (the most likely
        code or :data:`UNDECIDED`, its probability, the probability of :data:`UNDECIDED`) of
        each ticket."""
        from threadpoolctl import threadpool_limits

        out = {}
        for d in DIMENSIONS:
            frame = pd.DataFrame({"own": list(keys[d]), "context": context_of(keys, d)})
            if not len(frame):
                out[d] = (np.array([], dtype=object), np.array([]), np.array([]))
                continue
            est = self.models[d]
            with threadpool_limits(1):
                proba = est.predict_proba(frame[["own", "context"]])
            best = proba.argmax(axis=1)
            classes = list(est.classes_)
            undecided = proba[:, classes.index(UNDECIDED)] if UNDECIDED in classes else np.zeros(len(best))
            out[d] = (est.classes_[best], proba[np.arange(len(best)), best], undecided)
        return out


def fit(examples: pl.DataFrame, canonical) -> Prior:
    """Fit the three classifiers on example tickets (texts canonicalised by ``canonical``)."""
    from pipeline.normalize.learned import _fit

    keys = {d: [canonical(t) for t in examples[f"{d}_text"].to_list()] for d in DIMENSIONS}
    models = {}
    for d in DIMENSIONS:
        labels = [c or UNDECIDED for c in examples[f"{d}_code"].to_list()]
        weight = examples["weight"].to_numpy() if "weight" in examples.columns else np.ones(len(labels))
        frame = pd.DataFrame({"own": keys[d], "context": context_of(keys, d), "label": labels, "weight": weight})
        models[d] = _fit(frame)
    return Prior(models)


def doubt(rule_code: str, prior_code: str | None, p: float, p_undecided: float,
          disagree: float, unsure: float, undecided: float) -> float:
    """Points a rule code loses to the second opinion: ``disagree`` when it reads another code
    (or "a person could not decide"); else ``unsure`` times how far its probability falls short
    of sure (:data:`SURE`), plus ``undecided`` times the probability it gives "could not decide" (the
    ambiguous tickets the rules code anyway: two parts swapped, a part only ordered)."""
    if prior_code is None:
        return 0.0
    if prior_code != rule_code:
        return disagree
    return unsure * max(0.0, SURE - float(p)) / SURE + undecided * float(p_undecided)


#: How the second opinion stands to a rule code (:func:`band`): the last part of the code's
#: calibration route, so that the calibration reads the rule's score and the opinion together (a
#: table per route and band, ``calibrate.Calibration.routes``) rather than the rule's score less
#: a fixed number of points for the doubt.
BANDS = ("agrees", "unsure", "differs")


def band(rule_code: str, prior_code: str | None, p: float) -> str | None:
    """``agrees``: the opinion reads the rule's code at least :data:`SURE`; ``unsure``: it reads
    it less probably; ``differs``: it reads another code or "a person could not decide"; None
    without an opinion."""
    if prior_code is None:
        return None
    if prior_code != rule_code:
        return BANDS[2]
    return BANDS[0] if float(p) >= SURE else BANDS[1]


#: The penalty (``penalties:`` in the taxonomy) that is the share, in percent, of its points the
#: second opinion takes from a part the rules read from a replacement done right beside its name
#: ("replaced GPU 4", 更换加速卡, "GPU board ... swap") when the part it reads instead is one the
#: ticket never names: a classifier of character n-grams reads "GPU board" as a motherboard and
#: "换 gpu，温度正常" as cooling, where the words say which part was replaced; out of fold such codes
#: were right far more often than the opinion (bench/RESULTS.md, issue 16).
PRIOR_SHIELD = "prior_acted_share"
#: ... unless it reads that other part at least this probably: "rier card" | "RMA", "IBB card" | "swapped"
#: (a riser, an IB card the rules read as a bare "card") were the shielded codes the simulator's
#: tickets had wrong; on hand-written tickets no shielded GPU code met an opinion this sure
#: (bench/RESULTS.md, fifth round)
OUTVOTES = 0.9


def shield(dimension: str, code: str | None, how: str, action: str | None, prior_code: str | None,
           named: frozenset[str] | set[str], guide, share: float, p: float = 0.0) -> float:
    """The factor on the second opinion's points (``share`` in percent, or 1.0) for a rule code
    ``code`` found ``how`` (``acted``: the part a replacement names beside it, or the one part a
    ticket names beside a bare replace verb); ``action`` is the ticket's action code, ``named`` the
    parts the ticket names, ``guide`` the taxonomy's guide (its replacing actions, and its GPU: the
    part the shield is for; out of fold other parts' codes so read were wrong about one time in ten
    where the opinion disagreed), ``p`` the opinion's probability (:data:`OUTVOTES`)."""
    # a fix applied to it (guide.fixes: replaced, reseated, cleaned): out of fold, GPUs the rules read
    # as reseated were right 98 of 98 times, 10 of them where the opinion read an unnamed part
    if dimension != "part" or guide is None or code != guide.xid_part or action not in guide.fixes or how != "acted":
        return 1.0
    if prior_code is None or prior_code == UNDECIDED or (prior_code != code and prior_code in named):
        return 1.0  # "could not decide", or another part the ticket does name (a riser beside the GPU)
    if prior_code != code and p >= OUTVOTES:
        return 1.0  # another part, read beyond doubt: the part field's word may be it, misspelt
    return share / 100.0  # the GPU itself, if unsure, or a part the ticket never names


def _cache_dir() -> Path:
    return Path(os.environ.get("FLEETFAULT_CACHE") or Path.home() / ".cache" / "fleetfault") / "coding_prior"


def load_prior(path: str | Path | None = None) -> Prior | None:
    """The classifier fitted on the examples at ``path`` (default the bundled file), from the
    cache when it was fitted before; None when there are no examples."""
    import sklearn

    from pipeline.normalize.canonical import canonical

    path = Path(path) if path else default_examples_path()
    if not path.exists():
        return None
    # the examples, and the code that turns them into features (a new canonical form or estimator
    # fits differently): any change to either is a new key, so a stale fit is never loaded
    here = Path(__file__).resolve().parent
    code = b"".join((here / f).read_bytes() for f in ("canonical.py", "learned.py"))
    key = hashlib.sha256(path.read_bytes() + code + f"|v{PRIOR_VERSION}|sklearn {sklearn.__version__}".encode()).hexdigest()[:24]
    cached = _cache_dir() / f"{key}.pkl"
    if cached.exists():
        try:
            with cached.open("rb") as fh:
                return pickle.load(fh)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError) as exc:
            # a truncated file, or one written by other code: fit again
            log.warning("coding prior cache %s unreadable (%s); fitting again", cached, exc)
    log.info("fitting the coding prior on %s (once; cached in %s)", path, cached.parent)
    prior = fit(read_examples(path), canonical)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=cached.parent, delete=False) as fh:
            pickle.dump(prior, fh)
        os.replace(fh.name, cached)  # another process fitting at once writes the same bytes
    except OSError as exc:
        log.warning("coding prior not cached (%s): it is fitted again next run", exc)
    return prior
