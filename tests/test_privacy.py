"""Tests of powerdp.privacy: sensitivities, mechanisms, RNG and the privacy ledger."""

from __future__ import annotations

import dataclasses
import json
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld, rdp

from powerdp.errors import ConfigError
from powerdp.privacy import (
    GaussianMechanism,
    LaplaceMechanism,
    PrivacyLedger,
    PrivacyWarning,
    Sensitivity,
    gradient_sensitivity,
    make_mechanism,
    noise_magnitude,
    output_sensitivity,
    theorem_4_9_epsilon,
    zone_rng,
)

BETA = 0.01


def gaussian_eps_for_multiplier(z: float, delta: float) -> float:
    """ε such that the classic calibration gives σ/Δ₂ = z."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) / z


# --------------------------------------------------------------------------- sensitivities


def test_gradient_sensitivity_value_adjacency_is_2beta():
    # ∇f_p = 2(y + d) on the y entries: one load value moves one entry by 2β
    s = gradient_sensitivity(BETA, "sound")
    assert s.rule == "sound" and s.is_sound
    assert s.beta == BETA
    assert (s.l1, s.l2) == (pytest.approx(2 * BETA), pytest.approx(2 * BETA))
    assert "value adjacency" in s.note
    # in the paper's coordinates its value is the same number
    p = gradient_sensitivity(BETA, "paper")
    assert (p.l1, p.l2) == (s.l1, s.l2)
    assert p.rule == "paper" and not p.is_sound


def test_gradient_sensitivity_bus_adjacency():
    # pd_i and qd_i both move: two entries move by 2β each
    s = gradient_sensitivity(BETA, "sound", "bus")
    assert s.l1 == pytest.approx(4 * BETA)
    assert s.l2 == pytest.approx(2 * math.sqrt(2) * BETA)
    with pytest.raises(ConfigError, match="bus"):
        gradient_sensitivity(BETA, "paper", "bus")


def test_sensitivity_is_frozen():
    s = gradient_sensitivity(BETA)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.l1 = 1.0  # type: ignore[misc]


def test_output_sensitivity_sound_and_paper():
    g = gradient_sensitivity(BETA, "sound", "bus")
    eta, n = 0.5, 4
    o = output_sensitivity(g, eta, n, "gaussian")
    assert o.rule == "sound"
    assert o.l2 == pytest.approx(eta * 2 * math.sqrt(2) * BETA)
    assert o.l1 == pytest.approx(math.sqrt(n) * eta * 2 * math.sqrt(2) * BETA)
    # Laplace uses the L1 field, Gaussian the L2 field
    assert make_mechanism("laplace", o, 0.5).sensitivity == pytest.approx(o.l1)
    assert make_mechanism("gaussian", o, 0.5, 1e-2).sensitivity == pytest.approx(o.l2)

    gp = gradient_sensitivity(BETA, "paper")
    op = output_sensitivity(gp, eta, n, "laplace")
    assert (op.l1, op.l2) == (pytest.approx(BETA), pytest.approx(BETA))
    assert op.rule == "paper" and "NOT a sound bound" in op.note
    # explicit paper rule on a sound gradient sensitivity
    assert output_sensitivity(g, eta, n, rule="paper").l2 == pytest.approx(BETA)
    # a sound output bound cannot be derived from the paper's gradient value
    with pytest.raises(ConfigError, match="sound"):
        output_sensitivity(gp, eta, n, rule="sound")


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: gradient_sensitivity(0.0), "beta"),
        (lambda: gradient_sensitivity(-1.0), "beta"),
        (lambda: gradient_sensitivity(float("nan")), "beta"),
        (lambda: gradient_sensitivity(BETA, "optimistic"), "rule"),
        (lambda: gradient_sensitivity(BETA, "sound", "zone"), "adjacency"),
        (lambda: output_sensitivity(gradient_sensitivity(BETA), 0.0, 4), "eta"),
        (lambda: output_sensitivity(gradient_sensitivity(BETA), 1.0, 0), "n_vars"),
        (lambda: output_sensitivity(gradient_sensitivity(BETA), 1.0, 4, "cauchy"), "mechanism"),
    ],
)
def test_sensitivity_bad_parameters(call, word):
    with pytest.raises(ConfigError, match=word):
        call()


# --------------------------------------------------------------------------- mechanisms

N_SAMPLES = 200_000


def test_laplace_mechanism_statistics():
    m = LaplaceMechanism(0.08, 0.5)
    b = 0.08 / 0.5
    assert m.scale == pytest.approx(b)
    assert m.variance == pytest.approx(2 * b * b)
    assert m.std == pytest.approx(math.sqrt(2) * b)
    assert m.per_step() == (0.5, 0.0)
    assert m.noise_multiplier == pytest.approx(1 / 0.5)
    x = m.sample(np.random.default_rng(12345), N_SAMPLES)
    assert x.shape == (N_SAMPLES,)
    assert abs(x.mean()) < 4 * m.std / math.sqrt(N_SAMPLES)
    assert x.var() == pytest.approx(m.variance, rel=0.03)
    assert np.mean(np.abs(x)) == pytest.approx(b, rel=0.02)  # E|X| = b for Laplace


def test_gaussian_mechanism_statistics():
    m = GaussianMechanism(0.06, 0.5, 1e-2)
    sigma2 = 2 * math.log(1.25 / 1e-2) * (0.06 / 0.5) ** 2
    assert m.variance == pytest.approx(sigma2)
    assert m.std == pytest.approx(math.sqrt(sigma2))
    assert m.per_step() == (0.5, 1e-2)
    x = m.sample(np.random.default_rng(54321), (N_SAMPLES // 4, 4))
    assert x.shape == (N_SAMPLES // 4, 4)
    assert abs(x.mean()) < 4 * m.std / math.sqrt(N_SAMPLES)
    assert x.var() == pytest.approx(sigma2, rel=0.02)


def test_gaussian_warns_for_large_epsilon():
    with pytest.warns(PrivacyWarning, match="epsilon"):
        GaussianMechanism(1.0, 1.0, 1e-2)


def test_make_mechanism():
    s = gradient_sensitivity(BETA)
    lap = make_mechanism("laplace", s, 0.1)
    assert isinstance(lap, LaplaceMechanism) and lap.scale == pytest.approx(s.l1 / 0.1)
    assert isinstance(make_mechanism("laplace", s, 0.1, delta=0), LaplaceMechanism)
    gau = make_mechanism("Gaussian", s, 0.1, 1e-2)
    assert isinstance(gau, GaussianMechanism)
    assert gau.sigma == pytest.approx(math.sqrt(2 * math.log(125)) * s.l2 / 0.1)


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: LaplaceMechanism(1.0, 0.0), "epsilon"),
        (lambda: LaplaceMechanism(1.0, -0.1), "epsilon"),
        (lambda: LaplaceMechanism(0.0, 0.1), "l1_sensitivity"),
        (lambda: GaussianMechanism(1.0, 0.0, 1e-2), "epsilon"),
        (lambda: GaussianMechanism(1.0, 0.5, 0.0), "delta"),
        (lambda: GaussianMechanism(1.0, 0.5, 1.0), "delta"),
        (lambda: GaussianMechanism(1.0, 0.5, -1e-3), "delta"),
        (lambda: GaussianMechanism(1.0, 0.5, float("nan")), "delta"),
        (lambda: GaussianMechanism(-1.0, 0.5, 1e-2), "l2_sensitivity"),
        (lambda: make_mechanism("gaussian", gradient_sensitivity(BETA), 0.5), "delta"),
        (lambda: make_mechanism("laplace", gradient_sensitivity(BETA), 0.5, 1e-2), "delta"),
        (lambda: make_mechanism("cauchy", gradient_sensitivity(BETA), 0.5), "kind"),
        (lambda: make_mechanism("laplace", gradient_sensitivity(BETA), 0), "epsilon"),
        (lambda: LaplaceMechanism(1.0, 0.1).sample(np.random.RandomState(0), 3), "Generator"),
    ],
)
def test_mechanism_bad_parameters(call, word):
    with pytest.raises(ConfigError, match=word):
        call()


# --------------------------------------------------------------------------- rng


def test_zone_rng_reproducible_and_independent():
    a = zone_rng(7, 1).standard_normal(1000)
    b = zone_rng(7, 1).standard_normal(1000)
    np.testing.assert_array_equal(a, b)
    # same construction as numpy's default_rng(SeedSequence([seed, zone]))
    np.testing.assert_array_equal(
        a, np.random.default_rng(np.random.SeedSequence([7, 1])).standard_normal(1000)
    )
    c = zone_rng(7, 2).standard_normal(100_000)
    d = zone_rng(7, 1).standard_normal(100_000)
    assert not np.array_equal(c[:1000], a)
    assert not np.array_equal(zone_rng(8, 1).standard_normal(1000), a)
    assert abs(np.corrcoef(c, d)[0, 1]) < 0.02
    # zone 0 and seed 0 are legitimate
    zone_rng(0, 0)
    for bad in [(-1, 0), (0, -1), (1.5, 0), (0, "z")]:
        with pytest.raises(ConfigError):
            zone_rng(*bad)


def test_noise_magnitude():
    assert noise_magnitude(np.array([1.0, -2.0, 0.5])) == pytest.approx(3.5)
    assert noise_magnitude(np.zeros(0)) == 0.0
    assert noise_magnitude([[1, -1], [-1, 1]]) == pytest.approx(4.0)


# --------------------------------------------------------------------------- ledger: Gaussian

Z, K, DELTA = 5.0, 100, 1e-5
EPS5 = gaussian_eps_for_multiplier(Z, DELTA)  # ≈ 0.969 < 1: no warning


def gaussian_ledger(**kw) -> PrivacyLedger:
    mech = GaussianMechanism(0.02, EPS5, DELTA)
    assert mech.noise_multiplier == pytest.approx(Z)
    return PrivacyLedger(mech, **kw)


def test_ledger_gaussian_closed_forms():
    led = gaussian_ledger(zone=3)
    assert led.target_delta == DELTA  # default: the per-step delta
    assert led.steps == 0 and led.epsilon_spent() == 0.0
    for _ in range(K // 2):
        led.record()
    assert led.record(K // 2) == K
    rep = led.report()
    assert rep["steps"] == K and rep["zone"] == 3
    assert rep["per_step"]["epsilon"] == EPS5 and rep["per_step"]["delta"] == DELTA
    assert rep["per_step"]["verified"]
    assert rep["basic"]["epsilon"] == pytest.approx(K * EPS5)
    assert rep["basic"]["delta"] == pytest.approx(K * DELTA)
    thm = math.sqrt(K * math.log(1 / DELTA) / math.log(1.25 / DELTA)) * EPS5
    assert rep["theorem_4_9"]["epsilon"] == pytest.approx(thm)
    assert rep["theorem_4_9"]["delta"] == DELTA
    assert theorem_4_9_epsilon(EPS5, DELTA, K) == pytest.approx(thm)


def test_ledger_gaussian_tight_matches_dp_accounting():
    direct_pld = pld.PLDAccountant()
    direct_pld.compose(dp_accounting.GaussianDpEvent(noise_multiplier=Z), count=K)
    eps_pld = direct_pld.get_epsilon(DELTA)
    direct_rdp = rdp.RdpAccountant()
    direct_rdp.compose(dp_accounting.GaussianDpEvent(noise_multiplier=Z), count=K)
    eps_rdp = direct_rdp.get_epsilon(DELTA)
    # k Gaussians with multiplier z compose to one with z/√k (exact)
    eps_exact = dp_accounting.get_epsilon_gaussian(Z / math.sqrt(K), DELTA)
    assert eps_pld == pytest.approx(eps_exact, rel=1e-3)
    assert eps_exact <= eps_pld * (1 + 1e-9) <= eps_rdp

    figures = {}
    for method in ("pld", "rdp", "analytic", "auto"):
        led = gaussian_ledger(tight_method=method)
        led.record(K)
        tight = led.tight()
        assert tight["delta"] == DELTA
        figures[method] = tight["epsilon"]
        basic_eps = led.basic()[0]
        assert tight["epsilon"] <= basic_eps
        # the headline is the tightest valid figure, never above the tight one
        assert led.epsilon_spent() <= tight["epsilon"] + 1e-12
    assert figures["pld"] == pytest.approx(eps_pld, rel=1e-9)
    assert figures["rdp"] == pytest.approx(eps_rdp, rel=1e-9)
    assert figures["analytic"] == pytest.approx(eps_exact, rel=1e-9)
    assert figures["auto"] == figures["analytic"]

    led = gaussian_ledger()
    led.record(K)
    rep = led.report()
    # here (z = 5, k = 100, δ = 1e-5) Theorem 4.9 claims less than the exact epsilon: false
    assert rep["theorem_4_9"]["epsilon"] < eps_exact
    assert rep["theorem_4_9"]["valid"] is False
    assert rep["headline"] == {"epsilon": pytest.approx(eps_exact), "delta": DELTA, "source": "tight:analytic"}
    # basic composition's delta (K·δ) exceeds the target: not a headline candidate
    assert rep["basic"]["delta"] > led.target_delta


def test_ledger_theorem_4_9_valid_case():
    # small per-step epsilon: Theorem 4.9 is a true (looser) guarantee
    eps, delta, k = 0.1, 1e-5, 100
    led = PrivacyLedger(GaussianMechanism(0.02, eps, delta))
    led.record(k)
    rep = led.report()
    z = math.sqrt(2 * math.log(1.25 / delta)) / eps
    exact = dp_accounting.get_epsilon_gaussian(z / math.sqrt(k), delta)
    assert rep["theorem_4_9"]["epsilon"] == pytest.approx(
        math.sqrt(k * math.log(1 / delta) / math.log(1.25 / delta)) * eps
    )
    assert rep["theorem_4_9"]["valid"] is True
    assert exact < rep["theorem_4_9"]["epsilon"] < rep["basic"]["epsilon"]
    assert led.epsilon_spent() == pytest.approx(exact)


def test_ledger_theorem_4_9_can_be_invalid():
    # paper setting ε = 1, δ = 1e-2, T·E = 100: the stated bound is below the exact epsilon
    with pytest.warns(PrivacyWarning):
        mech = GaussianMechanism(0.02, 1.0, 1e-2)
    led = PrivacyLedger(mech)
    led.record(100)
    rep = led.report()
    exact = dp_accounting.get_epsilon_gaussian(mech.noise_multiplier / 10.0, 1e-2)
    assert rep["exact"]["epsilon"] == pytest.approx(exact)
    assert rep["theorem_4_9"]["epsilon"] < exact
    assert rep["theorem_4_9"]["valid"] is False
    assert rep["headline"]["source"] == "tight:analytic"
    assert rep["per_step"]["verified"]  # the classic calibration still holds at ε = 1 here


def test_ledger_gaussian_single_step_and_target_delta():
    led = gaussian_ledger()
    led.record()
    rep = led.report()
    # one step: basic composition (ε, δ) is a candidate, but the exact figure is smaller
    assert rep["per_step"]["exact_epsilon"] <= EPS5
    assert led.epsilon_spent() == pytest.approx(rep["per_step"]["exact_epsilon"])
    # a larger target delta gives a smaller epsilon
    led2 = gaussian_ledger(target_delta=1e-3)
    led2.record(K)
    led1 = gaussian_ledger()
    led1.record(K)
    assert led2.epsilon_spent() < led1.epsilon_spent()
    assert led2.headline()["delta"] == 1e-3


def test_ledger_without_tight_falls_back():
    eps, delta, k = 0.1, 1e-5, 100
    mech = GaussianMechanism(0.02, eps, delta)
    led = PrivacyLedger(mech, tight_method="none")
    led.record(k)
    assert led.tight() is None
    # Theorem 4.9 is valid here and sits at the target delta
    assert led.headline() == {
        "epsilon": pytest.approx(theorem_4_9_epsilon(eps, delta, k)),
        "delta": delta,
        "source": "theorem_4_9",
    }
    # basic (k·δ = 1e-3 <= 0.5) and Thm 4.9 both qualify: the smaller wins
    led_big = PrivacyLedger(mech, tight_method="none", target_delta=0.5)
    led_big.record(k)
    assert led_big.headline()["source"] == "theorem_4_9"
    # Theorem 4.9 false and k·δ above the target: nothing qualifies -> basic at its own delta
    led_false = gaussian_ledger(tight_method="none")
    led_false.record(K)
    assert led_false.headline() == {
        "epsilon": pytest.approx(K * EPS5),
        "delta": pytest.approx(K * DELTA),
        "source": "basic",
    }


def test_ledger_caches_per_step_count():
    led = gaussian_ledger(tight_method="pld")
    calls = []
    original = led._tight_value

    def counting():
        calls.append(led.steps)
        return original()

    led._tight_value = counting  # type: ignore[method-assign]
    led.record(10)
    e1 = led.epsilon_spent()
    led.report()
    led.epsilon_spent()
    assert calls == [10]
    led.record()
    e2 = led.epsilon_spent()
    led.report()
    assert calls == [10, 11]
    assert e2 > e1


def test_ledger_record_checks():
    led = gaussian_ledger()
    with pytest.raises(ConfigError, match="n_steps"):
        led.record(-1)
    with pytest.raises(ConfigError, match="mechanism protocol"):
        led.record(1, mechanism="gaussian")
    # same (ε, δ) with another sensitivity (e.g. a new η_t) is the same mechanism for the ledger
    led.record(1, mechanism=GaussianMechanism(0.5, EPS5, DELTA))
    assert led.steps == 1 and led.homogeneous and len(led.history) == 1
    # another (ε, δ) starts a new entry of the history
    led.record(1, mechanism=GaussianMechanism(0.5, 0.5, DELTA))
    assert led.steps == 2 and not led.homogeneous and len(led.history) == 2


# --------------------------------------------------------------------------- ledger: Laplace


def test_ledger_laplace_exact_sum():
    led = PrivacyLedger(LaplaceMechanism(0.08, 0.1), zone=0)
    assert led.target_delta == 0.0
    led.record(50)
    rep = led.report()
    assert rep["basic"] == {"epsilon": pytest.approx(5.0), "delta": 0.0, "valid": True}
    assert rep["headline"] == {"epsilon": pytest.approx(5.0), "delta": 0.0, "source": "basic"}
    assert rep["theorem_4_9"] is None and rep["tight"] is None
    assert led.epsilon_spent() == pytest.approx(5.0)


def test_ledger_laplace_pld_extra():
    eps, k, target = 0.1, 50, 1e-5
    led = PrivacyLedger(LaplaceMechanism(0.08, eps), target_delta=target)
    led.record(k)
    direct = pld.PLDAccountant()
    direct.compose(dp_accounting.LaplaceDpEvent(noise_multiplier=1 / eps), count=k)
    tight = led.tight()
    assert tight["method"] == "pld"
    assert tight["epsilon"] == pytest.approx(direct.get_epsilon(target), rel=1e-9)
    assert tight["epsilon"] <= k * eps
    # the headline stays the exact pure-epsilon sum
    assert led.epsilon_spent() == pytest.approx(k * eps)


def test_ledger_to_dict_is_json():
    for led in (gaussian_ledger(zone=1), PrivacyLedger(LaplaceMechanism(0.08, 0.1), zone=2)):
        led.record(20)
        d = led.to_dict()
        text = json.dumps(d, allow_nan=False)
        back = json.loads(text)
        assert back["steps"] == 20
        assert back["config"]["mechanism"] == led.kind
        assert back["headline"]["epsilon"] == pytest.approx(led.epsilon_spent())


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"target_delta": 0.0}, "target_delta"),
        ({"target_delta": 1.0}, "target_delta"),
        ({"tight_method": "moments"}, "tight_method"),
    ],
)
def test_ledger_bad_parameters(kw, word):
    with pytest.raises(ConfigError, match=word):
        gaussian_ledger(**kw)


def test_ledger_bad_parameters_laplace():
    with pytest.raises(ConfigError, match="target_delta"):
        PrivacyLedger(LaplaceMechanism(1.0, 0.1), target_delta=-0.1)
    with pytest.raises(ConfigError, match="analytic"):
        PrivacyLedger(LaplaceMechanism(1.0, 0.1), target_delta=1e-5, tight_method="analytic")
    with pytest.raises(ConfigError, match="mechanism"):
        PrivacyLedger("gaussian")  # type: ignore[arg-type]


def test_sensitivity_dataclass_validates():
    with pytest.raises(ConfigError, match="rule"):
        Sensitivity(1.0, 1.0, "guess", 0.01)
    with pytest.raises(ConfigError, match="l2"):
        Sensitivity(1.0, 0.0, "sound", 0.01)


# --------------------------------------------------------------------------- heterogeneous histories


def test_ledger_composes_steps_of_different_mechanisms():
    a = GaussianMechanism(1.0, 0.5, 1e-5)
    b = GaussianMechanism(1.0, 0.25, 1e-5)
    ledger = PrivacyLedger(a, target_delta=1e-5)
    ledger.record(3)
    ledger.record(2, mechanism=b)
    ledger.record(1, mechanism=b)
    assert ledger.steps == 6 and not ledger.homogeneous
    assert [n for _, n in ledger.history] == [3, 3]
    eps, delta = ledger.basic()
    assert eps == pytest.approx(3 * 0.5 + 3 * 0.25) and delta == pytest.approx(6e-5)
    assert ledger.per_step() == (0.5, 1e-5)
    assert ledger.theorem_4_9() is None
    # the analytic figure is the GDP composition, checked against dp-accounting's PLD
    mu2 = 3 / a.noise_multiplier**2 + 3 / b.noise_multiplier**2
    exact = dp_accounting.get_epsilon_gaussian(1 / math.sqrt(mu2), 1e-5)
    assert ledger.tight()["epsilon"] == pytest.approx(exact, rel=1e-9)
    acc = pld.PLDAccountant()
    acc.compose(dp_accounting.ComposedDpEvent([
        dp_accounting.SelfComposedDpEvent(a.dp_event(), 3), dp_accounting.SelfComposedDpEvent(b.dp_event(), 3)]))
    assert acc.get_epsilon(1e-5) == pytest.approx(exact, rel=2e-3)
    assert ledger.report()["history"][1]["steps"] == 3


def test_ledger_mixed_kinds_use_the_pld():
    lap, gau = LaplaceMechanism(1.0, 0.5), GaussianMechanism(1.0, 0.5, 1e-5)
    ledger = PrivacyLedger(lap, target_delta=1e-5)
    ledger.record(2)
    ledger.record(2, mechanism=gau)
    assert ledger.kind == "mixed" and ledger.tight()["method"] == "pld"
    acc = pld.PLDAccountant()
    acc.compose(dp_accounting.ComposedDpEvent([
        dp_accounting.SelfComposedDpEvent(lap.dp_event(), 2), dp_accounting.SelfComposedDpEvent(gau.dp_event(), 2)]))
    assert ledger.tight()["epsilon"] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    assert ledger.headline()["epsilon"] <= ledger.basic()[0] + 1e-12


def test_mechanisms_follow_one_protocol():
    from powerdp.privacy import MECHANISMS

    s = Sensitivity(l1=0.04, l2=0.03, rule="sound", beta=0.01, coordinates=1)
    for name, cls in MECHANISMS.items():
        m = cls.from_sensitivity(s, 0.5, 1e-3)
        assert m.kind == name and m.norm in ("l1", "l2")
        assert m.sensitivity == (s.l1 if m.norm == "l1" else s.l2)
        eps, delta = m.per_step()
        assert eps == 0.5 and m.noise_multiplier > 0
        assert m.sample(zone_rng(0, 0), 3).shape == (3,)
        if name == "staircase":  # accounted by summing its pure ε: no dp-accounting event is claimed
            with pytest.raises(ConfigError, match="pure composition"):
                m.dp_event()
        else:
            assert type(m.dp_event()).__name__ == ("LaplaceDpEvent" if name == "laplace" else "GaussianDpEvent")
