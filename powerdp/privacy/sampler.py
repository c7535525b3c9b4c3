"""THE noise sampler of powerdp: every Laplace and Gaussian release of every application is drawn here
(docs/privacy.md, "What the guarantee assumes of the implementation").

A release of a value vector v with noise scale s is

    γ · (round(v/γ) + Z),   γ = 2^(⌊log₂ s⌋ − GRID_BITS),

with Z integer noise from the discrete Laplace or discrete Gaussian distribution (Canonne, Kamath & Steinke
2020, Algorithms 2 and 3; OpenDP samples the same distributions). Every term is exact in binary64: v/γ and the
product by γ are exact (γ is a power of two), round() is exact, and round(v/γ) + Z is an integer, so the
released doubles lie on the grid γℤ whatever v is. The set of possible outputs does not depend on the data,
which closes Mironov's (2012) floating-point attack on fl(v + ξ).

Rounding moves each entry by at most γ/2, so two neighbouring inputs whose difference has norm Δ round to
points at most Δ + m·γ apart in L1 and Δ + √m·γ in L2 (m entries). The noise is calibrated to that larger
sensitivity: the scale s is multiplied by (Δ + m·γ)/Δ (Laplace) or (Δ + √m·γ)/Δ (Gaussian), so the noise
multiplier the ledger composes (scale over sensitivity) holds for the rounded release as well; the discrete
Laplace scale in grid units is rounded up to an integer. With GRID_BITS = 40 the rounding error is at most
s·2⁻⁴¹ and the scale grows by a relative m·2⁻⁴⁰/ε at most: the utility is unchanged to many digits.

Randomness (:class:`NoiseSource`): a secret run draws every bit from a cryptographic source: AES-256 in
counter mode keyed by 32 bytes of ``os.urandom`` (the ``cryptography`` package, when installed: ~9× faster here),
else ``os.urandom`` itself; nothing is kept, and a resumed secret run draws fresh bits. A seeded run draws from
``PCG64(SeedSequence([seed, zone]))`` (reproducible, not secret); its state is what a checkpoint keeps, and the
samplers consume only raw 64-bit words, so the same seed gives the same noise on every backend and after resume.

The samplers are vectorized: a batch draws every entry at once and loops only over the entries a rejection
step turned down (a few rounds of shrinking arrays).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..errors import ConfigError
from .faults import InjectedFaults

__all__ = [
    "NoiseSource", "GRID_BITS", "grid_step", "snap", "discrete_laplace", "discrete_gaussian", "laplace_release",
    "gaussian_release", "UNKNOWN_SENSITIVITY_MULTIPLIER", "as_source",
]

#: the grid lies GRID_BITS binary digits below the noise scale
GRID_BITS = 40
#: a caller that cannot name its sensitivity (noisy-admm's σ is given directly) is assumed to run at a noise
#: multiplier σ/Δ of at most this (the calibration refuses more: privacy.calibration.MAX_NOISE_MULTIPLIER)
UNKNOWN_SENSITIVITY_MULTIPLIER = 1e4

_E_MINUS_1 = math.exp(-1.0)
_TWO_M53 = 2.0**-53


class NoiseSource:
    """Where one zone's noise bits come from: ``generator`` None (secret: ``os.urandom``), or a seeded numpy
    Generator whose bit generator yields the raw words (reproducible).

    ``faults`` (test-only, :class:`~powerdp.privacy.faults.InjectedFaults`) selects a deliberately broken
    sampler for the audit's self-test; a real run has none.
    """

    def __init__(self, generator: np.random.Generator | None = None, faults: InjectedFaults | None = None):
        if generator is not None and not isinstance(generator, np.random.Generator):
            raise ConfigError(f"rng must be a numpy.random.Generator or None, got {type(generator).__name__}")
        self._gen = generator
        self._numpy: np.random.Generator | None = generator
        self.faults = faults
        self._stream = _keystream() if generator is None else None

    @property
    def seeded(self) -> bool:
        return self._gen is not None

    def raw(self, n: int) -> np.ndarray:
        """``n`` uniform 64-bit words."""
        if n <= 0:
            return np.empty(0, dtype=np.uint64)
        if self._gen is None:
            return np.frombuffer(self._stream(8 * n), dtype="<u8").astype(np.uint64, copy=False)
        return self._gen.bit_generator.random_raw(n)

    def uniform(self, n: int) -> np.ndarray:
        """``n`` uniforms on the 53-bit grid of [0, 1)."""
        return (self.raw(n) >> np.uint64(11)).astype(np.float64) * _TWO_M53

    def below(self, t: int, n: int) -> np.ndarray:
        """``n`` integers uniform on {0, …, t − 1} (exact: masked words, rejection of those ≥ t)."""
        if t == 1:
            return np.zeros(n, dtype=np.int64)
        mask = np.uint64((1 << (t - 1).bit_length()) - 1)
        out = np.empty(n, dtype=np.int64)
        todo = np.arange(n)
        while todo.size:
            r = self.raw(todo.size) & mask
            ok = r < np.uint64(t)
            out[todo[ok]] = r[ok].astype(np.int64)
            todo = todo[~ok]
        return out

    @property
    def state(self) -> dict[str, Any] | None:
        """What a checkpoint keeps: the seeded bit generator's state; None for a secret source (nothing to keep)."""
        return None if self._gen is None else self._gen.bit_generator.state

    @state.setter
    def state(self, value: dict[str, Any] | None) -> None:
        if value is not None and self._gen is not None:
            self._gen.bit_generator.state = value

    @property
    def numpy(self) -> np.random.Generator:
        """A numpy Generator on this source's stream: only the old sampler (a test-only fault) uses it."""
        if self._numpy is None:
            self._numpy = np.random.default_rng()
        return self._numpy

    def __repr__(self) -> str:
        return f"NoiseSource({'seeded' if self.seeded else 'secret'})"


