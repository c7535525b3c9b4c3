"""Noise mechanisms behind one protocol, registered by name; per-zone noise generators (docs/privacy.md).

A mechanism has ``kind`` (its registry name), ``norm`` (``"l1"`` or ``"l2"``: the
sensitivity field it is calibrated to), ``from_sensitivity(sensitivity, epsilon,
delta)``, ``per_step()`` → (ε, δ), ``noise_multiplier`` (scale / sensitivity, what
an accountant composes), ``release(value, rng)`` → (released value, noise), ``sample(rng, size)`` (the
noise alone), ``dp_event()`` (the ``dp_accounting`` event one step stands for) and ``receipt()`` (what it
released under, for the privacy receipt: docs/privacy.md, "The privacy receipt"). Every draw goes through
:mod:`powerdp.privacy.sampler` (values on a data-independent grid, exact integer noise).
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError
from .faults import InjectedFaults
from .params import PrivacyWarning, check_delta, check_kind, check_positive, check_real
from .sampler import NoiseSource, gaussian_grid_scale, gaussian_release, grid_step, laplace_grid_scale, laplace_release
from .sensitivity import Sensitivity

__all__ = [
    "LaplaceMechanism", "GaussianMechanism", "Mechanism", "MECHANISMS", "make_mechanism", "zone_rng", "noise_rng",
    "noise_source", "NOISE_SOURCES", "noise_magnitude", "Kind", "mechanism_to_dict", "mechanism_from_dict",
    "PMF_RELATIVE_ERROR", "GAUSSIAN_TAIL_DELTA", "StaircaseMechanism", "PURE_KINDS",
]

Kind = Literal["laplace", "gaussian", "staircase"]

#: the samplers' pmf is the distribution's to this relative error (the binary64 exponentials and the Laplace table's
#: weights, docs/privacy.md "The sampler"; the Laplace's grows by this per 9 scales of |z|): an additive privacy loss of
#: at most twice it per value, which the receipt states and ``powerdp privacy verify`` adds
PMF_RELATIVE_ERROR = 2.0**-40
#: the discrete Gaussian never releases beyond ≈ 39.6σ (exp(−x) underflows): the δ of that cut, per release, at most
#: m·exp(−780) for m values, below this for any m a run can have
GAUSSIAN_TAIL_DELTA = 1e-300


# --------------------------------------------------------------------------- #
# mechanisms
# --------------------------------------------------------------------------- #


class LaplaceMechanism:
    """i.i.d. Laplace noise with scale b = Δ₁/ε (variance 2b²): (ε, 0)-DP per step."""

    kind = "laplace"
    norm = "l1"

    @classmethod
    def from_sensitivity(cls, sensitivity: Sensitivity, epsilon: float, delta: float | None = None) -> LaplaceMechanism:
        """Calibrated to ``sensitivity.l1``; ``delta`` is not used (pure ε)."""
        return cls(sensitivity.l1, epsilon, coordinates=sensitivity.coordinates)

    def dp_event(self):
        """The ``dp_accounting`` event one step of this mechanism stands for.

        With ``coordinates`` = m known, a neighbouring change moves m entries by Δ₁/m each, so one step
        is exactly m scalar Laplace steps of noise multiplier m/ε (the PLD is then exact, not an
        assumption); otherwise one scalar step of multiplier 1/ε (the worst case assumed).
        """
        import dp_accounting

        m = self.coordinates or 1
        event = dp_accounting.LaplaceDpEvent(noise_multiplier=m * self.noise_multiplier)
        return event if m == 1 else dp_accounting.SelfComposedDpEvent(event, m)

    @property
    def pld_exact(self) -> bool:
        """Whether :meth:`dp_event` is the exact privacy loss (the shifted entries are known)."""
        return self.coordinates is not None

    def __init__(self, l1_sensitivity: float, epsilon: float, coordinates: int | None = None):
        self.sensitivity = check_positive("l1_sensitivity", l1_sensitivity)
        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = 0.0
        self.scale = self.sensitivity / self.epsilon
        if coordinates is not None and (isinstance(coordinates, bool) or not isinstance(coordinates, numbers.Integral) or coordinates < 1):
            raise ConfigError(f"coordinates must be a positive integer or None, got {coordinates!r}")
        self.coordinates = None if coordinates is None else int(coordinates)

    @property
    def noise_multiplier(self) -> float:
        """Scale over sensitivity, 1/ε: what the accountant composes."""
        return self.scale / self.sensitivity

    @property
    def variance(self) -> float:
        return 2.0 * self.scale**2

    @property
    def std(self) -> float:
        return math.sqrt(2.0) * self.scale

    def per_step(self) -> tuple[float, float]:
        return (self.epsilon, 0.0)

    @property
    def grid(self) -> float:
        """γ, the grid of this mechanism's releases (:func:`sampler.grid_step` of the scale; data-independent)."""
        return grid_step(self.scale)

    def release(self, value: Any, rng: Any) -> tuple[np.ndarray, np.ndarray]:
        """(``value`` released on the grid with discrete Laplace noise, the noise): :func:`sampler.laplace_release`."""
        self.entries = int(np.asarray(value).size)
        return laplace_release(value, self.scale, self.sensitivity, rng)

    def receipt(self) -> dict[str, Any]:
        """What one release of this mechanism was, for the privacy receipt (docs/privacy.md, "The privacy receipt"):
        the discrete Laplace on the grid γ, its integer scale t (grown by the rounding), the sensitivity it bounds
        (L1; ``coordinates``: the entries a neighbouring change moves, when known), the values per release."""
        m = getattr(self, "entries", None)
        return {
            "mechanism": "discrete_laplace", "norm": "l1", "sensitivity": self.sensitivity, "coordinates": self.coordinates,
            "noise_scale": self.scale, "noise_multiplier": self.noise_multiplier, "epsilon": self.epsilon, "delta": 0.0,
            "grid": self.grid, "entries": m, "grid_scale": laplace_grid_scale(self.scale, self.sensitivity, m) if m else None,
            "tail": {"exact": True, "delta": 0.0, "pmf_relative_error": PMF_RELATIVE_ERROR}, "sampling": None,
        }

    def sample(self, rng: Any, size: Any = None) -> np.ndarray:
        """The noise of one release of ``size`` entries (on the grid γℤ; see :meth:`release`)."""
        return _noise_only(self, rng, size)

    def __repr__(self) -> str:
        coords = "" if self.coordinates is None else f", coordinates={self.coordinates!r}"
        return f"LaplaceMechanism(l1_sensitivity={self.sensitivity!r}, epsilon={self.epsilon!r}{coords})"


