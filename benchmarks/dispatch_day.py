"""A day of multi-period dispatch (issue 30): parity with the centralized SOC OPF per period, warm against cold
starts, time and memory per period, and the private day at a total ε per zone (docs/multi_period.md).

    python benchmarks/dispatch_day.py nonprivate                     # SimBench 1-HV-mixed--0-sw, 96 periods, 4 zones
    python benchmarks/dispatch_day.py nonprivate --cold-periods 24   # cold starts measured on the first 24 periods
    python benchmarks/dispatch_day.py nonprivate --periods 8 --no-cold
    python benchmarks/dispatch_day.py private --epsilon 1 --table docs/results/dispatch_table.md
    python benchmarks/dispatch_day.py nonprivate --source simbench:1-EHV-mixed--0-sw --periods 4 --no-cold

Prints one JSON document. ``nonprivate``: the warm-started run (its per-period relative cost gap to the centralized
SOC OPF of the period) and, unless --no-cold, the same horizon (or its first --cold-periods periods) cold-started
(every period from the flat start), the ratio of their mean rounds over periods 1..N-1 of the cold run's N (period 0
starts cold in both) and over all N, and per period the dispatch's own wall and CPU time (this process; with the serial
backend the zones' solves included) split into the zones' steps and the coordinator, the simulation's evaluation
(every round's diagnostics, the centralized reference) apart, the load average, and the peak memory. ``private``: each
of --algorithms at the total budget under --relation (user-level by default): per period the run's own cost gap and
MW shed, the implemented dispatch's (each zone's true loads, its tie-line flows held at the agreed values) AC cost
gap to the period's centralized dispatch evaluated the same way, its MW shed and whether the operator's AC
evaluation converged (docs/operating_point.md), and the ledger's total per zone against the claim. A Laplace
algorithm takes --delta too when it can use one (the exact privacy-loss distribution); --pure keeps it pure ε. Runs
serially (one process), gentle on a shared machine.

    python benchmarks/dispatch_day.py private --relation event --algorithms exact,totl,inpl,inpg,objg --table T.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np
import pandas as pd


def _progress(name):
    def show(row):  # one line per period on stderr (a long day shows where it is)
        if "period_done" in row:
            gap = row.get("relative_cost_gap")
            print(f"{name} period {row['period']}: {row['rounds']} rounds ({row['stopped']}), gap "
                  f"{'n/a' if gap is None else f'{gap:.2e}'}, shed {row['shedding_mw']:.3f} MW, {row['cpu_s']:.2f} s CPU",
                  file=sys.stderr, flush=True)
    return show


def _run(cfg, horizon, reference=True):
    from powerdp.apps.dispatch.runner import run_dispatch

    c0, t0 = time.process_time(), time.perf_counter()
    name = cfg.algorithm + (" cold" if cfg.cold_start else "")
    res = run_dispatch(cfg, horizon, reference=reference, progress=_progress(name))
    return res, time.process_time() - c0, time.perf_counter() - t0


def _periods(res, columns):
    frame = res.periods
    def value(v):
        if v is None or isinstance(v, str):
            return v
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        return float(v)

    return [{c: value(frame[c].iloc[i]) for c in columns if c in frame} for i in range(len(frame))]


def nonprivate(args, horizon):
    from powerdp.apps.dispatch.config import DispatchConfig

    cfg = DispatchConfig(source=args.source, periods=args.periods, zones=args.zones, algorithm=args.algorithm,
                         max_rounds=args.max_rounds, backend=args.backend, seed=0,
                         **({} if args.tolerance is None else {"tolerance": args.tolerance}))
    load0 = os.getloadavg()
    warm, cpu, wall = _run(cfg, horizon)
    p = warm.periods
    out = {
        "algorithm": args.algorithm,
        "warm": {
            "mean_rounds": float(warm.periods["rounds"].mean()),
            "mean_rounds_after_first": float(warm.periods["rounds"][1:].mean()) if len(warm.periods) > 1 else None,
            "max_relative_cost_gap": warm.summary["max_relative_cost_gap"],
            "periods_within_1e-3": int((warm.periods["relative_cost_gap"].astype(float) <= 1e-3).sum()),
            "periods_capped": int((warm.periods["stopped"] == "rounds").sum()),
            "tolerance": cfg.tolerance,
            # the dispatch's own time per period (the zones' data and steps, the coordinator), the evaluation apart
            "wall_s_per_period": float(p["wall_s"].mean()), "wall_s_max": float(p["wall_s"].max()),
            "cpu_s_per_period": float(p["cpu_s"].mean()),
            "zones_s_per_period": float(p["zones_s"].mean()), "coordinator_s_per_period": float(p["coordinator_s"].mean()),
            "evaluation_s_per_period": float(p["evaluation_s"].mean()),
            "evaluation_cpu_s_per_period": float(p["evaluation_cpu_s"].mean()),
            "cpu_s_total_with_reference": cpu, "wall_s_total_with_reference": wall,
            "setup_s": warm.summary["setup_s"], "load_average_before": load0, "load_average_after": os.getloadavg(),
            "periods": _periods(warm, ["period", "rounds", "stopped", "cost", "centralized_cost", "relative_cost_gap",
                                       "shedding_mw", "import_mw", "curtailment_mw", "wall_s", "cpu_s", "zones_s",
                                       "coordinator_s", "evaluation_s"]),
        },
    }
    if not args.no_cold:
        n = min(args.cold_periods or args.periods, args.periods)
        sub = horizon if n == args.periods else _first(horizon, n)
        cold, ccpu, cwall = _run(cfg.replace(cold_start=True, periods=n), sub, reference=False)
        wr = warm.periods["rounds"][:n]
        out["warm"]["mean_rounds_first_n"] = float(wr.mean())
        out["warm"]["mean_rounds_first_n_after_first"] = float(wr[1:].mean()) if n > 1 else None
        out["cold"] = {
            "periods": n, "load_average_after": os.getloadavg(),
            "mean_rounds": float(cold.periods["rounds"].mean()),
            "mean_rounds_after_first": float(cold.periods["rounds"][1:].mean()) if len(cold.periods) > 1 else None,
            "periods_capped": int((cold.periods["stopped"] == "rounds").sum()),
            "wall_s_per_period": float(cold.periods["wall_s"].mean()),
            "cpu_s_per_period": float(cold.periods["cpu_s"].mean()),
            "rounds": [int(r) for r in cold.periods["rounds"]],
        }
        w, c = out["warm"]["mean_rounds_first_n_after_first"], out["cold"]["mean_rounds_after_first"]
        out["warm_over_cold_rounds"] = (w / c) if (w is not None and c) else None  # periods 1..n-1
        out["warm_over_cold_rounds_all"] = out["warm"]["mean_rounds_first_n"] / out["cold"]["mean_rounds"]
    return out


def _first(horizon, n):
    """The first ``n`` periods of ``horizon``."""
    from dataclasses import replace

    return replace(horizon, pd=horizon.pd[:n], qd=horizon.qd[:n], gen_pmax=horizon.gen_pmax[:n],
                   load_p=horizon.load_p[:n], load_q=horizon.load_q[:n], labels=horizon.labels[:n],
                   curtailment_offset=horizon.curtailment_offset[:n])


def private(args, horizon):
    """Each run of --algorithms (ALGORITHM or ALGORITHM+clip: the perturbed loads clipped to their public ratings),
    user-level, at the total budget; the first run's centralized references serve the others (no ramp: the same)."""
    from powerdp.apps.dispatch.config import DispatchConfig, relation_text
    from powerdp.engine.consensus.algorithms import resolve
    from powerdp.engine.consensus.perturbations import PERTURBATIONS

    out = {"target_epsilon": args.epsilon, "target_delta": args.delta, "relation": args.relation, "beta": args.beta, "runs": {}}
    rows = {}
    central = ref_ac = None
    for label in args.algorithms.split(","):
        algorithm, _, option = label.partition("+")
        cfg0 = DispatchConfig(source=args.source, periods=args.periods, algorithm=algorithm)
        budget = args.epsilon if cfg0.private else None
        exact_loss = cfg0.private and PERTURBATIONS[resolve(algorithm).perturbation].exact_privacy_loss
        delta = args.delta if (cfg0.private and (cfg0.gaussian or (exact_loss and not args.pure))) else None
        cfg = DispatchConfig(source=args.source, periods=args.periods, zones=args.zones, algorithm=algorithm,
                             relation=args.relation,
                             target_epsilon=budget, target_delta=delta, beta=args.beta, clip_loads=option == "clip",
                             max_rounds=args.max_rounds, backend=args.backend,
                             **({} if args.tolerance is None else {"tolerance": args.tolerance}), seed=args.seed,
                             local_solver=args.local_solver)
        if cfg.private:  # the neighbouring relation, printed and recorded (relation_text in the JSON)
            print(f"{label}: {relation_text(cfg.relation, cfg.beta, cfg.periods)}", file=sys.stderr, flush=True)
        res, cpu, wall = _run(cfg, horizon, reference=central is None)  # the centralized OPF once (no ramp: the same)
        if central is None:
            central = res.periods["centralized_cost"].astype(float).to_numpy()
            ref_ac = (res.periods["implemented_reference_cost"].astype(float).to_numpy()
                      if "implemented_reference_cost" in res.periods else None)
        else:
            res.periods["centralized_cost"] = central
            res.periods["relative_cost_gap"] = np.abs(res.periods["cost"].to_numpy() - central) / np.abs(central)
            res.summary["max_relative_cost_gap"] = float(res.periods["relative_cost_gap"].max())
            if ref_ac is not None and "implemented_cost" in res.periods:  # the operator's reference: the first run's
                res.periods["implemented_relative_cost_gap"] = (res.periods["implemented_cost"].astype(float) - ref_ac) / np.abs(ref_ac)
        s = res.summary
        frame = res.periods
        implemented = {}
        if "implemented_relative_cost_gap" in frame:
            gaps = pd.to_numeric(frame["implemented_relative_cost_gap"], errors="coerce")
            share = frame["implemented_shedding_mw"] / frame["load_mw"]
            implemented = {
                "max_relative_cost_gap": float(gaps.abs().max()), "median_relative_cost_gap": float(gaps.median()),
                "periods_within_2_percent": int((gaps.abs() <= 0.02).sum()),
                "max_shedding_fraction": float(share.max()), "periods_shedding_within_1_percent": int((share <= 0.01).sum()),
                "mean_shedding_mw": float(frame["implemented_shedding_mw"].mean()),
                "ac_converged_periods": int(frame["implemented_ac_converged"].fillna(False).astype(bool).sum()),
                "max_voltage_violation_pu": float(pd.to_numeric(frame["implemented_max_voltage_violation_pu"]).max()),
                "max_q_violation_mvar": float(pd.to_numeric(frame["implemented_max_q_violation_mvar"]).max()),
                "max_exchange_deviation_mw": float(pd.to_numeric(frame.get("implemented_exchange_deviation_mw"), errors="coerce").max()),
                "restorations": {str(k): int(v) for k, v in frame["implemented_restoration"].value_counts().items()},
            }
        claim = args.epsilon
        out["runs"][label] = {
            "relation_text": s["relation_text"], "target_delta": delta,
            "epsilon_total": s["epsilon_total"], "epsilon_claim": s["epsilon_claim"],
            "ledger_equals_claim": (abs(s["epsilon_claim"] - claim) <= 1e-3 * claim if budget else None),
            "implemented": implemented,
            "max_relative_cost_gap": s["max_relative_cost_gap"],
            "median_relative_cost_gap": float(res.periods["relative_cost_gap"].astype(float).median()),
            "total_shedding_mwh": s["total_shedding_mwh"], "mean_shedding_mw": float(res.periods["shedding_mw"].mean()),
            "local_failures": int(res.periods["local_failures"].sum()), "mean_rounds": s["mean_rounds"],
            "cpu_s": cpu, "wall_s": wall,
            "periods": _periods(res, ["period", "rounds", "cost", "centralized_cost", "relative_cost_gap", "shedding_mw",
                                      "load_mw", "epsilon_spent", "local_failures", "implemented_relative_cost_gap",
                                      "implemented_shedding_mw", "implemented_ac_converged", "implemented_restoration",
                                      "implemented_max_voltage_violation_pu", "implemented_max_q_violation_mvar",
                                      "implemented_exchange_deviation_mw", "implemented_tie_deviation_mw"]),
        }
        rows[label] = res.periods
    if args.table:
        _table(args, rows)
    return out


