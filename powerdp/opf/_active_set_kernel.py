"""Compiled kernels of :mod:`powerdp.opf.active_set` (numba): the working-set loop and its small dense cone QP.

The zone problem in conic form (``powerdp.opf.conic``) is

    min ½ xᵀPx + qᵀx   s.t.   s = b − A x ∈ ℝ₊^l × SOC × … × SOC

with P positive definite. For a working set G of blocks (rows of the nonnegative cone, whole cones) the
problem with only G's constraints has the dual

    min ½ zᵀMz + hᵀz  over z ∈ K_G,   M = G P⁻¹ Gᵀ,  h = b_G + G P⁻¹ q,   x = −P⁻¹(q + Gᵀz),

whose KKT conditions are s_G = M z + h ∈ K_G, z ∈ K_G, zᵀs_G = 0 (the cones are self-dual). Newton's method on
the active blocks (:mod:`powerdp.opf._active_set_newton`) solves it first; when that gives up :func:`cone_qp`
solves it with a primal-dual interior-point method (Nesterov–Todd scaling, Mehrotra's predictor-corrector,
LAPACK's dense Cholesky: G has a few dozen rows). The relaxed problem's minimiser is the full problem's as soon as it
satisfies every constraint left out of G (a relaxation's optimum that is feasible is optimal):
:func:`working_set_solve` adds the violated blocks and repeats until none is left.

numba's cache does not follow calls into another module: after editing ``_active_set_newton.py`` delete this
module's cached ``working_set_solve`` (``_active_set_kernel.working_set_solve-*`` under
:func:`powerdp.files.kernel_cache.kernel_cache_dir`, in the folder mirroring this file's path; touching this file was
not enough here) and it is rebuilt with the new code (an installed release brings both files and no cache).

Everything here is a deterministic function of its inputs (no fastmath; LAPACK runs in the hosts' BLAS pools,
which every backend holds to one thread), so a run gives the same bits on every host and after a resume.
"""

from __future__ import annotations

import numpy as np

from ..files.kernel_cache import cached_njit
from ._active_set_newton import gap as _gap
from ._active_set_newton import newton_qp

# statuses of working_set_solve
CERTIFIED = 0
NOT_CONVERGED = 1  # the dense cone QP did not converge
TOO_MANY_PASSES = 2  # violated blocks were still being added after the last pass

REFINE = 3  # at most this many iterative-refinement steps of each Newton direction …
REFINE_TOL = 1e-13  # … stopping once both equations hold to this (relative to their right-hand sides)


@cached_njit(error_model="numpy")
def _max_step(x, dx, boff, bdim):
    """The largest α ≤ 1e30 with x + α dx in the cones (x inside)."""
    alpha = 1e30
    for b in range(bdim.size):
        off, d = boff[b], bdim[b]
        if d == 1:
            if dx[off] < 0.0:
                alpha = min(alpha, -x[off] / dx[off])
            continue
        # (x₀ + α d₀)² − ‖x̄ + α d̄‖² ≥ 0 with x₀ + α d₀ ≥ 0
        a = dx[off] * dx[off]
        bb = x[off] * dx[off]
        nx = 0.0
        for k in range(off + 1, off + d):
            a -= dx[k] * dx[k]
            bb -= x[k] * dx[k]
            nx += x[k] * x[k]
        nx = np.sqrt(nx)
        bb *= 2.0
        c = max((x[off] - nx) * (x[off] + nx), 0.0)
        disc = bb * bb - 4.0 * a * c
        if a < 0.0 or (bb < 0.0 and disc >= 0.0):
            root = 2.0 * c / (-bb + np.sqrt(max(disc, 0.0)))
            alpha = min(alpha, root)
        if dx[off] < 0.0:
            alpha = min(alpha, -x[off] / dx[off])
    return alpha


@cached_njit(error_model="numpy")
def _jordan(x, y, boff, bdim, out):
    """out = x ∘ y blockwise (x₀y₀ + x̄ᵀȳ, x₀ȳ + y₀x̄ for a cone, xy for a row)."""
    for b in range(bdim.size):
        off, d = boff[b], bdim[b]
        acc = 0.0
        for k in range(off, off + d):
            acc += x[k] * y[k]
        out[off] = acc
        for k in range(off + 1, off + d):
            out[k] = x[off] * y[k] + y[off] * x[k]


