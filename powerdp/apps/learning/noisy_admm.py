"""001's Algorithm 1: noisy-gradient ADMM, only the final (x, λ) released (docs/amplification.md).

min 𝔣(x) + g(y) s.t. Ax + By = c, with 𝔣 = E f_t. Iteration t + 1 (Chan, Xie & Zhao, Algorithm 1,
Lemma 3.2, noise as in their §3.2 "noisy ADMM"):

    y_t     = argmin_y H(x̃_t, y, λ_t)                                  (Lemma 3.1)
    λ_{t+1} = λ_t − β(Ax̃_t + By_t − c)
    x_{t+1} = (I + ηβAᵀA)⁻¹{x̃_t − η[∇f_{t+1}(x̃_t) + Aᵀ(β(By_t − c) − λ_{t+1})]}
    x̃_{t+1} = x_{t+1} + N(0, σ²I)

Here for the paper's §10 problem, the elastic net (1/N)Σ(⟨a_i, x⟩ − b_i)² + c₁‖x‖₁ + c₂‖x‖², split
x − y = 0 (A = I, B = −I, c = 0), user t's function f_t = f_{i_t}. Runs are batched: R independent
runs advance together as (R, n) arrays, so the only Python loop is over iterations.

The ledger entry of a run (:func:`powerdp.privacy.amplification.first_user_guarantee`) is the
amplified bound whose assumptions the problem meets: a rank-one f_i(x) = (⟨a_i, x⟩ − b_i)² is convex
and 2‖a_i‖²-smooth but *not* strongly convex (n > 1), so the paper's own experiment gets Cor. 6.2,
not Cor. 7.3; moving part of the ridge into f (``ridge_in_f``) makes Assumption 7.1 hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...privacy.amplification import AmplifiedGuarantee, first_user_guarantee
from ...privacy.sampler import NoiseSource, as_source, gaussian_release

__all__ = ["ElasticNet", "elastic_net_data", "NoisyADMMResult", "noisy_admm", "uniform_order", "dual_step", "primal_step"]


@dataclass(frozen=True)
class ElasticNet:
    """The elastic net of 001 §10, split as f_i(x) = (⟨a_i, x⟩ − b_i)² + r‖x‖², g(y) = c₁‖y‖₁ + (c₂ − r)‖y‖².

    ``r = ridge_in_f`` (default 0, the paper's split) moves part of the ridge into every f_i; the sum
    𝔣 + g on x = y is the same elastic net whatever r.
    """

    features: np.ndarray  # (N, n): row i is a_i
    targets: np.ndarray  # (N,): b_i
    c1: float
    c2: float
    ridge_in_f: float = 0.0

    def __post_init__(self):
        if self.features.ndim != 2 or self.targets.shape != (self.features.shape[0],):
            raise ConfigError(f"features must be (N, n) and targets (N,), got {self.features.shape} and {self.targets.shape}")
        if not (self.c1 >= 0 and self.c2 >= 0 and 0 <= self.ridge_in_f <= self.c2):
            raise ConfigError(f"need c1 ≥ 0, c2 ≥ 0 and 0 ≤ ridge_in_f ≤ c2, got {self.c1}, {self.c2}, {self.ridge_in_f}")

    @property
    def users(self) -> int:
        return self.features.shape[0]

    @property
    def dim(self) -> int:
        return self.features.shape[1]

    def smoothness(self) -> float:
        """ν: every f_i is (2‖a_i‖² + 2r)-smooth."""
        return float(2.0 * np.max(np.sum(self.features**2, axis=1)) + 2.0 * self.ridge_in_f)

    def strong_convexity(self) -> float:
        """μ of every f_i: 2r, plus 2‖a_i‖² only in dimension 1 (a rank-one quadratic is flat elsewhere)."""
        extra = 2.0 * float(np.min(np.sum(self.features**2, axis=1))) if self.dim == 1 else 0.0
        return 2.0 * self.ridge_in_f + extra

    def strong_convexity_g(self) -> float:
        """μ_g = 2(c₂ − r)."""
        return 2.0 * (self.c2 - self.ridge_in_f)

    def gradient_sensitivity(self, target_shift: float) -> float:
        """Δ of Definition 3.3 for neighbours whose target b moves by at most ``target_shift``:
        ∇f − ∇f′ = 2(b′ − b)a, so ‖∇f − ∇f′‖ ≤ 2·|shift|·max‖a_i‖ at every x."""
        return float(2.0 * abs(target_shift) * np.sqrt(np.max(np.sum(self.features**2, axis=1))))

    def objective(self, x: np.ndarray) -> np.ndarray:
        """(1/N)‖Fx − b‖² + c₁‖x‖₁ + c₂‖x‖², vectorized over the rows of x."""
        x = np.atleast_2d(x)
        res = x @ self.features.T - self.targets
        return np.mean(res**2, axis=1) + self.c1 * np.abs(x).sum(axis=1) + self.c2 * (x**2).sum(axis=1)

    def minimize(self, iterations: int = 20000, tol: float = 1e-13) -> tuple[np.ndarray, float]:
        """The elastic net's optimum by FISTA on the full objective (deterministic reference)."""
        f, b, n = self.features, self.targets, self.users
        lip = 2.0 * np.linalg.eigvalsh(f.T @ f / n).max() + 2.0 * self.c2
        x = np.zeros(self.dim)
        z, t = x.copy(), 1.0
        for _ in range(iterations):
            grad = 2.0 * f.T @ (f @ z - b) / n + 2.0 * self.c2 * z
            v = z - grad / lip
            x_new = np.sign(v) * np.maximum(np.abs(v) - self.c1 / lip, 0.0)
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            z = x_new + (t - 1.0) / t_new * (x_new - x)
            if np.max(np.abs(x_new - x)) < tol:
                x = x_new
                break
            x, t = x_new, t_new
        return x, float(self.objective(x)[0])

    def with_target(self, user: int, shift: float) -> ElasticNet:
        """The neighbouring problem: user ``user``'s target moved by ``shift`` (everything else equal)."""
        b = self.targets.copy()
        b[user] += shift
        return replace(self, targets=b)


def elastic_net_data(mu: float, *, n: int = 64, users: int = 1000, sigma_b: float = 0.01, c1: float = 0.01,
                     c2: float = 0.1, seed: int = 0, ridge_in_f: float = 0.0) -> ElasticNet:
    """The synthetic data of 001 §10 (SPEC §11): a′_ij = 50 z_ij for j ≤ ⌊n/5⌋ else z_ij, z ~ N(0, 1);
    a_i = √μ·a′_i/‖a′_i‖; x′_j = 3 for j ≤ ⌊n/5⌋ else 0; b_i = ⟨a_i, x′⟩ + N(0, σ_b²)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((users, n))
    k = n // 5
    z[:, :k] *= 50.0
    a = np.sqrt(mu) * z / np.linalg.norm(z, axis=1, keepdims=True)
    x_true = np.zeros(n)
    x_true[:k] = 3.0
    b = a @ x_true + sigma_b * rng.standard_normal(users)
    return ElasticNet(a, b, c1, c2, ridge_in_f)


def uniform_order(users: int, runs: int, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """f_t sampled uniformly and independently from the N users, per run: (runs, iterations) indices."""
    return rng.integers(users, size=(runs, iterations))


@dataclass
class NoisyADMMResult:
    """Final (x̃, λ) of every run (the release), what was recorded, and the ledger entry."""

    x: np.ndarray  # (R, n) final x̃_K: released
    lam: np.ndarray  # (R, n) final λ_K: released
    recorded: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # iteration → (x̃, λ): simulation only
    objective: np.ndarray | None = None  # (R, K + 1): F(x̃_t), the simulation's evaluation
    ledger: AmplifiedGuarantee | None = None
    settings: dict[str, Any] = field(default_factory=dict)


def dual_step(x: np.ndarray, lam: np.ndarray, *, beta: float, c1: float, c2_g: float) -> tuple[np.ndarray, np.ndarray]:
    """y_t and λ_{t+1} from x̃_t and λ_t alone (rows: runs): y_t = G(λ_t − βx̃_t), the soft threshold of Lemma 3.1
    for g(y) = c₁‖y‖₁ + c₂_g‖y‖², then λ_{t+1} = λ_t − β(Ax̃_t + By_t − c) with A = I, B = −I, c = 0."""
    v = beta * x - lam
    y = np.sign(v) * np.maximum(np.abs(v) - c1, 0.0) / (2.0 * c2_g + beta)
    return y, lam - beta * (x - y)


def primal_step(x: np.ndarray, y: np.ndarray, lam: np.ndarray, a: np.ndarray, b: np.ndarray, *, eta: float, beta: float,
                ridge_in_f: float) -> np.ndarray:
    """x_{t+1} of Lemma 3.2 (A = I, B = −I, c = 0) before the noise, row r with the gradient of the user (a[r], b[r])
    at x̃_t: f(x) = (⟨a, x⟩ − b)² + r‖x‖². Row by row: a row's result does not depend on the other rows."""
    grad = 2.0 * (np.einsum("rn,rn->r", a, x) - b)[:, None] * a + 2.0 * ridge_in_f * x
    scale = 1.0 / (1.0 + eta * beta)  # (I + ηβAᵀA)⁻¹ with A = I
    return scale * (x - eta * (grad - beta * y - lam))


def noisy_admm(problem: ElasticNet, *, eta: float, beta: float, sigma: float, iterations: int, order: np.ndarray,
               rng: np.random.Generator | NoiseSource | None = None, x0: float | np.ndarray = 3.0, lam0: float | np.ndarray = 0.0,
               record_at: tuple[int, ...] = (), evaluate: bool = False, target_shift: float | None = None,
               delta: float = 1e-5) -> NoisyADMMResult:
    """Run ``order.shape[0]`` independent runs of Algorithm 1 for ``iterations`` iterations.

    ``order[r, t]`` is the user whose gradient iteration t + 1 of run r uses. ``rng`` draws the noise
    (None: fresh OS entropy; a seeded generator only for reproducible studies). ``record_at`` keeps
    (x̃_t, λ_t) at those iterations (0 = the start), ``evaluate`` the objective at every x̃_t. With
    ``target_shift`` (neighbours: one user's b moves by that much) the result carries the ledger entry
    of the first user (:func:`~powerdp.privacy.amplification.first_user_guarantee`).
    """
    for name, v in (("eta", eta), ("beta", beta)):
        if not v > 0:
            raise ConfigError(f"{name} must be > 0, got {v!r}")
    if not sigma >= 0:
        raise ConfigError(f"sigma must be ≥ 0, got {sigma!r}")
    order = np.asarray(order)
    if order.ndim != 2 or order.shape[1] < iterations or iterations < 1:
        raise ConfigError(f"order must be (runs, ≥ iterations) user indices, got shape {order.shape} for {iterations} iterations")
    seeded = rng is not None
    rng = as_source(rng) if seeded else NoiseSource()  # the OS's CSPRNG unless the caller seeds
    runs, n = order.shape[0], problem.dim
    a, b = problem.features, problem.targets
    r_f, c2_g, c1 = problem.ridge_in_f, problem.c2 - problem.ridge_in_f, problem.c1
    x = np.broadcast_to(np.asarray(x0, dtype=float), (runs, n)).copy()
    lam = np.broadcast_to(np.asarray(lam0, dtype=float), (runs, n)).copy()
    recorded = {0: (x.copy(), lam.copy())} if 0 in record_at else {}
    objective = np.empty((runs, iterations + 1)) if evaluate else None
    if evaluate:
        objective[:, 0] = problem.objective(x)
    for t in range(iterations):
        y, lam = dual_step(x, lam, beta=beta, c1=c1, c2_g=c2_g)
        x = primal_step(x, y, lam, a[order[:, t]], b[order[:, t]], eta=eta, beta=beta, ridge_in_f=r_f)
        if sigma > 0:
            x = gaussian_release(x, sigma, None, rng)[0]  # the product's sampler: x on its grid plus discrete noise
        if t + 1 in record_at:
            recorded[t + 1] = (x.copy(), lam.copy())
        if evaluate:
            objective[:, t + 1] = problem.objective(x)
    ledger = None
    if target_shift is not None and sigma > 0:
        ledger = first_user_guarantee(
            iterations=iterations, eta=eta, beta=beta, delta_grad=problem.gradient_sensitivity(target_shift), sigma=sigma,
            nu=problem.smoothness(), mu=problem.strong_convexity() or None, mu_g=problem.strong_convexity_g() or None,
            norm_A=1.0, norm_AtB=1.0, delta=delta,
        )
    settings = {"eta": eta, "beta": beta, "sigma": sigma, "iterations": iterations, "runs": runs, "c1": c1,
                "c2": problem.c2, "ridge_in_f": r_f,
                "noise": "seeded generator (reproducible, not secret)" if seeded else "OS entropy"}
    return NoisyADMMResult(x=x, lam=lam, recorded=recorded, objective=objective, ledger=ledger, settings=settings)
