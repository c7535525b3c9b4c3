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
counter mode keyed by 32 bytes of ``os.urandom`` (the ``cryptography`` package: ~9× faster than ``os.urandom``,
which is the fallback). A seeded run draws from ``PCG64(SeedSequence([seed, zone]))`` (reproducible, not secret).
Either source's state (the key, counter and position; the generator's state) is what the zone's own private
checkpoint keeps, and the samplers consume only raw 64-bit words, so a resumed zone redraws the noise of every
round it repeats bit for bit (docs/privacy.md, "Resume"), and the same seed gives the same noise on every backend.

The samplers are compiled (:mod:`.discrete_kernels`, numba, loaded on the first draw): a release's words come
from the source in batches (:func:`_draw`) and the kernel runs the exact algorithms one draw at a time over them,
~0.017 µs a value, Laplace or Gaussian, rounding included (``benchmarks/sampler.py``, loaded).
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
    "gaussian_release", "UNKNOWN_SENSITIVITY_MULTIPLIER", "as_source", "warm_up", "laplace_grid_scale", "gaussian_grid_scale",
    "discrete_staircase", "staircase_release", "staircase_grid", "staircase_step_fraction", "staircase_variance",
    "STAIRCASE_MAX_EPSILON", "STAIRCASE_STEP_MARGIN",
]

#: the grid lies GRID_BITS binary digits below the noise scale
GRID_BITS = 40
#: a caller that cannot name its sensitivity (noisy-admm's σ is given directly) is assumed to run at a noise
#: multiplier σ/Δ of at most this (the calibration refuses more: privacy.calibration.MAX_NOISE_MULTIPLIER)
UNKNOWN_SENSITIVITY_MULTIPLIER = 1e4


class NoiseSource:
    """Where one zone's noise bits come from: ``generator`` None (secret: AES-256-CTR keyed from ``os.urandom``), or a
    seeded numpy Generator whose bit generator yields the raw words (reproducible).

    Either way :attr:`state` is what the zone's own private checkpoint keeps (a secret stream's key, counter and
    position; a seeded generator's state), so a resumed zone redraws the noise of the rounds it repeats bit for bit
    (docs/privacy.md, "Resume"). ``journal`` (a :class:`~powerdp.privacy.journal.ReleaseJournal`, set by the zone) sees
    every release the sampler makes and may ask for it to be drawn again with fresh bits (:meth:`accept`).

    ``faults`` (test-only, :class:`~powerdp.privacy.faults.InjectedFaults`) selects a deliberately broken
    sampler for the audit's self-test; a real run has none.
    """

    def __init__(self, generator: np.random.Generator | None = None, faults: InjectedFaults | None = None):
        if generator is not None and not isinstance(generator, np.random.Generator):
            raise ConfigError(f"rng must be a numpy.random.Generator or None, got {type(generator).__name__}")
        self._gen = generator
        self._numpy: np.random.Generator | None = generator
        self.faults = faults
        self._stream = _SecretStream.fresh() if generator is None else None
        self.journal = None  # the zone's ReleaseJournal (privacy/journal.py), when its releases are journaled

    @property
    def seeded(self) -> bool:
        return self._gen is not None

    @property
    def stream_id(self) -> str:
        """Which stream the draws come from (the journal's tag): ``"seeded"``, or a digest of a secret stream's key and
        counter (never the key itself), the same after a resume from its state."""
        return "seeded" if self._gen is not None else self._stream.id

    def raw(self, n: int) -> np.ndarray:
        """``n`` uniform 64-bit words."""
        if n <= 0:
            return np.empty(0, dtype=np.uint64)
        if self._gen is None:
            return self._stream.words(n)
        return self._gen.bit_generator.random_raw(n)

    @property
    def state(self) -> dict[str, Any] | None:
        """What the zone's private checkpoint keeps: the seeded bit generator's state, or the secret stream's key,
        counter and position (None only when the ``cryptography`` package is missing: ``os.urandom`` is not replayable)."""
        if self._gen is not None:
            return self._gen.bit_generator.state
        return self._stream.state

    @state.setter
    def state(self, value: dict[str, Any] | None) -> None:
        if value is None:
            return
        if self._gen is not None:
            if value.get("stream") == _SecretStream.KIND:  # a seeded run that diverged on an earlier resume went on secret
                self._gen, self._stream = None, _SecretStream.from_state(value)
            else:
                self._gen.bit_generator.state = value
        elif value.get("stream") == _SecretStream.KIND:
            self._stream = _SecretStream.from_state(value)
        else:
            raise ConfigError("a secret noise source cannot take a seeded generator's state (the run's seed setting changed)")

    def rekey(self) -> None:
        """Draw from a fresh secret stream from now on (a resumed zone whose replay diverged: privacy/journal.py)."""
        self._gen = None
        self._numpy = None
        self._stream = _SecretStream.fresh()

    def accept(self, released: np.ndarray) -> bool:
        """Whether the release just drawn may be used: True unless the journal found that a resumed zone's replay
        diverged from what it released before, in which case this source has been re-keyed and the caller draws
        the release again (fresh noise, charged anew: privacy/journal.py)."""
        journal = self.journal
        return True if journal is None else journal.check(released, self)

    @property
    def numpy(self) -> np.random.Generator:
        """A numpy Generator on this source's stream: only the old sampler (a test-only fault) uses it."""
        if self._numpy is None:
            self._numpy = np.random.default_rng()
        return self._numpy

    def __repr__(self) -> str:
        return f"NoiseSource({'seeded' if self.seeded else 'secret'})"


