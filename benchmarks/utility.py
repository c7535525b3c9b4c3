"""Utility of the product defaults on case118 (3 published zones), as the acceptance of the
paper-coordinates issue measures it.

* nonprivate with the paper's settings (ρ = 100, η_t = 1/√t, T = 100, E = 1);
* objl, ε = 0.1 per step, product defaults (sound sensitivities, capped η, E = 1, T = 100):
  final objective and feasibility, median of 3 seeds, and the worst W_p violation of a release;
  the same with noise on every entry of z (--noise-on all, as the paper draws it);
* outl / outg at ε = 0.1 (sound sensitivities): how far their releases fall outside W_p.

    python benchmarks/utility.py --json utility.json

``budget`` mode (the privacy-budget issue): every mechanism at the same *total* ε per zone for the
whole run, product defaults (T = 100, E = 1, capped η, sound sensitivities), 3 seeds, next to the
floor n·(β/ε)² (docs/privacy.md). Two sweeps: pure ε-DP (δ = 0: objl, outl, inpl) and δ = 1e-5
(objg, outg, inpg, and objl, inpl calibrated with the exact Laplace PLD). They are ``powerdp sweep``
runs with ``target_epsilons``, so ``powerdp plot OUT/pure`` (or ``OUT/delta``) draws the figure
against the total budget:

    python benchmarks/utility.py budget --out budget_sweep --jobs 2
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.studies.plots import utility_floor
from powerdp.studies.sweep import SweepSpec, run_sweep

BUDGET_ALGORITHMS = ["objl", "objg", "outl", "outg", "inpl", "inpg"]
PURE = ["objl", "outl", "inpl"]  # Laplace at δ = 0
WITH_DELTA = ["objg", "outg", "inpg", "objl", "inpl"]  # δ = 1e-5 (Laplace: exact PLD calibration)
BUDGETS = [0.1, 1.0, 10.0]


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


def budget_sweep(args: argparse.Namespace, algorithms: list[str], delta: float | None, out: str):
    base = {"rounds": args.rounds} if delta is None else {"rounds": args.rounds, "target_delta": delta}
    spec = SweepSpec(
        cases=[args.case], partitions=[{"zones": 3}], algorithms=algorithms, target_epsilons=args.budgets,
        local_updates=[1], seeds=list(range(args.seeds)), base=base, source=f"benchmarks/utility.py budget ({out})",
    )

    def progress(run: str, error: str | None, k: int, n: int) -> None:
        print(f"[{k}/{n}] {run}" + (f"  FAILED: {error}" if error else ""), file=sys.stderr, flush=True)

    runs = run_sweep(spec, out, jobs=args.jobs, progress=progress)
    return runs.assign(delta=0.0 if delta is None else delta)


def budget_table(args: argparse.Namespace) -> None:
    import pandas as pd

    pure = [a for a in args.algorithms if a in PURE]
    with_delta = [a for a in args.algorithms if a in WITH_DELTA]
    parts = []
    if pure:
        parts.append(budget_sweep(args, pure, None, f"{args.out}/pure"))
    if with_delta:
        parts.append(budget_sweep(args, with_delta, 1e-5, f"{args.out}/delta"))
    runs = pd.concat(parts, ignore_index=True)
    rows = []
    for (alg, delta, te), g in runs.groupby(["algorithm", "delta", "target_epsilon"], sort=False):
        n = g["load_values"].iloc[0]
        if pd.isna(n):  # runs made before summaries recorded it
            from powerdp.grid.loading import load_case

            n = 2 * load_case(args.case).n_bus
        floor = float(utility_floor(n, g["beta"].iloc[0], te))
        rows.append({
            "algorithm": alg, "delta": delta, "total_epsilon": te, "floor": floor,
            "median_objective": float(g["final_objective"].median()),
            "median_feasibility": float(g["final_feasibility"].median()),
            "max_violation": float(g["max_violation"].max()),
            "epsilon_total_max": float(g["epsilon_total"].max()),
            "objectives": [float(v) for v in g.sort_values("seed")["final_objective"]],
        })
    print(f"\n{args.case}, 3 zones, T = {args.rounds}, E = 1, product defaults, {args.seeds} seeds (median)")
    print(f"{'total ε':>8} {'δ':>6} {'algorithm':>9} {'objective F':>12} {'floor n(β/ε)²':>14} {'F/floor':>8} {'feasibility':>12} {'ε spent':>8}")
    order = {a: k for k, a in enumerate(BUDGET_ALGORITHMS)}
    for r in sorted(rows, key=lambda r: (r["total_epsilon"], r["delta"], order.get(r["algorithm"], 99))):
        print(f"{r['total_epsilon']:>8g} {r['delta']:>6g} {r['algorithm']:>9} {r['median_objective']:>12.4g} {r['floor']:>14.3g} "
              f"{r['median_objective'] / r['floor']:>8.3g} {r['median_feasibility']:>12.3g} {r['epsilon_total_max']:>8.4g}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "budget":
        ap = argparse.ArgumentParser(prog="utility.py budget", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        ap.add_argument("--case", default="case118")
        ap.add_argument("--seeds", type=int, default=3)
        ap.add_argument("--rounds", type=int, default=100)
        ap.add_argument("--algorithms", nargs="+", default=BUDGET_ALGORITHMS)
        ap.add_argument("--budgets", nargs="+", type=float, default=BUDGETS)
        ap.add_argument("--out", required=True, help="sweep directory (resumable; powerdp plot OUT draws the figure)")
        ap.add_argument("--jobs", type=int, default=None)
        ap.add_argument("--json")
        budget_table(ap.parse_args(sys.argv[2:]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    out: dict = {}
    base = RunConfig(case=args.case, zones=3, algorithm="objl", epsilon=0.1, local_updates=1, rounds=100, seed=0)
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
