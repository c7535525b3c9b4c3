"""Huang et al.'s DP-ADMM (OutP, the inexact-ADMM paper's baseline): the linearized update with a step size
that shrinks as the noise it must hide shrinks, and Gaussian noise on every local output.

As the authors' published code computes it (``calculate_eta_Base``, ``generate_matrix_normal_noise`` in
APPFL/DPFL-IADMM-Classification), in the units of docs/learning.md:

    1/η_t = L_p + 2·Δ₂·√(n·(t+1)·ln(1.25/δ̄)) / (ε̄·D),   then η_t ← a·η_t,

with D = 2u√n the diameter of the box W_p = [−u, u]ⁿ (their ``cw``), Δ₂ the gradient sensitivity and L_p
the smoothness bound (their ``c3``). The local problem is (1/η_t + ρ_t)-strongly convex with the data in
its linear term only, and projecting onto a box is non-expansive, so one output moves by at most
Δ₂/(1/η_t + ρ_t) (their σ's sensitivity); the Gaussian mechanism is calibrated to it each round. Options:
``extra["radius"]`` (u, required), ``extra["eta_scale"]`` (a, default 1); ρ_t counts when it covers every
entry (:meth:`~powerdp.engine.consensus.updates.base.LocalUpdate.uniform_penalty`), else the bound is Δ₂·η_t.
"""

from __future__ import annotations

import math
from typing import ClassVar

from ....errors import ConfigError
from ....privacy import Sensitivity
from .linearized import LinearizedUpdate

__all__ = ["HuangUpdate"]


class HuangUpdate(LinearizedUpdate):
    name: ClassVar[str] = "huang"
    perturbations: ClassVar[tuple[str, ...]] = ("none", "output")
    summary: ClassVar[str] = "Huang et al.'s DP-ADMM: linearized step with η_t shrinking as 1/√t, Gaussian noise on each output"

    _grad: Sensitivity | None = None

    @classmethod
    def check_config(cls, config) -> None:
        u = config.extra.get("radius")
        if u is None or not (isinstance(u, (int, float)) and math.isfinite(u) and u > 0):
            raise ConfigError.for_setting("extra.radius", u, "Huang et al.'s step size needs the half-width u of a box feasible set")

    def eta(self, t: int, lipschitz: float, cap: float = 0.0) -> float:
        cfg = self.config
        a = float(cfg.extra.get("eta_scale", 1.0))
        inv = lipschitz
        if cfg.private and self._grad is not None:
            eps = getattr(cfg, "step_epsilon", None) or cfg.epsilon
            delta = getattr(cfg, "step_delta", None) or cfg.delta
            u = float(cfg.extra["radius"])
            # 2Δ₂√(n(t+1)ln(1.25/δ))/(ε·2u√n) = Δ₂√((t+1)ln(1.25/δ))/(ε·u)
            inv += self._grad.l2 * math.sqrt((t + 1) * math.log(1.25 / delta)) / (eps * u)
        return a / inv if inv > 0 else a

    def output_sensitivity(self, grad: Sensitivity, t: int, n: int, lipschitz: float) -> Sensitivity:
        self._grad = grad
        eta = self.eta(t, lipschitz)
        rho = self.uniform_penalty(t)
        l2 = grad.l2 / (1.0 / eta + rho)
        return Sensitivity(
            l1=math.sqrt(n) * l2, l2=l2, rule=grad.rule, beta=grad.beta,
            note=f"OutP output: Δ2/(1/η_t + ρ_t) with η_t = {eta:.4g}, ρ_t = {rho:.4g} (box projection is non-expansive)",
        )
