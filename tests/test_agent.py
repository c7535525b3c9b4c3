"""Zone agents: local updates, feasibility of releases, privacy boundary, schedules."""

import gc
import math

import numpy as np
import pytest
import scipy.sparse as sp

from powerdp.agent import ZoneAgent, lipschitz_constant, step_size
from powerdp.backends import private_view
from powerdp.config import RunConfig
from powerdp.errors import ConfigError
from powerdp.messages import ConsensusMessage, SolverStats, ZoneUpdate
from powerdp.network import Network
from powerdp.partition import bundled_partition


@pytest.fixture(scope="module")
def zone_setup(case14):
    part = bundled_partition(case14, 3)
    return case14, part, part.shared_by_zone("variables")


def make_agent(zone_setup, zone=0, **cfg):
    net, part, by_zone = zone_setup
    config = RunConfig(case="case14", **cfg)
    return ZoneAgent(net, zone, part.own_buses(zone), by_zone[zone], config)


def test_shedding_gradient_and_lipschitz(zone_setup):
    agent = make_agent(zone_setup, algorithm="nonprivate")
    prob = agent.problem
    M = sp.vstack([prob.expressions["sp"].M, prob.expressions["sq"].M]).tocsr()
    d = np.concatenate([prob.expressions["sp"].const, prob.expressions["sq"].const])
    z = np.random.default_rng(0).normal(size=agent.n)
    np.testing.assert_allclose(agent._f.gradient(z), 2 * M.T @ (M @ z + d), atol=1e-9)
    assert agent._f.value(z) == pytest.approx(np.sum((M @ z + d) ** 2))
    L = 2 * np.linalg.eigvalsh((M.T @ M).toarray()).max()
    assert agent.lipschitz == pytest.approx(L, rel=1e-9)
    # loads sit in d: the zone's own loads, in p.u.
    net, part, _ = zone_setup
    own = part.own_buses(0)
    np.testing.assert_allclose(np.sort(prob.expressions["sp"].const), np.sort(net.pd[own]))


def test_step_size_schedules():
    assert step_size("sqrt", 4, 10.0) == 0.5
    assert step_size("capped", 1, 10.0) == pytest.approx(0.19)  # min(1.9/L, 1)
    assert step_size("capped", 400, 10.0) == pytest.approx(0.05)
    assert step_size("theorem", 4, 10.0, epsilon=0.5) == pytest.approx(1 / (10 + 2 / 0.5))
    assert step_size(0.01, 7, 10.0) == 0.01


@pytest.mark.parametrize("algorithm", ["objl", "objg"])
def test_objective_perturbation_releases_are_feasible(zone_setup, algorithm):
    agent = make_agent(zone_setup, algorithm=algorithm, epsilon=0.05, local_updates=3)
    first = agent.initialize()
    assert agent.problem.max_violation(agent.z_released) <= 1e-6
    w = first.released
    for t in range(1, 6):
        upd = agent.step(ConsensusMessage(round=t, zone=0, w=w, rho=100.0))
        assert agent.problem.max_violation(agent.z_released) <= 1e-6
        assert upd.stats.noise_magnitude > 0
        assert upd.stats.solves == 3
        w = upd.released
    assert agent.ledger.steps == 15


def test_output_perturbation_releases_leave_the_feasible_set(zone_setup):
    agent = make_agent(zone_setup, algorithm="outl", epsilon=0.05)
    w = agent.initialize().released
    viol = []
    for t in range(1, 4):
        upd = agent.step(ConsensusMessage(round=t, zone=0, w=w, rho=100.0))
        viol.append(agent.problem.max_violation(agent.z_released))
        w = upd.released
    assert max(viol) > 1e-3


def test_update_message_holds_only_released_values(zone_setup):
    agent = make_agent(zone_setup, algorithm="objl")
    upd = agent.initialize()
    msg = agent.step(ConsensusMessage(round=1, zone=0, w=upd.released, rho=100.0))
    assert isinstance(msg, ZoneUpdate)
    assert set(vars(msg)) == {"round", "zone", "released", "stats"}
    assert msg.released.shape == (agent.n_shared,)
    np.testing.assert_array_equal(msg.released, agent.z_released[agent.shared_cols])
    assert isinstance(msg.stats, SolverStats)
    for value in vars(msg.stats).values():
        assert isinstance(value, (int, float, tuple))


def test_private_view_zeroes_other_zones_loads(zone_setup):
    net, part, _ = zone_setup
    view = private_view(net, part.own_buses(1))
    others = np.setdiff1d(np.arange(net.n_bus), part.own_buses(1))
    assert np.all(view.pd[others] == 0) and np.all(view.qd[others] == 0)
    np.testing.assert_array_equal(view.pd[part.own_buses(1)], net.pd[part.own_buses(1)])


def test_released_values_do_not_depend_on_other_zones_loads(zone_setup):
    """A zone's release is a function of its own loads, the messages and its noise only."""
    net, part, by_zone = zone_setup
    a = make_agent(zone_setup, algorithm="objl")
    b = ZoneAgent(private_view(net, part.own_buses(0)), 0, part.own_buses(0), by_zone[0], RunConfig(case="case14"))
    ua, ub = a.initialize(), b.initialize()
    np.testing.assert_array_equal(ua.released, ub.released)
    ma = a.step(ConsensusMessage(1, 0, ua.released, 100.0))
    mb = b.step(ConsensusMessage(1, 0, ub.released, 100.0))
    np.testing.assert_array_equal(ma.released, mb.released)


def test_dp_algorithms_refuse_cost_objective():
    with pytest.raises(ConfigError, match="loads in the power-balance constraints"):
        RunConfig(algorithm="objl", objective="cost")
    RunConfig(algorithm="exact", objective="cost")  # allowed


def test_agent_state_round_trip_reproduces_next_step(zone_setup):
    a = make_agent(zone_setup, algorithm="objg", epsilon=0.5)
    w = a.initialize().released
    a.step(ConsensusMessage(1, 0, w, 100.0))
    state = a.state_dict()
    b = make_agent(zone_setup, algorithm="objg", epsilon=0.5)
    b.load_state_dict(state)
    ra = a.step(ConsensusMessage(2, 0, w, 100.0))
    rb = b.step(ConsensusMessage(2, 0, w, 100.0))
    np.testing.assert_array_equal(ra.released, rb.released)
    assert a.ledger.steps == b.ledger.steps == 2
