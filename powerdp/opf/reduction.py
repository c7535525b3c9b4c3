"""Eliminate variables that equality constraints define, keeping the original coordinates.

The paper's algorithm works on z = (W, flows, pg, qg): branch flows are
variables tied to W by the linear Ohm's-law equalities (docs/formulation.md). Ipopt does
not need them: every flow is a linear function of W, so z = P r with r the
remaining variables and P = [I; T]. :func:`eliminate` turns a compiled problem
into one over r (about 3× smaller for zone models, docs/formulation.md) and keeps P, so an
algorithm can state its objective in z (gradients, noise, proximal and ADMM
terms on every component of z, as in the paper) and solve in r:
:meth:`Reduction.pull` maps ``c·z + ½ Σ d_k z_k²`` to r-space, and
:meth:`Reduction.lift` maps a solution back to z. The feasible set is the same:
bounds of eliminated variables become linear constraints on r.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg  # noqa: F401  (sp.linalg.splu)

from ..errors import ModelError
from .compiled import INF, CompiledProblem, LinearMap, QuadraticObjective

__all__ = ["Reduction", "eliminate", "sparse_elimination", "kkt_fill", "expand_quadratic", "DEFINING_ROWS", "FILL_RATIO",
           "SMALL_ZONE_N"]


def expand_quadratic(
    rows: np.ndarray, qi: np.ndarray, qj: np.ndarray, qv: np.ndarray, P: sp.csr_matrix
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Substitute z = P r into Σ_t v_t z_{i_t} z_{j_t} (grouped by ``rows``).

    Returns merged triplets (row, a, b, value) with a ≥ b meaning value·r_a·r_b.
    """
    P = P.tocsr()
    if len(qv) == 0:
        e = np.zeros(0, np.int64)
        return e, e, e, np.zeros(0)
    start_i, start_j = P.indptr[qi], P.indptr[qj]
    li = P.indptr[qi + 1] - start_i
    lj = P.indptr[qj + 1] - start_j
    counts = li * lj
    t = np.repeat(np.arange(len(qv)), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    q = np.arange(counts.sum()) - first
    a_pos = start_i[t] + q // lj[t]
    b_pos = start_j[t] + q % lj[t]
    a, b = P.indices[a_pos].astype(np.int64), P.indices[b_pos].astype(np.int64)
    val = qv[t] * P.data[a_pos] * P.data[b_pos]
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    n = P.shape[1]
    key = (rows[t].astype(np.int64) * n + hi) * n + lo
    ukey, inv = np.unique(key, return_inverse=True)
    merged = np.bincount(inv, val, minlength=len(ukey))
    keep = merged != 0.0
    ukey, merged = ukey[keep], merged[keep]
    lo_ = ukey % n
    hi_ = (ukey // n) % n
    row_ = ukey // (n * n)
    return row_, hi_, lo_, merged


@dataclass
class Reduction:
    """A problem in z coordinates solved as a smaller problem in r, with z = P r."""

    full: CompiledProblem
    reduced: CompiledProblem
    P: sp.csr_matrix
    kept: np.ndarray  # z-columns that are r's columns, in r order

    def _hessian_structure(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Structure of Pᵀ D P (lower triangle), built on first use and kept.

        Entry (hi, lo) gets Σ_k d_k · coef_k over z-rows k: returns (d_rows,
        d_coef, h_pos, h_hi, h_lo).
        """
        cached = self.__dict__.get("_hess")
        if cached is None:
            nz, nr = self.P.shape
            zrow = np.arange(nz, dtype=np.int64)
            d_rows, hi, lo, d_coef = expand_quadratic(zrow, zrow, zrow, np.ones(nz), self.P)
            keys, pos = np.unique(hi * nr + lo, return_inverse=True)
            cached = (d_rows, d_coef, pos, keys // nr, keys % nr)
            self.__dict__["_hess"] = cached
        return cached

    def _transpose(self) -> sp.csr_matrix:
        """Pᵀ, built on first use and kept."""
        pt = self.__dict__.get("_pt")
        if pt is None:
            pt = self.__dict__["_pt"] = self.P.T.tocsr()
        return pt

    def _diag_values(self, diag: np.ndarray) -> np.ndarray:
        """The triplet values of ½ Σ_k d_k (P_k r)² = ½ rᵀ(PᵀDP) r (v r_a r_b with v = H_ab for a > b, ½ H_aa
        for a = b). The last diagonal's values are kept (read-only): an ADMM round solves with one diagonal."""
        last = self.__dict__.get("_last_diag")
        if last is not None and last[0].shape == diag.shape and np.array_equal(last[0], diag):
            return last[1]
        d_rows, d_coef, h_pos, qi, _ = self._hessian_structure()
        qv = 0.5 * np.bincount(h_pos, diag[d_rows] * d_coef, minlength=len(qi))
        qv.flags.writeable = False
        self.__dict__["_last_diag"] = (np.array(diag, dtype=float), qv)
        return qv

    @property
    def pattern(self) -> QuadraticObjective:
        """An r-space objective whose Hessian pattern covers every pulled diagonal objective."""
        n = self.reduced.n
        _, _, _, h_hi, h_lo = self._hessian_structure()
        return QuadraticObjective(c=np.zeros(n), qi=h_hi, qj=h_lo, qv=np.zeros(len(h_hi)))

    def lift(self, r: np.ndarray) -> np.ndarray:
        """z = P r."""
        return self.P @ r

    def restrict(self, z: np.ndarray) -> np.ndarray:
        """The r part of a z point (its kept components)."""
        return z[self.kept]

    def pull_objective(self, obj: QuadraticObjective) -> QuadraticObjective:
        """Any z-space objective (without ``diag``) in r coordinates: its value at z = P r."""
        return _substitute(obj, self.P)

    def pull(self, c: np.ndarray, diag: np.ndarray | None, const: float = 0.0, base: QuadraticObjective | None = None) -> QuadraticObjective:
        """The r-space form of ``const + c·z + ½ Σ_k diag_k z_k²`` (+ ``base``, already in r-space)."""
        c_r = self._transpose() @ c
        d_rows, d_coef, h_pos, qi, qj = self._hessian_structure()
        qv = self._diag_values(diag) if diag is not None else np.zeros(len(qi))
        if base is not None:
            qi = np.concatenate([qi, base.qi])
            qj = np.concatenate([qj, base.qj])
            qv = np.concatenate([qv, base.qv])
            c_r = c_r + base.c
            const = const + base.const
        return QuadraticObjective(c=c_r, const=const, qi=qi, qj=qj, qv=qv)


DEFINING_ROWS = {"ohm": ("pf", "qf", "pt", "qt"), "balance_def": ("yp", "yq")}


def eliminate(problem: CompiledProblem, components: Sequence[str] = ("ohm", "balance_def")) -> Reduction:
    """Eliminate the variables defined by the equality constraints of ``components``, in order.

    ``ohm`` rows define the branch flows from W, ``balance_def`` rows the
    balance variables y from flows, generation and W (docs/formulation.md).
    Each stage substitutes its variables into the problem left by the previous
    one, so z = P₁ P₂ r stays sparse; components the problem lacks are skipped.
    """
    for c in components:
        if c not in DEFINING_ROWS:
            raise ModelError(f"unknown defining constraints {c!r}; known: {', '.join(DEFINING_ROWS)}")
    red = _identity(problem)
    for c in components:
        step = _eliminate_one(red.reduced, c)
        if step.reduced is red.reduced:
            continue
        red = Reduction(full=problem, reduced=step.reduced, P=(red.P @ step.P).tocsr(), kept=red.kept[step.kept])
    return red


#: eliminating the balance variables too is kept unless its KKT factor holds more than FILL_RATIO times the
#: nonzeros of the one with only the flows eliminated (a bus with many branches makes its balance row, and so
#: the Hessian of (y + d)² in r, a dense block: 464 k factor nonzeros on one case13659pegase zone)
FILL_RATIO = 1.5
#: ... and unless the zone then still has more than SMALL_ZONE_N variables. Small zones pay for the KKT system's
#: size and for the dense P⁻¹ of the working sets (powerdp.opf.working_sets: n³), so fewer variables win; in a
#: large zone the factorization's flops set the cost, and eliminating the balance variables multiplies them by
#: 1.6–2.9 (Σ of squared factor column counts) on every case13659pegase zone. With only the flows eliminated
#: Clarabel's iterations took 7–26 % less time on 11 of the 12 zones that the fill ratio alone gave both
#: eliminations (6 % more on the twelfth), their solves 11 % less in all (benchmarks/zone_forms.py,
#: docs/results/performance.md)
SMALL_ZONE_N = 1000


def kkt_fill(red: Reduction) -> int:
    """Nonzeros of a sparse LDLᵀ factor of the KKT pattern [[H, Aᵀ], [A, −I]] of ``red``'s problem.

    H is every Hessian an ADMM local problem can have (the pulled diagonal ``PᵀDP``, the objective's terms,
    the diagonal), A the constraint rows (linear and quadratic parts). The factor is SuperLU's with a
    minimum-degree ordering on a diagonally dominant matrix of that pattern (no pivoting: the symbolic
    fill of a symmetric factorization, as an interior-point solver's LDLᵀ sees it)."""
    prob = red.reduced
    n, m = prob.n, prob.m
    _, _, _, h_hi, h_lo = red._hessian_structure()
    obj = prob.objective
    hr = np.concatenate([h_hi, obj.qi])
    hc = np.concatenate([h_lo, obj.qj])
    A = prob.A.tocoo()
    ar = np.concatenate([A.row, prob.qrow, prob.qrow]).astype(np.int64)
    ac = np.concatenate([A.col, prob.qi, prob.qj]).astype(np.int64)
    rows = np.concatenate([hr, hc, ar + n, ac])
    cols = np.concatenate([hc, hr, ac, ar + n])
    off = rows != cols
    size = n + m
    K = sp.csc_matrix((np.full(int(off.sum()), -1.0), (rows[off], cols[off])), shape=(size, size))
    K.sum_duplicates()
    K.data[:] = -1.0
    degree = np.asarray((K != 0).sum(axis=1)).ravel()
    K = (K + sp.diags(degree + 1.0)).tocsc()
    lu = sp.linalg.splu(K, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    return int(lu.L.nnz)


def sparse_elimination(problem: CompiledProblem, ratio: float = FILL_RATIO, small_n: int = SMALL_ZONE_N) -> Reduction:
    """:func:`eliminate` of the flows and the balance variables, or of the flows only when eliminating the
    balance variables too would leave more than ``small_n`` variables or make the KKT factor more than
    ``ratio`` times fuller (:func:`kkt_fill`). Decided per zone from its structure alone (never from its loads
    or timings), so every host decides alike."""
    flows = eliminate(problem, ("ohm",))
    step = _eliminate_one(flows.reduced, "balance_def")
    if step.reduced is flows.reduced or step.reduced.n > small_n:
        return flows
    both = Reduction(full=problem, reduced=step.reduced, P=(flows.P @ step.P).tocsr(), kept=flows.kept[step.kept])
    if kkt_fill(both) <= ratio * kkt_fill(flows):
        return both
    return flows


def _eliminate_one(problem: CompiledProblem, component: str) -> Reduction:
    """Eliminate the variables that the rows of one ``component`` define.

    Each such row must be linear, an equality with right-hand side 0, and hold
    exactly one of the defined variables (with a nonzero coefficient); that
    variable is eliminated.
    """
    n = problem.n
    rows = np.array([k for k, key in enumerate(problem.con_keys) if key[0] == component], dtype=np.int64)
    if rows.size == 0:
        return _identity(problem)
    if np.any(problem.cl[rows] != problem.cu[rows]):
        raise ModelError(f"constraints {component!r} are not all equalities")
    if np.any(np.isin(problem.qrow, rows)):
        raise ModelError(f"constraints {component!r} are not linear")
    if np.any(problem.cl[rows] != 0.0):
        raise ModelError(f"constraints {component!r} have a nonzero right-hand side")
    defined_names = set(DEFINING_ROWS[component])
    is_defined = np.array([key[0] in defined_names for key in problem.var_keys])
    A = problem.A.tocsr()
    Ae = A[rows]
    F = np.flatnonzero(is_defined)
    K = np.flatnonzero(~is_defined)
    D = Ae[:, F].tocsr()
    if D.shape[0] != D.shape[1] or D.nnz != D.shape[0]:
        raise ModelError(f"constraints {component!r} do not define their variables one by one")
    # D is a scaled permutation: row k defines column perm[k]
    Dc = D.tocoo()
    T_rows = np.empty(len(F), dtype=np.int64)
    T_rows[Dc.col] = Dc.row  # for each defined column, its defining row
    scale = np.empty(len(F))
    scale[Dc.col] = Dc.data
    # defined = -(1/scale) * Ae[row, K] r
    T = sp.diags(-1.0 / scale) @ Ae[T_rows][:, K]
    nz, nr = n, len(K)
    # P: identity on kept columns, T on defined ones
    P = sp.vstack([sp.identity(nr, format="csr"), T.tocsr()]).tocsr()
    order = np.concatenate([K, F])  # P's rows are in this z order; permute back
    perm = np.empty(nz, dtype=np.int64)
    perm[order] = np.arange(nz)
    P = P[perm].tocsr()

    keep_rows = np.setdiff1d(np.arange(problem.m), rows)
    # linear part: A z = A P r
    A_r = (A[keep_rows] @ P).tocsr()
    A_r.eliminate_zeros()
    row_map = -np.ones(problem.m, dtype=np.int64)
    row_map[keep_rows] = np.arange(len(keep_rows))
    qrow, qi, qj, qv = expand_quadratic(row_map[problem.qrow], problem.qi, problem.qj, problem.qv, P)
    cl, cu = problem.cl[keep_rows], problem.cu[keep_rows]
    con_keys = [problem.con_keys[k] for k in keep_rows]
    # bounds of eliminated variables become linear rows on r
    finite = np.flatnonzero((problem.lb[F] > -INF) | (problem.ub[F] < INF))
    if finite.size:
        Tb = P[F[finite]]
        A_r = sp.vstack([A_r, Tb]).tocsr()
        cl = np.concatenate([cl, problem.lb[F[finite]]])
        cu = np.concatenate([cu, problem.ub[F[finite]]])
        con_keys += [("bounds of " + problem.var_keys[F[k]][0], problem.var_keys[F[k]][1]) for k in finite]
    objective = _substitute(problem.objective, P)
    expressions = {
        name: LinearMap(keys=lm.keys, M=(lm.M @ P).tocsr(), const=lm.const) for name, lm in problem.expressions.items()
    }
    reduced = CompiledProblem(
        name=problem.name + f" ({component} eliminated)",
        var_keys=[problem.var_keys[k] for k in K],
        lb=problem.lb[K],
        ub=problem.ub[K],
        x0=problem.x0[K],
        con_keys=con_keys,
        cl=cl,
        cu=cu,
        A=A_r,
        qrow=qrow,
        qi=qi,
        qj=qj,
        qv=qv,
        objective=objective,
        expressions=expressions,
        meta=dict(problem.meta),
    )
    return Reduction(full=problem, reduced=reduced, P=P, kept=K)


def _substitute(obj: QuadraticObjective, P: sp.csr_matrix) -> QuadraticObjective:
    """The objective of z = P r as a function of r."""
    if obj.diag is not None:
        raise ModelError("an objective with a diagonal term cannot be substituted; give it as triplets")
    _, o_i, o_j, o_v = expand_quadratic(np.zeros(len(obj.qv), np.int64), obj.qi, obj.qj, obj.qv, P)
    return QuadraticObjective(c=P.T @ obj.c, const=obj.const, qi=o_i, qj=o_j, qv=o_v)


def _identity(problem: CompiledProblem) -> Reduction:
    n = problem.n
    return Reduction(full=problem, reduced=problem, P=sp.identity(n, format="csr"), kept=np.arange(n))