@cached_njit(error_model="numpy")
def _jordan_solve(lam, v, boff, bdim, out):
    """out = u with lam ∘ u = v (lam inside the cones)."""
    for b in range(bdim.size):
        off, d = boff[b], bdim[b]
        if d == 1:
            out[off] = v[off] / lam[off]
            continue
        l0 = lam[off]
        det = l0 * l0
        dot = 0.0
        for k in range(off + 1, off + d):
            det -= lam[k] * lam[k]
            dot += lam[k] * v[k]
        u0 = (l0 * v[off] - dot) / det
        out[off] = u0
        for k in range(off + 1, off + d):
            out[k] = (v[k] - lam[k] * u0) / l0


@cached_njit(error_model="numpy")
def _scaling(z, s, boff, bdim, woff, W, Winv, lam):
    """Nesterov–Todd scaling of every block: W z = W⁻¹ s = lam (W symmetric, stored block by block)."""
    for b in range(bdim.size):
        off, d, wo = boff[b], bdim[b], woff[b]
        if d == 1:
            w = np.sqrt(s[off] / z[off])
            W[wo] = w
            Winv[wo] = 1.0 / w
            lam[off] = np.sqrt(s[off] * z[off])
            continue
        zz = 0.0
        ss = 0.0
        for k in range(off + 1, off + d):
            zz += z[k] * z[k]
            ss += s[k] * s[k]
        zz = np.sqrt(zz)
        ss = np.sqrt(ss)
        zn = np.sqrt((z[off] - zz) * (z[off] + zz))
        sn = np.sqrt((s[off] - ss) * (s[off] + ss))
        beta = np.sqrt(sn / zn)
        sz = 0.0
        for k in range(off, off + d):
            sz += s[k] * z[k]
        cc = np.sqrt((sz / (sn * zn) + 1.0) / 2.0)
        v = np.empty(d)
        v[0] = (s[off] / sn + z[off] / zn) / (2.0 * cc)
        for k in range(1, d):
            v[k] = (s[off + k] / sn - z[off + k] / zn) / (2.0 * cc)
        scale = 1.0 / np.sqrt(2.0 * (v[0] + 1.0))
        v[0] += 1.0
        for k in range(d):
            v[k] *= scale
        for i in range(d):
            for j in range(d):
                jv_i = v[i] if i == 0 else -v[i]
                jv_j = v[j] if j == 0 else -v[j]
                jij = 0.0
                if i == j:
                    jij = 1.0 if i == 0 else -1.0
                W[wo + i * d + j] = beta * (2.0 * v[i] * v[j] - jij)
                Winv[wo + i * d + j] = (2.0 * jv_i * jv_j - jij) / beta
        for i in range(d):
            acc = 0.0
            for j in range(d):
                acc += W[wo + i * d + j] * z[off + j]
            lam[off + i] = acc


@cached_njit(error_model="numpy")
def _apply(Wb, x, boff, bdim, woff, out):
    """out = Wb x for a block-diagonal Wb stored block by block."""
    for b in range(bdim.size):
        off, d, wo = boff[b], bdim[b], woff[b]
        for i in range(d):
            acc = 0.0
            for j in range(d):
                acc += Wb[wo + i * d + j] * x[off + j]
            out[off + i] = acc


@cached_njit(error_model="numpy")
def _chol_solve(L, rhs, out):
    """out = (L Lᵀ)⁻¹ rhs."""
    m = rhs.size
    for i in range(m):
        acc = rhs[i]
        for k in range(i):
            acc -= L[i, k] * out[k]
        out[i] = acc / L[i, i]
    for i in range(m - 1, -1, -1):
        acc = out[i]
        for k in range(i + 1, m):
            acc -= L[k, i] * out[k]
        out[i] = acc / L[i, i]


@cached_njit(error_model="numpy")
def _scaled_solve(L, Winv, Wb, ra, rb, boff, bdim, woff, dz, ds, u, v, tmp):
    """dz, ds with M dz − ds = ra and W dz + W⁻¹ ds = rb, through the scaled system: u = W dz solves
    (I + W⁻¹MW⁻¹) u = rb + W⁻¹ ra (L its Cholesky factor), v = W⁻¹ ds = rb − u."""
    _apply(Winv, ra, boff, bdim, woff, tmp)
    _chol_solve(L, rb + tmp, u)
    _apply(Winv, u, boff, bdim, woff, dz)
    for i in range(u.size):
        v[i] = rb[i] - u[i]
    _apply(Wb, v, boff, bdim, woff, ds)


