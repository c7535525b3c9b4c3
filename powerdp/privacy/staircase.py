"""The staircase mechanism: pure ε-DP noise with a smaller variance than Laplace's at large ε (docs/privacy.md).

Geng and Viswanath ("The optimal noise-adding mechanism in differential privacy", IEEE Trans. Inf. Theory 62(2),
2016) show that among ε-DP noise-adding mechanisms for one real value of sensitivity Δ, the one of least variance has a
staircase density: steps of width Δ, the first γ*Δ of each at the step's level, the rest a factor b = e^(−ε) lower,
each step b times the previous. Its variance Δ²(2^(−2/3) b^(2/3) (1 + b)^(2/3) + b)/(1 − b)² is Laplace's 2Δ²/ε²
as ε → 0 (2.00× (Δ/ε)² at ε = 0.1, 1.92× at ε = 1) but 0.085× (Δ/ε)² at ε = 10 against Laplace's 2×: at a large
budget it is 24 times less noise for the same guarantee.

The release is the sampler's (:func:`~powerdp.privacy.sampler.staircase_release`): the value on the grid γ of the
scale Δ/ε plus integer staircase noise with steps of d = ⌊Δ(1 + 2⁻²⁰)/γ⌋ + 1 grid units, so the set of outputs does
not depend on the data, and two values at most Δ apart (plus their floating-point error, up to 2⁻²⁰Δ), once on the
grid, are at most d apart: each entry is ε-DP.

Unlike Laplace's, the staircase's privacy loss does not add up over a shift spread across entries: a change that
moves m entries costs up to m·ε whatever their sizes. So the mechanism needs the sensitivity's ``coordinates`` (the
entries one neighbouring change moves; objective, input and totals perturbation know them) and spends ε/m on each
entry with the per-entry sensitivity Δ₁/m; a sensitivity without them (output perturbation) is refused. It is
accounted by pure composition (ε per release, summed); no tighter accountant is claimed for it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ConfigError
from .params import check_positive
from .sampler import (
    STAIRCASE_MAX_EPSILON,
    grid_step,
    staircase_grid,
    staircase_release,
    staircase_step_fraction,
    staircase_variance,
)
from .sensitivity import Sensitivity

__all__ = ["StaircaseMechanism"]


class StaircaseMechanism:
    """i.i.d. discrete staircase noise, each of ``coordinates`` entries at ε/coordinates against a change of that entry
    by Δ₁/coordinates: (ε, 0)-DP per step."""

    kind = "staircase"
    norm = "l1"
    #: the ledger composes it by summing ε (its kind is in PURE_KINDS; no privacy-loss distribution is claimed)
    pld_exact = False

    @classmethod
    def from_sensitivity(cls, sensitivity: Sensitivity, epsilon: float, delta: float | None = None) -> StaircaseMechanism:
        """Calibrated to ``sensitivity.l1`` over ``sensitivity.coordinates`` entries; ``delta`` is not used (pure ε)."""
        if sensitivity.coordinates is None:
            raise ConfigError(
                "the staircase mechanism needs the entries one neighbouring change moves (objective, input or totals "
                "perturbation); this sensitivity bounds a shift spread over many entries (output perturbation): use laplace"
            )
        return cls(sensitivity.l1, epsilon, coordinates=sensitivity.coordinates)

    def __init__(self, l1_sensitivity: float, epsilon: float, coordinates: int = 1):
        self.sensitivity = check_positive("l1_sensitivity", l1_sensitivity)
        self.epsilon = check_positive("epsilon", epsilon)
        if isinstance(coordinates, bool) or not isinstance(coordinates, int) or coordinates < 1:
            raise ConfigError(f"coordinates must be a positive integer, got {coordinates!r}")
        self.coordinates = int(coordinates)
        self.delta = 0.0
        self.scale = self.sensitivity / self.epsilon  # Laplace's scale at the same (Δ₁, ε): the grid's reference
        if not 1e-6 <= self.entry_epsilon <= STAIRCASE_MAX_EPSILON:
            raise ConfigError(
                f"epsilon = {epsilon!r}: the staircase mechanism takes ε from 1e-6 to {STAIRCASE_MAX_EPSILON:g} per moved entry "
                f"(beyond {STAIRCASE_MAX_EPSILON:g} its exact sampler needs ~(2e^ε)^(1/3) proposals a draw); use laplace"
            )

    @property
    def entry_sensitivity(self) -> float:
        """Δ₁/m: how far one neighbouring change moves each of its m entries."""
        return self.sensitivity / self.coordinates

    @property
    def entry_epsilon(self) -> float:
        """ε/m: what each moved entry costs."""
        return self.epsilon / self.coordinates

    def dp_event(self):
        """No ``dp_accounting`` event is claimed for the staircase (the ledger sums its pure ε)."""
        raise ConfigError("the staircase mechanism is accounted by pure composition (Σ ε), not by a dp-accounting event")

    @property
    def noise_multiplier(self) -> float:
        """1/ε, as for Laplace (the ledger's bookkeeping; the accounting is the pure ε)."""
        return self.scale / self.sensitivity

    @property
    def variance(self) -> float:
        """Per entry: the optimal staircase's variance at (Δ₁/m, ε/m) (the grid changes it by ~2⁻⁴⁰ relative)."""
        return staircase_variance(self.entry_sensitivity, self.entry_epsilon)

    @property
    def std(self) -> float:
        return math.sqrt(self.variance)

    def per_step(self) -> tuple[float, float]:
        return (self.epsilon, 0.0)

    @property
    def grid(self) -> float:
        """γ, the grid of this mechanism's releases (data-independent)."""
        return grid_step(self.entry_sensitivity / self.entry_epsilon)

    def release(self, value: Any, rng: Any) -> tuple[np.ndarray, np.ndarray]:
        """(``value`` released on the grid with discrete staircase noise, the noise): :func:`sampler.staircase_release`."""
        self.entries = int(np.asarray(value).size)
        return staircase_release(value, self.entry_sensitivity, self.entry_epsilon, rng)

    def receipt(self) -> dict[str, Any]:
        """What one release was, for the privacy receipt: the discrete staircase on the grid γ with steps of ``step``
        grid units (the upper part of each from ``step_level`` on) at ``entry_epsilon`` per moved entry, the L1
        sensitivity and the entries a neighbouring change moves; ``powerdp privacy verify`` recomputes the pure ε
        from the grid, the step and the sensitivity."""
        gamma, d, r = staircase_grid(self.entry_sensitivity, self.entry_epsilon)
        return {
            "mechanism": "discrete_staircase", "norm": "l1", "sensitivity": self.sensitivity, "coordinates": self.coordinates,
            "noise_scale": self.scale, "noise_multiplier": self.noise_multiplier, "epsilon": self.epsilon, "delta": 0.0,
            "grid": gamma, "entries": getattr(self, "entries", None), "step": d, "step_level": r,
            "step_fraction": staircase_step_fraction(self.entry_epsilon), "entry_epsilon": self.entry_epsilon,
            "tail": {"exact": True, "delta": 0.0, "pmf_relative_error": 2.0**-40}, "sampling": None,
        }

    def sample(self, rng: Any, size: Any = None) -> np.ndarray:
        """The noise of one release of ``size`` entries (on the grid γℤ; see :meth:`release`)."""
        shape = () if size is None else size
        return self.release(np.zeros(shape), rng)[1]

    def __repr__(self) -> str:
        return f"StaircaseMechanism(l1_sensitivity={self.sensitivity!r}, epsilon={self.epsilon!r}, coordinates={self.coordinates!r})"
