"""Compiled kernels of the integer noise (powerdp/privacy/sampler.py draws through them; nothing else should).

Both distributions are sampled exactly in the manner of Canonne, Kamath & Steinke, "The Discrete Gaussian for
Differential Privacy" (NeurIPS 2020): |Z| = U + T·V with U uniform on {0, …, T − 1} (T a power of two, about
scale/16 to scale/32, chosen by the caller, so U is a word's low bits), a block index V, a sign, and rejection.
V is read from one word through an alias table (Walker/Vose) whose integer weights W_j sum to 2⁶⁴, so
P(V = j) = W_j/2⁶⁴ *exactly*; the caller (sampler._tables) builds the tables.

* Discrete Laplace, P(Z = z) ∝ exp(−|z|/t), t a positive integer: CKS **Algorithm 2** with block length T: U is kept
  with probability exp(−U/t), V is geometric with ratio r = exp(−T/t), and (−, 0) is rejected. V from the table: an
  entry j below the restart J is V = j; an entry j ≥ J (the region "V ≥ J", its weight the sum of theirs) means
  "add J and read another word", exact because the geometric is memoryless. J is where r^J falls to 2⁻¹³
  (sampler._laplace_table), so every entry used for itself weighs ≥ 2⁴⁶ and the region ≥ 2⁵¹ of the 2⁶⁴ words:
  the integer rounding of the weights is below 2⁻⁴⁰ relative, and V = kJ + j has probability (R/2⁶⁴)^k·W_j/2⁶⁴,
  the geometric's to (k + 1)·2⁻⁴⁰. (The table's far entries, rounded up to 1 of 2⁶⁴ where their level is far
  smaller, would otherwise flatten the tail beyond ~28 scales: a δ of ~10⁻¹² a draw.) A kept (U, V) has probability
  ∝ exp(−(U + TV)/t) and each |z| has exactly one (U, V). With T ≤ t/16 the U step keeps ≥ 97 %.
* Discrete Gaussian, P(Z = z) ∝ exp(−z²/2σ²): CKS **Algorithm 3**'s rejection, from a proposal shaped like the
  Gaussian itself: block k (y ∈ [kT, (k + 1)T)) is picked with probability W_k/2⁶⁴ ≈ M_k/ΣM, M_k = exp(−(kT)²/2σ²)
  the density's largest value on the block (every block up to 40σ has W_k ≥ 1), U uniform, a sign; (−, 0) is
  rejected. So q(±y) = W_k/(2T·2⁶⁴) and y is kept with probability a(y) = c·exp(−y²/2σ²)/W_k, c = min_j W_j/M_j:
  a ≤ 1 since exp(−y²/2σ²) ≤ M_k ≤ W_k/c, and q·a = c·exp(−y²/2σ²)/(2T·2⁶⁴) for every y: the kept Y is exactly
  discrete Gaussian, whatever the rounding of the weights (the acceptance uses the W_k actually in the table). In
  binary64, a(y) = exp(−x), x = s(s/2 + k·T/σ) + δ_k, s = U/σ, δ_k = ln W_k + (kT/σ)²/2 − min_j(ln W_j + (jT/σ)²/2)
  ≥ 0 (= (y² − (kT)²)/2σ² + ln(W_k/(c·M_k))). About 97 % of proposals are kept (T ≤ σ/16: the density falls by at
  most a factor exp(−(2k + 1)T²/2σ²) across a block), and each costs 2 words. exp(−x) underflows beyond about
  39.6σ, where no value is kept (probability below e⁻⁷⁸⁰).

Every step reads whole 64-bit words of a buffer, in order (the stream's semantics; ``tests/test_sampler.py``
replays it in plain Python):

* a proposal's first word a: U = its low log₂T bits; the sign = its top bit (1: negative); the next
  m = min(53, 63 − log₂T) bits (above U's) are the first m bits of the uniform of the Bernoulli trial.
* a Bernoulli trial of probability p = exp(−x) (the binary64 value; the Laplace's x = U·(1/t), the Gaussian's x
  above, every operation in binary64): the uniform U' = 0.b₁b₂… has its first m bits from a, and the trial is
  U' < p exactly: when those bits equal p's first m (probability 2⁻ᵐ) the next word's top 53 bits follow, and so
  on. So the trial has probability p exactly, however small (exp itself is evaluated only when cheap bounds do
  not decide; the outcome is the same).
* V (Gaussian: the block k, read before the trial; Laplace: after a kept U): one word b per table look-up:
  column = b's top log₂N bits, entry = column if b's other bits (as an integer) < prob[column], else alias[column].

The batch kernels fill ``out[start:]`` draw after draw; when the buffer runs dry in the middle of a draw they stop
and return the position where that draw began, so the caller appends fresh words to the unread tail and the draw
is taken again from the same words: the draws are a pure function of the word sequence, whatever the buffer sizes.

numba compiles them on the first draw (cached: once per machine, in :func:`powerdp.files.kernel_cache.kernel_cache_dir`);
``import powerdp`` does not import numba.
"""

