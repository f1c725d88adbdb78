"""The nightly ``predict`` stage: features, retraining with a drift check, the ranked list.

Reads ``inventory``, ``gpu_days``, ``xid_events``, ``tickets`` and ``failures``. Writes
``features``, ``model_runs``, ``predictions`` (for the last day of data), ``predict_track``, the models and
their cards under ``paths.models`` (beside the warehouse), ``OUT/predictions.csv`` and the
evaluation (``OUT/metrics/predict.json``, ``OUT/plots/predict_*.csv``). It exists so that
the on-call team can drain a GPU before it takes a large job down with it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.config import Config
from pipeline.output import write_table
from pipeline.predict.features import INPUTS, build_features, data_range
from pipeline.predict.rank import CONTRACT, rank_gpus
from pipeline.predict.track import track_record
from pipeline.predict.train import train, write_placeholder

log = logging.getLogger(__name__)


def models_dir(cfg: Config, warehouse: str | Path) -> Path:
    """``paths.models``, relative to the warehouse's folder unless absolute."""
    base = Path.cwd() if str(warehouse) == ":memory:" else Path(warehouse).resolve().parent
    return cfg.resolve(cfg.paths.models, base=base)


def run(ctx) -> None:
    """Stage: rebuild the features, retrain if configured, rank today's GPUs."""
    cfg, wh = ctx.cfg, ctx.wh
    rep = ctx.report("predict")
    # The feature query runs on the configured engine (Spark: its inputs handed over, the
    # rows written back); the models fit and rank on the features table in the warehouse.
    n = build_features(wh, cfg, engine=ctx.engine_for(INPUTS))
    if n == 0:
        if data_range(wh) is None:
            ctx.note("predict", "no telemetry or Xid data yet: nothing to predict")
        else:
            ctx.note("predict", "no inventory GPU matches the telemetry or Xid data: nothing to predict "
                                "(the list ranks inventory.csv's GPUs in service)")
        write_placeholder(ctx.out_dir, rep.notes)
        return
    mdir = models_dir(cfg, wh.path)
    if cfg.predict.retrain:
        result = train(wh, cfg, mdir, ctx.out_dir, run_id=wh.run_id)
        for note in result.notes:
            ctx.note("predict", note)
    write_placeholder(ctx.out_dir, rep.notes)
    as_of = data_range(wh)[1]
    table, version, notes = rank_gpus(wh, cfg, mdir, as_of)
    for note in notes:
        ctx.note("predict", note)
    write_table(table[CONTRACT], ctx.out_dir / "predictions.csv")
    track = track_record(wh, cfg)
    if len(track):
        ctx.note("predict", f"track record: {int(track['caught'].sum())} of {int(track['failures'].sum())} failures "
                            f"caught by the day's top {cfg.predict.alert_top}, {int(track['false_alarms'].sum())} false alarms")
    rep.rows_out = len(table)
    ctx.note("predict", f"{len(table)} GPUs ranked for {as_of} with {version}")
