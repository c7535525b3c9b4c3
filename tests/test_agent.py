"""Zone agents: local updates, feasibility of releases, privacy boundary, schedules."""

import math

import numpy as np
import pytest

from powerdp.apps.power_flow.agent import ZoneAgent, step_size
from powerdp.apps.power_flow.config import RunConfig
from powerdp.engine.backends import private_view
from powerdp.engine.consensus.messages import ConsensusMessage, SolverStats, ZoneUpdate
from powerdp.errors import ConfigError
from powerdp.grid.partition import bundled_partition


@pytest.fixture(scope="module")
def zone_setup(case14):
    part = bundled_partition(case14, 3)
    return case14, part, part.shared_by_zone("variables")


def make_agent(zone_setup, zone=0, **cfg):
    net, part, by_zone = zone_setup
    config = RunConfig(case="case14", **{"seed": 0, **cfg})  # seeded: the tests compare runs bit for bit
    return ZoneAgent(net, zone, part.own_buses(zone), by_zone[zone], config)


def test_shedding_gradient_lives_on_the_balance_variables(zone_setup):
    """Paper's coordinates: ∇f_p = 2(y + d) on the y entries, 0 on every other entry; L_p = 2."""
    agent = make_agent(zone_setup, algorithm="nonprivate")
    prob = agent.problem
    net, part, _ = zone_setup
    own = part.own_buses(0)
    yp = prob.index_of([("yp", int(i)) for i in own])
    yq = prob.index_of([("yq", int(i)) for i in own])
    y = np.concatenate([yp, yq])
    d = np.concatenate([net.pd[own], net.qd[own]])
    z = np.random.default_rng(0).normal(size=agent.n)
    g = agent._f.gradient(z)
    expected = np.zeros(agent.n)
    expected[y] = 2 * (z[y] + d)
    np.testing.assert_allclose(g, expected, rtol=0, atol=1e-12)
    assert agent._f.value(z) == pytest.approx(np.sum((z[y] + d) ** 2))
    assert agent.lipschitz == 2.0
    # the balance rows of W_p hold no load: y is the load-free part of the balance
    sp_map = prob.expressions["sp"]
    np.testing.assert_allclose(sp_map(z), z[yp] + net.pd[own])


def test_moving_one_load_moves_one_gradient_entry_by_2beta(zone_setup, case14):
    """The sensitivity argument, checked on the compiled objective: Δ = 2β in one entry."""
    net, part, by_zone = zone_setup
    own = part.own_buses(0)
    bus = int(own[np.argmax(net.pd[own])])
    beta = 0.01
    moved = net.with_loads(pd=np.where(np.arange(net.n_bus) == bus, net.pd + beta, net.pd), qd=net.qd)
    a = make_agent(zone_setup, algorithm="objl")
    b = ZoneAgent(moved, 0, own, by_zone[0], RunConfig(case="case14"))
    z = np.random.default_rng(1).normal(size=a.n)
    diff = b._f.gradient(z) - a._f.gradient(z)
    assert np.count_nonzero(np.abs(diff) > 1e-12) == 1
    assert np.abs(diff).sum() == pytest.approx(2 * beta)
    assert a.grad_sensitivity.l1 == pytest.approx(2 * beta) == a.grad_sensitivity.l2


@pytest.mark.parametrize("noise_on, expected", [(None, "y"), ("data", "y"), ("all", "z")])
def test_noise_support(zone_setup, noise_on, expected):
    agent = make_agent(zone_setup, algorithm="objl", noise_on=noise_on)
    sizes = []
    release = agent.mechanism.release

    def spy(value, rng):
        sizes.append(len(value))
        return release(value, rng)

    agent.mechanism.release = spy
    w = agent.initialize().released
    agent.step(ConsensusMessage(round=1, zone=0, w=w, rho=100.0))
    n_y = 2 * len(zone_setup[1].own_buses(0))
    assert sizes == [n_y if expected == "y" else agent.n]
    assert agent.problem.max_violation(agent.z_released) <= 1e-6


@pytest.mark.parametrize(
    "settings, word",
    [
        ({"algorithm": "objl", "noise_on": "everywhere"}, "noise_on"),
        ({"algorithm": "outl", "noise_on": "data"}, "noise_on"),
        ({"algorithm": "objl", "adjacency": "zone"}, "adjacency"),
        ({"algorithm": "objl", "adjacency": "bus", "sensitivity": "paper"}, "adjacency"),
    ],
)
def test_bad_privacy_settings(settings, word):
    with pytest.raises(ConfigError, match=word):
        RunConfig(case="case14", **settings)


def test_bus_adjacency_doubles_the_laplace_noise(zone_setup):
    value = make_agent(zone_setup, algorithm="objl")
    bus = make_agent(zone_setup, algorithm="objl", adjacency="bus")
    assert bus.mechanism.scale == pytest.approx(2 * value.mechanism.scale)
    gbus = make_agent(zone_setup, algorithm="objg", adjacency="bus", epsilon=0.5)
    gval = make_agent(zone_setup, algorithm="objg", epsilon=0.5)
    assert gbus.mechanism.sigma == pytest.approx(math.sqrt(2) * gval.mechanism.sigma)


