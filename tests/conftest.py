"""Shared fixtures. Random seeds are printed so a failing property test can be replayed."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
EXTERNAL = SHARED / "data" / "external"


def pytest_report_header(config):
    seed = os.environ.get("FLEETFAULT_TEST_SEED", "0")
    random.seed(int(seed))
    return f"fleetfault test seed: {seed} (set FLEETFAULT_TEST_SEED to change)"


@pytest.fixture
def external() -> Path:
    """The real public data in ../shared/data/external; skips where it is absent."""
    if not EXTERNAL.is_dir():
        pytest.skip("../shared/data/external is not present")
    return EXTERNAL


@pytest.fixture
def wh(tmp_path):
    from pipeline.warehouse import Warehouse

    with Warehouse(tmp_path / "wh.duckdb") as w:
        yield w


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """Run the CLI in-process: ``cli("run", "--data", ...)`` returns (exit code, stdout, stderr)."""
    from pipeline.cli import main

    def _run(*args, capsys=None):
        return main([str(a) for a in args])

    monkeypatch.chdir(tmp_path)
    return _run


@pytest.fixture(scope="session")
def sample_warehouse(tmp_path_factory):
    """The nightly job on the bundled sample, once per test worker: (warehouse, out folder).

    Tests that use it carry ``pytest.mark.xdist_group("sample")`` so that ``--dist loadgroup``
    keeps them on one worker and the sample is run once.
    """
    from pipeline.config import load_config
    from pipeline.run import run_pipeline

    tmp = tmp_path_factory.mktemp("sample")
    wh, out = tmp / "fleetfault.duckdb", tmp / "out"
    cfg = load_config(ROOT / "fleetfault.toml")
    _, code = run_pipeline(cfg, ROOT / "data" / "sample", wh, out)
    assert code in (0, 1), f"the run exited {code}"
    return wh, out