def _keystream():
    """``n`` → n secret bytes: AES-256-CTR keyed from the OS (``cryptography``), else ``os.urandom``."""
    try:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError:  # the OS's CSPRNG directly (slower)
        return os.urandom
    encrypt = Cipher(algorithms.AES(os.urandom(32)), modes.CTR(os.urandom(16))).encryptor().update
    return lambda n: encrypt(bytes(n))


def as_source(rng: Any) -> NoiseSource:
    """A :class:`NoiseSource` for ``rng`` (a NoiseSource, or a numpy Generator taken as a seeded source)."""
    if isinstance(rng, NoiseSource):
        return rng
    if isinstance(rng, np.random.Generator):
        return NoiseSource(rng)
    raise ConfigError(f"rng must be a NoiseSource (powerdp.privacy.noise_rng) or a numpy.random.Generator, got {type(rng).__name__}")


# --------------------------------------------------------------------------- integer noise


def _geometric_e1(src: NoiseSource, n: int) -> np.ndarray:
    """Failures before the first success of Bernoulli(1 − e⁻¹) trials: P(V = v) = (1 − e⁻¹) e^(−v)."""
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        go = src.uniform(active.size) < _E_MINUS_1
        active = active[go]
        v[active] += 1
    return v


def _first_accepted(n: int, rate: float, attempt) -> np.ndarray:
    """The first ``n`` accepted values of a rejection sampler, in the order drawn: ``attempt(k)`` → (values, accepted)
    for k attempts; a batch is sized to the acceptance ``rate`` so one batch nearly always suffices."""
    parts, have = [], 0
    while have < n:
        need = n - have
        x, ok = attempt(int(need / rate * 1.05) + 16)
        x = x[ok][:need]
        parts.append(x)
        have += len(x)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def discrete_laplace(src: NoiseSource, t: int, n: int) -> np.ndarray:
    """``n`` draws of the discrete Laplace distribution with integer scale ``t``: P(Z = z) ∝ exp(−|z|/t).

    Canonne–Kamath–Steinke Algorithm 2 (s = 1): U uniform on {0..t−1} kept with probability exp(−U/t),
    V geometric (e⁻¹), X = U + tV, a sign; (−, 0) is rejected. No truncation: every integer is possible.
    One 64-bit word per attempt gives U (its low bits, values ≥ t rejected) and the sign (its top bit).
    """
    t = int(t)
    if t < 1:
        raise ValueError(f"discrete Laplace scale must be a positive integer, got {t}")
    bits = max((t - 1).bit_length(), 1)
    mask = np.uint64((1 << bits) - 1)
    rate = (t / 2.0**bits) * (1.0 - _E_MINUS_1)

    def attempt(k: int):
        w = src.raw(k)
        u = (w & mask).astype(np.int64)
        ok = (u < t) & (src.uniform(k) < np.exp(-u / t))
        signed = np.where((w >> np.uint64(63)).astype(bool), -u - 1, u)  # −u − 1 marks a negative sign (decoded below)
        return signed, ok

    s = _first_accepted(n, rate, attempt)
    neg = s < 0
    x = np.where(neg, -s - 1, s) + t * _geometric_e1(src, n)
    z = np.where(neg, -x, x)
    redo = np.flatnonzero(neg & (x == 0))  # (−, 0): rejected, drawn again
    if redo.size:
        z[redo] = discrete_laplace(src, t, redo.size)
    return z