class GaussianMechanism:
    """i.i.d. Gaussian noise, σ² = 2·ln(1.25/δ)·(Δ₂/ε)²: (ε, δ)-DP per step.

    This is the classic calibration (Dwork & Roth, Thm A.1; the paper's
    Lemma 2.3 / Theorem 4.6), proven for ε < 1. For ε ≥ 1 a
    :class:`PrivacyWarning` is issued; the mechanism is still built, and
    :class:`PrivacyLedger` checks the per-step claim against the exact
    (analytic) Gaussian privacy profile.
    """

    kind = "gaussian"
    norm = "l2"

    @classmethod
    def from_sensitivity(cls, sensitivity: Sensitivity, epsilon: float, delta: float | None = None) -> GaussianMechanism:
        """Calibrated to ``sensitivity.l2`` at the per-step (ε, δ)."""
        if delta is None:
            raise ConfigError("delta is required for the Gaussian mechanism (0 < delta < 1)")
        return cls(sensitivity.l2, epsilon, delta)

    def dp_event(self):
        """The ``dp_accounting`` event one step of this mechanism stands for."""
        import dp_accounting

        return dp_accounting.GaussianDpEvent(noise_multiplier=self.noise_multiplier)

    @classmethod
    def from_noise_multiplier(cls, l2_sensitivity: float, noise_multiplier: float, delta: float,
                              sigma: float | None = None) -> GaussianMechanism:
        """σ = noise_multiplier·Δ₂ (budget-first calibration; ``sigma``: that value as the caller computed it); the
        per-step ε is the exact one at ``delta`` (the analytic Gaussian profile), so the per-step claim holds for any ε."""
        mech = cls.__new__(cls)
        mech.sensitivity = check_positive("l2_sensitivity", l2_sensitivity)
        mech.delta = check_delta("delta", delta)
        mech.sigma = check_positive("noise_multiplier", noise_multiplier) * mech.sensitivity if sigma is None else float(sigma)
        mech.epsilon = _gaussian_epsilon(float(noise_multiplier), mech.delta)
        return mech

    def __init__(self, l2_sensitivity: float, epsilon: float, delta: float):
        self.sensitivity = check_positive("l2_sensitivity", l2_sensitivity)
        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_delta("delta", delta)
        if self.epsilon >= 1.0:
            warnings.warn(
                f"Gaussian mechanism with epsilon={self.epsilon:g} >= 1: the classic calibration "
                "sigma^2 = 2 ln(1.25/delta) (Delta2/epsilon)^2 is proven only for epsilon < 1; "
                "the privacy ledger verifies the per-step claim numerically",
                PrivacyWarning,
                stacklevel=2,
            )
        self.sigma = math.sqrt(2.0 * math.log(1.25 / self.delta)) * self.sensitivity / self.epsilon

    @property
    def noise_multiplier(self) -> float:
        """σ/Δ₂ = √(2 ln(1.25/δ))/ε: what the accountant composes."""
        return self.sigma / self.sensitivity

    @property
    def variance(self) -> float:
        return self.sigma**2

    @property
    def std(self) -> float:
        return self.sigma

    def per_step(self) -> tuple[float, float]:
        return (self.epsilon, self.delta)

    @property
    def grid(self) -> float:
        """γ, the grid of this mechanism's releases (:func:`sampler.grid_step` of σ; data-independent)."""
        return grid_step(self.sigma)

    def release(self, value: Any, rng: Any) -> tuple[np.ndarray, np.ndarray]:
        """(``value`` released on the grid with discrete Gaussian noise, the noise): :func:`sampler.gaussian_release`."""
        self.entries = int(np.asarray(value).size)
        return gaussian_release(value, self.sigma, self.sensitivity, rng)

    def receipt(self) -> dict[str, Any]:
        """What one release of this mechanism was, for the privacy receipt: the discrete Gaussian on the grid γ, its σ
        in grid steps (grown by the rounding), the L2 sensitivity it bounds, the values per release; its tail is cut
        where exp underflows (≈ 39.6σ: a δ below 10⁻³⁰⁰ a release, stated)."""
        m = getattr(self, "entries", None)
        return {
            "mechanism": "discrete_gaussian", "norm": "l2", "sensitivity": self.sensitivity, "coordinates": None,
            "noise_scale": self.sigma, "noise_multiplier": self.noise_multiplier, "epsilon": self.epsilon, "delta": self.delta,
            "grid": self.grid, "entries": m, "grid_scale": gaussian_grid_scale(self.sigma, self.sensitivity, m) if m else None,
            "tail": {"exact": False, "delta": GAUSSIAN_TAIL_DELTA, "pmf_relative_error": PMF_RELATIVE_ERROR}, "sampling": None,
        }

    def sample(self, rng: Any, size: Any = None) -> np.ndarray:
        """The noise of one release of ``size`` entries (on the grid γℤ; see :meth:`release`)."""
        return _noise_only(self, rng, size)

    def __repr__(self) -> str:
        return (
            f"GaussianMechanism(l2_sensitivity={self.sensitivity!r}, epsilon={self.epsilon!r}, "
            f"delta={self.delta!r})"
        )


