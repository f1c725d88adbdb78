"""Both notebooks execute top to bottom against a warehouse built from ``data/sample/`` by
``fleetfault run``, with the current interpreter as the kernel. Stages that have not produced
their tables yet must show "No data yet", never an error."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.xdist_group("sample")  # shares the sample run with the contract tests
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


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
