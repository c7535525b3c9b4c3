"""The working-set Newton method of :mod:`powerdp.opf.active_set` (numba): a relaxation solved without an interior point.

A relaxation (:mod:`powerdp.opf._active_set_kernel`) is ``min ½ xᵀPx + qᵀx`` subject to the working set's blocks
``s = b_G − G x ∈ K_G`` (nonnegative rows and second-order cones). At its minimiser most of those blocks are
*active*: a row's slack is 0, a cone's slack lies on the cone's boundary away from its apex, where the cone is the
smooth constraint ``c(s) = ‖s̄‖ − s₀ ≤ 0``. With a guess of which blocks are active, the KKT conditions are a
smooth system (stationarity, ``c = 0`` on the active blocks) and Newton's method (SQP with the exact Hessian
``P + Σ λ_j ∇²c_j``) converges in a few steps from the warm start. Everything is written in the m working rows
with ``M = G P⁻¹ Gᵀ`` and ``h = b_G + G P⁻¹ q`` (``x = −P⁻¹(q + Gᵀζ)``, ``s = h + Mζ``):

* a cone's Hessian term is ``λ_j/‖s̄_j‖ (I − u uᵀ)`` on its rows s̄ (``u = s̄/‖s̄‖``), so ``D = F Fᵀ`` with
  ``F = √(λ_j/‖s̄_j‖) (I − u uᵀ)``, and ``(P + GᵀDG)⁻¹`` is P⁻¹ with a Woodbury correction of size Σ (d − 1);
* each step solves one Schur system over the k active blocks (``E`` holds a row's ``1`` and a cone's
  ``(1, −u)``, the linearised constraints: ``E s⁺ = 0``).

:func:`newton_qp` returns ``(ζ, s)`` only when they satisfy the same optimality conditions the interior-point
method (:func:`~powerdp.opf._active_set_kernel.cone_qp`) certifies: ``s = Mζ + h`` (exact by construction),
``ζ`` and ``s`` in the cones and ``ζᵀs`` at most ``tol``·max(1, ‖h‖∞); blocks whose multiplier turns negative
leave the guessed active set, working blocks found violated join it. Otherwise (a cone at its apex, a singular
Schur system, no convergence) it gives up and the caller runs the interior-point method.
"""

from __future__ import annotations

import numpy as np

from ..files.kernel_cache import cached_njit

MAX_CHANGES = 12  # changes of the guessed active set before giving up
SETTLED = 1e-5  # the active set is revised once a step moves s by at most this (relative to max(1, ‖h‖∞))
GUESS = 1e-6  # the first guess: the blocks whose margin at the start is below GUESS·max(1, ‖h‖∞)


@cached_njit(error_model="numpy")
def gap(x, off, d):
    """x₀ − ‖x̄‖ of a cone block (x itself for a one-row block): ≥ 0 inside the cone."""
    if d == 1:
        return x[off]
    acc = 0.0
    for k in range(off + 1, off + d):
        acc += x[k] * x[k]
    return x[off] - np.sqrt(acc)


