"""What a distributed run reports after its rounds: the :class:`~.result.RunResult` and its summary figures.

Assembled from the coordinator's released arrays, the zones' diagnostics and the rounds' history (one row per round);
:func:`run_result` is called by :mod:`.runner` when the rounds end, fail or are interrupted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...engine.consensus.coordinator import Coordinator
from ...errors import PowerDPError
from .config import RunConfig
from .result import HISTORY_COLUMNS, RunResult

__all__ = ["run_result", "privacy_labels", "consensus_gaps", "zone_stats", "add_zone_times", "zone_time_summary", "ACTIVE_FLOWS",
           "REACTIVE_FLOWS"]


def privacy_labels(config: RunConfig) -> dict[str, Any]:
    """What a run's ε means (docs/privacy.md, "Threat model"): whether the claim is a proven guarantee
    (``private``), and whether the noise is secret or replayable from the seed (``noise_source``)."""
    labels: dict[str, Any] = {"private": bool(config.claim_holds), "noise_source": config.noise_source}
    warnings = []
    if config.private and not config.claim_holds:
        warnings.append(
            f"sensitivity 'paper' with {config.perturbation} perturbation is not a proven bound: the printed epsilon "
            "is the paper's, not a guarantee"
        )
    if config.private and config.noise_source == "seeded":
        warnings.append(
            f"seeded noise (seed {config.seed}): the guarantee holds only against observers who do not know the seed"
        )
    labels["privacy_warnings"] = warnings
    return labels


def zone_stats(diags) -> dict[str, float]:
    """Σ over zones of their own round statistics (noise magnitude, solver work), as the zones report them
    to the simulation's evaluation; NaN in a deployment-view run (they stay with the zones)."""
    stats = [getattr(d, "stats", None) for d in diags]
    if not stats or any(s is None for s in stats):
        return {"noise_magnitude": np.nan, "solver_iterations": np.nan, "solves": np.nan, "solver_s": np.nan}
    return {
        "noise_magnitude": float(sum(s.noise_magnitude for s in stats)),
        "solver_iterations": int(sum(s.iterations for s in stats)),
        "solves": int(sum(s.solves for s in stats)),
        "solver_s": float(sum(s.solver_s for s in stats)),
    }


def add_zone_times(zone_times: dict[int, list[float]], diags) -> None:
    """Add each zone's round (time inside its solver, its whole round) to its totals, from the statistics the
    zones report to the simulation's evaluation (none in a deployment-view run: they stay with the zones)."""
    for d in diags:
        stats = getattr(d, "stats", None)
        if stats is not None:
            totals = zone_times.setdefault(int(d.zone), [0.0, 0.0])
            totals[0] += stats.solver_s
            totals[1] += stats.wall_s


def zone_time_summary(zone_times: dict[int, list[float]]) -> dict[str, Any]:
    """Per-zone solve times and the straggler (the zone with the most time inside its solver), for the summary."""
    if not zone_times:
        return {"zone_solver_s": {}, "zone_round_s": {}, "straggler_zone": None}
    zones = sorted(zone_times)
    return {
        "zone_solver_s": {z: zone_times[z][0] for z in zones},  # Σ over rounds of the zone's time inside its solver
        "zone_round_s": {z: zone_times[z][1] for z in zones},  # Σ over rounds of the zone's whole step
        "straggler_zone": max(zones, key=lambda z: zone_times[z][0]),
    }


def _last(frame: pd.DataFrame, column: str) -> float | None:
    """The last round's value of ``column`` (None: no rounds, or a row without it)."""
    if not len(frame) or column not in frame or not np.isfinite(frame[column].iloc[-1]):
        return None
    return float(frame[column].iloc[-1])


#: the shared variables that are power flows: active (MW) and reactive (MVAr) at either end of a tie line
ACTIVE_FLOWS, REACTIVE_FLOWS = ("pf", "pt"), ("qf", "qt")


def consensus_gaps(coordinator: Coordinator, keys, base_mva: float) -> dict[str, float | None]:
    """How far the zones are from agreeing, in physical units: the largest |w_k − x_pk| over the zones' copies of
    the tie lines' active flows (MW) and reactive flows (MVAr), from released values only (None: no flow is
    shared, e.g. ``flows="expressions"``)."""
    kinds = np.array([k[0] for k in keys], dtype=object)[coordinator.gidx] if len(keys) else np.zeros(0, dtype=object)
    gap = np.abs(coordinator.w[coordinator.gidx] - coordinator.released) * float(base_mva)
    out = {}
    for name, which in (("consensus_gap_mw", ACTIVE_FLOWS), ("consensus_gap_mvar", REACTIVE_FLOWS)):
        mask = np.isin(kinds, which)
        out[name] = float(gap[mask].max()) if mask.any() else None
    return out


def _finite_sum(values: list[float]) -> float | None:
    """The sum, or None when a value is missing (not evaluated, no costs) or there are none."""
    vals = [float(v) for v in values if v is not None]
    if not vals or len(vals) != len(values) or not all(np.isfinite(vals)):
        return None
    return float(sum(vals))


