"""The floating-point attack (Mironov 2012) on output perturbation, through the public API (docs/privacy.md,
"What the guarantee assumes of the implementation").

A secret bit picks the data set of a one-round run: D, or its neighbour D'. The adversary replays both hypotheses
without noise (the value v_h each coordinate had before its noise), then asks of every released double r whether
the sampler could have produced it from v_h at all: an exact reachability test. A hypothesis under which some
released double is unreachable is ruled out; the adversary says D' when only D' is left.

* ``"numpy"`` (the old sampler, r = fl(v + ξ) with numpy's Laplace, ξ = b·log(2U), U = k·2⁻⁵³): the set of
  doubles x with fl(v + x) = r is an interval (bisection on the doubles' order); the noise values are monotone in
  k, so a second bisection finds whether one of them lies in it. Which doubles can come out depends on v.
* ``"grid"`` (the product's sampler, r = γ(round(v/γ) + Z)): r is reachable from every v iff r/γ is an integer,
  so both hypotheses always stay and the attack cannot guess better than a coin.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..engine.consensus.perturbations import OutputPerturbation

__all__ = ["reachable", "reachable_numpy_laplace", "reachable_grid", "preimage", "record_outputs", "guess",
           "ziggurat_widths", "FloatingPointCheck"]

_SIGN = np.int64(-(2**63))
_MAG = np.int64(2**63 - 1)


def _key(x: np.ndarray) -> np.ndarray:
    """Doubles → int64 keys in the same order (−0.0 and 0.0 both 0)."""
    i = np.asarray(x, dtype=np.float64).view(np.int64)
    return np.where(i < 0, -(i & _MAG), i)


def _double(k: np.ndarray) -> np.ndarray:
    k = np.asarray(k, dtype=np.int64)
    return np.where(k < 0, (-k) | _SIGN, k).view(np.float64)


def _first_key(pred: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per entry the smallest key in [lo, hi] where the monotone ``pred`` (of the double) holds (hi if none)."""
    lo, hi = lo.copy(), hi.copy()
    for _ in range(66):
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)  # no overflow over the whole range of keys
        ok = pred(_double(mid))
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + 1)
        if np.all(lo >= hi):
            break
    return hi


#: the C library's log, one double at a time (math.log), as numpy.random's C code calls it
_libm_log = np.frompyfunc(math.log, 1, 1)


def _scalar_log(x: np.ndarray) -> np.ndarray:
    """log of every entry through the C library's scalar ``log`` (what numpy.random's sampler calls), never numpy's
    vectorized ``np.log``: on AVX-512 CPUs (numpy's X86_V4 / AVX512F targets) ``np.log`` runs numpy's own SIMD log,
    whose last bits differ from the C library's, and a replay built on it misses the sampler's exact doubles (the
    issue-36 report: the attack found 5-7 of 18-19 positives and the audit's channel went blind). +, −, × and ÷
    round correctly on every IEEE CPU, SIMD or not; only the transcendental function needs the scalar path."""
    return _libm_log(np.asarray(x, dtype=np.float64)).astype(np.float64)


def numpy_laplace(k: np.ndarray, scale: float) -> np.ndarray:
    """numpy's ``Generator.laplace(0, scale)`` for the uniform U = k·2⁻⁵³ (k = 1 … 2⁵³ − 1): its exact output, on every
    CPU (numpy's C code: U ≥ 0.5 gives 0 − scale·log(2 − U − U), else 0 + scale·log(U + U), with the C library's log:
    :func:`_scalar_log`)."""
    u = np.asarray(k, dtype=np.float64) * (1.0 / 9007199254740992.0)
    high = u >= 0.5
    arg = np.where(high, 2.0 - u - u, u + u)  # both > 0 for 1 ≤ k < 2⁵³
    logs = _scalar_log(arg)
    return np.where(high, 0.0 - scale * logs, 0.0 + scale * logs)


_WI: np.ndarray | None = None


def ziggurat_widths() -> np.ndarray:
    """numpy's ziggurat table ``wi_double`` (its normal is ±rabs·wi[idx] on the fast path, rabs < 2⁵², idx < 256),
    read off numpy itself: the first word of a seeded stream against the normal it gives (cached)."""
    global _WI
    if _WI is None:
        pairs: dict[int, list[tuple[int, float]]] = {}
        for seed in range(20000):
            w = int(np.random.PCG64(seed).random_raw())
            x = abs(float(np.random.Generator(np.random.PCG64(seed)).standard_normal()))
            rabs = (w >> 9) & ((1 << 52) - 1)
            if rabs > 2**44:
                pairs.setdefault(w & 0xFF, []).append((rabs, x))
        wi = np.zeros(256)
        for i, ps in pairs.items():
            cands = {float(np.nextafter(x / ra, d)) for ra, x in ps[:10] for d in (-np.inf, np.inf)} | {x / ra for ra, x in ps[:10]}
            wi[i] = max(cands, key=lambda c: sum(float(np.float64(ra) * c) == x for ra, x in ps))
        _WI = wi
    return _WI