from __future__ import annotations

import math

import numpy as np

from ..files.kernel_cache import cached_njit

_TWO_P53 = 2.0**53
_SHIFT_53 = np.uint64(11)
_SIGN = np.uint64(63)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
#: exp(−i/64) for i = 0 … 64·64: the squeeze bounds of exp(−x) on [0, 64)
_EXP_STEPS = 64
_EXP_TABLE = np.array([math.exp(-i / _EXP_STEPS) for i in range(64 * _EXP_STEPS + 1)])
_BELOW = 1.0 - 2.0**-40
_ABOVE = 1.0 + 2.0**-40


@cached_njit(inline="always")
def _bernoulli_exp(w, pos, chunk, scale, x):
    """Bernoulli(p), p = exp(−x) (x ≥ 0) the binary64 value, exactly: the uniform U = 0.b₁b₂… has its first m bits
    from ``chunk`` (an integer below scale = 2ᵐ, m ≤ 53) and, only when those equal p's first m bits, 53 more from
    the top of each next word of w; U < p. On [0, 64) the bounds e_i(1 − d) ≤ exp(−x) ≤ e_i(1 − d + d²/2)
    (x = i/64 + d, e_i = exp(−i/64), widened by 2⁻⁴⁰ for rounding) decide nearly every trial without calling exp;
    the outcome is the one exp gives. (accepted, next position), or (False, −1) when w ran out."""
    head = float(np.int64(chunk))  # < 2⁵³: the signed conversion is exact (and cheaper than the unsigned one)
    if x < 64.0:
        i = int(x * _EXP_STEPS)
        d = x - i / _EXP_STEPS
        e = _EXP_TABLE[i] * scale
        if head + 1.0 <= e * (1.0 - d) * _BELOW:  # all of [U's first bits, + 2⁻ᵐ) lies below p
            return True, pos
        if head >= e * (1.0 - d + 0.5 * d * d) * _ABOVE:
            return False, pos
    rest = math.exp(-x) * scale  # p·2ᵐ (exact scaling), then the remaining bits 53 at a time
    while True:
        whole = math.floor(rest)
        if head != whole:
            return head < whole, pos
        rest = (rest - whole) * _TWO_P53  # exact: the fraction of a double, scaled by a power of two
        if rest == 0.0:  # p's bits ran out: U ≥ p
            return False, pos
        if pos >= w.size:
            return False, -1
        head = float(np.int64(w[pos] >> _SHIFT_53))
        pos += 1


@cached_njit(inline="always")
def _lookup(word, col_shift, low, prob, alias):
    """The alias table's entry for one word: column = the top bits, kept if the rest < prob[column]."""
    col = np.int64(word >> col_shift)
    return col if (word & low) < prob[col] else alias[col]


@cached_njit()
def fill_laplace(w, out, start, t, block_bits, chunk_bits, col_bits, prob, alias, restart):
    """Discrete Laplace draws of scale t (CKS Algorithm 2, block length T = 2^block_bits, V from the alias table
    prob/alias of 2^col_bits entries, restarted at entry ``restart``) into out[start:] from w: (draws done, position
    in w where the unfinished draw began)."""
    mask = (_ONE << np.uint64(block_bits)) - _ONE
    cmask = (_ONE << np.uint64(chunk_bits)) - _ONE
    cshift = np.uint64(block_bits)
    scale = 2.0**chunk_bits
    col_shift = np.uint64(64 - col_bits)
    low = (_ONE << col_shift) - _ONE
    tail = np.int64(restart)
    step = np.int64(1) << block_bits
    inv_t = 1.0 / t
    pos = 0
    for i in range(start, out.size):
        begin = pos
        while True:
            if pos >= w.size:
                return i, begin
            a = w[pos]
            pos += 1
            u = np.int64(a & mask)  # U uniform on {0, …, T − 1}
            keep, pos = _bernoulli_exp(w, pos, (a >> cshift) & cmask, scale, u * inv_t)  # kept w.p. exp(−U/t)
            if pos < 0:
                return i, begin
            if not keep:
                continue
            v = np.int64(0)
            while True:
                if pos >= w.size:
                    return i, begin
                j = _lookup(w[pos], col_shift, low, prob, alias)
                pos += 1
                if j < tail:
                    v += j
                    break
                v += tail  # the region V ≥ J: add J, then V again (memoryless)
            x = u + step * v
            negative = (a >> _SIGN) != _ZERO
            if not (negative and x == 0):  # (−, 0) is rejected
                break
        out[i] = -x if negative else x
    return out.size, pos


