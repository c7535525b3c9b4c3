#!/usr/bin/env python3
"""The papers' federated-learning claims, measured offline (docs/learning.md, docs/results/learning_*.csv).

    python benchmarks/learning_claims.py paper000 --dataset digits --rounds 2000   # 000 §6.2: ObjG vs OutG, E = 1, 5
    python benchmarks/learning_claims.py inexact --rounds 1000                     # 004: ObjT vs non-private, vs OutP
    python benchmarks/learning_claims.py budget --rounds 200                       # equal total budgets + centralized DP-GD
    python benchmarks/learning_claims.py figures                                   # the figures from the CSVs

Every run is seeded (3 seeds, the noise draws); sound sensitivities (replace-one) unless said otherwise. Each
subcommand appends one CSV row per run to OUT/learning_<name>.csv; `figures` draws OUT/learning_budget.png and
OUT/learning_paper000_<dataset>.png from those CSVs (OUT: --out, default docs/results). For a smoke run, into a
fresh directory (the CSVs are appended to):

    python benchmarks/learning_claims.py paper000 --out DIR --rounds 2 --seeds 1 --epsilons 1 --evaluate-every 1
    python benchmarks/learning_claims.py figures --out DIR

--epsilons, --targets and --dpgd-steps only narrow a run; without them it is the one above. `inexact --skip-done`
leaves out every run that already has its row in the CSV (a long run continued, or split over processes:
`inexact --epsilons 0.05 --skip-done` and `inexact --epsilons 5 --skip-done` side by side).
"""

from __future__ import annotations

import argparse
import csv
import math
import time
import warnings
from pathlib import Path

import numpy as np

from powerdp.apps.learning import LearnConfig, run_federated
from powerdp.apps.learning.model import SoftmaxLoss, error_rate
from powerdp.apps.learning.runner import prepare_data

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
#: the paper's preprocessing scale for u = 0.1: pixels in [0, 1], rows clipped to ‖x‖₂ ≤ R (digits: √64 = 8 clips
#: nothing; MNIST: 10, about the typical row norm 9.3)
CLIP = {"digits": 8.0, "mnist": 10.0}
#: and in ℓ1 (what the Laplace sensitivity 4R₁/I uses; MNIST rows in [0, 1]: mean ‖x‖₁ 103, 90th percentile 147)
CLIP_L1 = {"digits": None, "mnist": 120.0}
PAPER000_EPSILONS = (0.05, 0.1, 0.5, 1.0)  # 000 §6.2's ε̄ per local step


def _write(out: Path, name: str, row: dict) -> None:
    path = out / f"learning_{name}.csv"
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)


