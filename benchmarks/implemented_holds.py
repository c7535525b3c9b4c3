"""What a zone should hold in its implemented dispatch (issue 37; docs/privacy.md, "The implemented dispatch").

A private run, then each zone re-solves its own problem with its true loads holding, at the agreed values (the mean
of the last releases), one of (powerdp.apps.power_flow.implemented.HOLDS):

* ``own-end``: the active power at its own end of each of its tie-lines (the product's);
* ``both-ends``: the active power at both ends of each of its tie-lines;
* ``shared``: every shared variable (the boundary's W and flows);

and the dispatch is evaluated as an operator would (powerdp.opf.ac_evaluation), beside the centralized dispatch
evaluated the same way. Prints one line per (algorithm, ε, seed, hold) and a JSON document at the end.

    python benchmarks/implemented_holds.py                       # case118, 3 zones, inpg, total ε 0.1 and 1, seeds 0-2
    python benchmarks/implemented_holds.py --case case14 --zones 2 --algorithms inpl totl
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

import numpy as np


def implemented(net, part, cfg, agreed: dict, hold: str):
    """Every zone's implemented point with the given hold, from fresh zone models (true loads)."""
    from powerdp.apps.power_flow.implemented import held_flows, solve_implemented
    from powerdp.opf.direct import compile_zone
    from powerdp.opf.objectives import total_shedding_mw

    by_zone = part.shared_by_zone(cfg.flows)
    solutions, shed, shedding, held_kinds = {}, np.zeros(net.n_bus), 0.0, set()
    for z in range(part.n_zones):
        own = part.own_buses(z)
        prob = compile_zone(net, own, objective=cfg.objective, flows=cfg.flows, shedding_weight=cfg.shedding_weight)
        held = held_flows(net, prob, own, by_zone[z], hold=hold)
        point = solve_implemented(prob, prob.objective, held, np.array([agreed[k] for k in by_zone[z]]), cfg.shedding_weight)
        solutions[z] = dict(zip(prob.var_keys, point.z))
        sp = prob.expressions["sp"](point.z)
        shed[np.asarray(prob.expressions["sp"].keys, dtype=np.int64)] = sp * net.base_mva
        shedding += total_shedding_mw(sp, net.base_mva)
        held_kinds.add(point.held)
    return solutions, shed, shedding, held_kinds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="case118")
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--algorithms", nargs="+", default=["inpg"])
    ap.add_argument("--budgets", nargs="+", type=float, default=[0.1, 1.0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--local-solver", default="clarabel")
    args = ap.parse_args(argv)
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    from powerdp.apps.power_flow.config import RunConfig
    from powerdp.apps.power_flow.implemented import HOLDS
    from powerdp.apps.power_flow.plan import resolve_config, resolve_partition
    from powerdp.apps.power_flow.runner import _centralized_reference, run_distributed
    from powerdp.grid.loading import load_case
    from powerdp.opf.ac_evaluation import evaluate_ac
    from powerdp.opf.tables import dispatch_from_zones

    net = load_case(args.case)
    base = resolve_config(RunConfig(case=args.case, zones=args.zones, objective="cost+shedding",
                                    local_solver=args.local_solver), net)
    part = resolve_partition(net, base)
    central = _centralized_reference(net, base)
    ref = evaluate_ac(net, central.dispatch, central.buses["p_shed_mw"].to_numpy(dtype=float))
    print(f"{args.case}: the centralized dispatch evaluated as an operator would: {ref.cost:.2f} $/h ({ref.restoration})",
          file=sys.stderr, flush=True)
    rows = []
    for alg in args.algorithms:
        for eps in args.budgets:
            for seed in range(args.seeds):
                delta = 1e-5 if alg.endswith("g") else None
                cfg = base.replace(algorithm=alg, target_epsilon=eps, target_delta=delta, seed=seed)
                res = run_distributed(cfg, network=net, partition=part, reference=False, ac_evaluation=False)
                keys = res.shared_keys
                agreed = {k: float(np.mean([sol[k] for sol in res.zone_solutions.values() if k in sol])) for k in keys}
                for hold in HOLDS:
                    sols, shed, shedding, kinds = implemented(net, part, cfg, agreed, hold)
                    ev = evaluate_ac(net, dispatch_from_zones(net, part.zone_of_bus, sols), shed)
                    row = {"algorithm": alg, "total_epsilon": eps, "seed": seed, "hold": hold, "held": sorted(kinds),
                           "shedding_mw": shedding, **{k: v for k, v in ev.to_dict(shedding, ref.cost).items() if k != "direct"}}
                    rows.append(row)
                    gap = row["relative_cost_gap"]
                    print(f"{alg} ε {eps:g} seed {seed} {hold:9s}: AC cost gap {'n/a' if gap is None else f'{gap:+.4%}'}, shed "
                          f"{shedding:.2f} MW, {ev.restoration}, held {','.join(sorted(kinds))}", file=sys.stderr, flush=True)
    json.dump({"case": args.case, "zones": args.zones, "reference_cost": ref.cost, "rows": rows}, sys.stdout, indent=2,
              default=float)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
