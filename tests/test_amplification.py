"""Privacy amplification by iteration (001): the accountant against the paper's and SPEC §11's values,
its refusals, the command, Algorithm 1 and a small audit (docs/amplification.md)."""

import json
import math

import numpy as np
import pytest

from powerdp.apps.learning.noisy_admm import ElasticNet, elastic_net_data, noisy_admm, uniform_order
from powerdp.cli import main
from powerdp.privacy import amplification as amp
from powerdp.privacy.amplification import AssumptionError
from powerdp.studies.amplification_audit import audit_inner_steps, audit_noisy_admm, inner_step_release

# Table 1 of 001 with ν = μ_f = 2μ, μ_g = 2c₂ = 0.2, ‖AᵀB‖ = 1: η and 𝔏 recomputed (SPEC §11)
ROWS = [(0.25, 0.9, 1.753, 0.9474), (0.09, 0.5, 4.811, 0.9149), (0.0225, 0.3, 20.000, 0.8571), (0.01, 0.15, 43.301, 0.7992)]


@pytest.mark.parametrize("mu,beta,eta,lcal", ROWS)
def test_table1_eta_and_contraction(mu, beta, eta, lcal):
    nu = 2 * mu
    assert amp.step_midpoint(nu, nu, 0.2, beta) == pytest.approx(eta, abs=5e-4)
    assert amp.contraction(amp.step_midpoint(nu, nu, 0.2, beta), nu, nu, 0.2, beta) == pytest.approx(lcal, abs=5e-5)


def test_row2_terms_and_constants():
    eta = amp.step_midpoint(0.18, 0.18, 0.2, 0.5)
    lo, hi = amp.step_interval(0.18, 0.18, 0.2, 0.5)
    assert (lo, hi) == pytest.approx((4.066949, 5.555556), abs=1e-6)  # 4/(ν+μ+√((ν+μ)²+8νμ)), 2/(ν+μ)
    t = amp.contraction_terms(eta, 0.18, 0.18, 0.5)
    assert (t["R"], t["S"], t["Q"], t["P"]) == pytest.approx((0.28868, 9.62250, 10.51777, 0.84530), abs=1e-4)
    assert amp.strongly_convex_constant(eta, 0.18, 0.18, 0.2, 0.5) == pytest.approx(max(2 / t["R"], 3 / (eta * 0.5)) * (t["R"] + eta * 0.5))
    assert amp.convex_constant(eta, 0.5) == pytest.approx(max(2, 3 / (0.5 * eta)) * (1 + 0.5 * eta))


def test_row1_printed_eta_is_not_the_midpoint():
    # 1.95 lies inside (1.506, 2) but the formula then gives 𝔏 = 0.989, not the printed 0.95
    assert amp.step_interval(0.5, 0.5, 0.2, 0.9) == pytest.approx((1.50617, 2.0), abs=1e-5)
    assert amp.contraction(1.95, 0.5, 0.5, 0.2, 0.9) == pytest.approx(0.9889, abs=1e-4)


def test_refusals_name_the_assumption():
    with pytest.raises(AssumptionError, match=r"eq\. \(23\).*outside"):
        amp.contraction(2.5, 0.5, 0.5, 0.2, 0.9)
    with pytest.raises(AssumptionError, match="Assumption 7.1.*--strong"):
        amp.step_interval(0.5, None, 0.2, 0.9)
    with pytest.raises(AssumptionError, match="Assumption 7.1.*μ_g"):
        amp.step_interval(0.5, 0.5, 0.0, 0.9)
    with pytest.raises(AssumptionError, match="at most ν-strongly convex"):
        amp.step_interval(0.5, 0.6, 0.2, 0.9)
    with pytest.raises(AssumptionError, match=r"Lemma 6\.5.*η ≤ 1/ν"):
        amp.zcdp_convex(101, 2.5, 0.9, 0.1, 1.0, nu=0.5)
    with pytest.raises(AssumptionError, match=r"C ≤ 1/\(α\(α−1\)\)"):
        amp.rdp_all_users(2.0, 0.6, 100)
    with pytest.raises(AssumptionError, match="α must be > 1"):
        amp.rdp_all_users(1.0, 0.1, 100)
    assert issubclass(AssumptionError, ValueError)


