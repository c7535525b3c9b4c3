"""Objectives as registered units (docs/formulation.md; how to add one: docs/contributing.md).

An :class:`ObjectiveUnit` says everything the rest of powerdp needs to know
about an objective:

* its model terms (a function that adds the objective, and any constraint it
  needs, to a zone's or the whole network's Pyomo model);
* where the private data (the loads) enter: only the objective, through the
  balance variables y (``private_data="objective"``: DP algorithms may use
  it), or the constraints (``"constraints"``: DP algorithms refuse it);
* its gradient-sensitivity rule, for objective perturbation;
* whether it takes the shedding weight ω (``weighted``), and how ω defaults.

Config validation, the CLI's choices and the DP eligibility check all read
:data:`OBJECTIVES`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError
from ..grid.network import missing_costs_message
from ..privacy import Sensitivity, gradient_sensitivity
from .pyomo_lazy import pyo

__all__ = [
    "ObjectiveUnit", "OBJECTIVES", "objective_unit", "auto_shedding_weight", "resolve_shedding_weight",
    "generation_cost", "generator_costs", "total_shedding_mw", "SHEDDING_TOLERANCE",
]

#: the total shedding (p.u., Σ over buses of |yp + pd| + |yq + qd|) that ``auto`` ω allows at the optimum
SHEDDING_TOLERANCE = 1e-3


@dataclass(frozen=True)
class ObjectiveUnit:
    name: str
    summary: str
    unit: str  # of the objective value
    #: "objective": the loads enter only the objective, through y (DP may be used);
    #: "constraints": the loads sit in the constraints (no DP guarantee)
    private_data: str
    #: add the objective (and any constraint it needs) to a model whose balance terms sp/sq exist;
    #: called as add_terms(model, net, weight) with weight the shedding weight ω (None if not ``weighted``)
    add_terms: Callable[[pyo.ConcreteModel, Any, float | None], None]
    #: (beta, rule, adjacency) -> sensitivity of ∇f_p for ω = 1; None when DP is impossible
    sensitivity: Callable[[float, str, str], Sensitivity] | None = None
    #: refuse a network this objective cannot be built for (raise ModelError)
    check: Callable[[Any], None] = lambda net: None
    #: the objective takes the shedding weight ω (its shedding term is ω·Σ (y + d)²)
    weighted: bool = False
    #: besides the terms on y it has terms that hold no load (the generation cost), which the
    #: linearized updates may keep exact (RunConfig.linearize = "private")
    data_free_terms: bool = False
    #: the optimum has prices: the consensus duals λ* are not zero (a generation cost). Without them (``shedding``:
    #: a feasibility problem, λ* = 0) a relative dual residual ‖ρB(w − w_prev)‖/‖λ‖ has no scale, and residual
    #: balancing on it drove ρ down without end (case14: the consensus residual grew from round 10 to round 300)
    priced: bool = False

    @property
    def dp_eligible(self) -> bool:
        return self.private_data == "objective"

    @property
    def balance_variables(self) -> bool:
        """Whether the model holds the balance variables y (the loads then enter only through y)."""
        return self.private_data == "objective"

    def gradient_sensitivity(self, beta: float, rule: str, adjacency: str, weight: float | None = None) -> Sensitivity:
        """Sensitivity of ∇f_p; a weighted objective's is ω times the unit rule's (∇ of ω(y + d)² is 2ω(y + d))."""
        if self.sensitivity is None:
            raise ModelError(f"objective {self.name!r} has no gradient-sensitivity rule: {self.dp_refusal()}")
        sens = self.sensitivity(beta, rule, adjacency)
        if not self.weighted:
            return sens
        w = _check_weight(weight, self.name)
        return Sensitivity(
            l1=w * sens.l1, l2=w * sens.l2, rule=sens.rule, beta=sens.beta, note=f"{sens.note}; times ω = {w:g}", coordinates=sens.coordinates
        )

    def dp_refusal(self) -> str:
        """Why a DP algorithm cannot use this objective, and what to use instead."""
        alternatives = " or ".join(repr(n) for n, u in OBJECTIVES.items() if u.dp_eligible)
        dispatch = [repr(n) for n, u in OBJECTIVES.items() if u.dp_eligible and u.weighted]
        hint = f" (for a private generation-cost dispatch: {' or '.join(dispatch)})" if dispatch else ""
        return (
            f"the {self.name!r} objective keeps the loads in the power-balance constraints, so the feasible set depends on "
            f"private data and no DP guarantee holds (docs/privacy.md); use objective {alternatives}{hint}"
        )


# ----------------------------------------------------------------------------- cost


def _cost_check(net) -> None:
    if not net.has_costs:
        raise ModelError(missing_costs_message(net))


def _cost_terms(m: pyo.ConcreteModel, net, weight: float | None = None) -> None:
    """Generation cost, with the power balance as constraints (docs/formulation.md)."""
    m.balance_p = pyo.Constraint(m.OWN, rule=lambda _, i: m.sp[i] == 0)
    m.balance_q = pyo.Constraint(m.OWN, rule=lambda _, i: m.sq[i] == 0)
    m.obj = pyo.Objective(expr=_generation_cost(m, net), sense=pyo.minimize)


def _generation_cost(m: pyo.ConcreteModel, net):
    """Σ_g cost_g(pg_g) of the model's generators ($/h); adds the piecewise-linear cost rows it needs."""
    gens = list(m.GEN)
    gen_set = set(gens)
    pwl_rows = [k for k in range(len(net.pwl_gen)) if int(net.pwl_gen[k]) in gen_set]
    pwl_gens = sorted({int(net.pwl_gen[k]) for k in pwl_rows})
    m.PWL = pyo.Set(initialize=pwl_rows, ordered=True)
    m.PWL_GEN = pyo.Set(initialize=pwl_gens, ordered=True)
    # PowerModels' lambda formulation of piecewise-linear costs
    m.pwl_lambda = pyo.Var(m.PWL, bounds=(0.0, 1.0), initialize=0.0)
    rows_of = defaultdict(list)
    for k in pwl_rows:
        rows_of[int(net.pwl_gen[k])].append(k)
    m.pwl_convex = pyo.Constraint(m.PWL_GEN, rule=lambda _, g: sum(m.pwl_lambda[k] for k in rows_of[g]) == 1.0)
    m.pwl_mw = pyo.Constraint(m.PWL_GEN, rule=lambda _, g: sum(net.pwl_mw[k] * m.pwl_lambda[k] for k in rows_of[g]) == m.pg[g])
    poly = [g for g in gens if g not in rows_of]
    expr = sum(net.cost_c2[g] * m.pg[g] ** 2 + net.cost_c1[g] * m.pg[g] + net.cost_c0[g] for g in poly) + sum(
        net.pwl_cost[k] * m.pwl_lambda[k] for k in pwl_rows
    )
    if len(m.DCLINE_FR):
        expr = expr + _dcline_cost(m, net)
    return expr


