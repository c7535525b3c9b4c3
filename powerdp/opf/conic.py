"""The conic form of a compiled problem, solved with Clarabel (an interior-point conic solver).

Every model powerdp builds is a convex QCQP whose quadratic rows are second-order cones
(docs/formulation.md): the W-space cone wr² + wi² ≤ w_f·w_t (a rotated SOC) and the thermal
limits p² + q² ≤ s² (an SOC, also when the flows are linear expressions in W). Clarabel solves

    min ½ xᵀPx + qᵀx   s.t.   A x + s = b,  s ∈ K = {0}ᵃ × ℝ₊ᵇ × SOC × … × SOC

and :func:`conic_form` writes a :class:`~powerdp.opf.compiled.CompiledProblem` that way without
knowing which model it came from:

* linear rows: equalities in the zero cone, finite sides of ranges and one-sided rows in the
  nonnegative cone; variable bounds likewise (bounds at or beyond ±1e19 are no bounds);
* each quadratic row xᵀQx + aᵀx ≤ u (a ≥-row is negated first) is read through the eigen-
  decomposition of its small dense Q (over the row's own variables):
  Q ⪰ 0, a = 0, u ≥ 0 → ‖F x‖ ≤ √u with Q = FᵀF;
  Q ⪰ 0 otherwise     → ‖(2F x, t − 1)‖ ≤ t + 1 with t = u − aᵀx (i.e. ‖Fx‖² ≤ t);
  one negative eigenvalue λ₋ (eigenvector v₋), a = 0, u = 0, and v₋ᵀx ≥ 0 implied by the
  bounds (v₋'s entries of one sign on variables with lb ≥ 0) → ‖F₊ x‖ ≤ √|λ₋| v₋ᵀx, exactly
  the set xᵀQx ≤ 0 on that half-space. For the W cone this is the rotated SOC
  ‖(2wr, 2wi, w_f − w_t)‖ ≤ w_f + w_t (halved). Anything else is a ModelError naming the row.

:class:`ClarabelSolver` builds Clarabel's data once; a re-solve changes only q and the values of
P (whose pattern holds the problem's objective, the pattern objective and the diagonal), and
``set_bounds`` only b when the set of finite bounds stays the same (Clarabel's data updating,
which needs its presolve off). Clarabel has no warm start: every solve starts from its own
initial point.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from ..errors import ConfigError, ModelError
from .compiled import CompiledProblem, QuadraticObjective
from .local_solver import SolveResult

__all__ = ["ConicForm", "conic_form", "second_order_cones", "ClarabelSolver", "CLARABEL_SETTINGS", "LOCAL_SETTINGS", "column_scaling"]

FINITE = 1e19  # |bound| >= 1e19 is no bound (as Ipopt reads it; compiled.INF = 1e20)
EIG_TOL = 1e-9  # eigenvalues below EIG_TOL·max|λ| of their row count as zero

#: Clarabel settings of every solve (Clarabel's default tolerances; no presolve, so the data can be
#: updated between solves)
CLARABEL_SETTINGS: dict[str, Any] = {
    "verbose": False,
    "presolve_enable": False,
    "tol_gap_abs": 1e-8,
    "tol_gap_rel": 1e-8,
    "tol_feas": 1e-8,
    "max_iter": 200,
}
#: on top of those, the settings of a zone's local solves in a run (ClarabelSolver.from_config).
#: A local objective is strongly convex with modulus ~1/η but its value is in the hundreds (the ADMM
#: terms), so a relative gap of 1e-8 leaves the solution ~1e-3 off; a gap of 1e-10 brings it to
#: Ipopt's accuracy (median 8e-7, largest 9e-5 from a tight reference, on 123 recorded case118 zone
#: solves). Equilibration, fixed at the first solve's data, costs iterations and accuracy on later
#: objectives (at gap 1e-10: 67 of 123 solves only AlmostSolved with it, 5 without).
#: Iterative refinement is off: on case118 (objl, T = 30, E = 5, benchmarks/clarabel_settings.py) it takes
#: 35–40 % of Clarabel's time, and the objective history without it lies within 2.0e-6 of the one with it,
#: both 7e-6 from a solve to gap 1e-13 (the history's spread at this tolerance); a looser refinement
#: tolerance saves nothing. The linear solver is QDLDL: Clarabel's automatic choice takes faer on
#: larger zones, 5× slower on a case13659pegase zone (single-threaded hosts on shared cores).
#: The static regularization is 1e-10 (Clarabel's default 1e-8): without refinement nothing corrects the
#: regularized Newton steps, and on case13659pegase's zones (Hessian entries from 1e-3 to 1e8, large branch
#: admittances pulled through z = P r) the primal residual then stalls near 1e-6 while the gap closes, so 42 of 48
#: zone solves ended AlmostSolved after idling iterations. At 1e-10: 19 % fewer iterations (1104 against 1357 on
#: 48 recorded solves), 38 of 48 Solved, constraint violations ≤ 2e-6 instead of 2.7e-5; on case118 the same
#: iterations a solve and the same distance from a tight solve (benchmarks/clarabel_settings.py, variants
#: static_reg_*; docs/results/performance.md).
LOCAL_SETTINGS: dict[str, Any] = {
    "tol_gap_abs": 1e-10,
    "tol_gap_rel": 1e-10,
    "equilibrate_enable": False,
    "iterative_refinement_enable": False,
    "direct_solve_method": "qdldl",
    "static_regularization_constant": 1e-10,
}

# Clarabel's SolverStatus names → powerdp outcomes (local_solver.OUTCOMES); others are "failed"
OUTCOMES = {
    "Solved": "solved",
    "AlmostSolved": "solved_inaccurate",
    "PrimalInfeasible": "infeasible",
    "AlmostPrimalInfeasible": "infeasible",
    "DualInfeasible": "unbounded",
    "AlmostDualInfeasible": "unbounded",
    "MaxIterations": "iteration_limit",
    "MaxTime": "time_limit",
    "NumericalError": "numerical_error",
    "InsufficientProgress": "numerical_error",
}
STATUS_CODES = (
    "Unsolved", "Solved", "PrimalInfeasible", "DualInfeasible", "AlmostSolved", "AlmostPrimalInfeasible",
    "AlmostDualInfeasible", "MaxIterations", "MaxTime", "NumericalError", "InsufficientProgress", "CallbackTerminated",
)


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """The same array (one object, or equal shape and values)."""
    return a is b or (a.shape == b.shape and bool(np.array_equal(a, b)))


def _kept(a: np.ndarray) -> np.ndarray:
    """``a`` to compare later objectives with: itself when read-only (a Reduction's cached values), else a copy
    (the caller may change its array in place)."""
    return a if not a.flags.writeable else a.copy()


def _row_name(prob: CompiledProblem, row: int) -> str:
    name, index = prob.con_keys[row]
    return f"{name}[{index}]"


@dataclass
class _Cones:
    """The second-order cones of the quadratic rows (fixed while their bounds are)."""

    dims: list[int]  # one entry per cone, in row order
    A: sp.csr_matrix  # sum(dims) × n
    b: np.ndarray
    rows: np.ndarray  # the compiled rows they come from
    cl: np.ndarray  # those rows' bounds when built (a change rebuilds the cones)
    cu: np.ndarray


def second_order_cones(prob: CompiledProblem, cl: np.ndarray, cu: np.ndarray, lb: np.ndarray) -> _Cones:
    """The SOC form of every quadratic row (module doc), batched by the rows' variable count."""
    n, m = prob.n, prob.m
    qrows = np.unique(prob.qrow)
    nq = len(qrows)
    empty = _Cones([], sp.csr_matrix((0, n)), np.zeros(0), qrows, cl[qrows].copy(), cu[qrows].copy())
    if nq == 0:
        return empty
    pos = np.full(m, -1, dtype=np.int64)
    pos[qrows] = np.arange(nq)
    Aq = prob.A.tocsr()[qrows].tocoo()
    # each row's own variables: the union of its quadratic and linear ones, numbered 0..k-1 in the row
    pr = np.concatenate([pos[prob.qrow], pos[prob.qrow], Aq.row])
    pv = np.concatenate([prob.qi, prob.qj, Aq.col])
    key = pr * n + pv
    ukey = np.unique(key)
    urow, uvar = ukey // n, ukey % n
    first = np.searchsorted(urow, np.arange(nq))
    k = np.bincount(urow, minlength=nq)

    def local(rows, cols):
        return np.searchsorted(ukey, rows * n + cols) - first[rows]

    qr = pos[prob.qrow]
    li, lj = local(qr, prob.qi), local(qr, prob.qj)
    la = local(Aq.row, Aq.col)
    lo_fin, up_fin = cl[qrows] > -FINITE, cu[qrows] < FINITE
    both = np.flatnonzero(lo_fin & up_fin)
    if both.size:
        r = qrows[both[0]]
        raise ModelError(
            f"constraint {_row_name(prob, r)}: a quadratic row bounded on both sides ({cl[r]:g} ≤ … ≤ {cu[r]:g}) is not convex"
        )
    sign = np.where(lo_fin, -1.0, 1.0)  # a ≥-row is negated into a ≤-row
    rhs = np.where(lo_fin, -cl[qrows], cu[qrows])
    active = lo_fin | up_fin

    blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # (row ids, dims, dense M (G,d,k), b (G,d))
    for kk in np.unique(k[active]):
        g_rows = np.flatnonzero(active & (k == kk))
        gpos = np.full(nq, -1, dtype=np.int64)
        gpos[g_rows] = np.arange(len(g_rows))
        G = len(g_rows)
        Q = np.zeros((G, kk, kk))
        sel = gpos[qr] >= 0
        half = 0.5 * prob.qv[sel] * sign[qr[sel]]
        np.add.at(Q, (gpos[qr[sel]], li[sel], lj[sel]), half)  # v·x_i·x_j = ½v x_i x_j + ½v x_j x_i
        np.add.at(Q, (gpos[qr[sel]], lj[sel], li[sel]), half)
        a = np.zeros((G, kk))
        sel_a = gpos[Aq.row] >= 0
        np.add.at(a, (gpos[Aq.row[sel_a]], la[sel_a]), Aq.data[sel_a] * sign[Aq.row[sel_a]])
        lam, V = np.linalg.eigh(Q)  # ascending eigenvalues
        scale = np.abs(lam).max(axis=1, keepdims=True)
        tol = EIG_TOL * np.maximum(scale, 1e-300)
        npos = (lam > tol).sum(axis=1)
        nneg = (lam < -tol).sum(axis=1)
        has_lin = np.any(a != 0.0, axis=1)
        u = rhs[g_rows]
        norm = (nneg == 0) & ~has_lin & (u >= 0)
        epi = (nneg == 0) & ~norm
        rot = (nneg == 1) & ~has_lin & (u == 0)
        bad = ~(norm | epi | rot)
        if np.any(bad):
            j = int(np.flatnonzero(bad)[0])
            r = qrows[g_rows[j]]
            why = (
                f"{int(nneg[j])} negative eigenvalues" if nneg[j] > 1
                else "a nonconvex quadratic with a linear term or a nonzero right-hand side"
            )
            raise ModelError(f"constraint {_row_name(prob, r)}: not a second-order cone ({why})")
        if np.any(rot):
            # v₋ᵀx ≥ 0 must follow from the bounds: v₋'s entries of one sign, on variables with lb ≥ 0
            vneg = V[:, :, 0]
            flip = np.where(vneg.sum(axis=1) < 0, -1.0, 1.0)
            vneg = vneg * flip[:, None]
            V[:, :, 0] = vneg
            big = np.abs(vneg) > 1e-12
            cols = uvar[first[g_rows][:, None] + np.arange(kk)[None, :]]
            ok = ~np.any(big & ((vneg < 0) | (lb[cols] < 0)), axis=1)
            wrong = rot & ~ok
            if np.any(wrong):
                r = qrows[g_rows[int(np.flatnonzero(wrong)[0])]]
                raise ModelError(
                    f"constraint {_row_name(prob, r)}: a hyperbolic (rotated-cone) row whose variables are not "
                    "nonnegative by their bounds is not convex"
                )
        root = np.sqrt(np.abs(lam))
        for kind, mask in (("norm", norm), ("epi", epi), ("rot", rot)):
            for p in np.unique(npos[mask]):
                sub = np.flatnonzero(mask & (npos == p))
                S = len(sub)
                # F rows: √λ v for the p largest (positive) eigenvalues
                F = (root[sub][:, kk - p :, None] * np.transpose(V[sub][:, :, kk - p :], (0, 2, 1)))  # (S, p, k)
                if kind == "norm":  # s = (√u, F x)
                    M = np.concatenate([np.zeros((S, 1, kk)), -F], axis=1)
                    b = np.concatenate([np.sqrt(u[sub])[:, None], np.zeros((S, p))], axis=1)
                elif kind == "epi":  # s = (t + 1, t − 1, 2F x), t = u − aᵀx
                    M = np.concatenate([a[sub][:, None, :], a[sub][:, None, :], -2.0 * F], axis=1)
                    b = np.concatenate([(u[sub] + 1.0)[:, None], (u[sub] - 1.0)[:, None], np.zeros((S, p))], axis=1)
                else:  # s = (√|λ₋| v₋ᵀx, F₊ x)
                    head = root[sub][:, 0, None, None] * V[sub][:, :, 0][:, None, :]
                    M = np.concatenate([-head, -F], axis=1)
                    b = np.zeros((S, 1 + p))
                blocks.append((g_rows[sub], np.full(S, M.shape[1]), M, b))
    if not blocks:
        return empty
    # order the cones by compiled row, so the conic form reads like the problem
    ids = np.concatenate([blk[0] for blk in blocks])
    dims = np.concatenate([blk[1] for blk in blocks])
    order = np.argsort(ids, kind="stable")
    start = np.zeros(len(ids), dtype=np.int64)
    start[order] = np.concatenate([[0], np.cumsum(dims[order])[:-1]])
    rows_, cols_, vals_ = [], [], []
    b_total = np.zeros(int(dims.sum()))
    offset = 0
    for g_ids, _dims, M, b in blocks:
        S, d, kk = M.shape
        cone_start = start[offset : offset + S]
        offset += S
        r = cone_start[:, None, None] + np.arange(d)[None, :, None] + np.zeros((1, 1, kk), dtype=np.int64)
        c = uvar[first[g_ids][:, None, None] + np.arange(kk)[None, None, :] + np.zeros((1, d, 1), dtype=np.int64)]
        keep = M != 0.0
        rows_.append(r[keep])
        cols_.append(c[keep])
        vals_.append(M[keep])
        b_total[(cone_start[:, None] + np.arange(d)[None, :]).ravel()] = b.ravel()
    A = sp.csr_matrix((np.concatenate(vals_), (np.concatenate(rows_), np.concatenate(cols_))), shape=(len(b_total), n))
    return _Cones(dims[order].tolist(), A, b_total, qrows, cl[qrows].copy(), cu[qrows].copy())


@dataclass
class ConicForm:
    """``A x + s = b``, ``s ∈ {0}^zero × ℝ₊^nonneg × SOC(dims…)`` for given bounds (see module doc)."""

    A: sp.csc_matrix
    b: np.ndarray
    zero: int
    nonneg: int
    soc: list[int]
    signature: bytes  # which bounds are finite / equal: the same signature means the same A and cones

    def cones(self) -> list:
        import clarabel

        out = []
        if self.zero:
            out.append(clarabel.ZeroConeT(self.zero))
        if self.nonneg:
            out.append(clarabel.NonnegativeConeT(self.nonneg))
        out.extend(clarabel.SecondOrderConeT(d) for d in self.soc)
        return out


def conic_form(
    prob: CompiledProblem,
    lb: np.ndarray | None = None,
    ub: np.ndarray | None = None,
    cl: np.ndarray | None = None,
    cu: np.ndarray | None = None,
    cones: _Cones | None = None,
) -> ConicForm:
    """The conic form of ``prob`` with the given bounds (default the problem's own)."""
    lb = prob.lb if lb is None else lb
    ub = prob.ub if ub is None else ub
    cl = prob.cl if cl is None else cl
    cu = prob.cu if cu is None else cu
    if cones is None:
        cones = second_order_cones(prob, cl, cu, lb)
    n, m = prob.n, prob.m
    linear = np.ones(m, dtype=bool)
    linear[cones.rows] = False
    eq = linear & (cl == cu) & (np.abs(cl) < FINITE)
    upper = linear & ~eq & (cu < FINITE)
    lower = linear & ~eq & (cl > -FINITE)
    fixed = (lb == ub) & (np.abs(lb) < FINITE)
    vup = ~fixed & (ub < FINITE)
    vlo = ~fixed & (lb > -FINITE)
    if np.any(lower & upper & (cl > cu)) or np.any(lb > ub):
        bad = np.flatnonzero(lower & upper & (cl > cu))
        what = _row_name(prob, int(bad[0])) if bad.size else f"bounds of {prob.var_keys[int(np.flatnonzero(lb > ub)[0])]}"
        raise ModelError(f"{what}: lower bound above upper bound")
    A = prob.A.tocsr()
    eye = sp.identity(n, format="csr")
    parts = [A[eq], eye[fixed], A[upper], -A[lower], eye[vup], -eye[vlo], cones.A]
    b = np.concatenate([cl[eq], lb[fixed], cu[upper], -cl[lower], ub[vup], -lb[vlo], cones.b])
    signature = np.packbits(np.concatenate([eq, upper, lower, fixed, vup, vlo])).tobytes()
    return ConicForm(
        A=sp.vstack(parts, format="csc"),
        b=b,
        zero=int(eq.sum() + fixed.sum()),
        nonneg=int(upper.sum() + lower.sum() + vup.sum() + vlo.sum()),
        soc=list(cones.dims),
        signature=signature,
    )


#: the exponent of :func:`column_scaling`
COLUMN_SCALING_POWER = 0.25


def column_scaling(problem: CompiledProblem, pattern: QuadraticObjective | None) -> np.ndarray | None:
    """The variables' scale factors of a zone's local solves: s_j = max(H_jj, 1)^¼, H the Hessian of ``pattern``.

    In a run ``pattern`` is the pulled ``Pᵀ D P`` with D = I (plus the objective's own Hessian for rules that keep
    it exact): it holds the network's admittances and the public weights, never a load, so every host computes
    the same factors from the zone's structure alone. On case13659pegase H_jj spans 1 to ~1e8 (branch
    admittances up to ~1e4 p.u.); Clarabel then needs 1104 interior-point iterations for 48 recorded zone solves,
    with s 882 (the constraint violation 4.7e-7 instead of 2.0e-6, the same objective gap; docs/results/performance.md).
    The fourth root quarters the range's logarithm: the square root (Jacobi) spreads the bound rows so far that 3
    of 18 solves came back PrimalInfeasible. On case118 the factors reach ~10 and the iterations stay the same
    (benchmarks/clarabel_settings.py, variant no_column_scaling). None when every factor is 1."""
    if pattern is None:
        return None
    n = problem.n
    h = np.zeros(n)
    on = pattern.qi == pattern.qj
    np.add.at(h, pattern.qi[on], 2.0 * pattern.qv[on])
    if pattern.diag is not None:
        h = h + pattern.diag
    s = np.maximum(h, 1.0) ** COLUMN_SCALING_POWER
    return None if np.all(s == 1.0) else s


class ClarabelSolver:
    """Clarabel on the conic form of one compiled problem, re-solvable with new objectives.

    Parameters
    ----------
    problem: the compiled problem (a convex QCQP whose quadratic rows are cones, module doc).
    objective_pattern: an objective whose Hessian pattern every later objective's lies in (with
        the problem's own objective's and the diagonal), as for :class:`~powerdp.opf.solvers.IpoptSolver`.
    options: Clarabel settings overriding :data:`CLARABEL_SETTINGS` (names of ``clarabel.DefaultSettings``).
    objective_scale: a factor for P and q (the minimiser does not move; objectives are reported unscaled).
    column_scale: positive factors s of the variables Clarabel sees, x̃ = s·x (A's columns and P, q divided by s,
        the solution multiplied back; b and the cones unchanged); None for none. Runs use :func:`column_scaling`.

    One implementation of :class:`~powerdp.opf.local_solver.LocalSolver`. In runs it solves the
    reduced problem in r, as Ipopt does (flows and balance variables eliminated, z = P r): on
    case118's three zones (objl, E = 5, 20 rounds) that takes the same 11.5 iterations per solve
    as the full problem in z but 4.8–5.5 ms per solve instead of 7.8–8.3 ms (a smaller KKT system).
    """

    name: ClassVar[str] = "clarabel"
    label: ClassVar[str] = "Clarabel"
    wants_reduced: ClassVar[bool] = True
    supports_warm_start: ClassVar[bool] = False

    def __init__(
        self,
        problem: CompiledProblem,
        objective_pattern: QuadraticObjective | None = None,
        options: dict[str, Any] | None = None,
        objective_scale: float | None = None,
        column_scale: np.ndarray | None = None,
    ):
        import clarabel

        self.problem = problem
        self.objective_scale = float(objective_scale) if objective_scale else 1.0
        n = problem.n
        if column_scale is not None:
            column_scale = np.asarray(column_scale, dtype=float)
            if column_scale.shape != (n,) or not np.all(np.isfinite(column_scale) & (column_scale > 0)):
                raise ModelError(f"column_scale must hold {n} positive finite factors")
        self.column_scale = column_scale  # s (None: Clarabel sees x itself)
        self._inv_scale = None if column_scale is None else 1.0 / column_scale
        self._default_objective = problem.objective if objective_pattern is None else objective_pattern
        settings = clarabel.DefaultSettings()
        self.options = {**CLARABEL_SETTINGS, **(options or {})}
        for key, value in self.options.items():
            if not hasattr(settings, key):
                raise ConfigError(f"unknown Clarabel setting {key!r}")
            try:
                setattr(settings, key, value)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"invalid Clarabel setting {key} = {value!r}: {exc}") from None
        self._settings = settings
        # P's pattern (upper triangle, column-major = the lower-triangle keys qi·n + qj sorted):
        # the problem's objective ∪ the pattern objective ∪ the diagonal
        diag = np.arange(n, dtype=np.int64)
        pats = [problem.objective, self._default_objective]
        hi = np.concatenate([p.qi for p in pats] + [diag])
        lo = np.concatenate([p.qj for p in pats] + [diag])
        self._pkeys = np.unique(hi * n + lo)
        cols, rows = self._pkeys // max(n, 1), self._pkeys % max(n, 1)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=n))])
        self._p_indptr, self._p_indices = indptr, rows
        self._pdiag = np.searchsorted(self._pkeys, diag * n + diag)
        # P̃ = S⁻¹ P S⁻¹ entry by entry (None without a column scaling); the last P sent, scaled, is kept
        inv = self._inv_scale
        self._p_scale = None if inv is None else inv[rows] * inv[cols]
        self._scaled_p: tuple[np.ndarray, np.ndarray] | None = None
        self.bounds = (problem.lb, problem.ub, problem.cl, problem.cu)
        self._cones = second_order_cones(problem, problem.cl, problem.cu, problem.lb)
        self._form = conic_form(problem, cones=self._cones)
        self._solver = None  # built on the first solve (it needs the first objective)
        self.builds = 0  # how often Clarabel's data were built (not updated)
        self.q_only_updates = 0  # re-solves that sent Clarabel only q (P unchanged since the previous solve)
        self._last_hessian: tuple | None = None  # (qi, qj, qv, diag, P's values) of the previous solve
        self._solver_p: np.ndarray | None = None  # the P values Clarabel's data hold

    @classmethod
    def from_config(
        cls, problem: CompiledProblem, objective_pattern: QuadraticObjective | None, config: Any, objective_scale: float | None = None
    ) -> ClarabelSolver:
        """A zone's solver in a run: :data:`CLARABEL_SETTINGS` with :data:`LOCAL_SETTINGS`; P and q are
        multiplied by ``objective_scale`` (the minimiser stays; reported objectives are unscaled)."""
        return cls(problem, objective_pattern=objective_pattern, options=LOCAL_SETTINGS, objective_scale=objective_scale,
                   column_scale=column_scaling(problem, objective_pattern))

    @classmethod
    def check_config(cls, config: Any) -> None:
        """Ipopt's options mean nothing to Clarabel: refuse them rather than ignore them."""
        if config.ipopt_options:
            raise ConfigError(f"ipopt_options = {config.ipopt_options!r}: Ipopt options need local_solver 'ipopt' (it is 'clarabel')")
        if str(config.ipopt_profile) != "default":
            raise ConfigError(f"ipopt_profile = {config.ipopt_profile!r}: an Ipopt profile needs local_solver 'ipopt' (it is 'clarabel')")
        if str(config.ipopt_warm_profile) != "warm":
            raise ConfigError(
                f"ipopt_warm_profile = {config.ipopt_warm_profile!r}: an Ipopt profile needs local_solver 'ipopt' (it is 'clarabel')"
            )

    def enable_warm_start(self) -> None:
        """Clarabel has no warm start; nothing to switch."""
        return None

    # ------------------------------------------------------------------ data
    def _same_hessian(self, obj: QuadraticObjective) -> bool:
        """Whether ``obj``'s quadratic terms are those of the previous solve (then P's values are kept:
        within an ADMM round only the linear term changes)."""
        last = self._last_hessian
        if last is None:
            return False
        qi, qj, qv, diag, _ = last
        if (diag is None) != (obj.diag is None):
            return False
        return (
            _equal(qv, obj.qv) and _equal(qi, obj.qi) and _equal(qj, obj.qj)
            and (diag is None or _equal(diag, obj.diag))
        )

    def _hessian_values(self, obj: QuadraticObjective) -> np.ndarray:
        """P's values (scaled) for ``obj``: the previous solve's array itself when its quadratic terms are the same."""
        if not self._same_hessian(obj):
            pvals = self._p_values(obj)
            if self.objective_scale != 1.0:
                pvals = pvals * self.objective_scale
            kept = [None if a is None else _kept(a) for a in (obj.qi, obj.qj, obj.qv, obj.diag)]
            self._last_hessian = (*kept, pvals)
        return self._last_hessian[-1]

    def _p_values(self, obj: QuadraticObjective) -> np.ndarray:
        """P's values in its fixed pattern: ½xᵀPx = Σ v x_i x_j + ½ Σ d x² (P_ii = 2v + d, P_ij = v)."""
        n = self.problem.n
        if obj.c.shape != (n,):
            raise ModelError(f"objective vector has shape {obj.c.shape}, expected ({n},)")
        keys = obj.qi * n + obj.qj
        pos = np.searchsorted(self._pkeys, keys)
        nnz = len(self._pkeys)
        if len(keys) and (np.any(pos >= nnz) or np.any(self._pkeys[np.minimum(pos, nnz - 1)] != keys)):
            raise ModelError("objective Hessian has entries outside the solver's Hessian pattern")
        vals = np.bincount(pos, np.where(obj.qi == obj.qj, 2.0 * obj.qv, obj.qv), minlength=nnz)
        if obj.diag is not None:
            vals = vals + np.bincount(self._pdiag, obj.diag, minlength=nnz)
        return vals

    def set_bounds(self, lb: np.ndarray, ub: np.ndarray, cl: np.ndarray, cu: np.ndarray) -> None:
        """Replace the bounds: only b changes when the same bounds stay finite (else Clarabel's data are rebuilt)."""
        new = tuple(np.asarray(v, dtype=float) for v in (lb, ub, cl, cu))
        p = self.problem
        for v, k, name in zip(new, (p.n, p.n, p.m, p.m), ("lb", "ub", "cl", "cu")):
            if v.shape != (k,):
                raise ModelError(f"bound {name} has shape {v.shape}, expected ({k},)")
        if all(np.array_equal(a, b) for a, b in zip(new, self.bounds)):
            return
        lb, ub, cl, cu = new
        rows = self._cones.rows
        if not (np.array_equal(cl[rows], self._cones.cl) and np.array_equal(cu[rows], self._cones.cu)):
            self._cones = second_order_cones(p, cl, cu, lb)
            self._solver = None
        form = conic_form(p, lb, ub, cl, cu, cones=self._cones)
        if self._solver is not None and form.signature == self._form.signature:
            self._solver.update(b=form.b)
        else:
            self._solver = None
        self._form = form
        self.bounds = new

    # ----------------------------------------------------------------- solve
    def solve(
        self,
        objective: QuadraticObjective | None = None,
        x0: np.ndarray | None = None,
        mult_g: np.ndarray | None = None,
        mult_x_lower: np.ndarray | None = None,
        mult_x_upper: np.ndarray | None = None,
    ) -> SolveResult:
        """Solve with ``objective`` (default: the problem's own). ``x0`` and the multipliers are
        accepted for the interface and not used (no warm start). Never raises on a failed solve."""
        import clarabel

        obj = objective if objective is not None else self._default_objective
        t = time.perf_counter()
        pvals = self._hessian_values(obj)
        q = np.asarray(obj.c, dtype=float)
        if self.objective_scale != 1.0:
            q = q * self.objective_scale
        inv = self._inv_scale
        sent = pvals
        if inv is not None:  # Clarabel sees x̃ = s·x: P̃ = S⁻¹PS⁻¹, q̃ = S⁻¹q, Ã = AS⁻¹
            if self._scaled_p is None or self._scaled_p[0] is not pvals:
                self._scaled_p = (pvals, pvals * self._p_scale)
            sent = self._scaled_p[1]
            q = q * inv
        if self._solver is None:
            n = self.problem.n
            P = sp.csc_matrix((sent, self._p_indices, self._p_indptr), shape=(n, n))
            f = self._form
            A = f.A
            if inv is not None:  # AS⁻¹ on A's own pattern (entries in A's order: a CSC product may reorder them)
                A = sp.csc_matrix((A.data * np.repeat(inv, np.diff(A.indptr)), A.indices, A.indptr), shape=A.shape)
            self._solver = clarabel.DefaultSolver(P, q, A, f.b, f.cones(), self._settings)
            self.builds += 1
        elif pvals is self._solver_p:
            self._solver.update(q=q)  # a round's later solves: P is the same, only q changes
            self.q_only_updates += 1
        else:
            self._solver.update(P=sent, q=q)
        self._solver_p = pvals
        t_solve = time.perf_counter()
        sol = self._solver.solve()
        wall = time.perf_counter() - t
        x = np.asarray(sol.x, dtype=float)
        if inv is not None:
            x = x * inv
        name = str(sol.status)
        empty = np.zeros(0)
        return SolveResult(
            x=x,
            objective=float(obj.value(x)) if np.all(np.isfinite(x)) else float("nan"),
            status=STATUS_CODES.index(name) if name in STATUS_CODES else -1,
            message=name,
            iterations=int(sol.iterations),
            wall_s=wall,
            callback_s=t_solve - t,  # powerdp's data update before the solve
            mult_g=empty,
            mult_x_lower=empty,
            mult_x_upper=empty,
            status_name=name,
            outcome=OUTCOMES.get(name, "failed"),
            solver=self.label,
        )
