#!/usr/bin/env python3
"""Speed of one federated-learning round (docs/learning.md): 10 clients on the bundled MNIST subset
(4000 training samples, 784 × 10 weights), serial, one BLAS thread.

    python benchmarks/learning.py                  # nonprivate, objg, outg, objt: median ms per round
    python benchmarks/learning.py --rounds 200 --json out.json

A round is what the coordinator and the clients do (consensus average, each client's gradient, noise and
closed-form box step, the dual update); the simulation's evaluation of the model is not part of it. The
target is ≤ 15 ms per round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from powerdp.apps.learning import LearnConfig
from powerdp.apps.learning.runner import build_clients, prepare_data
from powerdp.engine.consensus.coordinator import Coordinator


def time_rounds(algorithm: str, rounds: int, prepared) -> list[float]:
    cfg = LearnConfig(dataset="mnist", algorithm=algorithm, epsilon=0.5, rounds=rounds, box=0.1, clip=10.0)
    clients = build_clients(cfg, prepared)
    n = clients[0].n
    coord = Coordinator(n, [np.arange(n)] * cfg.clients, cfg.penalty(1))
    coord.start([c.initialize() for c in clients])
    out = []
    for t in range(1, rounds + 1):
        t0 = time.perf_counter()
        coord.rho = cfg.penalty(t)
        msgs = coord.broadcast()
        coord.receive([c.step(m) for c, m in zip(clients, msgs, strict=True)])
        out.append(1e3 * (time.perf_counter() - t0))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--algorithms", nargs="+", default=["nonprivate", "objg", "outg", "objt"])
    ap.add_argument("--json")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    prepared = prepare_data(LearnConfig(dataset="mnist", box=0.1, clip=10.0))
    res = {}
    with threadpool_limits(limits=1):
        for alg in args.algorithms:
            ms = time_rounds(alg, args.rounds, prepared)
            res[alg] = {"median_ms": statistics.median(ms), "min_ms": min(ms), "p90_ms": float(np.percentile(ms, 90))}
            print(f"{alg:11s} one round of 10 clients on 4000 x 784 x 10: median {res[alg]['median_ms']:.2f} ms "
                  f"(min {res[alg]['min_ms']:.2f}, p90 {res[alg]['p90_ms']:.2f})", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)


if __name__ == "__main__":
    main()
