"""Zonal market clearing: DC-OPF by ADMM sharing (docs/market.md).

Zone m owns its generators p_m (costs, limits) and its loads d_m (private).
Its contribution to the coupling is

    r_m = [1ᵀ p_m − 1ᵀ d_m ;  H_{:,gens_m} p_m − H_{:,buses_m} d_m]      (1 + n_monitored values)

the zone's net injection and its part of every monitored line's PTDF flow.
The coordinator's g is the indicator of {balance = 0, flow_lo ≤ flows ≤ flow_hi}
(a :class:`~powerdp.engine.sharing.coordinator.BoxZStep`), so its z-step is a projection and
its dual y = [λ; μ] holds the energy price and the line congestion prices:
LMP_b = −(λ + Σ_l H_{l,b} μ_l) / baseMVA in $/MWh (docs/market.md for the sign).

Privacy (loads; docs/market.md "Private loads"): output perturbation of each
release with Gaussian noise σ = z·Δ₂, Δ₂ = β·max_{b ∈ zone} ‖[1; H_{:,b}]‖₂. Sound
per round given the public history, because the zone's step uses only public
values and its own *released* contribution, and the release is a proximal map
of an affine function of the loads (the derivation is in docs/market.md). The map is
a proximal map only when the step penalizes every row it releases: a private market
therefore never screens its line rows (issue 36: with only the binding rows in the
penalty, the other rows moved with the generators' redistribution, up to 1.41·Δ₂).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...engine.sharing.coordinator import BoxZStep, SharingAgent, SharingMessage
from ...engine.sharing.hosts import SharingAgentSpec
from ...errors import ConfigError
from ...grid.network import Network
from ...opf.dc import DCModel, DCResult, dc_model, max_line_violation, solve_dc_opf
from ...privacy.faults import InjectedFaults
from ...runs.inputs import case_entry
from ...runs.sharing_run import SharingProblem, SharingResult, SharingSettings, run_sharing

__all__ = ["MarketZone", "market_problem", "run_market", "market_sensitivity", "cost_sensitivity", "default_market_rho"]


class MarketZone(SharingAgent):
    """One zone's market agent: the x-step is a box-constrained QP over its generators (Clarabel)."""

    def __init__(self, agent: int, B: np.ndarray, K: np.ndarray, loads: np.ndarray, c2: np.ndarray, c1: np.ndarray,
                 c0: np.ndarray, pmin: np.ndarray, pmax: np.ndarray, noise_sigma: float = 0.0, seed: int | None = None,
                 noise_multiplier: float | None = None, cost_gamma: float | None = None, delta: float = 1e-5,
                 faults=None):
        super().__init__(agent)
        self.B = np.asarray(B, float)  # [1ᵀ; H_gens] (n × G_m)
        self.loads = np.asarray(loads, float)  # private
        self.e = np.asarray(K, float) @ self.loads  # [Σ d; H_buses d]: private
        self.c2, self.c1, self.c0 = (np.asarray(c, float) for c in (c2, c1, c0))
        self.pmin, self.pmax = np.asarray(pmin, float), np.asarray(pmax, float)
        self.noise_sigma = float(noise_sigma)  # σ for the loads (fixed: the load sensitivity does not depend on ρ)
        # private costs: one generator's c1 moving by γ moves the release by at most √(γ·max range/κ) (docs/market.md)
        self.cost_gamma = cost_gamma
        self.noise_multiplier = noise_multiplier
        if noise_multiplier and (self.noise_sigma > 0 or cost_gamma):  # its noise source, ledger and release journal
            self._private(seed, noise_multiplier, delta)
        # a private zone penalizes every row it releases (the bound of docs/market.md covers only those rows); the
        # test-only fault InjectedFaults(market_release="screened") brings back the old step (active rows only)
        self._all_rows = self.rng is not None and getattr(faults, "market_release", "all") == "all"
        self.p = np.clip(np.zeros(len(self.c1)), self.pmin, self.pmax)
        self._kappa = self._active = None

    def initial_release(self) -> np.ndarray:
        return np.zeros(self.B.shape[0])  # nothing of the zone's data before round 1

    def _qp(self, kappa: float, active: np.ndarray):
        import clarabel
        from scipy import sparse

        G = len(self.c1)
        Ba = self.B[active]
        P = sparse.csc_matrix(np.triu(np.diag(2.0 * self.c2) + kappa * Ba.T @ Ba))
        A = sparse.csc_matrix(np.vstack([np.eye(G), -np.eye(G)]))
        self._b = np.concatenate([self.pmax, -self.pmin])
        s = clarabel.DefaultSettings()
        s.verbose = False
        s.tol_gap_abs = s.tol_gap_rel = s.tol_feas = 1e-11
        s.presolve_enable = False
        self._P, self._A, self._settings = P, A, s
        self._kappa, self._active = kappa, active

    def local_step(self, msg: SharingMessage) -> tuple[np.ndarray, int]:
        import clarabel

        kappa = msg.rho + msg.tau
        active = np.ones(len(self.e), dtype=bool) if (msg.active is None or self._all_rows) else msg.active
        if self._kappa != kappa or not np.array_equal(self._active, active):
            self._qp(kappa, active)
        a = self.others_minus_z(msg)  # Σ_{k≠m} r_k − z, public
        # ⟨y, r(p)⟩ + ρ/2‖r(p) + a‖² + τ/2‖r(p) − r̃_m‖² over the active rows, r(p) = B p − e (docs/sharing.md eq. 7)
        pen = msg.rho * (a - self.e) - msg.tau * (self.e + self.own)
        q = self.c1 + self.B.T @ msg.dual + self.B[active].T @ pen[active]
        solver = clarabel.DefaultSolver(self._P, q, self._A, self._b, [clarabel.NonnegativeConeT(len(self._b))], self._settings)
        sol = solver.solve()
        if "Solved" not in str(sol.status):
            from ...errors import SolverError

            raise SolverError(f"zone {self.agent}: local QP {sol.status}")
        self.p = np.clip(np.asarray(sol.x, float), self.pmin, self.pmax)
        return self.B @ self.p - self.e, int(sol.iterations)

    def perturb(self, contribution: np.ndarray, msg: SharingMessage) -> np.ndarray:
        if self.rng is None:
            return contribution
        sigma = self.noise_sigma
        if self.cost_gamma:
            sigma = max(sigma, self.noise_multiplier * cost_sensitivity(self.pmin, self.pmax, self.cost_gamma, msg.rho + msg.tau))
        return self._release(contribution, sigma)[0]

    def diagnostics(self) -> dict:
        return {"pg": self.p.copy(), "cost": float(np.sum(self.c2 * self.p**2 + self.c1 * self.p + self.c0)),
                "true_release": self.B @ self.p - self.e}

    def extra_state(self) -> dict:
        return {"arrays": {"p": self.p}, "meta": {}}

    def load_extra_state(self, state: dict) -> None:
        self.p = np.asarray(state["arrays"]["p"], float)


