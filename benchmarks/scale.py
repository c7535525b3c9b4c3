"""Large networks with many zones (issue: beyond one machine).

For each case and zone count: setup (load + partition + model build + compile of
every zone, with the hosts started), the initial projection onto each zone's
feasible set (one cold solve per zone), mean time per round of T rounds of objl (E = 1),
and peak memory, on the serial, process (2 workers) and mpi (2 agent ranks)
backends.

    python benchmarks/scale.py                                  # case2000_goc, 3 areas and 16 zones
    python benchmarks/scale.py --case ../shared/data/pglib/pglib_opf_case1354_pegase.m --zones 16
    mpiexec -n 3 python benchmarks/scale.py --backends mpi      # the mpi backend
    python benchmarks/scale.py --local-solvers ipopt,clarabel   # both local solvers, side by side

Every figure is printed as one JSON line per run (``--json`` also writes them to a file), with the
machine's load average and, from the simulation's evaluation, each zone's time inside its solver per
round and the straggler zone.

Peak memory is the resident set size high-water mark (ru_maxrss) of this process
and of its finished children (``peak_rss_mb``; under MPI rank 0 only), and of each
agent host as it reports itself (``host_peak_rss_mb``: serial, the one process;
process and mpi, each worker or rank).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.shared_data import SHARED_DATA  # noqa: E402  (../shared/data beside the repository root)

DEFAULT_CASE = str(SHARED_DATA / "pglib" / "pglib_opf_case2000_goc.m")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default=DEFAULT_CASE)
    ap.add_argument("--zones", default="area,16", help="comma list of zone counts or 'area' (native areas)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--backends", default="serial,process")
    ap.add_argument("--method", default="spectral")
    ap.add_argument("--local-solvers", default="ipopt", help="comma list of local solvers (ipopt, clarabel)")
    ap.add_argument("--json")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    rows = []
    for z in args.zones.split(","):
        for backend, solver in ((b, s) for b in args.backends.split(",") for s in args.local_solvers.split(",")):
            kw = dict(partition="area", zones=None, allow_disconnected=True) if z == "area" else dict(zones=int(z), partition_method=args.method)
            cfg = RunConfig(case=args.case, algorithm="objl", epsilon=0.1, sensitivity="paper", rounds=args.rounds, backend=backend, workers=2,
                            checkpoint_every=0, local_solver=solver, seed=0, **kw)
            t0 = time.perf_counter()
            res = run_distributed(cfg, reference=False)
            if res is None:  # an mpi agent rank: it served this run; serve the next
                continue
            s = res.summary
            build = sum(v["build_s"] for v in s["setup_times"].values())
            comp = sum(v["compile_s"] for v in s["setup_times"].values())
            peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
            row = {
                "case": Path(args.case).stem, "zones": s["n_zones"], "backend": backend, "local_solver": solver, "hosts": s["hosts"],
                "setup_s": round(s["setup_s"] - s["init_s"], 2), "projection_s": round(s["init_s"], 2), "build_s_sum": round(build, 2), "compile_s_sum": round(comp, 2),
                "round_s_mean": round(s["wall_s"] / max(s["rounds"], 1), 3), "total_s": round(time.perf_counter() - t0, 1),
                "peak_rss_mb": round(peak), "host_peak_rss_mb": [round(m) for m in s["host_peak_rss_mb"]], "final_objective": round(s["final_objective"], 4),
                "loadavg_1min": round(os.getloadavg()[0], 2),  # a shared machine's load while it ran
            }
            zt = s["zone_solver_s"]  # the simulation's evaluation: each zone's time inside its solver
            if zt:
                rounds = max(s["rounds"], 1)
                row["straggler_zone"] = s["straggler_zone"]
                row["straggler_solver_s_per_round"] = round(zt[s["straggler_zone"]] / rounds, 3)
                row["median_zone_solver_s_per_round"] = round(float(np.median(list(zt.values()))) / rounds, 3)
                row["zone_solver_s_per_round"] = {int(z): round(t / rounds, 3) for z, t in zt.items()}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
