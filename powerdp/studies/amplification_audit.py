"""Empirical checks of privacy amplification by iteration (docs/amplification.md, "The audit").

Uses the statistics of :mod:`powerdp.studies.audit` (a linear distinguisher and its threshold fitted on one
half of the runs, Clopper–Pearson intervals of its error rates on the other half, the ε lower bound
they prove) on two kinds of runs:

* :func:`audit_noisy_admm`: 001's Algorithm 1 (powerdp.apps.learning.noisy_admm) on two neighbouring
  problems whose first user's target b differs (Definition 3.3 with Δ = 2|shift|·max‖a_i‖), every later
  user identical and never the first one again, one fixed user sequence (001's model: the noise is the
  only randomness). The attacker sees either the release (final x̃_K and λ_K) or every iterate (it
  then uses x̃₁). The ledger's claim must stay above the first bound, and the second must be able to
  exceed it (the attack is not blind).
* :func:`audit_inner_steps`: the question for power flow. One zone's E local steps of powerdp's
  linearized update on one load coordinate (noise on the gradient, the load entering every step),
  released as the mean of the E iterates (powerdp) or as the last one. The release is linear in the
  Gaussian noise, so its exact privacy is μ-GDP with μ = |Δmean|/sd, computed here, and audited.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..apps.learning.noisy_admm import ElasticNet, noisy_admm
from ..errors import ConfigError
from .audit import DEFAULT_CONFIDENCE, attack

__all__ = ["audit_noisy_admm", "inner_step_release", "gdp_epsilon", "audit_inner_steps"]


def _fixed_order(users: int, first: int, iterations: int, seed: int) -> np.ndarray:
    """One public user sequence: ``first`` at iteration 1, then uniform draws among the others."""
    rng = np.random.default_rng(seed)
    later = rng.integers(users - 1, size=iterations - 1)
    later = later + (later >= first)  # skip the first user: its function is used once only
    return np.concatenate([[first], later])


def audit_noisy_admm(problem: ElasticNet, *, eta: float, beta: float, sigma: float, iterations: int, target_shift: float,
                     runs: int = 1000, first_user: int = 0, seed: int = 0, delta: float = 1e-5,
                     confidence: float = DEFAULT_CONFIDENCE) -> dict[str, Any]:
    """Distinguish the first user's two neighbouring targets from the release vs from every iterate.

    ``runs`` seeded runs per dataset (seeds ``seed + 1`` and ``seed + 2``; the user sequence from
    ``seed``). Returns the ledger entry (the claim), both attacks' results and the verdicts.
    """
    if runs < 20:
        raise ConfigError(f"runs must be at least 20 per dataset (half train, half test), got {runs}")
    if not 0 <= first_user < problem.users:
        raise ConfigError(f"first_user must be a user index 0..{problem.users - 1}, got {first_user}")
    order = np.broadcast_to(_fixed_order(problem.users, first_user, iterations, seed), (runs, iterations))
    neighbour = problem.with_target(first_user, target_shift)
    obs: dict[str, list[np.ndarray]] = {"release": [], "every_iterate": []}
    ledger = None
    for k, prob in enumerate((problem, neighbour)):
        res = noisy_admm(prob, eta=eta, beta=beta, sigma=sigma, iterations=iterations, order=order,
                         rng=np.random.default_rng(seed + 1 + k), record_at=(1,), target_shift=target_shift, delta=delta)
        ledger = ledger or res.ledger
        obs["release"].append(np.hstack([res.x, res.lam]))
        obs["every_iterate"].append(res.recorded[1][0])  # x̃₁: what an observer of every iterate sees first
    claim = ledger.epsilon
    out = {
        "claim": ledger.to_dict(),
        "gradient_sensitivity": problem.gradient_sensitivity(target_shift),
        "settings": {"eta": eta, "beta": beta, "sigma": sigma, "iterations": iterations, "target_shift": target_shift,
                     "runs_per_dataset": runs, "first_user": first_user, "seed": seed, "delta": delta,
                     "confidence": confidence, "users": problem.users, "dim": problem.dim, "ridge_in_f": problem.ridge_in_f},
    }
    for view, (x0, x1) in obs.items():
        out[view] = attack(x0, x1, delta, confidence)
    out["release_below_claim"] = out["release"]["epsilon_lower_bound"] <= claim
    out["every_iterate_above_claim"] = out["every_iterate"]["epsilon_lower_bound"] > claim
    return out


# --------------------------------------------------------------------------- hidden inner steps (power flow)


def inner_step_release(*, steps: int, eta: float, rho: float, curvature: float = 2.0, release: str = "mean") -> tuple[float, float]:
    """Mean shift and noise gain of one zone's released coordinate after E linearized local steps.

    One y coordinate of powerdp's update (docs/algorithm.md) with f = (y + d)², unconstrained:
    z⁺ = argmin ⟨∇f(z) + ξ, z⟩ + (1/2η)(z − z_e)² + (ρ/2)(w − z + λ/ρ)², i.e.
    z_{e+1} = a·z_e + const − (2d + ξ_e)/D with D = 1/η + ρ, a = (1/η − curvature)/D.
    A unit move of the gradient at every step (d → d + 1/2) moves the release by ``shift``; noise
    ξ_e ~ N(0, 1) gives it standard deviation ``gain``. Returns (shift, gain) per unit, so the
    release is (|shift|/gain · Δ/s)-GDP for gradient sensitivity Δ and noise s.
    """
    if steps < 1 or release not in ("mean", "last"):
        raise ConfigError(f"steps must be ≥ 1 and release 'mean' or 'last', got {steps}, {release!r}")
    d = 1.0 / eta + rho
    a = (1.0 / eta - curvature) / d
    w = np.full(steps, 1.0 / steps) if release == "mean" else np.eye(steps)[-1]
    # iterate e (1-based) = Σ_{j ≤ e} a^{e−j}·(−u_j/D) + deterministic part, u_j the gradient term of step j
    powers = np.array([[a ** (e - j) if j <= e else 0.0 for j in range(steps)] for e in range(steps)])
    coef = (w @ powers) / d  # weight of each step's gradient term in the release
    return float(abs(coef.sum())), float(np.linalg.norm(coef))


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of μ-GDP (one Gaussian mechanism with noise multiplier 1/μ), via dp-accounting."""
    import dp_accounting

    return float(dp_accounting.get_epsilon_gaussian(1.0 / mu, delta)) if mu > 0 else 0.0


