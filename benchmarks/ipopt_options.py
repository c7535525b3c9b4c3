"""Compare Ipopt option sets on the local solves of a real distributed run.

Runs a few rounds of the private solve (case118, 3 zones, objl, E = 5 by
default) and records every local solve: the objective, the starting point and
the multipliers handed to Ipopt. It then replays the recorded solves with fresh
solvers under each option set (first solve of a zone with the ``default``
profile, later ones with ``warm``, each overlaid with the variant's options)
and reports iterations per solve, milliseconds per solve and per iteration, and
how far the solutions move from the first variant's.

    python benchmarks/ipopt_options.py
    python benchmarks/ipopt_options.py --rounds 8 --case case14 --repeat 3

The solves replayed are the same for every variant, so iteration counts compare
exactly; times are noisy on a shared machine (use ``--repeat`` and read the
minimum).
"""

from __future__ import annotations

import argparse
import json
import logging

import numpy as np

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.opf import solvers as solver_module
from powerdp.opf.solvers import IpoptSolver, load_ipopt_profile

COLD = "cold"  # marker key: ignore the recorded starting point and multipliers

# The previous warm profile (mu_init 1e-4, pushes 1e-9) as a delta from the current one.
OLD_WARM = {
    "mu_init": 1e-4,
    "warm_start_bound_push": 1e-9,
    "warm_start_bound_frac": 1e-9,
    "warm_start_slack_bound_push": 1e-9,
    "warm_start_slack_bound_frac": 1e-9,
    "warm_start_mult_bound_push": 1e-9,
    "mumps_scaling": 77,
    "mumps_pivot_order": 7,
    "min_refinement_steps": 1,
}
VARIANTS: dict[str, dict] = {
    "warm profile": {},
    "previous warm profile": OLD_WARM,
    "warm, MUMPS defaults": {"mumps_scaling": 77, "mumps_pivot_order": 7, "min_refinement_steps": 1},
    "warm, mu_init 1e-4": {"mu_init": 1e-4},
    "warm, mu_init 1e-1": {"mu_init": 1e-1},
    "warm, tol 1e-6": {"tol": 1e-6, "constr_viol_tol": 1e-8},
    "primal-only warm start": {"warm_start_init_point": "no"},
    # every solve from the flat start with the default profile and the same MUMPS tuning
    "cold start (flat point)": {COLD: True, "warm_start_init_point": "no", "mu_init": 0.1},
}


def record(cfg: RunConfig) -> list:
    calls = []
    original = solver_module.IpoptSolver.solve

    def recording(self, objective=None, x0=None, **kw):
        calls.append((self, objective, None if x0 is None else np.array(x0), {k: None if v is None else np.array(v) for k, v in kw.items()}))
        return original(self, objective, x0, **kw)

    solver_module.IpoptSolver.solve = recording
    try:
        run_distributed(cfg, reference=False)
    finally:
        solver_module.IpoptSolver.solve = original
    return calls


def replay(calls: list, extra: dict) -> tuple[float, int, list[np.ndarray], int]:
    """Re-solve the recorded calls with fresh solvers; returns (seconds, iterations, solutions, failures)."""
    warm = load_ipopt_profile("warm")
    solvers: dict[int, IpoptSolver] = {}
    seconds, iterations, xs, failures = 0.0, 0, [], 0
    for original, objective, x0, kw in calls:
        key = id(original)
        first = key not in solvers
        if first:
            solvers[key] = IpoptSolver(original.problem, objective_pattern=objective)
        s = solvers[key]
        if extra.get(COLD):
            res = s.solve(objective)  # the compiled problem's flat start, no multipliers
        else:
            res = s.solve(objective, x0=x0, **kw)
        if first:
            s.set_options({**warm, **{k: v for k, v in extra.items() if k != COLD}})
        seconds += res.wall_s
        iterations += res.iterations
        failures += not res.success
        xs.append(res.x)
    return seconds, iterations, xs, failures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--algorithm", default="objl")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--local-updates", type=int, default=5)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=1, help="replays per variant; the fastest is reported")
    ap.add_argument("--json", help="write the rows as JSON")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    cfg = RunConfig(
        case=args.case,
        zones=args.zones,
        algorithm=args.algorithm,
        rounds=args.rounds,
        local_updates=args.local_updates,
        epsilon=args.epsilon,
        backend="serial",
        seed=0,  # a seeded experiment: the recorded solves are the same every time
    )
    calls = record(cfg)
    print(f"{len(calls)} local solves recorded ({args.case}, {args.zones} zones, {args.algorithm}, {args.rounds} rounds, E={args.local_updates})")
    rows, reference = [], None
    for label, extra in VARIANTS.items():
        best = None
        for _ in range(args.repeat):
            seconds, iterations, xs, failures = replay(calls, extra)
            best = seconds if best is None else min(best, seconds)
        if reference is None:
            reference = xs
        row = {
            "variant": label,
            "iterations_per_solve": round(iterations / len(calls), 2),
            "ms_per_solve": round(1000 * best / len(calls), 2),
            "ms_per_iteration": round(1000 * best / max(iterations, 1), 3),
            "max_abs_x_diff": float(max(np.abs(a - b).max() for a, b in zip(xs, reference))),
            "failures": failures,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
