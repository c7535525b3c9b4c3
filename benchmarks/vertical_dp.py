"""Vertical learning with private feature blocks: test log-loss and error against total ε.

breast_cancer, 2 parties × 15 features, λ = 1e-3, ρ = 0.5/N, T rounds; Gaussian noise on every release
with the sound sensitivities of docs/vertical.md, z calibrated by the accountant to the total ε per party
(δ = 1e-5). Writes vertical_dp.csv, vertical_dp_summary.csv and vertical_dp.png into --out (default docs/results).

    python benchmarks/vertical_dp.py          # about 15 s
    python benchmarks/vertical_dp.py --out DIR --configs 1 --seeds 2 --epsilons 1   # a smoke run

The flags only make smaller runs (fewer configurations, seeds, budgets); without them the run is the one above.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from powerdp.apps.learning.vertical import baselines, load_dataset, run_vertical_learning
from powerdp.privacy.calibration import gaussian_noise_multiplier
from powerdp.runs.sharing_run import SharingSettings

OUT = Path(__file__).resolve().parent.parent / "docs" / "results"
EPSILONS = (0.1, 1.0, 10.0)
CONFIGS = [  # neighbours, column clip C, rounds T
    ("column", 0.03, 10), ("column", 0.1, 10), ("column", 0.1, 30), ("row", 1.0, 10),
]
LAM, DELTA, SEEDS = 1e-3, 1e-5, (1, 2, 3, 4, 5)


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT, help="directory for the CSVs and the figure (default docs/results)")
    ap.add_argument("--configs", type=int, default=len(CONFIGS), help="run the first N of the (neighbours, clip, rounds) configurations")
    ap.add_argument("--seeds", type=int, default=len(SEEDS), help=f"runs per budget: the first N of seeds {SEEDS}")
    ap.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS), help=f"total ε per party (default {EPSILONS})")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    seeds = SEEDS[: args.seeds]
    data = load_dataset("breast_cancer", 2)
    n = len(data.y_train)
    base = baselines(data, LAM)
    rows = []
    for neighbours, clip, rounds in CONFIGS[: args.configs]:
        for eps in args.epsilons:
            z = gaussian_noise_multiplier(eps, DELTA, rounds)
            for seed in seeds:
                res, _ = run_vertical_learning(data, LAM, SharingSettings(rounds=rounds, rho=0.5 / n, noise_multiplier=z, delta=DELTA),
                                               neighbours=neighbours, clip=clip, seed=seed)
                ev = res.summary["evaluation"]
                rows.append({"neighbours": neighbours, "clip": clip, "rounds": rounds, "epsilon": eps, "seed": seed,
                             "noise_multiplier": z, "test_logloss": ev["test_logloss"], "test_error": ev["test_error"],
                             "epsilon_spent": res.summary["coordinator_view"]["ledger"][0]["epsilon"]})
                print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "vertical_dp.csv", index=False)
    agg = df.groupby(["neighbours", "clip", "rounds", "epsilon"]).agg(
        test_logloss=("test_logloss", "mean"), test_logloss_sd=("test_logloss", "std"),
        test_error=("test_error", "mean"), test_error_sd=("test_error", "std")).reset_index()
    agg["centralized_test_logloss"] = base["centralized_test_logloss"]
    agg["party1_alone_test_logloss"] = base["party_alone_test_logloss"][0]
    agg.to_csv(out / "vertical_dp_summary.csv", index=False)
    plot(agg, base, out / "vertical_dp.png", len(seeds))


def plot(agg: pd.DataFrame, base: dict, path: Path, n_seeds: int = len(SEEDS)) -> None:
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
    fig.suptitle(f"Vertical logistic regression by ADMM sharing, breast_cancer, 2 parties (mean ± sd of {n_seeds} seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