def market_sensitivity(model: DCModel, buses: np.ndarray, beta: float, line_scale: float = 1.0) -> float:
    """Δ₂ of a zone's release when one of its loads moves by β: β·max_b ‖[1; s·H_{:,b}]‖₂ (docs/market.md)."""
    if len(buses) == 0:
        return 0.0
    cols = model.H[:, buses]
    return float(beta * np.sqrt(1.0 + line_scale**2 * np.max(np.sum(cols**2, axis=0))))


def cost_sensitivity(pmin: np.ndarray, pmax: np.ndarray, gamma: float, kappa: float) -> float:
    """Δ₂ of a zone's release when one generator's linear cost c1 moves by γ ($/h per p.u.): √(γ·max_g(pmax − pmin)/κ).

    From the optimality of both x-steps (docs/market.md "Private costs"): κ‖B Δp‖² ≤ γ|Δp_g| ≤ γ(pmax_g − pmin_g).
    """
    if len(pmin) == 0:
        return 0.0
    return float(np.sqrt(gamma * np.max(pmax - pmin) / kappa))


def default_market_rho(model: DCModel) -> float:
    """ρ on the scale of the marginal costs ($/h per p.u.): the median c1 + 2 c2 p at mid-range output."""
    mid = 0.5 * (model.pmin + model.pmax)
    mc = model.c1 + 2 * model.c2 * mid
    mc = mc[mc > 0]
    return float(np.median(mc)) if len(mc) else 100.0


