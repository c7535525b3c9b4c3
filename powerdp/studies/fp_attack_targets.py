"""The floating-point attack of :mod:`powerdp.studies.fp_attack` run end to end (tests/test_fp_attack.py,
benchmarks/fp_attack.py): one-round runs on D or D' picked by a secret bit, the adversary's noise-free replays,
the reachability guesses and their ε lower bound."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import numpy as np

from .fp_attack import _replay, _round_one, guess

__all__ = ["bound", "attack", "learning_target", "power_flow_target"]


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
        g = guess(release(h), v, model)
        pos, neg = pos + h, neg + 1 - h
        tp, fp = tp + (g and h), fp + (g and not h)
    return bound(tp, pos, fp, neg)


def learning_target(config, client: int = 0):
    """(release, replay) for a one-round learning run: client ``client``'s first sample replaced (D')."""
    from ..apps.learning.runner import prepare_data, run_federated
    from .learning_audit import neighbouring_dataset

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
    from ..apps.power_flow.plan import resolve_config, resolve_partition
    from ..apps.power_flow.runner import run_distributed
    from ..grid.loading import load_case
    from .audit import neighbouring_network

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
