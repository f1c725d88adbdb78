"""The learned layer: a text classifier per dimension that codes what the rules left to review.

Reads the tickets as the rules coded them (``part/symptom/action`` texts, codes, ``opened_at``)
and ``review_answers``; writes the codes it is sure of into that frame, one row per code it
wrote into ``learned_codes``, and its models with a card under ``paths.models/ticket_coder/``.
It exists because every answer a person gives in review should teach more than its own text
and the near variants the matcher already catches: a reviewed "shipped the riser back to
Wiwynn" should help code "riser card sent back to vendor".

Per dimension (part, symptom, action) a character n-gram TF-IDF of the dimension's own text
and, apart, of the other two texts (so "replaced the riser" in the action field can decide the
part) feeds a class-balanced logistic regression. Training labels are the reviewed answers
(weighted :data:`REVIEWED_WEIGHT` times) and the rules' confident codes.

It may only fill a code the rules left empty, and only at a probability at which its codes
were right at least ``normalize.learned_precision`` of the time on held-out reviewed texts: a
time-ordered cross-validation trains on everything before a block of reviewed texts (never on
those texts) and predicts the block, the same situation as coding tomorrow's unsure tickets.
The precision of the codes above a threshold is the lower end of a one-sided exact
(Clopper-Pearson) interval at :data:`CONFIDENCE`, not the share right: the threshold is the
lowest probability at which it still meets the target, and a plain share would let luck on a
few dozen texts pass for 99% (the codes would then be right less often than promised, about
half the time). So a 0.99 target needs about 300 held-out reviewed texts coded without error;
0.95 about 60. With too few reviewed texts, or when no threshold reaches the target, the
dimension codes nothing and says why.
"""

from __future__ import annotations

import hashlib
import json
import math
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
from threadpoolctl import threadpool_limits

from pipeline.normalize.taxonomy import DIMENSIONS

log = logging.getLogger(__name__)

#: A reviewed answer counts this many times a rule's confident code as a training label:
#: a person looked at it, and it is the kind of text the layer has to code.
REVIEWED_WEIGHT = 5.0
#: Fewer distinct reviewed texts than this in a dimension: nothing worth holding out.
MIN_REVIEWED = 30
#: Time-ordered blocks of reviewed texts, each predicted from what came before it.
FOLDS = 5
#: Most rule-coded examples trained on per dimension (a deterministic sample beyond).
MAX_AUTO = 20_000
#: Confidence that the held-out precision at the chosen threshold is at least the target.
CONFIDENCE = 0.95
#: Bump when features or estimator change: a stored model of another version is retrained.
MODEL_VERSION = 1
MODEL_DIR = "ticket_coder"


@dataclass(frozen=True)
class DimensionModel:
    """One dimension's classifier and the threshold it may code at (None: it codes nothing)."""

    dimension: str
    estimator: object | None
    threshold: float | None
    score: float | None  # 0-100: held-out precision (its lower confidence bound) at the threshold
    reason: str
    reviewed: int = 0
    heldout: int = 0

    @property
    def active(self) -> bool:
        return self.estimator is not None and self.threshold is not None


@dataclass
class Layer:
    """The three dimension models and where they came from."""

    models: dict[str, DimensionModel]
    fingerprint: str
    trained: bool  # False: loaded from disk unchanged
    target: float | None = None  # the precision its thresholds were chosen for
    filled: dict[str, int] = field(default_factory=lambda: {d: 0 for d in DIMENSIONS})

    def summary(self) -> str:
        """One line for the run's notes: codes filled per dimension, or why none."""
        if all(not m.active and m.reason.startswith("too little data") for m in self.models.values()):
            counts = ", ".join(f"{d} {self.models[d].reviewed}" for d in DIMENSIONS)
            return (f"learned layer codes nothing yet: too little data (reviewed texts: {counts}; "
                    f"it needs {MIN_REVIEWED} in a dimension)")
        parts = []
        for d in DIMENSIONS:
            m = self.models[d]
            parts.append(f"{d} {self.filled[d]}" if m.active else f"{d} none ({m.reason})")
        return "learned layer filled " + ", ".join(parts)


# -- training data --------------------------------------------------------------------------

