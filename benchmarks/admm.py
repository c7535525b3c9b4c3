"""Benchmark the private distributed solve (issue: speed of the ADMM loop).

Runs case118 with its 3 published zones, T rounds of E local updates of
``objl`` on the serial and the process backend, and reports wall time, time
inside Ipopt and time elsewhere (messages, kernels, Python), plus setup.

    python benchmarks/admm.py                 # T = 100, E = 5
    python benchmarks/admm.py --rounds 20 --local-updates 1 --json out.json
"""

from __future__ import annotations

import argparse
import json
import logging
import time

from powerdp.admm.config import RunConfig
from powerdp.admm.runner import run_distributed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--algorithm", default="objl")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--local-updates", type=int, default=5)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--backends", default="serial,process")
    ap.add_argument("--no-warm-start", action="store_true")
    ap.add_argument("--json", help="write the numbers as JSON")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    rows = []
    for backend in args.backends.split(","):
        cfg = RunConfig(
            case=args.case,
            zones=args.zones,
            algorithm=args.algorithm,
            rounds=args.rounds,
            local_updates=args.local_updates,
            epsilon=args.epsilon,
            backend=backend,
            warm_start=not args.no_warm_start,
        )
        t0 = time.perf_counter()
        res = run_distributed(cfg, reference=False)
        total = time.perf_counter() - t0
        s = res.summary
        loop = s["wall_s"]
        ipopt = s["ipopt_s"]
        row = {
            "backend": backend,
            "hosts": s["hosts"],
            "setup_s": round(s["setup_s"], 2),
            "loop_s": round(loop, 2),
            "total_s": round(total, 2),
            "ipopt_s_summed_over_zones": round(ipopt, 2),
            "solves": s["solves"],
            "iterations_per_solve": round(s["solver_iterations"] / s["solves"], 1),
            "ms_per_solve": round(1000 * ipopt / s["solves"], 1),
            "final_objective": round(s["final_objective"], 4),
            "final_feasibility": round(s["final_feasibility"], 5),
        }
        if backend == "serial":
            row["outside_ipopt_share"] = round(max(loop - ipopt, 0.0) / loop, 3)
        rows.append(row)
        print(json.dumps(row))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
