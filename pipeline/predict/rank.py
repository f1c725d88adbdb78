"""The predicted-failure list: every GPU in service on a day, ranked by calibrated risk.

Reads ``features`` (the day's rows) and the current model under ``paths.models``.
Writes ``predictions`` (the day's rows replaced) and returns the contract columns
``rank, serial, host, pci_bus_id, model, risk, horizon_days, top_factors``. Without a
promoted model (too little history, no failures yet, or a model file that will not load)
the rule baseline ranks the GPUs and ``model_version`` says ``rules``.
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
from pipeline.predict import explain, model
from pipeline.predict.features import FEATURES
from pipeline.predict.rules import RuleBaseline
from pipeline.warehouse import Warehouse

log = logging.getLogger(__name__)

CONTRACT = ["rank", "serial", "host", "pci_bus_id", "model", "risk", "horizon_days", "top_factors"]

#: GPUs explained one by one (the rest get their factors only if they rank this high).
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
    cols = ", ".join(f'"{c}"' for c in ("serial", "host", "pci_bus_id", *FEATURES))
    frame = wh.df(f"SELECT {cols} FROM features WHERE day = ? ORDER BY serial", [as_of], step="predict: day's features")
    est, card = _current(models_dir, notes)
    if est is not None and len(frame):
        levels, reference = card["levels"], card["reference"]

        def predict(f: pd.DataFrame) -> np.ndarray:
            return est.predict_proba(model.design_matrix(f, levels))[:, 1]

        risk = predict(frame) if len(frame) else np.array([])
        version = card["version"]
    else:
        if card:
            rules = RuleBaseline.from_dict(card["baseline"])
        else:  # calibrate the rules on every labelled day there is
            seen = wh.df("SELECT xid_crit_7d, xid_crit_1d, label FROM features WHERE label IS NOT NULL",
                         step="predict: rule calibration")
            rules = RuleBaseline().fit(seen, seen["label"].astype(bool).to_numpy())
        risk = rules.predict_proba(frame)[:, 1] if len(frame) else np.array([])
        version = "rules" if rules.calibrated_ else "rules-uncalibrated"
        if not rules.calibrated_:
            notes.append("rule baseline risks are prior guesses, not calibrated (no failures seen yet)")
    frame = frame.assign(risk=risk).sort_values(["risk", "serial"], ascending=[False, True]).reset_index(drop=True)
    factors = ["" for _ in range(len(frame))]
    top = frame.head(EXPLAIN_TOP)
    records = top.to_dict("records")
    if version.startswith("rules"):
        factors[: len(top)] = [explain.describe(r) for r in records]
    elif len(top):
        contrib = explain.contributions(top, predict, reference).to_dict("records")
        factors[: len(top)] = [explain.describe(r, c) for r, c in zip(records, contrib)]
    out = pd.DataFrame({
        "rank": np.arange(1, len(frame) + 1, dtype="int32"), "serial": frame["serial"], "host": frame["host"],
        "pci_bus_id": frame["pci_bus_id"], "model": frame["model"], "risk": frame["risk"].astype(float),
        "horizon_days": np.full(len(frame), cfg.predict.horizon_days, dtype="int32"),
        "top_factors": [f or None for f in factors], "as_of": as_of, "model_version": version,
    })
    with wh.transaction():
        wh.sql("DELETE FROM predictions WHERE as_of = ?", [as_of], step="predict: clear day")
        wh.insert("predictions", out)
    return out, version, notes


def _current(models_dir: Path, notes: list[str]):
    """The promoted model and card, or (None, last card or None) when there is none usable."""
    version = model.current_version(models_dir)
    if version is None:
        return None, None
    try:
        est, card = model.load(models_dir, version)
    except FleetfaultError as exc:
        notes.append(f"current model unusable ({exc}): using the rule baseline")
        return None, None
    if card.get("features") != list(FEATURES):
        notes.append(f"model {version} was trained on other features: using the rule baseline until retrained")
        return None, card
    return est, card
