"""The W-space SOC relaxation of AC power flow as a Pyomo model (docs/formulation.md).

One builder serves the whole network and a single zone (docs/formulation.md): pass the
buses a model *owns*; it then also holds copies of the neighbouring buses at
the far end of its tie-lines, every branch with an end among its own buses,
the generators at its own buses, and power-balance terms for its own buses
only. Components are indexed by the network's global indices (bus, bus pair,
branch, generator), so the same variable has the same key in every zone's
model: ``("w", bus)``, ``("wr", pair)``, ``("wi", pair)``, ``("pf", branch)``,
``("qf", …)``, ``("pt", …)``, ``("qt", …)``, ``("pg", gen)``, ``("qg", gen)``, and for
HVDC lines ``("p_dc_fr", dcline)``, ``("p_dc_to", …)``, ``("q_dc_fr", …)``, ``("q_dc_to", …)``.
A zone holds the active powers of every HVDC line with an end among its own buses (both
ends' zones hold them, so a line between zones couples them like a tie-line) and the
reactive power of each end it owns.

Objectives: ``cost`` (generation cost, power balance as constraints),
``shedding`` (Σ (yp_i + pd_i)² + (yq_i + qd_i)² over own buses) and
``cost+shedding`` (generation cost + ω times the shedding sum). For
``shedding`` and ``cost+shedding`` the model holds the paper's balance variables ``("yp", bus)``,
``("yq", bus)`` (its eq. 71–72): the load-free part of each own bus's balance,
defined by equality rows ``balance_def`` that hold no load. Balance is not
constrained, so the feasible set does not depend on the loads, and the loads
enter only the objective, through one y entry each.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import ModelError
from ..grid.network import Network, voltage_product_bounds
from .objectives import objective_unit, resolve_shedding_weight
from .pyomo_lazy import pyo

__all__ = ["build_model", "zone_model_elements", "ZoneElements", "FLOW_MODES", "BALANCE_VARIABLES", "DCLINE_VARIABLES", "branch_flow_coefficients", "zone_dclines"]

FLOW_MODES = ("variables", "expressions")
BALANCE_VARIABLES = ("yp", "yq")  # the load-free balance of each own bus (private objectives only)
DCLINE_VARIABLES = ("p_dc_fr", "p_dc_to", "q_dc_fr", "q_dc_to")  # powers entering each HVDC line at its ends
Objective = str  # a name in powerdp.opf.objectives.OBJECTIVES
FlowMode = Literal["variables", "expressions"]


def branch_flow_coefficients(net: Network) -> dict[str, np.ndarray]:
    """Per-branch coefficients of the flows as linear functions of (w_f, w_t, wr, wi) (docs/formulation.md).

    ``wr``/``wi`` are oriented from the branch's f to its t bus. Returns arrays
    ``pf_w, pf_wr, pf_wi, qf_w, qf_wr, qf_wi, pt_w, pt_wr, pt_wi, qt_w, qt_wr, qt_wi``.
    """
    z = net.r + 1j * net.x
    y = 1.0 / z
    g, b = y.real, y.imag
    tm = net.tap
    tr, ti = tm * np.cos(net.shift), tm * np.sin(net.shift)
    tm2 = tm**2
    return {
        "pf_w": (g + net.g_fr) / tm2,
        "pf_wr": (-g * tr + b * ti) / tm2,
        "pf_wi": (-b * tr - g * ti) / tm2,
        "qf_w": -(b + net.b_fr) / tm2,
        "qf_wr": -(-b * tr - g * ti) / tm2,
        "qf_wi": (-g * tr + b * ti) / tm2,
        "pt_w": g + net.g_to,
        "pt_wr": (-g * tr - b * ti) / tm2,
        "pt_wi": -(-b * tr + g * ti) / tm2,
        "qt_w": -(b + net.b_to),
        "qt_wr": -(-b * tr + g * ti) / tm2,
        "qt_wi": -(-g * tr - b * ti) / tm2,
    }


def _zone_elements(net: Network, own: np.ndarray):
    own_mask = np.zeros(net.n_bus, dtype=bool)
    own_mask[own] = True
    branches = np.flatnonzero(own_mask[net.f_bus] | own_mask[net.t_bus])
    buses = np.union1d(own, np.concatenate([net.f_bus[branches], net.t_bus[branches]]))
    pairs = np.unique(net.branch_pair[branches])
    gens = np.flatnonzero(own_mask[net.gen_bus])
    return buses, branches, pairs, gens


def zone_dclines(net: Network, own_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HVDC lines of a model owning the buses of ``own_mask`` (docs/formulation.md): those with an end
    among them (p_dc_fr, p_dc_to and the loss relation), those whose from end (q_dc_fr, the line's
    cost) and whose to end (q_dc_to) is among them."""
    dc = net.dcline
    fr, to = own_mask[dc.f_bus], own_mask[dc.t_bus]
    return np.flatnonzero(fr | to), np.flatnonzero(fr), np.flatnonzero(to)


