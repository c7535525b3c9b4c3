"""DC optimal power flow: the lossless linear model, PTDFs, the centralized solve with prices (docs/market.md).

Model (MATPOWER's and PowerModels' DC approximation; p.u. on baseMVA):

* net load per bus d_b = pd_b + gs_b (shunt conductance at v = 1 p.u. counts as load);
* system balance Σ_g p_g = Σ_b d_b (lossless);
* line flows f = H (C_g p − d) + f_0, with H the PTDF for the reference bus
  (pandapower's ``makePTDF``) and f_0 the flows that phase shifters drive;
* |f_l| ≤ rate_a_l on every *monitored* line (every branch with a finite rating);
* pmin ≤ p ≤ pmax; cost Σ_g c2 p² + c1 p + c0 ($/h).

The locational marginal price of bus b is the derivative of the optimal cost with respect to
d_b: LMP_b = λ − Σ_l H_{l,b} μ_l, with λ the energy price (dual of the balance) and μ_l the
congestion price of line l (positive when the line is at its upper limit). Prices are reported
in $/MWh ($/h per p.u. ÷ baseMVA).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ModelError
from ..grid.network import Network

__all__ = ["DCModel", "DCResult", "dc_model", "ptdf", "solve_dc_opf", "dc_tables"]


def ptdf(net: Network) -> np.ndarray:
    """PTDF matrix (branches × buses) for the reference bus, from pandapower's ``makePTDF``."""
    from pandapower.pypower import idx_brch as B
    from pandapower.pypower import idx_bus as U
    from pandapower.pypower.makePTDF import makePTDF

    bus = np.zeros((net.n_bus, U.bus_cols))
    bus[:, U.BUS_I] = np.arange(net.n_bus)
    bus[:, U.BUS_TYPE] = net.bus_type
    bus[:, U.VM] = 1.0
    branch = np.zeros((net.n_branch, B.branch_cols))
    branch[:, B.F_BUS] = net.f_bus
    branch[:, B.T_BUS] = net.t_bus
    branch[:, B.BR_R] = net.r
    branch[:, B.BR_X] = net.x
    branch[:, B.TAP] = net.tap
    branch[:, B.SHIFT] = np.rad2deg(net.shift)
    branch[:, B.BR_STATUS] = 1.0
    refs = np.flatnonzero(net.bus_type == 3)
    if len(refs) == 0:
        raise ModelError(f"{net.name}: no reference bus (type 3); the DC model needs one")
    return np.asarray(makePTDF(net.base_mva, bus, branch, slack=int(refs[0])), dtype=float)


@dataclass(frozen=True)
class DCModel:
    """The public data of the DC-OPF (everything but the loads) and the loads, all in p.u."""

    name: str
    base_mva: float
    n_bus: int
    gen_bus: np.ndarray  # bus index of each generator
    pmin: np.ndarray
    pmax: np.ndarray
    c2: np.ndarray
    c1: np.ndarray
    c0: np.ndarray
    load: np.ndarray  # net load per bus (pd + gs)
    monitored: np.ndarray  # branch indices with a finite rating
    H: np.ndarray  # PTDF rows of the monitored lines (n_mon × n_bus)
    f0: np.ndarray  # flows from phase shifters (n_mon)
    rate: np.ndarray  # ratings of the monitored lines
    bus_ids: np.ndarray
    branch_ids: np.ndarray

    @property
    def n_gen(self) -> int:
        return len(self.gen_bus)

    @property
    def n_mon(self) -> int:
        return len(self.monitored)

    @property
    def flow_lo(self) -> np.ndarray:
        """Limits on the injection-driven part H(C_g p − d) of the flows."""
        return -self.rate - self.f0

    @property
    def flow_hi(self) -> np.ndarray:
        return self.rate - self.f0

    def flows(self, pg: np.ndarray, load: np.ndarray | None = None) -> np.ndarray:
        d = self.load if load is None else load
        inj = np.bincount(self.gen_bus, pg, minlength=self.n_bus) - d
        return self.H @ inj + self.f0

    def cost(self, pg: np.ndarray) -> float:
        return float(np.sum(self.c2 * pg**2 + self.c1 * pg + self.c0))

    def lmp(self, energy: float, congestion: np.ndarray) -> np.ndarray:
        """LMP per bus in $/MWh from the energy price λ and line prices μ ($/h per p.u.)."""
        return (energy - self.H.T @ congestion) / self.base_mva


def dc_model(net: Network) -> DCModel:
    """The DC-OPF data of ``net``: polynomial costs of order ≤ 2 only (piecewise-linear costs are refused)."""
    if len(net.pwl_gen):
        raise ModelError(f"{net.name}: the DC model supports polynomial generator costs only (this case has piecewise-linear costs)")
    if not net.has_costs:
        raise ModelError(f"{net.name}: the DC market needs generator costs (mpc.gencost)")
    if net.n_dcline:
        raise ModelError(f"{net.name}: the DC model does not support HVDC lines ({net.n_dcline} in this case)")
    full = ptdf(net)
    monitored = np.flatnonzero(np.isfinite(net.rate_a))
    # phase shifters: P_f = b (θ_f − θ_t − shift), b = 1/(x·tap) (MATPOWER makeBdc)
    b = 1.0 / (net.x * net.tap)
    pfinj = -b * net.shift
    pbusinj = np.bincount(net.f_bus, pfinj, minlength=net.n_bus) - np.bincount(net.t_bus, pfinj, minlength=net.n_bus)
    f0_all = pfinj - full @ pbusinj
    return DCModel(
        name=net.name, base_mva=float(net.base_mva), n_bus=net.n_bus, gen_bus=np.asarray(net.gen_bus, dtype=np.int64),
        pmin=np.asarray(net.pmin, float), pmax=np.asarray(net.pmax, float),
        c2=np.asarray(net.cost_c2, float), c1=np.asarray(net.cost_c1, float), c0=np.asarray(net.cost_c0, float),
        load=np.asarray(net.pd, float) + np.asarray(net.gs, float), monitored=monitored, H=full[monitored],
        f0=f0_all[monitored], rate=np.asarray(net.rate_a, float)[monitored],
        bus_ids=np.asarray(net.bus_ids), branch_ids=np.asarray(net.branch_ids),
    )