def examples(tickets: pl.DataFrame, answers: list[tuple[str, str, str]], canonical) -> dict[str, pd.DataFrame]:
    """Per dimension the distinct labelled examples: ``own, context, label, weight, t, reviewed``.

    A ticket whose text in a dimension has a reviewed answer takes that answer as label
    (reviewed); else a code the rules wrote is its label. Identical examples are kept once,
    at the time they first appeared.
    """
    keyed = {d: {canonical(t): c for dd, t, c in answers if dd == d} for d in DIMENSIONS}
    texts = canonical_texts(tickets, canonical)
    opened = tickets["opened_at"].cast(pl.Datetime("us")).fill_null(datetime(1970, 1, 1)).to_list() \
        if "opened_at" in tickets.columns else [datetime(1970, 1, 1)] * tickets.height
    out = {}
    for d in DIMENSIONS:
        own = texts[f"{d}_text"]
        ctx = _context(texts, d)
        codes = tickets[f"{d}_code"].to_list()
        rows = []
        for i, text in enumerate(own):
            if not text:
                continue
            reviewed = keyed[d].get(text)
            label = reviewed or codes[i]
            if label:
                rows.append((text, ctx[i], label, REVIEWED_WEIGHT if reviewed else 1.0, opened[i], reviewed is not None))
        frame = pd.DataFrame(rows, columns=["own", "context", "label", "weight", "t", "reviewed"])
        frame = (frame.sort_values(["t", "own", "context", "label"], kind="stable")
                 .drop_duplicates(["own", "context", "label"]).reset_index(drop=True))
        auto = frame.index[~frame["reviewed"]]
        if len(auto) > MAX_AUTO:  # keep a deterministic sample of the rules' codes
            order = sorted(auto, key=lambda i: hashlib.sha1(f"{frame.at[i, 'own']}|{frame.at[i, 'context']}".encode()).digest())
            frame = frame.drop(index=order[MAX_AUTO:]).reset_index(drop=True)
        out[d] = frame
    return out


def canonical_texts(tickets: pl.DataFrame, canonical) -> dict[str, list[str]]:
    """``<dimension>_text`` -> the canonical text of each ticket, computed once per distinct text."""
    out = {}
    for d in DIMENSIONS:
        col = tickets[f"{d}_text"].cast(pl.Utf8).fill_null("")
        memo = {t: canonical(t) for t in col.unique().to_list()}
        out[f"{d}_text"] = [memo[t] for t in col.to_list()]
    return out


def _context(texts: dict[str, list[str]], dimension: str) -> list[str]:
    others = [texts[f"{d}_text"] for d in DIMENSIONS if d != dimension]
    return [" | ".join(parts) for parts in zip(*others)]


def fingerprint(data: dict[str, pd.DataFrame], target: float) -> str:
    """A hash of the training examples and settings: retrain only when it changes."""
    h = hashlib.sha256(f"v{MODEL_VERSION}|{target}|{REVIEWED_WEIGHT}|{MIN_REVIEWED}|{FOLDS}|{CONFIDENCE}".encode())
    for d in DIMENSIONS:
        f = data[d]
        for row in zip(f["own"], f["context"], f["label"], f["weight"], f["t"].astype(str)):
            h.update(("\x1f".join(map(str, row)) + "\x1e").encode())
        h.update(d.encode())
    return h.hexdigest()


# -- the model ------------------------------------------------------------------------------

def new_estimator():
    """Character n-grams (``char_wb`` 1-4: Chinese needs no tokenizer, typos keep most
    n-grams) of the own text and of the context, into a balanced logistic regression."""
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    def vec(min_df):
        return TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4), min_df=min_df, sublinear_tf=True,
                               lowercase=False, dtype=np.float32)

    features = ColumnTransformer([("own", vec(1), "own"), ("context", vec(2), "context")])
    clf = LogisticRegression(C=10.0, class_weight="balanced", max_iter=2000)
    return Pipeline([("features", features), ("clf", clf)])


def _fit(frame: pd.DataFrame):
    est = new_estimator()
    # one BLAS thread: the problem is small, and on a busy host two spinning threads made a
    # half-second fit take ten
    with threadpool_limits(1):
        est.fit(frame[["own", "context"]], frame["label"].to_numpy(), clf__sample_weight=frame["weight"].to_numpy())
    return est


