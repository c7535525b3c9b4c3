"""Record the reference histories that tests/test_histories.py compares against, bit for bit.

    python tests/data/histories/make.py

Recorded at the commit that introduced the paper's coordinates (balance variables), before the
update rules, perturbations and mechanisms became registered strategies. Re-record only when a
change is meant to change what a run computes, and say so in the commit.
"""

from __future__ import annotations

import logging
from pathlib import Path

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed

HERE = Path(__file__).resolve().parent
DETERMINISTIC = ["round", "noise_magnitude", "objective", "feasibility", "dual_residual", "max_violation",
                 "solver_iterations", "solves", "epsilon_spent", "rho"]
SETTINGS = {
    "exact": dict(algorithm="exact", rounds=4),
    "exact_cost": dict(algorithm="exact", objective="cost", rounds=4),
    "nonprivate": dict(algorithm="nonprivate", rounds=4, local_updates=2),
    "objl": dict(algorithm="objl", epsilon=0.1, rounds=4, local_updates=2),
    "objl_all": dict(algorithm="objl", epsilon=0.1, rounds=3, noise_on="all"),
    "objg": dict(algorithm="objg", epsilon=0.5, rounds=4, local_updates=2),
    "outl": dict(algorithm="outl", epsilon=0.5, rounds=3),
    "outg": dict(algorithm="outg", epsilon=0.5, rounds=3, local_updates=2),
}


#: the fixed path these histories were recorded on (the defaults before issue 39: Ipopt, every round, the paper's
#: constant ρ without relaxation or acceleration)
FIXED_PATH = dict(local_solver="ipopt", tolerance=0.0, rho_schedule="constant", relaxation=1.0, acceleration="none")


def config(name: str) -> RunConfig:
    return RunConfig(case="case14", zones=None, partition="case14_3zones", rho=100.0, seed=3, checkpoint_every=0,
                     **FIXED_PATH, **SETTINGS[name])


def main() -> None:
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    for name in SETTINGS:
        res = run_distributed(config(name), reference=False)
        res.history[DETERMINISTIC].to_csv(HERE / f"{name}.csv", index=False)
        print(name, len(res.history))


if __name__ == "__main__":
    main()
