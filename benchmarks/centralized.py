#!/usr/bin/env python3
"""Centralized SOC-OPF timings: where does the time go?

For each case: load, model build (Pyomo), compile (to numpy/scipy) and Ipopt
solve times, Ipopt iterations, the objective, and the share of the solve
spent in powerdp's own callbacks (``SolveResult.callback_s / wall_s``; the
target is under 15 %: the rest is Ipopt itself, mostly the linear solver).

    python benchmarks/centralized.py                       # case118 and PGLib case2000_goc
    python benchmarks/centralized.py --repeat 3 --json out.json
    python benchmarks/centralized.py --case2000 path/to/pglib_opf_case2000_goc.m

Timings are the best of ``--repeat`` runs, per phase.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import platform
import sys
import time
from pathlib import Path

from powerdp.grid.loading import load_case
from powerdp.opf.compiled import compile_model
from powerdp.opf.formulation import FLOW_MODES, build_model
from powerdp.opf.solvers import IpoptSolver

CALLBACK_SHARE_TARGET = 0.15
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.shared_data import SHARED_DATA  # noqa: E402  (../shared/data beside the repository root)

DEFAULT_CASE2000 = SHARED_DATA / "pglib" / "pglib_opf_case2000_goc.m"


def run_once(case, flows: str, profile: str) -> dict:
    t0 = time.perf_counter()
    net = load_case(case)
    t1 = time.perf_counter()
    model = build_model(net, objective="cost", flows=flows)
    t2 = time.perf_counter()
    prob = compile_model(model)
    t3 = time.perf_counter()
    del model
    gc.collect()  # as solve_opf does: free the Pyomo model before Ipopt runs
    solver = IpoptSolver(prob, profile=profile)
    res = solver.solve()
    return {
        "case": net.name,
        "buses": net.n_bus,
        "variables": prob.n,
        "constraints": prob.m,
        "load_s": t1 - t0,
        "build_s": t2 - t1,
        "compile_s": t3 - t2,
        "solve_s": res.wall_s,
        "callback_s": res.callback_s,
        "iterations": res.iterations,
        "objective": res.objective,
        "status": res.status_name,
    }


def best_of(case, flows: str, profile: str, repeat: int) -> dict:
    runs = [run_once(case, flows, profile) for _ in range(repeat)]
    best = dict(runs[0])
    for key in ("load_s", "build_s", "compile_s"):
        best[key] = min(r[key] for r in runs)
    fastest = min(runs, key=lambda r: r["solve_s"])  # callback share of the same solve
    best["solve_s"], best["callback_s"] = fastest["solve_s"], fastest["callback_s"]
    best["callback_share"] = best["callback_s"] / best["solve_s"] if best["solve_s"] > 0 else 0.0
    best["repeat"] = repeat
    best["flows"] = flows
    return best


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'case':<24}{'flows':<12}{'buses':>6}{'vars':>7}{'cons':>7}{'load s':>8}{'build s':>9}{'compile s':>10}"
        f"{'solve s':>9}{'iters':>6}{'callbacks':>10}  {'objective':>14}  status"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        flag = "" if r["callback_share"] < CALLBACK_SHARE_TARGET else " (!)"
        print(
            f"{r['case']:<24}{r['flows']:<12}{r['buses']:>6}{r['variables']:>7}{r['constraints']:>7}"
            f"{r['load_s']:>8.3f}{r['build_s']:>9.3f}{r['compile_s']:>10.3f}{r['solve_s']:>9.3f}"
            f"{r['iterations']:>6}{100 * r['callback_share']:>9.1f}%{flag}  {r['objective']:>14.4f}  {r['status']}"
        )
    print(f"callbacks: share of the solve spent in powerdp's callbacks (target < {100 * CALLBACK_SHARE_TARGET:.0f}%)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case2000", type=Path, default=DEFAULT_CASE2000, help=f"PGLib case2000_goc file (default: {DEFAULT_CASE2000})")
    p.add_argument("--cases", nargs="+", metavar="CASE", help="run these cases instead (bundled names or .m files)")
    p.add_argument("--flows", choices=FLOW_MODES, default="variables", help="flow mode (default: variables, as solve_opf)")
    p.add_argument("--profile", default="default", help="Ipopt profile (default: default)")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="best of N runs (default: 1)")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as JSON")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    logging.getLogger("pyomo").setLevel(logging.ERROR)

    cases = args.cases or ["case118", args.case2000]
    rows = []
    for case in cases:
        if isinstance(case, Path) and not case.exists():
            print(f"skipping {case}: file not found (pass --case2000 PATH)", file=sys.stderr)
            continue
        rows.append(best_of(case, args.flows, args.profile, args.repeat))
        print(f"done: {rows[-1]['case']} ({rows[-1]['solve_s']:.2f} s solve)", file=sys.stderr, flush=True)
    print_table(rows)
    if args.json:
        meta = {"python": platform.python_version(), "machine": platform.machine(), "profile": args.profile}
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
