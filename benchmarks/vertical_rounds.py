"""Rounds to reach the centralized test log-loss within 1e-3: sharing ADMM (τ = (M−1)ρ and 002's τ = 0) against
vertical gradient descent with the same messages per round (plain and Nesterov), 002's comparison.

    python benchmarks/vertical_rounds.py      # about 30 s
"""

from __future__ import annotations

import time

import numpy as np

from powerdp.apps.learning.vertical import DEFAULT_LAMBDA, baselines, gradient_baseline, load_dataset, run_vertical_learning
from powerdp.runs.sharing_run import SharingSettings


def first_within(losses, ref, tol=1e-3):
    """First round from which the test log-loss stays within tol of the reference."""
    bad = np.flatnonzero(np.abs(np.asarray(losses) - ref) > tol)
    return int(bad[-1]) + 2 if len(bad) else 1


def main() -> None:
    print("| data set | parties | ADMM τ = (M−1)ρ | ADMM τ = 0 (002) | gradient descent | Nesterov |")
    print("|---|---|---|---|---|---|")
    for name, parties, rounds in (("breast_cancer", 2, 300), ("gisette_like", 3, 100)):
        data = load_dataset(name, parties)
        lam = DEFAULT_LAMBDA[data.name]
        ref = baselines(data, lam)["centralized_test_logloss"]
        cells = []
        for tau in (None, 0.0):
            t0 = time.perf_counter()
            res, _ = run_vertical_learning(data, lam, SharingSettings(rounds=rounds, rho=0.5 / len(data.y_train), tau=tau))
            cells.append(f"{first_within(res.history['eval_test_logloss'], ref)} ({time.perf_counter() - t0:.1f} s for {rounds})")
        for acc in (False, True):
            cells.append(str(first_within(gradient_baseline(data, lam, rounds * 3, acc), ref)))
        print(f"| {name} | {parties} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