class _SecretStream:
    """Secret 64-bit words: AES-256 in counter mode, keyed by 32 bytes of ``os.urandom`` with a random initial counter
    block (the ``cryptography`` package), from ``position`` words on. The cipher encrypts a reused buffer of zeros
    straight into the output array (allocating a fresh plaintext per call cost more than the cipher). Without
    ``cryptography``, ``os.urandom`` itself (no state: not replayable)."""

    KIND = "aes-256-ctr"

    def __init__(self, key: bytes | None, counter: bytes | None, position: int = 0):
        import hashlib

        self.key, self.counter, self.position = key, counter, int(position)
        self.id = hashlib.blake2b(key + counter, digest_size=8).hexdigest() if key is not None else "urandom-" + os.urandom(8).hex()
        self._zeros = memoryview(b"")
        self._encrypt_into = None
        if key is not None:
            from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

            block = (int.from_bytes(counter, "big") + self.position // 2) % (1 << 128)  # 16-byte blocks: 2 words each
            self._encrypt_into = Cipher(algorithms.AES(key), modes.CTR(block.to_bytes(16, "big"))).encryptor().update_into
            if self.position % 2:  # the first word of a block already read
                self._encrypt(1)

    @classmethod
    def fresh(cls) -> _SecretStream:
        try:
            import cryptography.hazmat.primitives.ciphers  # noqa: F401
        except ImportError:  # the OS's CSPRNG directly (slower, and not replayable)
            return cls(None, None)
        return cls(os.urandom(32), os.urandom(16))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> _SecretStream:
        try:
            key, counter, position = bytes.fromhex(state["key"]), bytes.fromhex(state["counter"]), int(state["position"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"a checkpoint's noise stream is not readable ({type(exc).__name__}: {exc})") from None
        if len(key) != 32 or len(counter) != 16 or position < 0:
            raise ConfigError("a checkpoint's noise stream is not readable (key, counter or position out of range)")
        return cls(key, counter, position)

    @property
    def state(self) -> dict[str, Any] | None:
        if self.key is None:
            return None
        return {"stream": self.KIND, "key": self.key.hex(), "counter": self.counter.hex(), "position": self.position}

    def _encrypt(self, n: int) -> np.ndarray:
        if len(self._zeros) < 8 * n:
            self._zeros = memoryview(bytes(max(8 * n, 2 * len(self._zeros))))
        out = np.empty(8 * n + 15, dtype=np.uint8)  # update_into wants room for a block beyond the input
        self._encrypt_into(self._zeros[: 8 * n], out)
        return out[: 8 * n].view("<u8").astype(np.uint64, copy=False)

    def words(self, n: int) -> np.ndarray:
        if self._encrypt_into is None:
            return np.frombuffer(bytearray(os.urandom(8 * n)), dtype="<u8").astype(np.uint64, copy=False)
        self.position += n
        return self._encrypt(n)


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
#: the block T is the largest power of two ≤ scale/16 (discrete_kernels' docstring)
_BLOCK_FRACTION = 16
#: the Laplace's table of V: entries 0 … N − 2 and "V ≥ N − 1" (N = 2^10)
_LAPLACE_COLUMN_BITS = 10
#: the Laplace's V restarts (memoryless) at the first entry J whose level r^J falls below 2^-RESTART_BITS: every entry
#: below J weighs ≥ 2^46 of the 2⁶⁴ words and the region "V ≥ J" ≥ 2^51, so their rounding is below 2⁻⁴⁰ relative
_LAPLACE_RESTART_BITS = 13
#: the Gaussian's blocks reach this many σ (exp(−x) underflows to 0 before: no value beyond is ever kept)
_GAUSSIAN_REACH = 40.0
#: words a batch takes from the source per expected use (plus 64): a little spare saves a second batch
_SPARE = 1.1
_TWO_64 = 1 << 64


def _block_bits(scale: float) -> int:
    """log₂ of the block T: the largest power of two ≤ scale/16, at least 1."""
    return max(0, math.floor(scale / _BLOCK_FRACTION).bit_length() - 1)


def _integer_weights(real: list[float]) -> list[int]:
    """Integer weights ≈ real·2⁶⁴/Σreal rounded up (so none falls below its share but the largest, which gives up
    the excess: ≤ 2⁻⁵⁰ of it), each at least 1, summing to exactly 2⁶⁴."""
    total = math.fsum(real)
    weights = [max(1, math.ceil(r / total * 2.0**64)) for r in real]
    top = max(range(len(weights)), key=weights.__getitem__)
    weights[top] += _TWO_64 - sum(weights)
    return weights


def _alias(weights: list[int]) -> tuple[int, np.ndarray, np.ndarray]:
    """Vose's alias table of integer weights summing to 2⁶⁴, in integers (exact): (log₂ N, prob, alias), N ≥ 2
    the columns, so that a word b with column c = b's top log₂N bits gives entry c if (b mod 2⁶⁴/N) < prob[c],
    else alias[c]: entry j comes from exactly W_j of the 2⁶⁴ words."""
    bits = max(1, (len(weights) - 1).bit_length())
    n, cap = 1 << bits, _TWO_64 >> bits
    w = list(weights) + [0] * (n - len(weights))
    prob, alias = [cap] * n, list(range(n))
    small = [j for j in range(n) if w[j] < cap]
    large = [j for j in range(n) if w[j] >= cap]
    while small and large:
        s, g = small.pop(), large.pop()
        prob[s], alias[s] = w[s], g
        w[g] -= cap - w[s]
        (small if w[g] < cap else large).append(g)
    out = np.array(prob, dtype=np.uint64), np.array(alias, dtype=np.int64)
    for a in out:
        a.setflags(write=False)
    return bits, *out


@functools.lru_cache(maxsize=64)
def _laplace_table(t: int) -> tuple[int, int, np.ndarray, np.ndarray, int, float]:
    """(log₂T, log₂N, prob, alias, J, words a draw reads on average) of the discrete Laplace of scale t: V's alias
    table, P(V = j) = (1 − r)rʲ for j < N − 1 and rᴺ⁻¹ for the last entry ("V ≥ N − 1"), r = exp(−T/t), each weight
    rounded to 2⁻⁶⁴; and the restart J = ⌊13 ln 2 / (T/t)⌋ (at most N − 1): a look-up that gives an entry j ≥ J
    (the region "V ≥ J", its share of the table r^J ≥ 2⁻¹³, exact to 2⁻⁴¹ relative) adds J to V and reads another
    word. The geometric is memoryless, so V is geometric past J too: the far entries, whose 2⁻⁶⁴ rounding
    flattened the tail beyond ~28 scales (a δ of ~10⁻¹² a draw), are never taken for what they are. A run draws at
    a few scales over and over: cached."""
    bits = _block_bits(t)
    lam = 2.0**bits / t
    n = 1 << _LAPLACE_COLUMN_BITS
    real = [-math.expm1(-lam) * math.exp(-lam * j) for j in range(n - 1)] + [math.exp(-lam * (n - 1))]
    col_bits, prob, alias = _alias(_integer_weights(real))
    restart = max(1, min(n - 1, math.floor(_LAPLACE_RESTART_BITS * math.log(2.0) / lam)))
    kept = -math.expm1(-lam) / lam  # the U step's mean acceptance
    return bits, col_bits, prob, alias, restart, (1.0 / kept + 1.0) / (1.0 - 0.5 / t)


@functools.lru_cache(maxsize=64)
def _gaussian_table(sigma: float) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray, float]:
    """(log₂T, log₂N, prob, alias, δ, words a draw reads on average) of the discrete Gaussian: the blocks'
    alias table, W_k ≈ 2⁶⁴·M_k/ΣM (M_k = exp(−(kT/σ)²/2), blocks up to 40σ, each W_k ≥ 1) and
    δ_k = ln W_k + (kT/σ)²/2 − min_j(ln W_j + (jT/σ)²/2) (discrete_kernels' docstring). Cached."""
    bits = _block_bits(sigma)
    ratio = 2.0**bits / sigma  # T/σ
    blocks = math.ceil(_GAUSSIAN_REACH / ratio) + 1
    half_sq = [0.5 * (k * ratio) ** 2 for k in range(blocks)]
    weights = _integer_weights([math.exp(-h) for h in half_sq])
    level = [math.log(wk) + h for wk, h in zip(weights, half_sq, strict=True)]
    floor = min(level)
    col_bits, prob, alias = _alias(weights)
    delta = np.zeros(prob.size)
    delta[:blocks] = [v - floor for v in level]
    delta.setflags(write=False)
    # kept per proposal: c·(2S − 1)/(2T·2⁶⁴), c = exp(floor), S = Σ_{y≥0} exp(−y²/2σ²) ≈ σ√(π/2) + 1/2
    kept = min(1.0, math.exp(floor - 64 * math.log(2)) * 2 * sigma * math.sqrt(math.pi / 2) / 2.0 ** (bits + 1))
    return bits, col_bits, prob, alias, delta, 2.0 / max(kept, 0.3)


def _chunk_bits(block_bits: int) -> int:
    """The Bernoulli trial's first bits from a proposal's first word (above U's bits, below the sign)."""
    return min(53, 63 - block_bits)


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


_WARM = False


def warm_up() -> None:
    """Load the compiled kernels now (numba's import and its cached machine code: ~0.6 s of CPU the first time in a
    process), so that a zone's set-up pays for it and not its first private round (case13659pegase: round 0 took
    ~0.6 s longer than the next ones on each host). The draws come from a throwaway source seeded with 0 and are
    dropped: no zone's noise words are read, and nothing depends on any data."""
    global _WARM
    if _WARM:
        return
    src = NoiseSource(np.random.default_rng(0))
    laplace_release(np.zeros(2), 4.0, 1.0, src)
    gaussian_release(np.zeros(2), 4.0, 1.0, src)
    _WARM = True


def discrete_laplace(src: NoiseSource, t: int, n: int) -> np.ndarray:
    """``n`` draws of the discrete Laplace distribution with integer scale ``t``: P(Z = z) ∝ exp(−|z|/t).

    Canonne–Kamath–Steinke Algorithm 2 with a block length T, a power of two ≤ t/16: U uniform on {0..T−1} kept with
    probability exp(−U/t), V geometric (ratio exp(−T/t), from an alias table, restarted past its ~9 scales:
    :func:`_laplace_table`), |Z| = U + TV, a sign; (−, 0) is rejected. No truncation: every integer is possible, and
    every value's probability is the pmf's to 2⁻⁴⁰ relative per 9 scales of |z| (no flattened tail: the release is pure
    ε). Compiled (:mod:`.discrete_kernels` documents the words each step reads); ~2.1 words a draw.
    """
    t = int(t)
    if not 1 <= t < _MAX_SCALE:
        raise ValueError(f"discrete Laplace scale must be an integer in [1, 2^52), got {t}")
    bits, col_bits, prob, alias, restart, words = _laplace_table(t)
    return _draw(_kernels().fill_laplace, src, n, words, t, bits, _chunk_bits(bits), col_bits, prob, alias, restart)


def discrete_gaussian(src: NoiseSource, sigma: float, n: int) -> np.ndarray:
    """``n`` draws of the discrete Gaussian distribution: P(Z = z) ∝ exp(−z²/(2σ²)).

    Canonne–Kamath–Steinke Algorithm 3's rejection, from a Gaussian-shaped proposal: a block of T integers (T a
    power of two ≤ σ/16) picked from an alias table with weights W_k ≈ exp(−(kT)²/2σ²), U uniform in it, a sign;
    kept with probability c·exp(−y²/2σ²)/W_k: exact, ~97 % of proposals are kept, 2 words each (the proof is in
    :mod:`.discrete_kernels`). Compiled.
    """
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"discrete Gaussian sigma must be a positive number, got {sigma}")
    if sigma >= _MAX_SCALE:
        raise ValueError(f"discrete Gaussian sigma must be below 2^52, got {sigma}")
    sigma = float(sigma)
    bits, col_bits, prob, alias, delta, words = _gaussian_table(sigma)
    return _draw(_kernels().fill_gaussian, src, n, words, sigma, bits, _chunk_bits(bits), col_bits, prob, alias, delta)