def _noise_interval(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The doubles x with lo ≤ fl(v + x) ≤ hi: an interval [x_lo, x_hi] of keys (empty when x_lo > x_hi)."""
    big = np.full(v.shape, _key(np.array(np.finfo(float).max)))
    return _first_key(lambda x: v + x >= lo, -big, big), _first_key(lambda x: v + x > hi, -big, big) - 1


def _hits(value_of: Callable[[np.ndarray], np.ndarray], k_lo: int, k_hi: int, x_lo: np.ndarray, x_hi: np.ndarray) -> np.ndarray:
    """Per entry: does a value of the nondecreasing ``value_of(k)``, k in [k_lo, k_hi], lie in [x_lo, x_hi]?"""
    lo = np.full(x_lo.shape, k_lo, dtype=np.int64)
    hi = np.full(x_lo.shape, k_hi, dtype=np.int64)
    for _ in range(56):
        mid = lo + (hi - lo) // 2
        ge = value_of(mid) >= x_lo
        hi = np.where(ge, mid, hi)
        lo = np.where(ge, lo, mid + 1)
    val = value_of(hi)
    return (val >= x_lo) & (val <= x_hi)


def reachable(lo: np.ndarray, hi: np.ndarray, v: np.ndarray, mechanism, sampler: str) -> np.ndarray:
    """Per entry: can ``sampler`` turn the value v into a noisy value in [lo, hi] (the doubles the release came from)?

    ``"numpy"``: fl(v + ξ) with ξ numpy's Laplace or normal (the old sampler); ``"grid"``: the product's
    γ(round(v/γ) + Z), reachable iff [lo, hi] holds a point of γℤ (whatever v is)."""
    lo, hi, v = (np.asarray(a, dtype=np.float64) for a in (lo, hi, v))
    if sampler == "grid":
        g = mechanism.grid
        with np.errstate(invalid="ignore"):
            return np.ceil(lo / g) <= np.floor(hi / g)
    if sampler != "numpy":
        raise ValueError(f"unknown sampler model {sampler!r}")
    x_lo, x_hi = _noise_interval(v, lo, hi)
    a, b = _double(x_lo), _double(x_hi)
    empty = x_lo > x_hi
    if mechanism.kind in ("laplace", "staircase"):  # the test-only numpy sampler draws Laplace noise for both
        scale = mechanism.scale
        return ~empty & _hits(lambda k: numpy_laplace(k, scale), 1, 2**53 - 1, a, b)
    sigma, wi = mechanism.sigma, ziggurat_widths()
    out = np.zeros(v.shape, dtype=bool)
    for lo_, hi_ in ((np.maximum(a, 0.0), b), (np.maximum(-b, 0.0), -a)):  # +fl(σ·fl(k·w)), −fl(σ·fl(k·w)) in [a, b]
        # fl(σ·fl(k·w)) is nondecreasing in k and within an ulp or two of σkw: the first k reaching lo_ is one of
        # five around lo_/(σw), for every row w of the table at once
        k0 = np.floor(lo_[:, None] / (sigma * wi[None, :])) - 2
        k = np.clip(k0[:, :, None] + np.arange(5), 0, 2.0**52 - 1)
        val = sigma * (k * wi[None, :, None])
        out |= ((val >= lo_[:, None, None]) & (val <= hi_[:, None, None])).any(axis=(1, 2))
    tail = np.minimum(np.abs(a), np.abs(b)) > 3.6 * sigma  # the ziggurat's tail: not modelled, never ruled out
    return ~empty & (out | tail)


def reachable_numpy_laplace(r: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    """Per entry: is there a numpy Laplace draw ξ with fl(v + ξ) == r exactly?"""
    from ..privacy import LaplaceMechanism

    return reachable(r, r, v, LaplaceMechanism(1.0, 1.0 / scale), "numpy")


def reachable_grid(r: np.ndarray, gamma: float) -> np.ndarray:
    """Per entry: can the product's sampler release r (from any value)? Iff r lies on its grid γℤ."""
    q = np.asarray(r, dtype=np.float64) / gamma
    return q == np.round(q)


def preimage(release_of: Callable[[np.ndarray], np.ndarray], r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The noisy values c whose post-processing ``release_of`` (elementwise, nonincreasing, e.g. the box step
    clip(−c/d, lb, ub)) gives exactly r: per entry an interval [lo, hi] of doubles."""
    r = np.asarray(r, dtype=np.float64)
    big = np.full(r.shape, _key(np.array(np.finfo(float).max)))
    lo = _first_key(lambda c: release_of(c) <= r, -big, big)
    hi = _first_key(lambda c: release_of(c) < r, -big, big) - 1
    return _double(lo), _double(np.maximum(hi, lo))


@contextmanager
def record_outputs():
    """The adversary's noise-free replay: every (zone, mechanism, value before noise) a perturbation is handed
    (output perturbation: the local solution; objective perturbation: the linear term on its noise support),
    and every (zone, solve) of a learning client (the post-processing of objective perturbation)."""
    from ..apps.learning.client import ClientAgent
    from ..engine.consensus.perturbations import ObjectivePerturbation

    seen: list[tuple[int, Any, np.ndarray]] = []
    solves: list[tuple[int, Callable]] = []
    real_out, real_obj, real_solve = OutputPerturbation.perturb_output, ObjectivePerturbation.perturb_objective, ClientAgent.solve

    def spy_out(self, z):
        seen.append((self.ledger.zone, self.mechanism, np.array(z, dtype=float)))
        return real_out(self, z)

    def spy_obj(self, c):
        seen.append((self.ledger.zone, self.mechanism, np.array(c[self.noise_cols], dtype=float)))
        return real_obj(self, c)

    def spy_solve(self, c, diag, step, exact=False, bounds=None):
        out = real_solve(self, c, diag, step, exact, bounds)
        # the box step the client just took (its solver's bounds now hold the round's box): clip(−c/d, lb, ub)
        d, lb, ub = (np.array(x, dtype=float) for x in (diag, self.solver.lb, self.solver.ub))
        solves.append((self.zone, lambda cp, d=d, lb=lb, ub=ub: np.clip(-cp / d, lb, ub)))
        return out

    OutputPerturbation.perturb_output, ObjectivePerturbation.perturb_objective, ClientAgent.solve = spy_out, spy_obj, spy_solve
    try:
        yield seen, solves
    finally:
        OutputPerturbation.perturb_output, ObjectivePerturbation.perturb_objective, ClientAgent.solve = real_out, real_obj, real_solve


def guess(r: np.ndarray, replays: list, sampler: str) -> int:
    """1 (say D') when every released double is reachable under D' and some is not under D, else 0.

    ``replays[h]`` = (value before noise, mechanism, post-processing or None) of hypothesis h."""
    reach = []
    for v, mech, post in replays:
        lo, hi = (r, r) if post is None else preimage(post, r)
        reach.append(bool(reachable(lo, hi, v, mech, sampler).all()))
    return int(reach[1] and not reach[0])


def _round_one(updates: list, zone: int) -> np.ndarray:
    return next(np.asarray(u.released, dtype=float) for u in updates if u.zone == zone and u.round == 1)


def _replay(run: Callable[[Any, Callable], None], config, zone: int) -> tuple[np.ndarray, Any, Callable | None]:
    """The adversary's noise-free run: ``zone``'s round-1 value before noise, its mechanism, and the post-processing
    from the noisy value to the release (None for output perturbation: the release is the noisy value)."""
    from ..privacy.faults import InjectedFaults

    got: list = []
    with record_outputs() as (seen, solves):
        run(config.replace(faults=InjectedFaults(disable_noise=True), seed=0), got.extend)
    _, mech, value = next(x for x in seen if x[0] == zone)
    if config.spec.perturbation == "output":
        return _round_one(got, zone), mech, None
    if config.spec.perturbation != "objective" or not solves:
        raise ValueError("the floating-point attack covers output perturbation, and objective perturbation of learning")
    return value, mech, next(f for z, f in solves if z == zone)


class FloatingPointCheck:
    """The audits' floating-point channel (``powerdp audit``, ``learn --audit``): the reachability test above on the
    audited zone's round-1 release of every run, with the sampler the audited run uses (the product's grid; the old
    numpy sampler when a test fault selects it). A release no hypothesis can explain (doubles the sampler cannot
    produce) fails the audit by itself; the guesses' rates give an ε bound like every other channel's."""

    name = "floating_point"

    @staticmethod
    def applies(config) -> bool:
        """Output perturbation, or objective perturbation with a learning client's box step; one local step a round."""
        if not config.private or config.local_updates != 1:
            return False
        return config.spec.perturbation == "output" or (
            config.spec.perturbation == "objective" and getattr(config, "local_solver", None) == "box")

    @staticmethod
    def run(config, runners: list[Callable], zone: int, x0: np.ndarray, x1: np.ndarray, confidence: float) -> dict[str, Any]:
        """``runners[h](config, observe)`` runs ``config`` on data set h; ``x0``/``x1`` the zone's releases (every round,
        round 0 first) of the runs on D and D'."""
        sampler = config.faults.sampler if config.faults is not None else "grid"
        replays = [_replay(runners[h], config, zone) for h in (0, 1)]
        n = x0.shape[1] // (config.rounds + 1)
        says, lost = [], 0
        for x in (x0, x1):
            row = []
            for r in x[:, n:2 * n]:
                reach = []
                for v, mech, post in replays:
                    lo, hi = (r, r) if post is None else preimage(post, r)
                    reach.append(bool(reachable(lo, hi, v, mech, sampler).all()))
                row.append(reach[1] and not reach[0])
                lost += not (reach[0] or reach[1])
            says.append(np.array(row))
        res = {"tp": int(says[1].sum()), "positives": len(x1), "fp": int(says[0].sum()), "negatives": len(x0)}
        res.update(tpr=res["tp"] / max(len(x1), 1), fpr=res["fp"] / max(len(x0), 1), confidence=confidence, sampler=sampler,
                   unreachable_runs=lost, failed=lost > 0,
                   method="exact reachability of the round-1 released doubles from both hypotheses' noise-free replays")
        return res
