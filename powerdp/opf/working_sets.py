"""The certified working-set solve of a zone problem in conic form, shared by two local solvers.

``min ½ xᵀPx + qᵀx`` over ``b − A x ∈ ℝ₊^l × SOC × … × SOC`` (P positive definite, no equality rows) is solved
exactly from a start point by :func:`~powerdp.opf._active_set_kernel.working_set_solve`: the blocks tight at the
start form the first working set, the problem restricted to it is solved to :data:`QP_TOL`, and the blocks it
violates join until none is left (a feasible relaxation's minimiser is the problem's). :class:`WorkingSets` keeps
what that needs between solves: P⁻¹ (LAPACK ``potrf``/``potri``, recomputed only for new P values) and the conic
form's blocks as CSR arrays.

Two users:

* :class:`~powerdp.opf.active_set.ActiveSetSolver` starts from the previous solve's point (the warm start);
* :class:`~powerdp.opf.conic.ClarabelSolver` *polishes* its interior-point solution: it starts from Clarabel's own
  point, whose tight blocks are the active ones. An interior-point solution to a duality gap g is only
  ~√(2g/μ) from the minimiser (μ: P's smallest eigenvalue), 1e-6 to 1e-4 on case118's zones at g = 1e-10; the
  polished one satisfies the optimality conditions to :data:`QP_TOL` (docs/results/performance.md). As OSQP's
  ``polish``, a polish that cannot certify keeps the interior-point solution.

Everything is a deterministic function of (P, q, the form, the start), so a seeded run keeps the same bits on every
backend and after a resume.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sl

__all__ = ["WorkingSets", "FEAS_TOL", "QP_TOL", "LOOSE_TOL", "GUESS_TOL", "MAX_PASSES", "MAX_ITER", "NEWTON_ITER",
           "NOT_CERTIFIABLE"]

#: a left-out block is satisfied when its slack (or cone margin s₀ − ‖s̄‖) is ≥ −FEAS_TOL·(1 + |b|)
FEAS_TOL = 1e-9
#: the dense cone QP's tolerance on its residual and gap (relative to max(1, ‖h‖∞)); LOOSE_TOL when
#: rounding stops its iterations short of that
QP_TOL = 1e-11
LOOSE_TOL = 1e-9
#: the first working set: the blocks whose margin at the start is below GUESS_TOL·(1 + |b|)
GUESS_TOL = 1e-6
MAX_PASSES = 8
MAX_ITER = 60
#: Newton steps on a relaxation's guessed active blocks before the interior-point method takes it (0: never)
NEWTON_ITER = 30
#: the status of a solve that was not tried: equality rows, a P that is not positive definite, or a working set
#: whose Schur complement numba's Cholesky refuses (LinAlgError, seen on case13659pegase zones)
NOT_CERTIFIABLE = -1
_NO_START = np.zeros(0)


class WorkingSets:
    """P⁻¹ and the blocks of one conic form, kept between solves, and the certified solve from a start point.

    ``n``: the number of variables; ``p_rows``, ``p_cols``: P's pattern (its upper triangle, as
    :class:`~powerdp.opf.conic.ClarabelSolver` stores it). Counter: ``inversions``. Compiles the kernels (or loads
    them from numba's cache) when built, so that a zone's set-up pays for it, not its first timed solve.
    """

    def __init__(self, n: int, p_rows: np.ndarray, p_cols: np.ndarray):
        from ._active_set_kernel import warm_up

        warm_up()
        self.n = int(n)
        self._p_rows, self._p_cols = p_rows, p_cols
        self._pinv_of: np.ndarray | None = None  # the P values whose inverse is kept
        self._pinv: np.ndarray | None = None  # None: P is not positive definite
        self._blocks_of = None
        self._blocks: tuple[np.ndarray, ...] = ()
        self._b_scale = np.zeros(0)
        self.inversions = 0

    def inverse(self, pvals: np.ndarray) -> np.ndarray | None:
        """P⁻¹ (dense, symmetric) for P's values ``pvals``, kept while they are the same array; None when P is
        not positive definite."""
        if pvals is not self._pinv_of:
            n = self.n
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

    def blocks(self, form) -> tuple[np.ndarray, ...]:
        """``form`` (a :class:`~powerdp.opf.conic.ConicForm`) as CSR arrays and blocks (one per nonnegative row, one
        per cone): (indptr, indices, data, b, block offsets, block sizes), kept per form."""
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

    def guess(self, form, x0: np.ndarray | None) -> np.ndarray:
        """The blocks of ``form`` tight at ``x0`` (none without a usable x0)."""
        from ._active_set_kernel import block_margins

        indptr, indices, data, b, offsets, dims = self.blocks(form)
        if x0 is None or x0.shape != (self.n,) or not np.isfinite(x0).all():
            return np.zeros(len(dims), dtype=np.bool_)
        margin = block_margins(indptr, indices, data, b, offsets, dims, np.asarray(x0, dtype=float))
        return margin < GUESS_TOL * self._b_scale

    def solve(self, form, pvals: np.ndarray, q: np.ndarray, x0: np.ndarray | None,
              max_rows: int | None = None) -> tuple[int, np.ndarray, int, int, int]:
        """Minimise ½xᵀPx + qᵀx (P from ``pvals``) over ``form`` from the start ``x0`` (None: P⁻¹'s unconstrained
        minimiser). Returns (status, x, passes, iterations, interior-point passes); status is the kernel's
        (``CERTIFIED`` = 0: x is the minimiser) or :data:`NOT_CERTIFIABLE`, also when the blocks tight at ``x0``
        hold more than ``max_rows`` rows (the dense work grows as their cube)."""
        from ._active_set_kernel import working_set_solve

        x = np.empty(self.n)
        if form.zero:
            return NOT_CERTIFIABLE, x, 0, 0, 0
        indptr, indices, data, b, offsets, dims = self.blocks(form)
        work = self.guess(form, x0)
        if max_rows is not None and int(dims[work].sum()) > max_rows:
            return NOT_CERTIFIABLE, x, 0, 0, 0
        pinv = self.inverse(pvals)
        if pinv is None:
            return NOT_CERTIFIABLE, x, 0, 0, 0
        x_start = np.asarray(x0, dtype=float) if work.any() else _NO_START
        try:
            status, passes, iters, ipm = working_set_solve(pinv, np.asarray(q, dtype=float), indptr, indices, data, b,
                                                           offsets, dims, work, x_start, FEAS_TOL, QP_TOL, LOOSE_TOL,
                                                           MAX_PASSES, MAX_ITER, NEWTON_ITER, x)
        except np.linalg.LinAlgError:
            return NOT_CERTIFIABLE, x, 0, 0, 0
        return int(status), x, int(passes), int(iters), int(ipm)