@dataclass(frozen=True)
class ZoneElements:
    """What a zone's model holds (docs/formulation.md), checked: its objective unit and ω, its own buses, the
    buses, branches, bus pairs and generators of its model, and its HVDC lines (zone_dclines)."""

    unit: Any
    weight: float | None
    own: np.ndarray
    own_mask: np.ndarray
    buses: np.ndarray
    branches: np.ndarray
    pairs: np.ndarray
    gens: np.ndarray
    dclines: np.ndarray
    dclines_fr: np.ndarray
    dclines_to: np.ndarray


def zone_model_elements(net: Network, own_buses: Iterable[int] | None, objective: Objective, flows: FlowMode,
                        shedding_weight: float | str | None) -> ZoneElements:
    """Check a model's arguments (build_model's) and gather the elements it holds."""
    unit = objective_unit(objective)
    if flows not in FLOW_MODES:
        raise ModelError(f"unknown flow mode {flows!r}; choose one of {', '.join(FLOW_MODES)}")
    unit.check(net)
    weight = resolve_shedding_weight(objective, shedding_weight, net)
    own = np.arange(net.n_bus) if own_buses is None else np.unique(np.asarray(list(own_buses), dtype=np.int64))
    if own.size == 0:
        raise ModelError("a model needs at least one bus")
    if own.min() < 0 or own.max() >= net.n_bus:
        raise ModelError(f"bus index out of range 0..{net.n_bus - 1} in own_buses")
    buses, branches, pairs, gens = _zone_elements(net, own)
    own_mask = np.zeros(net.n_bus, dtype=bool)
    own_mask[own] = True
    return ZoneElements(unit, weight, own, own_mask, buses, branches, pairs, gens, *zone_dclines(net, own_mask))


