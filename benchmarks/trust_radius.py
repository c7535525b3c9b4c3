#!/usr/bin/env python3
"""ObjT's trust-region radius on power flow: constant δ_t = a against the paper's a/t² (docs/learning.md, "Trust-region
radius"; the default DEFAULT_TRUST_RADIUS of powerdp/engine/consensus/updates/trust_region.py comes from here).

    python benchmarks/trust_radius.py                       # case118 in its 3 areas, T = 100, Clarabel
    python benchmarks/trust_radius.py --case case14 --rounds 50

Prints the shedding objective F after 50 and T rounds and the final consensus residual for ObjT at ε = 0.1 and 1
and for the non-private trust-region update, over a grid of a for each schedule.
"""

from __future__ import annotations

import argparse
import warnings

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--solver", default="clarabel")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    grid = [("constant", a) for a in (0.03, 0.1, 0.3, 1.0)] + [("inverse-square", a) for a in (0.1, 1.0, 10.0)]
    for alg, eps in (("objt", 0.1), ("objt", 1.0), ("trust-region/none", None)):
        for sched, a in grid:
            kw = {"epsilon": eps} if eps else {}
            cfg = RunConfig(case=args.case, zones=3, algorithm=alg, rounds=args.rounds, seed=0, local_solver=args.solver,
                            extra={"trust_radius": a, "trust_schedule": sched}, checkpoint_every=0, **kw)
            try:
                h = run_distributed(cfg, reference=False).history
            except Exception as exc:  # noqa: BLE001 - a failed local solve is a result too
                print(f"{alg:18s} eps={eps} {sched:14s} a={a:<5g} FAILED: {str(exc)[:80]}", flush=True)
                continue
            mid = h["objective"].iloc[min(49, len(h) - 1)]
            print(f"{alg:18s} eps={eps} {sched:14s} a={a:<5g} F(50) {mid:.4g}  F(T) {h['objective'].iloc[-1]:.4g}  "
                  f"residual {h['feasibility'].iloc[-1]:.3g}", flush=True)


if __name__ == "__main__":
    main()
