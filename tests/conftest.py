"""Shared fixtures: bundled networks and the path of the shared reference data."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from powerdp.grid.network import load_case

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

logging.getLogger("pyomo").setLevel(logging.ERROR)


def shared_case(*parts: str) -> Path:
    """Path of a case in ../shared/data; skips the test when the folder is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared reference data not found: {path}")
    return path


@pytest.fixture(scope="session")
def case14():
    return load_case("case14")


@pytest.fixture(scope="session")
def case118():
    return load_case("case118")


def fail_local_solve(monkeypatch, zone: int, round: int):
    """Make zone ``zone``'s local solves report infeasibility in round ``round`` (serial backend);
    ``monkeypatch.undo()`` restores them."""
    from powerdp.admm import agent as agent_mod
    from powerdp.errors import InfeasibleError

    real = agent_mod.ZoneAgent._solve

    def failing(self, c, diag, step, exact=False):
        if self.zone == zone and self.round == round:
            raise InfeasibleError("Ipopt reports the problem locally infeasible", 2, self._context(step))
        return real(self, c, diag, step, exact)

    monkeypatch.setattr(agent_mod.ZoneAgent, "_solve", failing)
