"""How long a private run with its implemented dispatch takes, and its operator's evaluation apart (issue 37).

``powerdp run case118 --zones 3 --objective cost+shedding --target-epsilon 1`` (the default mechanism, totl), serial,
one process: the run's own time (set-up, the rounds, the zones' implemented dispatch) in wall and CPU seconds, and the
simulation's evaluation (the centralized reference and the AC evaluation of both dispatches) apart. Each local
solver's first run in the process is a warm-up (numba's kernels, pandapower's import) and is not counted.

    python benchmarks/implemented_speed.py --repeats 5 --solvers clarabel active-set
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time


def one(case: str, solver: str, rounds: int, eps: float, seed: int) -> dict:
    from powerdp.apps.power_flow.config import RunConfig
    from powerdp.apps.power_flow.runner import run_distributed

    cfg = RunConfig(case=case, zones=3, objective="cost+shedding", algorithm="totl", target_epsilon=eps, seed=seed,
                    local_solver=solver, rounds=rounds)
    w0, c0 = time.perf_counter(), time.process_time()
    res = run_distributed(cfg, reference=False, ac_evaluation=False)  # the run: set-up, rounds, implemented dispatch
    run_wall, run_cpu = time.perf_counter() - w0, time.process_time() - c0
    from powerdp.apps.power_flow.operator_view import evaluate_implemented
    from powerdp.apps.power_flow.plan import resolve_config, resolve_partition
    from powerdp.apps.power_flow.runner import _centralized_reference
    from powerdp.grid.loading import load_case

    w1, c1 = time.perf_counter(), time.process_time()  # the simulation's evaluation, apart
    net = load_case(case)
    rcfg = resolve_config(cfg, net)
    evaluate_implemented(res, net, resolve_partition(net, rcfg), _centralized_reference(net, rcfg))
    s = res.summary
    return {"solver": solver, "run_wall_s": run_wall, "run_cpu_s": run_cpu, "setup_s": s["setup_s"], "rounds_s": s["wall_s"],
            "implemented_s": s["implemented_s"], "evaluation_wall_s": time.perf_counter() - w1,
            "evaluation_cpu_s": time.process_time() - c1, "gap": s["implemented"]["relative_cost_gap"],
            "load_average": os.getloadavg()[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="case118")
    ap.add_argument("--solvers", nargs="+", default=["clarabel", "active-set"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--epsilon", type=float, default=1.0)
    args = ap.parse_args(argv)
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    out = {"case": args.case, "rounds": args.rounds, "runs": []}
    for solver in args.solvers:
        one(args.case, solver, args.rounds, args.epsilon, 0)  # warm-up: compiled kernels, imports
    for k in range(args.repeats):
        for solver in args.solvers:  # interleaved
            row = one(args.case, solver, args.rounds, args.epsilon, k)
            out["runs"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    out["median"] = {s: {key: statistics.median(r[key] for r in out["runs"] if r["solver"] == s)
                         for key in ("run_wall_s", "run_cpu_s", "setup_s", "rounds_s", "implemented_s", "evaluation_wall_s",
                                     "evaluation_cpu_s", "load_average")} for s in args.solvers}
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
