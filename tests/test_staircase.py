"""The staircase mechanism (issue 37, the floor bullet at a large budget): its exact sampler, its privacy argument, its
accounting, its receipt, and input perturbation with it (``inps``) in a run, the audit and the verifier."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.cli import main
from powerdp.errors import ConfigError
from powerdp.privacy import PrivacyLedger, Sensitivity, StaircaseMechanism, make_mechanism, zone_rng
from powerdp.privacy.sampler import (
    STAIRCASE_STEP_MARGIN,
    NoiseSource,
    discrete_staircase,
    grid_step,
    staircase_grid,
    staircase_release,
    staircase_step_fraction,
    staircase_variance,
)
from powerdp.privacy.verify import RECEIPT_FILE, load_receipt

pytestmark = pytest.mark.filterwarnings("ignore")


def _level(z: np.ndarray, d: int, r: int) -> np.ndarray:
    a = np.abs(z)
    return a // d + (a % d >= r)


def _pmf(d: int, r: int, eps: float, reach: int) -> tuple[np.ndarray, np.ndarray]:
    """The staircase pmf on [−reach, reach] (normalised by its closed-form total over all integers)."""
    z = np.arange(-reach, reach + 1)
    b = math.exp(-eps)
    # Σ over all z of b^L(z): one side's steps sum to (r + (d − r)b)/(1 − b); twice that less the single 0
    total = 2.0 * (r + (d - r) * b) / (1.0 - b) - 1.0
    return z, b ** _level(z, d, r).astype(float) / total


@pytest.mark.parametrize("d, r, eps", [(5, 2, 1.0), (7, 1, 3.0), (4, 4, 0.5), (6, 3, 0.2)])
def test_the_sampler_draws_the_staircase_pmf(d, r, eps):
    n = 200_000
    z = discrete_staircase(NoiseSource(np.random.default_rng(7)), d, r, eps, n)
    reach = 12 * d
    values, p = _pmf(d, r, eps, reach)
    counts = np.array([np.count_nonzero(z == v) for v in values])
    expected = n * p
    big = expected > 50
    # every well-populated value within 5 standard deviations, and the mass beyond the window as the pmf says
    assert np.all(np.abs(counts[big] - expected[big]) <= 5 * np.sqrt(expected[big])), (counts[big], expected[big])
    outside = n - counts.sum()
    assert abs(outside - n * (1 - p.sum())) <= 5 * math.sqrt(max(n * (1 - p.sum()), 1.0)) + 1
    assert abs(z.mean()) < 5 * z.std() / math.sqrt(n)


def test_a_shift_by_at_most_one_step_changes_the_level_by_at_most_one():
    """The privacy argument of discrete_staircase: |L(z) − L(z + s)| ≤ 1 for every |s| ≤ d, so the pmf ratio of two
    neighbouring releases is at most e^ε; and some shift reaches e^ε (the claim is not loose)."""
    for d, r in ((5, 2), (6, 1), (4, 4), (9, 5)):
        z = np.arange(-6 * d, 6 * d + 1)
        worst = 0
        for s in range(-d, d + 1):
            worst = max(worst, int(np.max(np.abs(_level(z, d, r) - _level(z + s, d, r)))))
        assert worst == 1
        # one more than a step apart: two levels (what a sensitivity larger than the step would cost)
        assert np.max(np.abs(_level(z, d, r) - _level(z + d + 1, d, r))) == 2


def test_draws_are_a_function_of_the_seed_and_the_release_is_on_a_data_independent_grid():
    one = discrete_staircase(NoiseSource(zone_rng(3, 1)), 1000, 30, 10.0, 50)
    two = discrete_staircase(NoiseSource(zone_rng(3, 1)), 1000, 30, 10.0, 50)
    assert np.array_equal(one, two)
    values = np.array([0.1, 1.0 / 3.0, 2.5, -7.25])
    out, noise = staircase_release(values, 0.02, 10.0, zone_rng(0, 0))
    gamma = grid_step(0.02 / 10.0)
    assert np.all(out / gamma == np.round(out / gamma)) and np.all(noise / gamma == np.round(noise / gamma))
    assert np.all(np.abs(out - values) < 0.05)


def test_the_step_is_the_sensitivity_on_the_grid_and_its_fraction_is_geng_and_viswanaths():
    gamma, d, r = staircase_grid(0.02, 10.0)
    assert gamma == grid_step(0.002) and d == math.floor(0.02 * (1 + STAIRCASE_STEP_MARGIN) / gamma) + 1
    assert r == round(staircase_step_fraction(10.0) * d)
    assert staircase_step_fraction(1e-6) == pytest.approx(0.5, abs=1e-3)
    # the variances docs/results/utility.md quotes, against the Laplace floor (Δ/ε)²
    for eps, ratio in ((0.1, 2.00), (1.0, 1.92), (10.0, 0.085)):
        assert staircase_variance(1.0, eps) * eps**2 == pytest.approx(ratio, rel=0.01)
    z = discrete_staircase(NoiseSource(np.random.default_rng(0)), d, r, 10.0, 300_000)
    assert np.var(z * gamma) == pytest.approx(staircase_variance(0.02, 10.0), rel=0.1)  # ~12 % of it from rare far steps


def test_the_mechanism_needs_the_moved_entries_and_spends_eps_over_them():
    with pytest.raises(ConfigError, match="output perturbation"):
        StaircaseMechanism.from_sensitivity(Sensitivity(l1=0.04, l2=0.03, rule="sound", beta=0.01), 1.0)
    two = StaircaseMechanism.from_sensitivity(Sensitivity(l1=0.04, l2=0.03, rule="sound", beta=0.01, coordinates=2), 1.0)
    assert (two.entry_sensitivity, two.entry_epsilon, two.per_step()) == (0.02, 0.5, (1.0, 0.0))
    assert two.variance == pytest.approx(staircase_variance(0.02, 0.5))
    with pytest.raises(ConfigError, match="delta must be None or 0"):
        make_mechanism("staircase", Sensitivity(l1=0.02, l2=0.02, rule="sound", beta=0.01, coordinates=1), 1.0, 1e-5)
    with pytest.raises(ConfigError, match="from 1e-6 to 20 per moved entry"):
        StaircaseMechanism(0.02, 25.0)  # its sampler would need ~(2e^25)^(1/3) proposals a draw
    assert StaircaseMechanism(0.02, 25.0, coordinates=2).entry_epsilon == 12.5
    with pytest.raises(ValueError, match="d ≤ ε·2"):  # |Z| = G·d + u could wrap around
        discrete_staircase(NoiseSource(np.random.default_rng(0)), 2**61, 3, 0.05, 4)


def test_the_step_covers_the_floating_point_error_of_a_neighbouring_value():
    """Red team, 2026-11-29: a zone's load total summed in floating point moves by β plus a few ulps when one load moves
    by β, and with a step of ⌊β/γ⌋ + 1 grid units 1 of 20 000 random neighbouring pairs of a 60-bus zone shifted by one
    unit more (two levels: 2ε). The step's margin covers them all."""
    from fractions import Fraction

    from powerdp.privacy.sensitivity import totals_sensitivity

    beta = 0.01
    mech = StaircaseMechanism.from_sensitivity(totals_sensitivity(beta, "value"), 1.0)
    gamma, d, _ = staircase_grid(mech.entry_sensitivity, mech.entry_epsilon)
    without_margin = math.floor(mech.entry_sensitivity / gamma) + 1
    rng = np.random.default_rng(0)
    shifts = []
    for _ in range(20_000):
        pd = rng.uniform(0, 1.2, 60)
        i = rng.integers(60)
        moved = pd.copy()
        moved[i] = pd[i] + beta
        if Fraction(moved[i]) - Fraction(pd[i]) > Fraction(beta):  # exactly at most β apart, as neighbours are
            moved[i] = np.nextafter(moved[i], -np.inf)
        shifts.append(int(abs(np.rint(np.sum(moved) / gamma) - np.rint(np.sum(pd) / gamma))))
    assert max(shifts) == without_margin + 1  # the counter-example is in this sample
    assert max(shifts) <= d


