"""THE noise sampler of powerdp: every Laplace and Gaussian release of every application is drawn here
(docs/privacy.md, "What the guarantee assumes of the implementation").

A release of a value vector v with noise scale s is

    γ · (round(v/γ) + Z),   γ = 2^(⌊log₂ s⌋ − GRID_BITS),

with Z integer noise from the discrete Laplace or discrete Gaussian distribution (OpenDP samples the same
distributions), drawn exactly by Canonne, Kamath & Steinke's (2020) Algorithms 2 and 3 (:mod:`.discrete_kernels`).
Every term is exact in binary64: v/γ and the product by γ are exact (γ is a power of two), round() is exact,
and round(v/γ) + Z is an integer, so the released doubles lie on the grid γℤ whatever v is. The set of possible outputs does not depend on the data,
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

The samplers are compiled (:mod:`.discrete_kernels`, numba, loaded on the first draw): a release's words come
from the source in batches (:func:`_draw`) and the kernel runs the exact algorithms one draw at a time over them,
~0.03 µs (Laplace) and ~0.05 µs (Gaussian) a value (``benchmarks/sampler.py``).
"""

from __future__ import annotations

import functools
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
            return self._stream(n)
        return self._gen.bit_generator.random_raw(n)

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
    """``n`` → n secret 64-bit words (a writable array): AES-256-CTR keyed from the OS (``cryptography``), else
    ``os.urandom``. The cipher encrypts a reused buffer of zeros straight into the array (allocating a fresh
    plaintext per call cost more than the cipher)."""
    try:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError:  # the OS's CSPRNG directly (slower)
        return lambda n: np.frombuffer(bytearray(os.urandom(8 * n)), dtype="<u8").astype(np.uint64, copy=False)
    encrypt_into = Cipher(algorithms.AES(os.urandom(32)), modes.CTR(os.urandom(16))).encryptor().update_into
    zeros = memoryview(b"")

    def words(n: int) -> np.ndarray:
        nonlocal zeros
        if len(zeros) < 8 * n:
            zeros = memoryview(bytes(max(8 * n, 2 * len(zeros))))
        out = np.empty(8 * n + 15, dtype=np.uint8)  # update_into wants room for a block beyond the input
        encrypt_into(zeros[: 8 * n], out)
        return out[: 8 * n].view("<u8").astype(np.uint64, copy=False)

    return words


def as_source(rng: Any) -> NoiseSource:
    """A :class:`NoiseSource` for ``rng`` (a NoiseSource, or a numpy Generator taken as a seeded source)."""
    if isinstance(rng, NoiseSource):
        return rng
    if isinstance(rng, np.random.Generator):
        return NoiseSource(rng)
    raise ConfigError(f"rng must be a NoiseSource (powerdp.privacy.noise_rng) or a numpy.random.Generator, got {type(rng).__name__}")


# --------------------------------------------------------------------------- integer noise


#: the largest noise scale in grid steps (t or σ; the product's is ~2⁴⁰): |Z| = U + T·V reaches 2⁶³ (int64's end)
#: only past 2¹¹ scales, probability exp(−2048)
_MAX_SCALE = 2**52
#: the staircase's block T is the largest power of two ≤ scale/8 (discrete_kernels' docstring)
_BLOCK_FRACTION = 8
#: words a batch takes from the source per expected use (plus 64): a little spare saves a second batch
_SPARE = 1.1


@functools.lru_cache(maxsize=64)
def _staircase(scale: float) -> tuple[int, np.ndarray, float]:
    """The staircase of a noise scale (t or σ): log₂ of the block T (the largest power of two ≤ scale/8, at least
    1), the geometric's thresholds ⌊2⁶⁴·exp(−λj)⌋ (j = 1 … LEVELS, λ = T/scale; read-only) and λ. A run draws
    at a few scales over and over: cached."""
    from .discrete_kernels import LEVELS

    bits = max(0, math.floor(scale / _BLOCK_FRACTION).bit_length() - 1)
    lam = 2.0**bits / scale
    thresholds = np.array([int(math.ldexp(math.exp(-lam * j), 64)) for j in range(1, LEVELS + 1)], dtype=np.uint64)
    thresholds.setflags(write=False)
    return bits, thresholds, lam


