"""The trust-region update (ObjT): the proximal term replaced by a box around the last iterate.

This is Algorithm 2 (DP-IADMM-Trust) of the inexact-ADMM paper
(``dp-federated-inexact-admm``, its eq. 9), in the paper's coordinates of
docs/algorithm.md:

    z^{t,e+1} = argmin ⟨∇f_p(z^{t,e}) + ξ^{t,e}, z⟩ + ρ/2‖w − B_p z + λ/ρ‖²
                over z ∈ W_p with ‖z − z^{t,e}‖_∞ ≤ δ_t.

Two radius schedules (``RunConfig.extra["trust_schedule"]``, :data:`TRUST_SCHEDULES`):
``"constant"`` δ_t = a (the default: what the authors' published code computes,
``float(a)/(iteration+1)*(iteration+1)`` = a, and the better one measured, docs/learning.md) and
``"inverse-square"`` δ_t = a/t² (the paper's text). ``a`` is ``RunConfig.extra["trust_radius"]``
(default :data:`DEFAULT_TRUST_RADIUS`, measured). The box covers every entry of z: the kept variables
through their bounds, the flows and balance variables (which the solver
eliminates) through one extra row each. The centre z^{t,e} is a previous
solution, so it lies in W_p and the box always meets W_p; that is also why
output perturbation (whose iterates may leave W_p) is not offered.

Privacy: the noise enters the linear term exactly as in ObjPert, so one load
moving by β moves it by at most the gradient sensitivity (2β, docs/privacy.md),
and each local step is one use of the mechanism (the paper's Theorem 3).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from ....errors import ConfigError
from ....opf.compiled import INF, CompiledProblem, QuadraticObjective
from .base import LocalProblem, LocalUpdate, RoundOutcome

__all__ = ["TrustRegionUpdate", "trust_radius", "TRUST_SCHEDULES", "DEFAULT_TRUST_RADIUS"]

#: the radius schedules; the first is the default
TRUST_SCHEDULES = ("constant", "inverse-square")
#: the default a: measured on case118 (3 zones, ObjT, T = 100, docs/algorithm.md): constant a = 0.1 ends at
#: F = 2.6 (ε = 0.1) and 0.78 (ε = 1); a/t² with a = 1 freezes at F = 51 and 46, with a = 0.1 at 118
DEFAULT_TRUST_RADIUS = 0.1


def trust_radius(t: int, a: float, schedule: str = "inverse-square") -> float:
    """δ_t = a/t² (``inverse-square``, the inexact-ADMM paper's text) or a (``constant``, its published code)."""
    return a if schedule == "constant" else a / (t * t)


class TrustRegionUpdate(LocalUpdate):
    name: ClassVar[str] = "trust-region"
    perturbations: ClassVar[tuple[str, ...]] = ("none", "objective")
    summary: ClassVar[str] = "linearized objective inside the box ‖z − z^{t,e}‖∞ ≤ δ_t (a, or a/t²), E steps per round"
    extra_options: ClassVar[tuple[str, ...]] = ("trust_radius", "trust_schedule")

    @classmethod
    def check_config(cls, config) -> None:
        a = config.extra.get("trust_radius", DEFAULT_TRUST_RADIUS)
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not (math.isfinite(a) and a > 0):
            raise ConfigError.for_setting("extra.trust_radius", a, "the trust-region constant a of δ_t must be a positive number")
        schedule = config.extra.get("trust_schedule", TRUST_SCHEDULES[0])
        if schedule not in TRUST_SCHEDULES:
            raise ConfigError.for_setting("extra.trust_schedule", schedule, f"choose one of {', '.join(TRUST_SCHEDULES)}")

    def local_problem(self, reduction, f_r: QuadraticObjective) -> tuple[CompiledProblem, QuadraticObjective]:
        red = reduction
        nz = red.full.n
        # the z entries the solver eliminated get one row each, P_k r, whose bounds carry the box
        self._kept = red.kept
        self._eliminated = np.setdiff1d(np.arange(nz), red.kept)
        base = red.reduced
        rows = red.P[self._eliminated]
        keys = [("trust_region", red.full.var_keys[k]) for k in self._eliminated]
        m_new = len(self._eliminated)
        problem = CompiledProblem(
            name=base.name + " (trust region)",
            var_keys=base.var_keys,
            lb=base.lb,
            ub=base.ub,
            x0=base.x0,
            con_keys=base.con_keys + keys,
            cl=np.concatenate([base.cl, np.full(m_new, -INF)]),
            cu=np.concatenate([base.cu, np.full(m_new, INF)]),
            A=sp.vstack([base.A, rows]).tocsr(),
            qrow=base.qrow,
            qi=base.qi,
            qj=base.qj,
            qv=base.qv,
            objective=base.objective,
            expressions=base.expressions,
            meta=dict(base.meta),
        )
        self._base = problem
        return problem, red.pull(np.zeros(nz), np.ones(nz))

    def _box(self, center: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Solver bounds for ‖z − center‖∞ ≤ radius intersected with W_p's own bounds."""
        p = self._base
        m0 = p.m - len(self._eliminated)
        ck, ce = center[self._kept], center[self._eliminated]
        lb = np.minimum(np.maximum(p.lb, ck - radius), p.ub)
        ub = np.maximum(np.minimum(p.ub, ck + radius), lb)
        cl = np.concatenate([p.cl[:m0], ce - radius])
        cu = np.concatenate([p.cu[:m0], ce + radius])
        return lb, ub, cl, cu

    def run_round(self, zone: LocalProblem, t: int, rho: float, admm_lin: np.ndarray) -> RoundOutcome:
        extra = self.config.extra
        radius = trust_radius(t, float(extra.get("trust_radius", DEFAULT_TRUST_RADIUS)), extra.get("trust_schedule", TRUST_SCHEDULES[0]))
        diag = rho * zone.shared_mask  # no proximal term: the box keeps the step short
        pert = zone.perturbation
        out = RoundOutcome()
        z = zone.z_last
        for e in range(1, self.config.local_updates + 1):
            c = zone.gradient(z) - admm_lin
            out.noise += pert.perturb_objective(c)
            z, res = zone.solve(c, diag, e, bounds=self._box(z, radius))
            out.add(z, res)
        return out