def test_zcdp_bounds():
    eta, beta, d, s = 1.753, 0.9, 0.1, 0.2
    local = eta**2 * d**2 / (2 * s**2)
    assert amp.one_step_zcdp(eta, d, s) == pytest.approx(local)
    c = amp.convex_constant(eta, beta)
    assert amp.zcdp_convex(1, eta, beta, d, s, nu=0.5) == pytest.approx(local)  # T = 0: the local bound
    assert amp.zcdp_convex(3, eta, beta, d, s, nu=0.5) == pytest.approx(local)  # C/T > 1: post-processing wins
    assert amp.zcdp_convex(101, eta, beta, d, s, nu=0.5) == pytest.approx(c / 50 * local)
    assert amp.zcdp_convex(102, eta, beta, d, s, nu=0.5) == pytest.approx(c / 50 * local)  # T = ⌊(K−1)/2⌋
    cp, lc = amp.strongly_convex_constant(eta, 0.5, 0.5, 0.2, beta), amp.contraction(eta, 0.5, 0.5, 0.2, beta)
    assert amp.zcdp_strongly_convex(101, eta, 0.5, 0.5, 0.2, beta, d, s) == pytest.approx(cp * lc**99 / 50 * local)
    # §8: C of Assumption 8.1 from the convex curve is at most (2C + 2)ρ₁, and the permutation bound is 2αC·H_N/N
    curve = [amp.zcdp_convex(k, eta, beta, d, s, nu=0.5) for k in range(1, 2001)]
    c81 = amp.assumption_8_1_constant(curve)
    assert local <= c81 <= (2 * c + 2) * local
    assert amp.rdp_all_users(2.0, 0.1, 4) == pytest.approx(2 * 2 * 0.1 * (1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)


def test_conversions_through_dp_accounting():
    rho, delta = 0.05, 1e-5
    eps = amp.zcdp_to_dp(rho, delta)
    assert rho < eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta))  # tighter than the classical conversion
    assert eps == pytest.approx(1.3, abs=0.2)
    assert amp.rdp_to_dp(8.0, 0.08, 1e-5) == pytest.approx(1.294, abs=1e-3)  # single-order conversion
    assert amp.zcdp_to_dp(0.0, delta) == 0.0


