"""The centralized solve: one SOC-relaxed OPF over the whole network.

It is the reference every distributed run is measured against (docs/formulation.md): with
the ``cost`` objective and the ``powermodels`` convention it reproduces
PowerModels.jl's ``SOCWRPowerModel`` objective values.
"""

from __future__ import annotations

import gc
import json
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..files.atomic import atomic_to_csv, atomic_write_text
from ..grid.loading import load_case
from ..grid.network import Network
from .compiled import CompiledProblem, compile_model
from .direct import DIRECT_OBJECTIVES, compile_direct
from .formulation import FlowMode, Objective, build_model
from .local_solver import SUCCESS_OUTCOMES, solver_class
from .objectives import generation_cost, total_shedding_mw
from .tables import DC_KINDS, TABLE_NAMES, Dispatch, ResultTables, dispatch_from_solution, physical_tables

#: the files ``OPFResult.save_tables`` writes (dclines.csv only for a case with HVDC lines), and ``save`` besides them
TABLE_FILES = (*(f"{name}.csv" for name in TABLE_NAMES), "dclines.csv")
SOLVE_FILES = ("result.json", *TABLE_FILES)

__all__ = ["OPFResult", "SOLVE_FILES", "TABLE_FILES", "solve_opf", "solution_tables", "dcline_table"]