@cached_njit(error_model="numpy")
def _direction(L, M, Winv, Wb, r, d, boff, bdim, woff, dz, ds, u, v, tmp):
    """The Newton direction: M dz − ds = −r, W dz + W⁻¹ ds = d, solved in the scaled space (I + W⁻¹MW⁻¹ has
    eigenvalues ≥ 1) and refined against these unscaled equations (z and s near the boundary make W and
    W⁻¹ large, and the refinement keeps the residual M z + h − s shrinking as the step says).
    On return u = W dz and v = W⁻¹ ds."""
    ra = -r
    _scaled_solve(L, Winv, Wb, ra, d, boff, bdim, woff, dz, ds, u, v, tmp)
    m = r.size
    cz = np.empty(m)
    cs = np.empty(m)
    cu = np.empty(m)
    cv = np.empty(m)
    wz = np.empty(m)
    sa = 1.0
    sb = 1.0
    for i in range(m):
        sa = max(sa, abs(ra[i]))
        sb = max(sb, abs(d[i]))
    for _ in range(REFINE):
        ea = ra - (M @ dz - ds)
        _apply(Wb, dz, boff, bdim, woff, wz)
        _apply(Winv, ds, boff, bdim, woff, tmp)
        eb = d - wz - tmp
        err = 0.0
        for i in range(m):
            err = max(err, abs(ea[i]) / sa, abs(eb[i]) / sb)
        if err <= REFINE_TOL:
            break
        _scaled_solve(L, Winv, Wb, ea, eb, boff, bdim, woff, cz, cs, cu, cv, tmp)
        dz += cz
        ds += cs
    _apply(Wb, dz, boff, bdim, woff, u)
    _apply(Winv, ds, boff, bdim, woff, v)


@cached_njit(error_model="numpy")
def cone_qp(M, h, boff, bdim, tol, loose_tol, max_iter, z, s):
    """min ½ zᵀMz + hᵀz over z in the blocks' cones (module doc); z, s = Mz + h are written in place.

    Converged: the residual ‖Mz + h − s‖∞ and the gap zᵀs at most ``tol``·max(1, ‖h‖∞); when rounding stops
    the iterations short of that, the best iterate if it meets ``loose_tol``. Returns the iterations taken, or
    −1 when it did not converge."""
    m = h.size
    nb = bdim.size
    woff = np.zeros(nb, dtype=np.int64)
    wsize = 0
    for b in range(nb):
        woff[b] = wsize
        wsize += bdim[b] * bdim[b]
    W = np.zeros(wsize)
    Winv = np.zeros(wsize)
    lam = np.zeros(m)
    r = np.zeros(m)
    dz = np.zeros(m)
    ds = np.zeros(m)
    dza = np.zeros(m)
    dsa = np.zeros(m)
    ua = np.zeros(m)
    va = np.zeros(m)
    tmp = np.zeros(m)
    tmp2 = np.zeros(m)
    dvec = np.zeros(m)
    e = np.zeros(m)
    for b in range(nb):
        e[boff[b]] = 1.0
    hnorm = 1.0
    for i in range(m):
        hnorm = max(hnorm, abs(h[i]))
    # start: z = e, s = M e + h shifted into the cones
    for i in range(m):
        z[i] = e[i]
    s[:] = M @ z + h
    low = 1e300
    for b in range(nb):
        low = min(low, _gap(s, boff[b], bdim[b]))
    if low < 1.0:
        for i in range(m):
            s[i] += (1.0 - low) * e[i]
    H = np.empty((m, m))
    T = np.empty((m, m))
    alpha = 0.0
    sigma = 0.0
    best = 1e300
    best_it = 0
    zbest = np.zeros(m)
    sbest = np.zeros(m)
    for it in range(max_iter + 1):
        r[:] = M @ z - s + h
        gap = 0.0
        for i in range(m):
            gap += z[i] * s[i]
        mu = gap / nb
        res = 0.0
        for i in range(m):
            res = max(res, abs(r[i]))
        if res <= tol * hnorm and gap <= tol * hnorm:
            return it
        if not (gap < 1e300 and res < 1e300):  # NaN or overflow
            break
        score = max(res, gap) / hnorm
        if score < best:
            best = score
            best_it = it
            zbest[:] = z
            sbest[:] = s
        if it == max_iter:
            break
        _scaling(z, s, boff, bdim, woff, W, Winv, lam)
        # H = I + W⁻¹ M W⁻¹ (W⁻¹ block-diagonal, symmetric): T = M W⁻¹, then H = W⁻¹ T
        for b in range(nb):
            off, d, wo = boff[b], bdim[b], woff[b]
            for i in range(m):
                for j in range(d):
                    acc = 0.0
                    for k in range(d):
                        acc += M[i, off + k] * Winv[wo + k * d + j]
                    T[i, off + j] = acc
        for b in range(nb):
            off, d, wo = boff[b], bdim[b], woff[b]
            for i in range(d):
                for j in range(m):
                    acc = 0.0
                    for k in range(d):
                        acc += Winv[wo + i * d + k] * T[off + k, j]
                    H[off + i, j] = acc
        for c in range(m):
            H[c, c] += 1.0
        finite = True
        for i in range(m):
            for j in range(m):
                if not abs(H[i, j]) < 1e300:  # NaN or overflow: no factor
                    finite = False
        if not finite:
            break
        L = np.linalg.cholesky(H)  # LAPACK; H ⪰ I is positive definite
        # predictor (σ = 0): d = −λ
        for i in range(m):
            dvec[i] = -lam[i]
        _direction(L, M, Winv, W, r, dvec, boff, bdim, woff, dza, dsa, ua, va, tmp)
        # step lengths in the scaled space (z + α dz ∈ K ⟺ λ + α W dz ∈ K; λ is well centred)
        alpha = min(1.0, _max_step(lam, ua, boff, bdim), _max_step(lam, va, boff, bdim))
        gap_aff = 0.0
        for i in range(m):
            gap_aff += (z[i] + alpha * dza[i]) * (s[i] + alpha * dsa[i])
        sigma = min(1.0, max(0.0, gap_aff / gap)) ** 3
        # corrector: λ ∘ (W dz + W⁻¹ ds) = σμe − λ∘λ − (W⁻¹ds_aff) ∘ (W dz_aff)
        _jordan(va, ua, boff, bdim, dvec)
        _jordan(lam, lam, boff, bdim, tmp)
        for i in range(m):
            tmp2[i] = sigma * mu * e[i] - tmp[i] - dvec[i]
        _jordan_solve(lam, tmp2, boff, bdim, dvec)
        _direction(L, M, Winv, W, r, dvec, boff, bdim, woff, dz, ds, ua, va, tmp)
        alpha = min(1.0, 0.99 * min(_max_step(lam, ua, boff, bdim), _max_step(lam, va, boff, bdim)))
        for i in range(m):
            z[i] += alpha * dz[i]
            s[i] += alpha * ds[i]
    if best <= loose_tol:  # the last steps lost accuracy (rounding): the best iterate met the looser tolerance
        z[:] = zbest
        s[:] = sbest
        return best_it
    return -1