from .staircase import StaircaseMechanism  # noqa: E402  (it uses the sampler and sensitivity only)

Mechanism = LaplaceMechanism | GaussianMechanism | StaircaseMechanism


@functools.lru_cache(maxsize=256)
def _gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    """One Gaussian step's exact ε at δ (dp-accounting's analytic profile); cached: a run re-calibrates every round."""
    import dp_accounting

    return float(dp_accounting.get_epsilon_gaussian(noise_multiplier, delta))


def _noise_only(mech: Mechanism, rng: Any, size: Any) -> np.ndarray:
    shape = () if size is None else size
    return mech.release(np.zeros(shape), rng)[1]

#: mechanism name → class; a new mechanism is one class with the same protocol and one entry here
MECHANISMS: dict[str, type] = {"laplace": LaplaceMechanism, "gaussian": GaussianMechanism, "staircase": StaircaseMechanism}
#: the kinds that are pure ε-DP per step and composed by summing ε (Laplace also has its exact PLD at δ > 0)
PURE_KINDS = ("laplace", "staircase")


def make_mechanism(
    kind: Kind, sensitivity: Sensitivity, epsilon: float, delta: float | None = None
) -> Mechanism:
    """Laplace or staircase (use ``sensitivity.l1``; ``delta`` must be None or 0) or Gaussian
    (uses ``sensitivity.l2``; ``delta`` in (0, 1) required)."""
    kind = check_kind(kind)
    if not isinstance(sensitivity, Sensitivity):
        raise ConfigError(f"sensitivity must be a Sensitivity, got {type(sensitivity).__name__}")
    if kind in PURE_KINDS and delta is not None and check_real("delta", delta) != 0.0:
        raise ConfigError(f"delta must be None or 0 for the {kind} mechanism, got {delta!r}")
    return MECHANISMS[kind].from_sensitivity(sensitivity, epsilon, delta)


