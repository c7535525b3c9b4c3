"""Private economic dispatch (issue 12): the ``cost+shedding`` objective, exact and private.

Measures, on one case split into zones (default case118, its 3 bundled zones):

* parity: ``exact`` ADMM on ``cost+shedding`` against the centralized ``cost`` OPF (the reference
  dispatch): generation cost of the released dispatch, its relative gap, total shedding;
* private dispatch: ``objl`` at each ε × seed with the product defaults otherwise (auto ω, ρ, capped η,
  linearize private): the cost gap to the centralized ``cost`` optimum, the total active imbalance
  Σ|yp + pd| in MW and in % of the total load, and the consensus residual ‖w − Bz‖.

    python benchmarks/dispatch.py                                   # the issue's table (~15 min serial)
    python benchmarks/dispatch.py --epsilons 1 --seeds 0 --rounds 50
    python benchmarks/dispatch.py --linearize all --eta capped      # the paper's full linearization
    python benchmarks/dispatch.py --json dispatch.json

Runs one at a time (serial backend), so it is gentle on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import time

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.grid.loading import load_case
from powerdp.opf.centralized import solve_opf


def run(label: str, config: RunConfig, net, reference: float, load_mw: float) -> dict:
    t0 = time.perf_counter()
    res = run_distributed(config, network=net, reference=False)
    s = res.summary
    row = {
        "run": label,
        "epsilon": config.epsilon if config.private else None,
        "seed": config.seed,
        "rounds": s["rounds"],
        "final_cost": s["final_cost"],
        "cost_gap": (s["final_cost"] - reference) / reference,
        "shedding_mw": s["total_shedding_mw"],
        "shedding_pct_load": 100.0 * s["total_shedding_mw"] / load_mw,
        "residual": s["final_feasibility"],
        "omega": s["shedding_weight"],
        "rho": res.config.rho,
        "wall_s": time.perf_counter() - t0,
    }
    print(
        f"{label:<10} {row['epsilon'] if row['epsilon'] is not None else '-':>5} {config.seed:>4} {row['final_cost']:>12.2f} "
        f"{100 * row['cost_gap']:>+9.4f} {row['shedding_mw']:>10.4f} {row['shedding_pct_load']:>8.4f} "
        f"{row['residual']:>10.3e} {row['wall_s']:>7.0f}",
        flush=True,
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rounds", type=int, default=100, help="rounds of the private runs (default: 100, the product default)")
    ap.add_argument("--exact-rounds", type=int, default=60)
    ap.add_argument("--shedding-weight", default=None, help="ω (default: auto)")
    ap.add_argument("--rho", type=float, default=None, help="ADMM penalty (default: powerdp's, scaled to the costs)")
    ap.add_argument("--eta", default="capped")
    ap.add_argument("--linearize", default="private", choices=["private", "all"])
    ap.add_argument("--skip-exact", action="store_true")
    ap.add_argument("--json", help="write the rows as JSON here")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    weight = None if args.shedding_weight in (None, "auto") else float(args.shedding_weight)

    net = load_case(args.case)
    load_mw = float(net.pd.sum() * net.base_mva)
    ref = solve_opf(net, objective="cost")
    central = solve_opf(net, objective="cost+shedding", shedding_weight=weight)
    print(f"{net.name}: total load {load_mw:.1f} MW; centralized cost OPF {ref.objective:.4f} $/h")
    print(
        f"centralized cost+shedding (ω {central.shedding_weight:.4g}): generation cost {central.generation_cost:.4f} $/h "
        f"(gap {100 * (central.generation_cost - ref.objective) / ref.objective:+.5f} %), shedding {central.total_shedding_mw:.4f} MW"
    )
    print(f"{'run':<10} {'eps':>5} {'seed':>4} {'cost $/h':>12} {'gap %':>9} {'shed MW':>10} {'% load':>8} {'residual':>10} {'wall s':>7}")
    base = dict(case=args.case, zones=args.zones, objective="cost+shedding", shedding_weight=weight, rho=args.rho, checkpoint_every=0)
    rows = []
    if not args.skip_exact:
        rows.append(run("exact", RunConfig(algorithm="exact", rounds=args.exact_rounds, **base), net, ref.objective, load_mw))
    for eps in args.epsilons:
        for seed in args.seeds:
            cfg = RunConfig(algorithm="objl", epsilon=eps, seed=seed, rounds=args.rounds, eta=args.eta, linearize=args.linearize, **base)
            rows.append(run("objl", cfg, net, ref.objective, load_mw))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"reference_cost": ref.objective, "central_cost_shedding": central.generation_cost, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