def audit_inner_steps(*, steps: int, eta: float, rho: float, noise_multiplier: float, runs: int = 20000, seed: int = 0,
                      delta: float = 1e-2, confidence: float = DEFAULT_CONFIDENCE) -> dict[str, Any]:
    """Audit one round of E local steps released as the mean (powerdp) or as the last iterate.

    Per step the gradient noise is N(0, s²) with s = noise_multiplier·Δ (Δ = 2β); ``runs`` seeded draws
    of each release on each of the two neighbouring loads. Claims: the exact GDP ε of each release, and
    the "hidden inner steps" claim (one step's privacy, what amplification could at most credit) which
    is sound for the last iterate and not for the mean.
    """
    rng = np.random.default_rng(seed)
    sens = 1.0
    s = noise_multiplier * sens
    out: dict[str, Any] = {"settings": {"steps": steps, "eta": eta, "rho": rho, "noise_multiplier": noise_multiplier,
                                        "runs_per_dataset": runs, "seed": seed, "delta": delta, "confidence": confidence}}
    one_step_mu = sens / s
    out["one_step_mu"] = one_step_mu
    out["composition_mu"] = math.sqrt(steps) * one_step_mu
    out["hidden_steps_claim_epsilon"] = gdp_epsilon(one_step_mu, delta)
    out["composition_epsilon"] = gdp_epsilon(out["composition_mu"], delta)
    for release in ("mean", "last"):
        shift, gain = inner_step_release(steps=steps, eta=eta, rho=rho, release=release)
        mu = shift / gain * sens / s
        x0 = gain * s * rng.standard_normal((runs, 1))
        x1 = shift * sens + gain * s * rng.standard_normal((runs, 1))
        res = attack(x0, x1, delta, confidence)
        out[release] = {"exact_mu": mu, "exact_epsilon": gdp_epsilon(mu, delta), "attack": res,
                        "above_hidden_steps_claim": res["epsilon_lower_bound"] > out["hidden_steps_claim_epsilon"]}
    return out