def test_step_size_schedules():
    assert step_size("sqrt", 4, 10.0) == 0.5
    assert step_size("capped", 1, 10.0) == pytest.approx(0.19)  # min(1.9/L, 1)
    assert step_size("capped", 400, 10.0) == pytest.approx(0.05)
    assert step_size("theorem", 4, 10.0, epsilon=0.5) == pytest.approx(1 / (10 + 2 / 0.5))
    assert step_size(0.01, 7, 10.0) == 0.01
    # with the paper's coordinates L_p = 2: capped is min(0.95, 1/√t)
    assert step_size("capped", 1, 2.0) == pytest.approx(0.95)
    assert step_size("capped", 2, 2.0) == pytest.approx(1 / math.sqrt(2))
    assert step_size("theorem", 9, 2.0, epsilon=0.1) == pytest.approx(1 / (2 + 30))


@pytest.mark.parametrize("algorithm", ["objl", "objg"])
@pytest.mark.parametrize("noise_on", ["data", "all"])
def test_objective_perturbation_releases_are_feasible(zone_setup, algorithm, noise_on):
    agent = make_agent(zone_setup, algorithm=algorithm, epsilon=0.05, local_updates=3, noise_on=noise_on)
    first = agent.initialize()
    assert agent.problem.max_violation(agent.z_released) <= 1e-6
    w = first.released
    for t in range(1, 6):
        upd = agent.step(ConsensusMessage(round=t, zone=0, w=w, rho=100.0))
        assert agent.problem.max_violation(agent.z_released) <= 1e-6
        assert agent.last_stats.noise_magnitude > 0  # zone-private: kept by the agent, not in the message
        assert agent.last_stats.solves == 3
        assert set(vars(upd)) == {"round", "zone", "released"}
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
    assert set(vars(msg)) == {"round", "zone", "released"}
    assert msg.released.shape == (agent.n_shared,)
    np.testing.assert_array_equal(msg.released, agent.z_released[agent.shared_cols])
    assert isinstance(agent.last_stats, SolverStats)  # the zone keeps its solver statistics and Σ|ξ|


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
    b = ZoneAgent(private_view(net, part.own_buses(0)), 0, part.own_buses(0), by_zone[0], RunConfig(case="case14", seed=0))
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


_ZONE_RUN = """
import hashlib, logging, numpy as np
logging.getLogger("pyomo").setLevel(logging.ERROR)
from powerdp.apps.power_flow.agent import ZoneAgent
from powerdp.apps.power_flow.config import RunConfig
from powerdp.engine.consensus.messages import ConsensusMessage
from powerdp.grid.loading import load_case
from powerdp.grid.partition import partition
net = load_case("case118")
part = partition(net, "case118_3areas")
zone = int(np.argmax(part.zone_sizes()))
agent = ZoneAgent(net, zone, part.own_buses(zone), part.shared_by_zone("variables")[zone],
                  RunConfig(case="case118", algorithm="nonprivate"))
w = agent.initialize().released
h = hashlib.sha256(w.tobytes())
for t in range(1, 4):
    w = agent.step(ConsensusMessage(t, zone, w, 100.0)).released
    h.update(w.tobytes())
print(agent.n, agent.lipschitz, h.hexdigest())
"""


def test_case118_zone_is_bit_identical_across_processes():
    """Same settings in two fresh interpreters: the same bits (no random start vector anywhere)."""
    import subprocess
    import sys

    outs = [subprocess.run([sys.executable, "-c", _ZONE_RUN], capture_output=True, text=True, check=True).stdout for _ in range(2)]
    n, lipschitz, _ = outs[0].split()
    assert int(n) > 400  # large enough that an eigensolver would have been used
    assert float(lipschitz) == 2.0
    assert outs[0] == outs[1]


def test_building_a_zone_collects_its_model_and_leaves_the_collector_as_it_was(case14, monkeypatch):
    """The zone's Pyomo model is collected with the rest of the heap frozen (a fast collection); the freeze is
    undone after a build, and after a build that fails. (Flows as expressions: those zones are built with Pyomo.)"""
    import gc
    import weakref

    import powerdp.opf.direct as agent_module  # where a zone agent's Pyomo model is built (opf.direct.compile_zone)

    part = bundled_partition(case14, 3)
    by_zone = part.shared_by_zone("variables")
    built = []
    real_build = agent_module.build_model

    def build(*args, **kwargs):
        model = real_build(*args, **kwargs)
        built.append(weakref.ref(model))
        assert gc.get_freeze_count() > 0  # the heap before the model is frozen while the zone builds
        return model

    monkeypatch.setattr(agent_module, "build_model", build)
    config = RunConfig(case="case14", algorithm="nonprivate", objective="cost", flows="expressions")
    by_zone = part.shared_by_zone("expressions")
    ZoneAgent(case14, 1, part.own_buses(1), by_zone[1], config)
    assert built and built[0]() is None  # the model is gone
    assert gc.get_freeze_count() == 0

    def failing(*args, **kwargs):
        raise RuntimeError("model failed")

    monkeypatch.setattr(agent_module, "build_model", failing)
    with pytest.raises(RuntimeError, match="model failed"):
        ZoneAgent(case14, 1, part.own_buses(1), by_zone[1], config)
    assert gc.get_freeze_count() == 0
