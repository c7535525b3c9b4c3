"""Multiclass logistic regression (softmax cross-entropy), the model of both papers (docs/learning.md).

Weights z ∈ R^{J×K}, stored flat (row-major, J·K entries). Client p's objective (000 eq. 30 plus the
inexact-ADMM paper's ℓ2 term, normalised by the public sample count I):

    f_p(z) = −(1/I) Σ_{i∈I_p} Σ_k y_ik ln h(x_i, z)_k + (β/P)‖z‖²,   ∇f_p(z) = (1/I) X_pᵀ(H − Y) + (2β/P) z.

Binary logistic regression is the K = 2 case. Everything is vectorized over samples.
:func:`centralized_fit` solves Σ_p f_p over the same box on the pooled data (the reference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SoftmaxLoss", "softmax", "centralized_fit", "error_rate", "predict"]

#: keep a client's samples as a sparse matrix when fewer than this fraction of entries are non-zero
SPARSE_BELOW = 0.3


def softmax(S: np.ndarray) -> np.ndarray:
    """Row-wise softmax, shifted by the row maximum (no overflow)."""
    S = S - S.max(axis=1, keepdims=True)
    np.exp(S, out=S)
    S /= S.sum(axis=1, keepdims=True)
    return S


def one_hot(y: np.ndarray, K: int) -> np.ndarray:
    Y = np.zeros((len(y), K))
    Y[np.arange(len(y)), y] = 1.0
    return Y


@dataclass
class SoftmaxLoss:
    """One client's (or the pooled) objective f(z) = −(1/I)Σ ln h_{y_i} + reg‖z‖² on samples X, labels y."""

    X: np.ndarray  # samples × J
    y: np.ndarray  # labels 0..K−1
    K: int
    I: int  # the public normaliser: all training samples of all clients
    reg: float = 0.0  # the ℓ2 coefficient of this objective: β/P for a client, β for the pooled problem

    def __post_init__(self) -> None:
        import scipy.sparse as sp

        X = np.ascontiguousarray(self.X, dtype=np.float64)
        self.Y = one_hot(self.y, self.K)
        self.J = X.shape[1]
        self.n = self.J * self.K
        # the two products X z and Xᵀ(H − Y) read X from memory each time, so they are bandwidth-bound: a sparse
        # X (MNIST: 19 % non-zeros) is kept as CSR with its transpose, exact and 1.8× faster (benchmarks/learning.py)
        self.sparse = X.size > 0 and np.count_nonzero(X) < SPARSE_BELOW * X.size
        if self.sparse:
            self.X = sp.csr_matrix(X)
            self._XT = self.X.T.tocsr()
        else:
            self.X = X
            self._XT = X.T

    def _scores(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(self.X @ z.reshape(self.J, self.K))

    def _terms(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
        """(S = X z, the row maxima m, E = exp(S − m), its row sums, f(z)): the last ones are kept with a copy of
        their z, so the backtracking step (steps.py), which evaluates f at z⁺ and then f and ∇f at the same z⁺,
        computes them once (the same doubles either way). Callers do not modify them."""
        last = self.__dict__.get("_last")
        if last is not None and np.array_equal(last[0], z):
            return last[1:]
        S = self._scores(z)
        m = S.max(axis=1, keepdims=True)
        E = np.exp(S - m)
        tot = E.sum(axis=1, keepdims=True)
        ce = float((m[:, 0] + np.log(tot[:, 0])).sum() - S[np.arange(len(self.y)), self.y].sum())
        f = ce / self.I + self.reg * float(z @ z)
        self._last = (np.array(z, dtype=np.float64), S, m, E, tot, f)
        return S, m, E, tot, f

    def value(self, z: np.ndarray) -> float:
        return self._terms(z)[4]

    def gradient(self, z: np.ndarray) -> np.ndarray:
        H = softmax(self._scores(z))
        H -= self.Y
        g = np.asarray(self._XT @ H).ravel()
        g *= 1.0 / self.I
        if self.reg:
            g += (2.0 * self.reg) * z
        return g

    def value_and_gradient(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        _, _, E, tot, f = self._terms(z)
        H = E / tot - self.Y
        g = np.asarray(self._XT @ H).ravel() / self.I + 2.0 * self.reg * z
        return f, g


def lipschitz_bound(samples: int, I: int, R2: float, reg: float) -> float:
    """A data-independent L of ∇f_p: the softmax Hessian per sample is (diag h − hhᵀ) ⊗ xxᵀ with
    λ_max(diag h − hhᵀ) ≤ ½, so L ≤ I_p·R₂²/(2I) + 2·reg (I_p and I public, ‖x‖₂ ≤ R₂ by clipping)."""
    return samples * R2 * R2 / (2.0 * I) + 2.0 * reg


def predict(z: np.ndarray, X: np.ndarray, K: int) -> np.ndarray:
    return np.argmax(X @ z.reshape(X.shape[1], K), axis=1)


def error_rate(z: np.ndarray, X: np.ndarray, y: np.ndarray, K: int) -> float:
    """The fraction of misclassified samples."""
    return float(np.mean(predict(z, X, K) != y))


def centralized_fit(loss: SoftmaxLoss, box: float | None, tol: float = 1e-10, max_iter: int = 20000) -> tuple[np.ndarray, float]:
    """min over [−u, u]ⁿ (or Rⁿ) of the pooled objective, by L-BFGS-B (scipy); returns (z*, f(z*)).

    ``tol`` is L-BFGS-B's relative decrease at which it stops: 1e-10 is within 2e-7 relative of the 1e-12 optimum on
    both bundled sets (MNIST subset, u = 0.1: 0.44233502 against 0.44233492, in half the iterations)."""
    from scipy.optimize import minimize

    bounds = None if box is None else [(-box, box)] * loss.n
    res = minimize(
        loss.value_and_gradient, np.zeros(loss.n), jac=True, method="L-BFGS-B", bounds=bounds,
        options={"maxiter": max_iter, "maxfun": 2 * max_iter, "ftol": tol, "gtol": 1e-10, "maxcor": 20},
    )
    z = np.asarray(res.x, dtype=float)
    return z, float(loss.value(z))


def zero_model_loss(K: int) -> float:
    """The loss of z = 0 without the ℓ2 term: every class gets 1/K, so ln K (2.302585 for K = 10)."""
    return math.log(K)