# --------------------------------------------------------------------------- #
# randomness
# --------------------------------------------------------------------------- #


def zone_rng(seed: int, zone: int) -> np.random.Generator:
    """The seeded noise stream of one zone: ``Generator(PCG64(SeedSequence([seed, zone])))``.

    It depends only on the run seed and the zone id — not on the process,
    thread or host that runs the zone — so the same seed gives the same noise
    on every execution backend (serial, threads, processes, MPI), and distinct
    zones get statistically independent streams.
    """
    for name, value in (("seed", seed), ("zone", zone)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(zone)])))


#: what a run's noise is drawn from: "secret" (OS entropy, held by the zone alone) or "seeded" (the run seed)
NOISE_SOURCES = ("secret", "seeded")


def noise_source(seed: int | None) -> str:
    """``"seeded"`` when a run seed is given (a reproducible experiment), else ``"secret"``."""
    return "secret" if seed is None else "seeded"


def noise_rng(seed: int | None, zone: int, *, faults: InjectedFaults | None = None) -> NoiseSource:
    """THE noise source of a zone (every agent makes its source here, and nowhere else).

    ``seed`` None (the default of every run): the operating system's CSPRNG (``os.urandom``), read inside the
    zone's own process, so nobody else (the coordinator included) can know or replay it; nothing about it is
    kept (a resumed secret run draws fresh bits). A seed: the reproducible :func:`zone_rng` stream, for
    experiments; such a run is private only against observers who do not know the seed (docs/privacy.md,
    "Threat model"), and says so (``noise_source``). ``faults`` is test-only (:mod:`powerdp.privacy.faults`).
    """
    if isinstance(zone, bool) or not isinstance(zone, numbers.Integral) or zone < 0:
        raise ConfigError(f"zone must be a non-negative integer, got {zone!r}")
    return NoiseSource(None if seed is None else zone_rng(seed, zone), faults=faults)


def mechanism_to_dict(mech: Mechanism) -> dict[str, Any]:
    """A mechanism as plain JSON values (its kind and calibrated parameters), for checkpoints."""
    return {"kind": mech.kind, **{k: v for k, v in vars(mech).items()}}


def mechanism_from_dict(data: dict[str, Any]) -> Mechanism:
    """The inverse of :func:`mechanism_to_dict` (no code is run: a registered class, plain numbers)."""
    data = dict(data)
    kind = data.pop("kind", None)
    if kind not in MECHANISMS:
        raise ConfigError(f"unknown mechanism kind {kind!r} in a checkpoint")
    for k, v in data.items():
        if v is not None and not isinstance(v, (int, float)):
            raise ConfigError(f"mechanism field {k!r} in a checkpoint is not a number")
    mech = MECHANISMS[kind].__new__(MECHANISMS[kind])
    vars(mech).update(data)
    return mech


def noise_magnitude(xi: Any) -> float:
    """Σ_i |ξ_i| of one noise vector (the paper's eq. 29 sums this over zones and steps)."""
    return float(np.abs(np.asarray(xi, dtype=float)).sum())


