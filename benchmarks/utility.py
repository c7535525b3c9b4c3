"""Utility of the product defaults on case118 (3 published zones), as the acceptance of the
paper-coordinates issue measures it.

* nonprivate with the paper's settings (ρ = 100, η_t = 1/√t, T = 100, E = 1);
* objl, ε = 0.1 per step, product defaults (sound sensitivities, capped η, E = 1, T = 100):
  final objective and feasibility, median of 3 seeds, and the worst W_p violation of a release;
  the same with noise on every entry of z (--noise-on all, as the paper draws it);
* outl / outg at ε = 0.1 (sound sensitivities): how far their releases fall outside W_p.

    python benchmarks/utility.py --json utility.json
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics

from powerdp.admm.config import RunConfig
from powerdp.admm.runner import run_distributed


def final(cfg: RunConfig) -> dict:
    res = run_distributed(cfg, reference=False)
    s = res.summary
    return {
        "objective": s["final_objective"],
        "feasibility": s["final_feasibility"],
        "max_violation": s["max_violation"],
        "wall_s": s["wall_s"],
    }


def medians(runs: list[dict]) -> dict:
    return {
        "runs": runs,
        "median_objective": statistics.median(r["objective"] for r in runs),
        "median_feasibility": statistics.median(r["feasibility"] for r in runs),
        "max_violation": max(r["max_violation"] for r in runs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    out: dict = {}
    base = RunConfig(case=args.case, zones=3, algorithm="objl", epsilon=0.1, local_updates=1, rounds=100)
    out["nonprivate_paper_settings"] = final(base.replace(algorithm="nonprivate", rho=100.0, eta="sqrt"))
    print("nonprivate (rho 100, eta sqrt)", json.dumps(out["nonprivate_paper_settings"]), flush=True)
    for noise_on in ("data", "all"):
        key = f"objl_eps0.1_noise_on_{noise_on}"
        out[key] = medians([final(base.replace(noise_on=noise_on, seed=s)) for s in range(args.seeds)])
        print(key, json.dumps({k: v for k, v in out[key].items() if k != "runs"}), flush=True)
    for alg in ("outl", "outg"):
        out[f"{alg}_eps0.1"] = final(base.replace(algorithm=alg))
        print(alg, json.dumps(out[f"{alg}_eps0.1"]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