@cached_njit(error_model="numpy")
def _cholesky(A, L):
    """L (lower) with L Lᵀ = A; False when a pivot is not safely positive (A singular or indefinite)."""
    n = A.shape[0]
    for j in range(n):
        d = A[j, j]
        for k in range(j):
            d -= L[j, k] * L[j, k]
        if not d > 1e-13 * abs(A[j, j]) or not d > 0.0:  # also NaN
            return False
        d = np.sqrt(d)
        L[j, j] = d
        for i in range(j):
            L[i, j] = 0.0
        for i in range(j + 1, n):
            acc = A[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = acc / d
    return True


@cached_njit(error_model="numpy")
def _solve(L, B):
    """(L Lᵀ)⁻¹ B for a matrix B (columns solved one by one)."""
    n, c = B.shape
    X = B.copy()
    for col in range(c):
        for i in range(n):
            acc = X[i, col]
            for k in range(i):
                acc -= L[i, k] * X[k, col]
            X[i, col] = acc / L[i, i]
        for i in range(n - 1, -1, -1):
            acc = X[i, col]
            for k in range(i + 1, n):
                acc -= L[k, i] * X[k, col]
            X[i, col] = acc / L[i, i]
    return X


@cached_njit(error_model="numpy")
def _xtm(X, lo, hi, M):
    """Xᵀ M for X (m × q) whose column j is zero outside rows lo[j]:hi[j] (q × m)."""
    q, m = X.shape[1], M.shape[1]
    out = np.zeros((q, m))
    for j in range(q):
        for t in range(lo[j], hi[j]):
            v = X[t, j]
            for i in range(m):
                out[j, i] += v * M[t, i]
    return out


@cached_njit(error_model="numpy")
def _rx(R, X, lo, hi):
    """R X for a dense R (p × m) and X as in :func:`_xtm` (p × q)."""
    p, q = R.shape[0], X.shape[1]
    out = np.zeros((p, q))
    for j in range(q):
        for t in range(lo[j], hi[j]):
            v = X[t, j]
            for i in range(p):
                out[i, j] += R[i, t] * v
    return out


@cached_njit(error_model="numpy")
def _xtv(X, lo, hi, v):
    """Xᵀ v for X as in :func:`_xtm`."""
    q = X.shape[1]
    out = np.zeros(q)
    for j in range(q):
        acc = 0.0
        for t in range(lo[j], hi[j]):
            acc += X[t, j] * v[t]
        out[j] = acc
    return out


@cached_njit(error_model="numpy")
def _xw(X, lo, hi, w):
    """X w for X as in :func:`_xtm`."""
    out = np.zeros(X.shape[0])
    for j in range(X.shape[1]):
        for t in range(lo[j], hi[j]):
            out[t] += X[t, j] * w[j]
    return out


@cached_njit(error_model="numpy")
def newton_qp(M, h, boff, bdim, s_start, tol, max_iter, z, s):
    """min ½ ζᵀMζ + hᵀζ over ζ in the blocks' cones by Newton's method on a guessed active set (module doc),
    starting from the slacks ``s_start`` (the blocks guessed active: those with a margin below
    :data:`GUESS`·max(1, ‖h‖∞) there). Writes ζ to ``z`` and ``s = Mζ + h`` to
    ``s``; returns the Newton steps taken, or a negative code when it gives up (then z and s are not written):
    −1 no certificate within ``max_iter`` steps, −2 an active cone at its apex, −3 / −4 the Woodbury or Schur
    system not positive definite, −5 NaN or overflow, −6 more than :data:`MAX_CHANGES` revisions."""
    m = h.size
    nb = bdim.size
    hnorm = 1.0
    for i in range(m):
        hnorm = max(hnorm, abs(h[i]))
    thr = tol * hnorm
    act = np.empty(nb, dtype=np.bool_)
    for b in range(nb):
        act[b] = gap(s_start, boff[b], bdim[b]) < GUESS * hnorm
    lam = np.zeros(nb)
    sx = s_start.copy()
    col = np.empty(nb, dtype=np.int64)
    changes = 0
    for it in range(1, max_iter + 1):
        k = 0
        r = 0
        for b in range(nb):
            if act[b]:
                k += 1
                if bdim[b] > 1 and lam[b] > 0.0:
                    r += bdim[b] - 1
        # E (m × k): the active blocks' linearised constraints; F (m × r): D = F Fᵀ; both block-sparse (a column
        # is zero outside its block's rows lo:hi), and the products below use only those rows
        E = np.zeros((m, k))
        F = np.zeros((m, r))
        elo = np.empty(k, dtype=np.int64)
        ehi = np.empty(k, dtype=np.int64)
        flo = np.empty(r, dtype=np.int64)
        fhi = np.empty(r, dtype=np.int64)
        j = 0
        c = 0
        for b in range(nb):
            col[b] = -1
            if not act[b]:
                continue
            off, d = boff[b], bdim[b]
            col[b] = j
            elo[j] = off
            ehi[j] = off + d
            E[off, j] = 1.0
            if d > 1:
                nrm = 0.0
                for t in range(off + 1, off + d):
                    nrm += sx[t] * sx[t]
                nrm = np.sqrt(nrm)
                if not nrm > 1e-12 * hnorm:  # at the apex: the cone is not smooth there
                    return -2
                for t in range(off + 1, off + d):
                    E[t, j] = -sx[t] / nrm
                if lam[b] > 0.0:
                    w = np.sqrt(lam[b] / nrm)
                    for t1 in range(1, d):
                        for t2 in range(1, d):
                            e12 = 1.0 if t1 == t2 else 0.0
                            F[off + t1, c + t2 - 1] = w * (e12 - (sx[off + t1] / nrm) * (sx[off + t2] / nrm))
                    for t in range(d - 1):
                        flo[c + t] = off + 1
                        fhi[c + t] = off + d
                    c += d - 1
            j += 1
        Qt = _xtm(E, elo, ehi, M)  # Eᵀ M (M is symmetric)
        K = _rx(Qt, E, elo, ehi)  # Eᵀ M E
        hs = h - sx
        Ls = np.empty((r, r))
        Nt = np.empty((r, m))
        a = np.zeros(m)
        if r > 0:
            Nt = _xtm(F, flo, fhi, M)  # Fᵀ M
            S = _rx(Nt, F, flo, fhi)  # I + Fᵀ M F
            for i in range(r):
                S[i, i] += 1.0
            if not _cholesky(S, Ls):
                return -3
            FQ = _rx(Nt, E, elo, ehi)  # Fᵀ M E
            K -= FQ.T @ _solve(Ls, FQ)
            a = _xw(F, flo, fhi, _xtv(F, flo, fhi, hs))
            t1 = _solve(Ls, (Nt @ a).reshape(r, 1))[:, 0]
            v = M @ a - h
            for i in range(m):
                acc = 0.0
                for jj in range(r):
                    acc += Nt[jj, i] * t1[jj]
                v[i] -= acc
            rhs = _xtv(E, elo, ehi, v)
        else:
            rhs = -_xtv(E, elo, ehi, h)
        Lk = np.empty((k, k))
        if k > 0 and not _cholesky(K, Lk):
            return -4
        Lam = _solve(Lk, rhs.reshape(k, 1))[:, 0] if k > 0 else np.zeros(0)
        znew = _xw(E, elo, ehi, Lam) - a
        if r > 0:
            znew -= _xw(F, flo, fhi, _solve(Ls, (Nt @ znew).reshape(r, 1))[:, 0])
        snew = M @ znew + h
        # the certificate, and what is wrong when it fails
        ok = True
        comp = 0.0
        worst_dual = -1
        worst_dual_v = -thr
        worst_primal = -1
        worst_primal_v = -thr
        for b in range(nb):
            off, d = boff[b], bdim[b]
            gs = gap(snew, off, d)
            gz = gap(znew, off, d)
            for t in range(off, off + d):
                comp += znew[t] * snew[t]
            if gs < -thr or gz < -thr:
                ok = False
            if act[b] and Lam[col[b]] < worst_dual_v:
                worst_dual_v = Lam[col[b]]
                worst_dual = b
            if not act[b] and gs < worst_primal_v:
                worst_primal_v = gs
                worst_primal = b
        if ok and abs(comp) <= thr and np.all(np.isfinite(znew)):
            z[:] = znew
            s[:] = snew
            return it
        step = 0.0
        for i in range(m):
            step = max(step, abs(snew[i] - sx[i]))
        if not step < 1e300:  # NaN or overflow
            return -5
        sx[:] = snew
        for b in range(nb):
            lam[b] = Lam[col[b]] if act[b] else 0.0
        if step <= SETTLED * hnorm:  # Newton has (nearly) converged on this active set: revise it
            if worst_dual >= 0:  # every block with a negative multiplier leaves
                for b in range(nb):
                    if act[b] and Lam[col[b]] < -thr:
                        act[b] = False
                        lam[b] = 0.0
                changes += 1
            elif worst_primal >= 0:  # every violated block joins
                for b in range(nb):
                    if not act[b] and gap(snew, boff[b], bdim[b]) < -thr:
                        act[b] = True
                        lam[b] = 0.0
                changes += 1
            if changes > MAX_CHANGES:
                return -6
    return -1
