#!/usr/bin/env python3
"""The MATPOWER parser on a large one-line case: its peak memory and time (issue 38, bug 12).

    python benchmarks/case_parser.py                      # a 68 MB case, this tree
    python benchmarks/case_parser.py --mb 20 --vs /tmp/old --repeats 3   # against another tree, interleaved

A case of ``--mb`` megabytes whose bus matrix is one line (rows separated by ';') is written once to a temporary
folder; every repeat parses it in a fresh process per tree (PYTHONPATH set to the tree), alternating the trees, and
reads the process's peak RSS after the parse minus its peak after the import. Prints one JSON object: per tree, the
median parse seconds and the median peak above the import (MB), and the file's size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ROW = "{i} 1 97.6 44.2 0 0 1 1.0536 -13.1 230 1 1.1 0.9"

_CHILD = r"""
import json, resource, sys, time
from powerdp.grid.matpower import read_matpower
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
data = read_matpower(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t0, "buses": int(data.bus.shape[0]),
                  "peak_above_import_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}))
"""


def write_case(path: Path, megabytes: float) -> int:
    """A case whose bus matrix holds about ``megabytes`` MB on one line; returns its number of buses."""
    n = int(megabytes * 1e6 / (len(ROW) + 4))
    with open(path, "w") as fh:
        fh.write("function mpc = one_line\nmpc.version = '2';\nmpc.baseMVA = 100;\nmpc.bus = [")
        fh.write(";".join(ROW.format(i=i) for i in range(1, n + 1)))
        fh.write("];\nmpc.gen = [1 100 0 100 -100 1 100 1 200 0];\nmpc.branch = [1 2 0.01 0.1 0 0 0 0 0 0 1 -360 360];\n")
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=68.0, help="the case's size in MB (default 68, the issue's)")
    ap.add_argument("--vs", type=Path, action="append", default=[], help="another powerdp tree to compare (repeatable)")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    trees = [HERE, *args.vs]
    with tempfile.TemporaryDirectory() as tmp:
        case = Path(tmp) / "one_line.m"
        buses = write_case(case, args.mb)
        runs: dict[str, list[dict]] = {str(t): [] for t in trees}
        for _ in range(args.repeats):
            for tree in trees:
                env = {**os.environ, "PYTHONPATH": str(tree)}
                out = subprocess.run([sys.executable, "-c", _CHILD, str(case)], env=env, capture_output=True, text=True,
                                     check=True, cwd=tmp).stdout  # not the current directory: it would come first on the path
                runs[str(tree)].append(json.loads(out))
        result = {"file_mb": case.stat().st_size / 1e6, "buses": buses, "load": os.getloadavg()[0]}
        for tree, rows in runs.items():
            result[tree] = {"seconds": statistics.median(r["seconds"] for r in rows),
                            "peak_above_import_mb": statistics.median(r["peak_above_import_mb"] for r in rows)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
