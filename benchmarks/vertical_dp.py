"""Vertical learning with private feature blocks: test log-loss and error against total ε.

breast_cancer, 2 parties × 15 features, λ = 1e-3, ρ = 0.5/N, T rounds; Gaussian noise on every release
with the sound sensitivities of docs/vertical.md, z calibrated by the accountant to the total ε per party
(δ = 1e-5). Writes docs/results/vertical_dp.csv, vertical_dp_summary.csv and vertical_dp.png.

    python benchmarks/vertical_dp.py          # about a minute
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from powerdp.admm.sharing_run import SharingSettings
from powerdp.learning.vertical import baselines, load_dataset, run_vertical_learning
from powerdp.privacy.calibration import gaussian_noise_multiplier

OUT = Path(__file__).resolve().parent.parent / "docs" / "results"
EPSILONS = (0.1, 1.0, 10.0)
CONFIGS = [  # neighbours, column clip C, rounds T
    ("column", 0.03, 10), ("column", 0.1, 10), ("column", 0.1, 30), ("row", 1.0, 10),
]
LAM, DELTA, SEEDS = 1e-3, 1e-5, (1, 2, 3, 4, 5)


def main() -> None:
    data = load_dataset("breast_cancer", 2)
    n = len(data.y_train)
    base = baselines(data, LAM)
    rows = []
    for neighbours, clip, rounds in CONFIGS:
        for eps in EPSILONS:
            z = gaussian_noise_multiplier(eps, DELTA, rounds)
            for seed in SEEDS:
                res, _ = run_vertical_learning(data, LAM, SharingSettings(rounds=rounds, rho=0.5 / n, noise_multiplier=z, delta=DELTA),
                                               neighbours=neighbours, clip=clip, seed=seed)
                ev = res.summary["evaluation"]
                rows.append({"neighbours": neighbours, "clip": clip, "rounds": rounds, "epsilon": eps, "seed": seed,
                             "noise_multiplier": z, "test_logloss": ev["test_logloss"], "test_error": ev["test_error"],
                             "epsilon_spent": res.summary["coordinator_view"]["ledger"][0]["epsilon"]})
                print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    df.to_csv(OUT / "vertical_dp.csv", index=False)
    agg = df.groupby(["neighbours", "clip", "rounds", "epsilon"]).agg(
        test_logloss=("test_logloss", "mean"), test_logloss_sd=("test_logloss", "std"),
        test_error=("test_error", "mean"), test_error_sd=("test_error", "std")).reset_index()
    agg["centralized_test_logloss"] = base["centralized_test_logloss"]
    agg["party1_alone_test_logloss"] = base["party_alone_test_logloss"][0]
    agg.to_csv(OUT / "vertical_dp_summary.csv", index=False)
    plot(agg, base)


def plot(agg: pd.DataFrame, base: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for (nb, clip, rounds), g in agg.groupby(["neighbours", "clip", "rounds"]):
        label = f"{nb} neighbours" + (f", C = {clip:g}" if nb == "column" else "") + f", T = {rounds}"
        axes[0].errorbar(g["epsilon"], g["test_logloss"], yerr=g["test_logloss_sd"], marker="o", capsize=3, label=label)
        axes[1].errorbar(g["epsilon"], 100 * g["test_error"], yerr=100 * g["test_error_sd"], marker="o", capsize=3, label=label)
    for ax, key, scale in ((axes[0], "test_logloss", 1), (axes[1], "test_error", 100)):
        ax.axhline(scale * base[f"centralized_{key}"], color="k", ls="--", lw=1, label="centralized (non-private)")
        ax.axhline(scale * base[f"party_alone_{key}"][0], color="grey", ls=":", lw=1, label="party 1 alone")
        ax.set_xscale("log")
        ax.set_xlabel("total ε per party (δ = 1e-5)")
    axes[0].axhline(np.log(2), color="r", ls="-.", lw=1, label="constant predictor")
    axes[0].set_ylabel("test log-loss")
    axes[1].set_ylabel("test error (%)")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Vertical logistic regression by ADMM sharing, breast_cancer, 2 parties (mean ± sd of {len(SEEDS)} seeds)")
    fig.tight_layout()
    fig.savefig(OUT / "vertical_dp.png", dpi=120)


if __name__ == "__main__":
    main()
