"""Variable bounds that a problem's other constraints imply, so its conic form can leave them out.

PowerModels' SOC formulation bounds every bus pair's (wr, wi) (``ref_calc_voltage_product_bounds``,
:func:`powerdp.grid.network.voltage_product_bounds`), and most of those bounds follow from the pair's other
constraints: the W cone ``wr² + wi² ≤ w_f·w_t`` with ``w ≤ vmax²`` gives ``|wr|, |wi| ≤ vmax_f·vmax_t``,
and an angle row ``wi ≤ tan(θmax)·wr`` (θmax in (0, π/2)) with the cone gives ``wi ≤ vmax_f·vmax_t·sin θmax``,
which is the bound itself. Ipopt takes bounds for free; an interior-point conic solver pays a row each (on
case13659pegase's zones 3 of a pair's 4, a fifth of the rows, docs/results/performance.md).

:func:`implied_bounds` finds them from the problem's data alone, for any model with rows of this shape:

* a *hyperbolic row* ``Σ_k α_k x_k² − β·x_c·x_d ≤ 0`` (α_k, β > 0, no linear part, x_c, x_d ≥ 0 by their
  bounds and bounded above) puts ``y = (√α_k x_k)_k`` in the disk of radius ρ = √(β·ub_c·ub_d), so
  ``|x_k| ≤ ρ/√α_k``;
* a *homogeneous two-variable row* ``g_i x_i + g_k x_k ≤ 0`` over two variables of one hyperbolic row cuts
  that disk by a half-plane through its centre; over the intersection ``x_k ≤ ρ·|h_i|/‖h‖/√α_k`` when
  ``g_k > 0`` and ``x_k ≥ −ρ·|h_i|/‖h‖/√α_k`` when ``g_k < 0`` (``h = (g_i/√α_i, g_k/√α_k)``, the row in y);
  with several such rows the smallest bound holds.

A bound at least that loose (to :data:`IMPLIED_TOL`, the rounding of the data) is implied. Leaving it out
changes neither the feasible set nor the minimiser, only how an interior-point method walks to it.
"""

from __future__ import annotations

import numpy as np

from .compiled import CompiledProblem

__all__ = ["implied_bounds", "IMPLIED_TOL"]

#: a bound is implied when it is looser than the implied one or tighter by at most this fraction of it
#: (the rounding of vmax_f·vmax_t against √(vmax_f²·vmax_t²), of sin against tan/√(1 + tan²))
IMPLIED_TOL = 1e-12
_FINITE = 1e19


