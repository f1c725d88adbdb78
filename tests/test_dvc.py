"""`dvc repro` reproduces `fleetfault run` on the sample (DVC is the optional [dvc] extra)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.run import STAGES
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_dvc_yaml_names_every_stage_and_real_params():
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    cmds = " ".join(s["cmd"] for s in spec["stages"].values())
    for name, _ in STAGES:
        assert f"--stage {name}" in cmds, f"dvc.yaml does not run stage {name}"
    import tomllib

    from pipeline.config import Config

    sections = {f for f in Config.__dataclass_fields__}
    for stage in spec["stages"].values():
        for params in stage.get("params", []):
            for key in params["fleetfault.toml"]:
                assert key.split(".")[0] in sections, f"dvc.yaml names unknown config section {key}"
    tomllib.loads((ROOT / "fleetfault.toml").read_text())


def test_dvc_repro_runs_the_pipeline(tmp_path):
    dvc = shutil.which("dvc", path=str(Path(sys.executable).parent)) or shutil.which("dvc")
    if dvc is None:
        if os.environ.get("CI"):
            pytest.fail("dvc is not installed in CI (pip install -e '.[dvc]')")
        pytest.skip("dvc not installed (pip install -e '.[dvc]')")
    work = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (work / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, work / f)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=work, check=True, env=env)
    res = subprocess.run([dvc, "repro"], cwd=work, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for name, _ in STAGES:
        assert (work / "out" / "stages" / f"{name}.json").exists()
    report = json.loads((work / "out" / "stages" / "inventory.json").read_text())
    assert report["rows_loaded"] > 0
    again = subprocess.run([dvc, "repro"], cwd=work, capture_output=True, text=True, env=env)
    assert again.returncode == 0 and "didn't change" in again.stdout + again.stderr
