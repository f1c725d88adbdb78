"""The predicted-failure list: every GPU in service on a day, ranked by calibrated risk.

Reads ``features`` (the day's rows, and the labelled history to calibrate the evidence
score) and the current model under ``paths.models``. Writes ``predictions`` (the day's rows
replaced) and returns the contract columns ``rank, serial, host, pci_bus_id, model, risk,
horizon_days, top_factors``. The evidence score (:mod:`pipeline.predict.evidence`) ranks
unless a model was promoted for beating it on the fleet's own history; ``model_version``
says which ranked (``evidence``: calibrated on the fleet's failures, ``evidence-prior``: on
the published prior, else the model's version). Ties of risk are broken by the evidence
terms, so GPUs with different evidence never share a risk, and equal evidence shares a rank.
"""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from pipeline.config import Config
from pipeline.errors import FleetfaultError
from pipeline.predict import evidence, evidence_words, explain, model
from pipeline.predict.features import FEATURES
from pipeline.vocab.sql import literal
from pipeline.warehouse import Warehouse

log = logging.getLogger(__name__)

CONTRACT = ["rank", "serial", "host", "pci_bus_id", "model", "risk", "horizon_days", "top_factors"]

#: GPUs the model explains one by one (occlusion costs a prediction per group); the
#: evidence score explains every GPU.
EXPLAIN_TOP = 500


def rank_gpus(wh: Warehouse, cfg: Config, models_dir: Path, as_of: date) -> tuple[pd.DataFrame, str, list[str]]:
    """Score the GPUs in service on ``as_of``; returns (table, model version, notes).

    The table has the contract columns plus ``as_of`` and ``model_version``; it also
    replaces that day's rows of ``predictions``.
    """
    with threadpool_limits(cfg.predict.threads, "openmp"):
        return _rank(wh, cfg, models_dir, as_of)


def _rank(wh: Warehouse, cfg: Config, models_dir: Path, as_of: date) -> tuple[pd.DataFrame, str, list[str]]:
    notes: list[str] = []
    cols = ", ".join(f'"{c}"' for c in ("serial", "host", "pci_bus_id", "day", *FEATURES))
    frame = wh.engine.pandas(f"SELECT {cols} FROM features WHERE day = {literal(as_of)} ORDER BY serial",
                             step="predict: day's features")
    ev = calibrated_evidence(wh, cfg)
    notes += ev.notes_
    terms = ev.contributions(frame)
    est, card = _current(models_dir, notes)
    if est is not None and len(frame):
        reference = card["reference"]

        def predict(f: pd.DataFrame) -> np.ndarray:
            return model.predict_risk(est, card, f)

        risk = predict(frame)
        version = card["version"]
    else:
        risk = ev.predict_proba(frame)[:, 1] if len(frame) else np.array([])
        version = ev.version
    idx, rank, risk = evidence.order(risk, evidence.tiebreak_key(frame, terms, ev.weights))
    frame, terms = frame.iloc[idx].reset_index(drop=True), terms.iloc[idx].reset_index(drop=True)
    records = frame.to_dict("records")
    if version.startswith("evidence"):
        factors = [evidence_words.describe(r, c) for r, c in zip(records, terms.to_dict("records"))]
    else:
        factors = ["" for _ in range(len(frame))]
        top = frame.head(EXPLAIN_TOP)
        if len(top):
            contrib = explain.contributions(top, predict, reference).to_dict("records")
            factors[: len(top)] = [explain.describe(r, c) for r, c in zip(records, contrib)]
    out = pd.DataFrame({
        "rank": rank.astype("int32"), "serial": frame["serial"], "host": frame["host"],
        "pci_bus_id": frame["pci_bus_id"], "model": frame["model"], "risk": risk.astype(float),
        "horizon_days": np.full(len(frame), cfg.predict.horizon_days, dtype="int32"),
        "top_factors": [f or None for f in factors], "as_of": as_of, "model_version": version,
    })
    with wh.transaction():
        wh.engine.execute(f"DELETE FROM predictions WHERE as_of = {literal(as_of)}", step="predict: clear day")
        wh.insert("predictions", out)
    return out, version, notes


def calibrated_evidence(wh: Warehouse, cfg: Config) -> evidence.EvidenceScore:
    """The evidence score calibrated on every labelled GPU-day there is (or on the prior)."""
    p = cfg.predict
    ev = evidence.EvidenceScore(horizon_days=p.horizon_days, min_failures=p.min_failures,
                                weights_file=str(cfg.resolve(p.evidence_file)) if p.evidence_file else None)
    cols = ", ".join(f'"{c}"' for c in ("serial", "host", "day", "label", *evidence.INPUTS))
    seen = wh.engine.pandas(f"SELECT {cols} FROM features WHERE label IS NOT NULL", step="predict: evidence calibration")
    return ev.fit(seen, seen["label"].astype(bool).to_numpy())


def _current(models_dir: Path, notes: list[str]):
    """The promoted model and card, or (None, last card or None) when there is none usable."""
    version = model.current_version(models_dir)
    if version is None:
        return None, None
    try:
        est, card = model.load(models_dir, version)
    except FleetfaultError as exc:
        notes.append(f"current model unusable ({exc}): the evidence score ranks")
        return None, None
    if card.get("features") != list(FEATURES):
        notes.append(f"model {version} was trained on other features: the evidence score ranks until one is retrained")
        return None, card
    return est, card
