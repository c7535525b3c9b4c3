"""The one noise sampler (powerdp/privacy/sampler.py): exact distributions, a data-independent output grid,
reproducible seeded streams, secret bits that are not numpy's (docs/privacy.md, "What the guarantee assumes")."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import powerdp.privacy.sampler as sampler_module
from powerdp.errors import ConfigError
from powerdp.privacy import GaussianMechanism, LaplaceMechanism, noise_rng
from powerdp.privacy.faults import InjectedFaults
from powerdp.privacy.sampler import (
    GRID_BITS,
    NoiseSource,
    discrete_gaussian,
    discrete_laplace,
    gaussian_release,
    grid_step,
    laplace_release,
)

DRAWS = 1_000_000


def _laplace_pmf(z: np.ndarray, t: float) -> np.ndarray:
    return (1 - math.exp(-1 / t)) / (1 + math.exp(-1 / t)) * np.exp(-np.abs(z) / t)


def _gaussian_pmf(z: np.ndarray, sigma: float) -> np.ndarray:
    k = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41)
    norm = np.exp(-(k.astype(float) ** 2) / (2 * sigma**2)).sum()
    return np.exp(-(z.astype(float) ** 2) / (2 * sigma**2)) / norm


def _chi2_pvalue(draws: np.ndarray, pmf, support: int) -> float:
    """χ² goodness of fit on the cells −support..support, the two tails pooled into one cell each."""
    cells = np.arange(-support, support + 1)
    observed = np.array([(draws < -support).sum(), *np.bincount(np.clip(draws, -support - 1, support + 1) + support + 1,
                                                                  minlength=2 * support + 3)[1:-1], (draws > support).sum()])
    p_in = pmf(cells)
    tail = (1.0 - p_in.sum()) / 2
    expected = len(draws) * np.concatenate([[tail], p_in, [tail]])
    keep = expected > 5
    return float(stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()).pvalue)


@pytest.mark.parametrize("t", [1, 3, 10, 37])  # 37: blocks of T = 4 (λ = 4/37), the others T = 1
def test_discrete_laplace_matches_its_pmf(t):
    z = discrete_laplace(noise_rng(11, t), t, DRAWS)
    assert z.dtype == np.int64
    assert _chi2_pvalue(z, lambda k: _laplace_pmf(k, t), 6 * t) > 1e-3


@pytest.mark.parametrize("sigma", [0.8, 2.5, 7.3, 23.7])  # 23.7: blocks of T = 2
def test_discrete_gaussian_matches_its_pmf(sigma):
    z = discrete_gaussian(noise_rng(1, 8), sigma, DRAWS)
    assert _chi2_pvalue(z, lambda k: _gaussian_pmf(k, sigma), int(5 * sigma) + 1) > 1e-3


def test_a_biased_sampler_fails_the_same_test():
    """The χ² test can fail: a Laplace sampler whose scale is 2 % off is rejected at 10⁶ draws."""
    z = discrete_laplace(noise_rng(11, 3), 3, DRAWS)
    assert _chi2_pvalue(z, lambda k: _laplace_pmf(k, 3.06), 18) < 1e-6


def test_at_the_product_scale_the_noise_is_the_continuous_one():
    """At the grid the product uses (scale 2⁴⁰ grid steps) the draws divided by the scale are Laplace / normal (KS)."""
    t = 2**GRID_BITS + 12345
    lap = discrete_laplace(noise_rng(13, 0), t, DRAWS) / t
    assert stats.kstest(lap, stats.laplace.cdf).pvalue > 1e-3
    sigma = 1.37 * 2.0**GRID_BITS
    gau = discrete_gaussian(noise_rng(14, 0), sigma, DRAWS) / sigma
    assert stats.kstest(gau, stats.norm.cdf).pvalue > 1e-3


def _opendp_vector(kind: str, scale: float, n: int) -> np.ndarray:
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=int))
    if kind == "laplace":
        meas = dp.m.make_laplace(domain, dp.l1_distance(T=int), scale=scale)
    else:
        meas = dp.m.make_gaussian(domain, dp.l2_distance(T=int), scale=scale)
    return np.asarray(meas([0] * n), dtype=np.int64)


def _two_sample_chi2(a: np.ndarray, b: np.ndarray, support: int) -> float:
    edges = np.arange(-support - 0.5, support + 1.5)
    ca = np.histogram(np.clip(a, -support, support), edges)[0]
    cb = np.histogram(np.clip(b, -support, support), edges)[0]
    keep = (ca + cb) > 10
    return float(stats.chi2_contingency(np.vstack([ca[keep], cb[keep]]))[1])


def _compare_with_opendp(n_opendp: int) -> None:
    ours_l = discrete_laplace(noise_rng(21, 0), 3, DRAWS)
    ours_g = discrete_gaussian(noise_rng(22, 0), 2.5, DRAWS)
    theirs_l = _opendp_vector("laplace", 3.0, n_opendp)
    theirs_g = _opendp_vector("gaussian", 2.5, n_opendp)
    assert _two_sample_chi2(ours_l, theirs_l, 18) > 1e-3
    assert _two_sample_chi2(ours_g, theirs_g, 12) > 1e-3
    # and the comparison has power: OpenDP's Laplace at scale 3 is not our Gaussian
    assert _two_sample_chi2(ours_g, theirs_l, 12) < 1e-6


def test_same_distribution_as_opendp():
    """OpenDP (exact samplers in Rust) as the oracle: 10⁶ of ours against 10⁵ of OpenDP's (~5 s each)."""
    _compare_with_opendp(100_000)


