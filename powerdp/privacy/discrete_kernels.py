"""Compiled kernels of the integer noise (powerdp/privacy/sampler.py draws through them; nothing else should).

Both distributions are sampled exactly as in Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential
Privacy" (NeurIPS 2020): |Z| = U + T·V with U uniform on {0, …, T − 1} and V geometric, a sign, and rejection.

* Discrete Laplace, P(Z = z) ∝ exp(−|z|/t), t a positive integer: CKS **Algorithm 2** with its block length T
  (the paper's t) any positive integer, here T = ⌈t/8⌉: U is kept with probability exp(−U/t), V is geometric
  with P(V ≥ j) = exp(−jT/t), and (−, 0) is rejected. A kept (U, V) has probability ∝ exp(−(U + TV)/t) and
  each |z| has exactly one (U, V), so Z is exact; with T ≈ t/8 the U step keeps ~94 % (CKS's T = t: 63 %).
* Discrete Gaussian, P(Z = z) ∝ exp(−z²/2σ²): CKS **Algorithm 3**'s rejection from a Laplace-shaped proposal,
  with the proposal drawn as Algorithm 2 *without* its U step: Y = ±(U + TV), T = ⌈σ/8⌉, λ = T/σ,
  P(V ≥ j) = exp(−λj), (−, 0) rejected, so q(y) ∝ exp(−λ⌊|y|/T⌋). Y is kept with probability
  a(y) = exp(−(|y|/σ − 1)²/2 − U/σ) ≤ 1. Since λ⌊|y|/T⌋ = (|y| − U)/σ, q(y)·a(y) ∝ exp(−|y|/σ −
  (|y|/σ − 1)²/2) = exp(−y²/2σ² − 1/2): the kept Y is exactly discrete Gaussian (CKS Algorithm 3 is the case
  where the U step is kept and T = ⌊σ⌋ + 1). About 71 % of proposals are kept (Algorithm 3: 76 %, but each of
  its proposals costs 1.6 U steps).

Every step reads whole 64-bit words of a buffer, in order (the stream's semantics; ``tests/test_sampler.py``
replays it in plain Python):

* U: one word x; U = ⌊x·T/2⁶⁴⌋, the word rejected (the next one taken) while x·T mod 2⁶⁴ < 2⁶⁴ mod T
  (Lemire 2019: exactly uniform; a rejection has probability below T/2⁶⁴).
* a Bernoulli trial of probability p (the U step's exp(−U/t); the Gaussian's a(y)): one word whose top 53 bits k
  give the trial k·2⁻⁵³ < p, p the binary64 value of the exponential (exp itself is evaluated only when cheap
  bounds around it do not decide: the outcome is the same); the word's lowest bit is the sign.
* V: one word x per 16 levels: x < c₁₆ adds 16 and takes the next word, else V gains #{j ≤ 15: x < c_j}, with
  c_j = ⌊2⁶⁴·exp(−λj)⌋ (λ = T/t or T/σ) computed by the caller; the geometric is memoryless, so this is exact.

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
_SHIFT_53 = np.uint64(11)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_MASK_32 = np.uint64(0xFFFFFFFF)
_SHIFT_32 = np.uint64(32)
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
def _bernoulli_exp(word, x):
    """unit(word) < exp(−x) for x ≥ 0, exp(−x) the binary64 value. On [0, 64) the bounds
    e_i(1 − d) ≤ exp(−x) ≤ e_i(1 − d + d²/2) (x = i/64 + d, e_i = exp(−i/64), widened by 2⁻⁴⁰ for rounding)
    decide all but ~10⁻⁴ of the trials without calling exp; the outcome is the one exp would give."""
    u = _unit(word)
    if x < 64.0:
        i = int(x * _EXP_STEPS)
        d = x - i / _EXP_STEPS
        e = _EXP_TABLE[i]
        if u < e * (1.0 - d) * _BELOW:
            return True
        if u >= e * (1.0 - d + 0.5 * d * d) * _ABOVE:
            return False
    return u < math.exp(-x)


@njit(cache=True, inline="always")
def _mul_64x64(a, b):
    """(high, low) 64-bit halves of the 128-bit product a·b (unsigned)."""
    a_lo = a & _MASK_32
    a_hi = a >> _SHIFT_32
    b_lo = b & _MASK_32
    b_hi = b >> _SHIFT_32
    p1 = a_lo * b_hi
    p2 = a_hi * b_lo
    mid = ((a_lo * b_lo) >> _SHIFT_32) + (p1 & _MASK_32) + (p2 & _MASK_32)
    return a_hi * b_hi + (p1 >> _SHIFT_32) + (p2 >> _SHIFT_32) + (mid >> _SHIFT_32), a * b


@njit(cache=True, inline="always")
def _uniform_below(w, pos, block, reject_below):
    """U uniform on {0, …, block − 1} (Lemire): (U, next position), or (0, −1) when the buffer ran out."""
    if pos >= w.size:
        return np.int64(0), -1
    high, low = _mul_64x64(w[pos], block)
    pos += 1
    while low < reject_below:  # probability below block/2⁶⁴
        if pos >= w.size:
            return np.int64(0), -1
        high, low = _mul_64x64(w[pos], block)
        pos += 1
    return np.int64(high), pos


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
def fill_laplace(w, out, start, t, block, reject_below, thresholds):
    """Discrete Laplace draws of scale t (CKS Algorithm 2 with block length ``block``) into out[start:] from w:
    (draws done, position in w where the unfinished draw began)."""
    step = np.int64(block)
    pos = 0
    for i in range(start, out.size):
        begin = pos
        while True:
            u, pos = _uniform_below(w, pos, block, reject_below)
            if pos < 0 or pos >= w.size:
                return i, begin
            word = w[pos]
            pos += 1
            if not _bernoulli_exp(word, u / t):  # U kept with probability exp(−U/t)
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
def fill_gaussian(w, out, start, sigma, block, reject_below, thresholds):
    """Discrete Gaussian draws (CKS Algorithm 3's rejection from the staircase proposal of the module docstring)
    into out[start:] from w: (draws done, position in w where the unfinished draw began)."""
    step = np.int64(block)
    pos = 0
    for i in range(start, out.size):
        begin = pos
        while True:
            u, pos = _uniform_below(w, pos, block, reject_below)
            if pos < 0:
                return i, begin
            v, pos = _geometric(w, pos, thresholds)
            if pos < 0 or pos >= w.size:
                return i, begin
            word = w[pos]
            pos += 1
            y = u + step * v
            negative = (word & _ONE) != _ZERO
            if negative and y == 0:  # (−, 0) is rejected
                continue
            r = y / sigma - 1.0
            if _bernoulli_exp(word, 0.5 * r * r + u / sigma):  # kept with probability a(y)
                break
        out[i] = -y if negative else y
    return out.size, pos
