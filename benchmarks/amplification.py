"""Privacy amplification by iteration (001, Chan, Xie & Zhao): the §10 reproduction and the audits.

Writes into --out (default docs/results):

* amplification_table1.csv / amplification_noise.csv: Table 1 (η, 𝔏 from eq. (23) and Lemma 7.6,
  iterations to converge by the authors' test) and Table 2 (p-values of the optimality gaps at
  iteration 100 between noise levels), ours next to the paper's;
* amplification_convergence.png: average optimality gap against the iteration (Figure 1 a, b);
* amplification_audit.json: the empirical checks (powerdp.studies.amplification_audit);
* amplification.json (everything) and amplification_tables.md (the tables, for docs/amplification.md).

Protocol (001 §10 and the authors' notebook, github.com/KawaiiMengshi/Privacy-Amplification-by-
Iteration-for-ADMM): elastic net, n = 64, N = 1000, σ_b = 0.01, c₁ = 0.01, c₂ = 0.1, data of SPEC §11
(a_i = √μ·a′_i/‖a′_i‖); x₀ = 3·1, λ₀ = 0; f_t uniform over the N users; 100 runs of 100 iterations;
gap = F(x̃_t) − F(x*) with F the elastic net and x* its optimum (FISTA). Table 1 noise σ = 0.01 (the
notebook's value; its row 4 ran σ = 0, also given). "Iterations to converge": the first t whose
gap is not significantly larger than at t + 5 (one-sided two-sample t-test at 0.05, pooled if
Levene's p > 0.2, else Welch), as the notebook computes it. Table 2: two-sided t-test of the gaps at
iteration 100, pooled if Levene's p > 0.05.

    nice python benchmarks/amplification.py                 # everything (~2 min on one core)
    nice python benchmarks/amplification.py --skip-audit    # the reproduction only (~15 s)
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from powerdp.apps.learning.noisy_admm import ElasticNet, elastic_net_data, noisy_admm, uniform_order
from powerdp.files.jsonable import jsonable
from powerdp.privacy.amplification import contraction, contraction_at, convex_constant, step_interval, step_midpoint
from powerdp.studies.amplification_audit import audit_inner_steps, audit_noisy_admm

ROWS = [  # μ, β, and the paper's printed η, 𝔏, iterations to converge (Table 1); c₂ = 0.1, c₁ = 0.01
    (0.25, 0.9, 1.95, 0.95, 26),
    (0.09, 0.5, 4.81, 0.91, 13),
    (0.0225, 0.3, 20.00, 0.85, 7),
    (0.01, 0.15, 43.30, 0.80, 6),
]
SIGMAS = [0.05, 0.1, 0.2, 0.5, 0.7]
PAPER_TABLE2 = np.array([  # Table 2 of 001 (symmetric)
    [1.00, 4.20e-27, 1.87e-71, 4.57e-78, 2.30e-79],
    [4.20e-27, 1.00, 3.29e-62, 4.12e-77, 1.11e-78],
    [1.87e-71, 3.29e-62, 1.00, 6.70e-74, 2.22e-76],
    [4.57e-78, 4.12e-77, 6.70e-74, 1.00, 1.83e-36],
    [2.30e-79, 1.11e-78, 2.22e-76, 1.83e-36, 1.00],
])
C1, C2 = 0.01, 0.1


def notebook_data(mu: float, *, n: int = 64, users: int = 1000, sigma_b: float = 0.01, seed: int = 18) -> ElasticNet:
    """The authors' generator (make_singular): like SPEC §11 but every a′_i is centred before scaling."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, users))
    a[: n // 5, :] = 50 * rng.normal(size=(n // 5, users))
    a = (a - a.mean(axis=0)) / a.std(axis=0)  # sklearn's StandardScaler on the (features, users) matrix
    a = math.sqrt(mu) * a.T / math.sqrt(n)
    x = np.zeros(n)
    x[: n // 5] = 3.0
    return ElasticNet(a, a @ x + sigma_b * rng.normal(size=users), C1, C2)


def gaps(problem: ElasticNet, *, eta: float, beta: float, sigma: float, runs: int, iterations: int, rng) -> np.ndarray:
    """(runs, iterations + 1) optimality gaps F(x̃_t) − F(x*)."""
    _, fstar = problem.minimize()
    order = uniform_order(problem.users, runs, iterations, rng)
    res = noisy_admm(problem, eta=eta, beta=beta, sigma=sigma, iterations=iterations, order=order, rng=rng, evaluate=True)
    return res.objective - fstar


def convergence_iteration(g: np.ndarray, lag: int = 5, level: float = 0.05) -> int | None:
    """The notebook's test: first t with gap(t) not significantly above gap(t + lag)."""
    warnings.filterwarnings("ignore", "Precision loss", RuntimeWarning)  # σ = 0 runs: nearly equal gaps
    for t in range(g.shape[1] - lag):
        a, b = g[:, t], g[:, t + lag]
        equal = stats.levene(a, b).pvalue > 0.2
        p = stats.ttest_ind(a, b, equal_var=equal).pvalue
        if p / 2 > level:
            return t
    return None


def pvalues(final: list[np.ndarray]) -> np.ndarray:
    k = len(final)
    out = np.ones((k, k))
    for i in range(k):
        for j in range(k):
            if i != j:
                equal = stats.levene(final[i], final[j]).pvalue > 0.05
                out[i, j] = stats.ttest_ind(final[i], final[j], equal_var=equal).pvalue
    return out


def table1(args, rng) -> tuple[list[dict], dict]:
    rows, curves = [], {}
    for mu, beta, eta_p, l_p, conv_p in ROWS:
        nu = 2 * mu  # f_i = (⟨a_i, x⟩ − b_i)² with ‖a_i‖² = μ is 2μ-smooth; the paper takes μ_f = ν
        lo, hi = step_interval(nu, nu, 2 * C2, beta)
        eta = step_midpoint(nu, nu, 2 * C2, beta)
        row = {"mu": mu, "beta": beta, "c2": C2, "c1": C1, "eta_interval": [lo, hi], "eta": eta,
               "contraction": contraction(eta, nu, nu, 2 * C2, beta), "contraction_at_printed_eta": contraction_at(eta_p, nu, nu, beta),
               "paper_eta": eta_p, "paper_contraction": l_p, "paper_iterations": conv_p, "convex_C": convex_constant(eta, beta),
               "eta_le_1_over_nu": eta <= 1 / nu}
        for label, data, sigma in (("spec", elastic_net_data(mu, seed=args.seed), args.sigma),
                                   ("notebook", notebook_data(mu), args.sigma)):
            g = gaps(data, eta=eta, beta=beta, sigma=sigma, runs=args.runs, iterations=args.iterations, rng=rng)
            row[f"iterations_{label}"] = convergence_iteration(g)
            row[f"gap100_{label}"] = float(g[:, -1].mean())
            curves[f"{label} L={row['contraction']:.4f}"] = g.mean(axis=0)
        if mu == 0.01:  # the notebook ran its row 4 without noise
            g = gaps(notebook_data(mu), eta=eta, beta=beta, sigma=0.0, runs=args.runs, iterations=args.iterations, rng=rng)
            row["iterations_notebook_sigma0"] = convergence_iteration(g)
        rows.append(row)
    return rows, curves


def noise_study(args, rng) -> tuple[dict, dict]:
    mu, beta = ROWS[0][:2]
    nu = 2 * mu
    eta = step_midpoint(nu, nu, 2 * C2, beta)
    data = elastic_net_data(mu, seed=args.seed)
    finals, curves = [], {}
    for s in SIGMAS:
        g = gaps(data, eta=eta, beta=beta, sigma=s, runs=args.runs, iterations=args.iterations, rng=rng)
        finals.append(g[:, -1])
        curves[f"sigma={s}"] = g.mean(axis=0)
    p = pvalues(finals)
    return {"sigmas": SIGMAS, "eta": eta, "contraction": contraction(eta, nu, nu, 2 * C2, beta), "pvalues": p,
            "paper_pvalues": PAPER_TABLE2, "mean_gap_100": [float(f.mean()) for f in finals],
            "std_gap_100": [float(f.std(ddof=1)) for f in finals]}, curves


def audits(args) -> dict:
    out = {}
    beta, sigma = 0.9, 0.1
    # (a) the paper's own experiment (row 1): Cor. 6.2 is what holds (a rank-one f_i is not strongly convex)
    p = elastic_net_data(0.25, seed=args.seed)
    eta = step_midpoint(0.5, 0.5, 0.2, beta)
    shift = 5 * sigma * (1 + eta * beta) / eta / (2 * math.sqrt(0.25))  # first noisy step moves x̃₁ by 5σ
    t0 = time.perf_counter()
    out["paper_experiment_cor_6_2"] = audit_noisy_admm(p, eta=eta, beta=beta, sigma=sigma, iterations=args.audit_iterations,
                                                       target_shift=shift, runs=args.audit_runs, seed=args.seed)
    out["paper_experiment_cor_6_2"]["seconds"] = time.perf_counter() - t0
    # the release attack against the number of iterations: how fast the first user's trace fades
    out["release_by_iterations"] = []
    for k in (1, 3, 11, 51, 201):
        a = audit_noisy_admm(p, eta=eta, beta=beta, sigma=sigma, iterations=k, target_shift=shift, runs=args.audit_runs, seed=args.seed)
        out["release_by_iterations"].append({"iterations": k, "claim_epsilon": a["claim"]["epsilon"], "claim_source": a["claim"]["source"],
                                             "release_lower_bound": a["release"]["epsilon_lower_bound"],
                                             "release_tpr": a["release"]["tpr"], "release_fpr": a["release"]["fpr"]})
    # (b) the ridge split into f (Assumption 7.1 holds): Cor. 7.3 with 201 iterations
    q = elastic_net_data(0.25, seed=args.seed, ridge_in_f=C2 / 2)
    eta_q = step_midpoint(q.smoothness(), q.strong_convexity(), q.strong_convexity_g(), beta)
    shift_q = 5 * sigma * (1 + eta_q * beta) / eta_q / (2 * math.sqrt(0.25))
    out["ridge_split_cor_7_3"] = audit_noisy_admm(q, eta=eta_q, beta=beta, sigma=sigma, iterations=201, target_shift=shift_q,
                                                  runs=args.audit_runs, seed=args.seed)
    # (c) power flow: E inner steps released as the mean (powerdp) or the last iterate, one round
    out["inner_steps"] = {f"E={e}": audit_inner_steps(steps=e, eta=0.95, rho=100.0, noise_multiplier=1.0, runs=20000, seed=args.seed)
                          for e in (1, 5)}
    return out


def plot(curves1: dict, curves2: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for k, v in curves1.items():
        if k.startswith("spec"):
            ax[0].semilogy(np.maximum(v[:31], 1e-6), label=k.replace("spec L=", "L = "))
    ax[0].set(xlabel="iteration t", ylabel="average optimality gap", title="(a) four (μ, β) rows, σ = 0.01")
    for k, v in curves2.items():
        ax[1].semilogy(np.maximum(v, 1e-6), label=k.replace("sigma=", "σ = "))
    ax[1].set(xlabel="iteration t", title="(b) L = 0.947 (row 1), five noise levels")
    for a in ax:
        a.legend()
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _md(rows: list[dict], noise: dict, audit: dict | None) -> str:
    lines = ["| μ | β | η ours (paper) | 𝔏 ours (paper) | iterations to converge ours: SPEC data / notebook data (paper) |",
             "|---|---|---|---|---|"]
    for r in rows:
        extra = f", σ = 0: {r['iterations_notebook_sigma0']}" if "iterations_notebook_sigma0" in r else ""
        lines.append(f"| {r['mu']} | {r['beta']} | {r['eta']:.3f} ({r['paper_eta']:.2f}) | {r['contraction']:.4f} ({r['paper_contraction']:.2f}) | "
                     f"{r['iterations_spec']} / {r['iterations_notebook']}{extra} ({r['paper_iterations']}) |")
    lines += ["", "p-values at iteration 100, ours (paper):", "",
              "| σ | " + " | ".join(str(s) for s in noise["sigmas"]) + " |", "|---" * (len(noise["sigmas"]) + 1) + "|"]
    for i, s in enumerate(noise["sigmas"]):
        cells = [f"{noise['pvalues'][i][j]:.2g} ({noise['paper_pvalues'][i][j]:.2g})" for j in range(len(noise["sigmas"]))]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines += ["", "mean gap at iteration 100: " + ", ".join(f"σ = {s}: {m:.4g}" for s, m in zip(noise["sigmas"], noise["mean_gap_100"]))]
    if audit:
        lines += ["", "| audit | claim (source) | ε lower bound, release | ε lower bound, every iterate |", "|---|---|---|---|"]
        for name in ("paper_experiment_cor_6_2", "ridge_split_cor_7_3"):
            a = audit[name]
            lines.append(f"| {name} (K = {a['settings']['iterations']}, {a['settings']['runs_per_dataset']} runs each) | "
                         f"ε = {a['claim']['epsilon']:.3f} at δ = {a['claim']['delta']:g} ({a['claim']['source']}) | "
                         f"{a['release']['epsilon_lower_bound']:.3f} | {a['every_iterate']['epsilon_lower_bound']:.3f} |")
        lines += ["", "| iterations K | claim ε (source) | ε lower bound, release |", "|---|---|---|"]
        for a in audit["release_by_iterations"]:
            lines.append(f"| {a['iterations']} | {a['claim_epsilon']:.3f} ({a['claim_source']}) | {a['release_lower_bound']:.3f} |")
        lines += ["", "| inner steps (δ = 0.01) | exact ε, mean release | exact ε, last iterate | one-step claim | attack, mean | attack, last |",
                  "|---|---|---|---|---|---|"]
        for name, a in audit["inner_steps"].items():
            lines.append(f"| {name} | {a['mean']['exact_epsilon']:.3f} | {a['last']['exact_epsilon']:.3f} | {a['hidden_steps_claim_epsilon']:.3f} | "
                         f"{a['mean']['attack']['epsilon_lower_bound']:.3f} | {a['last']['attack']['epsilon_lower_bound']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("docs/results"))
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--sigma", type=float, default=0.01, help="noise of the Table 1 runs (the notebook's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-audit", action="store_true")
    ap.add_argument("--audit-runs", type=int, default=2000, help="seeded runs per dataset of each audit")
    ap.add_argument("--audit-iterations", type=int, default=5001, help="iterations of the Cor. 6.2 audit (2T + 1)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    rows, curves1 = table1(args, rng)
    noise, curves2 = noise_study(args, rng)
    audit = None if args.skip_audit else audits(args)
    with open(args.out / "amplification_table1.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=[k for k in rows[-1] if k != "eta_interval"] + ["eta_lower", "eta_upper"])
        w.writeheader()
        for r in rows:
            w.writerow({**{k: v for k, v in r.items() if k != "eta_interval"}, "eta_lower": r["eta_interval"][0], "eta_upper": r["eta_interval"][1]})
    with open(args.out / "amplification_noise.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["sigma_i", "sigma_j", "p_value", "paper_p_value"])
        for i, si in enumerate(SIGMAS):
            for j, sj in enumerate(SIGMAS):
                w.writerow([si, sj, noise["pvalues"][i][j], PAPER_TABLE2[i][j]])
    plot(curves1, curves2, args.out / "amplification_convergence.png")
    if audit is not None:
        (args.out / "amplification_audit.json").write_text(json.dumps(jsonable(audit), indent=2) + "\n")
    summary = {"table1": rows, "noise": noise, "audit": audit, "seconds": time.perf_counter() - t0,
               "command": "nice python benchmarks/amplification.py" + (" --skip-audit" if args.skip_audit else "")}
    (args.out / "amplification.json").write_text(json.dumps(jsonable(summary), indent=2) + "\n")
    md = _md(rows, noise, audit)
    (args.out / "amplification_tables.md").write_text(md)
    print(md)
    print(f"{summary['seconds']:.1f} s")


if __name__ == "__main__":
    main()
