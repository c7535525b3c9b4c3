#!/usr/bin/env python3
"""Centralized parity of the local solvers: Ipopt vs Clarabel on the same compiled model.

For every MATPOWER case in the shared data folders (``../shared/data/powermodels`` and
``../shared/data/pglib``), build and compile the SOC relaxation once (cost objective,
PowerModels convention, flows as variables) and solve it with each solver; prints the two
objectives, their relative difference, both solve times (best of ``--repeat``) and
iterations, and both solutions' largest constraint violation.

    python benchmarks/solvers.py                     # every case except case2000_goc
    python benchmarks/solvers.py --with-case2000     # ... and case2000_goc (Ipopt ~30 s)
    python benchmarks/solvers.py --cases case14,case118 --json out.json
    python benchmarks/solvers.py --clarabel-option equilibrate_enable=false
    python benchmarks/solvers.py --ipopt-option bound_relax_factor=0   # Ipopt on the exact bounds
    python benchmarks/solvers.py --data /path/to/shared/data   # from a worktree elsewhere

Cases with HVDC lines (``mpc.dcline``) are included: their lines are variables and linear rows of
the same compiled problem.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import sys
import time
from pathlib import Path

from powerdp.grid.loading import load_case
from powerdp.opf.compiled import compile_model
from powerdp.opf.conic import ClarabelSolver
from powerdp.opf.formulation import build_model
from powerdp.opf.solvers import IpoptSolver, option_value

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.shared_data import SHARED_DATA  # noqa: E402  (../shared/data beside the repository root)

DATA = SHARED_DATA
BIG = ("pglib_opf_case2000_goc",)


def case_files(data: Path, names: list[str] | None, with_big: bool) -> list[Path]:
    files = sorted((data / "powermodels").glob("*.m")) + sorted((data / "pglib").glob("*.m"))
    if names:
        files = [f for f in files if f.stem in names or f.stem.replace("pglib_opf_", "") in names]
    elif not with_big:
        files = [f for f in files if f.stem not in BIG]
    return files


def solve_both(path: Path, repeat: int, clarabel_options: dict, ipopt_options: dict) -> dict:
    net = load_case(str(path))
    prob = compile_model(build_model(net, objective="cost"))
    gc.collect()
    row = {"case": path.stem, "buses": net.n_bus, "variables": prob.n, "constraints": prob.m}
    for name, make in (("ipopt", lambda: IpoptSolver(prob, options=ipopt_options)), ("clarabel", lambda: ClarabelSolver(prob, options=clarabel_options))):
        best = None
        for _ in range(repeat):
            t = time.perf_counter()
            res = make().solve()  # a fresh solver each time: construction counts
            elapsed = time.perf_counter() - t
            if best is None or elapsed < best[0]:
                best = (elapsed, res)
        elapsed, res = best
        row[f"{name}_objective"] = res.objective
        row[f"{name}_s"] = elapsed
        row[f"{name}_iterations"] = res.iterations
        row[f"{name}_status"] = res.status_name
        row[f"{name}_violation"] = prob.max_violation(res.x)
    a, b = row["ipopt_objective"], row["clarabel_objective"]
    row["relative_difference"] = abs(a - b) / max(abs(a), 1e-12)
    row["speedup"] = row["ipopt_s"] / row["clarabel_s"] if row["clarabel_s"] > 0 else float("nan")
    return row


def print_row(r: dict) -> None:
    print(
        f"{r['case']:<26}{r['buses']:>6}{r['ipopt_objective']:>16.6f}{r['clarabel_objective']:>16.6f}"
        f"{r['relative_difference']:>10.1e}{r['ipopt_s']:>9.3f}{r['clarabel_s']:>9.3f}{r['speedup']:>7.1f}x"
        f"{r['ipopt_iterations']:>5}/{r['clarabel_iterations']:<4}{r['ipopt_violation']:>9.1e}{r['clarabel_violation']:>9.1e}"
        f"  {r['ipopt_status']} / {r['clarabel_status']}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", help="comma-separated case names (file stems, with or without pglib_opf_)")
    ap.add_argument("--with-case2000", action="store_true", help="include pglib_opf_case2000_goc")
    ap.add_argument("--repeat", type=int, default=1, help="best of N solves per solver (default: 1)")
    ap.add_argument("--clarabel-option", action="append", default=[], metavar="NAME=VALUE", help="a Clarabel setting")
    ap.add_argument(
        "--ipopt-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an Ipopt option, e.g. bound_relax_factor=0 (Ipopt relaxes every bound by 1e-8 by default)",
    )
    ap.add_argument("--data", type=Path, default=DATA, help=f"the shared data folder (default: {DATA})")
    ap.add_argument("--json", help="write the rows as JSON")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    options, ipopt_options = {}, {}
    for item in args.clarabel_option:
        k, v = item.split("=", 1)
        options[k] = {"true": True, "false": False}.get(v.lower(), option_value(v))
    for item in args.ipopt_option:
        k, v = item.split("=", 1)
        ipopt_options[k] = option_value(v)
    rows = []
    print(
        f"{'case':<26}{'buses':>6}{'Ipopt obj':>16}{'Clarabel obj':>16}{'rel diff':>10}{'Ipopt s':>9}{'Clar. s':>9}"
        f"{'speed':>8}{'iters':>10}{'viol I':>9}{'viol C':>9}  status"
    )
    for path in case_files(args.data, args.cases.split(",") if args.cases else None, args.with_case2000):
        row = solve_both(path, args.repeat, options, ipopt_options)
        rows.append(row)
        print_row(row)
    if rows:
        worst = max(rows, key=lambda r: r["relative_difference"])
        print(f"largest relative difference {worst['relative_difference']:.1e} ({worst['case']})")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": {**vars(args), "data": str(args.data)}, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