@cached_njit(error_model="numpy")
def _slacks(indptr, indices, data, b, x, out):
    """out = b − A x (A in CSR)."""
    for i in range(b.size):
        acc = b[i]
        for k in range(indptr[i], indptr[i + 1]):
            acc -= data[k] * x[indices[k]]
        out[i] = acc


@cached_njit(error_model="numpy")
def working_set_solve(Pinv, q, indptr, indices, data, b, boff, bdim, guess, x_start, feas_tol, qp_tol, loose_tol, max_passes,
                      max_iter, newton_iter, x):
    """Minimise ½xᵀPx + qᵀx over b − A x ∈ K by working sets (module doc), starting from the blocks ``guess``
    (bool per block; updated in place to the final working set) and the point ``x_start`` (the warm start, or
    an empty array: then P⁻¹'s unconstrained minimiser); x is written in place. A relaxation is solved by
    Newton's method on its active blocks (:func:`~powerdp.opf._active_set_newton.newton_qp`, at most
    ``newton_iter`` steps; 0 skips it) and by the interior-point method :func:`cone_qp` when that gives up.

    Returns (status, passes, iterations summed over the passes, relaxations the interior-point method solved)."""
    n = q.size
    nb = bdim.size
    u0 = Pinv @ q
    slack = np.empty(b.size)
    work = guess.copy()
    iters = 0
    ipm = 0
    xcur = np.empty(n)
    if x_start.size == n:
        xcur[:] = x_start
    else:
        xcur[:] = -u0
    for npass in range(1, max_passes + 1):
        # the working set's rows of A, in block order
        m = 0
        nwb = 0
        for blk in range(nb):
            if work[blk]:
                m += bdim[blk]
                nwb += 1
        rows = np.empty(m, dtype=np.int64)
        wboff = np.empty(nwb, dtype=np.int64)
        wbdim = np.empty(nwb, dtype=np.int64)
        pos = 0
        j = 0
        for blk in range(nb):
            if work[blk]:
                wboff[j] = pos
                wbdim[j] = bdim[blk]
                for k in range(bdim[blk]):
                    rows[pos + k] = boff[blk] + k
                pos += bdim[blk]
                j += 1
        # V = P⁻¹ Gᵀ (n × m) from G's sparse rows, M = G V, h = b_G + G u0
        V = np.zeros((n, m))
        for c in range(m):
            row = rows[c]
            for k in range(indptr[row], indptr[row + 1]):
                col = indices[k]
                a = data[k]
                for i in range(n):
                    V[i, c] += a * Pinv[i, col]
        M = np.zeros((m, m))
        hvec = np.empty(m)
        for c in range(m):
            row = rows[c]
            acc = b[row]
            for k in range(indptr[row], indptr[row + 1]):
                acc += data[k] * u0[indices[k]]
            hvec[c] = acc
            for c2 in range(m):
                acc2 = 0.0
                for k in range(indptr[row], indptr[row + 1]):
                    acc2 += data[k] * V[indices[k], c2]
                M[c, c2] = acc2
        for c in range(m):  # exact symmetry
            for c2 in range(c):
                avg = 0.5 * (M[c, c2] + M[c2, c])
                M[c, c2] = avg
                M[c2, c] = avg
        z = np.zeros(m)
        s = np.zeros(m)
        if m > 0:
            k_it = -1
            if newton_iter > 0:
                s_start = np.empty(m)  # the working rows' slacks at the current point
                for c in range(m):
                    row = rows[c]
                    acc = b[row]
                    for k in range(indptr[row], indptr[row + 1]):
                        acc -= data[k] * xcur[indices[k]]
                    s_start[c] = acc
                k_it = newton_qp(M, hvec, wboff, wbdim, s_start, qp_tol, newton_iter, z, s)
            if k_it < 0:
                ipm += 1
                k_it = cone_qp(M, hvec, wboff, wbdim, qp_tol, loose_tol, max_iter, z, s)
                if k_it < 0:
                    return NOT_CONVERGED, npass, iters + max_iter, ipm
            iters += k_it
        # x = −u0 − V z
        for i in range(n):
            acc = -u0[i]
            for c in range(m):
                acc -= V[i, c] * z[c]
            x[i] = acc
            xcur[i] = acc
        _slacks(indptr, indices, data, b, x, slack)
        added = 0
        for blk in range(nb):
            if not work[blk] and _gap(slack, boff[blk], bdim[blk]) < -feas_tol * (1.0 + abs(b[boff[blk]])):
                work[blk] = True
                added += 1
        if added == 0:
            guess[:] = work
            return CERTIFIED, npass, iters, ipm
    guess[:] = work
    return TOO_MANY_PASSES, max_passes, iters, ipm


