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

Wall times on a shared machine are inflated by the other processes; the CPU times beside them are not
(Linux: read from /proc). ``setup_cpu_s`` is the CPU of this process and of the hosts up to the initial
projection (load, partition, hosts started, every zone built); ``round_cpu_s`` is a round on the critical
path: the coordinator's CPU in the round plus the largest host's (the hosts run side by side, one a core);
``host_round_cpu_s`` each host's CPU a round, ``coordinator_round_cpu_s`` the coordinator's (under MPI
rank 0 waits for the ranks: a busy-polling wait would show here). Hosts are this process's children
(process backend) or its sibling ranks under ``mpiexec`` (mpi backend).
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


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process (Linux /proc; None elsewhere or when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


def _hosts(backend: str) -> list[int]:
    """The pids of the agent hosts: this process's children, or under MPI the ranks beside it (same parent)."""
    me, parent = os.getpid(), os.getppid()
    pids = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == (parent if backend == "mpi" else me) and int(entry) != me:
                pids.append(int(entry))
    return sorted(pids)


class HostClock:
    """CPU seconds of the coordinator and of each host: at the end of set-up and after every round."""

    def __init__(self, backend: str):
        self.backend = backend
        self.setup_wall: float | None = None
        self.marks: list[tuple[float, dict[int, float]]] = []  # (coordinator CPU, host pid → CPU)
        self.start_cpu = time.process_time()
        self.hosts: list[int] = []

    def _mark(self) -> None:
        cpu = {p: _cpu_s(p) for p in self.hosts}
        self.marks.append((time.process_time(), {p: c for p, c in cpu.items() if c is not None}))

    def status(self, msg: str) -> None:
        if msg.startswith("initial projection"):  # the hosts are up and every zone is built
            self.setup_wall = time.perf_counter()
            self.hosts = _hosts(self.backend) if self.backend != "serial" else []
            self._mark()

    def round(self, row: dict) -> None:
        self._mark()

    def figures(self) -> dict:
        if not self.marks or (self.backend != "serial" and not self.hosts):
            return {}
        coord0, hosts0 = self.marks[0]
        out = {"setup_cpu_s": round(coord0 - self.start_cpu + sum(hosts0.values()), 2),
               "setup_cpu_coordinator_s": round(coord0 - self.start_cpu, 2)}
        rounds = [(b[0] - a[0], [b[1][p] - a[1][p] for p in b[1] if p in a[1]]) for a, b in zip(self.marks[1:-1], self.marks[2:])]
        if rounds:  # the first interval holds the projection: rounds 2.. only
            coord = [c for c, _ in rounds]
            out["round_cpu_s"] = round(float(np.mean([c + (max(h) if h else 0.0) for c, h in rounds])), 3)
            out["coordinator_round_cpu_s"] = round(float(np.mean(coord)), 4)
            if self.hosts:
                out["host_round_cpu_s"] = [round(float(np.mean([h[k] for _, h in rounds])), 3) for k in range(len(rounds[0][1]))]
        return out


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
            clock = HostClock(backend)
            res = run_distributed(cfg, reference=False, status=clock.status, progress=clock.round)
            if res is None:  # an mpi agent rank: it served this run; serve the next
                continue
            s = res.summary
            build = sum(v["build_s"] for v in s["setup_times"].values())
            comp = sum(v["compile_s"] for v in s["setup_times"].values())
            peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
            row = {
                "case": Path(args.case).stem, "zones": s["n_zones"], "backend": backend, "local_solver": solver, "hosts": s["hosts"],
                "setup_s": round(clock.setup_wall - t0, 2), "projection_s": round(s["init_s"], 2), "build_s_sum": round(build, 2), "compile_s_sum": round(comp, 2),
                "round_s_mean": round(s["wall_s"] / max(s["rounds"], 1), 3), "total_s": round(time.perf_counter() - t0, 1),
                **clock.figures(),
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
