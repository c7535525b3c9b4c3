"""Perturbations: input perturbation (the loads perturbed once) against a run on perturbed loads."""

import math

import numpy as np
import pytest

from powerdp.apps.power_flow.agent import ZoneAgent
from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.engine.consensus.perturbations import PERTURBATIONS, InputPerturbation
from powerdp.errors import ConfigError
from powerdp.grid.partition import bundled_partition


@pytest.fixture(scope="module")
def parts(case14):
    part = bundled_partition(case14, 3)
    return case14, part, part.shared_by_zone("variables")


def perturbed_loads(net, part, by_zone, cfg):
    """The loads d̃ = d + ξ/2 the zones of an input-perturbed run hold (their first noise draw)."""
    pd, qd = net.pd.copy(), net.qd.copy()
    for zone in range(part.n_zones):
        agent = ZoneAgent(net, zone, part.own_buses(zone), by_zone[zone], cfg)
        pert = agent.perturbation
        assert isinstance(pert, InputPerturbation)
        for col, xi in zip(pert.noise_cols, pert.xi):
            name, bus = agent.problem.var_keys[col]
            (pd if name == "yp" else qd)[bus] += xi / 2
    return pd, qd


@pytest.mark.parametrize("update", ["exact", "linearized"])
def test_input_perturbation_is_the_nonprivate_run_on_perturbed_loads(parts, update):
    net, part, by_zone = parts
    cfg = RunConfig(case="case14", zones=3, algorithm=f"{update}/input/laplace", epsilon=0.5, rounds=6, seed=3, checkpoint_every=0)
    private = run_distributed(cfg, network=net, partition=part, reference=False)
    pd, qd = perturbed_loads(net, part, by_zone, cfg)
    moved = np.abs(np.concatenate([pd - net.pd, qd - net.qd]))
    # Laplace(2β/ε) on the gradient is Laplace(β/ε) on each load value: mean |d̃ − d| ≈ β/ε = 0.02
    assert moved.min() > 0 and 0.005 < moved.mean() < 0.06
    plain = run_distributed(
        cfg.replace(algorithm="exact" if update == "exact" else "nonprivate"), network=net.with_loads(pd, qd), partition=part, reference=False
    )
    np.testing.assert_allclose(private.consensus, plain.consensus, atol=1e-6)
    np.testing.assert_allclose(private.history["feasibility"], plain.history["feasibility"], rtol=1e-4, atol=1e-8)
    # the private run reports f_p with the true loads, not with d̃
    assert not np.allclose(private.history["objective"], plain.history["objective"], rtol=1e-3)


def test_input_perturbation_costs_epsilon_once(parts):
    net, part, _ = parts
    cfg = RunConfig(case="case14", zones=3, algorithm="inpl", epsilon=0.7, rounds=5, local_updates=3, checkpoint_every=0)
    res = run_distributed(cfg, network=net, partition=part, reference=False)
    assert res.summary["epsilon_total"] == {0: 0.7, 1: 0.7, 2: 0.7}
    assert res.summary["epsilon_basic"] == {0: 0.7, 1: 0.7, 2: 0.7}
    assert (res.history["noise_magnitude"] > 0).all()
    # every release is feasible: the noise only moves the linear term
    assert res.history["max_violation"].max() <= 1e-6


def test_input_perturbation_budget_first():
    cfg = RunConfig(case="case118", algorithm="inpg", target_epsilon=1.0, target_delta=1e-5, rounds=100, local_updates=5)
    assert cfg.private_steps == 1  # the whole run is one release of d̃
    import dp_accounting

    z = cfg.per_step_noise()["noise_multiplier"]
    assert z == pytest.approx(dp_accounting.get_sigma_gaussian(1.0, 1e-5), rel=1e-12)
    lap = RunConfig(case="case118", algorithm="inpl", target_epsilon=0.5, rounds=100)
    assert lap.per_step_noise() == {"epsilon": 0.5}


def test_input_perturbation_is_refused_where_it_does_not_apply():
    with pytest.raises(ConfigError, match="noise_on"):
        RunConfig(algorithm="inpl", noise_on="all")
    with pytest.raises(ConfigError, match="does not support 'input'"):
        RunConfig(algorithm="trust-region/input/laplace")
    with pytest.raises(ConfigError, match="not private|differentially private"):
        RunConfig(algorithm="inpl", objective="cost")
    assert PERTURBATIONS["input"].once and not PERTURBATIONS["objective"].once


def test_input_perturbation_resume_draws_the_same_loads(tmp_path, parts):
    net, part, _ = parts
    cfg = RunConfig(case="case14", zones=3, algorithm="inpl", target_epsilon=1.0, rounds=6, seed=5, checkpoint_every=3)
    whole = run_distributed(cfg, network=net, partition=part, reference=False)
    run_distributed(cfg.replace(rounds=3), network=net, partition=part, out=tmp_path / "r", reference=False)
    # a budget on input perturbation does not depend on the rounds, so the run may be extended
    resumed = run_distributed(cfg, network=net, partition=part, out=tmp_path / "r", resume=True, reference=False)
    np.testing.assert_array_equal(whole.consensus, resumed.consensus)
    assert resumed.summary["epsilon_total"][0] == pytest.approx(1.0)
    assert math.isclose(whole.history["objective"].iloc[-1], resumed.history["objective"].iloc[-1], rel_tol=0, abs_tol=0)


@pytest.mark.parametrize("algorithm", ["inpl", "exact/input/laplace"])
def test_input_perturbations_noisy_term_is_rounded_once_per_draw(parts, algorithm):
    """Issue 36: the zone releases its data term once, n = γ(round(2d/γ) + Z), and from then on computes with n alone.
    A zone on other loads given the same n computes the same linear term, bit for bit, at every point: no later
    rounding involves d (the old code rounded 2(y + d) again at every step, so the differences between steps carried
    d's low bits without noise)."""
    net, part, by_zone = parts
    cfg = RunConfig(case="case14", zones=3, algorithm=algorithm, epsilon=1.0, seed=2)
    a = ZoneAgent(net, 0, part.own_buses(0), by_zone[0], cfg)
    pd = net.pd.copy()
    pd[part.own_buses(0)] *= 1.0 + 1e-9 * np.arange(1, len(part.own_buses(0)) + 1)  # loads off in their low bits
    b = ZoneAgent(net.with_loads(pd, net.qd), 0, part.own_buses(0), by_zone[0], cfg)
    gamma = a.perturbation.mechanism.grid
    assert np.array_equal(a.perturbation.term / gamma, np.round(a.perturbation.term / gamma))  # n lies on the grid
    b.use_input_term(a.perturbation.term)
    rng = np.random.default_rng(0)
    for _ in range(20):
        z = rng.normal(size=a.n)
        assert np.array_equal(a.gradient(z), b.gradient(z))
    assert np.array_equal(a._f_exact.c, b._f_exact.c)
    assert not np.array_equal(a._f.c, b._f.c)  # the true objectives (the evaluation's) do differ
