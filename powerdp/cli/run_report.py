"""What ``powerdp run`` prints: the round legend, the progress line of every round, the closing summary."""

from __future__ import annotations

import sys

from ..apps.power_flow.config import RunConfig
from ..opf.local_solver import SOLVERS
from .streams import is_terminal

ROUND_LEGEND = {
    "shedding": "objective Σ_p f_p = shedding Σ(p.u.²)",
    "cost+shedding": "objective Σ_p f_p = generation cost + ω·shedding ($/h)",
    "cost": "objective Σ_p f_p = generation cost ($/h)",
}


def _per_step_text(cfg: RunConfig) -> str:
    """The per-step ε (and δ) the run's zones use: the stated one, or the one calibrated to ``--target-epsilon``
    (the same figure the ledger reports as ``epsilon_per_step``)."""
    budget = cfg.per_step_noise()
    if budget is None:
        eps, delta = cfg.epsilon, (cfg.delta if cfg.mechanism == "gaussian" else 0.0)
    elif cfg.mechanism == "gaussian":
        from ..privacy.mechanisms import GaussianMechanism

        eps, delta = GaussianMechanism.from_noise_multiplier(1.0, budget["noise_multiplier"], cfg.target_delta).per_step()
    else:
        eps, delta = budget["epsilon"], 0.0
    calibrated = "" if budget is None else f", calibrated to the budget ε {cfg.target_epsilon:g}"
    return f"ε {eps:.4g} {_step_unit(cfg)}, δ {delta:g}{calibrated}"


def _step_unit(cfg: RunConfig) -> str:
    """What one ε figure of a run is spent on: each local step, or the zone's one release (input perturbation,
    the totals: the data crosses once for the whole run)."""
    return "for the zone's one release" if cfg.releases_once else "per local step"


def _round_legend(cfg: RunConfig) -> str:
    """What the columns of the per-round lines mean (printed once, before round 1)."""
    eps = ""
    if cfg.private:
        eps = f"; eps = total ε spent so far per zone, largest over zones ({_per_step_text(cfg)})"
    objective = f"{ROUND_LEGEND[cfg.objective]}; " if cfg.evaluate else ""
    return (
        f"columns: {objective}feasibility = consensus residual ‖w − Bz‖₂ (p.u.); "
        f"dual = dual residual ρ‖w − w_prev‖₂{eps}"
    )