def discrete_staircase(src: NoiseSource, d: int, r: int, epsilon: float, n: int) -> np.ndarray:
    """``n`` draws of the discrete staircase distribution: P(Z = z) ∝ b^L(z), b = exp(−ε), L(z) = ⌊|z|/d⌋ + [|z| mod d ≥ r].

    It is the integer form of Geng and Viswanath's staircase mechanism (IEEE Trans. Inf. Theory 2016): steps of d
    integers, the first r of each at the step's level and the rest one level down. For integers z, z' with |z − z'| ≤ d,
    |L(z) − L(z')| ≤ 1 (L is non-decreasing in |z| and L(|z| + d) = L(|z|) + 1; across 0 both |z|, |z'| ≤ d, where L is
    0 or 1), so adding Z to an integer query whose neighbours differ by at most d is ε-DP. Sampled exactly
    (:func:`~powerdp.privacy.discrete_kernels.fill_staircase`: a uniform u < d and a sign, u ≥ r kept with probability b,
    a geometric number of steps, (−, 0) rejected). No truncation; about 2/(r/d + b) + 2/(1 − b) words a draw.
    """
    d, r = int(d), int(r)
    if not (_STAIRCASE_MIN_EPSILON <= epsilon <= STAIRCASE_MAX_EPSILON and math.isfinite(epsilon)):
        raise ValueError(f"discrete staircase: ε per entry must lie in [{_STAIRCASE_MIN_EPSILON:g}, {STAIRCASE_MAX_EPSILON:g}], got {epsilon}")
    # |Z| = G·d + u stays below 2⁶² unless G reaches 2⁶²/d ≥ 2¹⁶/ε, a probability below e^(−65536)
    if not 1 <= d <= epsilon * 2.0**46 or not 1 <= r <= d:
        raise ValueError(f"discrete staircase: need 1 ≤ r ≤ d ≤ ε·2^46, got d = {d}, r = {r} at ε = {epsilon}")
    b = math.exp(-epsilon)
    words = 2.0 * (2.0 / (r / d + (1.0 - r / d) * b)) + 2.0 / (1.0 - b)
    return _draw(_kernels().fill_staircase, src, n, words, d, r, d.bit_length(), float(epsilon))


