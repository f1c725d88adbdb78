"""``fleetfault predict``: the ranked list of GPUs likely to fail, from the warehouse."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline.cli_app import EngineOpt, OutOpt, WarehouseOpt
from pipeline.errors import UsageError


def register(app: typer.Typer) -> None:
    @app.command()
    def predict(
        out: OutOpt,
        as_of: Annotated[Optional[str], typer.Option("--as-of", help="Day to rank (YYYY-MM-DD). Default: the last day of data.")] = None,
        warehouse: WarehouseOpt = None,
        engine: EngineOpt = None,
        config: Annotated[Optional[Path], typer.Option("--config", help="Config file (TOML).")] = None,
    ) -> None:
        """Rank the GPUs in service on the last day of data (or --as-of) by the calibrated
        probability of a replacement within predict.horizon_days, with the evidence in words.

        Uses the model the nightly run promoted for beating the evidence score out of fold;
        without one, the evidence score (docs/predict.md).
        """
        from pipeline.cli_app import existing_warehouse, out_console, setup
        from pipeline.output import write_table
        from pipeline.predict.features import build_features, data_range
        from pipeline.predict.rank import CONTRACT, rank_gpus
        from pipeline.predict.stage import models_dir
        from pipeline.run import open_warehouse

        cfg = setup(config, engine=engine)
        day = None
        if as_of is not None:
            try:
                day = date.fromisoformat(as_of)
            except ValueError:
                raise UsageError(f"--as-of {as_of!r}: not a date; write it as YYYY-MM-DD") from None
        path = existing_warehouse(cfg, warehouse)
        with open_warehouse(cfg, path) as wh:
            rng = data_range(wh)
            if rng is None:
                raise UsageError(f"--warehouse {path}: holds no telemetry or Xid data; run `fleetfault run` first")
            if day is not None and not rng[0] <= day <= rng[1]:
                raise UsageError(f"--as-of {day}: outside the data, which runs from {rng[0]} to {rng[1]}")
            day = day or rng[1]
            # Stale (data appended) or built by an older fleetfault (its new columns are null).
            if wh.engine.scalar("SELECT max(day) FROM features", step="predict: features' last day") != rng[1] or \
                    wh.engine.scalar("SELECT count(*) FROM features WHERE xc_app_30d IS NULL", step="predict: old features"):
                build_features(wh, cfg)
            table, version, notes = rank_gpus(wh, cfg, models_dir(cfg, path), day)
        write_table(table[CONTRACT], out)
        for note in notes:
            out_console.print(f"[dim]predict:[/dim] {note}")
        out_console.print(f"wrote {len(table)} GPUs ranked for {day} ({version}) to {out}")
