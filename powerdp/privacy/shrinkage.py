"""Shrinkage of a noisy release toward its own mean: post-processing that lowers the error of perturbed loads.

A zone that perturbs its k load values once (input perturbation, docs/privacy.md) computes with x̃ = x + ξ, whose
squared error is k·V (V the noise's variance per entry). When V is large against the spread of the true values, the
positive-part James–Stein estimator toward the release's own mean m̃ (James and Stein 1961; in the empirical-Bayes
form of Efron and Morris 1973)

    x̂ = m̃ + max(0, 1 − (k − 3) V / ‖x̃ − m̃‖²) (x̃ − m̃)

has a smaller expected squared error: the factor estimates τ²/(τ² + V), τ² the true values' spread. It is a function
of the release and of V (public: the mechanism's calibration) alone, so it costs no privacy. Under Gaussian noise it
dominates x̃ for k ≥ 4 (Stein's lemma); under Laplace or staircase noise that proof does not apply, and the gain is
measured (docs/results/utility.md, "Shrinkage"): large when the noise is large against the loads' spread (small ε),
none when it is small (the factor is then ~1).

The sums are exactly rounded (``math.fsum``), not BLAS's or numpy's, so the result is the same bits on every CPU.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["shrink_to_mean", "shrinkage_factor", "shrink_blocks"]


def shrinkage_factor(values: np.ndarray, variance: float) -> float:
    """The positive-part James–Stein factor max(0, 1 − (k − 3)V/‖x − x̄‖²) of ``values`` with noise ``variance`` V per
    entry; 1 (no shrinkage) when k ≤ 3, V = 0 or the values are all equal."""
    x = np.asarray(values, dtype=float)
    k = x.size
    if k <= 3 or not variance > 0:
        return 1.0
    r = x - _mean(x)
    spread = math.fsum(r * r)
    if not spread > 0:
        return 1.0
    return max(0.0, 1.0 - (k - 3) * float(variance) / spread)


def shrink_to_mean(values: np.ndarray, variance: float) -> np.ndarray:
    """``values`` (a noisy release with noise ``variance`` per entry) shrunk toward their mean by
    :func:`shrinkage_factor`: x̄ + c (x − x̄). A new array; the input is not changed."""
    x = np.asarray(values, dtype=float)
    c = shrinkage_factor(x, variance)
    if c == 1.0:
        return x.copy()
    m = _mean(x)
    return m + c * (x - m)


def shrink_blocks(values: np.ndarray, blocks: list[np.ndarray], variance: float) -> np.ndarray:
    """``values`` with each block of them (an index array) shrunk toward its own mean by :func:`shrink_to_mean`;
    entries in no block are left as they are. A new array."""
    out = np.array(values, dtype=float)
    for j in blocks:
        out[j] = shrink_to_mean(out[j], variance)
    return out


def _mean(x: np.ndarray) -> float:
    return math.fsum(x.tolist()) / x.size