#: the staircase's ε per entry is at most this: a draw takes about d/r ≈ (2e^ε)^⅓ proposals (35 at ε = 10, 1 000 at
#: 20, 2·10⁷ at 50), and beyond a value's noise is far below any meaning; at least this: the grid's step d stays ≥ 2²⁰
STAIRCASE_MAX_EPSILON = 20.0
_STAIRCASE_MIN_EPSILON = 1e-6
#: the step's margin for the floating-point error of the released value: a neighbouring change moves the value the
#: zone computes (a product 2ω·d, a sum of loads) by Δ plus a few ulps of the value, and a shift of d + 1 grid units
#: would cross two levels (2ε; red team, 2026-11-29: 1 of 20 000 random neighbouring pairs of a 60-bus zone's load
#: total summed with np.sum). The step covers Δ(1 + 2⁻²⁰): errors up to 2⁻²⁰Δ, i.e. values up to ~10⁶·Δ summed to a
#: few hundred ulps, at a variance cost of (1 + 2⁻²⁰)²
STAIRCASE_STEP_MARGIN = 2.0**-20


def staircase_step_fraction(epsilon: float) -> float:
    """γ*, the fraction of each step at the step's level that minimises the variance (Geng & Viswanath's optimal
    staircase for the cost x²): −b/(1 − b) + (b − 2b² + 2b⁴ − b⁵)^⅓ / (2^⅓ (1 − b)²), b = exp(−ε); in (0, ½]."""
    if epsilon < 1e-3:  # the closed form cancels as b → 1; its expansion there (any fraction is private: only the variance moves)
        return 0.5 - epsilon / 12.0
    b = math.exp(-epsilon)
    g = -b / (1.0 - b) + (b - 2 * b**2 + 2 * b**4 - b**5) ** (1.0 / 3.0) / (2.0 ** (1.0 / 3.0) * (1.0 - b) ** 2)
    return min(0.5, max(g, 0.0))