def _run(cfg: LearnConfig, data) -> dict:
    t = time.perf_counter()
    r = run_federated(cfg, data=data, reference=False)
    s, h = r.summary, r.history.dropna(subset=["objective"])
    tail = h.tail(max(1, len(h) // 10))  # the last tenth of the evaluations: the level a run settles at
    return {
        "final_objective": s["final_objective"], "final_test_error": s["final_test_error"],
        "tail_objective": float(tail["objective"].mean()), "tail_test_error": float(tail["test_error"].mean()),
        "noise_magnitude": float(r.history["noise_magnitude"].mean()),
        "epsilon_total": max(s["epsilon_total"].values()) if s["epsilon_total"] else 0.0,
        "seconds": round(time.perf_counter() - t, 1),
    }


def paper000(args) -> None:
    """000 §6.2: ObjG and OutG, u = 0.1, δ̄ = 1e-6, ε̄ ∈ {0.05, 0.1, 0.5, 1}, E ∈ {1, 5}, ρ̂_t, 3 seeds."""
    base = LearnConfig(dataset=args.dataset, box=0.1, clip=CLIP[args.dataset], clip_l1=CLIP_L1[args.dataset], rounds=args.rounds, delta=1e-6,
                       evaluate_every=args.evaluate_every, checkpoint_every=0)
    data = prepare_data(base).data
    for eps in args.epsilons or PAPER000_EPSILONS:
        for E in (1, 5):
            for alg in ("objg", "outg"):
                for seed in range(args.seeds):
                    cfg = base.replace(algorithm=alg, epsilon=eps, local_updates=E, seed=seed)
                    row = {"dataset": args.dataset, "algorithm": alg, "epsilon_step": eps, "E": E, "seed": seed, "rounds": args.rounds}
                    row.update(_run(cfg, data))
                    _write(args.out, "paper000", row)
                    print(row, flush=True)


def inexact(args) -> None:
    """004 on the MNIST subset: ε̄ scaled by I_full/I_sub = 60000/4000 = 15 (SPEC 9.5): full-MNIST ε̄ = 5 → 75 here,
    0.05 → 0.75. ObjT (constant and a/t² radius), OutP (Huang et al.), non-private; E = 1; 3 seeds.

    The inexact-ADMM paper's settings, as its authors' code runs them: no box for ObjT and the non-private run
    (W = Rⁿ; the u = 0.1 box is the other paper's), box 1 for OutP (Huang et al.'s step needs a bounded set), and
    both neighbour relations (replace-one, and add-remove: the paper's one-sample sensitivity). The penalty is
    ρ̂_t(ε̄) over T = --rounds: another regime than the paper's ρ = 102 over T = 20 000 (docs/results/learning.md)."""
    base = LearnConfig(dataset="mnist", box=None, clip=CLIP["mnist"], clip_l1=CLIP_L1["mnist"], rounds=args.rounds, evaluate_every=args.evaluate_every,
                       checkpoint_every=0, delta=1e-6)
    data = prepare_data(base).data
    scale = 60000 / 4000
    outp = {"box": 1.0}
    runs = [("nonprivate", None, {})]
    for full in args.epsilons or (5.0, 0.05):
        runs += [("objt", full, {"trust_radius": a, "trust_schedule": s}) for a, s in ((args.radius, "constant"), (args.radius, "inverse-square"))]
        runs += [("outp", full, outp)]
        runs += [("objt", full, {"trust_radius": args.radius, "trust_schedule": "constant", "adjacency": "add-remove"}),
                 ("outp", full, {**outp, "adjacency": "add-remove"})]
        runs += [("objt", full, {"trust_radius": args.radius, "trust_schedule": "constant", "sensitivity": "paper"}),
                 ("outp", full, {**outp, "sensitivity": "paper"})]
    done = _done_runs(args.out / "learning_inexact.csv") if args.skip_done else set()
    for alg, full, extra in runs:
        for seed in range(args.seeds if alg != "nonprivate" else 1):
            kw = dict(epsilon=full * scale) if full else {}
            cfg = base.replace(algorithm=alg, seed=seed, **kw, **extra)
            row = {"algorithm": alg, "epsilon_full_mnist": full, "epsilon_step": full * scale if full else None,
                   "trust_schedule": extra.get("trust_schedule", ""), "trust_radius": extra.get("trust_radius", ""),
                   "sensitivity": extra.get("sensitivity", "sound"), "adjacency": cfg.adjacency,
                   "box": "none" if cfg.box is None else cfg.box, "seed": seed, "rounds": args.rounds}
            if _run_key(row) in done:
                continue
            row.update(_run(cfg, data))
            _write(args.out, "inexact", row)
            print(row, flush=True)


#: the settings that name an inexact run (its CSV row's first columns)
RUN_KEY = ("algorithm", "epsilon_full_mnist", "trust_schedule", "trust_radius", "sensitivity", "adjacency", "box", "seed", "rounds")


def _run_key(row: dict) -> tuple[str, ...]:
    return tuple("" if row[k] is None else str(row[k]) for k in RUN_KEY)


def _done_runs(path: Path) -> set[tuple[str, ...]]:
    """The runs that already have a row in ``path`` (``--skip-done``)."""
    if not path.exists():
        return set()
    with open(path, newline="") as fh:
        return {_run_key(row) for row in csv.DictReader(fh)}


def dp_gd(data, epsilon: float, delta: float, steps: int, box: float, R: float, seed: int, lr: float) -> dict:
    """Centralized DP baseline: full-batch projected gradient descent on the pooled data with Gaussian noise on each
    gradient (Δ₂ = 2√2·R/I, replace-one), σ calibrated to the total (ε, δ) over ``steps`` by the same accountant."""
    from powerdp.privacy.calibration import gaussian_noise_multiplier

    n_train = len(data.y_train)
    loss = SoftmaxLoss(data.X_train, data.y_train, data.n_classes, n_train, reg=1e-6)
    sigma = gaussian_noise_multiplier(epsilon, delta, steps) * 2 * math.sqrt(2) * R / n_train
    rng = np.random.default_rng(seed)
    z = np.zeros(loss.n)
    for _ in range(steps):
        z = np.clip(z - lr * (loss.gradient(z) + rng.normal(0.0, sigma, loss.n)), -box, box)
    return {"final_objective": loss.value(z), "final_test_error": error_rate(z, data.X_test, data.y_test, data.n_classes)}


def budget(args) -> None:
    """Equal total budgets per client (ε = 1, 10; δ = 1e-6), sound sensitivities, MNIST subset, 3 seeds."""
    base = LearnConfig(dataset="mnist", box=0.1, clip=CLIP["mnist"], clip_l1=CLIP_L1["mnist"], rounds=args.rounds, evaluate_every=args.evaluate_every,
                       checkpoint_every=0)
    data = prepare_data(base).data
    for target in args.targets:
        for alg in ("objg", "outg", "outp", "objl", "objt"):
            for seed in range(args.seeds):
                gauss = alg in ("objg", "outg", "outp")
                cfg = base.replace(algorithm=alg, seed=seed, target_epsilon=target, target_delta=1e-6 if gauss else None)
                row = {"algorithm": alg, "target_epsilon": target, "target_delta": 1e-6 if gauss else 0.0, "seed": seed, "rounds": args.rounds}
                row.update(_run(cfg, data))
                _write(args.out, "budget", row)
                print(row, flush=True)
        for seed in range(args.seeds):
            for steps in args.dpgd_steps:
                t = time.perf_counter()
                res = dp_gd(data, target, 1e-6, steps, 0.1, CLIP["mnist"], seed, lr=args.dpgd_lr)
                row = {"algorithm": f"centralized DP-GD ({steps} steps)", "target_epsilon": target, "target_delta": 1e-6, "seed": seed,
                       "rounds": steps, "final_objective": res["final_objective"], "final_test_error": res["final_test_error"],
                       "tail_objective": res["final_objective"], "tail_test_error": res["final_test_error"], "noise_magnitude": None,
                       "epsilon_total": target, "seconds": round(time.perf_counter() - t, 1)}
                _write(args.out, "budget", row)
                print(row, flush=True)


def figures(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    path = args.out / "learning_budget.csv"
    if path.exists():
        df = pd.read_csv(path)
        g = df.groupby(["algorithm", "target_epsilon"])[["final_test_error", "final_objective"]].mean().reset_index()
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for ax, col in zip(axes, ("final_test_error", "final_objective"), strict=True):
            for i, (alg, sub) in enumerate(g.groupby("algorithm")):
                ax.bar(np.arange(len(sub)) + i * 0.12, sub[col], width=0.12, label=alg)
            targets = sorted(g.target_epsilon.unique())
            ax.set_xticks(np.arange(len(targets)) + 0.3, [f"total ε = {e:g}" for e in targets])
            ax.set_ylabel(col.replace("_", " "))
        handles, labels = axes[0].get_legend_handles_labels()  # beside the bars, never over them
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
        fig.suptitle(f"MNIST subset, 10 clients: equal total budgets per client (δ = 1e-6), mean of {df.seed.nunique()} seeds")
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        fig.savefig(args.out / "learning_budget.png", dpi=120)
    path = args.out / "learning_paper000.csv"
    if path.exists():
        df = pd.read_csv(path)
        for ds, sub in df.groupby("dataset"):
            g = sub.groupby(["algorithm", "E", "epsilon_step"])[["tail_objective", "tail_test_error"]].mean().reset_index()
            fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
            for ax, col in zip(axes, ("tail_objective", "tail_test_error"), strict=True):
                for (alg, E), s in g.groupby(["algorithm", "E"]):
                    ax.plot(s.epsilon_step, s[col], marker="o", label=f"{alg} E={E}")
                ax.set_xscale("log")
                ax.set_xlabel("ε̄ per local step")
                ax.set_ylabel(col.replace("_", " "))
            axes[0].legend(fontsize=8)
            fig.suptitle(f"Ryu and Kim's section 6.2 on {ds}: ObjG vs OutG (u = 0.1, δ̄ = 1e-6, ρ̂_t), "
                         f"mean of {sub.seed.nunique()} seeds")
            fig.tight_layout()
            fig.savefig(args.out / f"learning_paper000_{ds}.png", dpi=120)


def _ms(x) -> str:
    return f"{x.mean():.4f} ± {x.std(ddof=0):.4f}" if len(x) > 1 else f"{x.mean():.4f}"


def report(args) -> None:
    """Markdown tables of the CSVs (printed; docs/results/learning.md quotes them)."""
    import pandas as pd

    path = args.out / "learning_paper000.csv"
    if path.exists():
        df = pd.read_csv(path)
        for ds, sub in df.groupby("dataset"):
            print(f"\n#### 000 §6.2 on {ds} (T = {sub['rounds'].iloc[0]}, mean ± sd over {sub['seed'].nunique()} seeds; objective and test error: mean of the last tenth of the evaluations)\n")
            print("| ε̄ | E | ObjG objective | OutG objective | ObjG test error | OutG test error | noise ObjG / OutG | total ε per client |")
            print("|---|---|---|---|---|---|---|---|")
            for (eps, E), g in sub.groupby(["epsilon_step", "E"]):
                o, u = g[g.algorithm == "objg"], g[g.algorithm == "outg"]
                if not len(o) or not len(u):
                    continue
                print(f"| {eps:g} | {E} | {_ms(o.tail_objective)} | {_ms(u.tail_objective)} | {_ms(o.tail_test_error)} | {_ms(u.tail_test_error)} | "
                      f"{o.noise_magnitude.mean():.3g} / {u.noise_magnitude.mean():.3g} | {o.epsilon_total.iloc[0]:.3g} |")
    path = args.out / "learning_inexact.csv"
    if path.exists():
        df = pd.read_csv(path)
        print(f"\n#### 004 on the MNIST subset (T = {df['rounds'].iloc[0]}, ε̄ scaled by 60000/4000 = 15; mean ± sd over the seeds run)\n")
        for col, default in (("adjacency", "replace-one"), ("box", "0.1")):  # CSVs written before these columns
            if col not in df:
                df[col] = default
        print("| algorithm | full-MNIST ε̄ | ε̄ used | box | radius | sensitivity | neighbours | seeds | test error | objective | total ε per client |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        keys = ["algorithm", "epsilon_full_mnist", "epsilon_step", "box", "trust_schedule", "trust_radius", "sensitivity", "adjacency"]
        for key, g in df.fillna("").groupby(keys, sort=False):
            alg, full, used, box, sched, a, sens, adj = key
            radius = f"{sched} a = {a}" if sched else ""
            print(f"| {alg} | {full} | {used} | {box} | {radius} | {sens} | {adj} | {g.seed.nunique()} | {_ms(g.tail_test_error)} | {_ms(g.tail_objective)} | "
                  f"{g.epsilon_total.iloc[0]:.4g} |")
    path = args.out / "learning_budget.csv"
    if path.exists():
        df = pd.read_csv(path)
        print("\n#### Equal total budgets per client (MNIST subset, sound sensitivities; mean ± sd over seeds)\n")
        print("| algorithm | total ε | δ | rounds | test error | objective | spent ε (ledger) |")
        print("|---|---|---|---|---|---|---|")
        for (alg, te), g in df.groupby(["algorithm", "target_epsilon"], sort=False):
            print(f"| {alg} | {te:g} | {g.target_delta.iloc[0]:g} | {g.rounds.iloc[0]} | {_ms(g.final_test_error)} | {_ms(g.final_objective)} | {g.epsilon_total.max():.4g} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["paper000", "inexact", "budget", "figures", "report"])
    ap.add_argument("--out", type=Path, default=RESULTS, help="directory of the CSVs and figures (default docs/results)")
    ap.add_argument("--dataset", default="digits", choices=list(CLIP))
    ap.add_argument("--rounds", type=int, default=1000, help="rounds of every run")
    ap.add_argument("--seeds", type=int, default=3, help="runs per setting: seeds 0 .. N-1")
    ap.add_argument("--evaluate-every", type=int, default=50, help="evaluate the model every N rounds")
    ap.add_argument("--radius", type=float, default=0.1, help="ObjT's a")
    ap.add_argument("--epsilons", type=float, nargs="+", default=None,
                    help=f"paper000: the ε̄ per local step (default {' '.join(map(str, PAPER000_EPSILONS))}); "
                         "inexact: the full-MNIST ε̄ (default 5 0.05)")
    ap.add_argument("--skip-done", action="store_true", help="inexact: leave out the runs that already have a row in the CSV")
    ap.add_argument("--targets", type=float, nargs="+", default=[1.0, 10.0], help="budget: the total ε per client (default 1 10)")
    ap.add_argument("--dpgd-steps", type=int, nargs="+", default=[50, 200], help="budget: centralized DP-GD step counts (default 50 200)")
    ap.add_argument("--dpgd-lr", type=float, default=0.02, help="centralized DP-GD step (1/L with L = R²/2 = 50)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    args.out.mkdir(parents=True, exist_ok=True)
    {"paper000": paper000, "inexact": inexact, "budget": budget, "figures": figures, "report": report}[args.what](args)


if __name__ == "__main__":
    main()
