"""Privacy amplification by iteration for noisy-gradient ADMM (docs/amplification.md).

The accountant of Chan, Xie & Zhao, *Privacy Amplification by Iteration for ADMM with
(Strongly) Convex Objective Functions* (arXiv:2312.08685, "001"): pure functions, each citing
the paper's equation, lemma or corollary. The algorithm they account for is 001's Algorithm 1
(powerdp.apps.learning.noisy_admm): iteration t uses one gradient of user t's private f_t, adds
N(0, σ²I) to the primal x, and only the final (x, λ) is released.

Every function checks the assumptions its bound needs and refuses a call that violates one
with :class:`AssumptionError` (a :class:`~powerdp.errors.ConfigError`: one line, exit status 2
on the command line) naming the assumption. What cannot be checked from numbers (f_t convex
and ν-smooth, g convex, A = [I | D] after Remark 3.4, neighbouring functions with
‖∇f − ∇f′‖ ≤ Δ everywhere) is listed in :data:`ASSUMPTIONS` and in every ledger entry.

Symbols: ν smoothness of every f_t, μ strong convexity of every f_t, μ_g that of g, β the ADMM
penalty, η the step, ‖A‖ and ‖AᵀB‖ operator norms, Δ the gradient sensitivity, σ the noise
standard deviation, K the number of iterations run before the release (K = 2T + 1 in 001).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from .params import check_delta, check_real

__all__ = [
    "AssumptionError", "ASSUMPTIONS", "convex_constant", "step_interval", "step_midpoint", "contraction_terms",
    "contraction", "contraction_at", "strongly_convex_constant", "one_step_zcdp", "amplification_pairs", "zcdp_convex",
    "zcdp_strongly_convex", "assumption_8_1_constant", "rdp_all_users", "zcdp_to_dp", "rdp_to_dp",
    "AmplifiedGuarantee", "first_user_guarantee",
]


class AssumptionError(ConfigError):
    """A bound of 001 is asked for where one of its assumptions fails; the message names it."""


ASSUMPTIONS = {
    "convex": "every f_t convex and ν-smooth, g convex (001 §3, Lemma 6.5)",
    "step_convex": "η ≤ 1/ν: f_t is (1/η)-smooth (Fact 6.4, Lemma 6.5)",
    "remark_3_4": "A = [I_m | D] after Gaussian elimination (Remark 3.4); noise N(0, σ²I) on all of x",
    "neighbouring": "only the first user's function differs, ‖∇f₁ − ∇f₁′‖ ≤ Δ everywhere (Definition 3.3)",
    "release": "only the final (x̃, λ) is released; later users' noise is secret and honest (001 §1)",
    "strong_convexity": "every f_t μ-strongly convex, g μ_g-strongly convex, A full row rank (Assumption 7.1)",
    "eq_23": "η inside the open interval of eq. (23) (Lemma 7.6)",
}


# --------------------------------------------------------------------------- checks


def _positive(name: str, value: Any) -> float:
    value = check_real(name, value)
    if value <= 0.0:
        raise AssumptionError(f"{name} must be > 0, got {value!r}")
    return value


def _finite(what: str, compute) -> float:
    """``compute()``, refused when it is not a finite double: constants at the ends of double precision (σ = 1e-300,
    a smoothness of 1e300) make 001's formulas divide by zero or overflow, which is the caller's input to change."""
    try:
        value = float(compute())
    except (ZeroDivisionError, OverflowError):
        value = math.inf
    if not math.isfinite(value):
        raise AssumptionError(f"{what} is not a finite number in double precision: the constants are too large or too "
                              "small (e.g. σ far below the step's gradient change); scale them to moderate values")
    return value


def _iterations(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise AssumptionError(f"iterations must be an integer ≥ 1, got {value!r}")
    return int(value)


def _strong(nu: Any, mu: Any, mu_g: Any) -> tuple[float, float, float]:
    """Assumption 7.1 in numbers: μ > 0, μ_g > 0, and μ ≤ ν (no function is more convex than smooth)."""
    nu = _positive("ν (--smooth)", nu)
    if mu is None:
        raise AssumptionError("Assumption 7.1: the strong convexity μ of f_t (--strong) is required for the strongly convex bound")
    if mu_g is None:
        raise AssumptionError("Assumption 7.1: the strong convexity μ_g of g (--strong-g) is required for the strongly convex bound")
    mu = check_real("μ (--strong)", mu)
    mu_g = check_real("μ_g (--strong-g)", mu_g)
    if mu <= 0.0:
        raise AssumptionError(f"Assumption 7.1: f_t must be μ-strongly convex with μ > 0, got μ = {mu:g}")
    if mu_g <= 0.0:
        raise AssumptionError(f"Assumption 7.1: g must be μ_g-strongly convex with μ_g > 0, got μ_g = {mu_g:g}")
    if mu > nu:
        raise AssumptionError(f"Assumption 7.1: a ν-smooth function is at most ν-strongly convex, got μ = {mu:g} > ν = {nu:g}")
    return nu, mu, mu_g


# --------------------------------------------------------------------------- general convex case (§6)


def convex_constant(eta: float, beta: float, norm_A: float = 1.0) -> float:
    """C = max{2, 3/(βη)}·(1 + βη‖A‖²) of Theorem 6.1 / Corollary 6.2."""
    eta, beta = _positive("η", eta), _positive("β (--penalty)", beta)
    norm_A = _positive("‖A‖ (--norm-A)", norm_A)
    return max(2.0, 3.0 / (beta * eta)) * (1.0 + beta * eta * norm_A**2)


def one_step_zcdp(eta: float, delta_grad: float, sigma: float) -> float:
    """Local privacy of one noisy step, η²Δ²/(2σ²) zCDP (Cor. 6.2 / 7.3, first bullet).

    Needs no convexity: ‖x₁ − x₁′‖ ≤ η‖(I + ηβAᵀA)⁻¹‖·Δ ≤ ηΔ (Lemma 3.2), Gaussian noise (Fact 4.3).
    Every later state is a randomized function of x̃₁ and the public λ₁, so by post-processing this
    bounds the release after any number of iterations, for every user, whatever the objective.
    """
    eta, sigma = _positive("η", eta), _positive("σ (--sigma)", sigma)
    delta_grad = check_real("Δ (--delta-grad)", delta_grad)
    if delta_grad < 0:
        raise AssumptionError(f"Δ (--delta-grad) must be ≥ 0, got {delta_grad!r}")
    return _finite(f"η²Δ²/(2σ²) at σ (--sigma) = {sigma:g}", lambda: (eta * delta_grad / sigma) ** 2 / 2.0)


def amplification_pairs(iterations: int) -> int:
    """T of 001's "2T + 1 iterations": the two-iteration Markov operators after the first user's step.

    The release after K iterations is a post-processing of the state after 2⌊(K−1)/2⌋ + 1 of them
    (later iterations use fresh noise and other users' functions), so T = ⌊(K − 1)/2⌋.
    """
    return (_iterations(iterations) - 1) // 2


def zcdp_convex(iterations: int, eta: float, beta: float, delta_grad: float, sigma: float, nu: float, norm_A: float = 1.0) -> float:
    """zCDP of the first user after K iterations, general convex case (Corollary 6.2).

    min{1, C/T}·η²Δ²/(2σ²) with T = ⌊(K−1)/2⌋: the amplified bound, or the one-step bound when it is
    smaller (post-processing). Refused unless η ≤ 1/ν (Lemma 6.5 needs f_t to be (1/η)-smooth).
    """
    nu = _positive("ν (--smooth)", nu)
    eta = _positive("η", eta)
    if eta > 1.0 / nu * (1 + 1e-12):
        raise AssumptionError(f"Lemma 6.5: the convex bound needs η ≤ 1/ν = {1 / nu:.6g} (f_t (1/η)-smooth), got η = {eta:.6g}")
    local = one_step_zcdp(eta, delta_grad, sigma)
    t = amplification_pairs(iterations)
    if t == 0:
        return local
    return _finite("Cor. 6.2's bound", lambda: min(1.0, convex_constant(eta, beta, norm_A) / t) * local)


# --------------------------------------------------------------------------- strongly convex case (§7)


def step_interval(nu: float, mu: float, mu_g: float, beta: float, norm_AtB: float = 1.0) -> tuple[float, float]:
    """The open interval of steps η of eq. (23) (Lemma 7.6):

    (max{4/(ν+μ+√((ν+μ)² + 8νμ)), 2/(ν+μ) − 2μ_g/(β²‖AᵀB‖²)}, 2/(ν+μ)).
    """
    nu, mu, mu_g = _strong(nu, mu, mu_g)
    beta = _positive("β (--penalty)", beta)
    norm_AtB = _positive("‖AᵀB‖ (--norm-AtB)", norm_AtB)
    s = nu + mu
    lower = max(4.0 / (s + math.sqrt(s * s + 8.0 * nu * mu)), 2.0 / s - 2.0 * mu_g / (beta**2 * norm_AtB**2))
    upper = 2.0 / s
    if not lower < upper:  # cannot happen for 0 < μ ≤ ν, but the check is what the bound rests on
        raise AssumptionError(f"eq. (23): the step interval ({lower:.6g}, {upper:.6g}) is empty")
    return lower, upper


def step_midpoint(nu: float, mu: float, mu_g: float, beta: float, norm_AtB: float = 1.0) -> float:
    """The midpoint of the eq. (23) interval: the η of 001 §10."""
    lower, upper = step_interval(nu, mu, mu_g, beta, norm_AtB)
    return 0.5 * (lower + upper)


def _check_eta_23(eta: float, nu: float, mu: float, mu_g: float, beta: float, norm_AtB: float) -> float:
    eta = _positive("η (--eta)", eta)
    lower, upper = step_interval(nu, mu, mu_g, beta, norm_AtB)
    if not lower < eta < upper:
        raise AssumptionError(
            f"eq. (23): η = {eta:.6g} is outside the step interval ({lower:.6g}, {upper:.6g}) of Lemma 7.6 "
            f"(ν = {nu:g}, μ = {mu:g}, μ_g = {mu_g:g}, β = {beta:g}, ‖AᵀB‖ = {norm_AtB:g})"
        )
    return eta


def contraction_terms(eta: float, nu: float, mu: float, beta: float) -> dict[str, float]:
    """R, S, Q, P of Lemma 7.6 (P‖𝔡x_{t+1}‖² + Q‖𝔡w_{t+1}‖² ≤ R‖𝔡x_t‖² + S‖𝔡w_t‖²):

    R = (1 − 2ηνμ/(ν+μ)) + (1/η)(2/(ν+μ) − η),  S = η/β,
    Q = S + (η/4)(2/(ν+μ) − η),                  P = 1 − (1/η)(2/(ν+μ) − η).
    """
    eta, nu, beta = _positive("η", eta), _positive("ν", nu), _positive("β", beta)
    mu = check_real("μ", mu)
    gap = 2.0 / (nu + mu) - eta
    r = (1.0 - 2.0 * eta * nu * mu / (nu + mu)) + gap / eta
    s = eta / beta
    return {"R": r, "S": s, "Q": s + 0.25 * eta * gap, "P": 1.0 - gap / eta}


def contraction(eta: float, nu: float, mu: float, mu_g: float, beta: float, norm_AtB: float = 1.0) -> float:
    """𝔏 = max{R/P, S/Q} of Lemma 7.6, refused unless η lies in the interval of eq. (23)."""
    eta = _check_eta_23(eta, nu, mu, mu_g, beta, norm_AtB)
    k = contraction_terms(eta, nu, mu, beta)
    return max(k["R"] / k["P"], k["S"] / k["Q"])


def contraction_at(eta: float, nu: float, mu: float, beta: float) -> float:
    """max{R/P, S/Q} at any η, without the eq. (23) check: what the formula gives (e.g. at a printed η);
    a bound only where :func:`contraction` accepts η."""
    k = contraction_terms(eta, nu, mu, beta)
    return max(k["R"] / k["P"], k["S"] / k["Q"])


def strongly_convex_constant(eta: float, nu: float, mu: float, mu_g: float, beta: float, norm_A: float = 1.0,
                             norm_AtB: float = 1.0) -> float:
    """C′ = max(2/R, 3/(ηβ))·(R + ηβ‖A‖²) of Theorem 7.2 / Corollary 7.3 (R of Lemma 7.6)."""
    eta = _check_eta_23(eta, nu, mu, mu_g, beta, norm_AtB)
    norm_A = _positive("‖A‖ (--norm-A)", norm_A)
    r = contraction_terms(eta, nu, mu, beta)["R"]
    return max(2.0 / r, 3.0 / (eta * beta)) * (r + eta * beta * norm_A**2)


def zcdp_strongly_convex(iterations: int, eta: float, nu: float, mu: float, mu_g: float, beta: float, delta_grad: float,
                         sigma: float, norm_A: float = 1.0, norm_AtB: float = 1.0) -> float:
    """zCDP of the first user after K iterations, strongly convex case (Corollary 7.3).

    min{1, C′𝔏^{2T−1}/T}·η²Δ²/(2σ²) with T = ⌊(K−1)/2⌋ (the one-step bound when smaller).
    """
    local = one_step_zcdp(eta, delta_grad, sigma)
    lcal = contraction(eta, nu, mu, mu_g, beta, norm_AtB)
    cprime = strongly_convex_constant(eta, nu, mu, mu_g, beta, norm_A, norm_AtB)
    t = amplification_pairs(iterations)
    if t == 0:
        return local
    return _finite("Cor. 7.3's bound", lambda: min(1.0, cprime * lcal ** (2 * t - 1) / t) * local)


# --------------------------------------------------------------------------- every user (§8)


def assumption_8_1_constant(zcdp_after: np.ndarray) -> float:
    """The smallest C of Assumption 8.1 (D_α ≤ αC/K after K iterations, for every α) that the given
    first-user zCDP bounds satisfy: C = max_K K·ρ(K), ``zcdp_after[K−1]`` being ρ(K), K = 1..N.

    (D_α ≤ α·D^z by the definition of zCDP.) For the convex bound min{1, C₆/⌊(K−1)/2⌋}·ρ₁ this is at
    most (2C₆ + 2)·ρ₁.
    """
    rho = np.asarray(zcdp_after, dtype=float)
    if rho.ndim != 1 or rho.size == 0 or not np.all(np.isfinite(rho)) or np.any(rho < 0):
        raise AssumptionError("Assumption 8.1: the zCDP bounds must be a non-empty sequence of finite values ≥ 0")
    return float(np.max(np.arange(1, rho.size + 1) * rho))


def rdp_all_users(alpha: float, c: float, n_users: int) -> float:
    """RDP_α of the final release for every user under a random permutation of the N users (Cor. 8.3).

    A user's position leaves it L ~ U{1..N} iterations; Lemma 8.2 (weak convexity of D_α, needs every
    D_α ≤ 1/(α−1), i.e. αC ≤ 1/(α−1): the condition C ≤ 1/(α(α−1))) gives
    D_α ≤ 2·E[αC/L] = 2αC·H_N/N, the explicit form of 001's O(αC log N / N).
    """
    alpha = check_real("α", alpha)
    if alpha <= 1.0:
        raise AssumptionError(f"Corollary 8.3: the Rényi order α must be > 1, got {alpha!r}")
    c = check_real("C", c)
    if c < 0:
        raise AssumptionError(f"Assumption 8.1: C must be ≥ 0, got {c!r}")
    if isinstance(n_users, bool) or not isinstance(n_users, (int, np.integer)) or n_users < 1:
        raise AssumptionError(f"Corollary 8.3: the number of users must be an integer ≥ 1, got {n_users!r}")
    limit = 1.0 / (alpha * (alpha - 1.0))
    if c > limit:
        raise AssumptionError(f"Corollary 8.3 needs C ≤ 1/(α(α−1)) = {limit:.6g} (Lemma 8.2), got C = {c:.6g} at α = {alpha:g}")
    harmonic = float(np.sum(1.0 / np.arange(1, int(n_users) + 1)))
    return 2.0 * alpha * c * harmonic / int(n_users)


# --------------------------------------------------------------------------- conversions (dp-accounting)


def zcdp_to_dp(rho: float, delta: float) -> float:
    """ε of (ε, δ)-DP implied by ρ-zCDP: dp-accounting's RDP accountant (ZCDpEvent, the best conversion
    over its grid of orders), or the closed form ρ + 2√(ρ ln(1/δ)) (Bun–Steinke Prop. 1.3) when that is
    smaller: both are sound, and at tiny ρ the accountant's finite order grid leaves it far above the
    closed form (ρ = 1e-11, δ = 1e-6: 5.8e-3 against 2.4e-5)."""
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant

    rho = check_real("ρ", rho)
    if rho < 0:
        raise AssumptionError(f"ρ must be ≥ 0, got {rho!r}")
    delta = check_delta("δ", delta)
    if rho == 0.0:
        return 0.0
    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(dp_accounting.ZCDpEvent(rho))
    closed = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    return float(min(acc.get_epsilon(delta), closed))


def rdp_to_dp(alpha: float, rdp: float, delta: float) -> float:
    """ε of (ε, δ)-DP implied by (α, rdp)-RDP at one order, from dp-accounting's conversion
    (``rdp_privacy_accountant.compute_epsilon``, Canonne–Kamath–Steinke / Asoodeh et al.)."""
    from dp_accounting.rdp import rdp_privacy_accountant

    alpha = check_real("α", alpha)
    if alpha <= 1.0:
        raise AssumptionError(f"the Rényi order α must be > 1, got {alpha!r}")
    rdp = check_real("RDP", rdp)
    delta = check_delta("δ", delta)
    eps, _ = rdp_privacy_accountant.compute_epsilon([alpha], [rdp], delta)
    return float(eps)


# --------------------------------------------------------------------------- ledger entry


@dataclass
class AmplifiedGuarantee:
    """What the release of a noisy-gradient ADMM run costs its first user: the ledger entry.

    ``source`` says which result the figure comes from: ``"Cor. 7.3"`` (strongly convex),
    ``"Cor. 6.2"`` (convex, η ≤ 1/ν) or ``"one step"`` (post-processing of the first noisy step: the
    bound without any amplification, sound for every user whatever the objective). ``assumptions``
    lists what the figure rests on and the caller vouches for; ``refused`` why the stronger results
    were not used.
    """

    zcdp: float
    source: str
    iterations: int
    one_step_zcdp: float
    delta: float
    epsilon: float
    assumptions: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def first_user_guarantee(*, iterations: int, eta: float, beta: float, delta_grad: float, sigma: float, nu: float,
                         mu: float | None = None, mu_g: float | None = None, norm_A: float = 1.0,
                         norm_AtB: float = 1.0, delta: float = 1e-5) -> AmplifiedGuarantee:
    """The best bound whose assumptions hold, for the ledger: Cor. 7.3 if μ, μ_g are given and η is in
    eq. (23); else Cor. 6.2 if η ≤ 1/ν; else the one-step bound. Each refusal is recorded."""
    local = one_step_zcdp(eta, delta_grad, sigma)
    refused: list[str] = []
    base = [ASSUMPTIONS["convex"], ASSUMPTIONS["remark_3_4"], ASSUMPTIONS["neighbouring"], ASSUMPTIONS["release"]]
    candidates = []
    try:
        rho = zcdp_strongly_convex(iterations, eta, nu, mu, mu_g, beta, delta_grad, sigma, norm_A, norm_AtB)
        candidates.append((rho, "Cor. 7.3", base + [ASSUMPTIONS["strong_convexity"], ASSUMPTIONS["eq_23"]]))
    except AssumptionError as exc:
        refused.append(f"Cor. 7.3: {exc}")
    try:
        rho = zcdp_convex(iterations, eta, beta, delta_grad, sigma, nu, norm_A)
        candidates.append((rho, "Cor. 6.2", base + [ASSUMPTIONS["step_convex"]]))
    except AssumptionError as exc:
        refused.append(f"Cor. 6.2: {exc}")
    candidates.append((local, "one step", [ASSUMPTIONS["neighbouring"], "Gaussian noise N(0, σ²I) on x (Fact 4.3)"]))
    rank = {"one step": 0, "Cor. 6.2": 1, "Cor. 7.3": 2}  # on a tie, the result with fewer assumptions
    rho, source, assumptions = min(candidates, key=lambda c: (c[0], rank[c[1]]))
    return AmplifiedGuarantee(
        zcdp=rho, source=source, iterations=_iterations(iterations), one_step_zcdp=local, delta=check_delta("δ", delta),
        epsilon=zcdp_to_dp(rho, delta), assumptions=assumptions, refused=refused,
    )