def staircase_variance(sensitivity: float, epsilon: float) -> float:
    """The variance of the (continuous) optimal staircase noise for one entry of sensitivity Δ at ε:
    Δ²(2^(−2/3) b^(2/3) (1 + b)^(2/3) + b)/(1 − b)², b = exp(−ε) (Geng & Viswanath); 2Δ²/ε² as ε → 0, like Laplace."""
    b = math.exp(-epsilon)
    return sensitivity**2 * (2.0 ** (-2.0 / 3.0) * b ** (2.0 / 3.0) * (1.0 + b) ** (2.0 / 3.0) + b) / (1.0 - b) ** 2


def staircase_grid(sensitivity: float, epsilon: float) -> tuple[float, int, int]:
    """(γ, d, r) of a staircase release of entries of sensitivity Δ at ε each: the grid γ of the scale Δ/ε, the step
    d = ⌊Δ(1 + m)/γ⌋ + 1 grid units (two values at most Δ(1 + m) apart round to integers at most that far apart; m =
    :data:`STAIRCASE_STEP_MARGIN`, the floating-point error of the value's computation) and its upper part from
    r = max(1, round(γ*·d)) on. Data-independent."""
    gamma = grid_step(sensitivity / epsilon)
    d = math.floor(sensitivity * (1.0 + STAIRCASE_STEP_MARGIN) / gamma) + 1
    r = max(1, min(d, round(staircase_step_fraction(epsilon) * d)))
    return gamma, d, r


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
    """(round(v/γ) + Z)·γ and Z·γ (compiled, one pass: discrete_kernels.grid_release)."""
    v = np.asarray(value, dtype=np.float64)
    out, noise = np.empty(v.shape), np.empty(v.shape)
    _kernels().grid_release(v.reshape(-1), gamma, z, out.reshape(-1), noise.reshape(-1))
    return out, noise


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
    t = laplace_grid_scale(scale, l1_sensitivity, m)
    while True:
        out, noise = _grid_release(value, gamma, discrete_laplace(src, t, m))
        if src.accept(out):  # False only when a resumed zone's replay diverged: drawn again from fresh bits
            return out, noise