def predict(est, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(code, probability) of the most likely class for each row of ``own, context``."""
    with threadpool_limits(1):
        proba = est.predict_proba(frame[["own", "context"]])
    best = proba.argmax(axis=1)
    return est.classes_[best], proba[np.arange(len(best)), best]


def heldout(frame: pd.DataFrame) -> pd.DataFrame:
    """Time-ordered cross-validation on the reviewed examples: ``p, right`` per prediction.

    Reviewed texts are cut into :data:`FOLDS` blocks by first appearance; each block is
    predicted by a model trained on every example seen before the block began, with the
    block's own texts taken out (a text never teaches its own evaluation).
    """
    reviewed = frame[frame["reviewed"]]
    first = reviewed.groupby("own")["t"].min().sort_values(kind="stable")
    groups = np.array_split(first.index.to_numpy(), FOLDS)
    preds = []
    for block in groups:
        if not len(block):
            continue
        start = first[block].min()
        train = frame[(frame["t"] < start) & ~frame["own"].isin(block)]
        test = reviewed[reviewed["own"].isin(block)]
        if train["label"].nunique() < 2:
            continue
        code, p = predict(_fit(train), test)
        preds.append(pd.DataFrame({"p": p, "right": code == test["label"].to_numpy()}))
    return pd.concat(preds, ignore_index=True) if preds else pd.DataFrame({"p": [], "right": []})


def precision_bound(right: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The one-sided lower :data:`CONFIDENCE` bound (Clopper-Pearson) of ``right`` of ``n``.

    >>> [round(float(b), 3) for b in precision_bound(np.array([20, 299]), np.array([20, 299]))]
    [0.861, 0.99]
    """
    from scipy.stats import beta

    right, n = np.asarray(right, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore"):
        low = beta.ppf(1 - CONFIDENCE, right, n - right + 1)
    return np.where(right > 0, low, 0.0)


def choose_threshold(pred: pd.DataFrame, target: float) -> tuple[float | None, float | None, str]:
    """The lowest probability whose codes at or above it were right at least ``target`` of
    the time (lower confidence bound); (threshold, precision bound, why) or (None, None, why)."""
    if pred.empty:
        return None, None, "no held-out prediction (every block lacked earlier data)"
    by_p = pred.groupby("p", sort=True)["right"].agg(["sum", "count"]).sort_index(ascending=False)
    right, n = by_p["sum"].cumsum().to_numpy(), by_p["count"].cumsum().to_numpy()
    prec = precision_bound(right, n)
    ok = np.flatnonzero(prec >= target)
    if not len(ok):
        i = int(prec.argmax())
        return None, None, (f"held-out precision never reaches {target:.3f} (best bound {prec[i]:.3f}: "
                            f"{int(right[i])} right of {int(n[i])}, of {len(pred)} held-out reviewed examples)")
    k = int(ok[-1])
    return float(by_p.index[k]), float(prec[k]), (f"{int(right[k])} right of {int(n[k])} held-out reviewed examples "
                                                  f"(of {len(pred)}) at p >= {by_p.index[k]:.3f}")


def train_dimension(dimension: str, frame: pd.DataFrame, target: float) -> DimensionModel:
    """Fit one dimension's model and pick its threshold (or say why it codes nothing)."""
    n_rev = int(frame.loc[frame["reviewed"], "own"].nunique())
    if n_rev < MIN_REVIEWED:
        return DimensionModel(dimension, None, None, None, _too_little(n_rev), n_rev)
    if frame["label"].nunique() < 2:
        return DimensionModel(dimension, None, None, None, "one code only in the training data", n_rev)
    pred = heldout(frame)
    thr, prec, why = choose_threshold(pred, target)
    if thr is None:
        return DimensionModel(dimension, None, None, None, why, n_rev, len(pred))
    score = math.floor(1000 * prec) / 10  # rounded down: never claim more than the bound
    return DimensionModel(dimension, _fit(frame), thr, score, why, n_rev, len(pred))


def _too_little(n: int) -> str:
    return f"too little data: {n} reviewed texts, needs {MIN_REVIEWED}"


def train(data: dict[str, pd.DataFrame], target: float) -> Layer:
    models = {d: train_dimension(d, data[d], target) for d in DIMENSIONS}
    return Layer(models, fingerprint(data, target), trained=True, target=target)


# -- applying it ----------------------------------------------------------------------------

def fill(tickets: pl.DataFrame, layer: Layer, canonical) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Codes for the empty ones the layer is sure of; returns (tickets, rows of ``learned_codes``).

    Only a dimension whose own text is not empty is filled: that is what was held out.
    """
    texts = canonical_texts(tickets, canonical) if any(m.active for m in layer.models.values()) else None
    new_cols, written = [], []
    for d in DIMENSIONS:
        m = layer.models[d]
        codes = tickets[f"{d}_code"].to_list()
        scores = tickets[f"{d}_score"].to_list()
        todo = [i for i, (c, t) in enumerate(zip(codes, texts[f"{d}_text"])) if c is None and t] if m.active else []
        if todo:
            ctx = _context(texts, d)
            frame = pd.DataFrame({"own": [texts[f"{d}_text"][i] for i in todo], "context": [ctx[i] for i in todo]})
            got, p = predict(m.estimator, frame)
            for i, code, prob in zip(todo, got, p):
                if prob >= m.threshold:
                    codes[i], scores[i] = str(code), m.score
                    written.append((i, d, str(code), float(prob), m.score))
            layer.filled[d] = sum(1 for w in written if w[1] == d)
        new_cols += [pl.Series(f"{d}_code", codes, pl.Utf8), pl.Series(f"{d}_score", scores, pl.Float64)]
    schema = {"service_point": pl.Utf8, "ticket_id": pl.Utf8, "dimension": pl.Utf8, "code": pl.Utf8,
              "probability": pl.Float64, "score": pl.Float64, "model": pl.Utf8}
    if not written:
        return tickets, pl.DataFrame(schema=schema)
    out = tickets.with_columns(new_cols)
    out = out.with_columns(pl.any_horizontal([pl.col(f"{d}_code").is_null() for d in DIMENSIONS]).alias("review"))
    keys = tickets.select("service_point", "ticket_id")
    rows = pl.DataFrame(
        [(*keys.row(i), d, c, p, s, layer.fingerprint[:12]) for i, d, c, p, s in written], schema=schema, orient="row")
    return out, rows


# -- storage --------------------------------------------------------------------------------

def save(folder: Path, layer: Layer) -> None:
    """``<dimension>.skops`` for each active model and ``card.json`` (fingerprint, thresholds, reasons)."""
    import skops.io as sio

    folder.mkdir(parents=True, exist_ok=True)
    card = {"version": MODEL_VERSION, "fingerprint": layer.fingerprint, "target": layer.target,
            "trained_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "dimensions": {}}
    for d, m in layer.models.items():
        path = folder / f"{d}.skops"
        if m.active:
            sio.dump(m.estimator, path)
        elif path.exists():
            path.unlink()
        card["dimensions"][d] = {"threshold": m.threshold, "score": m.score, "reason": m.reason,
                                 "reviewed_texts": m.reviewed, "heldout_predictions": m.heldout}
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")


def load(folder: Path, fingerprint_: str | None = None, target: float | None = None) -> Layer | None:
    """The stored layer if it was trained on exactly these examples (``fingerprint_``, which
    covers the target), or with ``fingerprint_`` None on whatever examples but for ``target``
    (as ``fleetfault normalize`` uses it); else None."""
    import skops.io as sio

    from pipeline.errors import FleetfaultError
    from pipeline.predict.model import _TRUSTED_NAMES, _TRUSTED_PREFIXES

    card_path = folder / "card.json"
    if not card_path.exists():
        return None
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log.warning("learned layer: unreadable %s; retraining", card_path)
        return None
    if card.get("version") != MODEL_VERSION or fingerprint_ not in (None, card.get("fingerprint")):
        return None
    if fingerprint_ is None and card.get("target") != target:
        return None
    models = {}
    for d in DIMENSIONS:
        info, path = card["dimensions"][d], folder / f"{d}.skops"
        est = None
        if info["threshold"] is not None:
            if not path.exists():
                return None
            untrusted = sio.get_untrusted_types(file=path)
            bad = [t for t in untrusted if not t.startswith(_TRUSTED_PREFIXES) and t not in _TRUSTED_NAMES]
            if bad:
                raise FleetfaultError(f"{path}: refusing to load types outside scikit-learn/numpy: {bad}")
            est = sio.load(path, trusted=untrusted)
        models[d] = DimensionModel(d, est, info["threshold"], info["score"], info["reason"],
                                   info["reviewed_texts"], info["heldout_predictions"])
    return Layer(models, card["fingerprint"], trained=False, target=card.get("target"))


def layer_for(data: dict[str, pd.DataFrame], target: float, folder: Path | None) -> Layer:
    """The stored layer when the training set is unchanged, else a new one (stored when ``folder``)."""
    fp = fingerprint(data, target)
    stored = load(folder, fp) if folder is not None else None
    if stored is not None:
        return stored
    layer = train(data, target)
    if folder is not None:
        save(folder, layer)
    return layer


def apply(tickets: pl.DataFrame, answers: list[tuple[str, str, str]], target: float,
          folder: Path | None, canonical) -> tuple[pl.DataFrame, pl.DataFrame, Layer]:
    """Train (or load) the layer on the rules' codes and the answers, then fill what it may.

    ``tickets`` must hold the rules' codes only: codes this layer wrote on an earlier run are
    never training labels (the stage recodes from scratch on each run).
    """
    answered = {d: len({t for dd, t, _ in answers if dd == d}) for d in DIMENSIONS}
    if all(n < MIN_REVIEWED for n in answered.values()):  # the usual night before any review: no work
        layer = Layer({d: DimensionModel(d, None, None, None, _too_little(n), n) for d, n in answered.items()},
                      fingerprint="", trained=False)
    else:
        layer = layer_for(examples(tickets, answers, canonical), target, folder)
    out, rows = fill(tickets, layer, canonical)
    log.info("%s (%s)", layer.summary(), "retrained" if layer.trained else "stored model, training set unchanged")
    return out, rows, layer
