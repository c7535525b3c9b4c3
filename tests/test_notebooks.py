"""The example notebooks run top to bottom (small settings: POWERDP_NOTEBOOK_SMALL=1), with what the dev
extras install (examples/run_notebooks.py, no jupyter nbconvert), and they are valid nbformat files a
user's Jupyter opens without warnings (every cell has an id)."""

import importlib.util
import json
import warnings
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NAMES = ["quickstart", "paper_reproduction", "zone_partition_study", "federated_learning", "day_of_dispatch"]


def _runner():
    spec = importlib.util.spec_from_file_location("run_notebooks", EXAMPLES / "run_notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_runner_knows_every_notebook():
    assert sorted(_runner().NOTEBOOKS) == sorted(p.stem for p in EXAMPLES.glob("*.ipynb"))


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_clean_nbformat(name):
    nbformat = pytest.importorskip("nbformat")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # MissingIDFieldWarning, or any other validation warning
        nb = nbformat.read(EXAMPLES / f"{name}.ipynb", as_version=4)
        nbformat.validate(nb)
    raw = json.loads((EXAMPLES / f"{name}.ipynb").read_text())
    assert all("id" in c for c in raw["cells"])
    assert not any(c.get("outputs") for c in raw["cells"]), "stored outputs: a user would see results CI did not make"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name, monkeypatch):
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    monkeypatch.setenv("POWERDP_NOTEBOOK_SMALL", "1")
    nb = _runner().execute(name, small=True, timeout=600)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert images, "the notebook shows no figure"
