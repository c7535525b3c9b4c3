"""Clarabel (an interior-point conic solver) on the conic form of a compiled problem (:mod:`powerdp.opf.conic_form`).

:class:`ClarabelSolver` builds Clarabel's data once; a re-solve changes only q and the values of
P (whose pattern holds the problem's objective, the pattern objective and the diagonal), and
``set_bounds`` only b when the set of finite bounds stays the same (Clarabel's data updating,
which needs its presolve off). Clarabel has no warm start: every solve starts from its own
initial point. In runs its solution is polished (:data:`POLISH`, :mod:`powerdp.opf.working_sets`): the
problem restricted to the blocks active at Clarabel's point is solved exactly, and that solution is returned
when it is certified.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from ..errors import ConfigError, ModelError
from .compiled import CompiledProblem, QuadraticObjective
from .conic_form import ConicForm, conic_form, second_order_cones
from .local_solver import SolveResult

__all__ = ["ConicForm", "conic_form", "second_order_cones", "ClarabelSolver", "CLARABEL_SETTINGS", "LOCAL_SETTINGS", "column_scaling"]


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

#: the feasibility tolerance of an ill-conditioned zone's local solves (CLARABEL_SETTINGS' 1e-8 elsewhere): a zone whose
#: Hessian pattern (admittances pulled through z = P r, unit weights: :func:`pattern_hessian_diagonal`) reaches
#: :data:`ILL_CONDITIONED_HESSIAN` on its diagonal. Clarabel measures the dual residual ‖Px + q + Aᵀz‖ against
#: max(1, ‖q‖, ‖Px‖, ‖Aᵀz‖), and where P holds ρ times admittances² 1e-8 of that leaves "Solved" points far from
#: the minimiser: on round 44 of a case13659pegase cost+shedding run (16 zones) every zone said Solved while a tight
#: re-solve found objectives lower by 4–118 (median 23) and points up to 59 p.u. away; at 1e-10 the median is 0.045,
#: and the runs' cost gap stopped settling 1.5e-3 above the optimum (1.5e-4; case1354_pegase reaches a 1e-4 gap at
#: round 85 instead of never, case2000_goc a 1e-3 gap at round 32 instead of 42). Not everywhere: on case118 it costs
#: 14 % more iterations for nothing (benchmarks/clarabel_settings.py, variants feas_*), and on a 4-bus case with an
#: HVDC line 35 of 602 solves ended AlmostSolved, a worse point than Solved at 1e-8, so exact ADMM no longer reached
#: relative residuals of 1e-7 (docs/results/performance.md)
ILL_CONDITIONED_TOL_FEAS = 1e-10
#: the largest diagonal entry of a zone's Hessian pattern from which its solves use ILL_CONDITIONED_TOL_FEAS. Measured
#: per zone (largest entry): case118 in 3 or 16 zones ≤ 2.4e5, the 4-bus HVDC case 4e2; case2000_goc 3.5e6–6.3e6,
#: ACTIVSg10k 3.2e6–2.0e10, case1354_pegase 1.0e7–3.1e8, case13659pegase 4.5e7–2.0e8 (16 zones)
ILL_CONDITIONED_HESSIAN = 1e6

#: runs polish Clarabel's solution of a zone with at most POLISH_MAX_N variables (ClarabelSolver.from_config):
#: the working sets of powerdp.opf.working_sets, started from Clarabel's point, solve the problem on its active
#: blocks exactly and keep that solution when it is certified. On case118 (objl, T = 100, E = 5) every solve was
#: certified and the objective history then lies within 1e-8 of the active-set solver's, against 3.8e-5 without
#: (Clarabel's own spread between tolerances, docs/results/performance.md). P⁻¹ is dense: 8 MB at 1000 variables;
#: larger zones (case13659pegase's) keep Clarabel's solution as it is.
POLISH = True
POLISH_MAX_N = 1000
#: … and only when the blocks tight at Clarabel's point hold at most this many rows: the polish's dense work grows as
#: their cube. A private run's zone on case118 has 12–19 tight blocks, up to ≈ 60 (≈ 200 rows) in its first rounds;
#: a cost+shedding zone of case1354_pegase (with the proximal term, P positive definite) 100–150 tight cones (400–550
#: rows), where one polish took 2.4–12 s against Clarabel's 20–50 ms
POLISH_MAX_ROWS = 256

#: a weighted objective's (cost+shedding's) local solves: the objective scale the agent asks for (Ipopt's: the
#: shedding curvature 2ω·s = 1e4) times this, and the balance variables measured from their own minimiser
#: (:meth:`ClarabelSolver._center`). Measured on recorded case13659pegase zone problems (docs/results/performance.md):
#: at Ipopt's scale the ADMM terms and the cost are ~1e-4 of Clarabel's unit and its solutions 0.1–0.4 p.u. from the
#: minimiser; ×100 with the centring, within 2e-4 (1e-6 with the proximal term of RunConfig.proximal)
WEIGHTED_SCALE_FACTOR = 100.0


def balance_columns(problem: CompiledProblem) -> np.ndarray:
    """The columns of ``problem`` that are balance variables y (empty when the reduction eliminated them)."""
    from .formulation import BALANCE_VARIABLES

    return np.flatnonzero([k[0] in BALANCE_VARIABLES for k in problem.var_keys]).astype(np.int64)


#: Clarabel's statuses of a solve that stopped because it could not improve its point (not a verdict on the problem)
STALLS = ("InsufficientProgress", "NumericalError")
#: such a point is accepted (outcome ``solved_inaccurate``, as Ipopt's acceptable level) when it violates no row or bound
#: by more than this, the violations Clarabel's AlmostSolved points of the same zones show (4e-8 to 6e-5). The cost objective's zones of case13659pegase need it: its 1199 branches with |z| < 1e-3 (x = 2e-4,
#: admittance 5000 p.u.) put coefficients of ~4500 on wr/wi into the hard power-balance rows, where Clarabel's Newton
#: steps shrink to 1e-3 of a full step (zone 10's projection: InsufficientProgress after 26 iterations at a point
#: violating a row by 2e-2 with the run's column scaling; AlmostSolved after 98 iterations without it; Ipopt needs 209
#: iterations and 43 s to its acceptable level on the same problem; docs/results/performance.md)
STALL_ACCEPT_VIOLATION = 1e-4


#: a failed solve's retries, in order: (label, keeps the column scaling, settings over the solver's own, the solver's
#: counter of them). Measured on
#: zone 1 of case13659pegase's cost objective in round 4 with the balanced ρ at μ = 5 (a 2× step of every kind's ρ):
#: with the column scaling Clarabel stops at iteration 7 (AlmostDualInfeasible), without it at 29
#: (InsufficientProgress, a row violated by 1.6e-4), without it and with iterative refinement AlmostSolved after 67
#: (violation 2.0e-6). Clarabel's default regularization 1e-8 or equilibration did not solve it (200 iterations
#: AlmostSolved at 2.6e-5, NumericalError); docs/results/performance.md
RETRIES: tuple[tuple[str, bool, dict[str, Any], str], ...] = (
    ("without column scaling", False, {}, "unscaled_retries"),
    ("without column scaling, with iterative refinement", False, {"iterative_refinement_enable": True}, "refined_retries"),
)


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


#: the exponent of :func:`column_scaling`
COLUMN_SCALING_POWER = 0.25


def pattern_hessian_diagonal(problem: CompiledProblem, pattern: QuadraticObjective) -> np.ndarray:
    """The diagonal H_jj of ``pattern``'s Hessian (a function of the zone's structure in a run: see
    :func:`column_scaling`)."""
    h = np.zeros(problem.n)
    on = pattern.qi == pattern.qj
    np.add.at(h, pattern.qi[on], 2.0 * pattern.qv[on])
    if pattern.diag is not None:
        h = h + pattern.diag
    return h


def local_settings(problem: CompiledProblem, pattern: QuadraticObjective | None) -> dict[str, Any]:
    """The Clarabel settings of a zone's local solves (over CLARABEL_SETTINGS): :data:`LOCAL_SETTINGS`, with
    :data:`ILL_CONDITIONED_TOL_FEAS` when ``pattern``'s Hessian reaches :data:`ILL_CONDITIONED_HESSIAN` on its
    diagonal (a function of the zone's structure: the same on every host and after a resume)."""
    if pattern is not None and problem.n and float(pattern_hessian_diagonal(problem, pattern).max()) >= ILL_CONDITIONED_HESSIAN:
        return {**LOCAL_SETTINGS, "tol_feas": ILL_CONDITIONED_TOL_FEAS}
    return LOCAL_SETTINGS


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
    s = np.maximum(pattern_hessian_diagonal(problem, pattern), 1.0) ** COLUMN_SCALING_POWER
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
    polish: solve the problem again on the blocks active at Clarabel's point, exactly, and return that solution when
        it is certified (:mod:`powerdp.opf.working_sets`; counters ``polished`` and ``polish_failures``). Runs
        polish zones of at most :data:`POLISH_MAX_N` variables.
    drop_implied: leave the bounds the other rows imply out of Clarabel's rows (:mod:`powerdp.opf.implied_bounds`);
        default: when there is no polish. The working sets always see every bound (:attr:`working_form`).

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
        polish: bool = False,
        drop_implied: bool | None = None,
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
        self._p_indptr, self._p_indices, self._p_cols = indptr, rows, cols  # P's entries: column pointers, rows, columns
        self._pdiag = np.searchsorted(self._pkeys, diag * n + diag)
        # P̃ = S⁻¹ P S⁻¹ entry by entry (None without a column scaling); the last P sent, scaled, is kept
        inv = self._inv_scale
        self._p_scale = None if inv is None else inv[rows] * inv[cols]
        self._scaled_p: tuple[np.ndarray, np.ndarray] | None = None
        self.bounds = (problem.lb, problem.ub, problem.cl, problem.cu)
        self._cones = second_order_cones(problem, problem.cl, problem.cu, problem.lb)
        # implied bounds (powerdp.opf.implied_bounds) cost Clarabel rows and change no solution; a polished solve
        # keeps them: the polish's Newton steps start from Clarabel's point, and on case1354_pegase's zones they
        # needed up to 8× the steps from the point Clarabel reached without those rows (docs/results/performance.md)
        self._drop_implied = (not polish) if drop_implied is None else bool(drop_implied)
        self._form = conic_form(problem, cones=self._cones, drop_implied=self._drop_implied)
        self._working_form: ConicForm | None = None  # every bound a block: the working sets' form (working_form)
        self._solver = None  # built on the first solve (it needs the first objective)
        self.builds = 0  # how often Clarabel's data were built (not updated)
        self.q_only_updates = 0  # re-solves that sent Clarabel only q (P unchanged since the previous solve)
        self._last_hessian: tuple | None = None  # (qi, qj, qv, diag, P's values) of the previous solve
        self._solver_p: np.ndarray | None = None  # the P values Clarabel's data hold
        self.polish = bool(polish)
        self.working_sets = None  # P⁻¹ and the form's blocks for the polish (powerdp.opf.working_sets)
        if self.polish:
            from .working_sets import WorkingSets

            self.working_sets = WorkingSets(n, self._p_indices, self._p_cols)
        self.polished = self.polish_failures = 0
        #: variables Clarabel measures from the minimiser of their own diagonal term (:meth:`_center`); None: none
        self.center_columns: np.ndarray | None = None
        self.uncentered_retries = 0  # solves that stalled from x_c and were solved again from 0
        self.accepted_stalls = 0  # stalled solves whose feasible point was accepted (STALL_ACCEPT_VIOLATION)
        self._retries: list[ClarabelSolver | None] = [None] * len(RETRIES)  # the twins of a failed solve (solve)
        self._retries_enabled = True  # False for a twin, which does not retry
        self.unscaled_retries = self.refined_retries = 0

    @classmethod
    def from_config(
        cls, problem: CompiledProblem, objective_pattern: QuadraticObjective | None, config: Any, objective_scale: float | None = None
    ) -> ClarabelSolver:
        """A zone's solver in a run: :data:`CLARABEL_SETTINGS` with :func:`local_settings`; P and q are
        multiplied by ``objective_scale`` (the minimiser stays; reported objectives are unscaled); solutions are
        polished when :data:`POLISH` is on and the zone has at most :data:`POLISH_MAX_N` variables."""
        from .objectives import OBJECTIVES

        # runs with the proximal term (RunConfig.proximal) solve their weighted objective this way; others as before
        weighted = (OBJECTIVES[config.objective].weighted if config.objective in OBJECTIVES else False) and getattr(config, "proximal", 0) > 0
        if weighted and objective_scale:
            objective_scale = objective_scale * WEIGHTED_SCALE_FACTOR
        solver = cls(problem, objective_pattern=objective_pattern, options=local_settings(problem, objective_pattern),
                     objective_scale=objective_scale, column_scale=column_scaling(problem, objective_pattern),
                     polish=POLISH and problem.n <= POLISH_MAX_N)
        if weighted:
            solver.center_columns = balance_columns(problem)
        return solver

    @classmethod
    def check_config(cls, config: Any) -> None:
        """Ipopt's options mean nothing to Clarabel: refuse them rather than ignore them."""
        if config.ipopt_options:
            raise ConfigError.for_setting("ipopt_options", config.ipopt_options, "Ipopt options need local_solver 'ipopt' (--local-solver ipopt); it is 'clarabel'")
        if str(config.ipopt_profile) != "default":
            raise ConfigError.for_setting("ipopt_profile", config.ipopt_profile, "an Ipopt profile needs local_solver 'ipopt' (it is 'clarabel')")
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
        form = conic_form(p, lb, ub, cl, cu, cones=self._cones, drop_implied=self._drop_implied)
        if self._solver is not None and form.signature == self._form.signature:
            self._solver.update(b=form.b)
        else:
            self._solver = None
        self._form = form
        self._working_form = None
        self.bounds = new

    def _run(self, pvals: np.ndarray, q: np.ndarray, center: np.ndarray | None, b: np.ndarray | None):
        """One Clarabel solve (its data built or updated): (the time it started, its solution, x)."""
        import clarabel

        if center is not None:  # Clarabel solves for x − x_c: q + P x_c, b − A x_c
            q = q + self._p_times(pvals, center)
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
            self._solver = clarabel.DefaultSolver(P, q, A, f.b if b is None else b, f.cones(), self._settings)
            self.builds += 1
        elif pvals is self._solver_p:
            if b is None:
                self._solver.update(q=q)  # a round's later solves: P is the same, only q changes
            else:
                self._solver.update(q=q, b=b)
            self.q_only_updates += 1
        elif b is None:
            self._solver.update(P=sent, q=q)
        else:
            self._solver.update(P=sent, q=q, b=b)
        self._solver_p = pvals
        t_solve = time.perf_counter()
        sol = self._solver.solve()
        x = np.asarray(sol.x, dtype=float)
        if inv is not None:
            x = x * inv
        if center is not None:
            x = x + center
        return t_solve, sol, x

    def _center(self, pvals: np.ndarray, q: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The point x_c Clarabel's variables are measured from, and b − A x_c (None, None: from 0).

        ``center_columns`` (the balance variables y of a zone that keeps them) sit at the minimiser −q_j/P_jj of their
        own diagonal term; every other entry at 0. With a heavy shedding penalty ω(y + d)² the objective's value at
        0 is ≈ −ω‖d‖², so large (1e11 on case13659pegase's zones) that Clarabel's relative gap of 1e-10 left an
        absolute gap of tens of $/h and the solution 0.1–0.4 p.u. off; from x_c the value is the gap to a
        point near the optimum. A function of (P, q) only: the same bits on every host and after a resume."""
        cols = self.center_columns
        if cols is None or not len(cols):
            return None, None
        diag = pvals[self._pdiag[cols]]
        center = np.zeros(self.problem.n)
        ok = diag > 0
        center[cols[ok]] = -q[cols[ok]] / diag[ok]
        return center, self._form.b - self._form.A @ center

    def _p_times(self, pvals: np.ndarray, x: np.ndarray) -> np.ndarray:
        """P x for P's values ``pvals`` (P's upper triangle is stored: P x = U x + Uᵀ x − diag(U) x)."""
        n = self.problem.n
        U = sp.csc_matrix((pvals, self._p_indices, self._p_indptr), shape=(n, n))
        return U @ x + U.T @ x - pvals[self._pdiag] * x

    @property
    def working_form(self) -> ConicForm:
        """The conic form with every finite bound a block, implied ones included: the working sets' (the polish, the
        active set's own solves). A redundant bound costs them nothing until it is active, and where it is (the cone
        and an angle row tight together) it is a linear block beside the cone."""
        if not self._drop_implied:
            return self._form
        if self._working_form is None:
            self._working_form = conic_form(self.problem, *self.bounds, cones=self._cones, drop_implied=False)
        return self._working_form

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
        accepted for the interface and not used (no warm start). Never raises on a failed solve.

        A failed solve is tried again by twin solvers (built on first use) in the order of :data:`RETRIES`: without
        the column scaling (``unscaled_retries``: on case13659pegase's cost zones that turns a stall into
        AlmostSolved), then without it and with iterative refinement (``refined_retries``: the same zones after a
        large ρ step, where the first retry stalls too). Each is a function of the same (P, q, A, b): the same bits
        on every host and after a resume."""
        res = self._solve(objective)
        if res.success or not self._retries_enabled:
            return res
        failed = [res.message]
        for i, (label, scaled, options, counter) in enumerate(RETRIES):
            if self.column_scale is None and not scaled and not options:
                continue  # the solve above was this one
            twin = self._retries[i]
            if twin is None:
                twin = ClarabelSolver(self.problem, self._default_objective, options={**self.options, **options},
                                      objective_scale=self.objective_scale,
                                      column_scale=self.column_scale if scaled else None, polish=False,
                                      drop_implied=self._drop_implied)
                twin.center_columns = self.center_columns
                twin._retries_enabled = False  # a twin does not retry itself
                self._retries[i] = twin
            twin.set_bounds(*self.bounds)
            setattr(self, counter, getattr(self, counter) + 1)
            again = twin._solve(objective)
            if again.success:
                again.wall_s += res.wall_s
                again.message += f" ({label}, after " + ", ".join(failed) + ")"
                return again
            failed.append(again.message)
            res.wall_s += again.wall_s
        return res

    def _solve(self, objective: QuadraticObjective | None) -> SolveResult:
        obj = objective if objective is not None else self._default_objective
        t = time.perf_counter()
        pvals = self._hessian_values(obj)
        q = np.asarray(obj.c, dtype=float)
        if self.objective_scale != 1.0:
            q = q * self.objective_scale
        q_polish = q  # before the column scaling: the polish works on x itself
        center, b = self._center(pvals, q)
        t_solve, sol, x = self._run(pvals, q, center, b)
        if center is not None and OUTCOMES.get(str(sol.status)) not in ("solved", "solved_inaccurate"):
            # measured from x_c Clarabel sometimes stalls (InsufficientProgress) where from 0 it does not: once more from 0
            self.uncentered_retries += 1
            t_solve, sol, x = self._run(pvals, q, None, self._form.b)
        wall = time.perf_counter() - t
        name = str(sol.status)
        message = name
        outcome = OUTCOMES.get(name, "failed")
        if name in STALLS and np.all(np.isfinite(x)):
            violation = self.problem.max_violation(x)
            if violation <= STALL_ACCEPT_VIOLATION:  # Clarabel stopped at a point it could not improve, feasible
                self.accepted_stalls += 1
                outcome, message = "solved_inaccurate", f"{name} at a point feasible to {violation:.1e} (accepted)"
        if self.polish and np.all(np.isfinite(x)):
            from ._active_set_kernel import CERTIFIED

            status, x_polished, _, _, _ = self.working_sets.solve(self.working_form, pvals, q_polish, x, POLISH_MAX_ROWS)
            if status == CERTIFIED:
                self.polished += 1
                x, message = x_polished, name if name == "Solved" else f"Solved (polished from Clarabel's {name})"
                name, outcome = "Solved", "solved"
            else:
                self.polish_failures += 1
            wall = time.perf_counter() - t
        empty = np.zeros(0)
        return SolveResult(
            x=x,
            objective=float(obj.value(x)) if np.all(np.isfinite(x)) else float("nan"),
            status=STATUS_CODES.index(name) if name in STATUS_CODES else -1,
            message=message,
            iterations=int(sol.iterations),
            wall_s=wall,
            callback_s=t_solve - t,  # powerdp's data update before the solve
            mult_g=empty,
            mult_x_lower=empty,
            mult_x_upper=empty,
            status_name=name,
            outcome=outcome,
            solver=self.label,
        )