def market_problem(net: Network, zone_of_bus: np.ndarray, noise_multiplier: float | None = None, beta: float = 0.01,
                   seed: int | None = None, model: DCModel | None = None, reference=None,
                   line_scale: float = 1.0, screen: bool = True, cost_gamma: float | None = None,
                   delta: float = 1e-5, faults=None) -> tuple[SharingProblem, DCModel, dict]:
    """The sharing problem of the zonal market (one agent per zone) and its evaluation.

    ``line_scale`` s multiplies the line rows of every contribution (and their limits): a public row
    scaling, i.e. a penalty s²ρ on the flows against ρ on the balance; the prices are scaled back.
    ``screen``: a line's row joins the penalty only once its limit binds (docs/market.md); a private market
    (``noise_multiplier`` set) never screens: its zones penalize every row they release, which is what the
    sensitivity bound covers (docs/market.md, "Why this is a sound sensitivity").
    ``cost_gamma``: also protect the generators' linear costs (neighbours: one c1 moves by γ $/h per p.u.).
    ``faults``: test-only (:class:`~powerdp.privacy.faults.InjectedFaults`).
    """
    model = model or dc_model(net)
    if noise_multiplier is not None and getattr(faults, "market_release", "all") == "all":
        screen = False
    zone_of_bus = np.asarray(zone_of_bus, dtype=np.int64)
    n_zones = int(zone_of_bus.max()) + 1
    gen_zone = zone_of_bus[model.gen_bus]
    scale = np.concatenate([[1.0], np.full(model.n_mon, float(line_scale))])
    K_full = scale[:, None] * np.vstack([np.ones((1, model.n_bus)), model.H])
    specs, sigmas = [], {}
    for m in range(n_zones):
        buses = np.flatnonzero(zone_of_bus == m)
        gens = np.flatnonzero(gen_zone == m)
        sens = market_sensitivity(model, buses, beta, line_scale)
        sigma = 0.0 if noise_multiplier is None else float(noise_multiplier) * sens
        sigmas[m] = {"sensitivity": sens, "sigma": sigma}
        specs.append(SharingAgentSpec(agent=m, factory="powerdp.apps.market.dc_market:MarketZone", weight=max(1, len(gens)), kwargs=dict(
            B=K_full[:, model.gen_bus[gens]], K=K_full[:, buses], loads=model.load[buses],
            c2=model.c2[gens], c1=model.c1[gens], c0=model.c0[gens], pmin=model.pmin[gens], pmax=model.pmax[gens],
            noise_sigma=sigma, seed=seed, noise_multiplier=noise_multiplier, cost_gamma=cost_gamma if noise_multiplier else None,
            delta=delta, faults=faults,
        )))
    screened = np.concatenate([[False], np.ones(model.n_mon, dtype=bool)]) if screen else None
    zstep = BoxZStep(scale * np.concatenate([[0.0], model.flow_lo]), scale * np.concatenate([[0.0], model.flow_hi]), screened)

    def evaluate(coordinator, diags: dict) -> dict:
        pg = np.zeros(model.n_gen)
        for m in range(n_zones):
            pg[np.flatnonzero(gen_zone == m)] = diags[m]["pg"]
        true_total = sum(diags[m]["true_release"] for m in range(n_zones))
        flows = true_total[1:] / scale[1:] + model.f0
        lmp = model.lmp(-coordinator.y[0], coordinator.y[1:] * scale[1:])
        out = {"cost": model.cost(pg), "imbalance_mw": float(abs(true_total[0]) * model.base_mva),
               "max_line_violation": max_line_violation(model, flows)}
        if reference is not None:
            out["cost_gap"] = (out["cost"] - reference.objective) / abs(reference.objective)
            out["max_price_error"] = float(np.max(np.abs(lmp - reference.lmp)))
        return out

    relation = {"name": "load", "beta": beta,
                "text": f"one load value d_b of the zone moves by at most beta = {beta:g} p.u."
                        + (f"; or one generator's linear cost c1 by at most {cost_gamma:g} $/h per p.u." if cost_gamma else "")}
    problem = SharingProblem(
        name="dc-market", zstep=zstep, specs=specs, evaluate=evaluate, inputs={"case": case_entry(net.source)}, relation=relation,
        config={"case": model.name, "zones": n_zones, "zone_of_bus": zone_of_bus.tolist(), "beta": beta,
                "noise_multiplier": noise_multiplier, "seeded": seed is not None, "seed": seed, "line_scale": line_scale,
                "screen": screen, "cost_gamma": cost_gamma},
    )
    if getattr(net, "convention", "powermodels") != "powermodels":  # a resume reloads the case the same way
        problem.config["convention"] = net.convention
    return problem, model, sigmas


def run_market(net: Network, zone_of_bus: np.ndarray, settings: SharingSettings, beta: float = 0.01, seed: int | None = None,
               out: str | Path | None = None, resume: bool = False, overwrite: bool = False,
               progress: Callable[[dict], None] | None = None, observe: Callable[[list], None] | None = None,
               reference: bool = True, line_scale: float = 1.0, screen: bool = True, cost_gamma: float | None = None,
               faults: InjectedFaults | None = None) -> tuple[SharingResult, DCModel, DCResult | None] | None:
    """Clear the zonal DC market by sharing ADMM; returns (SharingResult, DCModel, the centralized DCResult or None).

    Under MPI every rank calls it; ranks other than 0 return None. ``faults`` is test-only.
    """
    model = dc_model(net)
    central = solve_dc_opf(model) if reference else None
    if central is not None and not central.success:
        raise ConfigError(f"{net.name}: the centralized DC-OPF did not solve ({central.status}); the case is infeasible as a DC model")
    problem, model, sigmas = market_problem(net, zone_of_bus, settings.noise_multiplier, beta, seed, model, central, line_scale, screen,
                                            cost_gamma, delta=settings.delta, faults=faults)
    t0 = time.perf_counter()
    result = run_sharing(problem, settings, out=out, resume=resume, overwrite=overwrite, progress=progress, observe=observe)
    if result is None:
        return None
    result.summary["evaluation"]["run_s"] = time.perf_counter() - t0
    result.summary["coordinator_view"]["noise"] = sigmas  # public: σ from the public structure and β
    if out is not None:
        result.save_summary(out)
    return result, model, central
