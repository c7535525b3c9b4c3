"""Benchmark the private distributed solve (issue: speed of the ADMM loop).

Runs case118 with its 3 published zones, T rounds of E local updates of
``objl`` with each local solver (Ipopt and Clarabel, same seed) on the serial
backend (``--backends serial,process`` adds the process backend), and reports
wall time, time inside the solver and time elsewhere (messages, kernels,
Python), plus setup, the process's CPU time (``total_cpu_s``: set-up and loop; on a
shared machine wall time is inflated by the others, CPU time much less), and each
solver's speed-up over Ipopt and the largest
relative difference of its objective history from Ipopt's, one JSON line per
run (with the machine's load average and each zone's time inside its solver).

Accuracy reference: before the timed runs, one serial run with Clarabel solved
tightly (``clarabel-tight``: :data:`TIGHT_CLARABEL`, gaps and feasibility 1e-12,
iterative refinement on; a benchmark-only setting, not a registered solver) gives
the reference history; every row reports its largest relative history difference
from it (``max_rel_objective_difference_vs_clarabel_tight``) and from the run's
Clarabel (``..._vs_clarabel``) beside the one from Ipopt. ``--no-tight-reference``
skips it. On case118 most of the reference's solves end AlmostSolved (Clarabel does
not reach 1e-12 there): it bounds Clarabel's spread, it is not exact
(docs/results/performance.md). The reference is Clarabel's own solution, not polished
(``conic.POLISH``); ``--solvers clarabel-raw`` adds a run's Clarabel without its polish
(serial backend only).

    python benchmarks/admm.py                 # T = 100, E = 5, both solvers, serial
    python benchmarks/admm.py --rounds 20 --local-updates 1 --json out.json
    python benchmarks/admm.py --solvers clarabel --backends serial,process
    PYTHONPATH=../old python benchmarks/admm.py --solvers clarabel --save-histories old.json   # another version's code
    python benchmarks/admm.py --solvers clarabel --compare-to old.json                        # … against this one
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import time

import numpy as np

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.opf import conic

#: the accuracy reference's Clarabel settings, on top of conic.CLARABEL_SETTINGS (a run's are conic.LOCAL_SETTINGS:
#: gaps 1e-10, refinement off)
TIGHT_CLARABEL = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "equilibrate_enable": False,
                  "iterative_refinement_enable": True, "direct_solve_method": "qdldl", "max_iter": 400}


#: T rounds whatever the residuals (a version with the stopping rule of issue 39 would stop at its tolerance)
EVERY_ROUND = {"tolerance": 0.0} if "tolerance" in {f.name for f in dataclasses.fields(RunConfig)} else {}


def _max_rel(a: np.ndarray, ref: np.ndarray) -> float:
    return float(f"{np.max(np.abs(a - ref) / np.abs(ref)):.2e}")


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
    ap.add_argument("--no-tight-reference", action="store_true", help="skip the tight-Clarabel reference run (module doc)")
    ap.add_argument("--json", help="write the numbers as JSON")
    ap.add_argument("--save-histories", metavar="FILE", help="write each run's objective history and final dispatch as JSON")
    ap.add_argument("--compare-to", metavar="FILE", help="a --save-histories file (e.g. of another version): report the largest "
                    "differences of each run's history and dispatch from that file's run of the same solver and backend")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    rows = []
    histories = {}
    saved: dict[str, dict] = {}
    compare = json.loads(open(args.compare_to).read()) if args.compare_to else {}
    runs = [(b, s) for b in args.backends.split(",") for s in args.solvers.split(",")]
    if not args.no_tight_reference:
        runs.insert(0, ("serial", "clarabel-tight"))
    for backend, solver in runs:
        tight = solver == "clarabel-tight"
        raw = tight or solver == "clarabel-raw"  # Clarabel's own solutions, not polished (serial backend only)
        if raw and backend != "serial":
            raise SystemExit(f"{solver} runs on the serial backend only (it patches this process's settings)")
        cfg = RunConfig(
            case=args.case,
            zones=args.zones,
            algorithm=args.algorithm,
            rounds=args.rounds,
            local_updates=args.local_updates,
            epsilon=args.epsilon,
            backend=backend,
            warm_start=not args.no_warm_start,
            local_solver="clarabel" if raw else solver,
            seed=args.seed,  # the same noise for every solver and backend (a seeded experiment)
            **EVERY_ROUND,
        )
        saved_settings, saved_polish = dict(conic.LOCAL_SETTINGS), conic.POLISH
        if tight:  # ClarabelSolver.from_config reads conic.LOCAL_SETTINGS: the serial run's zones take these
            conic.LOCAL_SETTINGS.update(TIGHT_CLARABEL)
        conic.POLISH = saved_polish and not raw
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            res = run_distributed(cfg, reference=False)
        finally:
            conic.LOCAL_SETTINGS.clear()
            conic.LOCAL_SETTINGS.update(saved_settings)
            conic.POLISH = saved_polish
        total = time.perf_counter() - t0
        cpu = time.process_time() - c0  # this process's CPU time (set-up and loop; the serial backend's zones run here)
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
            "total_cpu_s": round(cpu, 2),
            "solver_s_summed_over_zones": round(inside, 2),
            "solves": s["solves"],
            "iterations_per_solve": round(s["solver_iterations"] / s["solves"], 1),
            "ms_per_solve": round(1000 * inside / s["solves"], 2),
            "final_objective": round(s["final_objective"], 6),
            "final_feasibility": round(s["final_feasibility"], 6),
            "loadavg_1min": round(os.getloadavg()[0], 2),  # a shared machine's load while it ran
            "straggler_zone": s.get("straggler_zone"),
            "zone_solver_s": {int(z): round(t, 3) for z, t in s.get("zone_solver_s", {}).items()},
        }
        if backend == "serial":
            row["outside_solver_s"] = round(max(loop - inside, 0.0), 2)
            row["outside_solver_share"] = round(max(loop - inside, 0.0) / loop, 3)
        histories[backend, solver] = res.history["objective"].to_numpy()
        dispatch = {f"{backend}/{solver}/{z}": [float(v) for k, v in sorted(sol.items(), key=str) if k[0] in ("pg", "qg")]
                    for z, sol in res.zone_solutions.items()}
        saved[f"{backend}/{solver}"] = {"objective": histories[backend, solver].tolist(), "dispatch": dispatch}
        other = compare.get(f"{backend}/{solver}")
        if other is not None:
            ref_h = np.asarray(other["objective"])
            row["max_rel_objective_difference_vs_compare_to"] = float(f"{np.max(np.abs(histories[backend, solver] - ref_h) / np.abs(ref_h)):.2e}")
            row["max_abs_dispatch_difference_vs_compare_to"] = float(f"{max(np.max(np.abs(np.subtract(v, other['dispatch'][k]))) for k, v in dispatch.items()):.2e}")
        ref = histories.get((backend, "ipopt"))
        if solver != "ipopt" and ref is not None:
            first = next(r for r in rows if r["backend"] == backend and r["solver"] == "ipopt")
            row["speedup_total_vs_ipopt"] = round(first["total_s"] / total, 2)
            row["speedup_loop_vs_ipopt"] = round(first["loop_s"] / loop, 2)
            row["max_rel_objective_difference_vs_ipopt"] = _max_rel(histories[backend, solver], ref)
        if solver not in ("clarabel", "clarabel-tight") and (backend, "clarabel") in histories:
            row["max_rel_objective_difference_vs_clarabel"] = _max_rel(histories[backend, solver], histories[backend, "clarabel"])
        if not tight and ("serial", "clarabel-tight") in histories:
            row["max_rel_objective_difference_vs_clarabel_tight"] = _max_rel(histories[backend, solver],
                                                                             histories["serial", "clarabel-tight"])
        rows.append(row)
        print(json.dumps(row))
    # the last line: every run's largest relative history difference from every other run of its backend (and the reference)
    accuracy = {f"{b}/{s}": {f"vs_{ob}/{os_}": _max_rel(h, oh) for (ob, os_), oh in histories.items() if (ob, os_) != (b, s)
                             and (ob == b or os_ == "clarabel-tight")}
                for (b, s), h in histories.items()}
    print(json.dumps({"max_rel_objective_difference": accuracy}))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": rows, "max_rel_objective_difference": accuracy}, fh, indent=2)
    if args.save_histories:
        with open(args.save_histories, "w") as fh:
            json.dump(saved, fh)


if __name__ == "__main__":
    main()