def implied_bounds(
    prob: CompiledProblem, lb: np.ndarray, ub: np.ndarray, cl: np.ndarray, cu: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Masks (lower, upper) of the finite variable bounds of ``prob`` that its rows imply (module doc), for
    the bounds ``lb``, ``ub``, ``cl``, ``cu``. Deterministic in the data; all-False when nothing is implied."""
    n = prob.n
    none = (np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))
    if len(prob.qrow) == 0:
        return none
    radius, alpha, row_of = _hyperbolic_rows(prob, lb, ub, cl, cu)
    if not np.any(np.isfinite(radius)):
        return none
    # |x_k| ≤ ρ/√α_k from the disk alone (a variable of several hyperbolic rows keeps the smallest)
    upper = radius / np.sqrt(np.where(np.isfinite(radius), alpha, 1.0))
    lower = upper.copy()
    # the half-planes: linear rows with two entries, both variables in one hyperbolic row, right-hand side 0
    # (a quadratic row's linear part is no half-plane)
    A = prob.A.tocsr()
    linear = np.ones(prob.m, dtype=bool)
    linear[prob.qrow] = False
    two = np.flatnonzero((np.diff(A.indptr) == 2) & linear)
    if two.size:
        i, k = A.indices[A.indptr[two]], A.indices[A.indptr[two] + 1]
        gi, gk = A.data[A.indptr[two]], A.data[A.indptr[two] + 1]
        same = (row_of[i] >= 0) & (row_of[i] == row_of[k])
        for side, sign in ((cu, 1.0), (cl, -1.0)):  # g·x ≤ 0 from a ≤-row as it is, from a ≥-row negated
            homogeneous = same & (side[two] == 0.0) & np.isfinite(radius[i])
            sel = np.flatnonzero(homogeneous)
            if not sel.size:
                continue
            a, b = i[sel], k[sel]
            ha, hb = sign * gi[sel] / np.sqrt(alpha[a]), sign * gk[sel] / np.sqrt(alpha[b])
            norm = np.hypot(ha, hb)
            rho = radius[a]
            for var, h_own, h_other in ((a, ha, hb), (b, hb, ha)):
                bound = rho * np.abs(h_other) / norm / np.sqrt(alpha[var])
                up, down = h_own > 0, h_own < 0
                np.minimum.at(upper, var[up], bound[up])
                np.minimum.at(lower, var[down], bound[down])
    slack = 1.0 - IMPLIED_TOL
    implied_ub = (ub < _FINITE) & np.isfinite(upper) & (ub >= upper * slack)
    implied_lb = (lb > -_FINITE) & np.isfinite(lower) & (-lb >= lower * slack)
    return implied_lb, implied_ub


def _hyperbolic_rows(prob: CompiledProblem, lb, ub, cl, cu) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per variable: ρ of the hyperbolic row it is squared in (inf when none; the smallest ρ/√α when several),
    its α there, and that row (−1 when none)."""
    n, m = prob.n, prob.m
    qrow, qi, qj, qv = prob.qrow, prob.qi, prob.qj, prob.qv
    linear_part = np.diff(prob.A.tocsr().indptr) > 0
    square, cross = qi == qj, qi != qj
    n_cross = np.bincount(qrow[cross], minlength=m)
    ok_row = (cu == 0.0) & (cl <= -_FINITE) & ~linear_part & (n_cross == 1)
    ok_row &= np.bincount(qrow[square & (qv <= 0)], minlength=m) == 0  # every square term positive
    ok_row &= np.bincount(qrow[square], minlength=m) > 0
    # the one cross term: −β x_c x_d with β > 0, x_c, x_d ≥ 0 and bounded above, neither also squared
    ci = np.flatnonzero(cross)
    r = qrow[ci]
    c, d, beta = qi[ci], qj[ci], -qv[ci]
    good = (beta > 0) & (lb[c] >= 0) & (lb[d] >= 0) & (ub[c] >= lb[c]) & (ub[d] >= lb[d]) & (ub[c] < _FINITE) & (ub[d] < _FINITE)
    rho2 = np.full(m, np.nan)
    rho2[r[good]] = beta[good] * ub[c[good]] * ub[d[good]]
    sq = np.flatnonzero(square)
    # a variable both squared and in the cross term of one row disqualifies the row
    cross_keys = np.concatenate([r * n + c, r * n + d])
    in_cross = np.isin(qrow[sq] * n + qi[sq], cross_keys)
    ok_row &= np.bincount(qrow[sq[in_cross]], minlength=m) == 0
    ok_row &= np.isfinite(rho2)
    radius = np.full(n, np.inf)
    alpha = np.ones(n)
    row_of = np.full(n, -1, dtype=np.int64)
    use = sq[ok_row[qrow[sq]]]
    if not use.size:
        return radius, alpha, row_of
    var, a, rr = qi[use], qv[use], qrow[use]
    # a variable squared twice in one row: its α is the sum (Pyomo writes each square once; summed to be safe)
    key = rr * n + var
    ukey, inv = np.unique(key, return_inverse=True)
    a_sum = np.bincount(inv, weights=a)
    uvar, urow = ukey % n, ukey // n
    rho = np.sqrt(rho2[urow])
    per = rho / np.sqrt(a_sum)
    # the tightest row per variable
    order = np.lexsort((per, uvar))
    first = np.ones(len(order), dtype=bool)
    first[1:] = uvar[order][1:] != uvar[order][:-1]
    pick = order[first]
    radius[uvar[pick]] = rho[pick]
    alpha[uvar[pick]] = a_sum[pick]
    row_of[uvar[pick]] = urow[pick]
    return radius, alpha, row_of
