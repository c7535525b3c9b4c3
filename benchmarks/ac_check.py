#!/usr/bin/env python3
"""How far is a relaxed solution from an AC operating point? (docs/operating_point.md)

Solves the centralized SOC relaxation (``cost``) of case14, case118 and, when the shared data
is there, PGLib's case118 (which has branch ratings), and runs the AC check at each optimum:
pandapower's Newton-Raphson power flow with the generators' P set-points and voltage
set-points √w. Then does the same for the final point of a private run (objl, ε = 1 per local
step, case118 in its 3 areas, ``--objective``, ``--rounds``).

    python benchmarks/ac_check.py                         # all of the above
    python benchmarks/ac_check.py --rounds 100 --objective shedding --json out.json

Reported per point: convergence, the slack's mismatch against the dispatch (MW), the relaxation's
losses and the AC losses (MW), the worst voltage violation (p.u.) and the worst loading (%).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from powerdp import RunConfig, run_distributed, solve_opf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.shared_data import SHARED_DATA  # noqa: E402  (../shared/data beside the repository root)

PGLIB118 = SHARED_DATA / "pglib" / "pglib_opf_case118_ieee.m"  # used when present


def row(label: str, check, extra: dict) -> dict:
    d = check.to_dict()
    out = {"point": label, **extra}
    for k in ("converged", "slack_mismatch_mw", "dispatch_losses_mw", "losses_mw", "max_voltage_violation_pu",
              "max_loading_percent", "max_vm_deviation_pu"):
        out[k] = d.get(k)
    out["n_voltage_violations"] = len(d["voltage_violations"])
    out["n_overloaded"] = len(d["overloaded"])
    return out


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--objective", default="shedding", help="objective of the private run (default: shedding)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-run", action="store_true", help="only the centralized points")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    logging.getLogger("pandapower").setLevel(logging.ERROR)
    logging.getLogger("pyomo").setLevel(logging.ERROR)

    rows = []
    cases = ["case14", "case118"] + ([str(PGLIB118)] if PGLIB118.is_file() else [])
    for case in cases:
        t0 = time.perf_counter()
        res = solve_opf(case)
        t1 = time.perf_counter()
        check = res.check_ac()
        t2 = time.perf_counter()
        rows.append(row(f"centralized {res.case} (cost)", check, {"objective": res.objective, "solve_s": t1 - t0, "ac_check_s": t2 - t1}))
    if not args.no_run:
        cfg = RunConfig(case="case118", zones=3, algorithm="objl", epsilon=args.epsilon, objective=args.objective,
                        rounds=args.rounds, seed=args.seed)
        t0 = time.perf_counter()
        result = run_distributed(cfg, reference=False)
        t1 = time.perf_counter()
        check = result.check_ac()
        t2 = time.perf_counter()
        shed = result.buses["p_shed_mw"]
        rows.append(row(
            f"objl eps={args.epsilon:g} case118 3 zones ({args.objective}, {args.rounds} rounds)", check,
            {"objective": result.summary["final_objective"], "solve_s": t1 - t0, "ac_check_s": t2 - t1,
             "feasibility": result.summary["final_feasibility"],
             "shed_mw": float(shed.clip(lower=0).sum()), "oversupply_mw": float((-shed).clip(lower=0).sum()),
             "generation_mw": float(result.generators["p_mw"].sum()), "cost_per_h": float(result.generators["cost_per_h"].sum())},
        ))
    cols = ["converged", "slack_mismatch_mw", "dispatch_losses_mw", "losses_mw", "max_voltage_violation_pu",
            "n_voltage_violations", "max_loading_percent", "n_overloaded", "max_vm_deviation_pu", "ac_check_s"]
    for r in rows:
        print(r["point"])
        print("   " + "  ".join(f"{c}={fmt(r.get(c))}" for c in cols))
        extra = {k: v for k, v in r.items() if k in ("objective", "feasibility", "shed_mw", "oversupply_mw", "generation_mw", "cost_per_h")}
        if extra:
            print("   " + "  ".join(f"{k}={fmt(v)}" for k, v in extra.items()))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