def test_cli_acceptance_and_rows(tmp_path, capsys):
    out = tmp_path / "amp.json"
    assert main(["privacy", "amplification", "--smooth", "0.18", "--strong", "0.18", "--strong-g", "0.2", "--penalty", "0.5",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "4.811" in text and "0.9149" in text
    rep = json.loads(out.read_text())
    assert round(rep["eta"], 3) == 4.811 and round(rep["contraction"], 4) == 0.9149
    assert rep["eta_interval"] == pytest.approx([4.066949, 5.555556], abs=1e-6)
    assert "zcdp" not in rep
    for nu, beta, eta, lcal in ((0.045, 0.3, 20.000, 0.8571), (0.02, 0.15, 43.301, 0.7992)):
        assert main(["privacy", "amplification", "--smooth", str(nu), "--strong", str(nu), "--strong-g", "0.2", "--penalty", str(beta)]) == 0
        text = capsys.readouterr().out
        assert f"{eta:.3f}" in text and f"{lcal:.4f}" in text
    # with σ: the zcdp key, and the best bound that holds
    assert main(["privacy", "amplification", "--smooth", "0.18", "--strong", "0.18", "--strong-g", "0.2", "--penalty", "0.5",
                 "--sigma", "1", "--delta-grad", "0.1", "--iterations", "201", "--json", str(out), "--force"]) == 0
    z = json.loads(out.read_text())["zcdp"]
    assert z["source"] == "Cor. 7.3" and z["best"] == pytest.approx(min(z["one_step"], z["cor_6_2"], z["cor_7_3"]))
    assert z["one_step"] == pytest.approx(4.811252**2 * 0.01 / 2, rel=1e-5)


@pytest.mark.parametrize("args,message", [
    (["--smooth", "0.5", "--strong", "0.5", "--strong-g", "0.2", "--penalty", "0.9", "--eta", "2.5"], "eq. (23)"),
    (["--smooth", "0.5", "--strong-g", "0.2", "--penalty", "0.9"], "Assumption 7.1"),
    (["--smooth", "0.5", "--strong", "0.5", "--penalty", "0.9"], "Assumption 7.1"),
    (["--smooth", "0.5", "--penalty", "0.9", "--convex", "--eta", "3", "--sigma", "1", "--delta-grad", "1", "--users", "10"], "--users and --alpha"),
])
def test_cli_refusals_exit_2(args, message, capsys):
    assert main(["privacy", "amplification", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def _notebook_reference(p: ElasticNet, order, eta, beta, iterations):
    """001 Algorithm 1 as the authors' notebook writes it (per coordinate), noise-free."""
    x, lam = 3.0 * np.ones(p.dim), np.zeros(p.dim)
    for t in range(iterations):
        y = np.zeros(p.dim)
        for i in range(p.dim):
            hi, lo = lam[i] - beta * x[i] + p.c1, lam[i] - beta * x[i] - p.c1
            if hi > 0 and lo > 0:
                y[i] = -lo / (2 * p.c2 + beta)
            elif hi < 0 and lo < 0:
                y[i] = -hi / (2 * p.c2 + beta)
        lam = lam - beta * (x - y)
        a, b = p.features[order[t]], p.targets[order[t]]
        x = (x - eta * (2 * (a @ x - b) * a - beta * y - lam)) / (1 + eta * beta)
    return x, lam


def test_algorithm_matches_the_notebook_and_converges():
    p = elastic_net_data(0.25, n=8, users=50, seed=3)
    rng = np.random.default_rng(1)
    order = uniform_order(p.users, 3, 60, rng)
    res = noisy_admm(p, eta=1.753, beta=0.9, sigma=0.0, iterations=60, order=order, evaluate=True)
    for r in range(3):
        x, lam = _notebook_reference(p, order[r], 1.753, 0.9, 60)
        np.testing.assert_allclose(res.x[r], x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(res.lam[r], lam, rtol=1e-12, atol=1e-12)
    _, fstar = p.minimize()
    gap = res.objective - fstar
    assert np.all(gap >= -1e-9) and gap[:, -1].max() < 0.05 * gap[:, 0].min()
    noisy = noisy_admm(p, eta=1.753, beta=0.9, sigma=0.5, iterations=60, order=order, rng=np.random.default_rng(0), evaluate=True)
    assert noisy.objective[:, -1].mean() > res.objective[:, -1].mean()  # noise costs utility


def test_contraction_holds_on_the_strongly_convex_split():
    """Lemma 7.6 on Algorithm 1: two noise-free trajectories with the same users contract by 𝔏 in ‖·‖*."""
    p = elastic_net_data(0.25, n=8, users=40, seed=2, ridge_in_f=0.05)
    nu, mu, mug, beta = p.smoothness(), p.strong_convexity(), p.strong_convexity_g(), 0.9
    eta = amp.step_midpoint(nu, mu, mug, beta)
    lcal, r = amp.contraction(eta, nu, mu, mug, beta), amp.contraction_terms(eta, nu, mu, beta)["R"]
    order = np.repeat(uniform_order(p.users, 1, 30, np.random.default_rng(0)), 2, axis=0)
    start = np.random.default_rng(5).normal(size=(2, p.dim)) * 3
    res = noisy_admm(p, eta=eta, beta=beta, sigma=0.0, iterations=30, order=order, x0=start, lam0=start[::-1],
                     record_at=tuple(range(31)))

    def norm2(t):
        x, lam = res.recorded[t]
        dx, dl = x[0] - x[1], lam[0] - lam[1]
        return r * dx @ dx + eta / beta * (dl - beta * dx) @ (dl - beta * dx)

    ratios = np.array([norm2(t + 1) / norm2(t) for t in range(30)])
    assert ratios.max() <= lcal + 1e-9 and ratios.max() > 0.5  # the bound holds and is not vacuous here


def test_ledger_uses_what_the_problem_satisfies():
    order = uniform_order(20, 2, 101, np.random.default_rng(0))
    plain = noisy_admm(elastic_net_data(0.25, n=4, users=20), eta=1.753, beta=0.9, sigma=0.1, iterations=101, order=order,
                       rng=np.random.default_rng(0), target_shift=0.1)
    assert plain.ledger.source == "Cor. 6.2" and any("Assumption 7.1" in r for r in plain.ledger.refused)
    split = elastic_net_data(0.25, n=4, users=20, ridge_in_f=0.05)
    eta = amp.step_midpoint(split.smoothness(), split.strong_convexity(), split.strong_convexity_g(), 0.9)
    res = noisy_admm(split, eta=eta, beta=0.9, sigma=0.1, iterations=11, order=order, rng=np.random.default_rng(0), target_shift=0.1)
    assert res.ledger.source == "one step"  # C′𝔏/T > 1 after 11 iterations: the local bound is the smaller
    res = noisy_admm(split, eta=eta, beta=0.9, sigma=0.1, iterations=201, order=np.zeros((1, 201), int),
                     rng=np.random.default_rng(0), target_shift=0.1)
    assert res.ledger.source == "Cor. 7.3" and res.ledger.zcdp < 1e-3 * res.ledger.one_step_zcdp


def test_small_audit_release_below_claim_every_iterate_above():
    p = elastic_net_data(0.25, n=16, users=100, seed=0, ridge_in_f=0.05)
    beta, sigma = 0.9, 0.1
    eta = amp.step_midpoint(p.smoothness(), p.strong_convexity(), p.strong_convexity_g(), beta)
    shift = 8 * sigma * (1 + eta * beta) / eta / (2 * 0.5)  # x̃₁ moves by 8σ
    r = audit_noisy_admm(p, eta=eta, beta=beta, sigma=sigma, iterations=201, target_shift=shift, runs=200, seed=0)
    assert r["claim"]["source"] == "Cor. 7.3" and 1.0 < r["claim"]["epsilon"] < 3.0
    assert r["release"]["epsilon_lower_bound"] <= r["claim"]["epsilon"]
    assert r["every_iterate"]["epsilon_lower_bound"] > r["claim"]["epsilon"]
    assert r["release_below_claim"] and r["every_iterate_above_claim"]


def test_inner_steps_mean_release_is_composition_last_is_one_step():
    shift, gain = inner_step_release(steps=5, eta=0.95, rho=100.0, release="mean")
    assert shift / gain == pytest.approx(math.sqrt(5), rel=1e-3)  # ρ = 100: the steps are nearly independent
    shift, gain = inner_step_release(steps=5, eta=0.95, rho=100.0, release="last")
    assert shift / gain == pytest.approx(1.0, abs=0.02)
    r = audit_inner_steps(steps=5, eta=0.95, rho=100.0, noise_multiplier=1.0, runs=4000, seed=0)
    assert r["mean"]["above_hidden_steps_claim"]  # crediting the hidden steps to the mean release is refuted
    assert r["last"]["attack"]["epsilon_lower_bound"] <= r["last"]["exact_epsilon"]


def test_cli_convex_only(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["privacy", "amplification", "--smooth", "0.5", "--penalty", "0.9", "--convex", "--sigma", "0.2",
                 "--delta-grad", "0.1", "--iterations", "101", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["eta"] == pytest.approx(2.0) and rep["contraction"] is None
    z = rep["zcdp"]
    c = max(2, 3 / 1.8) * (1 + 1.8)
    assert z["source"] == "Cor. 6.2" and z["cor_6_2"] == pytest.approx(c / 50 * 4 * 0.01 / (2 * 0.04))
    assert main(["privacy", "amplification", "--smooth", "0.5", "--penalty", "0.9", "--convex", "--sigma", "0.2",
                 "--delta-grad", "0.1", "--eta", "2.5", "--json", str(out), "--force"]) == 0  # Cor. 6.2 refused, one step kept
    z = json.loads(out.read_text())["zcdp"]
    assert z["cor_6_2"] is None and "Lemma 6.5" in z["cor_6_2_refused"] and z["source"] == "one step"
    assert main(["privacy", "amplification", "--smooth", "0.5", "--penalty", "0.9", "--convex", "--json", str(out)]) == 2
    assert "exists" in capsys.readouterr().err


def test_zcdp_conversion_takes_the_smaller_of_two_sound_bounds():
    """dp-accounting's order grid is coarse at tiny ρ: the closed form ρ + 2√(ρ ln 1/δ) wins there, the
    accountant wins at moderate ρ (both sound, so the smaller is)."""
    import math

    from powerdp.privacy.amplification import zcdp_to_dp

    tiny = zcdp_to_dp(1e-11, 1e-6)
    assert tiny == pytest.approx(1e-11 + 2 * math.sqrt(1e-11 * math.log(1e6)), rel=1e-12)
    moderate = zcdp_to_dp(0.5, 1e-5)
    assert moderate < 0.5 + 2 * math.sqrt(0.5 * math.log(1e5)) - 0.1  # the accountant's optimal conversion
    assert 4.5 < moderate < 4.9


def test_the_bounds_refuse_constants_beyond_double_precision():
    """Issue 38, bug 2 at its cause: σ = 1e-300 makes η²Δ²/(2σ²) overflow; every bound built on it says so."""
    with pytest.raises(amp.AssumptionError, match="double precision"):
        amp.one_step_zcdp(1.0, 1.0, 1e-300)
    with pytest.raises(amp.AssumptionError, match="double precision"):
        amp.zcdp_convex(11, 1.0, 0.5, 1.0, 1e-300, 1.0)
    assert amp.one_step_zcdp(2.0, 3.0, 1e-3) == pytest.approx(0.5 * (2.0 * 3.0 / 1e-3) ** 2, rel=1e-15)
