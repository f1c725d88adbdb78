"""Scores that mean something: a matcher's raw score turned into the chance the code is right.

Reads ``pipeline/declared/calibration.yaml`` (or the user's own, ``normalize.calibration``): per dimension
a monotone table of ``[raw score, probability]`` points fitted on a labelled set. Writes
nothing at run time; :func:`fit` builds such a table from labelled rows (isotonic regression,
so a higher raw score never means a lower chance) and :func:`reliability` checks one: codes
scoring at least s are right with about the probability s says.

A raw score is the rule that found the code (exact alias 100, named 95, leading of several 90,
context 92 ...) less the taxonomy's ``penalties:`` for each doubt
(:data:`pipeline.normalize.guide.TAGS`). The calibrated score is 100 x the probability, so
``normalize.auto_threshold`` reads as "code automatically when at least this sure".

The same raw score is not equally sure on every route by which a code is found (its ``how``: a
part an action done beside it names, ``acted``; the field's own exact word, ``exact``; another
field's word, ``context``; a no-fault verdict, ``no_fault`` ...): the second opinion's doubt
costs a part read from "GPU 6 exchanged" far less than one read from a word in another field.
A route with enough labelled codes (:data:`MIN_ROUTE`) gets a table of its own (``routes:``);
the others share the dimension's.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pipeline.errors import ConfigError
from pipeline.normalize.prior import BANDS
from pipeline.normalize.taxonomy import DIMENSIONS

__all__ = ["Calibration", "cross_validate", "fit", "load_calibration", "reliability", "route_groups", "threshold_for"]

MIN_BIN = 5  # an isotonic step holding fewer labelled codes is merged into its neighbour
MIN_OWN = 3  # a raw score seen this often gets its own estimate ...
PRIOR = 20.0  # ... shrunk towards its isotonic step by this many pseudo-codes
#: A route (a code's ``how``) with at least this many labelled codes gets a table of its own;
#: the others share the dimension's. At 150 the hand-written set's small routes (the part field's
#: own word, 464 codes) got tables of their own that cost the simulator's tickets part coverage
#: (0.982 -> 0.976) for a gain on hand-written codes out of fold of 0.79 -> 0.82 right codes kept
#: (bench/RESULTS.md, sixth round): a route needs about as many codes as the simulator's check
#: has of it to speak for both
MIN_ROUTE = 500
#: ... and a route split by how the second opinion stood to its codes (``acted:unsure``, the last
#: part of the route: ``prior.BANDS``) at least this many: the band is the calibration's second
#: axis (the rule's score, the opinion's stance), so it needs fewer codes than a route of its own
MIN_BAND = 150


@dataclass(frozen=True)
class Calibration:
    """Per dimension, raw scores (ascending) and the probability each stands for.

    A raw score takes the probability of the last point at or below it (a step function, as
    an isotonic fit is); below the first point, where the labelled set says nothing, the lower
    of the first probability and the raw score itself. No table for a dimension: the raw score
    is used as it is (the matcher's behaviour before calibration).
    """

    points: dict[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    source: str = ""
    #: Per dimension, the lowest calibrated score whose codes were right at the target precision
    #: out of fold (``bench/bench_coding_corpus.py --fit-calibration``): the auto-code threshold
    #: when ``normalize.auto_threshold`` is not set.
    thresholds: dict[str, float] = field(default_factory=dict)
    #: Per dimension and route (the ``how`` of the code's match), a table of its own; a route
    #: without one takes the dimension's (``points``).
    routes: dict[str, dict[str, tuple[tuple[float, float], ...]]] = field(default_factory=dict)

    def score(self, dimension: str, raw: float, route: str | None = None) -> float:
        """The calibrated score (0-100) of a raw score found by ``route`` (a match's ``how``,
        ``description:acted`` on a description-only ticket): that route's table, else the one of
        the route's group before its ``:``, else the dimension's."""
        pts = self.table(dimension, route)
        if not pts:
            return round(max(0.0, min(100.0, raw)), 1)
        i = bisect.bisect_right([p[0] for p in pts], raw)
        p = pts[i - 1][1] if i else min(pts[0][1], raw / 100.0)
        return round(100.0 * max(0.0, min(1.0, p)), 1)

    def table(self, dimension: str, route: str | None = None) -> tuple[tuple[float, float], ...] | None:
        """The table a code of ``dimension`` found by ``route`` is scored with (None: no table)."""
        own = self.routes.get(dimension, {})
        for r in route_groups(route):
            if r in own:
                return own[r]
        return self.points.get(dimension)

    def to_yaml(self) -> str:
        def table(pts):
            return [[round(float(x), 3), round(float(y), 4)] for x, y in pts]

        body = {d: table(pts) for d, pts in self.points.items()}
        head = {"version": 1}
        if self.thresholds:
            head["thresholds"] = {d: float(t) for d, t in self.thresholds.items()}
        routes = {d: {r: table(pts) for r, pts in rs.items()} for d, rs in self.routes.items() if rs}
        return yaml.safe_dump({**head, "points": body, **({"routes": routes} if routes else {})}, sort_keys=False)


def route_groups(route: str | None) -> list[str]:
    """A route and the groups it belongs to, most specific first: ``description:acted`` ->
    ``["description:acted", "description"]``; ``acted`` -> ``["acted"]``."""
    if not route:
        return []
    parts = route.split(":")
    return [":".join(parts[:i]) for i in range(len(parts), 0, -1)]


def default_calibration_path() -> Path:
    from pipeline.schemas import schemas_dir

    return Path(schemas_dir()) / "calibration.yaml"


def load_calibration(path: str | Path | None = None) -> Calibration:
    """The calibration table at ``path`` (default: the bundled one; missing bundled file: none).

    Raises
    ------
    ConfigError
        The file is named but missing, or a table is not ``[raw, probability]`` pairs with
        raw scores ascending and probabilities within 0-1 and never falling.
    """
    bundled = path is None
    path = Path(path) if path else default_calibration_path()
    if not path.exists():
        if bundled:
            return Calibration()
        raise ConfigError([f"calibration file not found: {path} (set normalize.calibration to an existing YAML file)"],
                          str(path))
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError([f"not valid YAML: {exc}"], str(path)) from None
    problems, points, routes = [], {}, {}
    for d, pts in (raw.get("points") or {}).items():
        if d not in DIMENSIONS:
            problems.append(f"points.{d}: unknown dimension (allowed: {', '.join(DIMENSIONS)})")
            continue
        pairs = _pairs(pts, f"points.{d}", problems)
        if pairs is not None:
            points[d] = pairs
    for d, tables in (raw.get("routes") or {}).items():
        if d not in DIMENSIONS or not isinstance(tables, dict):
            problems.append(f"routes.{d}: expected a dimension ({', '.join(DIMENSIONS)}) holding route: table pairs")
            continue
        for r, pts in tables.items():
            pairs = _pairs(pts, f"routes.{d}.{r}", problems)
            if pairs is not None:
                routes.setdefault(d, {})[str(r)] = pairs
    thresholds = {}
    for d, t in (raw.get("thresholds") or {}).items():
        if d not in DIMENSIONS or isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 100:
            problems.append(f"thresholds.{d}: expected a dimension ({', '.join(DIMENSIONS)}) and a score within 0-100, got {t!r}")
            continue
        thresholds[d] = float(t)
    if problems:
        raise ConfigError(problems, str(path))
    return Calibration(points, str(path), thresholds, routes)


def _pairs(pts, where: str, problems: list[str]) -> tuple[tuple[float, float], ...] | None:
    """A table's ``[raw score, probability]`` pairs, or None with the problem noted."""
    try:
        pairs = tuple((float(x), float(y)) for x, y in pts)
    except (TypeError, ValueError):
        problems.append(f"{where}: expected a list of [raw score, probability] pairs")
        return None
    if not all(0 <= y <= 1 for _, y in pairs) or not all(a[0] < b[0] for a, b in zip(pairs, pairs[1:])):
        problems.append(f"{where}: raw scores must rise and probabilities lie within 0-1")
        return None
    return pairs


def fit(raw: dict[str, list[float]], correct: dict[str, list[bool]], source: str = "",
        per_score: bool = True, routes: dict[str, list[str]] | None = None) -> Calibration:
    """A calibration table from labelled codes: per dimension the raw scores of codes the
    matcher proposed and whether each was right.

    First an isotonic regression (steps of at least :data:`MIN_BIN` codes, Laplace-shrunk), so
    a higher raw score never means a lower chance across steps; then each raw score seen
    :data:`MIN_OWN` times or more gets its own estimate, its right/wrong counts shrunk towards
    its step's by :data:`PRIOR` pseudo-codes: a penalty the labelled set shows to matter
    ("a replaced part other than the named one") lowers the chance, one it does not, hardly.
    ``per_score=False`` keeps the isotonic steps alone (a higher raw score never scores lower),
    for labelled sets too small or too old to say more. ``routes[d][i]``: the route (``how``) code
    ``i`` was found by; each route with :data:`MIN_ROUTE` codes or more is fitted
    on its own codes as well (``Calibration.routes``).

    >>> c = fit({"part": [100.0] * 99 + [70.0] * 10}, {"part": [True] * 98 + [False] + [True] * 5 + [False] * 5})
    >>> c.score("part", 100.0) > 95 > c.score("part", 70.0)
    True
    """
    import numpy as np
    from sklearn.isotonic import IsotonicRegression

    points = {}
    for d, xs in raw.items():
        x = np.asarray(xs, dtype=float)
        y = np.asarray(correct[d], dtype=float)
        if len(x) < MIN_BIN:
            continue
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(x, y)
        steps: list[list[float]] = []  # [lowest raw, highest raw, right, n]
        for v in np.unique(x):
            sel = x == v
            steps.append([float(v), float(v), float(y[sel].sum()), float(sel.sum())])
        merged = _pool(steps, iso)
        pts = []
        for lo, _, right, n in merged:
            # a step's chance is shrunk towards 1/2 by one pseudo-count each way (Laplace):
            # 40 right of 40 is not proof of certainty
            p = (right + 1.0) / (n + 2.0)
            if pts and p < pts[-1][1]:
                p = pts[-1][1]
            pts.append((lo, p))
        step = Calibration({d: tuple(pts)})
        own = {}
        for v, _, right, n in steps if per_score else ():
            if n >= MIN_OWN:
                prior = step.score(d, v) / 100.0
                own[v] = (right + PRIOR * prior) / (n + PRIOR)
        # the step points, and each well-seen raw score's own estimate; a step point is kept
        # only where no own estimate sits
        table = dict(pts)
        table.update(own)
        for lo, p in pts:  # a step still starts where it did, at its own probability
            table.setdefault(lo, p)
        points[d] = tuple(sorted(table.items()))
    by_route: dict[str, dict[str, tuple[tuple[float, float], ...]]] = {}
    for d, rs in (routes or {}).items():
        groups = [route_groups(x) for x in rs]
        for r in sorted({g for gs in groups for g in gs}):
            sel = [i for i, gs in enumerate(groups) if r in gs]
            if len(sel) >= (MIN_BAND if r.rsplit(":", 1)[-1] in BANDS else MIN_ROUTE):
                own = fit({d: [raw[d][i] for i in sel]}, {d: [correct[d][i] for i in sel]}, per_score=per_score)
                by_route.setdefault(d, {})[r] = own.points[d]
    return Calibration(points, source, routes=by_route)


def _pool(steps: list[list[float]], iso) -> list[list[float]]:
    """Pool adjacent raw-score values whose isotonic fit is equal, then small steps."""
    out: list[list[float]] = []
    for s in steps:
        if out and abs(float(iso.predict([out[-1][0]])[0]) - float(iso.predict([s[0]])[0])) < 1e-9:
            out[-1][1], out[-1][2], out[-1][3] = s[1], out[-1][2] + s[2], out[-1][3] + s[3]
        else:
            out.append(list(s))
    i = 0
    while len(out) > 1 and i < len(out):
        if out[i][3] < MIN_BIN:
            j = i - 1 if i > 0 else i + 1
            a, b = sorted((i, j))
            out[a] = [out[a][0], out[b][1], out[a][2] + out[b][2], out[a][3] + out[b][3]]
            del out[b]
            i = 0
        else:
            i += 1
    return out


def cross_validate(raw: dict[str, list[float]], correct: dict[str, list[bool]], folds: dict[str, list[int]],
                   per_score: bool = True, routes: dict[str, list[str]] | None = None) -> dict[str, list[float]]:
    """Out-of-fold calibrated scores: each code scored by a table :func:`fit` on the other folds.

    ``folds[d][i]`` is the fold of code ``i`` of dimension ``d`` (the codes of one ticket share
    a fold, so a ticket never calibrates itself). A table fitted on the same codes it scores
    learns their luck; these scores are what the table promises on codes it has not seen, so
    the reliability of *these* is the honest one, and the threshold is chosen on them
    (:func:`threshold_for`).

    >>> raw = {"part": [100.0] * 40 + [70.0] * 40}
    >>> ok = {"part": [True] * 39 + [False] + [True] * 20 + [False] * 20}
    >>> oof = cross_validate(raw, ok, {"part": [i % 4 for i in range(80)]})["part"]
    >>> min(oof[:40]) > 90 > max(oof[40:])
    True
    """
    out: dict[str, list[float]] = {}
    for d, xs in raw.items():
        ks = folds[d]
        scores = [0.0] * len(xs)
        for k in sorted(set(ks)):
            train = [i for i, f in enumerate(ks) if f != k]
            rs = routes.get(d) if routes else None
            table = fit({d: [xs[i] for i in train]}, {d: [correct[d][i] for i in train]}, per_score=per_score,
                        routes={d: [rs[i] for i in train]} if rs else None)
            for i, f in enumerate(ks):
                if f == k:
                    scores[i] = table.score(d, xs[i], rs[i] if rs else None)
        out[d] = scores
    return out


def threshold_for(scores: list[float], correct: list[bool], target: float) -> float | None:
    """The lowest score s at which the codes scoring >= s are right at least ``target`` of the
    time (``None`` when no s reaches it): with out-of-fold scores, the auto-code threshold that
    keeps ``target`` precision on tickets the table has not seen.

    >>> threshold_for([99.0, 98.0, 90.0, 80.0], [True, True, True, False], 0.99)
    90.0
    """
    pairs = sorted(zip(scores, correct), reverse=True)
    best, right = None, 0
    for n, (s, ok) in enumerate(pairs, 1):
        right += ok
        nxt = pairs[n][0] if n < len(pairs) else None
        if nxt != s and right / n >= target:  # only cut between distinct scores
            best = s
    return best


def reliability(scores: list[float], correct: list[bool], cuts: tuple[float, ...] = (50, 80, 90, 95, 97, 98, 99)) -> list[dict]:
    """For each cut s: how many codes score >= s, the share right, and the mean score
    there (as a probability): calibrated when the two agree."""
    rows = []
    for s in cuts:
        sel = [(sc, ok) for sc, ok in zip(scores, correct) if sc >= s]
        n = len(sel)
        rows.append({"score_at_least": s, "codes": n,
                     "right": sum(ok for _, ok in sel),
                     "precision": sum(ok for _, ok in sel) / n if n else None,
                     "mean_score": sum(sc for sc, _ in sel) / n / 100 if n else None})
    return rows