def _dcline_cost(m: pyo.ConcreteModel, net):
    """HVDC line costs on the power entering at the from end (PowerModels' objective_variable_dc_cost),
    counted by the model that owns the from bus; piecewise-linear ones in the same lambda form."""
    dc = net.dcline
    lines = list(m.DCLINE_FR)
    line_set = set(lines)
    pwl_rows = [k for k in range(len(dc.pwl_line)) if int(dc.pwl_line[k]) in line_set]
    rows_of = defaultdict(list)
    for k in pwl_rows:
        rows_of[int(dc.pwl_line[k])].append(k)
    m.PWL_DC = pyo.Set(initialize=pwl_rows, ordered=True)
    m.PWL_DCLINE = pyo.Set(initialize=sorted(rows_of), ordered=True)
    m.pwl_dc_lambda = pyo.Var(m.PWL_DC, bounds=(0.0, 1.0), initialize=0.0)
    m.pwl_dc_convex = pyo.Constraint(m.PWL_DCLINE, rule=lambda _, l: sum(m.pwl_dc_lambda[k] for k in rows_of[l]) == 1.0)
    m.pwl_dc_mw = pyo.Constraint(
        m.PWL_DCLINE, rule=lambda _, l: sum(dc.pwl_mw[k] * m.pwl_dc_lambda[k] for k in rows_of[l]) == m.p_dc_fr[l]
    )
    poly = [l for l in lines if l not in rows_of]
    return sum(dc.cost_c2[l] * m.p_dc_fr[l] ** 2 + dc.cost_c1[l] * m.p_dc_fr[l] + dc.cost_c0[l] for l in poly) + sum(
        dc.pwl_cost[k] * m.pwl_dc_lambda[k] for k in pwl_rows
    )


