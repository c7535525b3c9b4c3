"""A local solver made for the zone problem: working sets on P⁻¹, certified, with Clarabel as the fallback.

A zone's local problem in a run (the reduced problem in r, :mod:`powerdp.opf.reduction`, in the conic form of
:mod:`powerdp.opf.conic`) is ``min ½ xᵀPx + qᵀx`` over ``b − A x ∈ ℝ₊^l × SOC × … × SOC`` with P positive definite.
On case118's largest zone that is 234 variables and 1028 conic rows (748 rows of the nonnegative cone, 70 cones),
of which only a handful are active at a solution; P is the same for every solve of an ADMM round (only q
changes) and a solve's solution is close to the previous one. :class:`ActiveSetSolver` uses all three:

* P⁻¹ is computed once for each new P (LAPACK ``potrf``/``potri``, a pure function of P);
* the working set starts as the blocks (rows, whole cones) that are tight at the warm start ``x0`` (the
  previous solve's point, which the zone checkpoints with its state);
* with only the working set's constraints the problem's dual is a small dense cone QP
  (``M = G P⁻¹ Gᵀ``, a few dozen rows). It is solved by Newton's method on the blocks active at the current
  point (rows at 0, cones on their boundary as the smooth constraints ‖s̄‖ ≤ s₀: a handful of steps from the
  warm start, :mod:`powerdp.opf._active_set_newton`), and by a compiled interior-point method
  (:mod:`powerdp.opf._active_set_kernel`, numba) whenever Newton's method gives up (a cone at its apex, a
  singular Schur system, no convergence); both certify the relaxation's optimality conditions to :data:`QP_TOL`;
* **certificate**: that relaxation's minimiser is the full problem's as soon as it satisfies every constraint
  left out (within :data:`FEAS_TOL`, below Clarabel's ``tol_feas``); otherwise the violated blocks join the
  working set and the relaxation is solved again.

The working sets, P⁻¹ and the certificate live in :mod:`powerdp.opf.working_sets`, which Clarabel's polish shares.
When that cannot certify a solution (no convergence, too many passes, equality rows or a P that is not positive
definite) the solve falls back to Clarabel with the settings of ``--local-solver clarabel``
(:func:`~powerdp.opf.conic.local_settings`, its solution polished from Clarabel's point);
:attr:`ActiveSetSolver.fallbacks` counts them. Every step is a
deterministic function of (P, q, bounds, x0), so a seeded run gives the same bits on every backend and after a
resume (the warm start is restored exactly from the zone's checkpoint).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError
from .compiled import CompiledProblem, QuadraticObjective
from .conic import POLISH_MAX_N, ClarabelSolver, local_settings
from .local_solver import SolveResult
from .working_sets import FEAS_TOL, GUESS_TOL, QP_TOL, WorkingSets

__all__ = ["ActiveSetSolver", "FEAS_TOL", "QP_TOL", "GUESS_TOL"]


class ActiveSetSolver:
    """Working sets on P⁻¹ with a compiled dense cone QP, certified, falling back to Clarabel (module doc).

    Parameters as :class:`~powerdp.opf.conic.ClarabelSolver` (``options`` are the fallback's Clarabel settings).
    Counters: ``solves``, ``certified``, ``fallbacks``, ``passes`` (relaxations solved), ``ipm_passes`` (those the
    interior-point method solved because Newton's method gave up), ``inversions``.
    """

    name: ClassVar[str] = "active-set"
    label: ClassVar[str] = "active set"
    wants_reduced: ClassVar[bool] = True
    supports_warm_start: ClassVar[bool] = True  # x0 seeds the working set (the multipliers are not used)

    def __init__(
        self,
        problem: CompiledProblem,
        objective_pattern: QuadraticObjective | None = None,
        options: dict[str, Any] | None = None,
        objective_scale: float | None = None,
    ):
        self.problem = problem
        # the conic form, P's values and the fallback are Clarabel's (its data are built on its first solve only);
        # the fallback polishes its solutions with this solver's own working sets (one P⁻¹ for both)
        self._clarabel = ClarabelSolver(problem, objective_pattern, options=local_settings(problem, objective_pattern) if options is None else options,
                                        objective_scale=objective_scale, polish=problem.n <= POLISH_MAX_N)
        c = self._clarabel
        if c.working_sets is None:  # a zone too large for the polish still gets this solver's working sets
            c.working_sets = WorkingSets(problem.n, c._p_indices, c._p_cols)
        self.working_sets = c.working_sets
        self.solves = self.certified = self.fallbacks = self.passes = self.ipm_passes = 0

    @property
    def inversions(self) -> int:
        """How often P⁻¹ was computed (once per new P)."""
        return self.working_sets.inversions

    @classmethod
    def from_config(
        cls, problem: CompiledProblem, objective_pattern: QuadraticObjective | None, config: Any, objective_scale: float | None = None
    ) -> ActiveSetSolver:
        """A zone's solver in a run (its fallback uses ``--local-solver clarabel``'s settings)."""
        return cls(problem, objective_pattern=objective_pattern, objective_scale=objective_scale)

    @classmethod
    def check_config(cls, config: Any) -> None:
        """Ipopt's options mean nothing here: refuse them rather than ignore them."""
        if config.ipopt_options or str(config.ipopt_profile) != "default" or str(config.ipopt_warm_profile) != "warm":
            raise ConfigError(f"Ipopt options or profiles need local_solver 'ipopt' (it is {cls.name!r})")

    def enable_warm_start(self) -> None:
        """Nothing to switch: every solve reads its working set from ``x0``."""
        return None

    def set_bounds(self, lb: np.ndarray, ub: np.ndarray, cl: np.ndarray, cu: np.ndarray) -> None:
        """Replace the bounds (the conic form's b, or its rows when other bounds become finite)."""
        self._clarabel.set_bounds(lb, ub, cl, cu)

    # ----------------------------------------------------------------- solve
    def solve(
        self,
        objective: QuadraticObjective | None = None,
        x0: np.ndarray | None = None,
        mult_g: np.ndarray | None = None,
        mult_x_lower: np.ndarray | None = None,
        mult_x_upper: np.ndarray | None = None,
    ) -> SolveResult:
        """Minimise ``objective`` (default: the problem's own); ``x0`` seeds the working set. Never raises on a
        failed solve (the fallback's result is returned)."""
        from ._active_set_kernel import CERTIFIED

        t = time.perf_counter()
        c = self._clarabel
        obj = objective if objective is not None else c._default_objective
        pvals = c._hessian_values(obj)
        self.solves += 1
        q = np.asarray(obj.c, dtype=float)
        if c.objective_scale != 1.0:
            q = q * c.objective_scale
        status, x, passes, iters, ipm = self.working_sets.solve(c.working_form, pvals, q, x0)
        self.passes += passes
        self.ipm_passes += ipm
        if status == CERTIFIED:
            self.certified += 1
            empty = np.zeros(0)
            return SolveResult(
                x=x, objective=float(obj.value(x)), status=0, message="Solved", iterations=iters,
                wall_s=time.perf_counter() - t, callback_s=0.0, mult_g=empty, mult_x_lower=empty, mult_x_upper=empty,
                status_name="Solved", outcome="solved", solver=self.label,
            )
        self.fallbacks += 1
        res = c.solve(obj)
        res.wall_s = time.perf_counter() - t
        return res
