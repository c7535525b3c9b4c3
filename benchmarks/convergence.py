"""Rounds to an answer: how many ADMM rounds a run needs to reach a relative cost gap and relative residuals.

One run per call, of any powerdp version on the path (``PYTHONPATH=<tree>``: this script uses only
``RunConfig``, ``run_distributed`` and the coordinator's public arrays, which every version since #27 has).
Every round it records the objective Σ_p f_p at the released points, its relative gap to the centralized SOC
optimum, and the two relative residuals of Boyd et al. §3.3.1 computed from the coordinator's arrays:

* primal ‖w − Bz‖ / max(‖w‖, ‖Bz‖) over the zones' stacked copies;
* dual ‖ρ ∘ B(w − w_prev)‖ / ‖λ‖ (ρ per entry when the coordinator holds a vector).

and prints one JSON line: the first round from which each of these stays at or below 1e-3 / 1e-4 until the last
round run (``null``: never), the wall time to it (set-up included), and the final figures. ``--trace FILE`` writes
the per-round rows.

The centralized optimum is solved once (``--reference-solver``, default Ipopt: Clarabel's centralized solve of
cost+shedding stops 1e-3 to 4e-3 above Ipopt's optimum on case1354_pegase and case13659pegase, the heavy shedding
weight's conditioning) and kept in ``--reference-cache`` (a JSON file) for later runs.

    python benchmarks/convergence.py --case case118 --zones 16 --objective cost+shedding --algorithm nonprivate
    PYTHONPATH=../main python benchmarks/convergence.py --case ../shared/data/pglib/pglib_opf_case2000_goc.m ...
    python benchmarks/convergence.py ... --algorithm objl --target-epsilon 1 --target-delta 1e-5 --seed 0
    python benchmarks/convergence.py ... --set rho_schedule=constant --set tolerance=0     # any RunConfig field
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.engine.consensus import coordinator as coordinator_module

THRESHOLDS = (1e-3, 1e-4)


def relative_residuals(c) -> tuple[float, float]:
    """Boyd et al.'s relative residuals from a coordinator's arrays (any version)."""
    own = getattr(c, "relative_residuals", None)
    if callable(own):
        return own()
    stacked = c.w[c.gidx]
    primal = float(np.linalg.norm(stacked - c.released)) / max(float(np.linalg.norm(stacked)), float(np.linalg.norm(c.released)), 1e-300)
    rho = np.asarray(c.rho, dtype=float)
    step = (c.w - c.w_prev)[c.gidx]
    dual = float(np.linalg.norm(rho * step if rho.ndim == 0 else rho * step)) / max(float(np.linalg.norm(c.lam)), 1e-300)
    return primal, dual


def centralized(case: str, objective: str, cache: Path | None, solver: str = "ipopt") -> dict:
    """The centralized SOC optimum of ``case`` (``solver``), from ``cache`` when it holds it."""
    key = f"{Path(case).name}|{objective}|{solver}"
    known = json.loads(cache.read_text()) if cache is not None and cache.is_file() else {}
    if key not in known:
        from powerdp.opf.centralized import solve_opf

        t0 = time.perf_counter()
        res = solve_opf(case, objective=objective, solver=solver)
        known[key] = {"objective": float(res.objective), "status": res.status_name, "wall_s": time.perf_counter() - t0,
                      "generation_cost": float(res.generation_cost), "total_shedding_mw": float(res.total_shedding_mw)}
        if cache is not None:
            cache.write_text(json.dumps(known, indent=1) + "\n")
    return known[key]


def first_stay(values: list[float], threshold: float) -> int | None:
    """The first index from which every value is ≤ ``threshold`` (None: the last one is above it)."""
    idx = None
    for i in range(len(values) - 1, -1, -1):
        if not (values[i] <= threshold):
            break
        idx = i
    return idx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--zones", type=int, default=16)
    ap.add_argument("--partition", default=None)
    ap.add_argument("--method", default="auto", help="partition method (default auto: as powerdp run)")
    ap.add_argument("--algorithm", default="nonprivate")
    ap.add_argument("--objective", default="cost+shedding")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--local-solver", default="clarabel")
    ap.add_argument("--backend", default="serial")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--target-epsilon", type=float, default=None)
    ap.add_argument("--target-delta", type=float, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=JSON", help="any RunConfig field (JSON value)")
    ap.add_argument("--keep-stopping", action="store_true", help="keep the version's stopping rule (default: every round)")
    ap.add_argument("--reference-cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "powerdp_centralized.json")
    ap.add_argument("--reference-solver", default="ipopt")
    ap.add_argument("--label", default="")
    ap.add_argument("--trace", type=Path)
    ap.add_argument("--rho-floor", type=float, default=None,
                    help="an experiment: the balanced rule's ρ of every kind kept at or above this (patched in here)")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)

    ref = centralized(args.case, args.objective, args.reference_cache, args.reference_solver)
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    extra = {}
    for item in args.set:
        name, _, value = item.partition("=")
        extra[name] = json.loads(value)
    if not args.keep_stopping and "tolerance" in fields and "tolerance" not in extra:
        extra["tolerance"] = 0.0  # every round: the trajectory to the cap
    part = dict(partition=args.partition, zones=None) if args.partition else dict(zones=args.zones, partition_method=args.method)
    cfg = RunConfig(case=args.case, algorithm=args.algorithm, objective=args.objective, rounds=args.rounds,
                    local_solver=args.local_solver, backend=args.backend, workers=args.workers, checkpoint_every=0, seed=args.seed,
                    target_epsilon=args.target_epsilon, target_delta=args.target_delta, **part, **extra)

    rows: list[dict] = []
    original = coordinator_module.Coordinator.receive
    residuals: list[tuple[float, float]] = []
    rho_kinds: list[list[float] | None] = []
    zone_primal: list[list[float] | None] = []

    def receive(self, updates):
        res = original(self, updates)
        residuals.append(relative_residuals(self))
        kinds, rho = getattr(self, "kinds", None), np.asarray(self.rho, dtype=float)
        if kinds is not None and rho.shape == np.shape(kinds) and len(kinds):  # ρ of each kind of shared variable
            rho_kinds.append((np.bincount(kinds, rho) / np.maximum(np.bincount(kinds), 1)).tolist())
        else:
            rho_kinds.append(None)
        groups = getattr(self, "groups", None)  # zone · kinds + kind per stacked entry (versions since issue 39)
        if groups is not None and kinds is not None and len(kinds):
            n_kinds = int(np.max(kinds)) + 1
            sq = np.bincount(groups // n_kinds, (self.w[self.gidx] - self.released) ** 2)
            zone_primal.append(np.sqrt(sq).tolist())  # ‖w − B_p z_p‖ of each zone (p.u.)
        else:
            zone_primal.append(None)
        return res

    coordinator_module.Coordinator.receive = receive
    if args.rho_floor is not None:
        from powerdp.engine.consensus import penalties

        balance = penalties.GroupBalancing.update

        def floored(self, c) -> bool:
            changed = balance(self, c)
            if changed:
                c.rho = np.maximum(c.rho, args.rho_floor)
            return changed

        penalties.GroupBalancing.update = floored
        extra["rho_floor (patched)"] = args.rho_floor
    t0 = time.perf_counter()
    marks = {}

    def status(msg: str) -> None:
        if msg.startswith("initial projection"):
            marks["projection"] = time.perf_counter()

    def progress(row: dict) -> None:
        primal, dual = residuals[-1]
        gap = abs(row["objective"] - ref["objective"]) / abs(ref["objective"])
        rows.append({"round": row["round"], "elapsed_s": time.perf_counter() - t0, "objective": row["objective"], "gap": gap,
                     "primal_relative": primal, "dual_relative": dual, "feasibility": row["feasibility"],
                     "dual_residual": row["dual_residual"], "rho": float(np.mean(row["rho"])), "rho_by_kind": rho_kinds[-1],
                     "primal_by_zone": zone_primal[-1],
                     "wall_s": row["wall_s"]})
        if args.trace and row["round"] % 10 == 0:  # a long run's rows survive its interruption
            args.trace.write_text(json.dumps(rows) + "\n")

    cpu0 = time.process_time()
    # the rounds only: no operator's AC evaluation after them (pandapower's AC OPF of a 10 000-bus case takes longer
    # than its 250 rounds)
    import inspect

    quiet = {"ac_evaluation": False} if "ac_evaluation" in inspect.signature(run_distributed).parameters else {}  # older trees: none
    res = run_distributed(cfg, reference=False, progress=progress, status=status, **quiet)
    total = time.perf_counter() - t0
    s = res.summary
    setup = s["setup_s"]
    out = {"label": args.label, "case": Path(args.case).stem, "zones": s["n_zones"], "algorithm": args.algorithm,
           "objective": args.objective, "local_solver": args.local_solver, "backend": args.backend, "target_epsilon": args.target_epsilon,
           "set": extra, "rounds": len(rows), "setup_s": round(setup, 2), "loop_s": round(s["wall_s"], 2), "total_s": round(total, 2),
           "coordinator_cpu_s": round(time.process_time() - cpu0, 2), "round_s": round(s["wall_s"] / max(len(rows), 1), 3),
           "centralized": ref, "final_objective": s["final_objective"], "final_gap": rows[-1]["gap"] if rows else None,
           "final_primal_relative": rows[-1]["primal_relative"] if rows else None,
           "final_dual_relative": rows[-1]["dual_relative"] if rows else None, "epsilon_spent": max(s["epsilon_total"].values() or [0]),
           # the released dispatch's generation cost against the optimum's (its objective where the cache predates it:
           # cost+shedding's optimum sheds ~1e-3 p.u., 1e-5 of the objective) and the shedding: a private run's answer
           "final_cost": s.get("final_cost"), "total_shedding_mw": s.get("total_shedding_mw"),
           "cost_gap": (abs(s["final_cost"] - ref.get("generation_cost", ref["objective"])) / abs(ref.get("generation_cost", ref["objective"]))
                        if s.get("final_cost") is not None else None)}
    series = {"gap": [r["gap"] for r in rows],
              "residuals": [max(r["primal_relative"], r["dual_relative"]) for r in rows]}
    for what, values in series.items():
        for thr in THRESHOLDS:
            i = first_stay(values, thr)
            out[f"rounds_{what}_{thr:g}"] = rows[i]["round"] if i is not None else None
            out[f"time_{what}_{thr:g}_s"] = round(rows[i]["elapsed_s"], 2) if i is not None else None
    out["loadavg_1min"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out), flush=True)
    if args.trace:
        args.trace.write_text(json.dumps(rows) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
