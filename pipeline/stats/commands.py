"""``fleetfault afr`` and ``fleetfault survival``: the statistics from the warehouse, or from a
plain lifetime table (``--lifetimes FILE``: id, start, end, failed and grouping columns)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pipeline.cli_app import ConfigOpt, EngineOpt, OutOpt, WarehouseOpt

LifetimesOpt = Annotated[Optional[Path], typer.Option(
    "--lifetimes", help="A lifetime table (CSV or Parquet: id, start, end, failed, and grouping columns) "
                        "instead of the warehouse.")]


def _source(lifetimes: Path | None, cfg, warehouse: Path | None, stack):
    from pipeline.cli_app import existing_warehouse
    from pipeline.run import open_warehouse

    if lifetimes is not None:
        return lifetimes
    return stack.enter_context(open_warehouse(cfg, existing_warehouse(cfg, warehouse), read_only=True))


def register(app: typer.Typer) -> None:
    @app.command()
    def afr(
        out: OutOpt,
        by: Annotated[Optional[str], typer.Option("--by", help="Group by these columns, comma-separated: model, vendor, site, batch, slot, host, month, quarter (or a lifetime table's own columns). Default: the whole fleet.")] = None,
        lifetimes: LifetimesOpt = None,
        warehouse: WarehouseOpt = None,
        engine: EngineOpt = None,
        config: ConfigOpt = None,
    ) -> None:
        """Annualized failure rates per group: GPU-days inside the window, failures, AFR % and its
        exact Poisson interval; groups below stats.min_gpu_days are marked low_exposure."""
        import contextlib

        import pipeline.stats as st
        from pipeline.cli_app import out_console, setup
        from pipeline.output import write_table

        cfg = setup(config, engine=engine)
        with contextlib.ExitStack() as stack:
            table = st.afr(_source(lifetimes, cfg, warehouse, stack), by=by, cfg=cfg)
        write_table(table, out)
        low = int(table["low_exposure"].sum() or 0)
        out_console.print(f"wrote {table.height} groups to {out}"
                          + (f" ({low} below {cfg.stats.min_gpu_days:g} GPU-days, marked low_exposure)" if low else ""))

    @app.command()
    def survival(
        out: OutOpt,
        by: Annotated[Optional[str], typer.Option("--by", help="Group by this column (model, vendor, batch, site, slot, ... or a lifetime table's own). Default: the whole fleet.")] = None,
        lifetimes: LifetimesOpt = None,
        warehouse: WarehouseOpt = None,
        engine: EngineOpt = None,
        config: ConfigOpt = None,
    ) -> None:
        """Kaplan-Meier curves by age per group (delayed entry, censoring), and a Weibull fit per
        group written beside OUT as <name>_weibull<suffix>, its shape read in words."""
        import contextlib

        import pipeline.stats as st
        from pipeline.cli_app import out_console, setup
        from pipeline.output import write_table

        cfg = setup(config, engine=engine)
        with contextlib.ExitStack() as stack:
            source = st.lifetimes(_source(lifetimes, cfg, warehouse, stack), cfg)
            curves = st.survival(source, by=by, cfg=cfg)
            fits = st.weibull(source, by=by, cfg=cfg)
        write_table(curves, out)
        fits_path = out.with_name(f"{out.stem}_weibull{out.suffix or '.csv'}")
        write_table(fits, fits_path)
        out_console.print(f"wrote {curves.height} survival rows to {out} and {fits.height} Weibull fits to {fits_path}")
        for row in fits.iter_rows(named=True):
            out_console.print(f"  {row['group_value']}: {row['pattern']} - {row['interpretation']}")
