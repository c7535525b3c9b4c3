"""Clarabel's settings for the zone solves, measured (issue #29: refinement, linear solver).

Runs case118 with its 3 published zones (objl, seeded) once per variant of the settings the
zones' Clarabel solves use (:data:`powerdp.opf.conic.LOCAL_SETTINGS` plus the variant's), the
variants interleaved ``--repeats`` times so a loaded machine slows them alike, and prints one
JSON line per run: the loop's wall time, time inside Clarabel, interior-point iterations per
solve, and the largest relative difference of the objective history from the first variant's
(``refine_on_auto``, the settings before issue #29). The last line is the median over the
repeats per variant.

    python benchmarks/clarabel_settings.py                      # T = 100, E = 5, 2 repeats
    python benchmarks/clarabel_settings.py --rounds 20 --repeats 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import numpy as np

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.opf import conic

#: the variants measured: name → Clarabel settings on top of LOCAL_SETTINGS
VARIANTS: dict[str, dict] = {
    "refine_on_auto": {"iterative_refinement_enable": True, "direct_solve_method": "auto"},  # the settings before #29
    "local_settings": {},  # LOCAL_SETTINGS as they are (refinement off, QDLDL)
    "refine_loose": {"iterative_refinement_enable": True, "iterative_refinement_reltol": 1e-10,
                     "iterative_refinement_abstol": 1e-10, "iterative_refinement_max_iter": 3},
    "tight": {"tol_gap_abs": 1e-13, "tol_gap_rel": 1e-13, "tol_feas": 1e-12},  # how far any of them is from a tight solve
    "feas_1e-8": {"tol_feas": 1e-8},  # the feasibility tolerance before issue 39's stall was traced to it
    "feas_1e-10": {"tol_feas": 1e-10},
    "static_reg_1e-8": {"static_regularization_constant": 1e-8},  # Clarabel's default static regularization
    "static_reg_1e-10": {"static_regularization_constant": 1e-10},
    "no_column_scaling": {"column_scaling_power": 0.0},  # conic.column_scaling off (its power 0: every factor 1)
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--local-updates", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list of {', '.join(VARIANTS)}")
    ap.add_argument("--json", help="write every run and the medians as JSON")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    names = args.variants.split(",")
    base = dict(conic.LOCAL_SETTINGS)
    power = conic.COLUMN_SCALING_POWER
    runs, ref = [], None
    for rep in range(args.repeats):
        for name in names:
            conic.LOCAL_SETTINGS.clear()
            settings = dict(VARIANTS[name])
            conic.COLUMN_SCALING_POWER = settings.pop("column_scaling_power", power)
            conic.LOCAL_SETTINGS.update({**base, **settings})
            cfg = RunConfig(case=args.case, zones=args.zones, algorithm="objl", rounds=args.rounds, local_updates=args.local_updates,
                            epsilon=0.1, backend="serial", local_solver="clarabel", seed=0)
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            res = run_distributed(cfg, reference=False)
            s = res.summary
            hist = res.history["objective"].to_numpy()
            if ref is None:
                ref = hist
            row = {
                "variant": name, "repeat": rep, "loadavg_1min": round(load, 2), "loop_s": round(s["wall_s"], 3),
                "total_s": round(time.perf_counter() - t0, 3), "solver_s": round(s["solver_s"], 3),
                "iterations_per_solve": round(s["solver_iterations"] / s["solves"], 2),
                "max_rel_objective_difference_vs_first": float(f"{np.max(np.abs(hist - ref) / np.abs(ref)):.2e}"),
            }
            runs.append(row)
            print(json.dumps(row), flush=True)
    conic.LOCAL_SETTINGS.clear()
    conic.LOCAL_SETTINGS.update(base)
    conic.COLUMN_SCALING_POWER = power
    medians = {
        name: {k: float(np.median([r[k] for r in runs if r["variant"] == name]))
               for k in ("loop_s", "solver_s", "iterations_per_solve", "max_rel_objective_difference_vs_first")}
        for name in names
    }
    print(json.dumps({"medians": medians}))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "runs": runs, "medians": medians}, fh, indent=2)


if __name__ == "__main__":
    main()
