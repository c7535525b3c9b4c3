"""The wheel holds every subpackage: pyproject's hand-written package list matches the tree.

``pip install .`` (the README's first command) builds a wheel from ``[tool.setuptools] packages``;
a subpackage missing from that list imports fine from an editable checkout and is absent from a
real install. This test lists every folder of ``powerdp/`` that holds an ``__init__.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _listed_packages() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^\[tool\.setuptools\]\s*$(.*?)^\[", text, re.S | re.M)
    assert block, "pyproject.toml has no [tool.setuptools] table"
    listing = re.search(r"^packages\s*=\s*\[(.*?)\]", block.group(1), re.S | re.M)
    assert listing, "[tool.setuptools] has no packages list"
    return set(re.findall(r'"([^"]+)"', listing.group(1)))


def _on_disk() -> set[str]:
    return {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "powerdp").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_every_subpackage_is_in_the_wheel():
    on_disk, listed = _on_disk(), _listed_packages()
    assert on_disk - listed == set(), f"subpackages missing from pyproject's packages: {sorted(on_disk - listed)}"
    stale = {p for p in listed - on_disk if p.startswith("powerdp.") and p not in {"powerdp.cases", "powerdp.solvers"}}
    assert stale == set(), f"pyproject lists packages that do not exist: {sorted(stale)}"


def test_the_check_sees_a_missing_package():
    listed = _listed_packages() - {"powerdp.engine.consensus.updates"}
    assert _on_disk() - listed == {"powerdp.engine.consensus.updates"}
