#!/usr/bin/env python3
"""This tree against another version of powerdp, interleaved in one run (a shared machine's load hits both alike).

    git archive c7046ae | tar -x -C /tmp/old
    python benchmarks/versions.py /tmp/old learning --rounds 15 --repeats 3                   # objg outg objt nonprivate
    python benchmarks/versions.py /tmp/old admm --repeats 3 --admm-flags "--rounds 10 --solvers clarabel"

Each repeat runs every version once, alternating, each in a fresh process with PYTHONPATH set to its tree.

* ``learning``: the version's own ``benchmarks/learning.py`` is loaded and its ``time_rounds`` run per algorithm,
  with both clocks read around every round: wall (perf_counter) and CPU (process_time). Medians per round.
* ``admm``: the version's own ``benchmarks/admm.py`` with ``--admm-flags``; its JSON line per run gives the
  loop's wall time (``--cpu-clock``: its CPU time, perf_counter replaced by process_time in the child), and the
  process's CPU time (user + system, setup included) is read from the child's usage.

Prints one JSON object: per version, per algorithm (or solver), the median over repeats of each repeat's median.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

_LEARNING_CHILD = r"""
import importlib.util, json, statistics, sys, time, types, warnings
warnings.filterwarnings("ignore")
spec = importlib.util.spec_from_file_location("bench_learning", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
walls = []
def both_clocks():  # time_rounds reads perf_counter() twice a round: give it CPU seconds, keep the wall ones aside
    walls.append(time.perf_counter())
    return time.process_time()
mod.time = types.SimpleNamespace(perf_counter=both_clocks)
from threadpoolctl import threadpool_limits
prepared = mod.prepare_data(mod.LearnConfig(dataset="mnist", box=0.1, clip=10.0))
out = {}
with threadpool_limits(limits=1):
    for alg in sys.argv[3:]:
        walls.clear()
        cpu = mod.time_rounds(alg, int(sys.argv[2]), prepared)
        wall = [1e3 * (b - a) for a, b in zip(walls[0::2], walls[1::2])]
        out[alg] = {"wall_ms": statistics.median(wall), "cpu_ms": statistics.median(cpu)}
print(json.dumps(out))
"""


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _learning(tree: Path, rounds: int, algorithms: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _LEARNING_CHILD, str(tree / "benchmarks" / "learning.py"), str(rounds), *algorithms],
                         env=_env(tree), cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


_ADMM_CPU_CHILD = r"""
import runpy, sys, time
time.perf_counter = time.process_time  # every interval admm.py (and the run it times) reports is CPU seconds
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _admm(tree: Path, flags: list[str], cpu_clock: bool) -> dict:
    script = [str(tree / "benchmarks" / "admm.py")]
    if cpu_clock:
        script = ["-c", _ADMM_CPU_CHILD, *script]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "admm.json"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, *script, *flags, "--json", str(path)],
                       env=_env(tree), cwd=tree, capture_output=True, text=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        rows = json.loads(path.read_text())["results"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    loop = "loop_cpu_s" if cpu_clock else "loop_wall_s"
    return {f"{r['backend']}/{r['solver']}": {loop: r["loop_s"], "process_cpu_s": round(cpu, 2)} for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("other", type=Path, help="the other version's source tree (e.g. from git archive)")
    ap.add_argument("benchmark", choices=["learning", "admm"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=15, help="learning: rounds per algorithm (default 15)")
    ap.add_argument("--algorithms", nargs="+", default=["nonprivate", "objg", "outg", "objt"])
    ap.add_argument("--admm-flags", default="", help="admm: benchmarks/admm.py's flags, one string")
    ap.add_argument("--cpu-clock", action="store_true", help="admm: run admm.py with time.perf_counter replaced by "
                    "time.process_time, so its loop time is the loop's CPU seconds")
    args = ap.parse_args()
    trees = {"this": HERE, "other": args.other.resolve()}
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    for i in range(args.repeats):
        for name, tree in (trees.items() if i % 2 == 0 else reversed(trees.items())):
            res = _learning(tree, args.rounds, args.algorithms) if args.benchmark == "learning" else _admm(tree, shlex.split(args.admm_flags), args.cpu_clock)
            runs[name].append(res)
            print(json.dumps({"repeat": i, "version": name, **res}), file=sys.stderr, flush=True)
    summary = {}
    for name, reps in runs.items():
        summary[name] = {key: {m: round(statistics.median(r[key][m] for r in reps), 3) for m in reps[0][key]} for key in reps[0]}
    summary["ratio_this_over_other"] = {key: {m: round(summary["this"][key][m] / summary["other"][key][m], 3) for m in summary["this"][key]}
                                        for key in summary["this"] if key in summary["other"]}  # runs both versions have
    summary["loadavg"] = os.getloadavg()
    print(json.dumps({"benchmark": args.benchmark, "other": str(trees["other"]), "repeats": args.repeats, **summary}, indent=1))


if __name__ == "__main__":
    main()
