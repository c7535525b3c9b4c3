"""The operator's evaluation of a dispatch: an AC operating point on the true loads, restored when the set-points break
a limit, its cost and its violations (docs/operating_point.md, "The operator's evaluation").

A relaxed dispatch (the SOC OPF's, or the zones' implemented dispatch of a private run) is a set of generator
set-points. :func:`evaluate_ac` asks what an operator who applies them gets:

1. **Direct power flow.** pandapower's Newton-Raphson at the set-points (:func:`~.pandapower_io.ac_check`: generator
   P, voltage set-points √w, the reference bus taking the mismatch), reactive limits not enforced, so the report shows
   how far the set-points' reactive powers exceed them (``direct``).
2. **Restoration.** The relaxation's point is in general not AC-feasible (the centralized SOC optimum of case118 asks
   ~100 MVAr beyond the limits of ten generators), so the same restoration is applied to every dispatch compared: an AC
   OPF (pandapower's ``runopp``) with every generator's P held at its set-point (within ±:data:`HOLD_WINDOW_MW`; the
   interior-point method needs a window), the reference bus free, voltages and reactive powers free within their
   limits, every rated branch within its rating; its objective the generation cost (with P held: the slack's, i.e.
   the losses). When P cannot be held (a line the set-points overload, a voltage no reactive power can hold), a
   redispatch: P free within its limits at a penalty :data:`REDISPATCH_WEIGHT` × (p − p_set)², the generation cost
   still reported as is. Then a power flow at the restored set-points with reactive limits enforced
   (``enforce_q_lims``): the operating point whose figures are reported.
3. **Figures.** The point's cost (every generator's own cost at its AC output, the slack's at what it produces),
   the slack's mismatch against the dispatch, the most loaded rated branch, the worst voltage and reactive-power
   violations, convergence, and how far P moved in the restoration.

Loads are the true ones minus the load the dispatch sheds (``shed_mw``): shed load is disconnected, as an operator
would; a dispatch's surplus goes to the slack. Branches without a rating get :data:`UNRATED_MVA` in the OPF (a finite
rating every branch needs there) and no loading figure.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ModelError, PowerDPError
from ..grid.network import Network
from .formulation import branch_flow_coefficients
from .objectives import generator_costs, median_marginal_cost
from .pandapower_io import VOLTAGE_TOL, PandapowerDispatch, ac_check, to_pandapower
from .tables import Dispatch

log = logging.getLogger(__name__)

__all__ = ["ACEvaluation", "evaluate_ac", "HOLD_WINDOW_MW", "REDISPATCH_WEIGHT", "UNRATED_MVA", "EVALUATION_FIELDS",
           "RESTORATION_MAX_BUSES", "restores"]

#: the window (MW) around each generator's set-point within which the restoring AC OPF may move its P (0 makes
#: pandapower's interior-point method fail; 1e-4 MW on ~100 generators moves the cost by cents)
HOLD_WINDOW_MW = 1e-4
#: the redispatch's penalty on moving P, in units of the median marginal cost ($/MWh) per MW² (so moving one
#: generator by 1 MW costs 100 times the median energy price of one MWh: P moves only where a limit needs it)
REDISPATCH_WEIGHT = 100.0
#: the rating (MVA) a branch without one gets in the OPF (pandapower's OPF needs a finite one; a huge one makes its
#: interior-point method fail on case118)
UNRATED_MVA = 9900.0
Q_TOL_MVAR = 1e-3  # a reactive power this close to its limit is not a violation
RESTORATIONS = ("voltage", "redispatch")
#: above this many buses the restoration (pandapower's AC OPF, PIPS, without numba) is not tried and the figures are the
#: direct power flow's (``restoration`` "skipped"): measured 2026-11-29 with `powerdp run CASE --zones 4 --algorithm
#: nonprivate --objective cost+shedding --rounds 10 --local-solver clarabel`, it failed on PGLib's case300 and
#: case1354_pegase after 15 s and 86 s a dispatch, and on case13659pegase it ran 7 minutes and 8 GB without an end;
#: case14, case118 and PGLib's case118 restore in about a second, SimBench's grids (≤ 571 buses) in seconds
RESTORATION_MAX_BUSES = 1000

#: the figures of an evaluation, as the run's ``implemented`` objects name them (the issue's names)
EVALUATION_FIELDS = ("cost", "relative_cost_gap", "shedding_mw", "ac_converged", "max_line_loading_percent",
                     "max_voltage_violation_pu", "max_q_violation_mvar", "slack_mismatch_mw")


@dataclass
class ACEvaluation:
    """What an operator gets from a dispatch (module docstring): the figures of the AC operating point.

    ``restoration`` names the step that gave the point: ``"voltage"`` (P held at the set-points, voltages and reactive
    powers restored), ``"redispatch"`` (P had to move: ``max_p_shift_mw``), ``"failed"`` (neither converged: the
    figures are the direct power flow's) or ``"skipped"`` (not tried on a network above :data:`RESTORATION_MAX_BUSES`
    buses: the direct power flow's figures). ``direct`` holds the direct power flow's figures (reactive limits not
    enforced).
    """

    ac_converged: bool
    cost: float | None
    max_line_loading_percent: float | None
    max_voltage_violation_pu: float | None
    max_q_violation_mvar: float | None
    slack_mismatch_mw: float | None
    restoration: str
    max_p_shift_mw: float | None
    direct: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    #: the largest difference (MW) between a held tie-line flow (``held``) and the AC point's active power at that end
    tie_deviation_mw: float | None = None
    #: the largest difference (MW) between a zone's held net export (the sum of its held ends) and the AC point's
    exchange_deviation_mw: float | None = None

    def to_dict(self, shedding_mw: float | None = None, reference_cost: float | None = None) -> dict[str, Any]:
        """The issue's fields (:data:`EVALUATION_FIELDS`) with ``shedding_mw`` and the relative gap to
        ``reference_cost``, then the restoration's and the direct power flow's figures."""
        gap = None
        if reference_cost is not None and self.cost is not None and abs(reference_cost) > 1e-9:
            gap = (self.cost - reference_cost) / abs(reference_cost)
        out = {"cost": self.cost, "relative_cost_gap": gap, "shedding_mw": shedding_mw, "ac_converged": self.ac_converged,
               "max_line_loading_percent": self.max_line_loading_percent,
               "max_voltage_violation_pu": self.max_voltage_violation_pu,
               "max_q_violation_mvar": self.max_q_violation_mvar, "slack_mismatch_mw": self.slack_mismatch_mw,
               "restoration": self.restoration, "max_p_shift_mw": self.max_p_shift_mw,
               "tie_deviation_mw": self.tie_deviation_mw, "exchange_deviation_mw": self.exchange_deviation_mw,
               "direct": dict(self.direct), "evaluation_s": self.wall_s}
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def served_network(net: Network, shed_mw: np.ndarray | None) -> Network:
    """``net`` with the load a dispatch sheds (``shed_mw`` per bus, MW; its positive part) disconnected."""
    if shed_mw is None:
        return net
    shed = np.clip(np.asarray(shed_mw, dtype=float), 0.0, None) / net.base_mva
    return dataclasses.replace(net, pd=np.asarray(net.pd, dtype=float) - shed, pandapower_net=None, pandapower_gens=None)


def evaluate_ac(net: Network, dispatch: Dispatch, shed_mw: np.ndarray | None = None,
                held: dict[tuple[str, int], float] | None = None, zone_of_bus: np.ndarray | None = None,
                restore: bool | None = None) -> ACEvaluation:
    """The operator's evaluation of ``dispatch`` on ``net``'s loads (module docstring); never raises for a power
    flow or OPF that does not converge (``ac_converged`` False), only for a network pandapower cannot hold.
    ``held``: tie-line flows a schedule holds, (``"pf"`` or ``"pt"``, branch) → MW: the evaluation reports how far
    the AC point's flows at those ends lie from them (``tie_deviation_mw``) and, with ``zone_of_bus``, how far each
    zone's net export over its held ends does (``exchange_deviation_mw``). ``restore``: try the restoration (None: on
    networks of at most :data:`RESTORATION_MAX_BUSES` buses; otherwise ``restoration`` is "skipped")."""
    t0 = time.perf_counter()
    if restore is None:
        restore = restores(net)
    net = served_network(net, shed_mw)
    if net.pandapower_net is not None:  # the arrays' loads, not a source net's own load table
        net = dataclasses.replace(net, pandapower_net=None, pandapower_gens=None)
    held = (held, zone_of_bus) if held else None
    direct, pdd = _direct(net, dispatch, held)
    point = None
    restoration = "failed" if restore else "skipped"
    for mode in RESTORATIONS if restore else ():
        # the direct power flow's network is reused for the first restoration (a conversion takes ~0.3 s)
        point = _restore(net, dispatch, mode, pdd, held)
        pdd = None
        if point is not None:
            restoration = mode
            break
    if point is None:
        ev = ACEvaluation(ac_converged=bool(direct.get("converged")), cost=direct.get("cost"),
                          max_line_loading_percent=direct.get("max_line_loading_percent"),
                          max_voltage_violation_pu=direct.get("max_voltage_violation_pu"),
                          max_q_violation_mvar=direct.get("max_q_violation_mvar"),
                          slack_mismatch_mw=direct.get("slack_mismatch_mw"), restoration=restoration, max_p_shift_mw=None,
                          direct=direct, tie_deviation_mw=direct.get("tie_deviation_mw"),
                          exchange_deviation_mw=direct.get("exchange_deviation_mw"))
    else:
        ev = ACEvaluation(ac_converged=True, restoration=restoration, direct=direct, **point)
    ev.wall_s = time.perf_counter() - t0
    return ev


def restores(net: Network) -> bool:
    """Whether :func:`evaluate_ac` tries the restoration on ``net`` by default (at most :data:`RESTORATION_MAX_BUSES`
    buses)."""
    return int(net.n_bus) <= RESTORATION_MAX_BUSES


# --------------------------------------------------------------------------- the direct power flow


def _direct(net: Network, d: Dispatch, held=None) -> tuple[dict[str, Any], PandapowerDispatch]:
    """The set-points as they are (reactive limits not enforced): :func:`ac_check` plus the reactive violations and
    the cost; and the pandapower network it ran on (every branch rated: the restoration's OPF needs that)."""
    chk = ac_check(net, d, unrated_mva=UNRATED_MVA)
    pdd = chk.pandapower
    if not chk.converged:
        return {"converged": False, "message": chk.message}, pdd
    p, q = _outputs(pdd)
    return {"converged": True, "cost": _cost(net, p), "max_line_loading_percent": chk.max_loading_percent,
            "max_voltage_violation_pu": chk.max_voltage_violation_pu,
            "max_q_violation_mvar": float(_q_violation(pdd, q).max(initial=0.0)),
            "slack_mismatch_mw": chk.slack_mismatch_mw, **_tie_deviation(pdd, net, held)}, pdd


# --------------------------------------------------------------------------- restoration


def _restore(net: Network, d: Dispatch, mode: str, pdd: PandapowerDispatch | None = None, held=None) -> dict[str, Any] | None:
    """The restoring AC OPF (``mode`` "voltage": P held; "redispatch": P may move at a penalty) and the power flow at
    its set-points with reactive limits enforced; None when either does not converge. ``pdd``: the dispatch's
    pandapower network (every branch rated) to prepare in place, else a new one."""
    import pandapower as pp

    try:
        pdd = _opf_network(net, d, mode, pdd)
    except PowerDPError as exc:
        log.warning("AC restoration of %s: %s", net.name, exc)
        return None
    n = pdd.net
    set_p = _set_points(pdd)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            pp.runopp(n, calculate_voltage_angles=True, numba=False, suppress_warnings=True)
        except Exception:  # noqa: BLE001 - pandapower raises its own and numpy's errors when the OPF fails
            return None
        if not bool(getattr(n, "OPF_converged", False)):
            return None
        _take_opf_set_points(n)
        try:
            pp.runpp(n, enforce_q_lims=True, calculate_voltage_angles=True, init="results", numba=False,
                     tolerance_mva=1e-8, max_iteration=30)
        except Exception:  # noqa: BLE001 - a power flow that does not converge
            return None
    if not bool(n.converged):
        return None
    p, q = _outputs(pdd)
    slack = _slack_rows(pdd)
    S = net.base_mva
    shift = np.abs(p - set_p)[~slack]
    return {"cost": _cost(net, p), "max_line_loading_percent": _loading(pdd, net),
            "max_voltage_violation_pu": _voltage_violation(pdd, net), "max_q_violation_mvar": float(_q_violation(pdd, q).max(initial=0.0)),
            "slack_mismatch_mw": float(p[slack].sum() - d.pg[slack].sum() * S), "max_p_shift_mw": float(shift.max(initial=0.0)),
            **_tie_deviation(pdd, net, held)}


def _opf_network(net: Network, d: Dispatch, mode: str, pdd: PandapowerDispatch | None = None) -> PandapowerDispatch:
    """The dispatch in a pandapower network ready for ``runopp``: one slack (any other ext_grid a generator), P held
    (``voltage``) or penalised (``redispatch``), voltage and reactive limits, every branch rated. ``pdd``: the
    dispatch's network (:func:`to_pandapower` with ``unrated_mva`` :data:`UNRATED_MVA`) to change in place."""
    import pandapower as pp

    if pdd is None:
        pdd = to_pandapower(net, d, unrated_mva=UNRATED_MVA)
    n = pdd.net
    gens = pdd.gens.copy()
    S = net.base_mva
    _one_slack(pdd, gens, d.pg * S)
    n.bus["min_vm_pu"] = pd.Series(net.vmin, index=pdd.buses).reindex(n.bus.index).to_numpy()
    n.bus["max_vm_pu"] = pd.Series(net.vmax, index=pdd.buses).reindex(n.bus.index).to_numpy()
    for table in ("line", "trafo", "impedance"):
        if len(n[table]):
            n[table]["max_loading_percent"] = 100.0
    n.poly_cost.drop(n.poly_cost.index, inplace=True)
    if len(n.get("pwl_cost", [])):
        n.pwl_cost.drop(n.pwl_cost.index, inplace=True)
    # each generator's cost as a polynomial (a piecewise-linear one by its slope at the set-point), in $/MW
    p_set = d.pg * S
    slope = _cost_slope(net, d.pg)
    c2 = np.where(np.isin(np.arange(net.n_gen), net.pwl_gen), 0.0, net.cost_c2) / S**2
    c1 = np.where(np.isin(np.arange(net.n_gen), net.pwl_gen), slope, net.cost_c1) / S
    weight = REDISPATCH_WEIGHT * float(median_marginal_cost(net) or 1.0) / S  # $/h per MW² (marginal cost: $/h per p.u.)
    pmin, pmax = net.pmin * S, net.pmax * S
    et = gens["element_type"].to_numpy()
    el = gens["element"].to_numpy(dtype=np.int64)
    slack = et == "ext_grid"
    lo, hi = p_set - HOLD_WINDOW_MW, p_set + HOLD_WINDOW_MW
    cp1, cp2 = c1.copy(), c2.copy()
    if mode == "redispatch":  # P free within its limits, at a penalty weight·(p − p_set)²
        lo, hi = np.minimum(pmin, p_set), np.maximum(pmax, p_set)
        cp1, cp2 = c1 - 2.0 * weight * p_set, c2 + weight
    lo, hi = np.where(slack, pmin, lo), np.where(slack, pmax, hi)  # the slack: free within its limits, its own cost
    cp1, cp2 = np.where(slack, c1, cp1), np.where(slack, c2, cp2)
    for kind in ("ext_grid", "gen", "sgen"):
        sel = et == kind
        if not sel.any():
            continue
        rows = el[sel]
        table = n[kind]
        for column, values in (("controllable", np.ones(sel.sum(), dtype=bool)), ("min_p_mw", lo[sel]), ("max_p_mw", hi[sel]),
                               ("min_q_mvar", net.qmin[sel] * S), ("max_q_mvar", net.qmax[sel] * S)):
            if column not in table:
                table[column] = np.nan
            table.loc[rows, column] = values
        pp.create_poly_costs(n, rows, kind, cp1_eur_per_mw=cp1[sel], cp2_eur_per_mw2=cp2[sel])
    for table in ("gen", "ext_grid"):  # a voltage set-point outside its bus's limits is moved onto them
        if len(n[table]):
            lo = n.bus.loc[n[table]["bus"], "min_vm_pu"].to_numpy()
            hi = n.bus.loc[n[table]["bus"], "max_vm_pu"].to_numpy()
            n[table]["vm_pu"] = np.clip(n[table]["vm_pu"].to_numpy(dtype=float), lo, hi)
    pdd.gens = gens
    return pdd


def _one_slack(pdd: PandapowerDispatch, gens: pd.DataFrame, p_mw: np.ndarray) -> None:
    """Every ext_grid but the first becomes a gen (pandapower's OPF takes one slack per area and would otherwise turn
    them into gens itself, free in P); ``gens`` (the element map) follows."""
    import pandapower as pp

    n = pdd.net
    rows = np.flatnonzero((gens["element_type"] == "ext_grid").to_numpy())
    for k in rows[1:]:
        idx = int(gens.at[k, "element"])
        eg = n.ext_grid.loc[idx]
        new = pp.create_gen(n, bus=int(eg["bus"]), p_mw=float(p_mw[k]), vm_pu=float(eg["vm_pu"]))
        n.ext_grid.drop(idx, inplace=True)
        gens.at[k, "element_type"], gens.at[k, "element"] = "gen", int(new)
    pdd.gens = gens


def _set_points(pdd: PandapowerDispatch) -> np.ndarray:
    """The P set-points (MW) the OPF network holds, per generator (the slack's: its limits' midpoint, unused)."""
    n = pdd.net
    out = np.zeros(len(pdd.gens))
    for k, (et, idx) in enumerate(zip(pdd.gens["element_type"], pdd.gens["element"])):
        row = n[et].loc[int(idx)]
        out[k] = float(row["p_mw"]) if et != "ext_grid" else 0.0
    return out


def _take_opf_set_points(n) -> None:
    """The OPF's P, Q and voltages as the set-points of the power flow that checks them."""
    if len(n.gen):
        n.gen["p_mw"] = n.res_gen["p_mw"].to_numpy()
        n.gen["vm_pu"] = n.res_gen["vm_pu"].to_numpy()
    if len(n.sgen):
        n.sgen["p_mw"] = n.res_sgen["p_mw"].to_numpy()
        n.sgen["q_mvar"] = n.res_sgen["q_mvar"].to_numpy()
    if len(n.ext_grid):
        n.ext_grid["vm_pu"] = n.res_bus.loc[n.ext_grid["bus"], "vm_pu"].to_numpy()


# --------------------------------------------------------------------------- figures


def _outputs(pdd: PandapowerDispatch) -> tuple[np.ndarray, np.ndarray]:
    """Each generator's P and Q (MW, MVAr) at the power flow's solution."""
    n = pdd.net
    p = np.zeros(len(pdd.gens))
    q = np.zeros(len(pdd.gens))
    for et in ("ext_grid", "gen", "sgen"):
        sel = (pdd.gens["element_type"] == et).to_numpy()
        if sel.any():
            res = n[f"res_{et}"].loc[pdd.gens["element"].to_numpy()[sel]]
            p[sel] = res["p_mw"].to_numpy(dtype=float)
            q[sel] = res["q_mvar"].to_numpy(dtype=float)
    return p, q


def _slack_rows(pdd: PandapowerDispatch) -> np.ndarray:
    return (pdd.gens["element_type"] == "ext_grid").to_numpy()


def _q_violation(pdd: PandapowerDispatch, q: np.ndarray) -> np.ndarray:
    """Per generator, how far its Q lies outside [qmin, qmax] (MVAr; the limits of its pandapower element)."""
    n = pdd.net
    lo = np.full(len(q), -np.inf)
    hi = np.full(len(q), np.inf)
    for et in ("ext_grid", "gen", "sgen"):
        sel = (pdd.gens["element_type"] == et).to_numpy()
        table = n[et]
        if sel.any() and "min_q_mvar" in table:
            rows = table.loc[pdd.gens["element"].to_numpy()[sel]]
            lo[sel] = rows["min_q_mvar"].to_numpy(dtype=float)
            hi[sel] = rows["max_q_mvar"].to_numpy(dtype=float)
    lo, hi = np.nan_to_num(lo, nan=-np.inf), np.nan_to_num(hi, nan=np.inf)
    viol = np.maximum(np.maximum(lo - q, q - hi), 0.0)
    return np.where(viol > Q_TOL_MVAR, viol, 0.0)


def _voltage_violation(pdd: PandapowerDispatch, net: Network) -> float:
    vm = pdd.net.res_bus["vm_pu"].reindex(pdd.buses).to_numpy(dtype=float)
    viol = np.fmax(np.fmax(net.vmin - vm, vm - net.vmax), 0.0)
    viol = np.where(viol > VOLTAGE_TOL, viol, 0.0)
    return float(viol.max(initial=0.0))


def _loading(pdd: PandapowerDispatch, net: Network) -> float | None:
    """The most loaded branch with a rating of its own (%), None when no branch has one."""
    rated = np.isfinite(net.rate_a) & (net.rate_a > 0)
    if pdd.branches is None or not rated.any():
        return None
    loads = []
    for et in ("line", "trafo", "impedance"):
        sel = ((pdd.branches["element_type"] == et).to_numpy()) & rated
        res = pdd.net.get(f"res_{et}")
        if sel.any() and res is not None and "loading_percent" in res:
            loads.append(res["loading_percent"].reindex(pdd.branches["element"].to_numpy()[sel]).to_numpy(dtype=float))
    vals = np.concatenate(loads) if loads else np.zeros(0)
    return float(np.nanmax(vals)) if np.isfinite(vals).any() else None


def ac_branch_flows(net: Network, vm: np.ndarray, va: np.ndarray) -> dict[str, np.ndarray]:
    """Every branch's flows (p.u.; ``pf``, ``qf`` into it at its from end, ``pt``, ``qt`` at its to end) at bus voltage
    magnitudes ``vm`` and angles ``va`` (radians): the relaxation's flow equations at w = vm², wr + j·wi =
    V_f V_t e^{j(θ_f − θ_t)} (docs/formulation.md), which are the AC ones (tests/test_pandapower_io.py)."""
    cf = branch_flow_coefficients(net)
    f, t = net.f_bus, net.t_bus
    w = vm**2
    prod = vm[f] * vm[t]
    wr, wi = prod * np.cos(va[f] - va[t]), prod * np.sin(va[f] - va[t])
    out = {}
    for kind in ("pf", "qf", "pt", "qt"):
        end = f if kind[1] == "f" else t
        out[kind] = cf[kind + "_w"] * w[end] + cf[kind + "_wr"] * wr + cf[kind + "_wi"] * wi
    return out


def _tie_deviation(pdd: PandapowerDispatch, net: Network, held) -> dict[str, float | None]:
    """At the power flow's solution: the largest |AC flow − held value| (MW) over the held tie-line ends
    (``tie_deviation_mw``), and over the zones, of the sum of their own held ends (``exchange_deviation_mw``)."""
    out: dict[str, float | None] = {"tie_deviation_mw": None, "exchange_deviation_mw": None}
    if not held or pdd.buses is None:
        return out
    flows_mw, zone_of_bus = held
    res = pdd.net.res_bus.reindex(pdd.buses)
    flows = ac_branch_flows(net, res["vm_pu"].to_numpy(dtype=float), np.deg2rad(res["va_degree"].to_numpy(dtype=float)))
    keys = [(kind, br) for kind, br in flows_mw if kind in flows]
    if not keys:
        return out
    dev = np.array([float(flows[kind][br]) * net.base_mva - flows_mw[(kind, br)] for kind, br in keys])
    out["tie_deviation_mw"] = float(np.abs(dev).max())
    if zone_of_bus is not None:
        ends = np.array([net.f_bus[br] if kind == "pf" else net.t_bus[br] for kind, br in keys])
        zones = np.asarray(zone_of_bus)[ends]
        out["exchange_deviation_mw"] = float(np.abs(np.bincount(zones, weights=dev)).max())
    return out


def _cost(net: Network, p_mw: np.ndarray) -> float | None:
    """Every generator's own cost at its AC output ($/h); None without costs."""
    if not net.has_costs:
        return None
    return float(generator_costs(net, np.asarray(p_mw, dtype=float) / net.base_mva).sum())


def _cost_slope(net: Network, pg: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """d cost/d p at ``pg`` ($/h per p.u.): a piecewise-linear cost's slope there (a polynomial's is not used)."""
    if not len(net.pwl_gen):
        return np.zeros(net.n_gen)
    up = generator_costs(net, np.asarray(pg, dtype=float) + h)
    down = generator_costs(net, np.asarray(pg, dtype=float) - h)
    return np.nan_to_num((up - down) / (2 * h))


def check_evaluable(net: Network) -> None:
    """A network the evaluation can price (costs)."""
    if not net.has_costs:
        raise ModelError(f"{net.name} has no costs: the operator's evaluation prices the AC operating point")
