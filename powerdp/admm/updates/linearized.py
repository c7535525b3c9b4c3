"""Linearized ADMM with a proximal term and E local steps: the paper's update (docs/algorithm.md)."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ...errors import ConfigError
from ...privacy import Sensitivity, output_sensitivity
from .base import LocalProblem, LocalUpdate, RoundOutcome

__all__ = ["LinearizedUpdate", "step_size", "ETA_SCHEDULES"]

ETA_SCHEDULES = ("capped", "sqrt", "theorem")


def step_size(schedule: str | float, t: int, lipschitz: float, epsilon: float | None = None) -> float:
    """η_t (docs/algorithm.md): ``capped`` min(1.9/L, 1/√t), ``sqrt`` 1/√t, ``theorem`` 1/(L + √t/ε), or a constant."""
    if schedule == "sqrt":
        return 1.0 / math.sqrt(t)
    if schedule == "capped":
        return min(1.9 / lipschitz, 1.0 / math.sqrt(t)) if lipschitz > 0 else 1.0 / math.sqrt(t)
    if schedule == "theorem":
        if not epsilon:
            raise ConfigError("the theorem step-size schedule needs epsilon")
        return 1.0 / (lipschitz + math.sqrt(t) / epsilon)
    return float(schedule)


class LinearizedUpdate(LocalUpdate):
    """z^{t,e+1} = argmin_{z ∈ W_p} ⟨∇f_p(z^{t,e}) + ξ, z⟩ + ‖z − z^{t,e}‖²/(2η_t) + ρ/2‖w − B_p z + λ/ρ‖²."""

    name: ClassVar[str] = "linearized"
    perturbations: ClassVar[tuple[str, ...]] = ("none", "objective", "output", "input")
    summary: ClassVar[str] = "linearized objective plus a proximal term 1/(2η_t)‖z − z^{t,e}‖², E steps per round"

    def eta(self, t: int, lipschitz: float) -> float:
        cfg = self.config
        return step_size(cfg.eta, t, lipschitz, cfg.epsilon if cfg.private else None)

    def run_round(self, zone: LocalProblem, t: int, rho: float, admm_lin: np.ndarray) -> RoundOutcome:
        eta = self.eta(t, zone.lipschitz)
        diag = 1.0 / eta + rho * zone.shared_mask
        pert = zone.perturbation
        out = RoundOutcome()
        z = zone.z_last
        for e in range(1, self.config.local_updates + 1):
            c = zone.gradient(z) - z / eta - admm_lin
            out.noise += pert.perturb_objective(c)
            z, res = zone.solve(c, diag, e)
            z, noise = pert.perturb_output(z)
            out.noise += noise
            out.add(z, res)
        return out

    def output_sensitivity(self, grad: Sensitivity, t: int, n: int, lipschitz: float) -> Sensitivity:
        """The local problem is (1/η_t)-strongly convex and the loads enter its linear term only, so its
        minimiser moves at most η_t·Δ₂ (docs/privacy.md)."""
        cfg = self.config
        return output_sensitivity(grad, self.eta(t, lipschitz), n, cfg.mechanism, cfg.sensitivity)
