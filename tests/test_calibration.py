"""Budget-first runs: the per-step noise calibrated to a total (ε, δ) per zone, checked against
dp-accounting directly and through a run."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.errors import ConfigError
from powerdp.privacy import GaussianMechanism, PrivacyLedger
from powerdp.privacy.calibration import MAX_NOISE_MULTIPLIER, gaussian_noise_multiplier, laplace_epsilon_per_step


@pytest.mark.parametrize("eps, delta, k", [(1.0, 1e-5, 100), (10.0, 1e-5, 100), (0.5, 1e-6, 20), (3.0, 1e-3, 500)])
def test_gaussian_calibration_meets_the_budget_tightly(eps, delta, k):
    z = gaussian_noise_multiplier(eps, delta, k)
    # exact (analytic GDP) figure of k steps: the budget, to the root finder's tolerance
    exact = dp_accounting.get_epsilon_gaussian(z / math.sqrt(k), delta)
    assert exact == pytest.approx(eps, rel=1e-6)
    # dp-accounting's PLD of the k composed events agrees (its discretisation is pessimistic)
    acc = pld.PLDAccountant()
    acc.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), k))
    assert eps * (1 - 1e-3) <= acc.get_epsilon(delta) <= eps * 1.02
    # and tighter than the classic per-step calibration with basic composition
    classic = math.sqrt(2 * math.log(1.25 / (delta / k))) / (eps / k)
    assert z < classic


def test_ledger_of_a_calibrated_mechanism_reports_the_budget():
    z = gaussian_noise_multiplier(1.0, 1e-5, 100)
    mech = GaussianMechanism.from_noise_multiplier(0.02, z, 1e-5)
    assert mech.noise_multiplier == pytest.approx(z) and mech.sigma == pytest.approx(0.02 * z)
    ledger = PrivacyLedger(mech, target_delta=1e-5)
    ledger.record(100)
    assert ledger.per_step_verified()
    head = ledger.headline()
    assert 0.95 <= head["epsilon"] <= 1.0 + 1e-9 and head["delta"] == 1e-5


def test_laplace_calibration_is_the_exact_sum():
    assert laplace_epsilon_per_step(10.0, 100) == pytest.approx(0.1)
    assert laplace_epsilon_per_step(1.0, 4) * 4 == pytest.approx(1.0)


@pytest.mark.parametrize("eps, k, coordinates, gain", [(10.0, 100, 1, 2.0), (1.0, 100, 1, 2.5), (1.0, 100, 2, 3.0), (0.5, 20, 1, 1.3)])
def test_laplace_calibration_at_delta_uses_the_exact_pld(eps, k, coordinates, gain):
    """δ > 0: the per-step ε is the largest whose k-fold PLD (dp-accounting, computed here directly)
    stays within the target, to 0.1 %: tighter than the pure sum, never over the budget."""
    from dp_accounting import pld

    per_step = laplace_epsilon_per_step(eps, k, 1e-5, coordinates)

    def direct(e):
        acc = pld.PLDAccountant()
        event = dp_accounting.LaplaceDpEvent(noise_multiplier=coordinates / e)
        acc.compose(event, count=k * coordinates)
        return acc.get_epsilon(1e-5)

    assert per_step > gain * eps / k  # measured gains over the pure sum ε/k: 2.1, 2.7, 2.9 (bus), 1.34
    assert direct(per_step) <= eps
    assert direct(per_step * 1.002) > eps * 0.99
    with pytest.raises(ConfigError, match="exact only when"):
        laplace_epsilon_per_step(eps, k, 1e-5, None)


def test_laplace_budget_at_delta_runs_and_the_ledger_agrees():
    cfg = RunConfig(case="case14", algorithm="objl", target_epsilon=2.0, target_delta=1e-5, rounds=50)
    cfg_bus = cfg.replace(adjacency="bus")
    e_value, e_bus = cfg.per_step_noise()["epsilon"], cfg_bus.per_step_noise()["epsilon"]
    assert e_value > 2.0 / 50 * 1.5 and e_bus > e_value  # two shifted entries of 2β each beat one of 4β
    for c in (cfg, cfg_bus):
        from powerdp.engine.consensus.perturbations import ObjectivePerturbation
        from powerdp.opf.objectives import OBJECTIVES

        sens = OBJECTIVES["shedding"].gradient_sensitivity(c.beta, c.sensitivity, c.adjacency)
        pert = ObjectivePerturbation(c, gradient_sensitivity=sens, rng=np.random.default_rng(0), noise_cols=np.arange(3), zone=0)
        pert.ledger.record(50)
        head = pert.ledger.headline()
        assert head["source"] == "tight:pld" and head["delta"] == 1e-5
        assert 0.99 * 2.0 <= head["epsilon"] <= 2.0
        assert pert.ledger.basic()[0] == pytest.approx(50 * c.per_step_noise()["epsilon"])  # the pure sum, larger


@pytest.mark.parametrize(
    "settings, word",
    [
        ({"algorithm": "objg", "target_epsilon": 1.0}, "target_delta"),
        ({"algorithm": "objg", "target_epsilon": 1.0, "target_delta": 1.0}, "target_delta"),
        ({"algorithm": "outl", "target_epsilon": 1.0, "target_delta": 1e-5}, "output perturbation"),
        ({"algorithm": "objl", "target_epsilon": 1.0, "target_delta": 1.0}, r"\[0, 1\)"),
        ({"algorithm": "objl", "target_epsilon": 0.0}, "positive"),
        ({"algorithm": "objl", "target_epsilon": float("nan")}, "positive"),
        ({"algorithm": "objl", "target_epsilon": 1e-3, "rounds": 100}, f"bound of {MAX_NOISE_MULTIPLIER:g}"),
        ({"algorithm": "objg", "target_epsilon": 1e-4, "target_delta": 1e-5}, "bound of"),
        ({"algorithm": "exact", "target_epsilon": 1.0}, "not private"),
        ({"algorithm": "objl", "target_delta": 1e-5}, "goes with target_epsilon"),
    ],
)
def test_budgets_that_cannot_be_met_are_refused(settings, word):
    with pytest.raises(ConfigError, match=word):
        RunConfig(case="case14", **settings)


def test_a_budget_run_spends_its_budget(tmp_path):
    cfg = RunConfig(case="case14", algorithm="objg", target_epsilon=1.0, target_delta=1e-5, rounds=6, local_updates=2,
                    checkpoint_every=3)
    res = run_distributed(cfg, out=tmp_path / "run", reference=False)
    s = res.summary
    for z, eps in s["epsilon_total"].items():
        assert 0.95 <= eps <= 1.0 + 1e-9
        assert s["epsilon_basic"][z] > eps  # basic composition of the per-step figures is looser
        assert s["epsilon_per_step"][z] == pytest.approx(
            dp_accounting.get_epsilon_gaussian(cfg.per_step_noise()["noise_multiplier"], 1e-5))
    # more rounds would spend more than the budget: resuming cannot extend such a run
    with pytest.raises(ConfigError, match="calibrated to a total budget"):
        run_distributed(cfg.replace(rounds=8), out=tmp_path / "run", resume=True, reference=False)


def test_cli_refuses_both_epsilons(capsys):
    from powerdp.cli import main

    assert main(["run", "case14", "--epsilon", "0.2", "--target-epsilon", "1"]) == 2
    assert "not both" in capsys.readouterr().err
