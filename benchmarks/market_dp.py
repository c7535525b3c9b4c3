"""DC market by sharing with private loads: cost gap, imbalance and price error against total ε.

Output perturbation of every release (Gaussian, σ = z·β·max_b‖[1; H_b]‖, z calibrated by the accountant to
the total ε per zone over the run; docs/market.md). Writes docs/results/market_dp.csv and market_dp.png.

    python benchmarks/market_dp.py            # about a minute
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from powerdp.admm.market import default_market_rho, run_market
from powerdp.admm.sharing_run import SharingSettings
from powerdp.grid.network import load_case
from powerdp.grid.partition import partition
from powerdp.opf.dc import dc_model
from powerdp.privacy.calibration import gaussian_noise_multiplier

OUT = Path(__file__).resolve().parent.parent / "docs" / "results"
CASES = {  # case, partition, rounds, ρ factor
    "case118": ("case118", "case118_3areas", 100, 0.01),
    "pglib_case30": ("/work/wt/shared/data/pglib/pglib_opf_case30_ieee.m", None, 100, 0.3),
}
EPSILONS = (0.1, 1.0, 10.0, 100.0)
BETA, DELTA, SEEDS = 0.01, 1e-5, (1, 2, 3)


def main() -> None:
    rows = []
    for label, (case, part, rounds, factor) in CASES.items():
        net = load_case(case)
        zones = (partition(net, part) if part else partition(net, zones=3, method="modularity")).zone_of_bus
        rho = factor * default_market_rho(dc_model(net))
        for eps in (None, *EPSILONS):
            z = None if eps is None else gaussian_noise_multiplier(eps, DELTA, rounds)
            for seed in SEEDS if eps is not None else (0,):
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
    OUT.mkdir(parents=True, exist_ok=True)
    df.to_csv(OUT / "market_dp.csv", index=False)
    agg = df.groupby(["case", "epsilon"]).agg({"cost_gap": lambda s: np.mean(np.abs(s)), "imbalance_mw": "mean",
                                               "max_price_error": "mean", "mean_price_error": "mean"}).reset_index()
    agg.to_csv(OUT / "market_dp_summary.csv", index=False)
    plot(agg)


def plot(agg: pd.DataFrame) -> None:
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
    fig.suptitle(f"DC market by ADMM sharing, Gaussian output perturbation of the releases (β = {BETA} p.u., mean of {len(SEEDS)} seeds)")
    fig.tight_layout()
    fig.savefig(OUT / "market_dp.png", dpi=120)


if __name__ == "__main__":
    sys.exit(main())