@pytest.mark.slow
def test_same_distribution_as_opendp_at_a_million_draws():
    _compare_with_opendp(DRAWS)


# ----------------------------------------------------------------------------- releases on the grid


@pytest.mark.parametrize("mech", [LaplaceMechanism(0.3, 0.5, coordinates=3), GaussianMechanism(0.3, 0.5, 1e-5)])
def test_every_release_lies_on_a_grid_that_does_not_depend_on_the_value(mech):
    rng = noise_rng(5, 0)
    gamma = mech.grid
    assert gamma == grid_step(mech.scale if mech.kind == "laplace" else mech.sigma)
    for v in (np.full(50, 0.1), np.full(50, 0.1 + 1e-13), np.linspace(-3, 1e3, 50), np.full(50, math.pi * 1e-7)):
        out, xi = mech.release(v, rng)
        steps = out / gamma
        assert np.array_equal(steps, np.round(steps))  # exactly on γℤ, whatever v is
        assert np.array_equal(xi / gamma, np.round(xi / gamma))
        assert np.max(np.abs(out - xi - v)) <= gamma / 2  # the value moved by its rounding only


def test_the_grid_sits_grid_bits_below_the_scale_and_the_rounding_is_accounted():
    for scale in (1e-6, 0.3, 1.0, 2.0, 1234.5):
        g = grid_step(scale)
        assert g == 2.0 ** math.floor(math.log2(scale)) * 2.0**-GRID_BITS
    # the discrete scale covers the sensitivity grown by the rounding: t·γ ≥ b (Δ₁ + mγ)/Δ₁
    calls = {}

    def fake_dlap(src, t, n):
        calls["t"] = t
        return np.zeros(n, dtype=np.int64)

    import powerdp.privacy.sampler as sampler

    orig = sampler.discrete_laplace
    sampler.discrete_laplace = fake_dlap
    try:
        scale, sens, m = 0.7, 1e-9, 1000  # a tiny sensitivity: the rounding term m·γ is visible
        laplace_release(np.zeros(m), scale, sens, noise_rng(0, 0))
    finally:
        sampler.discrete_laplace = orig
    gamma = grid_step(scale)
    assert calls["t"] * gamma >= scale * (sens + m * gamma) / sens
    assert calls["t"] * gamma <= scale * (sens + m * gamma) / sens + gamma


def test_seeded_streams_replay_and_resume_exactly():
    a, b = noise_rng(7, 2), noise_rng(7, 2)
    v = np.linspace(-1, 1, 100)
    first = gaussian_release(v, 0.5, 0.1, a)[0]
    assert np.array_equal(first, gaussian_release(v, 0.5, 0.1, b)[0])
    state = a.state
    nxt = laplace_release(v, 0.5, 0.1, a)[0]
    resumed = noise_rng(7, 2)
    resumed.state = state  # what a checkpoint keeps
    assert np.array_equal(laplace_release(v, 0.5, 0.1, resumed)[0], nxt)
    assert not np.array_equal(gaussian_release(v, 0.5, 0.1, noise_rng(7, 3))[0], first)  # another zone, another stream


