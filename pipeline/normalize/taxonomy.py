"""The code taxonomy as data: ``pipeline/declared/taxonomy.yaml`` (or the user's own file).

Reads the YAML, canonicalizes every alias, checks it and hands the matcher one
:class:`Taxonomy`: per dimension (part, symptom, action) the codes in order, each with a
description, strong aliases and weak ones; phrases that name nothing (vague); Xid numbers
as symptom evidence; symptoms that imply a part; and how to choose when a text names
several codes. Users replace it (``normalize.taxonomy``) or extend it
(``normalize.extra_aliases``) without touching code.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pipeline.errors import ConfigError
from pipeline.normalize.canonical import canonical

log = logging.getLogger(__name__)

DIMENSIONS = ("part", "symptom", "action")
_RULES = ("last", "priority", "first")
MARKERS = ("cause_follows", "cause_precedes", "not_done_before", "not_done_after", "done_state_after", "failed_after",
           "resolved_after", "part_ok_after", "part_ruled_out_after", "trial", "generic_nouns",
           "awaiting", "noun_replace",
           "slowdown_cause_unknown", "cable_ends", "not_a_verdict", "reinstall", "no_slowdown_cause", "server_untouched",
           "still_open", "trial_verdict", "bare_resolution", "resolution_labels", "observing",
           "possessive", "possessive_of", "outside_server", "lab_no_fault")
PENALTIES = ("negation", "parts_conflict", "two_parts", "vague", "several", "failed_action", "context", "unsupported",
             "prior_disagrees", "prior_unsure", "prior_undecided", "prior_acted_share")


@dataclass(frozen=True)
class Code:
    """One code of a dimension: its description and canonical aliases."""

    code: str
    description: str
    aliases: tuple[str, ...]
    weak: tuple[str, ...] = ()


@dataclass(frozen=True)
class Composed:
    """Phrases too many to list (``compose:``): any of ``verbs`` right beside any of
    ``objects`` names ``code`` ("updated BMC firmware", "firmware upgraded", 换风扇); with
    ``verb_first`` only the verb-object order."""

    code: str
    verbs: tuple[str, ...]
    objects: tuple[str, ...]
    verb_first: bool = False


@dataclass(frozen=True)
class Guide:
    """The coding guide's part rules as data (``guide:`` in the taxonomy file).

    ``software`` is the part of a fix by ``software_actions`` with nothing replaced;
    ``replaced`` the actions whose part beats the part named; ``no_fault`` the part a
    no-fault verdict gives unless one of ``fixes`` was done; an action acts on a part named within ``reach_after`` words
    after it or ``reach_before`` words before it.
    """

    software: str | None = None
    software_actions: frozenset[str] = frozenset()
    replaced: frozenset[str] = frozenset()
    no_fault: str | None = None
    no_fault_action: str | None = None
    xid_part: str | None = None
    fixes: frozenset[str] = frozenset()
    reach_after: int = 4
    reach_before: int = 3

    @property
    def not_parts(self) -> frozenset[str]:
        """The part codes that name no hardware: the no-fault verdict and software."""
        return frozenset(c for c in (self.no_fault, self.software) if c)


@dataclass(frozen=True)
class Taxonomy:
    """Everything the matcher needs, canonical and checked.

    ``codes[dim]`` keeps the file's order; ``priority[dim]`` is the tie-break order used by
    the ``priority`` rule; ``vague[dim]`` are canonical phrases that name no code.
    """

    codes: dict[str, dict[str, Code]]
    vague: dict[str, tuple[str, ...]] = field(default_factory=dict)
    xid: dict[int, str] = field(default_factory=dict)
    implies_part: dict[str, str] = field(default_factory=dict)
    implies_symptom: dict[str, str] = field(default_factory=dict)
    no_context: dict[str, frozenset[str]] = field(default_factory=dict)
    resolve: dict[str, str] = field(default_factory=dict)
    priority: dict[str, tuple[str, ...]] = field(default_factory=dict)
    source: str = ""
    outranks: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = field(default_factory=dict)
    markers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    guide: Guide | None = None
    penalties: dict[str, float] = field(default_factory=dict)
    compose: dict[str, tuple[Composed, ...]] = field(default_factory=dict)
    part_symptoms: dict[str, frozenset[str]] = field(default_factory=dict)
    part_of: dict[str, str] = field(default_factory=dict)

    def allowed(self, dimension: str) -> frozenset[str]:
        """The codes of one dimension."""
        return frozenset(self.codes[dimension])

    def describe(self, dimension: str, code: str) -> str:
        c = self.codes.get(dimension, {}).get(code)
        return c.description if c else ""


def default_taxonomy_path() -> Path:
    from pipeline.schemas import schemas_dir

    return Path(schemas_dir()) / "taxonomy.yaml"


def load_taxonomy(path: str | Path | None = None, extra: str | Path | None = None) -> Taxonomy:
    """Read a taxonomy file, optionally extended by a second one.

    Parameters
    ----------
    path : path, optional
        A taxonomy YAML of the bundled shape; default ``pipeline/declared/taxonomy.yaml``.
    extra : path, optional
        A YAML with ``dimensions:`` (and any other section) whose codes and aliases are
        added to ``path``'s: aliases of a known code extend it, an unknown code is new.

    Raises
    ------
    ConfigError
        Listing every problem: unreadable file, unknown dimension, an alias claimed by two
        codes of one dimension, a rule naming an unknown code.
    """
    path = Path(path) if path else default_taxonomy_path()
    raw = _read(path)
    if extra:
        raw = _merge(raw, _read(Path(extra)))
    return _build(raw, str(path) + (f" + {extra}" if extra else ""))


def _read(path: Path) -> dict:
    if not path.exists():
        raise ConfigError([f"taxonomy file not found: {path} (set normalize.taxonomy / "
                           "normalize.extra_aliases to an existing YAML file)"], str(path))
    try:
        # the C loader when PyYAML has it: the taxonomy is big and read by every command
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError([f"not valid YAML: {exc}"], str(path)) from None
    if not isinstance(raw, dict):
        raise ConfigError(["expected a mapping with a `dimensions:` section"], str(path))
    return raw


def _implications(raw: dict, section: str, sources, targets, what: str, problems: list[str]) -> dict[str, str]:
    """A ``code -> code`` section of the taxonomy file, each pair checked against the codes."""
    out = {}
    for a, b in (raw.get(section) or {}).items():
        if a not in sources or b not in targets:
            problems.append(f"{section}.{a}: needs {what}, got {a!r} -> {b!r}")
        else:
            out[str(a)] = str(b)
    return out


def _as_list(v) -> list:
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _merge(base: dict, extra: dict) -> dict:
    out = {k: v for k, v in base.items()}
    dims = {d: {c: dict(spec or {}) for c, spec in (codes or {}).items()}
            for d, codes in (base.get("dimensions") or {}).items()}
    for d, codes in (extra.get("dimensions") or {}).items():
        target = dims.setdefault(d, {})
        for c, spec in (codes or {}).items():
            spec = spec if isinstance(spec, dict) else {"aliases": _as_list(spec)}
            cur = target.setdefault(c, {})
            for key in ("aliases", "weak"):
                cur[key] = _as_list(cur.get(key)) + _as_list(spec.get(key))
            if spec.get("description"):
                cur["description"] = spec["description"]
    out["dimensions"] = dims
    for section in ("vague", "priority", "no_context", "markers", "outranks"):
        merged = {d: _as_list(v) for d, v in (base.get(section) or {}).items()}
        for d, v in (extra.get(section) or {}).items():
            merged[d] = merged.get(d, []) + _as_list(v)
        out[section] = merged
    for section in ("xid", "implies_part", "implies_symptom", "resolve", "guide", "penalties", "compose", "part_symptoms",
                    "part_of"):
        out[section] = {**(base.get(section) or {}), **(extra.get(section) or {})}
    return out


def _build(raw: dict, source: str) -> Taxonomy:
    problems: list[str] = []
    dims_raw = raw.get("dimensions") or {}
    for d in dims_raw:
        if d not in DIMENSIONS:
            problems.append(f"dimensions.{d}: unknown dimension (allowed: {', '.join(DIMENSIONS)})")
    codes: dict[str, dict[str, Code]] = {}
    for d in DIMENSIONS:
        seen: dict[str, str] = {}
        codes[d] = {}
        for c, spec in (dims_raw.get(d) or {}).items():
            spec = spec if isinstance(spec, dict) else {"aliases": _as_list(spec)}
            c = str(c)
            strong, weak = [], []
            for key, bucket in (("aliases", strong), ("weak", weak)):
                for a in _as_list(spec.get(key)) + ([c] if key == "aliases" else []):
                    ca = canonical(str(a))
                    if not ca or ca in bucket:
                        continue
                    if seen.get(ca, c) != c:
                        problems.append(f"dimensions.{d}: alias {a!r} (canonical {ca!r}) is claimed by "
                                        f"both {seen[ca]} and {c}")
                        continue
                    seen[ca] = c
                    bucket.append(ca)
            codes[d][c] = Code(c, str(spec.get("description", "")), tuple(strong), tuple(weak))
        if not codes[d]:
            problems.append(f"dimensions.{d}: no codes")
    vague = {d: tuple(dict.fromkeys(v for v in (canonical(str(a)) for a in _as_list((raw.get("vague") or {}).get(d))) if v))
             for d in DIMENSIONS}
    xid: dict[int, str] = {}
    for n, c in (raw.get("xid") or {}).items():
        if str(c) not in codes["symptom"]:
            problems.append(f"xid.{n}: {c!r} is not a symptom code")
            continue
        try:
            xid[int(n)] = str(c)
        except ValueError:
            problems.append(f"xid.{n}: not an Xid number")
    implies = _implications(raw, "implies_part", codes["symptom"], codes["part"], "a symptom code -> a part code", problems)
    implies_symptom = _implications(raw, "implies_symptom", codes["part"], codes["symptom"],
                                    "a part code -> a symptom code", problems)
    part_of = _implications(raw, "part_of", codes["part"], codes["part"], "a part code -> the part code it belongs to",
                            problems)
    no_context = {}
    for d in DIMENSIONS:
        listed = [str(c) for c in _as_list((raw.get("no_context") or {}).get(d))]
        for c in listed:
            if c not in codes[d]:
                problems.append(f"no_context.{d}: {c!r} is not a {d} code")
        no_context[d] = frozenset(c for c in listed if c in codes[d])
    resolve = {d: "priority" for d in DIMENSIONS} | {str(d): str(r) for d, r in (raw.get("resolve") or {}).items()}
    for d, r in resolve.items():
        if r not in _RULES:
            problems.append(f"resolve.{d}: {r!r} is not one of {', '.join(_RULES)}")
    priority = {}
    for d in DIMENSIONS:
        listed = [str(c) for c in _as_list((raw.get("priority") or {}).get(d))]
        for c in listed:
            if c not in codes[d]:
                problems.append(f"priority.{d}: {c!r} is not a {d} code")
        order = [c for c in listed if c in codes[d]]
        priority[d] = tuple(dict.fromkeys(order + list(codes[d])))
    outranks = {}
    for d in DIMENSIONS:
        pairs = []
        for pair in _as_list((raw.get("outranks") or {}).get(d)):
            pair = _as_list(pair)
            only = tuple(canonical(str(a)) for a in _as_list(pair[2])) if len(pair) == 3 else ()
            pair = [str(c) for c in pair[:2]]
            if len(pair) != 2 or pair[1] not in codes[d] or (pair[0] != "*" and pair[0] not in codes[d]):
                problems.append(f"outranks.{d}: {pair!r} must be two {d} codes [stronger, weaker] "
                                "and optionally the stronger code's phrases that carry the rank")
            else:
                pairs.append((pair[0], pair[1], tuple(a for a in only if a)))
        outranks[d] = tuple(pairs)
    markers = {}
    for k, v in (raw.get("markers") or {}).items():
        if k not in MARKERS:
            problems.append(f"markers.{k}: unknown marker list (allowed: {', '.join(MARKERS)})")
            continue
        markers[k] = tuple(dict.fromkeys(m for m in (canonical(str(a)) for a in _as_list(v)) if m))
    guide = _guide(raw.get("guide") or {}, codes, problems)
    penalties = {}
    for k, v in (raw.get("penalties") or {}).items():
        if k not in PENALTIES or not isinstance(v, (int, float)) or not 0 <= v <= 100:
            problems.append(f"penalties.{k}: needs one of {', '.join(PENALTIES)} with 0-100 points, got {v!r}")
        else:
            penalties[str(k)] = float(v)
    if problems:
        raise ConfigError(problems, source)
    compose = _composed(raw.get("compose") or {}, codes, problems)
    if problems:
        raise ConfigError(problems, source)
    part_symptoms = {}
    for part, listed in (raw.get("part_symptoms") or {}).items():
        bad = [c for c in _as_list(listed) if c not in codes["symptom"]]
        if part not in codes["part"] or bad or not listed:
            problems.append(f"part_symptoms.{part}: needs a part code -> a list of symptom codes, got {part!r} -> {listed!r}")
        else:
            part_symptoms[str(part)] = frozenset(str(c) for c in _as_list(listed))
    if problems:
        raise ConfigError(problems, source)
    tax = Taxonomy(codes, vague, xid, implies, implies_symptom, no_context, resolve, priority, source,
                   outranks, markers, guide, penalties, compose, part_symptoms, part_of)
    log.info("taxonomy %s: %s", source, {d: len(codes[d]) for d in DIMENSIONS})
    return tax


def _guide(raw: dict, codes: dict[str, dict[str, Code]], problems: list[str]) -> Guide | None:
    """The ``guide:`` section checked against the codes (absent: the rules are off)."""
    if not raw:
        return None
    known = {"software", "software_actions", "replaced", "no_fault", "no_fault_action", "xid_part", "fixes",
             "reach_after", "reach_before"}
    for k in raw:
        if k not in known:
            problems.append(f"guide.{k}: unknown key (allowed: {', '.join(sorted(known))})")
    parts = [raw.get(k) for k in ("software", "no_fault", "xid_part")]
    for k, c in zip(("software", "no_fault", "xid_part"), parts):
        if c is not None and str(c) not in codes["part"]:
            problems.append(f"guide.{k}: {c!r} is not a part code")
    actions = {k: frozenset(str(a) for a in _as_list(raw.get(k))) for k in ("software_actions", "replaced", "fixes")}
    for k, v in actions.items():
        for a in sorted(v - set(codes["action"])):
            problems.append(f"guide.{k}: {a!r} is not an action code")
    reach = {}
    for k in ("reach_after", "reach_before"):
        v = raw.get(k, 4 if k == "reach_after" else 3)
        if not isinstance(v, int) or not 0 <= v <= 20:
            problems.append(f"guide.{k}: needs a whole number of words 0-20, got {v!r}")
            v = 0
        reach[k] = v
    nfa = raw.get("no_fault_action")
    if nfa is not None and str(nfa) not in codes["action"]:
        problems.append(f"guide.no_fault_action: {nfa!r} is not an action code")
    return Guide(None if parts[0] is None else str(parts[0]), actions["software_actions"], actions["replaced"],
                 None if parts[1] is None else str(parts[1]), None if nfa is None else str(nfa),
                 None if parts[2] is None else str(parts[2]), actions["fixes"],
                 reach["reach_after"], reach["reach_before"])


def _composed(raw: dict, codes: dict[str, dict[str, Code]], problems: list[str]) -> dict[str, tuple[Composed, ...]]:
    """The ``compose:`` section: per dimension and code one spec or a list of them, each with
    ``verbs`` and ``objects`` (or ``objects_from: part``, every strong alias of that dimension
    but those of the codes in ``except``, each followed by one of ``suffixes`` where given) and ``order`` (``both`` or ``verb_first``); canonical."""
    out: dict[str, list[Composed]] = {}
    specs = [(d, c, spec or {}) for d, listed_codes in raw.items() for c, listed in (listed_codes or {}).items()
             for spec in (listed if isinstance(listed, list) else [listed])]
    for d, c, spec in specs:
        if d not in DIMENSIONS or c not in codes.get(d, {}):
            problems.append(f"compose.{d}.{c}: not a code of the taxonomy")
            continue
        objects = [canonical(str(o)) for o in _as_list(spec.get("objects"))]
        source = spec.get("objects_from")
        if source is not None:
            if source not in DIMENSIONS:
                problems.append(f"compose.{d}.{c}.objects_from: {source!r} is not a dimension")
                continue
            skip = {str(x) for x in _as_list(spec.get("except"))}
            named = [a for code, cs in codes[source].items() if code not in skip for a in cs.aliases]
            # ``suffixes``: the part's own firmware ("upgraded the backplane firmware", 更新网卡韧体),
            # every part alias followed by one of them; without, the aliases themselves
            suffixes = [str(x) for x in _as_list(spec.get("suffixes"))]
            objects += [canonical(f"{a} {x}") for a in named for x in suffixes] if suffixes else named
        verbs = [canonical(str(v)) for v in _as_list(spec.get("verbs"))]
        objects = [o for o in objects if len(o) > 1]  # "the", "-": nothing to compose with
        order = spec.get("order", "both")
        if order not in ("both", "verb_first"):
            problems.append(f"compose.{d}.{c}.order: {order!r} is not both or verb_first")
        if not any(verbs) or not objects:
            problems.append(f"compose.{d}.{c}: needs `verbs` and `objects` (or `objects_from`)")
            continue
        out.setdefault(d, []).append(Composed(str(c), tuple(dict.fromkeys(v for v in verbs if v)),
                                              tuple(dict.fromkeys(objects)), order == "verb_first"))
    return {d: tuple(v) for d, v in out.items()}
