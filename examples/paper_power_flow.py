"""The paper's power-flow experiment (DP distributed convex optimization, Figures 3–4).

case14 and case118, 3 zones, ρ = 100, η_t = 1/√t, T = 100, E ∈ {1, 5},
ε ∈ {0.05, 0.1, 0.5, 1}, δ = 1e-2, β = 0.01 p.u., the four DP algorithms
(objl, objg, outl, outg), several seeds. Writes one tidy CSV (one row per run
and round) and, per case and E, a figure with noise magnitude, objective and
feasibility against rounds, one column per ε.

    python examples/paper_power_flow.py --out paper_out                 # full grid
    python examples/paper_power_flow.py --out quick --quick             # small grid
    python examples/paper_power_flow.py --sensitivity paper ...          # the paper's OutPert value β
    python examples/paper_power_flow.py --out paper_out --plot-only     # redraw from the CSV

Runs go to a process pool (--jobs); finished runs are skipped when the CSV of
a run already exists, so an interrupted study resumes.
"""

from __future__ import annotations

import argparse
import itertools
import logging
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import pandas as pd

ALGORITHMS = ["objl", "objg", "outl", "outg"]
EPSILONS = [0.05, 0.1, 0.5, 1.0]


def one_run(case: str, algorithm: str, epsilon: float, E: int, seed: int, rounds: int, sensitivity: str, eta: str, out: Path) -> Path:
    from powerdp.apps.power_flow.config import RunConfig
    from powerdp.apps.power_flow.runner import run_distributed

    logging.getLogger("pyomo").setLevel(logging.ERROR)
    path = out / "runs" / f"{case}_{algorithm}_eps{epsilon}_E{E}_seed{seed}_{sensitivity}.csv"
    if path.is_file():
        return path
    cfg = RunConfig(
        case=case, zones=3, algorithm=algorithm, epsilon=epsilon, delta=1e-2, beta=0.01, sensitivity=sensitivity,
        rounds=rounds, local_updates=E, rho=100.0, eta=eta, seed=seed,
    )
    res = run_distributed(cfg, reference=False)
    h = res.history.copy()
    for k, v in {"case": case, "algorithm": algorithm, "epsilon": epsilon, "local_updates": E, "seed": seed, "sensitivity": sensitivity, "eta": eta}.items():
        h[k] = v
    path.parent.mkdir(parents=True, exist_ok=True)
    h.to_csv(path, index=False)
    return path


def plot(table: pd.DataFrame, out: Path) -> list[Path]:
    """One figure per case, E and sensitivity rule, drawn by powerdp.studies.plots.plot_trajectories."""
    import matplotlib.pyplot as plt

    from powerdp.studies.plots import plot_trajectories

    paths = []
    for (case, E, sens), grp in table.groupby(["case", "local_updates", "sensitivity"]):
        fig = plot_trajectories(grp, f"{case}, 3 zones, E = {E}, {sens} sensitivities (mean, min–max over seeds)")
        path = out / f"figure_{case}_E{E}_{sens}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("paper_out"))
    ap.add_argument("--cases", default="case14,case118")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--local-updates", default="1,5")
    ap.add_argument("--epsilons", default=",".join(map(str, EPSILONS)))
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--sensitivity", default="sound", choices=["paper", "sound"], help="sound (default; ObjPert's equals the paper's 2β) or paper (OutPert's β)")
    ap.add_argument("--eta", default="sqrt", help="step-size schedule (paper: sqrt)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="case14 only, E = 1, ε ∈ {0.1, 1}, 2 seeds, 30 rounds")
    ap.add_argument("--plot-only", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.cases, args.local_updates, args.epsilons, args.seeds, args.rounds = "case14", "1", "0.1,1.0", 2, 30
    args.out.mkdir(parents=True, exist_ok=True)
    table_path = args.out / f"paper_power_flow_{args.sensitivity}.csv"
    if not args.plot_only:
        grid = list(
            itertools.product(
                args.cases.split(","),
                args.algorithms.split(","),
                [float(e) for e in args.epsilons.split(",")],
                [int(e) for e in args.local_updates.split(",")],
                range(args.seeds),
            )
        )
        print(f"{len(grid)} runs, {args.jobs} at a time")
        paths = []
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(one_run, c, a, e, E, s, args.rounds, args.sensitivity, args.eta, args.out) for c, a, e, E, s in grid]
            for k, fut in enumerate(as_completed(futures), 1):
                paths.append(fut.result())
                print(f"[{k}/{len(grid)}] {paths[-1].name}", flush=True)
        pd.concat([pd.read_csv(p) for p in sorted(paths)]).to_csv(table_path, index=False)
    table = pd.read_csv(table_path)
    if "E" in table.columns:
        table = table.rename(columns={"E": "local_updates"})
    for p in plot(table, args.out):
        print("figure", p)
    final = table[table["round"] == table["round"].max()]
    if "E" in final.columns:  # tables written before the column was renamed
        final = final.rename(columns={"E": "local_updates"})
    summary = final.groupby(["case", "local_updates", "epsilon", "algorithm"])[["objective", "feasibility"]].agg(["mean", "std"])
    summary.to_csv(args.out / f"final_{args.sensitivity}.csv")
    print(summary.to_string())


if __name__ == "__main__":
    main()
