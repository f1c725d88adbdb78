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
_RULES = ("last", "priority")


@dataclass(frozen=True)
class Code:
    """One code of a dimension: its description and canonical aliases."""

    code: str
    description: str
    aliases: tuple[str, ...]
    weak: tuple[str, ...] = ()


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
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
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
    for section in ("vague", "priority", "no_context"):
        merged = {d: _as_list(v) for d, v in (base.get(section) or {}).items()}
        for d, v in (extra.get(section) or {}).items():
            merged[d] = merged.get(d, []) + _as_list(v)
        out[section] = merged
    for section in ("xid", "implies_part", "implies_symptom", "resolve"):
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
    if problems:
        raise ConfigError(problems, source)
    tax = Taxonomy(codes, vague, xid, implies, implies_symptom, no_context, resolve, priority, source)
    log.info("taxonomy %s: %s", source, {d: len(codes[d]) for d in DIMENSIONS})
    return tax
