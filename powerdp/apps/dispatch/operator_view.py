"""The operator's figures of a day's periods (issue 37; docs/multi_period.md, "The implemented dispatch, per period"):
pandapower's AC check of a period's released dispatch (``--ac-check``), the implemented dispatch of a period evaluated
as an operator would beside the period's centralized dispatch (``implemented_*``, ``implemented_reference_*``), the
day's summary of them, and a period's record with them nested as ``powerdp run --json`` names them. The simulation's
evaluation only: every function here reads every zone's true data."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from ...errors import PowerDPError
from ..power_flow.implemented import failed_zones

__all__ = ["AC_COLUMNS", "IMPLEMENTED_COLUMNS", "ac_check_row", "implemented_row", "implemented_summary", "nested"]

log = logging.getLogger(__name__)


def nested(record: dict[str, Any]) -> dict[str, Any]:
    """A period's record with its ``implemented_*`` and ``implemented_reference_*`` columns as the ``implemented`` and
    ``implemented_reference`` objects (the names ``powerdp run --json`` uses)."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        for prefix in ("implemented_reference_", "implemented_"):
            if key.startswith(prefix):
                out.setdefault(prefix[:-1], {})[key[len(prefix):]] = value
                break
        else:
            out[key] = value
    return out


#: the AC check's figures per period (powerdp run --ac-check's ACCheck, one column each)
AC_COLUMNS = ("converged", "slack_mismatch_mw", "max_voltage_violation_pu", "max_loading_percent", "losses_mw")


def ac_check_row(k, horizon, backend, diags, part) -> dict[str, Any]:
    """pandapower's AC power flow at period ``k``'s dispatch (the zones' released solutions, each value from the zone
    that owns it) on the period's network: ``ac_converged``, the slack's mismatch against the dispatch (MW), the worst
    voltage outside [vmin, vmax] (p.u.), the most loaded rated branch (%), the losses (MW)."""
    from ...opf.pandapower_io import ac_check
    from ...opf.tables import dispatch_from_zones

    sols = {int(d.zone): d.solution for d in backend.diagnostics(with_solution=True)}
    # the period's loads in a network converted from its arrays (a SimBench source net holds its own loads)
    net_k = replace(horizon.network_at(k), pandapower_net=None, pandapower_gens=None)
    try:
        check = ac_check(net_k, dispatch_from_zones(net_k, part.zone_of_bus, sols))
    except PowerDPError as exc:
        log.warning("period %d: AC check failed: %s", k, exc)
        return {f"ac_{c}": (False if c == "converged" else None) for c in AC_COLUMNS}
    return {f"ac_{c}": getattr(check, c) for c in AC_COLUMNS}


#: the operator's figures of a period's implemented dispatch and of its centralized one (powerdp.opf.ac_evaluation)
IMPLEMENTED_COLUMNS = ("cost", "relative_cost_gap", "shedding_mw", "ac_converged", "max_line_loading_percent",
                       "max_voltage_violation_pu", "max_q_violation_mvar", "slack_mismatch_mw", "restoration", "max_p_shift_mw",
                       "tie_deviation_mw", "exchange_deviation_mw")


def implemented_row(k, horizon, implemented, evaluation, part) -> dict[str, Any]:
    """Period ``k``'s implemented dispatch (the zones' set-points on the period's true loads) as an operator would
    evaluate it, beside the period's centralized dispatch (``evaluation["central_result"]``): ``implemented_*`` and
    ``implemented_reference_*`` columns. Without ``part`` (no AC evaluation) only the implemented shedding,
    generation cost, holds and failed zones (``implemented_failed_zones``, warned of)."""
    from ...opf.ac_evaluation import evaluate_ac
    from ...opf.tables import dispatch_from_zones

    row: dict[str, Any] = {
        "implemented_shedding_mw": float(sum(v.shedding_mw for v in implemented.values())),
        "implemented_generation_cost": float(sum(v.cost for v in implemented.values())),
        "implemented_held": ",".join(sorted({v.held for v in implemented.values()})),
        # the zones whose re-solve failed: their point is the solver's last iterate, not set-points (empty: none)
        "implemented_failed_zones": ",".join(str(z) for z in failed_zones(implemented)),
    }
    if row["implemented_failed_zones"]:
        log.warning("period %d: the implemented dispatch of zone(s) %s failed (the solve did not succeed): the period's "
                    "figures are not a dispatch to apply", k, row["implemented_failed_zones"])
    if part is None or not implemented:
        return row
    t0, c0 = time.perf_counter(), time.process_time()
    net_k = replace(horizon.network_at(k), pandapower_net=None, pandapower_gens=None)
    shed = np.zeros(net_k.n_bus)
    for v in implemented.values():
        for bus, mw in v.shed_mw.items():
            shed[bus] = mw
    ref, ref_cost = None, None
    central = evaluation.pop("central_result", None)
    try:
        if central is not None:
            ref_shed = central.buses["p_shed_mw"].to_numpy(dtype=float) if "p_shed_mw" in central.buses else None
            ref = evaluate_ac(net_k, central.dispatch, ref_shed).to_dict(float(central.total_shedding_mw))
            ref_cost = ref["cost"]
            ref["relative_cost_gap"] = 0.0 if ref_cost is not None else None
        dispatch = dispatch_from_zones(net_k, part.zone_of_bus, {z: v.solution for z, v in implemented.items()})
        held = {key: mw for v in implemented.values() for key, mw in v.held_mw.items()}
        imp = evaluate_ac(net_k, dispatch, shed, held, part.zone_of_bus).to_dict(row["implemented_shedding_mw"], ref_cost)
    except PowerDPError as exc:
        log.warning("period %d: the AC evaluation failed: %s", k, exc)
        return row
    for c in IMPLEMENTED_COLUMNS:
        row[f"implemented_{c}"] = imp.get(c)
        if ref is not None:
            row[f"implemented_reference_{c}"] = ref.get(c)
    row["implemented_evaluation_s"] = time.perf_counter() - t0
    row["implemented_evaluation_cpu_s"] = time.process_time() - c0
    return row


def implemented_summary(frame: pd.DataFrame) -> dict[str, Any]:
    """The day's implemented dispatch: its largest relative cost gap (AC points), its largest shed fraction of a
    period's load, the periods whose AC evaluation converged."""
    out: dict[str, Any] = {}
    if "implemented_shedding_mw" in frame and len(frame):
        share = frame["implemented_shedding_mw"].astype(float) / frame["load_mw"].astype(float).where(frame["load_mw"] > 0)
        out["implemented_max_shedding_mw"] = float(frame["implemented_shedding_mw"].max())
        out["implemented_max_shedding_fraction"] = float(share.max())
    if "implemented_relative_cost_gap" in frame and len(frame):
        gaps = pd.to_numeric(frame["implemented_relative_cost_gap"], errors="coerce")
        out["implemented_max_relative_cost_gap"] = float(gaps.max()) if gaps.notna().any() else None
        out["implemented_median_relative_cost_gap"] = float(gaps.median()) if gaps.notna().any() else None
        out["implemented_ac_converged_periods"] = int(frame["implemented_ac_converged"].fillna(False).astype(bool).sum())
    return out