def discrete_gaussian(src: NoiseSource, sigma: float, n: int) -> np.ndarray:
    """``n`` draws of the discrete Gaussian distribution: P(Z = z) ∝ exp(−z²/(2σ²)).

    Canonne–Kamath–Steinke Algorithm 3: Y discrete Laplace with scale t = ⌊σ⌋ + 1, kept with probability
    exp(−(|Y| − σ²/t)²/(2σ²)).
    """
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"discrete Gaussian sigma must be a positive number, got {sigma}")
    t = int(math.floor(sigma)) + 1
    s2 = float(sigma) * float(sigma)

    def attempt(k: int):
        y = discrete_laplace(src, t, k)
        a = np.abs(y).astype(np.float64) - s2 / t
        return y, src.uniform(k) < np.exp(-(a * a) / (2.0 * s2))

    return _first_accepted(n, 0.7, attempt)


# --------------------------------------------------------------------------- releases on the grid


def grid_step(scale: float) -> float:
    """γ = 2^(⌊log₂ scale⌋ − GRID_BITS): the grid of a release whose noise has this scale (data-independent)."""
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"noise scale must be a positive number, got {scale}")
    return math.ldexp(1.0, max(math.frexp(scale)[1] - 1 - GRID_BITS, -1000))


def snap(value: np.ndarray, gamma: float) -> np.ndarray:
    """round(v/γ) (an integer-valued float array; exact)."""
    return np.round(np.asarray(value, dtype=np.float64) / gamma)


def _grid_release(value, gamma: float, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(value, dtype=np.float64)
    zf = z.astype(np.float64).reshape(v.shape)
    return (snap(v, gamma) + zf) * gamma, zf * gamma


def _faulty(value, src: NoiseSource, draw) -> tuple[np.ndarray, np.ndarray] | None:
    """The test-only broken samplers (faults set): the old fl(v + numpy noise), or the noise switched off."""
    f = src.faults
    if f is None or (f.sampler == "grid" and not f.disable_noise):
        return None
    v = np.asarray(value, dtype=np.float64)
    xi = np.asarray(draw(src.numpy, v.shape), dtype=np.float64)
    if f.disable_noise:
        xi = np.zeros_like(xi)
    return v + xi, xi


def _size(value) -> int:
    return int(np.asarray(value).size)


def laplace_release(value, scale: float, l1_sensitivity: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """(γ(round(v/γ) + Z), γZ): ``value`` released with Laplace noise of scale ``scale`` calibrated to
    ``l1_sensitivity``; Z discrete Laplace, its scale grown by the rounding (module docstring)."""
    src = as_source(rng)
    bad = _faulty(value, src, lambda g, shape: g.laplace(0.0, scale, shape))
    if bad is not None:
        return bad
    m = _size(value)
    gamma = grid_step(scale)
    t = math.ceil(scale * (1.0 + m * gamma / l1_sensitivity) / gamma)
    return _grid_release(value, gamma, discrete_laplace(src, t, m))


def gaussian_release(value, sigma: float, l2_sensitivity: float | None, rng) -> tuple[np.ndarray, np.ndarray]:
    """(γ(round(v/γ) + Z), γZ): ``value`` released with Gaussian noise σ calibrated to ``l2_sensitivity``
    (None: σ/UNKNOWN_SENSITIVITY_MULTIPLIER is taken as the sensitivity); Z discrete Gaussian, σ grown by the rounding."""
    src = as_source(rng)
    bad = _faulty(value, src, lambda g, shape: g.normal(0.0, sigma, shape))
    if bad is not None:
        return bad
    m = _size(value)
    gamma = grid_step(sigma)
    sens = sigma / UNKNOWN_SENSITIVITY_MULTIPLIER if l2_sensitivity is None else l2_sensitivity
    sigma_grid = sigma * (1.0 + math.sqrt(m) * gamma / sens) / gamma
    return _grid_release(value, gamma, discrete_gaussian(src, sigma_grid, m))
