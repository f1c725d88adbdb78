"""The bundled sample's night up to ``link``, once on DuckDB and once on Spark, shared by the
Spark parity tests (tests/test_spark*.py) instead of each running its own.

Each night costs tens of seconds of Spark (or DuckDB) work on the sample; the derived-step,
ingest and statistics parity tests only compare tables of the same two nights. The nights are
run on first use and kept for the test process (the Spark tests all run on one xdist worker,
``xdist_group("spark")``); consumers copy a warehouse before changing it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.config import load_config, with_engine
from tests.conftest import ROOT

SAMPLE = ROOT / "data" / "sample"
#: The stages whose tables the statistics read (the rest of the night is not needed here).
UP_TO_LINK = ["inventory", "smi", "xid", "tickets", "normalize", "link"]

_NIGHTS: dict[str, Night] = {}


@dataclass(frozen=True)
class Night:
    """One engine's night on the sample: its warehouse (with the Spark store beside it, as
    ``wh.tables``), stage reports, exit code and, on Spark, the SQL steps Spark ran."""

    wh: Path
    reports: list
    code: int
    steps: tuple[str, ...] = ()

    def copy_to(self, folder: Path) -> Path:
        """The warehouse (and its store) copied into ``folder``; returns the copy's path."""
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.wh, folder / self.wh.name)
        if (self.wh.parent / "wh.tables").is_dir():
            shutil.copytree(self.wh.parent / "wh.tables", folder / "wh.tables")
        return folder / self.wh.name


def sample_night(engine: str, tmp_path_factory) -> Night:
    """The sample through :data:`UP_TO_LINK` on ``engine`` ("duckdb" or "spark", the running
    local session of the ``spark`` fixture), run once per test process."""
    if engine not in _NIGHTS:
        from pipeline.engine.base import Engine
        from pipeline.run import run_pipeline

        cfg = load_config(ROOT / "fleetfault.toml")
        wh = tmp_path_factory.mktemp(f"sample_{engine}") / "wh.duckdb"
        steps: list[str] = []
        with pytest.MonkeyPatch.context() as mp:
            if engine == "spark":
                from pipeline.engine.spark_engine import SparkEngine

                def spy(self, sql, *, step):
                    steps.append(step)
                    return Engine.execute(self, sql, step=step)

                mp.setattr(SparkEngine, "execute", spy)
                cfg = with_engine(cfg, "spark")
            reports, code = run_pipeline(cfg, SAMPLE, wh, wh.parent / "out", stages=UP_TO_LINK)
        assert code in (0, 1)
        _NIGHTS[engine] = Night(wh, reports, code, tuple(steps))
    return _NIGHTS[engine]
