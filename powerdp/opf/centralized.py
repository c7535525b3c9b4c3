"""The centralized solve: one SOC-relaxed OPF over the whole network.

It is the reference every distributed run is measured against (docs/formulation.md): with
the ``cost`` objective and the ``powermodels`` convention it reproduces
PowerModels.jl's ``SOCWRPowerModel`` objective values.
"""

from __future__ import annotations

import gc
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..grid.network import Network, load_case
from .compiled import CompiledProblem, compile_model
from .formulation import FlowMode, Objective, build_model
from .objectives import generation_cost, total_shedding_mw
from .solvers import IpoptSolver

__all__ = ["OPFResult", "solve_opf", "solution_tables"]


@dataclass
class OPFResult:
    """The outcome of a centralized solve.

    ``objective`` is in $/h for ``cost`` and ``cost+shedding`` and in p.u.² for ``shedding``.
    ``generation_cost`` ($/h) is Σ_g cost_g(pg) of the solution (NaN without costs) and
    ``total_shedding_mw`` Σ_i |sp_i|·baseMVA, the active power imbalance (0 for ``cost``).
    ``buses``, ``generators`` and ``branches`` are DataFrames of the solution
    (per unit, with external ids).
    """

    case: str
    objective_name: str
    convention: str
    flows: str
    objective: float
    status: int
    status_name: str
    message: str
    iterations: int
    build_time_s: float
    compile_time_s: float
    solve_time_s: float
    callback_time_s: float
    n_buses: int
    n_branches: int
    n_gens: int
    n_variables: int
    n_constraints: int
    max_violation: float
    shedding_weight: float | None
    generation_cost: float
    total_shedding_mw: float
    x: np.ndarray = field(repr=False)
    buses: pd.DataFrame = field(repr=False)
    generators: pd.DataFrame = field(repr=False)
    branches: pd.DataFrame = field(repr=False)

    @property
    def success(self) -> bool:
        return self.status in (0, 1)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no arrays)."""
        skip = {"x", "buses", "generators", "branches"}
        out = {k: v for k, v in asdict(self).items() if k not in skip}
        out["success"] = self.success
        return out

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")


def solution_tables(net: Network, prob: CompiledProblem, x: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Bus, generator and branch DataFrames of a solution vector of a whole-network problem."""
    vals = dict(zip(prob.var_keys, x))

    def col(name: str, idx: np.ndarray) -> np.ndarray:
        return np.array([vals.get((name, int(i)), np.nan) for i in idx])

    bus_idx = np.arange(net.n_bus)
    w = col("w", bus_idx)
    buses = pd.DataFrame({"bus": net.bus_ids, "w": w, "vm": np.sqrt(np.maximum(w, 0.0)), "pd": net.pd, "qd": net.qd})
    for name in ("sp", "sq"):
        if name in prob.expressions:
            lm = prob.expressions[name]
            series = pd.Series(lm(x), index=lm.keys)
            buses[name] = series.reindex(bus_idx).to_numpy()
    gen_idx = np.arange(net.n_gen)
    generators = pd.DataFrame(
        {"gen": net.gen_ids, "bus": net.bus_ids[net.gen_bus], "pg": col("pg", gen_idx), "qg": col("qg", gen_idx)}
    )
    br = np.arange(net.n_branch)
    branches = pd.DataFrame({"branch": net.branch_ids, "f_bus": net.bus_ids[net.f_bus], "t_bus": net.bus_ids[net.t_bus]})
    if ("pf", 0) in vals or net.n_branch == 0:
        for kind in ("pf", "qf", "pt", "qt"):
            branches[kind] = col(kind, br)
    else:
        from .formulation import branch_flow_coefficients

        cf = branch_flow_coefficients(net)
        wr = col("wr", net.branch_pair)
        wi = col("wi", net.branch_pair) * net.branch_pair_sign
        for kind in ("pf", "qf", "pt", "qt"):
            end = net.f_bus if kind[1] == "f" else net.t_bus
            branches[kind] = cf[kind + "_w"] * w[end] + cf[kind + "_wr"] * wr + cf[kind + "_wi"] * wi
    return buses, generators, branches


def solve_opf(
    case: Any,
    objective: Objective = "cost",
    convention: str = "powermodels",
    flows: FlowMode = "variables",
    profile: str = "default",
    options: dict[str, Any] | None = None,
    shedding_weight: float | str | None = None,
) -> OPFResult:
    """Build, compile and solve the SOC relaxation of the whole network (docs/formulation.md).

    ``case`` is anything :func:`~powerdp.grid.network.load_case` accepts. ``shedding_weight`` is the ω of
    ``cost+shedding`` (None: scaled to the costs; refused for other objectives). A failed
    solve is returned with its Ipopt status (``result.success`` is False), not raised.
    """
    net = load_case(case, convention=convention)
    if objective == "cost" and not net.has_costs:
        from ..errors import ModelError
        from ..grid.network import missing_costs_message

        raise ModelError(missing_costs_message(net))
    t0 = time.perf_counter()
    model = build_model(net, objective=objective, flows=flows, shedding_weight=shedding_weight)
    t1 = time.perf_counter()
    prob = compile_model(model)
    del model
    gc.collect()  # free the Pyomo model now, not during Ipopt's callbacks
    t2 = time.perf_counter()
    res = IpoptSolver(prob, profile=profile, options=options).solve()
    buses, gens, branches = solution_tables(net, prob, res.x)
    sp = prob.expressions["sp"](res.x) if "sp" in prob.expressions else np.zeros(0)
    return OPFResult(
        case=net.name,
        objective_name=objective,
        convention=net.convention,
        flows=flows,
        objective=res.objective,
        status=res.status,
        status_name=res.status_name,
        message=res.message,
        iterations=res.iterations,
        build_time_s=t1 - t0,
        compile_time_s=t2 - t1,
        solve_time_s=res.wall_s,
        callback_time_s=res.callback_s,
        n_buses=net.n_bus,
        n_branches=net.n_branch,
        n_gens=net.n_gen,
        n_variables=prob.n,
        n_constraints=prob.m,
        max_violation=prob.max_violation(res.x),
        shedding_weight=prob.meta.get("shedding_weight"),
        generation_cost=generation_cost(net, gens["pg"].to_numpy()),
        total_shedding_mw=total_shedding_mw(sp, net.base_mva),
        x=res.x,
        buses=buses,
        generators=gens,
        branches=branches,
    )
