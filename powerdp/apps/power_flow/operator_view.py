"""The operator's side of a power-flow run (issue 37): the zones' implemented dispatch, asked of every zone once the
rounds end, and the simulation's AC evaluation of it beside the centralized dispatch's (docs/operating_point.md,
"The operator's evaluation"; docs/privacy.md, "The implemented dispatch")."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import PowerDPError
from ...grid.network import Network
from ...grid.partition import Partition
from .implemented import failed_zones
from .result import RunResult

__all__ = ["implement_zones", "evaluate_implemented", "evaluation_line", "implemented_figures"]

log = logging.getLogger("powerdp.apps.power_flow.runner")  # the run's own logger: its warnings read as the run's


def implement_zones(backend, coordinator, result: RunResult, say: Callable[[str], None]) -> None:
    """Each zone's implemented dispatch at the agreed values (``coordinator.agreed()``: functions of the releases);
    the zones' own figures into ``result`` (the simulation's evaluation). A failure is logged and the rounds kept."""
    say("implemented dispatch: each zone re-solves with its true loads, its tie-line flows held at the agreed values")
    t_impl = time.perf_counter()
    try:
        done = backend.call("implement", {m.zone: m for m in coordinator.agreed()})
    except PowerDPError as exc:  # the run's rounds are kept whatever happens here
        log.warning("implemented dispatch failed: %s", exc)
        result.summary["implemented_error"] = str(exc)
    else:
        result.implemented = {int(z): v for z, v in done.items() if v is not None}
        for z in failed_zones(result.implemented):  # its point is the solver's last iterate, not a dispatch
            log.warning("zone %d's implemented dispatch failed (its solve ended %s): its figures are not a dispatch "
                        "to apply", z, result.implemented[z].outcome)
    result.summary["implemented_s"] = time.perf_counter() - t_impl  # the zones' solves (evaluation view)
    if result.implemented:  # the zones' own figures; the AC ones join them in evaluate_implemented
        result.summary["implemented"] = implemented_figures(result.implemented)


def evaluation_line(net: Network) -> str:
    """The line a run says before the operator's evaluation (which, above
    :data:`~powerdp.opf.ac_evaluation.RESTORATION_MAX_BUSES` buses, is the direct power flow only)."""
    from ...opf.ac_evaluation import RESTORATION_MAX_BUSES, restores

    line = "operator's evaluation: AC power flow of the implemented dispatch and of the centralized one"
    return line if restores(net) else line + f" (the direct power flow only: no restoration above {RESTORATION_MAX_BUSES} buses)"


def evaluate_implemented(result: RunResult, net: Network, part: Partition, central=None) -> None:
    """The operator's evaluation (:func:`powerdp.opf.ac_evaluation.evaluate_ac`) of the zones' implemented dispatch
    (``summary["implemented"]``) and of the centralized dispatch ``central`` (an OPFResult; ``summary[
    "implemented_reference"]``), the gap taken between the two AC points' costs; the simulation's evaluation."""
    from ...opf.ac_evaluation import evaluate_ac
    from ...opf.tables import dispatch_from_zones

    zones = result.implemented
    dispatch = dispatch_from_zones(net, part.zone_of_bus, {z: imp.solution for z, imp in zones.items()})
    shed = np.zeros(net.n_bus)
    for imp in zones.values():
        for bus, mw in imp.shed_mw.items():
            shed[bus] = mw
    shedding = float(sum(imp.shedding_mw for imp in zones.values()))
    ref = None
    if central is not None:
        ref = getattr(central, "_operator_evaluation", None)  # evaluated once per reference (a sweep's runs share it)
        if ref is None:
            ref_shed = central.buses["p_shed_mw"].to_numpy(dtype=float) if "p_shed_mw" in central.buses else None
            ref = central._operator_evaluation = evaluate_ac(net, central.dispatch, ref_shed)
        result.summary["implemented_reference"] = ref.to_dict(float(central.total_shedding_mw), ref.cost)
    held = {k: mw for imp in zones.values() for k, mw in getattr(imp, "held_mw", {}).items()}
    ev = evaluate_ac(net, dispatch, shed, held, part.zone_of_bus)
    result.summary["implemented"] = {**ev.to_dict(shedding, ref.cost if ref is not None else None),
                                     **implemented_figures(zones)}


def implemented_figures(zones: dict) -> dict[str, Any]:
    """The zones' implemented dispatch in figures of its own (the simulation's evaluation): Σ f_p at the true loads
    (``objective``: the shedding objective's F, or cost + ω·shedding²), the MW shed, each zone's generation cost and
    whether its holds were met exactly, and the zones whose solve failed (``failed_zones``: their figures are the solver's
    last iterate, not a dispatch)."""
    return {
        "objective": float(sum(imp.objective for imp in zones.values())),
        "shedding_mw": float(sum(imp.shedding_mw for imp in zones.values())),
        "zone_costs": {z: imp.cost for z, imp in sorted(zones.items())},
        "held": {z: imp.held for z, imp in sorted(zones.items())},
        "failed_zones": failed_zones(zones),
    }
