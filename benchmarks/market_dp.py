"""DC market by sharing with private loads: cost gap, imbalance and price error against total ε.

Output perturbation of every release (Gaussian, σ = z·β·max_b‖[1; H_b]‖, z calibrated by the accountant to
the total ε per zone over the run; docs/market.md). Writes market_dp.csv, market_dp_summary.csv and market_dp.png
into --out (default docs/results).

    python benchmarks/market_dp.py            # about 15 s
    python benchmarks/market_dp.py --out DIR --cases case118 --rounds 2 --seeds 1 --epsilons 1   # a smoke run

The flags only make smaller runs (fewer cases, rounds, seeds, budgets); without them the run is the one above.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from powerdp.apps.market.dc_market import default_market_rho, run_market
from powerdp.grid.loading import load_case
from powerdp.grid.partition import partition
from powerdp.opf.dc import dc_model
from powerdp.privacy.calibration import gaussian_noise_multiplier
from powerdp.runs.sharing_run import SharingSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.shared_data import benchmark_file  # noqa: E402  (../shared/data beside the repository root)

OUT = Path(__file__).resolve().parent.parent / "docs" / "results"
CASES = {  # case (a tuple: a file of ../shared/data), partition, rounds, ρ factor
    "case118": ("case118", "case118_3areas", 100, 0.01),
    "pglib_case30": (("pglib", "pglib_opf_case30_ieee.m"), None, 100, 0.3),
}
EPSILONS = (0.1, 1.0, 10.0, 100.0)
BETA, DELTA, SEEDS = 0.01, 1e-5, (1, 2, 3)


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT, help="directory for the CSVs and the figure (default docs/results)")
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES), help="cases to run (default: all)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of every run (default: each case's own, 100)")
    ap.add_argument("--seeds", type=int, default=len(SEEDS), help=f"noisy runs per budget: the first N of seeds {SEEDS}")
    ap.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS), help=f"total ε per zone (default {EPSILONS})")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    seeds = SEEDS[: args.seeds]
    rows = []
    for label in args.cases:
        case, part, rounds, factor = CASES[label]
        rounds = args.rounds or rounds
        if isinstance(case, tuple):
            case = benchmark_file(*case, checks=f"the DP market's degradation on {label}")
        net = load_case(case)
        zones = (partition(net, part) if part else partition(net, zones=3, method="modularity")).zone_of_bus
        rho = factor * default_market_rho(dc_model(net))
        for eps in (None, *args.epsilons):
            z = None if eps is None else gaussian_noise_multiplier(eps, DELTA, rounds)
            for seed in seeds if eps is not None else (0,):
                res, model, central = run_market(net, zones, SharingSettings(rounds=rounds, rho=rho, noise_multiplier=z, delta=DELTA),
                                                 beta=BETA, seed=seed)
                ev = res.summary["evaluation"]
                lmp = model.lmp(-res.y[0], res.y[1:])
                rows.append({"case": label, "epsilon": eps if eps is not None else np.inf, "seed": seed, "rounds": rounds,
                             "noise_multiplier": z, "cost_gap": ev["cost_gap"], "imbalance_mw": ev["imbalance_mw"],
                             "max_line_violation": ev["max_line_violation"], "max_price_error": ev["max_price_error"],
                             "mean_price_error": float(np.mean(np.abs(lmp - central.lmp)))})
                print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "market_dp.csv", index=False)
    agg = df.groupby(["case", "epsilon"]).agg({"cost_gap": lambda s: np.mean(np.abs(s)), "imbalance_mw": "mean",
                                               "max_price_error": "mean", "mean_price_error": "mean"}).reset_index()
    agg.to_csv(out / "market_dp_summary.csv", index=False)
    plot(agg, out / "market_dp.png", len(seeds))


def plot(agg: pd.DataFrame, path: Path, n_seeds: int = len(SEEDS)) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for label, g in agg[np.isfinite(agg["epsilon"])].groupby("case"):
        for ax, col, name in zip(axes, ["cost_gap", "imbalance_mw", "mean_price_error"],
                                 ["|cost gap| (relative)", "imbalance (MW)", "mean |LMP error| ($/MWh)"]):
            ax.loglog(g["epsilon"], g[col], "o-", label=label)
            ax.set_xlabel("total ε per zone (δ = 1e-5)")
            ax.set_title(name)
    axes[0].legend()
    fig.suptitle(f"DC market by ADMM sharing, Gaussian output perturbation of the releases (β = {BETA} p.u., mean of {n_seeds} seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
