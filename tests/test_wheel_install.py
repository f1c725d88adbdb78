"""An installed package works, not only a checkout: build the wheel, install it outside the
repository and run the nightly job from it.

The declared tables, the taxonomy and the Xid catalog are package data
(``pipeline/declared/``); before they were, a non-editable install failed with "no table
declarations at .../site-packages/schemas/tables".
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _pip(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The project's wheel installed into a folder of its own (dependencies from this venv)."""
    tmp = tmp_path_factory.mktemp("wheel")
    try:
        import setuptools
    except ImportError:  # pragma: no cover - the test extra installs it
        pytest.skip("setuptools is not installed")
    if tuple(int(p) for p in setuptools.__version__.split(".")[:1]) < (77,):
        pytest.skip(f"setuptools {setuptools.__version__} < 77 (pip install -e '.[test]' brings it)")
    # The build writes build/ and *.egg-info into the source tree, so it builds a copy.
    src = tmp / "src"
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: nothing to build the wheel from")
    files = listed.stdout
    for rel in filter(None, files.decode().split("\0")):
        s = ROOT / rel
        if s.is_file():
            d = src / rel
            d.parent.mkdir(parents=True, exist_ok=True)
            d.write_bytes(s.read_bytes())
    built = _pip("wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"),
                 cwd=tmp)
    assert built.returncode == 0, built.stderr[-2000:]
    wheels = list((tmp / "dist").glob("fleetfault-*.whl"))
    assert len(wheels) == 1, wheels
    with zipfile.ZipFile(wheels[0]) as z:  # named in the wheel itself, not copied by chance
        assert any(n.startswith("pipeline/declared/tables/") for n in z.namelist())
    site = tmp / "site"
    done = _pip("install", "--no-deps", "--target", str(site), str(wheels[0]), cwd=tmp)
    assert done.returncode == 0, done.stderr[-2000:]
    return site


def test_wheel_ships_the_declarations(installed):
    declared = installed / "pipeline" / "declared"
    assert (declared / "taxonomy.yaml").is_file()
    assert (declared / "xid_catalog.yaml").is_file()
    tables = {p.stem for p in (declared / "tables").glob("*.yaml")}
    repo_tables = {p.stem for p in (ROOT / "pipeline" / "declared" / "tables").glob("*.yaml")}
    assert tables == repo_tables
    assert (installed / "pipeline" / "report" / "templates" / "report.html").is_file()


def test_installed_package_runs_the_nightly_job(installed, tmp_path):
    """simulate, then run, from the installed copy, in a folder outside the repository."""
    env = {k: v for k, v in os.environ.items() if k != "FLEETFAULT_SCHEMAS"}
    env["PYTHONPATH"] = str(installed)

    def fleetfault(*args: str) -> subprocess.CompletedProcess:
        code = "import sys, pipeline.cli as c; sys.exit(c.main(sys.argv[1:]))"
        return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)

    where = subprocess.run([sys.executable, "-c", "import pipeline; print(pipeline.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(installed), where.stdout

    sim = fleetfault("simulate", "--gpus", "8", "--days", "12", "--seed", "3", "--out", "fleet")
    assert sim.returncode == 0, sim.stderr
    res = fleetfault("run", "--data", "fleet", "--warehouse", "w.duckdb", "--out", "out",
                     "--config", "fleet/truth/fleetfault.toml")
    assert res.returncode in (0, 1), res.stderr
    assert (tmp_path / "out" / "report.html").is_file()
    assert (tmp_path / "out" / "predictions.csv").is_file()


def test_wheel_has_no_tests_or_checkout_files(installed):
    names = {p.relative_to(installed).parts[0] for p in installed.iterdir()}
    assert "tests" not in names and "bench" not in names and "schemas" not in names

