"""--shrink-loads: input perturbation's loads shrunk toward their zone's mean (powerdp.privacy.shrinkage)."""

from __future__ import annotations

import numpy as np
import pytest

from powerdp.apps.power_flow.agent import ZoneAgent
from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.plan import resolve_config, resolve_partition
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.cli import main
from powerdp.errors import ConfigError
from powerdp.grid.loading import load_case
from powerdp.privacy.shrinkage import shrink_to_mean, shrinkage_factor
from powerdp.studies.plots import utility_floor


def test_the_factor_is_james_steins_positive_part():
    x = np.array([1.0, 2.0, 3.0, 4.0, 10.0])  # mean 4, spread 9 + 4 + 1 + 0 + 36 = 50
    assert shrinkage_factor(x, 5.0) == pytest.approx(1.0 - 2 * 5.0 / 50.0)
    np.testing.assert_allclose(shrink_to_mean(x, 5.0), 4.0 + 0.8 * (x - 4.0), rtol=0, atol=1e-15)
    assert shrinkage_factor(x, 1e3) == 0.0  # positive part: all at the mean, never past it
    np.testing.assert_array_equal(shrink_to_mean(x, 1e3), np.full(5, 4.0))


@pytest.mark.parametrize("x, variance", [(np.array([1.0, 5.0, 9.0]), 4.0),  # k ≤ 3: James–Stein gains nothing
                                         (np.array([1.0, 2.0, 3.0, 4.0]), 0.0),  # no noise
                                         (np.full(6, 2.5), 1.0)])  # no spread to shrink
def test_nothing_to_shrink_leaves_the_values(x, variance):
    before = x.copy()
    out = shrink_to_mean(x, variance)
    np.testing.assert_array_equal(out, before)
    np.testing.assert_array_equal(x, before)  # the input is not changed
    assert out is not x


def test_the_same_bits_in_any_order():
    """Exactly rounded sums: permuting the release permutes the result, bit for bit (no BLAS or SIMD order)."""
    rng = np.random.default_rng(4)
    x = rng.laplace(0.3, 0.2, 57) * np.exp(rng.normal(0, 3, 57))  # values of very different magnitudes
    perm = rng.permutation(57)
    np.testing.assert_array_equal(shrink_to_mean(x, 0.05)[perm], shrink_to_mean(x[perm], 0.05))


def test_large_noise_loses_less_small_noise_loses_nothing():
    """Laplace noise on case118's p loads (its 118 bus values, spread 0.39 p.u.): at ε = 0.1 (b = 0.1 p.u.) shrinkage
    lowers the squared error by about a tenth; at ε = 10 it changes it by less than 0.1 %."""
    pd = load_case("case118").pd
    rng = np.random.default_rng(0)
    for b, at_most in ((0.1, 0.93), (0.001, 1.001)):
        raw = shrunk = 0.0
        for _ in range(2000):
            x = pd + rng.laplace(0.0, b, pd.size)
            raw += float(np.sum((x - pd) ** 2))
            shrunk += float(np.sum((shrink_to_mean(x, 2 * b * b) - pd) ** 2))
        assert shrunk / raw < at_most, (b, shrunk / raw)  # measured 0.892 and 1.000001


def _agent(shrink: bool, algorithm: str = "inpl", **kw):
    net = load_case("case14")
    cfg = resolve_config(RunConfig(case="case14", zones=2, objective="shedding", algorithm=algorithm, target_epsilon=0.05,
                                   seed=7, shrink_loads=shrink, **kw), net)
    part = resolve_partition(net, cfg)
    keys = part.shared_by_zone(cfg.flows)
    return ZoneAgent(net, 0, part.own_buses(0), tuple(keys[0]), cfg)


@pytest.mark.parametrize("algorithm, extra", [("inpl", {}), ("inpg", {"target_delta": 1e-5}), ("inps", {})])
def test_the_zone_computes_with_its_release_shrunk_and_releases_the_same(algorithm, extra):
    """The release (the noisy term, drawn once, charged once) is the same with and without; only what the zone computes
    with changes, and it is the release's p block and q block each shrunk toward its own mean with the mechanism's
    variance: a function of the release alone."""
    plain, shrunk = _agent(False, algorithm, **extra), _agent(True, algorithm, **extra)
    np.testing.assert_array_equal(plain.perturbation.term, shrunk.perturbation.term)
    term = shrunk.perturbation.term
    at = {int(c): j for j, c in enumerate(shrunk.noise_cols)}
    variance = shrunk.perturbation.mechanism.variance
    c = shrunk._f_lin.c
    for block in shrunk._y_own:
        j = np.array([at[int(i)] for i in block])
        np.testing.assert_array_equal(c[block], shrink_to_mean(term[j], variance))
        assert shrinkage_factor(term[j], variance) < 1.0  # ε = 0.05: the noise is large against case14's loads: it shrinks
    np.testing.assert_array_equal(plain._f_lin.c[plain.noise_cols], term)
    assert plain.ledger.steps == shrunk.ledger.steps