@dataclass
class OPFResult:
    """The outcome of a centralized solve.

    ``objective`` is in $/h for ``cost`` and ``cost+shedding`` and in p.u.² for ``shedding``.
    ``generation_cost`` ($/h) is Σ_g cost_g(pg) of the solution (NaN without costs) and
    ``total_shedding_mw`` Σ_i |sp_i|·baseMVA, the active power imbalance (0 for ``cost``).
    ``generators``, ``buses``, ``branches`` and ``zones`` (the case's bus areas) are
    DataFrames of the solution in physical units, named as pandapower's result tables
    (:mod:`powerdp.opf.tables`); ``dclines`` (HVDC lines: the powers entering each line at
    its ends, per unit) another; ``dispatch`` holds the per-unit arrays, ``network`` the
    network solved.
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
    solver: str  # the registered solver name (powerdp.opf.local_solver.SOLVERS)
    outcome: str  # powerdp's status of the solve (local_solver.OUTCOMES)
    x: np.ndarray = field(repr=False)
    buses: pd.DataFrame = field(repr=False)
    generators: pd.DataFrame = field(repr=False)
    branches: pd.DataFrame = field(repr=False)
    zones: pd.DataFrame = field(repr=False)
    dispatch: Dispatch = field(repr=False)
    network: Network = field(repr=False)
    ac_check: Any = field(default=None, repr=False)  # an ACCheck once check_ac() has run
    dclines: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)

    @property
    def success(self) -> bool:
        return self.outcome in SUCCESS_OUTCOMES

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no arrays)."""
        skip = {"x", "buses", "generators", "branches", "zones", "dispatch", "network", "ac_check", "dclines"}
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        out["success"] = self.success
        if self.ac_check is not None:
            out["ac_check"] = self.ac_check.to_dict()
        return out

    def tables(self) -> ResultTables:
        return ResultTables(self.generators, self.buses, self.branches, self.zones)

    def check_ac(self, **options: Any):
        """Run pandapower's AC power flow at this dispatch (:func:`powerdp.opf.pandapower_io.ac_check`)."""
        from .pandapower_io import ac_check

        self.ac_check = ac_check(self.network, self.dispatch, **options)
        return self.ac_check

    def save(self, directory: str | Path) -> Path:
        """Write ``result.json`` and the tables (``generators.csv`` ...) into ``directory``."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        data = self.to_dict()
        data["source"] = self.network.source or self.case
        self.save_tables(d)
        atomic_write_text(d / "result.json", json.dumps(data, indent=2) + "\n")  # last: a solve directory is complete
        return d

    def save_tables(self, directory: str | Path) -> Path:
        """Write the physical-unit tables, and ``dclines.csv`` for a case with HVDC lines, into ``directory``."""
        d = Path(directory)
        self.tables().save(d)
        if len(self.dclines):
            atomic_to_csv(self.dclines, d / "dclines.csv", index=False)
        return d

    def to_json(self, path: str | Path) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")


def solution_tables(net: Network, prob: CompiledProblem, x: np.ndarray) -> tuple[Dispatch, ResultTables]:
    """The :class:`Dispatch` of a whole-network solution vector and its physical-unit tables (opf/tables.py)."""
    dispatch = dispatch_from_solution(net, prob.var_keys, x)
    return dispatch, physical_tables(net, dispatch)


def dcline_table(net: Network, dispatch: Dispatch) -> pd.DataFrame:
    """The HVDC lines of a dispatch: the powers entering each line at its ends (p.u.)."""
    dc = net.dcline
    table = pd.DataFrame({"dcline": dc.ids, "f_bus": net.bus_ids[dc.f_bus], "t_bus": net.bus_ids[dc.t_bus]})
    for kind in DC_KINDS:
        table[kind] = dispatch.dc[kind] if dispatch.dc else np.full(dc.n, np.nan)
    return table


def solve_opf(
    case: Any,
    objective: Objective = "cost",
    convention: str = "powermodels",
    flows: FlowMode = "variables",
    profile: str = "default",
    options: dict[str, Any] | None = None,
    shedding_weight: float | str | None = None,
    solver: str = "ipopt",
) -> OPFResult:
    """Build, compile and solve the SOC relaxation of the whole network (docs/formulation.md).

    ``case`` is anything :func:`~powerdp.grid.loading.load_case` accepts. ``shedding_weight`` is the ω of
    ``cost+shedding`` (None: scaled to the costs; refused for other objectives). ``solver`` is a
    registered solver (``"ipopt"`` or ``"clarabel"``); ``profile`` and ``options`` are Ipopt's
    (for ``"clarabel"``, ``options`` are Clarabel settings and ``profile`` must stay ``"default"``).
    A failed solve is returned with its solver's status (``result.success`` is False), not raised.
    """
    cls = solver_class(solver, "solver")
    if solver != "ipopt" and str(profile) != "default":
        from ..errors import ConfigError

        raise ConfigError.for_setting("profile", profile, f"an Ipopt option profile needs solver 'ipopt' (it is {solver!r})")
    net = load_case(case, convention=convention)
    if objective == "cost" and not net.has_costs:
        from ..errors import ModelError
        from ..grid.network import missing_costs_message

        raise ModelError(missing_costs_message(net))
    t0 = time.perf_counter()
    if objective in DIRECT_OBJECTIVES and flows == "variables":  # the same arrays without Pyomo (opf/direct.py)
        prob = compile_direct(net, None, objective=objective, flows=flows, name=net.name, shedding_weight=shedding_weight)
        t1 = t2 = time.perf_counter()
    else:
        model = build_model(net, objective=objective, flows=flows, shedding_weight=shedding_weight)
        t1 = time.perf_counter()
        prob = compile_model(model)
        del model
        gc.collect()  # free the Pyomo model now, not during the solver's callbacks
        t2 = time.perf_counter()
    res = (cls(prob, profile=profile, options=options) if solver == "ipopt" else cls(prob, options=options)).solve()
    dispatch, tables = solution_tables(net, prob, res.x)
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
        generation_cost=generation_cost(net, dispatch.pg),
        total_shedding_mw=total_shedding_mw(sp, net.base_mva),
        solver=solver,
        outcome=res.outcome,
        x=res.x,
        buses=tables.buses,
        generators=tables.generators,
        branches=tables.branches,
        zones=tables.zones,
        dispatch=dispatch,
        network=net,
        dclines=dcline_table(net, dispatch),
    )
