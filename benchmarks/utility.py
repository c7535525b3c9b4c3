"""Utility of the product defaults on case118 (3 published zones), as the acceptance of the
paper-coordinates issue measures it.

* nonprivate with the paper's settings (ρ = 100, η_t = 1/√t, T = 100, E = 1);
* objl, ε = 0.1 per step, product defaults (sound sensitivities, capped η, E = 1, T = 100):
  final objective and feasibility, median of 3 seeds, and the worst W_p violation of a release;
  the same with noise on every entry of z (--noise-on all, as the paper draws it);
* outl / outg at ε = 0.1 (sound sensitivities): how far their releases fall outside W_p.

    python benchmarks/utility.py --json utility.json

``budget`` mode (the privacy-budget issue): every mechanism at the same *total* ε per zone for the
whole run, product defaults (T = 100, E = 1, capped η, sound sensitivities), 3 seeds, next to the
floor n·(β/ε)² (docs/privacy.md). Two sweeps: pure ε-DP (δ = 0: objl, outl, inpl) and δ = 1e-5
(objg, outg, inpg, and objl, inpl calibrated with the exact Laplace PLD). They are ``powerdp sweep``
runs with ``target_epsilons``, so ``powerdp plot OUT/pure`` (or ``OUT/delta``) draws the figure
against the total budget:

    python benchmarks/utility.py budget --out budget_sweep --jobs 2

``implemented`` mode (issue 37): the dispatch an operator would apply at the end of a private run, every mechanism at
a total ε per zone of 0.1, 1 and 10 (δ = 1e-5; the Laplace ones also at δ = 0), seeds 0-2, Clarabel local solves,
``cost+shedding``, on case118 (3 published zones), PGLib's case118 (3 zones, rated lines) and case14 (2 zones). Each
run's zones re-solve with their true loads, their tie-line flows held at the agreed values, and the run evaluates
that dispatch and the centralized SOC dispatch as an operator would (pandapower's AC power flow on the true loads,
restored when a limit breaks; docs/operating_point.md): the implemented dispatch's AC cost gap, shedding, AC
convergence, line loading, voltage and reactive violations, beside the centralized dispatch's. Every (case, δ,
family) is a ``powerdp sweep`` directory with ``operator_evaluation``, so ``powerdp plot OUT/CASE/DELTA/FAMILY``
draws its figures (``implemented_CASE.png``):

    python benchmarks/utility.py implemented --out implemented_sweep --jobs 2 --table docs/results/utility_table.md
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.studies.plots import utility_floor
from powerdp.studies.sweep import SweepSpec, run_sweep

BUDGET_ALGORITHMS = ["objl", "objg", "outl", "outg", "inpl", "inpg"]
NEW_ALGORITHMS = ["totl", "totg", "hrcl", "hrcg",  # the zone totals released once (issue 37), alone or with the bus loads
                  "inps", "tots"]  # ... and the loads or the totals with staircase noise (pure ε; issue 37's floor)
PURE = ["objl", "outl", "inpl", "totl", "hrcl", "inps", "tots"]  # Laplace and the staircase at δ = 0
WITH_DELTA = ["objg", "outg", "inpg", "objl", "inpl", "totg", "hrcg", "totl", "hrcl"]  # δ = 1e-5 (Laplace: exact PLD calibration)
BUDGETS = [0.1, 1.0, 10.0]


def final(cfg: RunConfig) -> dict:
    res = run_distributed(cfg, reference=False)
    s = res.summary
    return {
        "objective": s["final_objective"],
        "feasibility": s["final_feasibility"],
        "max_violation": s["max_violation"],
        "wall_s": s["wall_s"],
    }


def medians(runs: list[dict]) -> dict:
    return {
        "runs": runs,
        "median_objective": statistics.median(r["objective"] for r in runs),
        "median_feasibility": statistics.median(r["feasibility"] for r in runs),
        "max_violation": max(r["max_violation"] for r in runs),
    }


def budget_sweep(args: argparse.Namespace, algorithms: list[str], delta: float | None, out: str):
    base = {"rounds": args.rounds} if delta is None else {"rounds": args.rounds, "target_delta": delta}
    if getattr(args, "shrink_loads", False):  # input perturbation's loads shrunk toward each zone's mean
        base["shrink_loads"] = True
    spec = SweepSpec(
        cases=[args.case], partitions=[{"zones": 3}], algorithms=algorithms, target_epsilons=args.budgets,
        local_updates=[1], seeds=list(range(args.seeds)), base=base, source=f"benchmarks/utility.py budget ({out})",
    )

    def progress(run: str, error: str | None, k: int, n: int) -> None:
        print(f"[{k}/{n}] {run}" + (f"  FAILED: {error}" if error else ""), file=sys.stderr, flush=True)

    runs = run_sweep(spec, out, jobs=args.jobs, progress=progress)
    return runs.assign(delta=0.0 if delta is None else delta)


def budget_table(args: argparse.Namespace) -> None:
    import pandas as pd

    pure = [a for a in args.algorithms if a in PURE]
    with_delta = [a for a in args.algorithms if a in WITH_DELTA]
    parts = []
    if pure:
        parts.append(budget_sweep(args, pure, None, f"{args.out}/pure"))
    if with_delta:
        parts.append(budget_sweep(args, with_delta, 1e-5, f"{args.out}/delta"))
    runs = pd.concat(parts, ignore_index=True)
    rows = []
    for (alg, delta, te), g in runs.groupby(["algorithm", "delta", "target_epsilon"], sort=False):
        n = g["load_values"].iloc[0]
        if pd.isna(n):  # runs made before summaries recorded it
            from powerdp.grid.loading import load_case

            n = 2 * load_case(args.case).n_bus
        floor = float(utility_floor(n, g["beta"].iloc[0], te))
        rows.append({
            "algorithm": alg, "delta": delta, "total_epsilon": te, "floor": floor,
            "median_objective": float(g["final_objective"].median()),
            # the implemented dispatch's F (each zone's true loads, its tie-line flows held at the agreed values)
            "median_implemented_objective": (float(g["implemented_objective"].median())
                                             if "implemented_objective" in g and g["implemented_objective"].notna().any() else None),
            "median_feasibility": float(g["final_feasibility"].median()),
            "max_violation": float(g["max_violation"].max()),
            "epsilon_total_max": float(g["epsilon_total"].max()),
            "objectives": [float(v) for v in g.sort_values("seed")["final_objective"]],
        })
    print(f"\n{args.case}, 3 zones, T = {args.rounds}, E = 1, product defaults, {args.seeds} seeds (median)")
    print(f"{'total ε':>8} {'δ':>6} {'algorithm':>9} {'objective F':>12} {'floor n(β/ε)²':>14} {'F/floor':>8} {'feasibility':>12} "
          f"{'ε spent':>8} {'implemented F':>14} {'impl./floor':>11}")
    order = {a: k for k, a in enumerate(BUDGET_ALGORITHMS + NEW_ALGORITHMS)}
    for r in sorted(rows, key=lambda r: (r["total_epsilon"], r["delta"], order.get(r["algorithm"], 99))):
        imp = r["median_implemented_objective"]
        imp_txt = f"{imp:>14.4g} {imp / r['floor']:>11.3g}" if imp is not None else f"{'—':>14} {'—':>11}"
        print(f"{r['total_epsilon']:>8g} {r['delta']:>6g} {r['algorithm']:>9} {r['median_objective']:>12.4g} {r['floor']:>14.3g} "
              f"{r['median_objective'] / r['floor']:>8.3g} {r['median_feasibility']:>12.3g} {r['epsilon_total_max']:>8.4g} {imp_txt}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


IMPLEMENTED_CASES = {  # name → (case, partition); PGLib's case118 is found in ../shared/data
    "case118": ("case118", {"zones": 3}),
    "pglib_case118": (None, {"zones": 3}),
    "case14": ("case14", {"zones": 2}),
}
#: (family, algorithms, extra [run] fields): output perturbation needs all of f_p linearized (its sensitivity bounds
#: the proximal step on every entry), the others keep the generation cost exact
FAMILIES = [
    ("objective", ["objl", "objg"], {}),
    ("input", ["inpl", "inpg", "inps"], {}),
    ("totals", ["totl", "totg", "tots"], {}),
    ("hierarchical", ["hrcl", "hrcg"], {}),
    ("output", ["outl", "outg"], {"linearize": "all"}),
]
LAPLACE = {"objl", "inpl", "totl", "hrcl", "outl", "inps", "tots"}  # pure ε (the staircase too)
#: one release per run: their exact-PLD calibration at δ = 1e-5 gives the pure-ε noise (the per-step ε is the total), so
#: their δ = 0 runs would repeat the δ = 1e-5 ones draw for draw; they run at δ = 0 only when no δ > 0 is asked
ONE_RELEASE = {"inpl", "totl", "hrcl", "inps", "tots"}
OUTPUT_DELTA_FREE = {"outl"}  # Laplace output perturbation is pure ε only (docs/privacy.md)


def implemented_sweeps(args: argparse.Namespace):
    """Every (case, δ, family) sweep of ``implemented`` mode; yields (case name, δ, its runs table)."""
    import pandas as pd

    chosen = sorted((f for f in FAMILIES if f[0] in args.families), key=lambda f: args.families.index(f[0]))
    for family, algorithms, extra in chosen:  # family by family: the ones asked first are complete first
        for name in args.cases:
            case, part = IMPLEMENTED_CASES[name]
            if case is None:
                sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
                from tests.shared_data import benchmark_file

                case = str(benchmark_file("pglib", "pglib_opf_case118_ieee.m", checks="the implemented dispatch on rated lines"))
            for delta in args.deltas:
                algs = [a for a in algorithms if a in args.algorithms and (delta > 0 or a in LAPLACE)]
                algs = [a for a in algs if not (delta > 0 and a in OUTPUT_DELTA_FREE)]
                if delta == 0 and any(d > 0 for d in args.deltas):
                    algs = [a for a in algs if a not in ONE_RELEASE]
                if not algs:
                    continue
                base = {"objective": "cost+shedding", "rounds": args.rounds, "local_solver": args.local_solver, **extra}
                if delta > 0:
                    base["target_delta"] = delta
                out = f"{args.out}/{name}/{'delta' if delta > 0 else 'pure'}/{family}"
                spec = SweepSpec(cases=[case], partitions=[part], algorithms=algs, target_epsilons=args.budgets,
                                 local_updates=[1], seeds=list(range(args.seeds)), base=base, operator_evaluation=True,
                                 source=f"benchmarks/utility.py implemented ({out})")

                def progress(run: str, error: str | None, k: int, n: int, out=out) -> None:
                    print(f"[{k}/{n}] {out}: {run}" + (f"  FAILED: {error}" if error else ""), file=sys.stderr, flush=True)

                runs = run_sweep(spec, out, jobs=args.jobs, progress=progress)
                yield name, delta, runs.assign(case_name=name, delta=delta) if len(runs) else pd.DataFrame()


def implemented_rows(runs) -> list[dict]:
    """One row per (case, δ, total ε, algorithm): the seeds' implemented dispatch and reference figures."""
    rows = []
    for (case, delta, te, alg), g in runs.groupby(["case_name", "delta", "target_epsilon", "algorithm"], sort=False):
        gaps = g["implemented_relative_cost_gap"].astype(float)
        rows.append({
            "case": case, "delta": delta, "total_epsilon": te, "algorithm": alg, "seeds": int(len(g)),
            "gap_median": float(gaps.median()), "gap_worst": float(gaps.abs().max()),
            "gaps": [float(v) for v in g.sort_values("seed")["implemented_relative_cost_gap"]],
            "shed_max_mw": float(g["implemented_shedding_mw"].max()),
            "ac_converged": int(g["implemented_ac_converged"].fillna(False).astype(bool).sum()),
            "restoration": sorted({str(r) for r in g["implemented_restoration"]}),
            "loading_max": _max(g["implemented_max_line_loading_percent"]),
            "reference_loading": _max(g["reference_max_line_loading_percent"]),
            "v_viol_max": _max(g["implemented_max_voltage_violation_pu"]),
            "reference_v_viol": _max(g["reference_max_voltage_violation_pu"]),
            "q_viol_max": _max(g["implemented_max_q_violation_mvar"]),
            "reference_q_viol": _max(g["reference_max_q_violation_mvar"]),
            "direct_q_viol_max": _max(g["implemented_direct_max_q_violation_mvar"]),
            "reference_direct_q_viol": _max(g["reference_direct_max_q_violation_mvar"]),
            "p_shift_max": _max(g["implemented_max_p_shift_mw"]),
            "run_shed_median_mw": float(g["total_shedding_mw"].median()),
            "epsilon_total_max": float(g["epsilon_total"].max()),
            "wall_s_median": float(g["wall_s"].median()),
        })
    return rows