def gaussian_release(value, sigma: float, l2_sensitivity: float | None, rng) -> tuple[np.ndarray, np.ndarray]:
    """(γ(round(v/γ) + Z), γZ): ``value`` released with Gaussian noise σ calibrated to ``l2_sensitivity``
    (None: σ/UNKNOWN_SENSITIVITY_MULTIPLIER is taken as the sensitivity); Z discrete Gaussian, σ grown by the rounding."""
    src = as_source(rng)
    bad = _faulty(value, src, lambda g, shape: g.normal(0.0, sigma, shape))
    if bad is not None:
        return bad
    m = _size(value)
    gamma = grid_step(sigma)
    sigma_grid = gaussian_grid_scale(sigma, l2_sensitivity, m)
    while True:
        out, noise = _grid_release(value, gamma, discrete_gaussian(src, sigma_grid, m))
        if src.accept(out):  # False only when a resumed zone's replay diverged: drawn again from fresh bits
            return out, noise


def staircase_release(value, sensitivity: float, epsilon: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """(γ(round(v/γ) + Z), γZ): ``value`` released with discrete staircase noise, each entry ε-DP against a change of that
    entry by at most ``sensitivity`` (:func:`staircase_grid`, :func:`discrete_staircase`)."""
    src = as_source(rng)
    bad = _faulty(value, src, lambda g, shape: g.laplace(0.0, sensitivity / epsilon, shape))
    if bad is not None:
        return bad
    gamma, d, r = staircase_grid(sensitivity, epsilon)
    m = _size(value)
    while True:
        out, noise = _grid_release(value, gamma, discrete_staircase(src, d, r, epsilon, m))
        if src.accept(out):  # False only when a resumed zone's replay diverged: drawn again from fresh bits
            return out, noise


def laplace_grid_scale(scale: float, l1_sensitivity: float, entries: int) -> int:
    """The discrete Laplace's scale in grid steps for a release of ``entries`` values: s·(1 + m·γ/Δ₁)/γ rounded up, so
    the noise multiplier holds for the rounded values (module docstring)."""
    gamma = grid_step(scale)
    return math.ceil(scale * (1.0 + entries * gamma / l1_sensitivity) / gamma)


def gaussian_grid_scale(sigma: float, l2_sensitivity: float | None, entries: int) -> float:
    """The discrete Gaussian's σ in grid steps for a release of ``entries`` values: σ·(1 + √m·γ/Δ₂)/γ (None: the
    sensitivity is taken as σ/UNKNOWN_SENSITIVITY_MULTIPLIER)."""
    gamma = grid_step(sigma)
    sens = sigma / UNKNOWN_SENSITIVITY_MULTIPLIER if l2_sensitivity is None else l2_sensitivity
    return sigma * (1.0 + math.sqrt(entries) * gamma / sens) / gamma