def test_secret_sources_keep_nothing_and_are_not_numpy():
    a, b = noise_rng(None, 0), noise_rng(None, 0)
    assert not a.seeded and a.state is None
    a.state = None  # resuming a secret run restores nothing
    assert not np.array_equal(a.raw(8), b.raw(8))
    assert a._gen is None  # no numpy bit generator behind it (AES-CTR keyed by os.urandom, or os.urandom)


def test_sources_and_arguments_are_checked():
    with pytest.raises(ConfigError, match="Generator"):
        NoiseSource(np.random.RandomState(0))
    with pytest.raises(ConfigError, match="NoiseSource"):
        laplace_release(np.zeros(2), 1.0, 1.0, "seed")
    with pytest.raises(ConfigError, match="zone"):
        noise_rng(None, -1)
    with pytest.raises(ValueError):
        discrete_laplace(noise_rng(0, 0), 0, 3)
    with pytest.raises(ValueError):
        discrete_gaussian(noise_rng(0, 0), -1.0, 3)


def test_the_old_sampler_is_a_test_only_fault():
    """InjectedFaults(sampler="numpy") brings back fl(v + numpy noise): its outputs leave the grid."""
    mech = LaplaceMechanism(0.3, 0.5)
    v = np.full(100, 0.1)
    out, _ = mech.release(v, noise_rng(1, 0, faults=InjectedFaults(sampler="numpy")))
    assert not np.array_equal(out / mech.grid, np.round(out / mech.grid))
    off, xi = mech.release(v, noise_rng(1, 0, faults=InjectedFaults(disable_noise=True)))
    assert np.array_equal(off, v) and not xi.any()
    with pytest.raises(ConfigError, match="sampler"):
        InjectedFaults(sampler="mt19937")


# ----------------------------------------------------------------------------- the compiled kernels' word use


def _trial(words, word: int, p: float) -> bool:
    """U < p exactly, U's bits 53 at a time (the top 53 of each word, the first from ``word``): interval logic."""
    lo, width, k = Fraction(0), Fraction(1), word >> 11
    while True:
        width /= 2**53
        lo += k * width  # U ∈ [lo, lo + width)
        if lo + width <= p:
            return True
        if lo >= p:
            return False
        k = next(words) >> 11


def _thresholds(lam: float) -> list[int]:
    return [int(math.ldexp(math.exp(-lam * j), 64)) for j in range(1, 17)]


def _block_bits(scale: float) -> int:
    return max(0, math.floor(scale / 8).bit_length() - 1)


def _geometric(words, c: list[int]) -> int:
    v = 0
    while True:
        x = next(words)
        if x < c[15]:
            v += 16
            continue
        return v + sum(x < cj for cj in c[:15])


def _reference_laplace(words, t: int) -> int:
    """discrete_kernels' documented word use for one discrete Laplace draw, in plain Python (exp every time)."""
    bits = _block_bits(t)
    c = _thresholds(2.0**bits / t)
    while True:
        u = next(words) & ((1 << bits) - 1)
        word = next(words)
        if not _trial(words, word, math.exp(-(u * (1.0 / t)))):
            continue
        x = u + _geometric(words, c) * 2**bits
        if word & 1 and x == 0:
            continue
        return -x if word & 1 else x


def _reference_gaussian(words, sigma: float) -> int:
    bits = _block_bits(sigma)
    c = _thresholds(2.0**bits / sigma)
    inv = 1.0 / sigma
    while True:
        u = next(words) & ((1 << bits) - 1)
        y = u + _geometric(words, c) * 2**bits
        word = next(words)
        if word & 1 and y == 0:
            continue
        r = y * inv - 1.0
        if _trial(words, word, math.exp(-(0.5 * r * r + u * inv))):
            return -y if word & 1 else y


