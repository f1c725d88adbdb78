"""The Xid catalog (``pipeline/declared/xid_catalog.yaml``): what each Xid and SXid code means.

Data, not code: a row per Xid code and a row per SXid class (a range of codes), each with
NVIDIA's mnemonic, cause flags, a severity, the resolution bucket, whether it indicates
hardware, the contract symptom_code it maps to and its source; and a row per driver message
read as an event of its own kind (``RmInitAdapter``, code 0). Codes the catalog lacks are
classified ``severity='unknown'`` and kept.
"""

from __future__ import annotations

import functools
from pathlib import Path

import polars as pl
import yaml

from pipeline.errors import SchemaError
from pipeline.schemas import schemas_dir

# libyaml's loader when present: the pure-Python one takes half a second for this file.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SEVERITIES = ("info", "app", "warn", "critical")
CAUSES = ("hardware", "driver", "application", "bus", "thermal", "memory")
SYMPTOMS = ("FELL_OFF_BUS", "MEMORY_UNCORRECTABLE", "MEMORY_CORRECTABLE", "ROW_REMAP", "OVERHEAT",
            "FAN_FAULT", "POWER_FAULT", "NVLINK_ERROR", "PCIE_ERROR", "GSP_ERROR", "HANG", "PERFORMANCE",
            "APP_FAULT", "DRIVER_ISSUE", "PHYSICAL_DAMAGE", "BOOT_FAILURE", "OTHER")

COLUMNS = {"kind": pl.Utf8, "code_lo": pl.Int32, "code_hi": pl.Int32, "mnemonic": pl.Utf8,
           "description": pl.Utf8, "causes": pl.List(pl.Utf8), "severity": pl.Utf8, "action": pl.Utf8,
           "hardware": pl.Boolean, "symptom_code": pl.Utf8, "source": pl.Utf8}


def catalog_path() -> Path:
    return schemas_dir() / "xid_catalog.yaml"


@functools.cache
def load_catalog(path: str | None = None) -> pl.DataFrame:
    """The catalog as a frame: one row per Xid code (``code_lo == code_hi``) or SXid class.

    Raises
    ------
    SchemaError
        Listing every row whose severity, cause, symptom or source is not allowed.
    """
    p = Path(path) if path else catalog_path()
    raw = yaml.load(p.read_text(encoding="utf-8"), Loader=_LOADER)
    sources = raw.get("sources") or {}
    rows, problems = [], []
    specs = [("Xid", int(code), int(code), spec) for code, spec in (raw.get("codes") or {}).items()]
    specs += [("SXid", int(s["first"]), int(s["last"]), s) for s in raw.get("sxid_classes") or []]
    specs += [(str(s.get("kind")), int(s["code"]), int(s["code"]), s) for s in raw.get("driver_events") or []]
    for kind, lo, hi, s in specs:
        where = f"{p.name}: {kind} {lo}" + (f"-{hi}" if hi != lo else "")
        if s.get("severity") not in SEVERITIES:
            problems.append(f"{where}: severity {s.get('severity')!r} not one of {SEVERITIES}")
        if s.get("symptom_code") not in SYMPTOMS:
            problems.append(f"{where}: symptom_code {s.get('symptom_code')!r} not in the contract taxonomy")
        bad = [c for c in s.get("causes") or [] if c not in CAUSES]
        if bad:
            problems.append(f"{where}: causes {bad} not among {CAUSES}")
        if s.get("source") not in sources:
            problems.append(f"{where}: source {s.get('source')!r} is not listed under 'sources'")
        rows.append({"kind": kind, "code_lo": lo, "code_hi": hi, "mnemonic": s.get("mnemonic"),
                     "description": s.get("description"), "causes": list(s.get("causes") or []),
                     "severity": s.get("severity"), "action": s.get("action"),
                     "hardware": bool(s.get("hardware")), "symptom_code": s.get("symptom_code"),
                     "source": sources.get(s.get("source"), s.get("source"))})
    if problems:
        raise SchemaError("Xid catalog problems:\n  " + "\n  ".join(problems))
    return pl.DataFrame(rows, schema=COLUMNS)


def classify(kind: str, code: int) -> dict:
    """The catalog row for one event code, or an ``unknown`` row.

    >>> classify("Xid", 79)["symptom_code"]
    'FELL_OFF_BUS'
    >>> classify("RmInitAdapter", 0)["symptom_code"]
    'BOOT_FAILURE'
    >>> classify("Xid", 9999)["severity"]
    'unknown'
    """
    cat = load_catalog()
    hit = cat.filter((pl.col("kind") == kind) & (pl.col("code_lo") <= code) & (pl.col("code_hi") >= code))
    if hit.height:
        return hit.row(0, named=True)
    return {"kind": kind, "code_lo": code, "code_hi": code, "mnemonic": None, "description": None,
            "causes": [], "severity": "unknown", "action": None, "hardware": None,
            "symptom_code": None, "source": None}
