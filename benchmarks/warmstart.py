"""Cold versus warm-started local solves (SPEC §5: choose the starting point by measurement).

Runs the same private run twice — every local solve cold from the flat point,
then primal-dual warm-started from the zone's previous local solve with the
``warm`` Ipopt profile — and reports Ipopt iterations and time per local solve.
The runs are otherwise identical (same seed, same noise).

    python benchmarks/warmstart.py                          # case118, objl, T = 30, E = 1
    python benchmarks/warmstart.py --algorithm nonprivate --rounds 50
"""

from __future__ import annotations

import argparse
import json
import logging

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--algorithm", default="objl")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--local-updates", type=int, default=1)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--sensitivity", default="paper")
    ap.add_argument("--json")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    rows = []
    for warm in (False, True):
        cfg = RunConfig(
            case=args.case, zones=3, algorithm=args.algorithm, rounds=args.rounds, local_updates=args.local_updates,
            epsilon=args.epsilon, sensitivity=args.sensitivity, warm_start=warm, seed=0,  # same noise for both
        )
        s = run_distributed(cfg, reference=False).summary
        row = {
            "start": "warm" if warm else "cold",
            "iterations_per_solve": round(s["solver_iterations"] / s["solves"], 2),
            "ms_per_solve": round(1000 * s["solver_s"] / s["solves"], 1),
            "loop_s": round(s["wall_s"], 2),
            "final_objective": s["final_objective"],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
