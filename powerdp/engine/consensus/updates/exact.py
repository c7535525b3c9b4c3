"""Exact ADMM (non-private reference): each round solves the zone's true objective (docs/algorithm.md)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ....opf.compiled import CompiledProblem, QuadraticObjective
from .base import LocalProblem, LocalUpdate, RoundOutcome


class ExactUpdate(LocalUpdate):
    """z^{t+1} = argmin_{z ∈ W_p} f_p(z) + ρ/2‖w − B_p z + λ/ρ‖²: one solve per round."""

    name: ClassVar[str] = "exact"
    # input perturbation runs it on perturbed loads: f_p with d̃ is f_p plus a fixed linear term
    perturbations: ClassVar[tuple[str, ...]] = ("none", "input", "totals", "hierarchical")
    summary: ClassVar[str] = "the zone's true objective plus the ADMM term, one solve per round"

    def local_problem(self, reduction, f_r: QuadraticObjective) -> tuple[CompiledProblem, QuadraticObjective]:
        n = reduction.full.n
        return reduction.reduced, reduction.pull(np.zeros(n), np.ones(n), base=f_r)

    def run_round(self, zone: LocalProblem, t: int, rho: float, admm_lin: np.ndarray) -> RoundOutcome:
        out = RoundOutcome()
        c = -admm_lin
        out.noise += zone.perturbation.perturb_objective(c)
        z, res = zone.solve(c, rho * zone.shared_mask, 1, exact=True)
        out.add(z, res)
        return out