def _progress_printer(args, cfg: RunConfig):
    if args.quiet:
        return None, None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    if tqdm is not None and not args.verbose and is_terminal(sys.stderr):
        bar = tqdm(total=cfg.rounds, desc=f"{cfg.algorithm} {cfg.case}", unit="round", file=sys.stderr)

        def update(row):
            bar.update(1)
            obj = {"obj": f"{row['objective']:.3g}"} if cfg.evaluate else {}  # --no-evaluation: no objective to show
            bar.set_postfix(**obj, feas=f"{row['feasibility']:.2g}", eps=f"{row['epsilon_spent']:.3g}")

        return update, bar
    every = 1 if args.verbose else max(1, cfg.rounds // 10)
    shown = []

    def line(row):
        t = row["round"]
        if not shown:
            print(_round_legend(cfg), flush=True)
            shown.append(True)
        if t == 1 or t % every == 0 or t == cfg.rounds:
            eps = f"  eps {row['epsilon_spent']:.4g}" if cfg.private else ""
            obj = f"  objective {row['objective']:.6g}" if cfg.evaluate else ""  # --no-evaluation: the zones keep theirs
            print(
                f"round {t:5d}{obj}  feasibility {row['feasibility']:.3e}  "
                f"dual {row['dual_residual']:.3e}{eps}  {row['wall_s'] * 1000:.0f} ms",
                flush=True,
            )

    return line, None


RESTORATION = {
    "voltage": "voltages and reactive powers restored, P held",
    "redispatch": "P moved to meet a limit",
    "failed": "no restoration converged: the direct power flow's figures",
    "skipped": "the direct power flow's figures: no restoration above {limit} buses",
}


def _ac_line(e: dict) -> str:
    """One evaluation's AC figures in a line."""
    if not e.get("ac_converged"):
        return "AC power flow did not converge"
    load = e.get("max_line_loading_percent")
    load_txt = "no rated branch" if load is None else f"worst branch {load:.1f} %"
    shift = e.get("max_p_shift_mw")
    how = RESTORATION.get(e.get("restoration"), e.get("restoration"))
    if e.get("restoration") == "skipped":
        from ..opf.ac_evaluation import RESTORATION_MAX_BUSES

        how = how.format(limit=RESTORATION_MAX_BUSES)
    if e.get("restoration") == "redispatch" and shift is not None:
        how += f" (by up to {shift:.2f} MW)"
    return (f"AC converged ({how}); {load_txt}, voltage violation {e.get('max_voltage_violation_pu') or 0:.4f} p.u., "
            f"reactive violation {e.get('max_q_violation_mvar') or 0:.2f} MVAr, slack mismatch "
            f"{e.get('slack_mismatch_mw') or 0:+.2f} MW")


def _print_implemented(s: dict) -> None:
    """The operator's evaluation of the implemented dispatch beside the centralized dispatch's (both on the true loads)."""
    imp, ref = s.get("implemented"), s.get("implemented_reference")
    if not imp:
        return
    gap = imp.get("relative_cost_gap")
    gap_txt = f" ({gap * 100:+.3f} % vs the centralized dispatch evaluated the same way)" if gap is not None else ""
    cost = imp.get("cost")
    cost_txt = f"AC cost {cost:,.2f} $/h{gap_txt}, " if cost is not None else ""
    print(f"implemented   the zones' implemented dispatch (true loads, tie-line flows held at the agreed values): "
          f"{cost_txt}shed {imp.get('shedding_mw') or 0:.2f} MW")
    if "ac_converged" in imp:  # the operator's AC evaluation ran (an objective with a generation cost only)
        print(f"              {_ac_line(imp)}")
    if ref:
        ref_cost = ref.get("cost")  # None when no AC point converged
        ref_cost_txt = f"AC cost {ref_cost:,.2f} $/h, " if ref_cost is not None else ""
        print(f"reference     the centralized SOC dispatch, evaluated the same way: {ref_cost_txt}"
              f"shed {ref.get('shedding_mw') or 0:.2f} MW")
        print(f"              {_ac_line(ref)}")


STOPPED = {  # summary["stopped"], in words
    "rounds": "all rounds run", "tolerance": "converged: both relative residuals at most --tol",
    "interrupted": "interrupted", "failed": "failed",
}


def stopped_words(s: dict) -> str:
    """Why the run stopped, in words (a run with a stopping rule that reached its cap says so)."""
    if s["stopped"] == "rounds" and s.get("stopping_tolerance"):
        return "the round cap: the relative residuals never met --tol"
    return STOPPED.get(s["stopped"], s["stopped"])


def _print_summary(s: dict, cfg: RunConfig, out, privacy: dict) -> None:
    unit = "Σ(p.u.²)" if cfg.objective == "shedding" else "$/h"
    what = {"cost": "generation cost", "shedding": "shedding"}.get(cfg.objective, cfg.objective)
    print(f"case          {s['case']}  ({s['n_zones']} zones, {s['n_shared']} shared variables, backend {s['backend']})")
    shrunk = " (perturbed loads shrunk toward each zone's mean)" if getattr(cfg, "shrink_loads", False) else ""
    print(f"algorithm     {cfg.algorithm}{shrunk}  objective {cfg.objective}  ρ {cfg.rho:g}  rounds {s['rounds']} ({stopped_words(s)})")
    print("── the coordinator's view (what a deployment publishes: releases, residuals, ledger) ──")
    if s["final_feasibility"] is not None:
        print(f"feasibility   consensus residual ‖w − Bz‖₂ = {s['final_feasibility']:.3e} p.u. (0 when the zones agree)")
        print(f"dual          dual residual ρ‖w − w_prev‖₂ = {s['final_dual_residual']:.3e}")
        if s.get("final_primal_relative") is not None:
            print(f"relative      primal {s['final_primal_relative']:.2e}, dual {s['final_dual_relative']:.2e} "
                  f"(the stopping rule: both at most {s['stopping_tolerance']:g})")
        if s.get("consensus_gap_mw") is not None:
            print(f"consensus     the zones' tie-line flows differ by at most {s['consensus_gap_mw']:.3g} MW and "
                  f"{s['consensus_gap_mvar']:.3g} MVAr")
    if cfg.private:
        parts = []
        for z, e in s["epsilon_total"].items():
            head = (privacy.get(int(z)) or {}).get("headline") or {}
            d = head.get("delta")
            parts.append(f"zone {z}: ε {e:.4g}" + (f", δ {d:.3g}" if d is not None else ""))
        sources = sorted({str(((privacy.get(int(z)) or {}).get("headline") or {}).get("source")) for z in s["epsilon_total"]} - {"None"})
        how = f"; accountant: {', '.join(sources)}" if sources else ""
        steps = s.get("epsilon_per_step") or {}
        per_step = f"{next(iter(steps.values())):.4g}" if steps else f"{cfg.epsilon:g}"
        if cfg.target_epsilon is not None:
            target = f"budget ε {cfg.target_epsilon:g}" + (f", δ {cfg.target_delta:g}" if cfg.target_delta else "")
            per_step = f"{per_step} {_step_unit(cfg)}, calibrated to the {target}"
        else:
            per_step = f"{per_step} {_step_unit(cfg)}"
        flag = "" if s.get("private", True) else " [NOT A GUARANTEE]"
        print(f"privacy       total spent per zone over the whole run (ε {per_step}{how}){flag}: " + "; ".join(parts))
        print(f"noise         {s.get('noise_source', cfg.noise_source)}" + (
            " (OS entropy drawn by each zone; nobody else can replay it)" if cfg.noise_source == "secret" else ""))
        for warning in s.get("privacy_warnings") or []:
            print(f"WARNING       {warning}")
    print(f"time          coordinator's loop {s['wall_s']:.2f} s, setup {s['setup_s']:.2f} s")
    print("── the simulation's evaluation (needs every zone's data; a deployment cannot compute it) ──")
    # a private run's released points carry its noise: its answer to apply is the implemented dispatch (when there is one)
    noisy = bool(cfg.private and s.get("implemented"))
    at = " at the released (noisy) points; the dispatch to apply is the implemented one below" if noisy else ""
    if s["final_objective"] is not None and s["final_objective"] == s["final_objective"]:
        print(f"objective     {what} {s['final_objective']:.6g} {unit} (Σ over zones of the true local objective{at})")
    else:
        print("objective     not evaluated (--no-evaluation: each zone keeps its own)")
    mv = s.get("max_violation")
    if mv is not None and mv == mv:
        print(f"violation     largest violation of a zone's own constraints by its released point: {mv:.2e} p.u.")
    if s.get("centralized_objective") is not None:
        rel = s.get("relative_gap_to_centralized")
        rel_txt = f" ({rel:+.2e} relative)" if rel is not None else ""
        of = " of the released points" if noisy else ""
        print(f"centralized   {s['centralized_objective']:.6g} {unit}  gap{of} {s['gap_to_centralized']:+.4g} {unit} (absolute){rel_txt}")
    _print_implemented(s)
    label = SOLVERS[cfg.local_solver].label if cfg.local_solver in SOLVERS else "the zones' solvers (auto)"
    if s.get("solves"):
        print(f"zone solves   {s['solver_s']:.2f} s in {label}, {s['solves']} local solves (zone-private statistics)")
        slow = s.get("straggler_zone")
        if slow is not None and len(s["zone_solver_s"]) > 1:
            times = sorted(s["zone_solver_s"].values())
            print(f"straggler     zone {slow}: {s['zone_solver_s'][slow]:.2f} s in {label} (median zone {times[len(times) // 2]:.2f} s)")
    if out is not None:
        print(f"results       {out}  (coordinator_view/ is what a deployment publishes; simulation_evaluation/ is not)")