def _table(args, rows) -> None:
    if all("implemented_relative_cost_gap" in f for f in rows.values()):
        return _implemented_table(args, rows)
    return _own_table(args, rows)


def _implemented_table(args, rows) -> None:
    """The per-period table of the implemented dispatch (markdown): per run the implemented dispatch's AC cost gap to the
    period's centralized dispatch evaluated the same way and its MW shed, beside the run's own MW shed; a summary row."""
    head = "| period | load (MW) | " + " | ".join(f"{a} implemented gap | {a} implemented shed (MW) | {a} own shed (MW)"
                                                for a in rows) + " |"
    lines = [head, "|" + "---|" * (2 + 3 * len(rows))]
    base = next(iter(rows.values()))
    for i in range(len(base)):
        cells = [str(int(base["period"].iloc[i])), f"{base['load_mw'].iloc[i]:.1f}"]
        for frame in rows.values():
            gap = pd.to_numeric(frame["implemented_relative_cost_gap"], errors="coerce").iloc[i]
            cells += [f"{gap:+.2e}" if np.isfinite(gap) else "n/a", f"{frame['implemented_shedding_mw'].iloc[i]:.2f}",
                      f"{frame['shedding_mw'].iloc[i]:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    cells = ["**day**", f"{base['load_mw'].mean():.1f} (mean)"]
    for frame in rows.values():
        gaps = pd.to_numeric(frame["implemented_relative_cost_gap"], errors="coerce")
        cells += [f"median {gaps.median():+.2e}, worst {gaps.abs().max():.2e}", f"{frame['implemented_shedding_mw'].max():.2f} (max)",
                  f"{frame['shedding_mw'].mean():.1f} (mean)"]
    lines.append("| " + " | ".join(cells) + " |")
    with open(args.table, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def _own_table(args, rows) -> None:
    """The per-period table of docs/results/dispatch.md (markdown): per run the cost, the relative gap to the
    centralized cost, the MW shed and the ε spent so far (the ledger, the largest over the zones); a summary row."""
    head = "| period | load (MW) | centralized cost ($/h) | " + " | ".join(
        f"{a} cost | {a} gap | {a} shed (MW) | {a} ε spent" for a in rows) + " |"
    lines = [head, "|" + "---|" * (3 + 4 * len(rows))]
    base = next(iter(rows.values()))
    for i in range(len(base)):
        cells = [str(int(base["period"].iloc[i])), f"{base['load_mw'].iloc[i]:.1f}", f"{float(base['centralized_cost'].iloc[i]):.4g}"]
        for frame in rows.values():
            gap = frame["relative_cost_gap"].iloc[i]
            fails = int(frame["local_failures"].iloc[i]) if "local_failures" in frame else 0
            cells += [f"{float(frame['cost'].iloc[i]):.4g}", (f"{float(gap):.2e}" if gap is not None else "n/a"),
                      f"{frame['shedding_mw'].iloc[i]:.1f}" + (f" ({fails} failed solves)" if fails else ""),
                      f"{float(frame['epsilon_spent'].iloc[i]):.4f}"]
        lines.append("| " + " | ".join(cells) + " |")
    cells = ["**day**", f"{base['load_mw'].mean():.1f} (mean)", f"{base['centralized_cost'].astype(float).sum():.4g} (sum)"]
    for frame in rows.values():
        gaps = frame["relative_cost_gap"].astype(float)
        cells += [f"{frame['cost'].sum():.4g} (sum)", f"median {gaps.median():.2e}, max {gaps.max():.2e}",
                  f"{frame['shedding_mw'].mean():.1f} (mean)", f"{float(frame['epsilon_spent'].iloc[-1]):.4f} (total)"]
    lines.append("| " + " | ".join(cells) + " |")
    with open(args.table, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("nonprivate", "private"))
    ap.add_argument("--source", default="simbench:1-HV-mixed--0-sw")
    ap.add_argument("--periods", type=int, default=96)
    ap.add_argument("--zones", type=int, default=4)
    ap.add_argument("--algorithm", default="nonprivate", help="the non-private algorithm (nonprivate mode): nonprivate or exact")
    ap.add_argument("--max-rounds", type=int, default=100)
    ap.add_argument("--tolerance", type=float, help="the stopping tolerance on the relative residuals (default: "
                    "DispatchConfig's)")
    ap.add_argument("--cold-periods", type=int, help="nonprivate mode: cold-start only the first N periods (default all)")
    ap.add_argument("--backend", default="serial")
    ap.add_argument("--local-solver", default="clarabel")
    ap.add_argument("--epsilon", type=float, default=1.0, help="private mode: the total epsilon per zone over the horizon")
    ap.add_argument("--delta", type=float, default=1e-5, help="private mode: the total delta per zone (Gaussian algorithms)")
    ap.add_argument("--beta", type=float, default=0.01, help="private mode: how far a neighbouring load moves (p.u.)")
    ap.add_argument("--relation", choices=("user", "event"), default="user", help="private mode: the neighbouring relation")
    ap.add_argument("--pure", action="store_true", help="private mode: Laplace algorithms at pure epsilon even with --delta")
    ap.add_argument("--algorithms", default="exact,objl,inpl,exact/input/laplace",
                    help="private mode: the runs, the non-private reference first; ALGORITHM+clip clips the perturbed loads "
                    "to their public ratings (--clip-loads)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--table", help="private mode: write the per-period table (markdown) here")
    ap.add_argument("--sn-mva", type=float, help="the per-unit base of the SimBench grid (load_horizon's base_mva; "
                    "default 100 MVA: SimBench's own 1 MVA scales loads to ~100 p.u. and the import bounds to ~2000 p.u.)")
    args = ap.parse_args(argv)
    from powerdp.grid.profiles import load_horizon

    t0, c0 = time.perf_counter(), time.process_time()
    horizon = load_horizon(args.source, periods=args.periods, base_mva=args.sn_mva)
    doc = {"source": args.source, "sn_mva": args.sn_mva, "base_mva": float(horizon.network.base_mva), "periods": args.periods, "zones": args.zones, "max_rounds": args.max_rounds,
           "tolerance": args.tolerance, "backend": args.backend, "buses": int(horizon.network.n_bus),
           "generators": int(horizon.network.n_gen), "load_s": time.perf_counter() - t0, "load_cpu_s": time.process_time() - c0}
    doc.update(nonprivate(args, horizon) if args.mode == "nonprivate" else private(args, horizon))
    doc["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    json.dump(doc, sys.stdout, indent=2, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
