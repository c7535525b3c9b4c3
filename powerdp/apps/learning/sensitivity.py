"""Sensitivity of a client's gradient to one training sample (docs/learning.md, "Privacy").

After the public preprocessing every row has ‖x‖₂ ≤ R₂ and ‖x‖₁ ≤ R₁. One sample's term of ∇f_p is
g_i = (1/I) x_i (h_i − y_i)ᵀ, with ‖h − y‖₂ ≤ √2 and ‖h − y‖₁ ≤ 2, so ‖g_i‖_F ≤ √2·R₂/I and
‖g_i‖₁ ≤ 2·R₁/I. Neighbouring data sets:

* ``replace-one`` (default): one sample of one client replaced, I fixed: Δ₂ = 2√2·R₂/I, Δ₁ = 4·R₁/I;
* ``add-remove``: one sample added or removed, with the public normaliser I held fixed: Δ₂ = √2·R₂/I,
  Δ₁ = 2·R₁/I.

The ℓ2 term (β/P)‖z‖² holds no data. Both bounds are data-independent (sound, whatever z).
``rule="paper"`` is the papers' value (a max over the client's own samples of ‖x_i‖·‖h − y‖, at the
start point): data-dependent, so **not** a differential-privacy bound; for reproduction only.
Tests check the sound bounds numerically (random z, random neighbours).
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import ConfigError
from ...privacy import Sensitivity

__all__ = ["ADJACENCIES", "gradient_sensitivity", "paper_sensitivity"]

ADJACENCIES = ("replace-one", "add-remove")


def gradient_sensitivity(R2: float, R1: float, I: int, adjacency: str = "replace-one") -> Sensitivity:
    """Sound Δ₁, Δ₂ of ∇f_p for one sample (module docstring)."""
    if adjacency not in ADJACENCIES:
        raise ConfigError(f"adjacency = {adjacency!r}: choose one of {', '.join(ADJACENCIES)}")
    factor = 2.0 if adjacency == "replace-one" else 1.0
    return Sensitivity(
        l1=factor * 2.0 * R1 / I,
        l2=factor * math.sqrt(2.0) * R2 / I,
        rule="sound",
        beta=R2,
        note=f"learning gradient, {adjacency}: Δ2 = {factor:g}·√2·R2/I, Δ1 = {factor:g}·2·R1/I with R2 = {R2:g}, R1 = {R1:g}, I = {I}",
    )


def paper_sensitivity(X: np.ndarray, I: int) -> Sensitivity:
    """The papers' data-dependent value at the zero model (h = 1/K): max_i ‖x_i‖·‖h − y‖ over the client's own
    samples, normalised by I (004 eq. 20, 000 eq. 31). NOT private: it depends on the client's data."""
    n1 = float(np.abs(X).sum(axis=1).max())
    n2 = float(np.linalg.norm(X, axis=1).max())
    # at h = 1/K: ‖h − y‖₁ = 2(1 − 1/K) ≤ 2 and ‖h − y‖₂ ≤ √2; the papers take the max at the current iterate
    return Sensitivity(
        l1=max(2.0 * n1 / I, 1e-300), l2=max(math.sqrt(2.0) * n2 / I, 1e-300), rule="paper", beta=max(n2, 1e-300),
        note="the papers' data-dependent sensitivity (max over the client's own samples): NOT a DP bound",
    )
