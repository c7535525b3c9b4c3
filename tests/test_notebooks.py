"""The example notebooks run top to bottom (small settings: POWERDP_NOTEBOOK_SMALL=1)."""

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", ["quickstart", "paper_reproduction", "zone_partition_study", "federated_learning"])
def test_notebook_executes(name, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("POWERDP_NOTEBOOK_SMALL", "1")
    nb = nbformat.read(EXAMPLES / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert images, "the notebook shows no figure"
