"""Compiled kernels of the integer noise (powerdp/privacy/sampler.py draws through them; nothing else should).

Both distributions are sampled exactly as in Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential
Privacy" (NeurIPS 2020): |Z| = U + T·V with U uniform on {0, …, T − 1} and V geometric, a sign, and rejection.
The block length T is a power of two (the caller picks it, ≈ scale/8 to scale/16), so U is a word's low bits.

* Discrete Laplace, P(Z = z) ∝ exp(−|z|/t), t a positive integer: CKS **Algorithm 2** with its block length
  (the paper's t) any positive integer T: U is kept with probability exp(−U/t), V is geometric with
  P(V ≥ j) = exp(−jT/t), and (−, 0) is rejected. A kept (U, V) has probability ∝ exp(−(U + TV)/t) and each |z|
  has exactly one (U, V), so Z is exact; with T ≤ t/8 the U step keeps ≥ 94 % (CKS's T = t: 63 %).
* Discrete Gaussian, P(Z = z) ∝ exp(−z²/2σ²): CKS **Algorithm 3**'s rejection from a Laplace-shaped proposal,
  the proposal drawn as Algorithm 2 *without* its U step: Y = ±(U + TV), λ = T/σ, P(V ≥ j) = exp(−λj),
  (−, 0) rejected, so q(y) ∝ exp(−λ⌊|y|/T⌋). Y is kept with probability a(y) = exp(−(|y|/σ − 1)²/2 − U/σ) ≤ 1.
  Since λ⌊|y|/T⌋ = (|y| − U)/σ, q(y)·a(y) ∝ exp(−|y|/σ − (|y|/σ − 1)²/2) = exp(−y²/2σ² − 1/2): the kept Y is
  exactly discrete Gaussian. (CKS Algorithm 3 is the case T = ⌊σ⌋ + 1 with the U step kept; its acceptance is
  76 % but each proposal costs 1.6 U steps. Here ~70 % of proposals are kept and each costs ~3.2 words.)

Every step reads whole 64-bit words of a buffer, in order (the stream's semantics; ``tests/test_sampler.py``
replays it in plain Python):

* U: the low log₂T bits of one word.
* a Bernoulli trial of probability p (the Laplace's U step, exp(−U·(1/t)); the Gaussian's a(y), computed as
  exp(−(r²/2 + U·(1/σ))) with r = |y|·(1/σ) − 1, every operation in binary64): the next word's top 53 bits are
  the first bits of a uniform U, and the trial is U < p exactly: when those bits equal p's first 53 (probability
  2⁻⁵³) the next word's top 53 bits follow, and so on. So the trial has probability p exactly, the binary64
  value, however small (exp itself is evaluated only when cheap bounds do not decide; the outcome is the same).
  The same word's lowest bit is the sign.
* V (after the trial for the Laplace, before it for the Gaussian): one word x per 16 levels: x < c₁₆ adds 16 and
  takes the next word, else V gains #{j ≤ 15: x < c_j}, with c_j = ⌊2⁶⁴·exp(−λj)⌋ (λ = T/t or T/σ) computed by
  the caller; the geometric is memoryless, so this is exact up to the rounding of c_j (below 2⁻⁶⁴).

The batch kernels fill ``out[start:]`` draw after draw; when the buffer runs dry in the middle of a draw they stop
and return the position where that draw began, so the caller appends fresh words to the unread tail and the draw
is taken again from the same words: the draws are a pure function of the word sequence, whatever the buffer sizes.

numba compiles them on the first draw (``cache=True``: once per machine); ``import powerdp`` does not import numba.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: levels of V decided by one word (the thresholds array the caller passes has this length)
LEVELS = 16
_TWO_M53 = 2.0**-53
_TWO_P53 = 2.0**53
_SHIFT_53 = np.uint64(11)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
#: exp(−i/64) for i = 0 … 64·64: the squeeze bounds of exp(−x) on [0, 64)
_EXP_STEPS = 64
_EXP_TABLE = np.array([math.exp(-i / _EXP_STEPS) for i in range(64 * _EXP_STEPS + 1)])
_BELOW = 1.0 - 2.0**-40
_ABOVE = 1.0 + 2.0**-40


@njit(cache=True, inline="always")
def _unit(word):
    """The top 53 bits of a word as k·2⁻⁵³."""
    return float(word >> _SHIFT_53) * _TWO_M53


@njit(cache=True, inline="always")
def _bernoulli_exp(w, pos, word, x):
    """Bernoulli(p), p = exp(−x) (x ≥ 0) the binary64 value, exactly: the uniform U = 0.b₁b₂… has its first 53
    bits from ``word``'s top bits and, only when those equal p's first 53 bits (probability 2⁻⁵³), 53 more from
    each next word of w; U < p. On [0, 64) the bounds e_i(1 − d) ≤ exp(−x) ≤ e_i(1 − d + d²/2) (x = i/64 + d,
    e_i = exp(−i/64), widened by 2⁻⁴⁰ for rounding) decide nearly every trial without calling exp; the outcome
    is the one exp gives. (accepted, next position), or (False, −1) when w ran out."""
    u = _unit(word)
    if x < 64.0:
        i = int(x * _EXP_STEPS)
        d = x - i / _EXP_STEPS
        e = _EXP_TABLE[i]
        if u + _TWO_M53 <= e * (1.0 - d) * _BELOW:  # all of [u, u + 2⁻⁵³) lies below p
            return True, pos
        if u >= e * (1.0 - d + 0.5 * d * d) * _ABOVE:
            return False, pos
    rest = math.exp(-x) * _TWO_P53  # p·2⁵³ (exact scaling), then the remaining bits 53 at a time
    chunk = float(word >> _SHIFT_53)
    while True:
        whole = math.floor(rest)
        if chunk != whole:
            return chunk < whole, pos
        rest = (rest - whole) * _TWO_P53  # exact: the fraction of a double, scaled by a power of two
        if rest == 0.0:  # p's bits ran out: U ≥ p
            return False, pos
        if pos >= w.size:
            return False, -1
        chunk = float(w[pos] >> _SHIFT_53)
        pos += 1


@njit(cache=True, inline="always")
def _geometric(w, pos, thresholds):
    """V with P(V ≥ j) = thresholds[j − 1]/2⁶⁴, LEVELS levels per word: (V, next position), or (0, −1)."""
    v = 0
    last = thresholds[LEVELS - 1]
    while pos < w.size:
        x = w[pos]
        pos += 1
        if x < last:
            v += LEVELS
            continue
        below = 0
        for j in range(LEVELS - 1):
            below += x < thresholds[j]
        return v + below, pos
    return 0, -1


@njit(cache=True)
def fill_laplace(w, out, start, t, block_bits, thresholds):
    """Discrete Laplace draws of scale t (CKS Algorithm 2 with block length T = 2^block_bits) into out[start:]
    from w: (draws done, position in w where the unfinished draw began)."""
    mask = (_ONE << np.uint64(block_bits)) - _ONE
    step = np.int64(1) << block_bits
    inv_t = 1.0 / t
    pos = 0
    for i in range(start, out.size):
        begin = pos
        while True:
            if pos + 1 >= w.size:
                return i, begin
            u = np.int64(w[pos] & mask)  # U uniform on {0, …, T − 1}
            word = w[pos + 1]
            pos += 2
            keep, pos = _bernoulli_exp(w, pos, word, u * inv_t)  # U kept with probability exp(−U/t)
            if pos < 0:
                return i, begin
            if not keep:
                continue
            v, pos = _geometric(w, pos, thresholds)
            if pos < 0:
                return i, begin
            x = u + step * v
            negative = (word & _ONE) != _ZERO
            if not (negative and x == 0):  # (−, 0) is rejected
                break
        out[i] = -x if negative else x
    return out.size, pos


@njit(cache=True)
def fill_gaussian(w, out, start, sigma, block_bits, thresholds):
    """Discrete Gaussian draws (CKS Algorithm 3's rejection from the staircase proposal of the module docstring,
    T = 2^block_bits) into out[start:] from w: (draws done, position in w where the unfinished draw began)."""
    mask = (_ONE << np.uint64(block_bits)) - _ONE
    step = np.int64(1) << block_bits
    inv_sigma = 1.0 / sigma
    pos = 0
    for i in range(start, out.size):
        begin = pos
        while True:
            if pos >= w.size:
                return i, begin
            u = np.int64(w[pos] & mask)  # U uniform on {0, …, T − 1}
            v, pos = _geometric(w, pos + 1, thresholds)
            if pos < 0 or pos >= w.size:
                return i, begin
            word = w[pos]
            pos += 1
            y = u + step * v
            negative = (word & _ONE) != _ZERO
            if negative and y == 0:  # (−, 0) is rejected
                continue
            r = y * inv_sigma - 1.0
            keep, pos = _bernoulli_exp(w, pos, word, 0.5 * r * r + u * inv_sigma)  # kept with probability a(y)
            if pos < 0:
                return i, begin
            if keep:
                break
        out[i] = -y if negative else y
    return out.size, pos
