"""Update rules and the algorithm registry: names, validation, and the trust-region rule (ObjT)."""

import numpy as np
import pytest

from powerdp.apps.power_flow.agent import ZoneAgent
from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.engine.consensus.algorithms import ALIASES, Algorithm, compose, resolve
from powerdp.engine.consensus.messages import ConsensusMessage
from powerdp.engine.consensus.updates import UPDATES
from powerdp.engine.consensus.updates.trust_region import trust_radius
from powerdp.errors import ConfigError
from powerdp.grid.partition import bundled_partition


def test_aliases_are_the_three_choices():
    assert resolve("objl") == Algorithm("linearized", "objective", "laplace")
    assert resolve("outg") == Algorithm("linearized", "output", "gaussian")
    assert resolve("nonprivate") == Algorithm("linearized")
    assert resolve("objt") == Algorithm("trust-region", "objective", "laplace")
    assert resolve("trust-region/objective/gaussian").mechanism == "gaussian"
    assert resolve("trust-region/none") == Algorithm("trust-region")
    for name, spec in ALIASES.items():
        assert spec.validate().name == name
        assert spec.update in UPDATES


def test_compose_replaces_one_choice():
    assert compose("objl", update="trust-region") == "objt"
    assert compose("objg", update="trust-region") == "trust-region/objective/gaussian"
    assert compose("objt", perturbation="none") == "trust-region/none"
    assert compose("objl", mechanism="gaussian") == "objg"
    assert compose("nonprivate", perturbation="output") == "outl"


@pytest.mark.parametrize(
    "name, word",
    [
        ("trust-region/output/laplace", "does not support 'output'"),
        ("exact/objective/laplace", "does not support 'objective'"),
        ("linearized/objective", "needs a mechanism"),
        ("linearized/none/laplace", "without a perturbation"),
        ("sideways/none", "unknown update"),
        ("objx", "unknown algorithm"),
    ],
)
def test_bad_combinations_are_named(name, word):
    with pytest.raises(ConfigError, match=word):
        RunConfig(case="case14", algorithm=name)


@pytest.mark.parametrize("a", [0, -1.0, float("inf"), "big", True])
def test_trust_radius_option_is_checked(a):
    with pytest.raises(ConfigError, match="trust_radius"):
        RunConfig(case="case14", algorithm="objt", extra={"trust_radius": a})


def test_trust_radius_schedule():
    assert trust_radius(1, 1.0) == 1.0
    assert trust_radius(10, 2.0) == pytest.approx(0.02)
    assert trust_radius(10, 2.0, "constant") == 2.0  # what the authors' code computes: a/(t+1)*(t+1) = a
    with pytest.raises(ConfigError, match="trust_schedule"):
        RunConfig(case="case14", algorithm="objt", extra={"trust_schedule": "linear"})


@pytest.fixture(scope="module")
def zone0(case14):
    part = bundled_partition(case14, 3)
    return case14, part, part.shared_by_zone("variables")


def test_objt_steps_stay_in_the_box_and_in_w_p(zone0):
    net, part, by_zone = zone0
    cfg = RunConfig(case="case14", algorithm="objt", epsilon=0.2, local_updates=2,
                    extra={"trust_radius": 0.5, "trust_schedule": "inverse-square"})
    agent = ZoneAgent(net, 0, part.own_buses(0), by_zone[0], cfg)
    w = agent.initialize().released
    steps = []
    solve = agent.solve

    def spy(c, diag, step, exact=False, bounds=None):
        before = agent.z_last if step == 1 else steps[-1]
        z, res = solve(c, diag, step, exact, bounds)
        steps.append(z)
        assert bounds is not None
        assert np.abs(z - before).max() <= radius + 1e-7
        return z, res

    agent.solve = spy
    for t in range(1, 5):
        radius = trust_radius(t, 0.5, "inverse-square")
        upd = agent.step(ConsensusMessage(round=t, zone=0, w=w, rho=100.0))
        assert agent.problem.max_violation(agent.z_released) <= 1e-6
        assert agent.last_stats.noise_magnitude > 0 and agent.last_stats.solves == 2  # zone-private
        w = upd.released
    # its own accounting: one Laplace step per local step, noise on the balance variables only
    assert agent.ledger.steps == 8 and agent.ledger.kind == "laplace"
    assert agent.ledger.epsilon_spent() == pytest.approx(8 * 0.2)
    assert len(agent.noise_cols) == 2 * len(part.own_buses(0))


def test_objt_serial_and_process_backends_agree():
    cfg = RunConfig(case="case14", algorithm="objt", epsilon=0.3, rounds=3, local_updates=2, seed=4, checkpoint_every=0)
    a = run_distributed(cfg, reference=False).history
    b = run_distributed(cfg.replace(backend="process", workers=2), reference=False).history
    cols = ["objective", "feasibility", "dual_residual", "noise_magnitude", "max_violation", "epsilon_spent"]
    for col in cols:
        np.testing.assert_array_equal(a[col].to_numpy(), b[col].to_numpy(), err_msg=col)
    assert a["max_violation"].max() <= 1e-6