@cached_njit(error_model="numpy")
def block_margins(indptr, indices, data, b, boff, bdim, x):
    """Each block's margin at x: its slack (a row) or s₀ − ‖s̄‖ (a cone), s = b − A x."""
    slack = np.empty(b.size)
    _slacks(indptr, indices, data, b, x, slack)
    out = np.empty(bdim.size)
    for blk in range(bdim.size):
        out[blk] = _gap(slack, boff[blk], bdim[blk])
    return out


_WARM = False


def cached() -> bool:
    """Whether numba's on-disk cache holds this module's kernels for this source (then :func:`warm_up` loads them in
    well under a second; otherwise it compiles them, ≈ 30 s of CPU, and writes the cache). Reads numba's cache index
    through its ``_cache`` attribute; False when that cannot be read."""
    try:
        return bool(working_set_solve._cache._cache_file._load_index())
    except Exception:  # noqa: BLE001 - another numba's internals: assume nothing is cached
        return False


def warm_up() -> None:
    """Compile every kernel (or load it from numba's cache) with the argument types the solver passes, once
    a process: a zone's set-up pays for it, not its first timed solve."""
    global _WARM
    if _WARM:
        return
    # x ∈ ℝ², rows: x₀ ≥ −1 (a nonnegative row) and ‖x₁‖ ≤ x₀ + 1 (a 2-row cone)
    indptr = np.array([0, 1, 2, 3], dtype=np.int64)
    indices = np.array([0, 0, 1], dtype=np.int64)
    data = np.array([-1.0, -1.0, -1.0])
    b = np.array([1.0, 1.0, 0.0])
    boff = np.array([0, 1], dtype=np.int64)
    bdim = np.array([1, 2], dtype=np.int64)
    x = np.zeros(2)
    block_margins(indptr, indices, data, b, boff, bdim, x)
    for newton in (0, 30):
        working_set_solve(np.eye(2), np.array([3.0, 1.0]), indptr, indices, data, b, boff, bdim, np.zeros(2, dtype=np.bool_),
                          np.zeros(0), 1e-9, 1e-11, 1e-9, 8, 60, newton, x)
    _WARM = True