def test_a_shrunk_run_is_closer_to_the_loads_at_a_small_budget():
    """case118, 3 zones, inpl at a total ε of 0.1, seed 0, 100 rounds: the shedding objective at the released point
    (the imbalance against the true loads) against the floor n(β/ε)²."""
    base = RunConfig(case="case118", zones=3, objective="shedding", algorithm="inpl", target_epsilon=0.1, seed=0, rounds=100)
    f = {s: run_distributed(base.replace(shrink_loads=s), reference=False).summary["final_objective"] for s in (False, True)}
    floor = float(utility_floor(2 * 118, 0.01, 0.1))
    assert f[True] / floor < 1.4 < 1.7 < f[False] / floor, {k: v / floor for k, v in f.items()}  # measured 1.25, 1.82


def test_a_resumed_shrunk_run_is_bit_identical(tmp_path):
    cfg = RunConfig(case="case14", zones=2, objective="shedding", algorithm="inpl", target_epsilon=0.05, seed=3, rounds=6,
                    shrink_loads=True, checkpoint_every=3)
    whole = run_distributed(cfg, reference=False)
    run_distributed(cfg.replace(rounds=3), out=tmp_path / "r", reference=False)
    resumed = run_distributed(cfg, out=tmp_path / "r", resume=True, reference=False)
    for col in ("objective", "feasibility"):
        np.testing.assert_array_equal(whole.history[col].to_numpy(), resumed.history[col].to_numpy())


@pytest.mark.parametrize("algorithm", ["objl", "totl", "nonprivate"])
def test_shrinking_is_refused_where_no_load_is_perturbed(algorithm):
    with pytest.raises(ConfigError, match="shrink_loads"):
        RunConfig(case="case14", algorithm=algorithm, shrink_loads=True)


def test_the_flag_is_one_line_when_refused(capsys):
    assert main(["run", "case14", "--algorithm", "objl", "--shrink-loads", "--rounds", "2", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--shrink-loads" in err and "objective perturbation" in err, err


def test_everything_released_is_a_function_of_the_release(monkeypatch):
    """An attack on the post-processing: two data sets whose zones draw the same release (the noisy term) give the same
    run, bit for bit, with the loads shrunk, however different their true loads: nothing of the loads enters the
    shrinkage or what crosses after it."""
    import dataclasses

    import pandas as pd

    from powerdp.engine.consensus.perturbations import InputPerturbation

    net = load_case("case14")
    cfg = RunConfig(case="case14", zones=2, objective="shedding", algorithm="inpl", target_epsilon=0.05, rounds=8, seed=0,
                    shrink_loads=True, evaluate=False)
    part = resolve_partition(net, resolve_config(cfg, net))
    fixed: list[np.ndarray] = []  # the zones' releases, in the order they draw (zone order, both runs)
    calls = []

    def draw(self, data_term):  # the first data set's releases, and the same releases on the second
        k = len(calls) % part.n_zones
        calls.append(k)
        if len(fixed) <= k:
            fixed.append(np.round(np.asarray(data_term) * 1.7 + 3.0))
        self.term, self.xi, self._uncharged = fixed[k].copy(), np.zeros(len(data_term)), True
        return self.term

    monkeypatch.setattr(InputPerturbation, "draw", draw)
    other = dataclasses.replace(net, pd=net.pd * 1.3 + 0.05, qd=net.qd * 0.5)
    a = run_distributed(cfg, network=net, partition=part, reference=False)
    b = run_distributed(cfg, network=other, partition=part.with_network(other), reference=False)
    cols = ["round", "feasibility", "dual_residual", "epsilon_spent", "rho"]
    pd.testing.assert_frame_equal(a.history[cols], b.history[cols], check_exact=True)
    np.testing.assert_array_equal(a.consensus, b.consensus)
    assert a.history["feasibility"].iloc[-1] > 0  # a real run, not an empty one


def test_the_audit_takes_a_shrunk_run_and_passes_its_claim():
    """``run_audit`` on a run with shrinkage: its noise-free probe used to keep shrink_loads and be refused (nothing to
    shrink without noise); the shrunk release passes at its claim (post-processing: no channel can gain on it)."""
    from powerdp.studies.audit import run_audit

    cfg = RunConfig(case="case14", zones=2, algorithm="inpl", objective="shedding", target_epsilon=1.0, rounds=3,
                    shrink_loads=True, evaluate=False, checkpoint_every=0)
    res = run_audit(cfg, runs=30, jobs=1)
    assert res.verdict == "passed" and res.epsilon_lower_bound <= res.epsilon_total == pytest.approx(1.0, rel=1e-9)
