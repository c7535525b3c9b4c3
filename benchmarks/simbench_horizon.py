#!/usr/bin/env python3
"""A SimBench grid's day in physical terms (docs/profiles.md): load/convert time and memory, then a
centralized SOC OPF of single periods with the public costs — its cost, import, curtailment and shedding.

    python benchmarks/simbench_horizon.py                                   # 1-HV-mixed--0-sw, periods 0,24,48,72,95
    python benchmarks/simbench_horizon.py --code 1-EHV-mixed--0-sw --periods 0,24,48,72
    python benchmarks/simbench_horizon.py --objectives cost+shedding --solver ipopt --json out.json

``cost`` is the generation cost in the network's terms (renewables at −curtailment price); ``cost+offset``
adds ``Horizon.curtailment_offset``: the cost of import (negative: export revenue) plus the price of the
curtailed energy. Needs the profiles extra (``pip install -e ".[profiles]"``).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np

import powerdp


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", default="1-HV-mixed--0-sw")
    ap.add_argument("--periods", default="0,24,48,72,95", help="comma-separated periods of the first day")
    ap.add_argument("--objectives", default="cost,cost+shedding")
    ap.add_argument("--solver", default="clarabel", choices=("clarabel", "ipopt"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    periods = [int(x) for x in args.periods.split(",")]
    w, c = time.perf_counter(), time.process_time()
    h = powerdp.load_horizon(f"simbench:{args.code}", periods=max(periods) + 1)
    load = {"wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - c,
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    print(f"{args.code}: load + convert {load['wall_s']:.1f} s wall, {load['cpu_s']:.1f} s CPU, max RSS {load['max_rss_mb']:.0f} MB")
    print(h.summary())
    S = h.network.base_mva
    imp, ren = h.gen_kind == "import", h.gen_kind == "renewable"
    rows = []
    for obj in args.objectives.split(","):
        for t in periods:
            w, c = time.perf_counter(), time.process_time()
            r = powerdp.solve_opf(h.network_at(t), objective=obj, solver=args.solver)
            pg = r.dispatch.pg
            row = {
                "objective": obj, "period": t, "label": h.labels[t], "status": r.status_name,
                "objective_value": r.objective, "cost": r.generation_cost,
                "cost_plus_offset": r.generation_cost + h.curtailment_offset[t],
                "load_mw": float(h.pd[t].sum() * S), "import_mw": float(pg[imp].sum() * S),
                "curtailed_mw": float((h.gen_pmax[t, ren] - pg[ren]).sum() * S),
                "available_mw": float(h.gen_pmax[t, ren].sum() * S), "shedding_mw": r.total_shedding_mw,
                "max_violation": r.max_violation,
                "solve_wall_s": time.perf_counter() - w, "solve_cpu_s": time.process_time() - c,
            }
            rows.append(row)
            print(f"{obj:14s} {t:3d} {row['label']}  {row['status']:<20s} cost {row['cost']:12.1f}  "
                  f"+offset {row['cost_plus_offset']:12.1f} $/h  load {row['load_mw']:8.1f}  import {row['import_mw']:8.1f}  "
                  f"curtailed {row['curtailed_mw']:7.2f} of {row['available_mw']:7.1f}  shed {row['shedding_mw']:8.3g} MW  "
                  f"viol {row['max_violation']:.1e}  {row['solve_wall_s']:.1f} s ({row['solve_cpu_s']:.1f} s CPU)", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"code": args.code, "solver": args.solver, "load": load, "summary": h.summary(), "rows": rows},
                      fh, indent=1, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
