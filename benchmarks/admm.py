"""Benchmark the private distributed solve (issue: speed of the ADMM loop).

Runs case118 with its 3 published zones, T rounds of E local updates of
``objl`` with each local solver (Ipopt and Clarabel, same seed) on the serial
backend (``--backends serial,process`` adds the process backend), and reports
wall time, time inside the solver and time elsewhere (messages, kernels,
Python), plus setup, and each solver's speed-up over Ipopt and the largest
relative difference of its objective history from Ipopt's.

    python benchmarks/admm.py                 # T = 100, E = 5, both solvers, serial
    python benchmarks/admm.py --rounds 20 --local-updates 1 --json out.json
    python benchmarks/admm.py --solvers clarabel --backends serial,process
"""

from __future__ import annotations

import argparse
import json
import logging
import time

import numpy as np

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--algorithm", default="objl")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--local-updates", type=int, default=5)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--backends", default="serial")
    ap.add_argument("--solvers", default="ipopt,clarabel", help="local solvers to compare (default: ipopt,clarabel)")
    ap.add_argument("--no-warm-start", action="store_true")
    ap.add_argument("--seed", type=int, default=0, help="noise seed shared by every run (default: 0)")
    ap.add_argument("--json", help="write the numbers as JSON")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    rows = []
    histories = {}
    for backend, solver in [(b, s) for b in args.backends.split(",") for s in args.solvers.split(",")]:
        cfg = RunConfig(
            case=args.case,
            zones=args.zones,
            algorithm=args.algorithm,
            rounds=args.rounds,
            local_updates=args.local_updates,
            epsilon=args.epsilon,
            backend=backend,
            warm_start=not args.no_warm_start,
            local_solver=solver,
            seed=args.seed,  # the same noise for every solver and backend (a seeded experiment)
        )
        t0 = time.perf_counter()
        res = run_distributed(cfg, reference=False)
        total = time.perf_counter() - t0
        s = res.summary
        loop = s["wall_s"]
        inside = s["solver_s"]
        row = {
            "solver": solver,
            "backend": backend,
            "hosts": s["hosts"],
            "setup_s": round(s["setup_s"], 2),
            "loop_s": round(loop, 2),
            "total_s": round(total, 2),
            "solver_s_summed_over_zones": round(inside, 2),
            "solves": s["solves"],
            "iterations_per_solve": round(s["solver_iterations"] / s["solves"], 1),
            "ms_per_solve": round(1000 * inside / s["solves"], 2),
            "final_objective": round(s["final_objective"], 6),
            "final_feasibility": round(s["final_feasibility"], 6),
        }
        if backend == "serial":
            row["outside_solver_s"] = round(max(loop - inside, 0.0), 2)
            row["outside_solver_share"] = round(max(loop - inside, 0.0) / loop, 3)
        histories[backend, solver] = res.history["objective"].to_numpy()
        ref = histories.get((backend, "ipopt"))
        if solver != "ipopt" and ref is not None:
            first = next(r for r in rows if r["backend"] == backend and r["solver"] == "ipopt")
            row["speedup_total_vs_ipopt"] = round(first["total_s"] / total, 2)
            row["speedup_loop_vs_ipopt"] = round(first["loop_s"] / loop, 2)
            row["max_rel_objective_difference_vs_ipopt"] = float(f"{np.max(np.abs(histories[backend, solver] - ref) / np.abs(ref)):.2e}")
        rows.append(row)
        print(json.dumps(row))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