def _max(values):
    vals = values.astype(float).dropna()
    return float(vals.max()) if len(vals) else None


def _fmt(v, spec=".3g"):
    return "—" if v is None else format(v, spec)


def implemented_markdown(rows: list[dict]) -> str:
    head = ("| case | total ε | δ | algorithm | AC cost gap: median (worst abs.) | shed max (MW) | AC converged | "
            "restoration | line loading max % (ref.) | V viol. max p.u. (ref.) | Q viol. max MVAr (ref.) | direct Q viol. "
            "MVAr (ref.) | the run's own shed (MW, median) |")
    lines = [head, "|" + "---|" * 13]
    order = {a: k for k, a in enumerate(BUDGET_ALGORITHMS + NEW_ALGORITHMS)}
    for r in sorted(rows, key=lambda r: (r["case"], r["total_epsilon"], r["delta"], order.get(r["algorithm"], 99))):
        lines.append(
            f"| {r['case']} | {r['total_epsilon']:g} | {r['delta']:g} | {r['algorithm']} | {r['gap_median']:+.2e} "
            f"({r['gap_worst']:.2e}) | {r['shed_max_mw']:.2f} | {r['ac_converged']}/{r['seeds']} | {', '.join(r['restoration'])} | "
            f"{_fmt(r['loading_max'], '.1f')} ({_fmt(r['reference_loading'], '.1f')}) | {_fmt(r['v_viol_max'], '.4f')} "
            f"({_fmt(r['reference_v_viol'], '.4f')}) | {_fmt(r['q_viol_max'], '.2f')} ({_fmt(r['reference_q_viol'], '.2f')}) | "
            f"{_fmt(r['direct_q_viol_max'], '.1f')} ({_fmt(r['reference_direct_q_viol'], '.1f')}) | {r['run_shed_median_mw']:.1f} |")
    return "\n".join(lines) + "\n"


