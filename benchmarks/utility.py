"""Utility of the product defaults on case118 (3 published zones), as the issue measures it.

* objl, ε = 0.1, E = 1, T = 100, capped η: final objective and feasibility, median of 3 seeds,
  with the paper's and with sound sensitivities;
* nonprivate (no noise) at T = 100 and T = 500;
* how far outl / outg releases fall outside the zones' feasible sets.

    python benchmarks/utility.py --json utility.json
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics

from powerdp.config import RunConfig
from powerdp.runner import run_distributed


def final(cfg: RunConfig) -> dict:
    res = run_distributed(cfg, reference=False)
    s = res.summary
    return {
        "objective": s["final_objective"],
        "feasibility": s["final_feasibility"],
        "max_violation": s["max_violation"],
        "wall_s": s["wall_s"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--skip-long", action="store_true", help="skip the T = 500 non-private run")
    ap.add_argument("--json")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    out: dict = {}
    base = RunConfig(case=args.case, zones=3, algorithm="objl", epsilon=0.1, local_updates=1, rounds=100)
    for sens in ("paper", "sound"):
        runs = [final(base.replace(sensitivity=sens, seed=s)) for s in range(args.seeds)]
        out[f"objl_eps0.1_{sens}"] = {
            "runs": runs,
            "median_objective": statistics.median(r["objective"] for r in runs),
            "median_feasibility": statistics.median(r["feasibility"] for r in runs),
            "max_violation": max(r["max_violation"] for r in runs),
        }
        print(sens, json.dumps(out[f"objl_eps0.1_{sens}"]), flush=True)
    for T in (100,) if args.skip_long else (100, 500):
        out[f"nonprivate_T{T}"] = final(base.replace(algorithm="nonprivate", rounds=T))
        print(f"nonprivate T={T}", json.dumps(out[f"nonprivate_T{T}"]), flush=True)
    for alg in ("outl", "outg"):
        out[f"{alg}_eps0.1_paper"] = final(base.replace(algorithm=alg, sensitivity="paper"))
        print(alg, json.dumps(out[f"{alg}_eps0.1_paper"]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
