"""The conic form of a compiled problem: its quadratic rows read as second-order cones.

Every model powerdp builds is a convex QCQP whose quadratic rows are second-order cones
(docs/formulation.md): the W-space cone wr² + wi² ≤ w_f·w_t (a rotated SOC) and the thermal
limits p² + q² ≤ s² (an SOC, also when the flows are linear expressions in W). Clarabel solves

    min ½ xᵀPx + qᵀx   s.t.   A x + s = b,  s ∈ K = {0}ᵃ × ℝ₊ᵇ × SOC × … × SOC

and :func:`conic_form` writes a :class:`~powerdp.opf.compiled.CompiledProblem` that way without
knowing which model it came from:

* linear rows: equalities in the zero cone, finite sides of ranges and one-sided rows in the
  nonnegative cone; variable bounds likewise (bounds at or beyond ±1e19 are no bounds), except the
  ones the other rows imply (:mod:`powerdp.opf.implied_bounds`: most voltage-product bounds);
* each quadratic row xᵀQx + aᵀx ≤ u (a ≥-row is negated first) is read through the eigen-
  decomposition of its small dense Q (over the row's own variables):
  Q ⪰ 0, a = 0, u ≥ 0 → ‖F x‖ ≤ √u with Q = FᵀF;
  Q ⪰ 0 otherwise     → ‖(2F x, t − 1)‖ ≤ t + 1 with t = u − aᵀx (i.e. ‖Fx‖² ≤ t);
  one negative eigenvalue λ₋ (eigenvector v₋), a = 0, u = 0, and v₋ᵀx ≥ 0 implied by the
  bounds (v₋'s entries of one sign on variables with lb ≥ 0) → ‖F₊ x‖ ≤ √|λ₋| v₋ᵀx, exactly
  the set xᵀQx ≤ 0 on that half-space. For the W cone this is the rotated SOC
  ‖(2wr, 2wi, w_f − w_t)‖ ≤ w_f + w_t (halved). Anything else is a ModelError naming the row.

The form is the data of :class:`~powerdp.opf.conic.ClarabelSolver` and of the working sets of
:mod:`powerdp.opf.working_sets` (the active-set solver, Clarabel's polish).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError
from .compiled import CompiledProblem
from .implied_bounds import implied_bounds

__all__ = ["ConicForm", "conic_form", "second_order_cones", "FINITE", "EIG_TOL"]

#: |bound| >= FINITE is no bound. Ipopt reads 1e19 so (compiled.INF = 1e20); for the conic form 1e8 p.u. (1e10 MW at
#: 100 MVA) is already none: pandapower writes ±1e9 MW for "no limit" (1e9 p.u. at sn_mva = 1), and with such rows
#: Clarabel stopped in its first iteration (InsufficientProgress, example_multivoltage's projection), which an
#: active-set zone falls back to
FINITE = 1e8
EIG_TOL = 1e-9  # eigenvalues below EIG_TOL·max|λ| of their row count as zero


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
    drop_implied: bool = True,
) -> ConicForm:
    """The conic form of ``prob`` with the given bounds (default the problem's own); without the bounds the other
    rows imply when ``drop_implied``."""
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
    if drop_implied:  # implied bounds cost an interior-point method rows and change no solution
        implied_lb, implied_ub = implied_bounds(prob, lb, ub, cl, cu)
        vup &= ~implied_ub
        vlo &= ~implied_lb
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
