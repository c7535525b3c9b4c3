"""How long a command takes to start, and the README main job's second run, as whole processes (wall and CPU).

    python benchmarks/startup.py                       # this checkout, 5 interleaved repetitions
    python benchmarks/startup.py --against ../old      # and another checkout of powerdp, interleaved with this one
    python benchmarks/startup.py --only import,cases   # some of the commands
    python benchmarks/startup.py --only main --no-stats --against ../old   # the README main job, two checkouts

Commands: ``import`` (``import powerdp``), ``cli`` (``import powerdp.cli``), ``cases`` (``powerdp cases``), ``main``
(``powerdp run case118 --zones 3 --algorithm objl --epsilon 0.1``, the README main job; the numba cache is warmed by a
first run that is not counted). Each is also run as it was before Pyomo's scipy hook was dropped (``+stats``: scipy.stats,
.integrate and .spatial imported first, as Pyomo's hook did; powerdp/__init__.py). Every repetition runs each
variant once, in turn (machines drift: compare within a repetition). One JSON line per command and variant: the
median and the range of wall and CPU seconds (the process's own and its children's).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "import": ["-c", "import powerdp"],
    "cli": ["-c", "import powerdp.cli"],
    "cases": ["-m", "powerdp", "cases"],
    "main": ["-m", "powerdp", "run", "case118", "--zones", "3", "--algorithm", "objl", "--epsilon", "0.1"],
}
EAGER = "import scipy.stats, scipy.integrate, scipy.spatial; "


def _argv(command: str, eager: bool) -> list[str]:
    args = COMMANDS[command]
    if not eager:
        return [sys.executable, *args]
    if args[0] == "-c":
        return [sys.executable, "-c", EAGER + args[1]]
    # python -m powerdp ... with the eager imports first
    return [sys.executable, "-c", EAGER + "import sys, runpy; sys.argv = ['powerdp', *sys.argv[1:]]; "
            "runpy.run_module('powerdp', run_name='__main__')", *args[2:]]


def _time(argv: list[str], path: Path, cwd: Path) -> tuple[float, float]:
    # bytecode written and read, as an installed package's (pip compiles it at install): PYTHONDONTWRITEBYTECODE
    # would compile every powerdp module at every start
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": str(path)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} (PYTHONPATH={path}) exited {proc.returncode}: {proc.stderr[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--against", type=Path, default=None, help="another checkout of powerdp (its repository root)")
    p.add_argument("--only", default=",".join(COMMANDS), help="commands, comma-separated: " + ", ".join(COMMANDS))
    p.add_argument("--no-stats", action="store_true", help="leave out the +stats variant (Pyomo's old scipy imports)")
    args = p.parse_args()
    commands = [c for c in args.only.split(",") if c]
    variants = [("this", ROOT, False)] + ([] if args.no_stats else [("this+stats", ROOT, True)])
    if args.against is not None:
        variants.append(("against", args.against.resolve(), False))
    cwd = Path(os.environ.get("TMPDIR", "/tmp"))
    for command in commands:  # a first, uncounted run of each (numba's cache, the file system's)
        for _, path, eager in variants:
            _time(_argv(command, eager), path, cwd)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.repeat):
        for command in commands:
            for name, path, eager in variants:
                times.setdefault((command, name), []).append(_time(_argv(command, eager), path, cwd))
    for (command, name), runs in times.items():
        wall, cpu = [r[0] for r in runs], [r[1] for r in runs]
        print(json.dumps({"command": command, "variant": name, "runs": len(runs),
                          "wall_s": round(statistics.median(wall), 3), "wall_range": [round(min(wall), 3), round(max(wall), 3)],
                          "cpu_s": round(statistics.median(cpu), 3), "cpu_range": [round(min(cpu), 3), round(max(cpu), 3)]}))


if __name__ == "__main__":
    main()