def _block(draws: int, words_per_draw: float) -> int:
    """How many words a batch of ``draws`` takes from the source at a time: the expected use plus 10 % and 64."""
    return int(draws * words_per_draw * _SPARE) + 64


def _draw(fill, src: NoiseSource, n: int, words_per_draw: float, *args) -> np.ndarray:
    """``n`` draws of a compiled kernel (discrete_kernels.fill_*) over the source's words: a batch of words, then
    as many more batches as the kernel needs, the unread tail carried over (each draw reads its words in order);
    the words left in the last batch are dropped."""
    out = np.empty(n, dtype=np.int64)
    if n <= 0:
        return out
    done, words = 0, src.raw(_block(n, words_per_draw))
    while True:
        done, pos = fill(words, out, done, *args)
        if done == n:
            return out
        words = np.concatenate([words[pos:], src.raw(_block(n - done, words_per_draw))])


def _kernels():
    from . import discrete_kernels  # numba: imported (and compiled, or loaded from its cache) on the first draw

    return discrete_kernels


def discrete_laplace(src: NoiseSource, t: int, n: int) -> np.ndarray:
    """``n`` draws of the discrete Laplace distribution with integer scale ``t``: P(Z = z) ∝ exp(−|z|/t).

    Canonne–Kamath–Steinke Algorithm 2 with a block length T, a power of two ≤ t/8: U uniform on {0..T−1} kept with
    probability exp(−U/t), V geometric (ratio exp(−T/t)), |Z| = U + TV, a sign; (−, 0) is rejected. No
    truncation: every integer is possible. Compiled (:mod:`.discrete_kernels` documents the words each step reads).
    """
    t = int(t)
    if not 1 <= t < _MAX_SCALE:
        raise ValueError(f"discrete Laplace scale must be an integer in [1, 2^52), got {t}")
    bits, thresholds, lam = _staircase(t)
    kept = (1.0 - math.exp(-lam)) / lam  # the U step's mean acceptance
    words = (2.0 / kept + 1.0 / (1.0 - float(thresholds[-1]) * 2.0**-64)) / (1.0 - 0.5 / t)
    return _draw(_kernels().fill_laplace, src, n, words, t, bits, thresholds)


def discrete_gaussian(src: NoiseSource, sigma: float, n: int) -> np.ndarray:
    """``n`` draws of the discrete Gaussian distribution: P(Z = z) ∝ exp(−z²/(2σ²)).

    Canonne–Kamath–Steinke Algorithm 3's rejection, from the proposal ±(U + TV) (U uniform on {0..T−1}, T a
    power of two ≤ σ/8, V geometric with ratio exp(−T/σ)), kept with probability exp(−(|Y|/σ − 1)²/2 − U/σ):
    exact, and ~70 % of proposals are kept (the proof is in :mod:`.discrete_kernels`). Compiled.
    """
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"discrete Gaussian sigma must be a positive number, got {sigma}")
    if sigma >= _MAX_SCALE:
        raise ValueError(f"discrete Gaussian sigma must be below 2^52, got {sigma}")
    sigma = float(sigma)
    bits, thresholds, lam = _staircase(sigma)
    kept = 0.76 * (1.0 - math.exp(-lam)) / lam if sigma >= 1.0 else 0.3  # continuous estimate; small σ: a floor
    words = (2.0 + 1.0 / (1.0 - float(thresholds[-1]) * 2.0**-64)) / kept
    return _draw(_kernels().fill_gaussian, src, n, words, sigma, bits, thresholds)


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