def build_model(
    net: Network,
    own_buses: Iterable[int] | None = None,
    objective: Objective = "cost",
    flows: FlowMode = "variables",
    name: str | None = None,
    shedding_weight: float | str | None = None,
) -> pyo.ConcreteModel:
    """Build the SOC relaxation (docs/formulation.md) for the whole network or one zone (docs/formulation.md).

    Parameters
    ----------
    net: the network.
    own_buses: internal indices of the buses the model owns (a zone's N_p); all buses when omitted.
    objective: a registered objective (``powerdp.opf.objectives.OBJECTIVES``: ``"cost"``, ``"shedding"``).
    flows: ``"variables"`` (flows are variables linked by equalities, as in the paper and
        PowerModels) or ``"expressions"`` (flows eliminated, docs/formulation.md; same optimum, smaller problem).
    shedding_weight: ω of a weighted objective (``"cost+shedding"``), $/h per p.u.²; None or ``"auto"``
        scales it to the network's costs (``powerdp.opf.objectives.auto_shedding_weight``). Refused for
        an objective without a shedding penalty.
    """
    z = zone_model_elements(net, own_buses, objective, flows, shedding_weight)
    unit, weight, own, buses, branches, pairs, gens = z.unit, z.weight, z.own, z.buses, z.branches, z.pairs, z.gens
    dclines, dclines_fr, dclines_to = z.dclines, z.dclines_fr, z.dclines_to
    pm = net.convention == "powermodels"

    m = pyo.ConcreteModel(name=name or net.name)
    m.BUS = pyo.Set(initialize=buses.tolist(), ordered=True)
    m.OWN = pyo.Set(initialize=own.tolist(), ordered=True)
    m.BRANCH = pyo.Set(initialize=branches.tolist(), ordered=True)
    m.PAIR = pyo.Set(initialize=pairs.tolist(), ordered=True)
    m.GEN = pyo.Set(initialize=gens.tolist(), ordered=True)
    m.DCLINE = pyo.Set(initialize=dclines.tolist(), ordered=True)
    m.DCLINE_FR = pyo.Set(initialize=dclines_fr.tolist(), ordered=True)
    m.DCLINE_TO = pyo.Set(initialize=dclines_to.tolist(), ordered=True)

    # ---- variables
    vmin2, vmax2 = net.vmin**2, net.vmax**2
    m.w = pyo.Var(m.BUS, bounds=lambda _, i: (vmin2[i], vmax2[i]), initialize=1.0)
    if pm:
        wr_min, wr_max, wi_min, wi_max = voltage_product_bounds(net)
        # flat start (wr = 1, wi = 0) moved inside the voltage-product bounds
        m.wr = pyo.Var(m.PAIR, bounds=lambda _, p: (wr_min[p], wr_max[p]), initialize=lambda _, p: float(np.clip(1.0, wr_min[p], wr_max[p])))
        m.wi = pyo.Var(m.PAIR, bounds=lambda _, p: (wi_min[p], wi_max[p]), initialize=lambda _, p: float(np.clip(0.0, wi_min[p], wi_max[p])))
    else:
        m.wr = pyo.Var(m.PAIR, initialize=1.0)
        m.wi = pyo.Var(m.PAIR, initialize=0.0)
    m.pg = pyo.Var(m.GEN, bounds=lambda _, g: (net.pmin[g], net.pmax[g]), initialize=lambda _, g: 0.5 * (net.pmin[g] + net.pmax[g]))
    m.qg = pyo.Var(m.GEN, bounds=lambda _, g: (net.qmin[g], net.qmax[g]), initialize=lambda _, g: 0.5 * (net.qmin[g] + net.qmax[g]))

    # ---- HVDC lines (docs/formulation.md; PowerModels' variable_dcline_power, constraint_dcline_power_losses):
    # powers entering the line at each end, (1 - loss1) p_fr + p_to = loss0
    dc = net.dcline

    def dc_var(index, lo, hi):  # bounded, started at 0 moved inside the bounds
        return pyo.Var(index, bounds=lambda _, l: (lo[l], hi[l]), initialize=lambda _, l: float(np.clip(0.0, lo[l], hi[l])))

    m.p_dc_fr = dc_var(m.DCLINE, dc.pminf, dc.pmaxf)
    m.p_dc_to = dc_var(m.DCLINE, dc.pmint, dc.pmaxt)
    m.q_dc_fr = dc_var(m.DCLINE_FR, dc.qminf, dc.qmaxf)
    m.q_dc_to = dc_var(m.DCLINE_TO, dc.qmint, dc.qmaxt)
    m.dcline_loss = pyo.Constraint(
        m.DCLINE, rule=lambda _, l: (1.0 - dc.loss1[l]) * m.p_dc_fr[l] + m.p_dc_to[l] == dc.loss0[l]
    )

    # ---- branch flows (docs/formulation.md), wr/wi oriented from the branch's f to its t bus
    cf = branch_flow_coefficients(net)
    fb, tb, bp, sg = net.f_bus, net.t_bus, net.branch_pair, net.branch_pair_sign

    def flow_expr(kind: str, l: int):
        end = fb[l] if kind[1] == "f" else tb[l]
        return cf[kind + "_w"][l] * m.w[end] + cf[kind + "_wr"][l] * m.wr[bp[l]] + cf[kind + "_wi"][l] * sg[l] * m.wi[bp[l]]

    rate = net.rate_a
    if flows == "variables":
        def fbounds(_, l):
            return (-rate[l], rate[l]) if np.isfinite(rate[l]) else (None, None)

        for kind in ("pf", "qf", "pt", "qt"):
            setattr(m, kind, pyo.Var(m.BRANCH, bounds=fbounds, initialize=0.0))
        m.ohm = pyo.Constraint(
            m.BRANCH,
            ["pf", "qf", "pt", "qt"],
            rule=lambda _, l, kind: getattr(m, kind)[l] == flow_expr(kind, l),
        )
    else:
        for kind in ("pf", "qf", "pt", "qt"):
            setattr(m, kind, pyo.Expression(m.BRANCH, rule=lambda _, l, kind=kind: flow_expr(kind, l)))

    # ---- W-space constraints per bus pair
    pf_, pt_ = net.pair_f, net.pair_t
    m.soc = pyo.Constraint(m.PAIR, rule=lambda _, p: m.wr[p] ** 2 + m.wi[p] ** 2 <= m.w[pf_[p]] * m.w[pt_[p]])
    amin, amax = net.pair_angmin, net.pair_angmax
    half_pi = np.pi / 2
    lo_ok = np.isfinite(amin) & (np.abs(amin) < half_pi)
    hi_ok = np.isfinite(amax) & (np.abs(amax) < half_pi)
    m.PAIR_ANG_LO = pyo.Set(initialize=[p for p in pairs.tolist() if lo_ok[p]], ordered=True)
    m.PAIR_ANG_HI = pyo.Set(initialize=[p for p in pairs.tolist() if hi_ok[p]], ordered=True)
    m.angle_lo = pyo.Constraint(m.PAIR_ANG_LO, rule=lambda _, p: m.wi[p] >= np.tan(amin[p]) * m.wr[p])
    m.angle_hi = pyo.Constraint(m.PAIR_ANG_HI, rule=lambda _, p: m.wi[p] <= np.tan(amax[p]) * m.wr[p])
    if pm:
        # lifted nonlinear cuts (PowerModels cut_complex_product_and_angle_difference)
        both = lo_ok & hi_ok & (amin < amax)
        m.PAIR_LNC = pyo.Set(initialize=[p for p in pairs.tolist() if both[p]], ordered=True)
        vf_lb, vf_ub, vt_lb, vt_ub = net.vmin[pf_], net.vmax[pf_], net.vmin[pt_], net.vmax[pt_]
        phi, d = (amax + amin) / 2, (amax - amin) / 2
        sf, st = vf_lb + vf_ub, vt_lb + vt_ub

        def lnc(_, p, k):
            lhs = sf[p] * st[p] * (np.cos(phi[p]) * m.wr[p] + np.sin(phi[p]) * m.wi[p])
            if k == 1:
                lhs = lhs - vt_ub[p] * np.cos(d[p]) * st[p] * m.w[pf_[p]] - vf_ub[p] * np.cos(d[p]) * sf[p] * m.w[pt_[p]]
                rhs = vf_ub[p] * vt_ub[p] * np.cos(d[p]) * (vf_lb[p] * vt_lb[p] - vf_ub[p] * vt_ub[p])
            else:
                lhs = lhs - vt_lb[p] * np.cos(d[p]) * st[p] * m.w[pf_[p]] - vf_lb[p] * np.cos(d[p]) * sf[p] * m.w[pt_[p]]
                rhs = -vf_lb[p] * vt_lb[p] * np.cos(d[p]) * (vf_lb[p] * vt_lb[p] - vf_ub[p] * vt_ub[p])
            return lhs >= rhs

        m.lnc = pyo.Constraint(m.PAIR_LNC, [1, 2], rule=lnc)

    # ---- thermal limits at both ends
    m.RATED = pyo.Set(initialize=[l for l in branches.tolist() if np.isfinite(rate[l])], ordered=True)
    m.thermal = pyo.Constraint(
        m.RATED,
        ["f", "t"],
        rule=lambda _, l, e: getattr(m, "p" + e)[l] ** 2 + getattr(m, "q" + e)[l] ** 2 <= rate[l] ** 2,
    )

    # ---- power balance terms of own buses (docs/formulation.md); loads are mutable parameters
    leaving, entering, at_bus = defaultdict(list), defaultdict(list), defaultdict(list)
    for l in branches.tolist():
        leaving[int(fb[l])].append(l)
        entering[int(tb[l])].append(l)
    for g in gens.tolist():
        at_bus[int(net.gen_bus[g])].append(g)
    dc_fr_at, dc_to_at = defaultdict(list), defaultdict(list)  # HVDC line ends at own buses
    for l in dclines_fr.tolist():
        dc_fr_at[int(dc.f_bus[l])].append(l)
    for l in dclines_to.tolist():
        dc_to_at[int(dc.t_bus[l])].append(l)
    m.pd = pyo.Param(m.OWN, initialize=lambda _, i: float(net.pd[i]), mutable=True)
    m.qd = pyo.Param(m.OWN, initialize=lambda _, i: float(net.qd[i]), mutable=True)

    def injection_p(i):  # the load-free part of the active balance at bus i (docs/formulation.md)
        return (
            sum(m.pf[l] for l in leaving[i]) + sum(m.pt[l] for l in entering[i])
            + sum(m.p_dc_fr[l] for l in dc_fr_at[i]) + sum(m.p_dc_to[l] for l in dc_to_at[i])
            - sum(m.pg[g] for g in at_bus[i]) + float(net.gs[i]) * m.w[i]
        )

    def injection_q(i):
        return (
            sum(m.qf[l] for l in leaving[i]) + sum(m.qt[l] for l in entering[i])
            + sum(m.q_dc_fr[l] for l in dc_fr_at[i]) + sum(m.q_dc_to[l] for l in dc_to_at[i])
            - sum(m.qg[g] for g in at_bus[i]) - float(net.bs[i]) * m.w[i]
        )

    if not unit.balance_variables:
        m.sp = pyo.Expression(m.OWN, rule=lambda _, i: injection_p(i) + m.pd[i])
        m.sq = pyo.Expression(m.OWN, rule=lambda _, i: injection_q(i) + m.qd[i])
    else:
        # the paper's coordinates (its eq. 71-72): explicit balance variables y per own bus, defined by
        # load-free equality rows of W_p, so the loads enter only the objective (docs/formulation.md)
        m.yp = pyo.Var(m.OWN, initialize=lambda _, i: pyo.value(injection_p(i)))
        m.yq = pyo.Var(m.OWN, initialize=lambda _, i: pyo.value(injection_q(i)))
        m.balance_def = pyo.Constraint(
            m.OWN,
            ["p", "q"],
            rule=lambda _, i, k: (m.yp[i] if k == "p" else m.yq[i]) - (injection_p(i) if k == "p" else injection_q(i)) == 0,
        )
        m.sp = pyo.Expression(m.OWN, rule=lambda _, i: m.yp[i] + m.pd[i])
        m.sq = pyo.Expression(m.OWN, rule=lambda _, i: m.yq[i] + m.qd[i])

    # ---- objective (a registered unit, powerdp/objectives.py)
    unit.add_terms(m, net, weight)
    m._powerdp_meta = {
        "network": net.name,
        "objective": objective,
        "shedding_weight": weight,
        "flows": flows,
        "own": own,
        "buses": buses,
        "branches": branches,
        "pairs": pairs,
        "gens": gens,
        "dclines": dclines,
    }
    return m