# ----------------------------------------------------------------------------- shedding


def _shedding_sum(m: pyo.ConcreteModel):
    return sum(m.sp[i] ** 2 + m.sq[i] ** 2 for i in m.OWN)


def _shedding_terms(m: pyo.ConcreteModel, net, weight: float | None = None) -> None:
    """Σ_i (yp_i + pd_i)² + (yq_i + qd_i)² over own buses (the paper's f_p)."""
    m.obj = pyo.Objective(expr=_shedding_sum(m), sense=pyo.minimize)


# ----------------------------------------------------------------------------- cost+shedding


def _cost_shedding_terms(m: pyo.ConcreteModel, net, weight: float | None) -> None:
    """Σ_g cost_g(pg) + ω Σ_i (yp_i + pd_i)² + (yq_i + qd_i)² (docs/formulation.md, "Private dispatch").

    Balance is not constrained (a soft balance): the loads enter only the shedding
    penalty, through y, exactly as in ``shedding``; the cost term holds no load.
    """
    m.obj = pyo.Objective(expr=_generation_cost(m, net) + float(weight) * _shedding_sum(m), sense=pyo.minimize)


def _check_weight(weight: Any, objective: str) -> float:
    if isinstance(weight, bool) or not isinstance(weight, (int, float, np.floating, np.integer)) or not (
        np.isfinite(weight) and weight > 0
    ):
        raise ModelError(f"shedding_weight = {weight!r}: the {objective!r} objective needs a positive, finite ω ($/h per p.u.²)")
    return float(weight)


def median_marginal_cost(net) -> float | None:
    """The median over generators of the marginal cost at mid-range output ($/h per p.u.; for a
    piecewise-linear cost the median segment slope); None when no generator has a positive one."""
    slopes = []
    if net.n_gen:
        mid = (net.pmin + net.pmax) / 2
        poly = np.ones(net.n_gen, dtype=bool)
        poly[np.unique(net.pwl_gen)] = False
        slopes.extend((net.cost_c1 + 2 * net.cost_c2 * mid)[poly].tolist())
    for g in np.unique(net.pwl_gen):
        k = net.pwl_gen == g
        dmw, dc = np.diff(net.pwl_mw[k]), np.diff(net.pwl_cost[k])
        ok = dmw > 0
        if ok.any():
            slopes.append(float(np.median(dc[ok] / dmw[ok])))
    slopes = np.abs(np.asarray(slopes, dtype=float))
    slopes = slopes[np.isfinite(slopes) & (slopes > 0)]
    return float(np.median(slopes)) if len(slopes) else None


def auto_shedding_weight(net) -> float:
    """ω = n_bus · mc / (2 · SHEDDING_TOLERANCE) ($/h per p.u.², docs/formulation.md), mc the median marginal cost.

    At the optimum bus i sheds s_i with 2ω·s_i = λ_i, its marginal price; with prices near the typical
    marginal cost mc, Σ_i |s_i| ≈ n_bus · mc / (2ω) = SHEDDING_TOLERANCE (measured on case118: 0.97e-3 p.u.).
    A bound through the largest marginal cost instead would give an ω ~13× larger, whose linearized local
    problems Ipopt fails to solve on case118 (as it does at 2× this ω).
    """
    mc = median_marginal_cost(net)
    if mc is None:
        raise ModelError(f"{net.name}: no generator has a positive marginal cost, so ω cannot be scaled to the costs; give --shedding-weight")
    return float(net.n_bus * mc / (2.0 * SHEDDING_TOLERANCE))


def resolve_shedding_weight(objective: str, weight: Any, net) -> float | None:
    """The ω a model of ``objective`` is built with: None for an unweighted objective (a given ω is refused),
    ``auto``/None → :func:`auto_shedding_weight`, else the positive number given."""
    unit = objective_unit(objective)
    if not unit.weighted:
        if weight is not None:
            raise ModelError(f"shedding_weight = {weight!r}: the {objective!r} objective has no shedding penalty to weight; "
                             f"ω is used only by {', '.join(repr(n) for n, u in OBJECTIVES.items() if u.weighted)}")
        return None
    if weight is None or weight == "auto":
        _cost_check(net)
        return auto_shedding_weight(net)
    return _check_weight(weight, objective)


