"""Empirical privacy audit of a federated-learning run (docs/learning.md, "Auditing"): the distinguishing attack
of :mod:`powerdp.studies.audit`, with one training sample moved instead of one load.

Neighbouring data sets D and D' differ in one sample of the audited client (replace-one: sample 0 of the
client replaced by a canary, a row at the clipping bound with another label; add-remove: the canary added).
The run is repeated with seeds S, S+1, ... on each, and every model the client releases (its
:class:`~powerdp.engine.consensus.messages.ZoneUpdate` of every round, round 0 included) is recorded: what the coordinator
receives. :func:`powerdp.studies.audit.attack` trains a linear distinguisher on half of the runs and tests it on the
other half; its error rates give a lower bound on ε, which must not exceed the ledger's claim for the client.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..apps.learning.config import LearnConfig
from ..apps.learning.data import Dataset
from ..apps.learning.runner import prepare_data, run_federated
from ..errors import ConfigError

__all__ = ["run_learning_audit", "neighbouring_dataset"]


def neighbouring_dataset(data: Dataset, parts: list[np.ndarray], client: int, adjacency: str, R2: float) -> tuple[Dataset, list[np.ndarray]]:
    """D' for the audit: the client's first sample replaced by (or, add-remove, joined by) a canary: a row of norm R₂
    along the first feature axis, labelled with the next class."""
    X, y = data.X_train.copy(), data.y_train.copy()
    i = int(parts[client][0])
    canary = np.zeros(X.shape[1])
    canary[0] = R2
    label = (int(y[i]) + 1) % data.n_classes
    if adjacency == "replace-one":
        X[i], y[i] = canary, label
        new_parts = parts
    else:
        X, y = np.vstack([X, canary]), np.append(y, label)
        new_parts = [p if k != client else np.append(p, len(y) - 1) for k, p in enumerate(parts)]
    d = Dataset(data.name, X, y, data.X_test, data.y_test, data.classes, data.feature_range, dict(data.preprocessing))
    return d, new_parts


def run_learning_audit(
    config: LearnConfig, runs: int = 50, client: int = 0, confidence: float = 0.95,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Audit ``config`` with ``runs`` seeded runs on each of two neighbouring data sets; returns the attack's result,
    the claim, and the verdict ("passed", "failed": the lower bound exceeds the claim, or "not private")."""
    from .audit import MIN_RUNS, _channel_checks, attack, check_bound

    if runs < MIN_RUNS:
        raise ConfigError.for_setting("runs", runs, f"give at least {MIN_RUNS} runs per data set (half train, half test)")
    if not 0 <= client < config.clients:
        raise ConfigError.for_setting("client", client, f"the run has clients 0..{config.clients - 1}")
    if config.adjacency == "add-remove":
        raise ConfigError("the learning audit moves one sample with the public normaliser I fixed: use adjacency replace-one")
    t0 = time.perf_counter()
    config = config.replace(evaluate=False, checkpoint_every=0)
    prepared = prepare_data(config)
    d0, parts = prepared.data, prepared.parts
    d1, parts1 = neighbouring_dataset(d0, parts, client, config.adjacency, d0.preprocessing["R2"])
    first = config.seed if config.seed is not None else 0  # the audit's runs are seeded: seed, seed + 1, ...
    released: dict[str, list[np.ndarray]] = {"D": [], "D'": []}
    claim = None
    done = 0
    for k in range(runs):
        for name, data, pts in (("D", d0, parts), ("D'", d1, parts1)):
            got: list[np.ndarray] = []

            def observe(updates, got=got) -> None:
                got.extend(u.released for u in updates if u.zone == client)

            res = run_federated(config.replace(seed=first + k), data=data, reference=False, observe=observe, parts=pts)
            released[name].append(np.concatenate(got))
            eps = res.summary["epsilon_total"].get(client) if config.private else None
            if claim is not None and eps != claim:
                raise RuntimeError("the ledger's claim differs between runs of the audit")
            claim = eps
            done += 1
            if progress is not None:
                progress(done, 2 * runs)
    delta = 0.0
    if config.private and config.mechanism == "gaussian":
        delta = float(config.target_delta) if config.target_epsilon is not None else float(res.privacy[client]["headline"]["delta"])
    x0, x1 = np.stack(released["D"]), np.stack(released["D'"])
    # the release and every check form one Bonferroni family: 5 % family-wise error in all
    checks = [c for c in _channel_checks() if c.applies(config)]
    family_conf = 1.0 - (1.0 - confidence) / (1 + len(checks))
    result = attack(x0, x1, delta=delta, confidence=family_conf)
    runners = [lambda cfg, observe, d=d, p=p: run_federated(cfg, data=d, parts=p, reference=False, observe=observe)
               for d, p in ((d0, parts), (d1, parts1))]
    channels = {c.name: check_bound(c.run(config, runners, client, x0, x1, family_conf), delta, family_conf) for c in checks}
    lb = max([result["epsilon_lower_bound"]] + [c["epsilon_lower_bound"] for c in channels.values()])
    failed = claim is not None and (lb > claim or any(c.get("failed") for c in channels.values()))
    verdict = "not private" if claim is None else ("failed" if failed else "passed")
    return {
        "epsilon_lower_bound": lb, "epsilon_total": claim, "delta_total": delta, "verdict": verdict,
        "faults": config.faults.describe() if config.faults is not None else None,
        "settings": {"dataset": config.dataset, "algorithm": config.algorithm, "client": client, "runs": runs,
                     "rounds": config.rounds, "adjacency": config.adjacency, "canary": "sample 0 of the client replaced"},
        "attack": result, "channels": channels, "wall_s": time.perf_counter() - t0,
    }
