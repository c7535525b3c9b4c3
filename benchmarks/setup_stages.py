"""Where a large case's set-up goes: CPU and wall seconds of each stage, one zone after another.

    python benchmarks/setup_stages.py --case ../shared/data/matpower/case13659pegase.m --zones 16
    python benchmarks/setup_stages.py --profile prof.out      # also a cProfile of the whole set-up

Stages: ``parse`` (the MATPOWER file into tables), ``checks`` (the data checks and corrections into a
Network), ``partition`` (the automatic zones, their elements and shared keys), and per zone ``build``
(the Pyomo model) and ``compile`` (its matrices) with ``--pyomo``, else ``model`` (the compiled problem as a zone
agent makes it: :mod:`powerdp.opf.direct` where it knows the model), ``reduction`` (eliminating flows/balance variables,
the fill decision) and ``solver`` (the local solver's set-up), summed over the zones and the largest
zone's. CPU time (``time.process_time``) is the figure to compare on a shared machine; wall time
stands beside it. One JSON line.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import logging
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.shared_data import SHARED_DATA  # noqa: E402  (../shared/data beside the repository root)

#: a private run for the objectives DP allows, else a non-private one
PRIVATE_OR_NOT = {"shedding": dict(algorithm="objl", epsilon=0.1, sensitivity="paper"),
                  "cost+shedding": dict(algorithm="objl", epsilon=0.1, sensitivity="paper"),
                  "cost": dict(algorithm="nonprivate")}
DEFAULT_CASE = str(SHARED_DATA / "matpower" / "case13659pegase.m")


class Clock:
    """CPU and wall seconds of named stages."""

    def __init__(self):
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}

    def stage(self, name: str):
        clock = self

        class _Stage:
            def __enter__(self):
                self.c, self.w = time.process_time(), time.perf_counter()

            def __exit__(self, *exc):
                clock.cpu[name] = clock.cpu.get(name, 0.0) + time.process_time() - self.c
                clock.wall[name] = clock.wall.get(name, 0.0) + time.perf_counter() - self.w

        return _Stage()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default=DEFAULT_CASE)
    ap.add_argument("--zones", type=int, default=16)
    ap.add_argument("--method", default="spectral")
    ap.add_argument("--local-solver", default="clarabel")
    ap.add_argument("--objective", default="shedding", help="the zones' objective (shedding: every private run's zone problem)")
    ap.add_argument("--profile", help="write a cProfile of the whole set-up here")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--pyomo", action="store_true", help="build every zone's Pyomo model and compile it (the path before opf.direct)")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)

    from threadpoolctl import threadpool_limits

    from powerdp.apps.power_flow.config import RunConfig
    from powerdp.apps.power_flow.plan import resolve_config
    from powerdp.grid.loading import bundled_path, network_from_matpower
    from powerdp.grid.matpower import read_matpower
    from powerdp.grid.partition import partition
    from powerdp.opf.compiled import compile_model
    from powerdp.opf.direct import compile_zone
    from powerdp.opf.formulation import build_model
    from powerdp.opf.local_solver import solver_class
    from powerdp.opf.reduction import sparse_elimination

    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    clock = Clock()
    limits = threadpool_limits(limits=1)  # as a host runs (engine.backends.base.single_threaded_pools)
    path = Path(args.case) if Path(args.case).exists() else bundled_path(args.case)  # a file, or a bundled case's name
    if path is None:
        sys.exit(f"no case {args.case!r}: not a file, and not a bundled case")
    with clock.stage("parse"):
        data = read_matpower(path)
    with clock.stage("checks"):
        net = network_from_matpower(data)
    cfg = resolve_config(RunConfig(case=args.case, objective=args.objective, **PRIVATE_OR_NOT[args.objective], zones=args.zones,
                                   partition_method=args.method, local_solver=args.local_solver, seed=0), net)
    with clock.stage("partition"):
        part = partition(net, zones=args.zones, method=args.method, seed=0)
        part.shared_by_zone(cfg.flows)
        part.shared_keys(cfg.flows)
    zones = {}
    solver_cls = solver_class(cfg.local_solver, "local_solver")
    for z in range(part.n_zones):
        before = dict(clock.cpu)
        gc.freeze()
        if args.pyomo:  # the zone's Pyomo model, then compiled (as every zone was built before opf.direct)
            with clock.stage("build"):
                model = build_model(net, part.own_buses(z), objective=cfg.objective, flows=cfg.flows, name=f"zone{z}",
                                    shedding_weight=cfg.shedding_weight)
            with clock.stage("compile"):
                prob = compile_model(model)
                del model
                gc.collect()
        else:  # as a zone agent builds it (opf.direct where it knows the model)
            with clock.stage("model"):
                prob = compile_zone(net, part.own_buses(z), objective=cfg.objective, flows=cfg.flows, name=f"zone{z}",
                                    shedding_weight=cfg.shedding_weight)
                gc.collect()
        gc.unfreeze()
        with clock.stage("reduction"):
            red = sparse_elimination(prob)
        with clock.stage("solver"):
            solver_cls.from_config(red.reduced, red.reduced.objective, cfg)
        zones[z] = {"buses": int(len(part.own_buses(z))), "n": int(prob.n), "m": int(prob.m),
                    **{k: round(clock.cpu[k] - before.get(k, 0.0), 3) for k in ("build", "compile", "model", "reduction", "solver") if k in clock.cpu}}
    limits.restore_original_limits()
    if prof:
        prof.disable()
        prof.dump_stats(args.profile)
    largest = max(zones, key=lambda z: zones[z]["buses"])
    row = {
        "case": Path(args.case).stem, "path": "pyomo" if args.pyomo else "direct", "buses": int(net.n_bus), "zones": part.n_zones, "method": args.method,
        "cpu_s": {k: round(v, 2) for k, v in clock.cpu.items()},
        "wall_s": {k: round(v, 2) for k, v in clock.wall.items()},
        "cpu_total_s": round(sum(clock.cpu.values()), 2), "wall_total_s": round(sum(clock.wall.values()), 2),
        "zone_sizes": sorted(int(v["buses"]) for v in zones.values()),
        "largest_zone": {"zone": largest, **zones[largest]},
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(row, indent=2) + "\n")


if __name__ == "__main__":
    main()