def run_result(
    config, net, part, keys, coordinator, history, backend, central, setup_s, setup_times, complete,
    run_s=None, stopped="failed", init_s=0.0, last_diags=None, zone_times=None,
) -> RunResult:
    """The run's result from its rounds' rows (``history``), the coordinator's arrays and the zones' diagnostics
    (``last_diags``: each zone's last report, used when a host is lost); ``complete``: the rounds ended without a
    failure (then a diagnostics error is raised, not absorbed)."""
    frame = pd.DataFrame(history, columns=HISTORY_COLUMNS)
    try:
        diags = backend.diagnostics(with_solution=True) if (history or complete) else []
        host_mb = backend.host_memory() if config.evaluate else []
    except PowerDPError:
        if complete:
            raise
        # a lost host cannot report: each zone's spend and privacy report as of the last round it completed
        diags, host_mb = sorted((last_diags or {}).values(), key=lambda d: d.zone), []
    privacy = {d.zone: d.privacy for d in diags if d.privacy is not None}
    final_obj = float(frame["objective"].iloc[-1]) if len(frame) else None
    # the released dispatch, from the zones' evaluation diagnostics (None when not evaluated)
    final_cost = _finite_sum([d.cost for d in diags]) if len(frame) else None
    shedding_mw = _finite_sum([d.shedding_mw for d in diags]) if len(frame) else None
    summary: dict[str, Any] = {
        "case": net.name,
        "algorithm": config.algorithm,
        "objective": config.objective,
        "n_zones": part.n_zones,
        "n_shared": len(keys),
        "load_values": 2 * int(net.n_bus),  # pd and qd of every bus: the private values (docs/privacy.md)
        "rounds": int(len(frame)),
        "stopped": stopped,
        "final_objective": final_obj,
        "shedding_weight": config.shedding_weight,
        "final_cost": final_cost,  # Σ_g cost_g(pg) at the released dispatch, $/h
        "total_shedding_mw": shedding_mw,  # Σ_i |yp_i + pd_i| · baseMVA at the released point, MW
        "final_feasibility": float(frame["feasibility"].iloc[-1]) if len(frame) else None,
        "final_dual_residual": float(frame["dual_residual"].iloc[-1]) if len(frame) else None,
        "stopping_tolerance": float(config.tolerance),
        "final_primal_relative": _last(frame, "primal_relative"),
        "final_dual_relative": _last(frame, "dual_relative"),
        **(consensus_gaps(coordinator, keys, net.base_mva) if len(frame) else {"consensus_gap_mw": None, "consensus_gap_mvar": None}),
        "max_violation": float(frame["max_violation"].max()) if len(frame) else None,
        "final_max_violation": float(frame["max_violation"].iloc[-1]) if len(frame) else None,
        "wall_s": float(frame["wall_s"].sum()) if run_s is None else float(run_s),
        "setup_s": float(setup_s),  # everything before round 1 (load, partition, build, compile, projection)
        # but the centralized reference solve (the simulation's evaluation: result.summary["reference_s"])
        "init_s": float(init_s),  # of which the initial projection onto each W_p (0 on resume)
        "local_solver": config.local_solver,
        "solver_s": float(frame["solver_s"].sum()),
        "ipopt_s": float(frame["solver_s"].sum()),  # old name of solver_s, kept for readers of older summaries
        "solves": int(frame["solves"].sum()),  # zone-private statistics (0 when the zones kept them: no evaluation)
        "solver_iterations": int(frame["solver_iterations"].sum()),
        "epsilon_total": {int(d.zone): float(d.epsilon_spent) for d in diags},  # the ledger's tightest valid figure
        "epsilon_per_step": {int(d.zone): d.privacy["per_step"]["epsilon"] for d in diags if d.privacy},
        "epsilon_basic": {int(d.zone): d.privacy["basic"]["epsilon"] for d in diags if d.privacy},
        "target_epsilon": config.target_epsilon,
        "target_delta": config.target_delta,
        **privacy_labels(config),
        "centralized_objective": central,
        "gap_to_centralized": None,
        "relative_gap_to_centralized": None,
        "backend": config.backend,
        "hosts": getattr(backend, "n_hosts", 1),
        "setup_times": {int(z): v for z, v in setup_times.items()},
        "host_peak_rss_mb": [round(m, 1) for m in host_mb],  # per agent host (serial: this process)
        # what crossed the network, per message kind (the net backend; public: the sizes follow the public structure)
        "network": backend.network_traffic() if hasattr(backend, "network_traffic") else None,
        # zone-private statistics of the simulation's evaluation (empty without it): which zone holds the rounds up
        **zone_time_summary(zone_times or {}),
    }
    if central is not None and final_obj is not None:
        summary["gap_to_centralized"] = final_obj - central
        if abs(central) > 1e-9:
            summary["relative_gap_to_centralized"] = (final_obj - central) / abs(central)
    return RunResult(
        config=config,
        history=frame,
        shared_keys=list(keys),
        consensus=coordinator.w.copy(),
        zone_solutions={int(d.zone): d.solution for d in diags if d.solution is not None},
        privacy=privacy,
        summary=summary,
    )