def implemented_table(args: argparse.Namespace) -> None:
    import pandas as pd

    parts = [runs for _, _, runs in implemented_sweeps(args) if len(runs)]
    runs = pd.concat(parts, ignore_index=True)
    rows = implemented_rows(runs)
    text = implemented_markdown(rows)
    print(text)
    if args.table:
        Path(args.table).write_text(text)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "implemented":
        ap = argparse.ArgumentParser(prog="utility.py implemented", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
        ap.add_argument("--cases", nargs="+", default=list(IMPLEMENTED_CASES), choices=list(IMPLEMENTED_CASES))
        ap.add_argument("--algorithms", nargs="+", default=BUDGET_ALGORITHMS + NEW_ALGORITHMS)
        ap.add_argument("--budgets", nargs="+", type=float, default=BUDGETS)
        ap.add_argument("--deltas", nargs="+", type=float, default=[1e-5, 0.0])
        ap.add_argument("--families", nargs="+", default=[f[0] for f in FAMILIES], choices=[f[0] for f in FAMILIES],
                        help="which families of mechanisms, in this order")
        ap.add_argument("--seeds", type=int, default=3)
        ap.add_argument("--rounds", type=int, default=100)
        ap.add_argument("--local-solver", default="clarabel")
        ap.add_argument("--out", required=True, help="the sweeps' directory (resumable; powerdp plot OUT/CASE/DELTA/FAMILY)")
        ap.add_argument("--jobs", type=int, default=None)
        ap.add_argument("--table", help="write the markdown table here")
        ap.add_argument("--json")
        implemented_table(ap.parse_args(sys.argv[2:]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "budget":
        ap = argparse.ArgumentParser(prog="utility.py budget", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        ap.add_argument("--case", default="case118")
        ap.add_argument("--seeds", type=int, default=3)
        ap.add_argument("--rounds", type=int, default=100)
        ap.add_argument("--algorithms", nargs="+", default=BUDGET_ALGORITHMS + NEW_ALGORITHMS)
        ap.add_argument("--budgets", nargs="+", type=float, default=BUDGETS)
        ap.add_argument("--out", required=True, help="sweep directory (resumable; powerdp plot OUT draws the figure)")
        ap.add_argument("--shrink-loads", action="store_true",
                        help="every run with shrink_loads (input perturbation only: inpl, inpg, inps, exact/input/...)")
        ap.add_argument("--jobs", type=int, default=None)
        ap.add_argument("--json")
        budget_table(ap.parse_args(sys.argv[2:]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    out: dict = {}
    base = RunConfig(case=args.case, zones=3, algorithm="objl", epsilon=0.1, local_updates=1, rounds=100, seed=0)
    out["nonprivate_paper_settings"] = final(base.replace(algorithm="nonprivate", rho=100.0, eta="sqrt"))
    print("nonprivate (rho 100, eta sqrt)", json.dumps(out["nonprivate_paper_settings"]), flush=True)
    for noise_on in ("data", "all"):
        key = f"objl_eps0.1_noise_on_{noise_on}"
        out[key] = medians([final(base.replace(noise_on=noise_on, seed=s)) for s in range(args.seeds)])
        print(key, json.dumps({k: v for k, v in out[key].items() if k != "runs"}), flush=True)
    for alg in ("outl", "outg"):
        out[f"{alg}_eps0.1"] = final(base.replace(algorithm=alg))
        print(alg, json.dumps(out[f"{alg}_eps0.1"]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