def generator_costs(net, pg: np.ndarray) -> np.ndarray:
    """$/h per generator at output ``pg`` (p.u.): polynomial c2·pg² + c1·pg + c0, or piecewise linear.

    A piecewise-linear cost is the largest of its segment lines at ``pg`` (MATPOWER's convex
    epigraph form; equal to interpolating between the points of a convex cost).
    """
    pg = np.asarray(pg, float)
    cost = net.cost_c2 * pg**2 + net.cost_c1 * pg + net.cost_c0
    if len(net.pwl_gen):
        g, mw, c = net.pwl_gen, net.pwl_mw, net.pwl_cost
        seg = np.flatnonzero((g[1:] == g[:-1]) & (mw[1:] > mw[:-1]))  # consecutive points of one generator
        gs = g[seg]
        slope = (c[seg + 1] - c[seg]) / (mw[seg + 1] - mw[seg])
        line = c[seg] + slope * (pg[gs] - mw[seg])
        pwl = np.full(net.n_gen, -np.inf)
        np.maximum.at(pwl, gs, line)
        # a generator whose points all sit at one MW value (no segment) costs its cheapest point there
        flat = np.full(net.n_gen, np.inf)
        np.minimum.at(flat, g, c)
        has_seg = np.isin(np.arange(net.n_gen), gs)
        cost = np.where(has_seg, pwl, np.where(np.isin(np.arange(net.n_gen), g), flat, cost))
    return cost if net.has_costs else np.full(net.n_gen, np.nan)


def generation_cost(net, pg: np.ndarray, gens: np.ndarray | None = None) -> float:
    """Σ_g cost_g(pg_g) ($/h) of generators ``gens`` (all when None) at outputs ``pg`` (p.u., same order);
    NaN for a network without costs (:func:`generator_costs` per generator)."""
    if not net.has_costs:
        return float("nan")
    gens = np.arange(net.n_gen) if gens is None else np.asarray(gens, dtype=np.int64)
    full = np.zeros(net.n_gen)
    full[gens] = np.asarray(pg, dtype=float)
    return float(generator_costs(net, full)[gens].sum())


#: objective name → unit; a new objective is one unit and one entry here
OBJECTIVES: dict[str, ObjectiveUnit] = {
    "cost": ObjectiveUnit(
        name="cost",
        summary="generation cost, power balance as constraints (the reference OPF; no DP guarantee)",
        unit="$/h",
        private_data="constraints",
        add_terms=_cost_terms,
        check=_cost_check,
        priced=True,
    ),
    "shedding": ObjectiveUnit(
        name="shedding",
        summary="the paper's Σ (yp + pd)² + (yq + qd)²; balance not constrained, loads only in the objective",
        unit="p.u.²",
        private_data="objective",
        add_terms=_shedding_terms,
        sensitivity=gradient_sensitivity,
    ),
    "cost+shedding": ObjectiveUnit(
        name="cost+shedding",
        summary="generation cost + ω·Σ (yp + pd)² + (yq + qd)²: a dispatch with soft balance, loads only in the penalty",
        unit="$/h",
        private_data="objective",
        add_terms=_cost_shedding_terms,
        sensitivity=gradient_sensitivity,
        check=_cost_check,
        weighted=True,
        data_free_terms=True,
        priced=True,
    ),
}


def objective_unit(name: str) -> ObjectiveUnit:
    """The registered unit called ``name`` (ModelError naming the known ones otherwise)."""
    try:
        return OBJECTIVES[name]
    except (KeyError, TypeError):
        raise ModelError(f"unknown objective {name!r}; choose one of {', '.join(OBJECTIVES)}") from None


def total_shedding_mw(sp: np.ndarray, base_mva: float) -> float:
    """Σ_i |sp_i| · baseMVA (MW): the active power imbalance yp + pd, shed load (sp > 0) and surplus (sp < 0) alike."""
    return float(np.abs(np.asarray(sp, dtype=float)).sum() * base_mva)
