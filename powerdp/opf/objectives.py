"""Objectives as registered units (docs/formulation.md; how to add one: docs/contributing.md).

An :class:`ObjectiveUnit` says everything the rest of powerdp needs to know
about an objective:

* its model terms (a function that adds the objective, and any constraint it
  needs, to a zone's or the whole network's Pyomo model);
* where the private data (the loads) enter: only the objective, through the
  balance variables y (``private_data="objective"``: DP algorithms may use
  it), or the constraints (``"constraints"``: DP algorithms refuse it);
* its gradient-sensitivity rule, for objective perturbation.

Config validation, the CLI's choices and the DP eligibility check all read
:data:`OBJECTIVES`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyomo.environ as pyo

from ..errors import ModelError
from ..grid.network import missing_costs_message
from ..privacy import Sensitivity, gradient_sensitivity

__all__ = ["ObjectiveUnit", "OBJECTIVES", "objective_unit"]


@dataclass(frozen=True)
class ObjectiveUnit:
    name: str
    summary: str
    unit: str  # of the objective value
    #: "objective": the loads enter only the objective, through y (DP may be used);
    #: "constraints": the loads sit in the constraints (no DP guarantee)
    private_data: str
    #: add the objective (and any constraint it needs) to a model whose balance terms sp/sq exist
    add_terms: Callable[[pyo.ConcreteModel, Any], None]
    #: (beta, rule, adjacency) -> sensitivity of ∇f_p; None when DP is impossible
    sensitivity: Callable[[float, str, str], Sensitivity] | None = None
    #: refuse a network this objective cannot be built for (raise ModelError)
    check: Callable[[Any], None] = lambda net: None

    @property
    def dp_eligible(self) -> bool:
        return self.private_data == "objective"

    @property
    def balance_variables(self) -> bool:
        """Whether the model holds the balance variables y (the loads then enter only through y)."""
        return self.private_data == "objective"

    def gradient_sensitivity(self, beta: float, rule: str, adjacency: str) -> Sensitivity:
        if self.sensitivity is None:
            raise ModelError(f"objective {self.name!r} has no gradient-sensitivity rule: {self.dp_refusal()}")
        return self.sensitivity(beta, rule, adjacency)

    def dp_refusal(self) -> str:
        """Why a DP algorithm cannot use this objective, and what to use instead."""
        alternatives = ", ".join(repr(n) for n, u in OBJECTIVES.items() if u.dp_eligible)
        return (
            f"the {self.name!r} objective keeps the loads in the power-balance constraints, so the feasible set depends on "
            f"private data and no DP guarantee holds (docs/privacy.md); use objective {alternatives}"
        )


# ----------------------------------------------------------------------------- cost


def _cost_check(net) -> None:
    if not net.has_costs:
        raise ModelError(missing_costs_message(net))


def _cost_terms(m: pyo.ConcreteModel, net) -> None:
    """Generation cost, with the power balance as constraints (docs/formulation.md)."""
    m.balance_p = pyo.Constraint(m.OWN, rule=lambda _, i: m.sp[i] == 0)
    m.balance_q = pyo.Constraint(m.OWN, rule=lambda _, i: m.sq[i] == 0)
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
    m.obj = pyo.Objective(expr=expr, sense=pyo.minimize)


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


def _shedding_terms(m: pyo.ConcreteModel, net) -> None:
    """Σ_i (yp_i + pd_i)² + (yq_i + qd_i)² over own buses (the paper's f_p)."""
    m.obj = pyo.Objective(expr=sum(m.sp[i] ** 2 + m.sq[i] ** 2 for i in m.OWN), sense=pyo.minimize)


#: objective name → unit; a new objective is one unit and one entry here
OBJECTIVES: dict[str, ObjectiveUnit] = {
    "cost": ObjectiveUnit(
        name="cost",
        summary="generation cost, power balance as constraints (the reference OPF; no DP guarantee)",
        unit="$/h",
        private_data="constraints",
        add_terms=_cost_terms,
        check=_cost_check,
    ),
    "shedding": ObjectiveUnit(
        name="shedding",
        summary="the paper's Σ (yp + pd)² + (yq + qd)²; balance not constrained, loads only in the objective",
        unit="p.u.²",
        private_data="objective",
        add_terms=_shedding_terms,
        sensitivity=gradient_sensitivity,
    ),
}


def objective_unit(name: str) -> ObjectiveUnit:
    """The registered unit called ``name`` (ModelError naming the known ones otherwise)."""
    try:
        return OBJECTIVES[name]
    except (KeyError, TypeError):
        raise ModelError(f"unknown objective {name!r}; choose one of {', '.join(OBJECTIVES)}") from None