@cached_njit()
def fill_gaussian(w, out, start, sigma, block_bits, chunk_bits, col_bits, prob, alias, delta):
    """Discrete Gaussian draws (CKS Algorithm 3's rejection from the block proposal of the module docstring,
    T = 2^block_bits, the block from the alias table prob/alias, δ_k in delta) into out[start:] from w:
    (draws done, position in w where the unfinished draw began)."""
    mask = (_ONE << np.uint64(block_bits)) - _ONE
    cmask = (_ONE << np.uint64(chunk_bits)) - _ONE
    cshift = np.uint64(block_bits)
    scale = 2.0**chunk_bits
    col_shift = np.uint64(64 - col_bits)
    low = (_ONE << col_shift) - _ONE
    step = np.int64(1) << block_bits
    inv_sigma = 1.0 / sigma
    block = step * inv_sigma  # T/σ
    pos = 0
    for i in range(start, out.size):
        begin = pos
        while True:
            if pos + 1 >= w.size:
                return i, begin
            a = w[pos]
            k = _lookup(w[pos + 1], col_shift, low, prob, alias)
            pos += 2
            u = np.int64(a & mask)  # U uniform on {0, …, T − 1}
            y = u + step * k
            negative = (a >> _SIGN) != _ZERO
            if negative and y == 0:  # (−, 0) is rejected
                continue
            s = u * inv_sigma
            keep, pos = _bernoulli_exp(w, pos, (a >> cshift) & cmask, scale, s * (0.5 * s + k * block) + delta[k])
            if pos < 0:
                return i, begin
            if keep:
                break
        out[i] = -y if negative else y
    return out.size, pos


@cached_njit(inline="always")
def _trial_from_next_word(w, pos, x):
    """Bernoulli(exp(−x)) whose uniform starts with the top 53 bits of the word at ``pos`` (and reads more words when
    those tie): (outcome, next position), or (False, −1) when w ran out."""
    if pos >= w.size:
        return False, -1
    return _bernoulli_exp(w, pos + 1, w[pos] >> _SHIFT_53, _TWO_P53, x)


@cached_njit()
def fill_staircase(w, out, start, d, r, bits, eps):
    """Discrete staircase draws (module docstring of :mod:`.sampler`, ``discrete_staircase``): P(Z = z) ∝ b^L(z),
    b = exp(−eps), L(z) = ⌊|z|/d⌋ + [|z| mod d ≥ r], into out[start:] from w: (draws done, position in w where the
    unfinished draw began). A proposal's word a gives the sign (its top bit) and u = its low ``bits`` bits (2^bits > d;
    u ≥ d is rejected: u uniform on {0, …, d − 1}); u ≥ r is kept with probability b; then G, the number of
    successes of Bernoulli(b) trials before the first failure (geometric, P(G = j) = (1 − b)bʲ); |Z| = G·d + u, and
    (−, 0) is rejected. Each trial's uniform is the next word's top 53 bits (and more words when those tie)."""
    mask = (_ONE << np.uint64(bits)) - _ONE
    most = (np.int64(1) << 62) // d - 1  # G·d + u < 2⁶² (the caller keeps d ≤ ε·2⁴⁶: G beyond has probability < e^-65536)
    pos = 0
    for i in range(start, out.size):
        begin = pos
        while True:
            if pos >= w.size:
                return i, begin
            a = w[pos]
            pos += 1
            u = np.int64(a & mask)
            if u >= d:
                continue
            negative = (a >> _SIGN) != _ZERO
            if u >= r:  # the upper part of a step: kept with probability b
                keep, pos = _trial_from_next_word(w, pos, eps)
                if pos < 0:
                    return i, begin
                if not keep:
                    continue
            g = np.int64(0)
            while True:
                more, pos = _trial_from_next_word(w, pos, eps)
                if pos < 0:
                    return i, begin
                if not more:
                    break
                g += 1
            if g > most:  # never in practice (above); no wrap-around either way
                continue
            x = g * d + u
            if not (negative and x == 0):  # (−, 0) is rejected
                break
        out[i] = -x if negative else x
    return out.size, pos


@cached_njit()
def grid_release(v, gamma, z, out, noise):
    """out = (rint(v/γ) + z)·γ and noise = z·γ in one pass (γ a power of two, so v·(1/γ) is v/γ exactly; rint
    rounds half to even, as numpy's round): the same doubles as the numpy expression, without its temporaries."""
    inv = 1.0 / gamma
    for i in range(v.size):
        zf = float(z[i])
        out[i] = (np.rint(v[i] * inv) + zf) * gamma
        noise[i] = zf * gamma
