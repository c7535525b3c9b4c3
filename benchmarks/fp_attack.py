#!/usr/bin/env python3
"""The floating-point attack of issue 26 (powerdp/studies/fp_attack.py) against output and objective perturbation, through the public
API: one-round runs on D or D' picked by a secret bit, the adversary's noise-free replay of both hypotheses, and
an exact reachability test of every released double. Against the product's sampler (values on a grid, integer
noise) and against the old numpy sampler (a test-only fault).

    python benchmarks/fp_attack.py                 # learn objl objt outl objg outg (digits, ε 1), run outl (ε 0.5) outg (ε 1)
    python benchmarks/fp_attack.py --trials 400 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

from powerdp.apps.learning import LearnConfig
from powerdp.apps.power_flow.config import RunConfig
from powerdp.privacy.faults import InjectedFaults
from powerdp.studies.fp_attack_targets import attack, learning_target, power_flow_target


def _learn(alg: str, **kw):
    return lambda: LearnConfig(dataset="digits", algorithm=alg, target_epsilon=1.0, **kw)


TARGETS = {
    **{f"learn {a}": (_learn(a), learning_target, 1.0) for a in ("objl", "objt", "outl")},
    **{f"learn {a}": (_learn(a, target_delta=1e-5), learning_target, 1.0) for a in ("objg", "outg")},
    "run outl": (lambda: RunConfig(case="case14", zones=2, algorithm="outl", target_epsilon=0.5), power_flow_target, 0.5),
    "run outg": (lambda: RunConfig(case="case14", zones=2, algorithm="outg", target_epsilon=1.0, target_delta=1e-5),
                 power_flow_target, 1.0),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    ap.add_argument("--json")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    out = {}
    for name in args.targets:
        make, target, claim = TARGETS[name]
        for sampler in ("numpy", "grid"):
            cfg = make()
            if sampler == "numpy":
                cfg = cfg.replace(faults=InjectedFaults(sampler="numpy"))
            t0 = time.perf_counter()
            release, replay = target(cfg)
            res = attack(release, replay, args.trials, sampler)
            res.update(claim=claim, sampler=sampler, wall_s=time.perf_counter() - t0)
            out[f"{name} [{sampler}]"] = res
            print(f"{name:10s} {sampler:5s} sampler: TP {res['tp']}/{res['positives']} FP {res['fp']}/{res['negatives']} "
                  f"-> eps >= {res['epsilon_lower_bound']:.2f} (claim {claim})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
