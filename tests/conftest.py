"""Shared fixtures: bundled networks and the path of the shared reference data."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from powerdp.grid.loading import load_case

from .shared_data import SHARED_DATA, shared_case  # noqa: F401  (../shared/data beside the repository: one helper)

logging.getLogger("pyomo").setLevel(logging.ERROR)


@pytest.fixture(scope="session")
def case14():
    return load_case("case14")


@pytest.fixture(scope="session")
def case118():
    return load_case("case118")


def fail_local_solve(monkeypatch, zone: int, round: int):
    """Make zone ``zone``'s local solves report infeasibility in round ``round`` (serial backend);
    ``monkeypatch.undo()`` restores them."""
    from powerdp.apps.power_flow import agent as agent_mod
    from powerdp.errors import InfeasibleError

    real = agent_mod.ZoneAgent._solve

    def failing(self, c, diag, step, exact=False):
        if self.zone == zone and self.round == round:
            raise InfeasibleError("Ipopt reports the problem locally infeasible", 2, self._context(step))
        return real(self, c, diag, step, exact)

    monkeypatch.setattr(agent_mod.ZoneAgent, "_solve", failing)


# Two areas joined by a weak AC tie (2-3, 40 MW) and an HVDC line 1 -> 4 with losses and a cost:
# cheap generation at bus 1, dear at bus 4, so the optimum pushes the HVDC line to its PMAX.
HVDC_CASE = """function mpc = hvdc4
mpc.version = '2';
mpc.baseMVA = 100;
mpc.bus = [
	1	3	0	0	0	0	1	1	0	230	1	1.1	0.9;
	2	1	50	10	0	0	1	1	0	230	1	1.1	0.9;
	3	1	60	20	0	0	2	1	0	230	1	1.1	0.9;
	4	2	150	40	0	0	2	1	0	230	1	1.1	0.9;
];
mpc.gen = [
	1	0	0	100	-100	1	100	1	300	0;
	4	0	0	100	-100	1	100	1	300	0;
];
mpc.gencost = [
	2	0	0	3	0.01	10	0;
	2	0	0	3	0.02	40	0;
];
mpc.branch = [
	1	2	0.01	0.1	0.02	200	0	0	0	0	1	-30	30;
	2	3	0.02	0.2	0.02	40	0	0	0	0	1	-30	30;
	3	4	0.01	0.1	0.02	200	0	0	0	0	1	-30	30;
];
%	fbus	tbus	status	Pf	Pt	Qf	Qt	Vf	Vt	Pmin	Pmax	QminF	QmaxF	QminT	QmaxT	loss0	loss1
mpc.dcline = [
	1	4	1	0	0	0	0	1	1	0	80	-30	30	-20	25	1	0.02;
];
mpc.dclinecost = [
	2	0	0	2	0.5	0;
];
"""


@pytest.fixture
def hvdc_case(tmp_path) -> Path:
    """A MATPOWER file with an HVDC line between two areas (:data:`HVDC_CASE`)."""
    path = tmp_path / "hvdc4.m"
    path.write_text(HVDC_CASE)
    return path
