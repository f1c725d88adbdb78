"""Shared fixtures. Random seeds are printed so a failing property test can be replayed."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest

from hypothesis import settings as _hypothesis_settings
from hypothesis.configuration import set_hypothesis_home_dir

# Hypothesis keeps its caches and example database in ./.hypothesis; tests do not write into
# the checkout, so they live in the temporary directory (kept across runs on one machine).
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "fleetfault-hypothesis")

# Property tests draw the same examples on every run (``derandomize``), so a run of the
# README's test command, CI's included, passes or fails the same way on the same tree; a
# failure is then a regression, reproducible at once. New examples are drawn by choice:
# ``--hypothesis-profile=explore`` (README, Development), the way parser bugs are hunted.
_hypothesis_settings.register_profile("repeatable", derandomize=True, database=None, print_blob=True)
_hypothesis_settings.register_profile("explore", derandomize=False, print_blob=True)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
EXTERNAL = SHARED / "data" / "external"


def pytest_sessionstart(session):
    """Snapshot the checkout (the controller only, under xdist): see :func:`pytest_sessionfinish`."""
    from tests.repo_guard import snapshot

    if not hasattr(session.config, "workerinput"):
        session.config._fleetfault_repo = snapshot(ROOT)


def pytest_sessionfinish(session, exitstatus):
    """Fail the suite when it left ``out/``, a warehouse, models or any other file in the
    checkout new or changed: tests write under tmp_path only."""
    from tests.repo_guard import changes, snapshot

    before = getattr(session.config, "_fleetfault_repo", None)
    after = snapshot(ROOT) if before is not None else None
    if after is None or not (diff := changes(before, after)):
        return
    shown = ", ".join(diff[:10]) + (f" and {len(diff) - 10} more" if len(diff) > 10 else "")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "the tests wrote into the checkout", red=True)
        reporter.write_line(f"{shown}: tests must write under tmp_path only (or these files were edited while "
                            "the tests ran)")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


GROUPING_BROKEN = ("--dist loadgroup would ignore every xdist_group with this pytest and pytest-xdist "
                   "(xdist 3.8 renames grouped tests through an attribute pytest 9.2 no longer reads): "
                   "install the versions the test extra pins (pip install -e '.[test]')")


def pytest_configure(config):
    """Stop before the workers start when ``--dist loadgroup`` cannot group: the sample and Spark
    fixtures are built once per worker only if their tests share one, so a silently ignored
    group costs minutes, not a failure (hence ``pytest<9.2`` in the ``test`` extra)."""
    if config.getoption("dist", None) != "loadgroup" or hasattr(config, "workerinput"):
        return
    from importlib.metadata import version

    from packaging.version import Version

    if Version(version("pytest")) >= Version("9.2") and Version(version("pytest-xdist")) < Version("3.9"):
        pytest.exit(GROUPING_BROKEN, returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_collection_finish(session):
    """The same check on what a worker collected, for versions not known yet: xdist marks a
    grouped test by renaming it ``<nodeid>@<group>``."""
    config = session.config
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):
        return
    if any(item.get_closest_marker("xdist_group") and "@" not in item.nodeid for item in session.items):
        pytest.exit(GROUPING_BROKEN, returncode=pytest.ExitCode.USAGE_ERROR)


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


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole test session (starting one costs many seconds).

    Skips without pyspark or a Java runtime, except under ``FLEETFAULT_REQUIRE_SPARK=1`` (CI
    sets it), where that is a failure. Tests that use it carry ``pytest.mark.xdist_group("spark")``
    so that ``--dist loadgroup`` starts Spark on one worker only.
    """
    required = os.environ.get("FLEETFAULT_REQUIRE_SPARK") == "1"

    def missing(why: str):
        if required:
            pytest.fail(f"FLEETFAULT_REQUIRE_SPARK=1 but {why}")
        pytest.skip(why)

    try:
        import pyspark  # noqa: F401
    except ImportError:
        missing("pyspark is not installed (pip install -e '.[spark]')")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        missing("no Java runtime (apt-get install default-jre-headless)")
    from pipeline.config import SparkSettings
    from pipeline.engine.spark_engine import spark_session

    # Tiny tables: two shuffle partitions, and no adaptive planning or code generation, whose
    # fixed cost per query is far above the work itself at this size.
    session = spark_session(SparkSettings(master="local[2]", app_name="fleetfault-tests", conf={
        "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
        "spark.sql.adaptive.enabled": "false", "spark.sql.codegen.wholeStage": "false",
    }))
    yield session
    session.stop()