def _stream(seed: int):
    src = noise_rng(seed, 0)
    while True:
        yield from (int(w) for w in src.raw(4096))


@pytest.mark.parametrize("kind, scale", [("laplace", 1), ("laplace", 37), ("laplace", 2**GRID_BITS + 12345),
                                         ("gaussian", 0.8), ("gaussian", 23.7), ("gaussian", 1.37 * 2.0**GRID_BITS)])
def test_the_compiled_kernels_draw_what_their_documented_word_use_gives(kind, scale):
    """A plain-Python replay of discrete_kernels' word semantics (exp evaluated every time, no bounds) on the same
    seeded words gives the same draws: the compiled path, its exp bounds and its batching change nothing."""
    n = 3000
    draw, ref = (discrete_laplace, _reference_laplace) if kind == "laplace" else (discrete_gaussian, _reference_gaussian)
    got = draw(noise_rng(41, 0), scale, n)
    words = _stream(41)
    assert got.tolist() == [ref(words, scale) for _ in range(n)]


def test_batches_that_run_dry_give_the_same_draws(monkeypatch):
    """Tiny batches (the kernel stops mid-draw hundreds of times and the unread tail is carried over) change nothing."""
    whole = discrete_gaussian(noise_rng(5, 1), 2.0**40 * 1.3, 2000), discrete_laplace(noise_rng(6, 1), 2**40 + 7, 2000)
    monkeypatch.setattr(sampler_module, "_block", lambda draws, words_per_draw: 5)
    small = discrete_gaussian(noise_rng(5, 1), 2.0**40 * 1.3, 2000), discrete_laplace(noise_rng(6, 1), 2**40 + 7, 2000)
    assert all(np.array_equal(a, b) for a, b in zip(whole, small, strict=True))


def test_each_bernoulli_trial_has_probability_exactly_the_double_exp():
    """discrete_kernels._bernoulli_exp(w, pos, word, x) is U < exp(−x) exactly (U's bits from ``word`` and then
    from w, 53 a word): checked against interval arithmetic in fractions, with words placed right at p's bits
    (where the bounds must defer to exp and the next word decides), at random, and for p below 2⁻⁵³."""
    from powerdp.privacy.discrete_kernels import _bernoulli_exp

    rng = np.random.default_rng(3)
    xs = np.concatenate([rng.uniform(0, 70, 2000), rng.uniform(0, 0.2, 2000), np.arange(0, 64, 1 / 64), [0.0, 40.0, 745.0, 800.0]])
    for x in xs:
        p = math.exp(-x)
        k = math.floor(p * 2.0**53)
        ext = rng.integers(0, 2**63, 4, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        nxt = math.floor((p * 2.0**53 - k) * 2.0**53)  # p's next 53 bits: an extension word equal to them, or ±1
        ext[0] = np.uint64(min(max(nxt + int(rng.integers(-1, 2)), 0), 2**53 - 1) << 11)
        for kk in {min(max(k + d, 0), 2**53 - 1) for d in (-1, 0, 1)} | {int(rng.integers(0, 2**53))}:
            word = np.uint64(kk << 11)
            got, pos = _bernoulli_exp(ext, 0, word, float(x))
            words = iter(int(e) for e in ext)
            assert got == _trial(words, int(word), p), (x, kk)
            assert pos == 4 - sum(1 for _ in words)  # the kernel read exactly the extension words the trial needed


def test_importing_powerdp_does_not_load_numba():
    """numba is imported (and the kernels compiled or loaded from the cache) on the first draw, not on import."""
    import subprocess
    import sys

    code = ("import sys, powerdp, powerdp.privacy.sampler as s; a = 'numba' in sys.modules; "
            "s.discrete_laplace(powerdp.privacy.noise_rng(0, 0), 3, 5); print(a, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


def test_secret_words_are_fresh_writable_words():
    src = noise_rng(None, 0)
    a, b = src.raw(1000), src.raw(1000)
    assert a.dtype == np.uint64 and a.flags.writeable and a.flags.aligned
    assert not np.array_equal(a, b)
    bits = np.unpackbits(np.concatenate([a, b]).view(np.uint8))
    assert abs(bits.mean() - 0.5) < 0.01  # 128 000 bits
