"""Linearized ADMM with a proximal term and E local steps: the paper's update (docs/algorithm.md)."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ....errors import ConfigError
from ....privacy import Sensitivity, output_sensitivity
from .base import LocalProblem, LocalUpdate, RoundOutcome

__all__ = ["LinearizedUpdate", "step_size", "ETA_SCHEDULES", "CAP_ALL", "CAP_PRIVATE", "CAP_EXACT"]

ETA_SCHEDULES = ("capped", "sqrt", "theorem")


#: the cap of the ``capped`` schedule, η ≤ CAP/L: 1.9 when all of f_p is linearized with a proximal term on
#: all of z (the paper's; measured on shedding); 0.1 when only the private part is linearized and the
#: proximal term covers y only. There η = 1/L makes the linearized penalty exact, and η = c/L < 1/L damps y
#: (y^{t+1} ≈ (1 − c) y^t + c·target), averaging the noise of ~1/c rounds; measured on case118 cost+shedding,
#: objl ε = 1: c = 1, 0.25, 0.1 shed 135, 50, 32 MW (docs/algorithm.md, benchmarks/dispatch.py). Without noise
#: there is nothing to average: a non-private run takes CAP_EXACT = 1, η = 1/L, where the linearized h plus the
#: proximal term is h itself (the step is exact ADMM's on y); c = 0.1 shrank the shedding only ×0.9 a round, so a
#: day's periods never met the stopping rule (issue 30; benchmarks/dispatch_day.py)
CAP_ALL, CAP_PRIVATE, CAP_EXACT = 1.9, 0.1, 1.0


def step_size(schedule: str | float, t: int, lipschitz: float, epsilon: float | None = None, cap: float = CAP_ALL) -> float:
    """η_t (docs/algorithm.md): ``capped`` min(cap/L, 1/√t), ``sqrt`` 1/√t, ``theorem`` 1/(L + √t/ε), or a constant."""
    if schedule == "sqrt":
        return 1.0 / math.sqrt(t)
    if schedule == "capped":
        return min(cap / lipschitz, 1.0 / math.sqrt(t)) if lipschitz > 0 else 1.0 / math.sqrt(t)
    if schedule == "theorem":
        if not epsilon:
            raise ConfigError("the theorem step-size schedule needs epsilon")
        return 1.0 / (lipschitz + math.sqrt(t) / epsilon)
    return float(schedule)


class LinearizedUpdate(LocalUpdate):
    """z^{t,e+1} = argmin_{z ∈ W_p} ⟨∇f_p(z^{t,e}) + ξ, z⟩ + ‖z − z^{t,e}‖²/(2η_t) + ρ/2‖w − B_p z + λ/ρ‖².

    With ``linearize = "private"`` and an objective with a data-free part g (``cost+shedding``:
    f_p = g + h, h = ω Σ (y + d)²) only h is linearized and g is kept exact, and the proximal
    term covers only the entries h depends on (y): docs/algorithm.md.
    """

    name: ClassVar[str] = "linearized"
    perturbations: ClassVar[tuple[str, ...]] = ("none", "objective", "output", "input", "totals", "hierarchical")
    summary: ClassVar[str] = "linearized objective plus a proximal term 1/(2η_t)‖z − z^{t,e}‖², E steps per round"

    def eta(self, t: int, lipschitz: float, cap: float = CAP_ALL) -> float:
        cfg = self.config
        return step_size(cfg.eta, t, lipschitz, cfg.epsilon if cfg.private else None, cap=cap)

    def run_round(self, zone: LocalProblem, t: int, rho: float, admm_lin: np.ndarray) -> RoundOutcome:
        # the proximal term covers what is linearized: all of z, or only y when f_p's data-free part is exact
        prox = zone.prox_mask
        eta = self.eta(t, zone.lipschitz, CAP_ALL if prox.all() else (CAP_PRIVATE if self.config.private else CAP_EXACT))
        diag = prox / eta + rho * zone.shared_mask
        # the entries neither linearized nor shared (kept exact: f_p's data-free part) get the proximal weight τ
        tau = zone.private_prox
        if tau is not None:
            diag = diag + tau
        pert = zone.perturbation
        out = RoundOutcome()
        z = zone.z_last
        for e in range(1, self.config.local_updates + 1):
            c = zone.gradient(z) - prox * z / eta - admm_lin
            if tau is not None:
                c = c - tau * z
            out.noise += pert.perturb_objective(c)
            z, res = zone.solve(c, diag, e)
            z, noise = pert.perturb_output(z)
            out.noise += noise
            out.add(z, res)
        return out

    def output_sensitivity(self, grad: Sensitivity, t: int, n: int, lipschitz: float) -> Sensitivity:
        """The local problem is (1/η_t)-strongly convex and the loads enter its linear term only, so its
        minimiser moves at most η_t·Δ₂ (docs/privacy.md). When ρ_t also covers every entry (every entry
        shared: :meth:`uniform_penalty`) the Hessian is (1/η_t + ρ_t)·I and a box projection is coordinate-wise
        non-expansive, so the output moves by at most Δ/(1/η_t + ρ_t) in each norm (000 Remark 3.1)."""
        cfg = self.config
        eta = self.eta(t, lipschitz)
        rho = self.uniform_penalty(t)
        if rho > 0:
            k = 1.0 / (1.0 / eta + rho)
            return Sensitivity(
                l1=k * grad.l1, l2=k * grad.l2, rule=grad.rule, beta=grad.beta,
                note=f"OutPert output, Hessian (1/η + ρ)·I: Δ/(1/η_t + ρ_t) with η_t = {eta:.4g}, ρ_t = {rho:.4g}",
            )
        return output_sensitivity(grad, eta, n, cfg.mechanism, cfg.sensitivity)
