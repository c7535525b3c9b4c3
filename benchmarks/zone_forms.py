"""How a large zone's problem is written for Clarabel, measured zone by zone (issue #29: the ≤ 1 s round).

For each zone of a case (default case13659pegase in 16 spectral zones, as ``benchmarks/scale.py`` runs it) three
forms of the same local problem, solved with a run's Clarabel (``ClarabelSolver.from_config``: LOCAL_SETTINGS and
the column scaling) on ``--rounds`` round-like objectives (a round's proximal and ADMM weights on the diagonal,
1.73 or 101.7, and a random linear term; the same draws for every form):

* ``before``: the reduction before this change (flows and balance variables eliminated unless the KKT factor fills
  in more than ``FILL_RATIO``), every finite bound a row;
* ``flows``: only the flows eliminated, every finite bound a row;
* ``now``: what a run does now (:func:`~powerdp.opf.reduction.sparse_elimination`, and no rows for the bounds the
  cones and angle rows imply, :mod:`powerdp.opf.implied_bounds`).

The forms alternate inside each repeat (a loaded machine slows them alike). Prints one JSON line per zone (each
form's median seconds over the repeats for all its rounds, interior-point iterations, ms an iteration, the form's
rows) and a last line with the totals, the largest difference of a form's solutions from ``before``'s (lifted to
the zone's full variables) and the largest constraint violation of any solution in the full problem.

    python benchmarks/zone_forms.py                                  # case13659pegase, 16 zones, 3 rounds, 3 repeats
    python benchmarks/zone_forms.py --zones-only 0,5 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from powerdp.grid.loading import load_case  # noqa: E402
from powerdp.grid.partition import partition  # noqa: E402
from powerdp.opf.conic import LOCAL_SETTINGS, ClarabelSolver, column_scaling  # noqa: E402
from powerdp.opf.direct import compile_zone  # noqa: E402
from powerdp.opf.reduction import eliminate, sparse_elimination  # noqa: E402
from tests.shared_data import SHARED_DATA  # noqa: E402  (../shared/data beside the repository root)

DEFAULT_CASE = str(SHARED_DATA / "matpower" / "case13659pegase.m")
FORMS = ("before", "flows", "now")


def _solver(red, drop_implied: bool) -> ClarabelSolver:
    """A run's zone solver (ClarabelSolver.from_config's arguments; these zones are too large for the polish)."""
    n = red.full.n
    pattern = red.pull(np.zeros(n), np.ones(n))
    return ClarabelSolver(red.reduced, pattern, options=LOCAL_SETTINGS, column_scale=column_scaling(red.reduced, pattern),
                          drop_implied=drop_implied)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default=DEFAULT_CASE)
    ap.add_argument("--zones", type=int, default=16)
    ap.add_argument("--zones-only", help="comma list of the zones to measure (default all)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="write every line to this file as well")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    net = load_case(args.case)
    part = partition(net, zones=args.zones, method="spectral", seed=0)
    zones = [int(z) for z in args.zones_only.split(",")] if args.zones_only else list(range(args.zones))
    lines, totals = [], {f: [0.0, 0, 0] for f in FORMS}
    worst_dx, worst_violation = {f: 0.0 for f in FORMS}, 0.0
    for z in zones:
        prob = compile_zone(net, part.own_buses(z), objective="shedding", flows="variables", name=f"z{z}")
        reds = {"before": sparse_elimination(prob, small_n=sys.maxsize),  # the old rule: the fill ratio alone
                 "flows": eliminate(prob, ("ohm",)), "now": sparse_elimination(prob)}
        solvers = {f: _solver(reds[f], drop_implied=(f == "now")) for f in FORMS}
        rng = np.random.default_rng(z)
        n = prob.n
        draws = []
        for _ in range(args.rounds):
            diag = np.where(rng.random(n) < 0.1, 101.7, 1.73)
            draws.append((diag, -diag * prob.x0 + rng.normal(0.0, 1.0, n)))
        times = {f: [] for f in FORMS}
        iters, xs = {}, {}
        for _ in range(args.repeats):
            for f in FORMS:
                red, solver = reds[f], solvers[f]
                t, it, x = 0.0, 0, []
                for diag, c in draws:
                    res = solver.solve(red.pull(c, diag))
                    t += res.wall_s
                    it += res.iterations
                    x.append(red.lift(res.x))
                times[f].append(t)
                iters[f], xs[f] = it, x
        line = {"zone": z, "n": {f: reds[f].reduced.n for f in FORMS}}
        for f in FORMS:
            med = float(np.median(times[f]))
            line[f] = {"s": round(med, 4), "iterations": iters[f], "ms_per_iteration": round(1000 * med / iters[f], 3),
                       "rows": int(solvers[f]._form.A.shape[0])}
            totals[f][0] += med
            totals[f][1] += iters[f]
            worst_dx[f] = max(worst_dx[f], max(float(np.max(np.abs(a - b))) for a, b in zip(xs[f], xs["before"])))
            worst_violation = max(worst_violation, max(prob.max_violation(x) for x in xs[f]))
        lines.append(line)
        print(json.dumps(line), flush=True)
    last = {
        "case": Path(args.case).stem, "zones": len(zones), "rounds": args.rounds, "repeats": args.repeats,
        "total_s": {f: round(totals[f][0], 3) for f in FORMS},
        "iterations": {f: totals[f][1] for f in FORMS},
        "vs_before": {f: round(totals[f][0] / totals["before"][0], 3) for f in FORMS},
        "max_dx_vs_before": {f: float(f"{worst_dx[f]:.3g}") for f in FORMS},
        "max_violation": float(f"{worst_violation:.3g}"),
    }
    lines.append(last)
    print(json.dumps(last), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(lines, indent=2) + "\n")


if __name__ == "__main__":
    main()
