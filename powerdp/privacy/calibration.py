"""Budget-first calibration: the per-step noise that makes a whole run meet a total (ε, δ) per zone
(docs/privacy.md). Like opacus' ``make_private_with_epsilon``, the target is what an operator signs
off, and the per-step noise follows from a tight accountant.

* Gaussian: k adaptive Gaussian steps with noise multiplier z compose exactly to one Gaussian
  mechanism with multiplier z/√k (Gaussian DP), so z = σ*(ε, δ)·√k with σ* from
  ``dp_accounting.get_sigma_gaussian`` (the analytic Gaussian calibration, tighter than the classic
  √(2 ln(1.25/δ))/ε).
* Laplace: pure ε-DP composes exactly by summation, so the per-step ε is ε/k (δ = 0). At a total
  δ > 0, when the shifted entries are known (objective and input perturbation), the exact PLD of the
  k steps is tighter: the largest per-step ε whose PLD ε at δ meets the target, found by bisection
  with the accountant the ledger uses, so the ledger's figure never exceeds the target.
"""

from __future__ import annotations

import functools
import math

from ..errors import ConfigError
from .params import check_delta, check_positive

__all__ = ["gaussian_noise_multiplier", "laplace_epsilon_per_step", "MAX_NOISE_MULTIPLIER"]

#: beyond this noise-to-sensitivity ratio a release carries essentially nothing: refuse the budget
MAX_NOISE_MULTIPLIER = 1e4


def _steps(steps: int) -> int:
    if isinstance(steps, bool) or int(steps) != steps or steps < 1:
        raise ConfigError(f"the number of private steps must be a positive integer, got {steps!r}")
    return int(steps)


def _sane(multiplier: float, what: str) -> float:
    if not math.isfinite(multiplier) or multiplier > MAX_NOISE_MULTIPLIER:
        raise ConfigError(
            f"{what}: the noise would be {multiplier:.3g} times the sensitivity per step, above the bound of "
            f"{MAX_NOISE_MULTIPLIER:g} beyond which a release carries no information; give a larger budget or fewer "
            "rounds × local steps"
        )
    return multiplier


@functools.lru_cache(maxsize=64)
def gaussian_noise_multiplier(target_epsilon: float, target_delta: float, steps: int) -> float:
    """The σ/Δ₂ per step for which ``steps`` Gaussian steps are exactly (target_epsilon, target_delta)-DP."""
    import dp_accounting

    eps = check_positive("target_epsilon", target_epsilon)
    delta = check_delta("target_delta", target_delta)
    k = _steps(steps)
    z = float(dp_accounting.get_sigma_gaussian(eps, delta)) * math.sqrt(k)
    return _sane(z, f"target (ε = {eps:g}, δ = {delta:g}) over {k} Gaussian steps")


@functools.lru_cache(maxsize=64)
def laplace_epsilon_per_step(target_epsilon: float, steps: int, target_delta: float = 0.0, coordinates: int | None = None) -> float:
    """The per-step ε for which ``steps`` Laplace steps are (target_epsilon, target_delta)-DP.

    δ = 0: ε/k, exact. δ > 0 (needs ``coordinates``, the entries one neighbouring change moves): the
    largest per-step ε_s whose PLD ε at δ is within the target, to a relative 1e-3 (bisection in
    log ε_s; never above the target). Never smaller than ε/k.
    """
    eps = check_positive("target_epsilon", target_epsilon)
    k = _steps(steps)
    _sane(k / eps, f"target ε = {eps:g} over {k} Laplace steps")
    pure = eps / k
    if not target_delta:
        return pure
    delta = check_delta("target_delta", target_delta)
    if coordinates is None:
        raise ConfigError(
            "a Laplace budget with delta > 0 needs the privacy-loss distribution of each step, which is exact only when "
            "the noise's shifted entries are known (objective and input perturbation); use target_delta 0"
        )
    from .accounting import laplace_pld_epsilon

    def fits(e: float) -> bool:
        return laplace_pld_epsilon(e, k, delta, coordinates) <= eps

    lo = pure
    if not fits(lo):  # the PLD is pessimistic by a discretisation step; the pure sum is exact
        return pure
    hi = 2.0 * lo
    while fits(hi):
        lo, hi = hi, 2.0 * hi
    while hi / lo > 1.0 + 1e-3:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
