"""A tiny stand-in for ``pipeline.normalize.matcher.Matcher`` with its interface.

The ingest, stage, link and review tests exercise their own logic with it, so they do
not depend on the real matcher's vocabulary. It codes a text when a known alias is a
substring of it, and takes learned answers by canonical text (so near variants that only
differ in case, width or spacing are coded too, as with the real one).
"""

from __future__ import annotations

import re
import unicodedata

import polars as pl

ALIASES = {
    "part": {"显卡": "GPU", "gpu": "GPU", "内存": "DIMM", "dimm": "DIMM", "fan": "FAN", "风扇": "FAN", "psu": "PSU"},
    "symptom": {"掉卡": "FELL_OFF_BUS", "fell off": "FELL_OFF_BUS", "ecc": "MEMORY_UNCORRECTABLE",
                "过热": "OVERHEAT", "overheat": "OVERHEAT", "noise": "FAN_FAULT"},
    "action": {"更换": "REPLACE", "replace": "REPLACE", "rma": "REPLACE", "reseat": "RESEAT", "重启": "REBOOT",
               "reboot": "REBOOT"},
}
CODES = {
    "part": ["GPU", "DIMM", "FAN", "PSU", "NONE"],
    "symptom": ["FELL_OFF_BUS", "MEMORY_UNCORRECTABLE", "OVERHEAT", "FAN_FAULT", "OTHER"],
    "action": ["REPLACE", "RESEAT", "REBOOT", "NONE"],
}


def canonical(text: str) -> str:
    s = unicodedata.normalize("NFKC", text or "").lower()
    return re.sub(r"[\s\W_]+", "", s)


class FakeMatcher:
    def __init__(self, learned=()):
        self.learned = {(d, canonical(t)): c for d, t, c in learned}
        self.calls = 0

    @classmethod
    def load(cls, cfg=None, learned=()):
        return cls(learned)

    def codes(self, dimension):
        return CODES[dimension]

    def _one(self, dim: str, text: str | None) -> tuple[str | None, float]:
        if not text:
            return None, 0.0
        key = canonical(text)
        if (dim, key) in self.learned:
            return self.learned[(dim, key)], 100.0
        for alias, code in ALIASES[dim].items():
            if canonical(alias) in key:
                return code, 95.0
        return None, 40.0

    def code_frame(self, df):
        self.calls += 1
        df = df if isinstance(df, pl.DataFrame) else pl.from_pandas(df)
        cols = {}
        review = [False] * df.height
        for dim in ALIASES:
            got = [self._one(dim, t) for t in df[f"{dim}_text"].to_list()]
            cols[f"{dim}_code"] = pl.Series([c for c, _ in got], dtype=pl.Utf8)
            cols[f"{dim}_score"] = pl.Series([s for _, s in got], dtype=pl.Float64)
            review = [r or (c is None) for r, (c, _) in zip(review, got)]
        cols["review"] = pl.Series(review, dtype=pl.Boolean)
        return df.with_columns(**cols)

    def suggest(self, dimension, text, k=3):
        return [(c, 50.0 - 10 * i) for i, c in enumerate(CODES[dimension][:k])]


def install(monkeypatch):
    """Make the normalize stage, review and CLI use the fake matcher."""
    from pipeline.normalize import stage

    monkeypatch.setattr(stage, "load_matcher", lambda cfg, learned=None: FakeMatcher.load(cfg, learned or []))
    monkeypatch.setattr(stage, "canonical_key", canonical)