def test_the_ledger_sums_its_pure_epsilon_and_claims_nothing_tighter():
    mech = StaircaseMechanism(0.02, 0.25)
    ledger = PrivacyLedger(mech, target_delta=1e-5)
    ledger.record(4)
    assert ledger.headline() == {"epsilon": 1.0, "delta": 0.0, "source": "basic"}
    assert ledger.tight() is None and ledger.per_step_verified()


def _run(tmp_path, name, *extra):
    out = tmp_path / name
    assert main(["run", "case14", "--zones", "2", "--target-epsilon", "1", "--rounds", "4", "--out", str(out),
                 "--no-reference", "-q", *extra]) == 0
    return out


@pytest.mark.parametrize("algorithm, extra", [("inps", []), ("inps", ["--target-delta", "1e-5"]),
                                              ("tots", ["--objective", "cost+shedding"])])
def test_a_staircase_receipt_verifies_and_one_with_a_narrower_step_exits_3(tmp_path, capsys, algorithm, extra):
    out = _run(tmp_path, algorithm, "--algorithm", algorithm, *extra)
    receipt = load_receipt(out)
    for unit in receipt["units"]:
        (release,) = unit["releases"]
        assert release["mechanism"] == "discrete_staircase" and release["count"] == 1 and release["coordinates"] == 1
    capsys.readouterr()
    assert main(["privacy", "verify", str(out), "--json", str(out / "verify.json")]) == 0
    rows = json.loads((out / "verify.json").read_text())["rows"]
    assert all(r["supported"] and r["agrees"] and r["ledger_epsilon"] == pytest.approx(1.0) for r in rows), rows
    # the step halved: the receipt now says each moved entry crosses two levels, 2ε, more than the ledger's claim
    edited = json.loads((out / "coordinator_view" / RECEIPT_FILE).read_text())
    edited["units"][0]["releases"][0]["step"] //= 2
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    capsys.readouterr()
    assert main(["privacy", "verify", str(tmp_path / "edited.json")]) == 3
    assert "FAILED" in capsys.readouterr().out
    # ε per entry lowered behind the release's ε: an inconsistent receipt, refused as bad input
    edited["units"][0]["releases"][0]["step"] *= 2
    edited["units"][0]["releases"][0]["entry_epsilon"] /= 2
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    assert main(["privacy", "verify", str(tmp_path / "edited.json")]) == 2
    assert "inconsistent staircase release" in capsys.readouterr().err