@dataclass
class DCResult:
    """The centralized DC-OPF optimum and its prices."""

    success: bool
    status: str
    objective: float  # $/h
    pg: np.ndarray  # p.u.
    energy_price: float  # λ, $/h per p.u.
    congestion: np.ndarray  # μ per monitored line, $/h per p.u.
    lmp: np.ndarray  # $/MWh per bus
    flows: np.ndarray  # p.u. per monitored line
    solve_s: float

    def summary(self, model: DCModel) -> dict:
        return {
            "objective": self.objective, "success": self.success, "status": self.status,
            "energy_price_per_mwh": self.energy_price / model.base_mva,
            "max_line_violation": max_line_violation(model, self.flows),
            "congested_lines": int(np.sum(np.abs(self.congestion) > 1e-6)),
            "lmp_min": float(self.lmp.min()), "lmp_max": float(self.lmp.max()), "solve_s": self.solve_s,
        }


def max_line_violation(model: DCModel, flows: np.ndarray) -> float:
    """max_l (|f_l| − rate_l)⁺ in p.u. (0 when no line is monitored)."""
    if model.n_mon == 0:
        return 0.0
    return float(max(0.0, np.max(np.abs(flows) - model.rate)))


def solve_dc_opf(model: DCModel, load: np.ndarray | None = None) -> DCResult:
    """Solve the DC-OPF centrally with Clarabel (a convex QP/LP) and read the prices off its duals."""
    import clarabel
    from scipy import sparse

    d = model.load if load is None else np.asarray(load, float)
    G, L = model.n_gen, model.n_mon
    Hg = model.H[:, model.gen_bus]  # flow sensitivity to each generator
    hd = model.H @ d
    # rows: balance (zero cone); flows ≤ hi, −flows ≤ −lo; p ≤ pmax; −p ≤ −pmin (nonnegative cone)
    A = np.vstack([np.ones((1, G)), Hg, -Hg, np.eye(G), -np.eye(G)])
    b = np.concatenate([[d.sum()], model.flow_hi + hd, -(model.flow_lo + hd), model.pmax, -model.pmin])
    P = sparse.csc_matrix(np.diag(2.0 * model.c2))
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-10
    t0 = time.perf_counter()
    solver = clarabel.DefaultSolver(P, model.c1.astype(float), sparse.csc_matrix(A), b,
                                    [clarabel.ZeroConeT(1), clarabel.NonnegativeConeT(2 * L + 2 * G)], settings)
    sol = solver.solve()
    solve_s = time.perf_counter() - t0
    status = str(sol.status)
    ok = "Solved" in status and "Almost" not in status
    pg = np.asarray(sol.x, float)
    zd = np.asarray(sol.z, float)
    energy = -zd[0]  # d cost / d (total load) through the balance row
    congestion = zd[1 : 1 + L] - zd[1 + L : 1 + 2 * L]
    lmp = model.lmp(energy, congestion)
    return DCResult(ok, status, model.cost(pg), pg, float(energy), congestion, lmp, model.flows(pg, d), solve_s)


def dc_tables(model: DCModel, pg: np.ndarray, lmp: np.ndarray, reference_lmp: np.ndarray | None = None,
              load: np.ndarray | None = None, flows: np.ndarray | None = None) -> dict[str, pd.DataFrame]:
    """Physical-unit tables (MW, $/MWh): buses with LMPs (and the reference's), generators, monitored lines."""
    d = model.load if load is None else load
    buses = pd.DataFrame({"bus": model.bus_ids, "load_mw": d * model.base_mva, "lmp_per_mwh": lmp})
    if reference_lmp is not None:
        buses["centralized_lmp_per_mwh"] = reference_lmp
        buses["lmp_error_per_mwh"] = lmp - reference_lmp
    gens = pd.DataFrame({"gen": np.arange(model.n_gen) + 1, "bus": model.bus_ids[model.gen_bus], "pg_mw": pg * model.base_mva,
                         "pmin_mw": model.pmin * model.base_mva, "pmax_mw": model.pmax * model.base_mva,
                         "cost_per_h": model.c2 * pg**2 + model.c1 * pg + model.c0})
    f = model.flows(pg, d) if flows is None else flows
    lines = pd.DataFrame({"branch": model.branch_ids[model.monitored], "flow_mw": f * model.base_mva,
                          "rate_mw": model.rate * model.base_mva, "loading": np.abs(f) / model.rate})
    return {"buses": buses, "generators": gens, "lines": lines}
