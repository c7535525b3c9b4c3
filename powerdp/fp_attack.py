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

import secrets
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import numpy as np

from .admm.perturbations import OutputPerturbation

__all__ = ["reachable_numpy_laplace", "reachable_grid", "record_outputs", "guess", "bound"]

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


def numpy_laplace(k: np.ndarray, scale: float) -> np.ndarray:
    """numpy's ``Generator.laplace(0, scale)`` for the uniform U = k·2⁻⁵³ (k = 1 … 2⁵³ − 1): its exact output."""
    u = np.asarray(k, dtype=np.float64) * (1.0 / 9007199254740992.0)
    with np.errstate(divide="ignore"):
        return np.where(u >= 0.5, 0.0 - scale * np.log(2.0 - u - u), 0.0 + scale * np.log(u + u))


def reachable_numpy_laplace(r: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    """Per entry: is there a numpy Laplace draw ξ with fl(v + ξ) == r exactly?"""
    r, v = np.asarray(r, dtype=np.float64), np.asarray(v, dtype=np.float64)
    big = np.full(r.shape, _key(np.array(np.finfo(float).max)))
    # the interval of doubles x with fl(v + x) == r: from the first x with v + x ≥ r to the first with v + x > r
    x_lo = _first_key(lambda x: v + x >= r, -big, big)
    x_hi = _first_key(lambda x: v + x > r, -big, big) - 1
    hit = _double(x_lo)
    ok = (v + hit) == r
    # the first k whose noise value is ≥ the interval's lower end; reachable iff that value is ≤ its upper end
    klo = np.ones(r.shape, dtype=np.int64)
    khi = np.full(r.shape, 2**53 - 1, dtype=np.int64)
    lo_x = _double(x_lo)
    for _ in range(56):
        mid = klo + (khi - klo) // 2
        ge = numpy_laplace(mid, scale) >= lo_x
        khi = np.where(ge, mid, khi)
        klo = np.where(ge, klo, mid + 1)
    return ok & (numpy_laplace(khi, scale) <= _double(x_hi))


def reachable_grid(r: np.ndarray, gamma: float) -> np.ndarray:
    """Per entry: can the product's sampler release r (from any value)? Iff r lies on its grid γℤ."""
    q = np.asarray(r, dtype=np.float64) / gamma
    return q == np.round(q)


@contextmanager
def record_outputs():
    """The adversary's noise-free replay: every (zone, mechanism, value before noise) handed to output perturbation."""
    seen: list[tuple[int, Any, np.ndarray]] = []
    real = OutputPerturbation.perturb_output

    def spy(self, z):
        seen.append((self.ledger.zone, self.mechanism, np.array(z, dtype=float)))
        return real(self, z)

    OutputPerturbation.perturb_output = spy
    try:
        yield seen
    finally:
        OutputPerturbation.perturb_output = real


def guess(r: np.ndarray, v0: np.ndarray, v1: np.ndarray, mechanism, model: str) -> int:
    """1 (say D') when every released double is reachable from D''s value and some is not from D's, else 0."""
    if model == "numpy":
        reach0 = bool(reachable_numpy_laplace(r, v0, mechanism.scale).all())
        reach1 = bool(reachable_numpy_laplace(r, v1, mechanism.scale).all())
    elif model == "grid":
        reach0 = reach1 = bool(reachable_grid(r, mechanism.grid).all())
    else:
        raise ValueError(f"unknown sampler model {model!r}")
    return int(reach1 and not reach0)


def bound(tp: int, pos: int, fp: int, neg: int, confidence: float = 0.95) -> dict[str, Any]:
    """Rates and the ε lower bound (95 % Clopper–Pearson) of ``tp``/``pos`` true and ``fp``/``neg`` false positives."""
    from .audit import clopper_pearson, epsilon_lower_bound

    _, fpr_hi = clopper_pearson(fp, neg, confidence)
    tpr_lo, _ = clopper_pearson(tp, pos, confidence)
    return {"tp": tp, "positives": pos, "fp": fp, "negatives": neg,
            "epsilon_lower_bound": float(epsilon_lower_bound(fpr_hi, 1 - tpr_lo))}


def attack(release: Callable[[int], np.ndarray], replay: Callable[[int], tuple[np.ndarray, Any]], trials: int,
           model: str) -> dict[str, Any]:
    """``trials`` secret bits h: ``release(h)`` is the target run's released doubles on data set h, ``replay(h)``
    the adversary's noise-free (value, mechanism) of the same coordinates; returns the rates and the ε bound."""
    v = [replay(0), replay(1)]
    tp = fp = pos = neg = 0
    for _ in range(trials):
        h = secrets.randbits(1)
        g = guess(release(h), v[0][0], v[1][0], v[0][1], model)
        pos, neg = pos + h, neg + 1 - h
        tp, fp = tp + (g and h), fp + (g and not h)
    return bound(tp, pos, fp, neg)


def _round_one(updates: list, zone: int) -> np.ndarray:
    return next(np.asarray(u.released, dtype=float) for u in updates if u.zone == zone and u.round == 1)


def _replay(run: Callable[[Any, Callable], None], config, zone: int) -> tuple[np.ndarray, Any]:
    """The noise-free round-1 release of ``zone`` (= its values before noise) and its round-1 mechanism."""
    from .privacy.faults import InjectedFaults

    got: list = []
    with record_outputs() as seen:
        run(config.replace(faults=InjectedFaults(disable_noise=True), seed=0), got.extend)
    mech = next(m for z, m, _ in seen if z == zone)
    return _round_one(got, zone), mech


def learning_target(config, client: int = 0):
    """(release, replay) for a one-round learning run: client ``client``'s first sample replaced (D')."""
    from .learning.audit import neighbouring_dataset
    from .learning.runner import prepare_data, run_federated

    config = config.replace(rounds=1, evaluate=False, checkpoint_every=0)
    prepared = prepare_data(config)
    d1, parts1 = neighbouring_dataset(prepared.data, prepared.parts, client, config.adjacency, prepared.data.preprocessing["R2"])
    data = [(prepared.data, prepared.parts), (d1, parts1)]

    def runner(h):
        return lambda cfg, observe: run_federated(cfg, data=data[h][0], parts=data[h][1], reference=False, observe=observe)

    def release(h):
        got: list = []
        runner(h)(config, got.extend)
        return _round_one(got, client)

    return release, lambda h: _replay(runner(h), config, client)


def power_flow_target(config, bus: int = 4):
    """(release, replay) for a one-round power-flow run: the load of bus ``bus`` (MATPOWER id) moved by β (D')."""
    from .admm.runner import resolve_config, resolve_partition, run_distributed
    from .audit import neighbouring_network
    from .grid.network import load_case

    net = load_case(config.case)
    config = resolve_config(config.replace(rounds=1, evaluate=False, checkpoint_every=0), net)
    part = resolve_partition(net, config)
    b = net.bus_index(bus)
    net1 = neighbouring_network(net, b, config.beta, config.adjacency)
    data = [(net, part), (net1, part.with_network(net1))]
    zone = int(part.zone_of_bus[b])

    def runner(h):
        return lambda cfg, observe: run_distributed(cfg, network=data[h][0], partition=data[h][1], reference=False, observe=observe)

    def release(h):
        got: list = []
        runner(h)(config, got.extend)
        return _round_one(got, zone)

    return release, lambda h: _replay(runner(h), config, zone)