def test_inps_at_a_large_budget_is_far_below_laplace_on_the_shedding_objective():
    """What the mechanism is for: at a total ε of 10 the released point's shedding objective (the noise on the loads
    once the rounds have converged) is a fraction of input perturbation with Laplace noise (measured 0.20× against
    2.18× the floor n(β/ε)² over 300 rounds on case118: docs/results/utility.md); here case14, 2 zones, 3 seeds."""
    from powerdp.apps.power_flow.runner import run_distributed

    def f(algorithm: str, seed: int) -> float:
        cfg = RunConfig(case="case14", zones=2, algorithm=algorithm, target_epsilon=10.0, rounds=150, seed=seed,
                        objective="shedding", local_solver="clarabel")
        return run_distributed(cfg, reference=False).summary["final_objective"]

    floor = 2 * 11 * (0.01 / 10.0) ** 2  # pd and qd of case14's 11 loads
    stair = np.median([f("inps", s) for s in range(3)])
    laplace = np.median([f("inpl", s) for s in range(3)])
    # measured 0.56× and 2.26× (150 rounds leave part of the staircase's figure to the rounds)
    assert stair < floor < laplace and stair < laplace / 3, (stair / floor, laplace / floor)


def test_a_seeded_staircase_run_is_bit_identical_across_backends():
    from powerdp.apps.power_flow.runner import run_distributed

    def history(backend: str):
        cfg = RunConfig(case="case14", zones=2, algorithm="inps", target_epsilon=2.0, rounds=5, seed=3,
                        objective="shedding", backend=backend, workers=2 if backend == "process" else None)
        res = run_distributed(cfg, reference=False)
        return res.history["objective"].tolist(), res.history["feasibility"].tolist()

    assert history("serial") == history("process")


def test_the_audit_fails_a_staircase_calibrated_to_a_hundredth_of_its_sensitivity(case14):
    """A weakened staircase (test-only: its step is 1 % of the sensitivity, so one load's change crosses ~100 levels)
    is caught by the distinguishing attack; the honest one at the same claim passes (tests/test_audit.py)."""
    from powerdp.privacy.faults import InjectedFaults
    from powerdp.studies.audit import run_audit

    cfg = RunConfig(case="case14", zones=2, rounds=1, local_updates=1, evaluate=False, checkpoint_every=0,
                    algorithm="inps", target_epsilon=0.5, faults=InjectedFaults(sensitivity_scale=0.01))
    res = run_audit(cfg, runs=40, bus=4, jobs=1, network=case14)
    assert res.epsilon_total == pytest.approx(0.5)
    assert res.verdict == "failed" and res.epsilon_lower_bound > 0.5



@pytest.mark.parametrize("algorithm", ["tots", "inps"])
def test_a_dispatch_spends_its_pure_budget_over_the_day_with_the_staircase(tmp_path, algorithm):
    """``powerdp dispatch`` runs the staircase's forms: the user-level budget split by basic composition over the
    periods (one release a period) and an implemented dispatch that sheds nothing; a δ asked for changes nothing (the
    staircase is pure ε)."""
    from powerdp.apps.dispatch.config import DispatchConfig
    from powerdp.apps.dispatch.runner import run_dispatch
    from powerdp.grid.profiles import load_horizon

    from .test_dispatch import day_profile

    profile = day_profile(tmp_path / "day.csv", 3)
    horizon = load_horizon("case14", periods=3, profiles=profile)
    spent = {}
    for delta in (None, 1e-5):
        cfg = DispatchConfig(source="case14", profiles=str(profile), periods=3, zones=2, algorithm=algorithm,
                             target_epsilon=1.0, target_delta=delta, relation="user", max_rounds=10, seed=0)
        res = run_dispatch(cfg.validate(), horizon, ac_evaluation=False)
        assert res.summary["epsilon_total"] == pytest.approx(dict.fromkeys(range(2), 1.0))
        spent[delta] = res.periods["epsilon_spent"].to_numpy()
        assert spent[delta] == pytest.approx([1 / 3, 2 / 3, 1.0])
        assert (res.periods["implemented_shedding_mw"] < 1.0).all()
    assert spent[None].tolist() == spent[1e-5].tolist()
