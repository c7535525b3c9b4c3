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

When that cannot certify a solution (no convergence, too many passes, equality rows or a P that is not positive
definite) the solve falls back to Clarabel with the settings of ``--local-solver clarabel``
(:data:`~powerdp.opf.conic.LOCAL_SETTINGS`); :attr:`ActiveSetSolver.fallbacks` counts them. Every step is a
deterministic function of (P, q, bounds, x0), so a seeded run gives the same bits on every backend and after a
resume (the warm start is restored exactly from the zone's checkpoint).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np
import scipy.linalg as sl

from ..errors import ConfigError
from .compiled import CompiledProblem, QuadraticObjective
from .conic import LOCAL_SETTINGS, ClarabelSolver
from .local_solver import SolveResult

__all__ = ["ActiveSetSolver", "FEAS_TOL", "QP_TOL", "GUESS_TOL"]

#: a left-out block is satisfied when its slack (or cone margin s₀ − ‖s̄‖) is ≥ −FEAS_TOL·(1 + |b|)
FEAS_TOL = 1e-9
#: the dense cone QP's tolerance on its residual and gap (relative to max(1, ‖h‖∞)); LOOSE_TOL when
#: rounding stops its iterations short of that
QP_TOL = 1e-11
LOOSE_TOL = 1e-9
#: the first working set: the blocks whose margin at the warm start is below GUESS_TOL·(1 + |b|)
GUESS_TOL = 1e-6
MAX_PASSES = 8
_NO_START = np.zeros(0)
MAX_ITER = 60
#: Newton steps on a relaxation's guessed active blocks before the interior-point method takes it (0: never)
NEWTON_ITER = 30


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
        from ._active_set_kernel import warm_up

        warm_up()  # compiles the kernels (or loads them from numba's cache) now, not in the first solve

        self.problem = problem
        # the conic form, P's values and the fallback are Clarabel's (its data are built on its first solve only)
        self._clarabel = ClarabelSolver(problem, objective_pattern, options=LOCAL_SETTINGS if options is None else options,
                                        objective_scale=objective_scale)
        c = self._clarabel
        n = problem.n
        cols = np.repeat(np.arange(n), np.diff(c._p_indptr))
        self._p_rows, self._p_cols = c._p_indices, cols
        self._pinv_of: np.ndarray | None = None  # the P values whose inverse is kept
        self._pinv: np.ndarray | None = None  # None: P is not positive definite
        self._blocks_of = None
        self._blocks: tuple[np.ndarray, ...] = ()
        self.solves = self.certified = self.fallbacks = self.passes = self.ipm_passes = self.inversions = 0

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

    # ------------------------------------------------------------------ data
    def _inverse(self, pvals: np.ndarray) -> np.ndarray | None:
        """P⁻¹ (dense, symmetric) for P's values ``pvals``, kept while they are the same array; None when P is
        not positive definite."""
        if pvals is not self._pinv_of:
            n = self.problem.n
            P = np.zeros((n, n))
            P[self._p_rows, self._p_cols] = pvals
            P[self._p_cols, self._p_rows] = pvals
            factor, info = sl.lapack.dpotrf(P, lower=0, overwrite_a=1)  # the strict lower triangle comes back 0
            inv = None
            if info == 0:
                inv, info = sl.lapack.dpotri(factor, lower=0, overwrite_c=1)  # P⁻¹'s upper triangle, in place
                if info == 0:
                    inv += np.triu(inv, 1).T  # the lower triangle (0 before): symmetric now
                    inv = inv.T  # LAPACK's arrays are column-major: the transpose is the row-major P⁻¹ the kernels take
                else:
                    inv = None
            self._pinv_of, self._pinv = pvals, inv
            self.inversions += 1
        return self._pinv

    def _block_data(self):
        """The conic form as CSR arrays and blocks (one per nonnegative row, one per cone), kept per form."""
        form = self._clarabel._form
        if form is not self._blocks_of:
            A = form.A.tocsr()
            A.sort_indices()
            dims = np.concatenate([np.ones(form.nonneg, dtype=np.int64), np.asarray(form.soc, dtype=np.int64)])
            offsets = form.zero + np.concatenate([[0], np.cumsum(dims)[:-1]]).astype(np.int64)
            self._blocks = (A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data.astype(float),
                            np.asarray(form.b, dtype=float), offsets, dims)
            self._b_scale = 1.0 + np.abs(self._blocks[3][offsets])  # each block's 1 + |b| (its first row)
            self._blocks_of = form
        return self._blocks

    def _guess(self, x0: np.ndarray | None) -> np.ndarray:
        """The blocks tight at ``x0`` (none without a usable x0)."""
        from ._active_set_kernel import block_margins

        indptr, indices, data, b, offsets, dims = self._block_data()
        if x0 is None or x0.shape != (self.problem.n,) or not np.isfinite(x0).all():
            return np.zeros(len(dims), dtype=np.bool_)
        margin = block_margins(indptr, indices, data, b, offsets, dims, np.asarray(x0, dtype=float))
        return margin < GUESS_TOL * self._b_scale

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
        from ._active_set_kernel import CERTIFIED, working_set_solve

        t = time.perf_counter()
        c = self._clarabel
        obj = objective if objective is not None else c._default_objective
        pvals = c._hessian_values(obj)
        self.solves += 1
        pinv = self._inverse(pvals) if c._form.zero == 0 else None
        if pinv is not None:
            q = np.asarray(obj.c, dtype=float)
            if c.objective_scale != 1.0:
                q = q * c.objective_scale
            indptr, indices, data, b, offsets, dims = self._block_data()
            work = self._guess(x0)
            x_start = np.asarray(x0, dtype=float) if work.any() else _NO_START
            x = np.empty(self.problem.n)
            try:
                status, passes, iters, ipm = working_set_solve(pinv, q, indptr, indices, data, b, offsets, dims, work,
                                                               x_start, FEAS_TOL, QP_TOL, LOOSE_TOL, MAX_PASSES, MAX_ITER,
                                                               NEWTON_ITER, x)
            except np.linalg.LinAlgError:
                # a working set's Schur complement that numba's Cholesky refuses (seen on case13659pegase zones):
                # not certified, so Clarabel takes the solve, as for any other uncertified one
                status, passes, iters, ipm = -1, 0, 0, 0
            self.passes += int(passes)
            self.ipm_passes += int(ipm)
            if status == CERTIFIED:
                self.certified += 1
                empty = np.zeros(0)
                return SolveResult(
                    x=x, objective=float(obj.value(x)), status=0, message="Solved", iterations=int(iters),
                    wall_s=time.perf_counter() - t, callback_s=0.0, mult_g=empty, mult_x_lower=empty, mult_x_upper=empty,
                    status_name="Solved", outcome="solved", solver=self.label,
                )
        self.fallbacks += 1
        res = c.solve(obj)
        res.wall_s = time.perf_counter() - t
        return res
