"""The evidence score's weights (``pipeline/declared/predict_evidence.yaml``): data, read and checked once.

Reads the weights file and the Xid catalog; writes nothing. Each catalog code is put in
one evidence class by its ``symptom_code`` (codes listed under a class win over symptoms;
``severity: app`` codes are always class ``app``), so the features and the score agree on
what "a memory Xid" is. Problems are reported together, naming the file and the key.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from pipeline.errors import SchemaError
from pipeline.ingest.kernel.catalog import load_catalog
from pipeline.schemas import schemas_dir
from pipeline.vocab.sql import literal

#: The classes, in the order features and explanations list them (strongest kind first).
XID_CLASSES: tuple[str, ...] = ("fatal", "memory", "nvlink", "pcie", "gsp_hang", "sbe", "driver", "app", "other")
#: The classes that say the GPU's hardware is at fault: the evidence a fix (a reseat, a reset,
#: a riser swap) answers, so a fix after them discounts them (``recency.after_fix``).
HW_CLASSES: tuple[str, ...] = ("fatal", "memory", "nvlink", "pcie", "gsp_hang", "sbe")

#: The non-Xid terms and the extra parameters each takes besides ``weight`` and ``doc``.
TERMS: dict[str, tuple[str, ...]] = {
    "ecc_uncorrected": (), "ecc_corrected": ("floor_per_day", "scale_per_day"), "ecc_trend": ("cap",),
    "retired_pages": (), "retired_recent": (), "remap_pending": (), "remap_failed": (),
    "remap_uncorrectable": (), "pcie_narrow": (), "pcie_deficit": ("scale_lanes",), "pcie_replay": ("scale",),
    "heat": ("margin_c",), "thermal_throttle": (), "lost_samples": ("margin",), "lost_markers": (),
    "sxid_host": (), "reseats": (), "tickets": (), "ticket_opened": (),
}


def weights_path() -> Path:
    return schemas_dir() / "predict_evidence.yaml"


@dataclass(frozen=True)
class Weights:
    """The parsed weights file (see the file's comments for each field's meaning)."""

    recency: dict[str, float]
    xid_weight: dict[str, float]
    xid_doc: dict[str, str]
    class_symptoms: dict[str, tuple[str, ...]]
    class_codes: dict[str, tuple[int, ...]]
    terms: dict[str, dict[str, float]]
    term_doc: dict[str, str]
    prior_default_pct: float
    prior_generations: tuple[tuple[tuple[str, ...], float, str], ...]
    sources: dict[str, str]
    code_order: tuple[int, ...]
    path: str

    def prior_afr_pct(self, model: str | None) -> tuple[float, str]:
        """(AFR %, source key) of a GPU model from the published prior (first match wins)."""
        name = (model or "").upper()
        for patterns, afr, source in self.prior_generations:
            if any(p.upper() in name for p in patterns):
                return afr, source
        return self.prior_default_pct, "default"


def _num(v, where: str, problems: list[str], *, positive: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (positive and v == 0):
        problems.append(f"{where}: {v!r} is not a {'positive' if positive else 'non-negative'} number")
        return 0.0
    return float(v)


@functools.cache
def load_weights(path: str | None = None) -> Weights:
    """Read and check the weights file (default: the bundled one).

    Raises
    ------
    SchemaError
        Listing every unknown key, missing term and bad number together.
    """
    p = Path(path) if path else weights_path()
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SchemaError(f"{p}: cannot read the evidence weights ({exc})") from None
    problems: list[str] = []
    extra = set(raw) - {"recency", "xid_classes", "terms", "prior_afr_pct", "sources", "code_order"}
    if extra:
        problems.append(f"{p.name}: unknown top-level keys {sorted(extra)}")
    rec = raw.get("recency") or {}
    recency = {k: _num(rec.get(k), f"{p.name}: recency.{k}", problems) for k in ("today", "week", "month", "after_fix")}
    if not recency["today"] >= recency["week"] >= recency["month"]:
        problems.append(f"{p.name}: recency must not grow with age (today >= week >= month), got {recency}")
    if not recency["after_fix"] <= 1.0:
        problems.append(f"{p.name}: recency.after_fix must be at most 1 (a fix never adds weight), got {recency['after_fix']}")
    classes = raw.get("xid_classes") or {}
    if set(classes) != set(XID_CLASSES):
        problems.append(f"{p.name}: xid_classes must be exactly {list(XID_CLASSES)}, got {list(classes)}")
    xw, xdoc, sym, codes = {}, {}, {}, {}
    for k in XID_CLASSES:
        c = classes.get(k) or {}
        xw[k] = _num(c.get("weight"), f"{p.name}: xid_classes.{k}.weight", problems)
        xdoc[k] = str(c.get("doc") or k)
        sym[k] = tuple(c.get("symptoms") or ())
        codes[k] = tuple(int(x) for x in c.get("codes") or ())
    if xw.get("app", 0.0) != 0.0:
        problems.append(f"{p.name}: xid_classes.app.weight must be 0 (an application fault alone never raises risk)")
    terms_raw = raw.get("terms") or {}
    if set(terms_raw) != set(TERMS):
        problems.append(f"{p.name}: terms must be exactly {sorted(TERMS)}; missing {sorted(set(TERMS) - set(terms_raw))}, "
                        f"unknown {sorted(set(terms_raw) - set(TERMS))}")
    terms, tdoc = {}, {}
    for name, params in TERMS.items():
        t = terms_raw.get(name) or {}
        bad = set(t) - {"weight", "doc", *params}
        if bad:
            problems.append(f"{p.name}: terms.{name}: unknown keys {sorted(bad)}")
        terms[name] = {"weight": _num(t.get("weight"), f"{p.name}: terms.{name}.weight", problems),
                       **{k: _num(t.get(k), f"{p.name}: terms.{name}.{k}", problems, positive=k.startswith("scale"))
                          for k in params}}
        tdoc[name] = str(t.get("doc") or name)
    prior = raw.get("prior_afr_pct") or {}
    sources = {str(k): str(v) for k, v in (raw.get("sources") or {}).items()}
    gens = []
    for i, g in enumerate(prior.get("generations") or []):
        src = str(g.get("source"))
        if src not in sources:
            problems.append(f"{p.name}: prior_afr_pct.generations[{i}].source {src!r} is not listed under sources")
        gens.append((tuple(str(m) for m in g.get("match") or ()),
                     _num(g.get("afr_pct"), f"{p.name}: prior_afr_pct.generations[{i}].afr_pct", problems, positive=True), src))
    default = _num(prior.get("default"), f"{p.name}: prior_afr_pct.default", problems, positive=True)
    if problems:
        raise SchemaError("evidence weights problems:\n  " + "\n  ".join(problems))
    code_order = tuple(int(c) for c in raw.get("code_order") or ())
    return Weights(recency, xw, xdoc, sym, codes, terms, tdoc, default, tuple(gens), sources, code_order, str(p))


def xid_class_of(kind: str, lo: int, severity: str | None, symptom: str | None, w: Weights | None = None) -> str:
    """The evidence class of a catalog row."""
    w = w or load_weights()
    if kind == "SXid":
        return "nvlink"
    if severity == "app":
        return "app"
    for k in XID_CLASSES:
        if lo in w.class_codes[k]:
            return k
    for k in XID_CLASSES:
        if symptom in w.class_symptoms[k]:
            return k
    return "other"


@functools.cache
def xid_class_values() -> str:
    """A SQL relation ``(kind, lo, hi, cls)``: every catalog row with its evidence class."""
    rows = [f"({literal(r['kind'])}, {literal(r['code_lo'])}, {literal(r['code_hi'])}, "
            f"{literal(xid_class_of(r['kind'], r['code_lo'], r['severity'], r['symptom_code']))})"
            for r in load_catalog().iter_rows(named=True)]
    return "SELECT * FROM (VALUES " + ", ".join(rows) + ") AS t(kind, lo, hi, cls)"
