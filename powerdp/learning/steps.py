"""The step rule of a non-private learning run: backtracking on each client's own curvature (docs/learning.md).

A linearized ADMM step replaces f_p by its linearization plus ‖z − z^t‖²/(2η); the step converges when that
model majorizes f_p along the step (η ≤ 1/L for an L-smooth f_p). The data-independent bound
L_p ≤ I_p·R₂²/(2I) + 2β/P (:func:`powerdp.learning.model.lipschitz_bound`) is safe on every data set but loose
by the spread of the samples' directions (5-15× on the bundled sets), and a fixed constant above it (the old
default η = 300/R₂²) diverges where the rows are aligned (a table with one large column).

:class:`BacktrackingLinearizedUpdate` starts at ``START_FACTOR``/L_p and halves η_p whenever the step it takes
fails the majorization test f_p(z⁺) ≤ f_p(z) + ⟨∇f_p(z), z⁺ − z⟩ + ‖z⁺ − z‖²/(2η_p) (Beck & Teboulle's
backtracking), never below 1/L_p, which always passes. η_p only shrinks, so it settles at the curvature the
iterates meet. It reads the client's data, so it is for non-private runs only: a private run's step is public
(output perturbation's sensitivity is Δ/(1/η_t + ρ_t)).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..admm.updates import LinearizedUpdate
from ..admm.updates.base import RoundOutcome

__all__ = ["BacktrackingLinearizedUpdate", "START_FACTOR", "ETA_RULE"]

#: the first η_p is this many times the safe 1/L_p (each halving costs one evaluation of f_p)
START_FACTOR = 1024.0
#: the name of the rule in a summary
ETA_RULE = "backtracking"


class BacktrackingLinearizedUpdate(LinearizedUpdate):
    """The linearized update with η_p found by backtracking on the client's own f_p (the module docstring).

    ``client`` is the :class:`~powerdp.learning.client.ClientAgent` it steps: its ``loss`` (f_p) and its public
    ``lipschitz`` bound.
    """

    name: ClassVar[str] = "linearized"
    perturbations: ClassVar[tuple[str, ...]] = ("none",)

    def __init__(self, config, lipschitz: float):
        super().__init__(config)
        self.floor = 1.0 / lipschitz  # 1/L_p: the majorization always holds
        self.eta_p = START_FACTOR * self.floor
        self.halvings = 0

    def run_round(self, zone, t: int, rho: float, admm_lin: np.ndarray) -> RoundOutcome:
        out = RoundOutcome()
        z = zone.z_last
        for e in range(1, self.config.local_updates + 1):
            f0, g = zone.loss.value_and_gradient(z)
            while True:
                eta = self.eta_p
                z_new, res = zone.solve(g - z / eta - admm_lin, np.full(len(z), 1.0 / eta + rho), e)
                d = z_new - z
                model = f0 + float(g @ d) + float(d @ d) / (2.0 * eta)
                # the slack absorbs rounding in f (relative 1e-12) once the steps are tiny
                if eta <= self.floor or zone.loss.value(z_new) <= model + 1e-12 * abs(f0):
                    break
                self.eta_p = max(eta / 2.0, self.floor)
                self.halvings += 1
            out.add(z_new, res)
            z = z_new
        return out

    def state(self) -> dict[str, Any]:
        return {"eta_p": self.eta_p, "halvings": self.halvings}

    def load(self, state: dict[str, Any]) -> None:
        self.eta_p = float(state["eta_p"])
        self.halvings = int(state["halvings"])
