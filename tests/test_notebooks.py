"""Both notebooks execute top to bottom against a warehouse built from ``data/sample/`` by
``fleetfault run``, with the current interpreter as the kernel. Stages that have not produced
their tables yet must show "No data yet", never an error."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


#: Telemetry files per host taken from the sample: the first three weeks keep the run fast
#: while every stage still gets real input (the notebooks must cope with thin data anyway).
TELEMETRY_FILES_PER_HOST = 21


def _trimmed_sample(dest: Path) -> Path:
    src = ROOT / "data" / "sample"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("truth", "telemetry"))
    for host in sorted((src / "telemetry").iterdir()):
        (dest / "telemetry" / host.name).mkdir(parents=True)
        for f in sorted(host.iterdir())[:TELEMETRY_FILES_PER_HOST]:  # names sort by day
            shutil.copy2(f, dest / "telemetry" / host.name / f.name)
    return dest


@pytest.fixture(scope="session")
def sample_warehouse(tmp_path_factory):
    """The nightly job (what ``fleetfault run`` calls) on the bundled sample, once per session."""
    from pipeline.config import load_config
    from pipeline.run import run_pipeline

    tmp = tmp_path_factory.mktemp("nb")
    wh, out = tmp / "fleetfault.duckdb", tmp / "out"
    cfg = load_config(ROOT / "fleetfault.toml")
    _, code = run_pipeline(cfg, _trimmed_sample(tmp / "data"), wh, out)
    assert code in (0, 1), f"the run exited {code}"
    assert wh.exists()
    return wh, out


def test_notebooks_exist():
    assert {p.name for p in NOTEBOOKS} >= {"fleet_analysis.ipynb", "model_review.ipynb"}


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, sample_warehouse, monkeypatch):
    from nbclient import NotebookClient

    wh, out = sample_warehouse
    monkeypatch.setenv("FLEETFAULT_WAREHOUSE", str(wh))
    monkeypatch.setenv("FLEETFAULT_OUT", str(out))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                   for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert str(wh) in text  # it read the warehouse we built, not a stray one
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {}) or "data:image/png" in str(o.get("data", {}).get("text/html", ""))]
    assert images, "no chart was drawn (the sample has telemetry, Xids and tickets)"
    assert os.environ["FLEETFAULT_WAREHOUSE"] == str(wh)
