"""How the consensus coordinator chooses the penalty ρ each round (docs/algorithm.md, "Penalties").

A :class:`PenaltyRule` reads the coordinator's public arrays after a round (the releases ``x``, the consensus
``w``, the duals ``λ``: all computed from released values) and may change ``coordinator.rho``. Three rules:

* ``constant``: ρ never changes (the paper's);
* ``adaptive``: residual balancing on the relative residuals (one ρ for every entry; Boyd et al. §3.4.1,
  Wohlberg 2017);
* ``spectral``: one ρ per group of entries, a group being one zone's copies of one kind of shared variable
  (voltages, tie-line flows...), set to a Barzilai–Borwein estimate of how steeply the zone's price of those
  variables moves with them (Xu et al. 2017, "Adaptive consensus ADMM", applied per group), with safeguards.

Every rule is a deterministic function of the coordinator's arrays and of its own state (:meth:`state_dict`, kept
in the coordinator's checkpoint), so a seeded run stays bit-identical across backends and resume, and, since those
arrays are released values, a private run's ρ is post-processing of its releases: it spends no privacy.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

#: the coordinator a rule reads and whose ρ it may set (coordinator.Coordinator; not imported: it imports the rules)
Coordinator = Any

__all__ = ["PenaltyRule", "ConstantPenalty", "ResidualBalancing", "SpectralPenalty", "PENALTY_RULES"]


class PenaltyRule:
    """A ρ rule; :meth:`update` runs after every round's dual update and returns whether ρ changed."""

    name: ClassVar[str]
    #: ρ holds one value per stacked entry (a zone's copy of a shared variable) instead of one number
    per_entry: ClassVar[bool] = False
    summary: ClassVar[str] = ""

    def update(self, c: Coordinator) -> bool:
        return False

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


class ConstantPenalty(PenaltyRule):
    name: ClassVar[str] = "constant"
    summary: ClassVar[str] = "ρ fixed for the whole run"


class ResidualBalancing(PenaltyRule):
    """Residual balancing on relative residuals (Wohlberg 2017, Boyd et al. §3.4.1).

    The primal residual is in p.u. and the dual one in objective units per p.u., so their raw ratio depends on the
    objective's scale ($/h against p.u.²) and balancing them drove ρ the wrong way on the cost objective. Each is
    taken relative to its own scale instead: ‖w − Bz‖ / max(‖w‖, ‖Bz‖) against ρ‖B(w − w_prev)‖ / ‖λ‖. λ is the
    unscaled dual, so it stays valid when ρ changes. ρ grows ×τ when the relative primal residual exceeds μ× the
    relative dual one and shrinks when the dual one dominates (μ = 10, τ = 2)."""

    name: ClassVar[str] = "adaptive"
    summary: ClassVar[str] = "residual balancing: ρ ×2 or ÷2 when one relative residual is 10× the other"

    def __init__(self, mu: float = 10.0, tau: float = 2.0):
        self.mu, self.tau = float(mu), float(tau)

    def update(self, c: Coordinator) -> bool:
        gap = c.w[c.gidx] - c.released
        primal, dual = float(np.linalg.norm(gap)), c.rho * float(np.linalg.norm((c.w - c.w_prev)[c.gidx]))
        scale_p = max(float(np.linalg.norm(c.w[c.gidx])), float(np.linalg.norm(c.released)))
        scale_d = float(np.linalg.norm(c.lam))
        if scale_p > 0 and scale_d > 0:
            primal, dual = primal / scale_p, dual / scale_d
        if primal > self.mu * dual:
            c.rho *= self.tau
            return True
        if dual > self.mu * primal:
            c.rho /= self.tau
            return True
        return False


class SpectralPenalty(PenaltyRule):
    """One ρ per (zone, kind of shared variable), from spectral (Barzilai–Borwein) curvature estimates.

    After round t the zone's optimality gives λ_p^{t+1} ∈ ∂_x f̃_p(x_p^{t+1}) (f̃_p: the zone's cost as a function of
    its shared values, the private ones minimised out), so over the rounds since the last estimate the pairs
    (Δx, Δλ) of a group measure the curvature of f̃_p along them. The estimate is the hybrid of Xu et al. (2017):
    α_SD = ⟨Δλ, Δλ⟩/⟨Δx, Δλ⟩, α_MG = ⟨Δx, Δλ⟩/⟨Δx, Δx⟩, α = α_MG if 2α_MG > α_SD else α_SD − α_MG/2, used only
    when the correlation ⟨Δx, Δλ⟩/(‖Δx‖‖Δλ‖) exceeds ``min_correlation`` (the pairs then do describe a curvature).
    Safeguards: a group's ρ moves by at most a factor ``step`` per estimate and stays within
    [ρ₀/``spread``, ρ₀·``spread``] of the run's ρ₀; estimates are made every ``every`` rounds, and none after
    round ``freeze`` (ADMM with a penalty that stops changing converges as with a constant one).
    """

    name: ClassVar[str] = "spectral"
    per_entry: ClassVar[bool] = True
    summary: ClassVar[str] = "one ρ per zone and kind of shared variable, from spectral curvature estimates"

    def __init__(self, every: int = 2, min_correlation: float = 0.2, step: float = 10.0, spread: float = 1e4,
                 freeze: int = 1000):
        self.every, self.min_correlation, self.step, self.spread, self.freeze = int(every), float(min_correlation), float(step), float(spread), int(freeze)
        self.x0: np.ndarray | None = None
        self.lam0: np.ndarray | None = None
        self.rho0: float | None = None

    def update(self, c: Coordinator) -> bool:
        if self.rho0 is None:
            self.rho0 = float(np.median(c.rho)) if np.ndim(c.rho) else float(c.rho)
        x, lam = c.released, c.lam
        if self.x0 is None or c.round > self.freeze:
            if self.x0 is None:
                self.x0, self.lam0 = x.copy(), lam.copy()
            return False
        if c.round % self.every:
            return False
        dx, dl = x - self.x0, lam - self.lam0
        self.x0, self.lam0 = x.copy(), lam.copy()
        g, k = c.groups, c.n_groups
        xl = np.bincount(g, dx * dl, minlength=k)
        xx = np.bincount(g, dx * dx, minlength=k)
        ll = np.bincount(g, dl * dl, minlength=k)
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = ll / xl
            mg = xl / xx
            corr = xl / np.sqrt(xx * ll)
        alpha = np.where(2.0 * mg > sd, mg, sd - 0.5 * mg)
        ok = (xl > 0) & np.isfinite(alpha) & (alpha > 0) & (corr > self.min_correlation)
        if not ok.any():
            return False
        rho_g = np.bincount(g, c.rho, minlength=k) / np.maximum(np.bincount(g, minlength=k), 1)
        new = np.where(ok, np.clip(alpha, rho_g / self.step, rho_g * self.step), rho_g)
        new = np.clip(new, self.rho0 / self.spread, self.rho0 * self.spread)
        if np.array_equal(new, rho_g):
            return False
        c.rho = new[g]
        return True

    def state_dict(self) -> dict[str, Any]:
        return {"x0": self.x0, "lam0": self.lam0, "rho0": self.rho0}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.x0 = None if state.get("x0") is None else np.asarray(state["x0"], dtype=float)
        self.lam0 = None if state.get("lam0") is None else np.asarray(state["lam0"], dtype=float)
        self.rho0 = None if state.get("rho0") is None else float(state["rho0"])


class GroupBalancing(PenaltyRule):
    """Residual balancing per kind of shared variable (one ρ per kind, shared by every zone): ×τ or ÷τ when one
    relative residual of the kind is μ× the other (μ = 5, τ = 2). μ = 5 rather than :class:`ResidualBalancing`'s 10:
    rounds to a 1e-3 cost gap in 16 zones, μ = 10 / 5: case118 24 / 21, case1354_pegase 35 / 33, case2000_goc 60 / 42,
    ACTIVSg10k 63 / 39 (zone solves at Clarabel's tol_feas 1e-8; with the large cases' 1e-10 since, μ = 5 takes 34 / 32 /
    34 on the last three); μ = 3 left case118's residuals above 1e-4 at 250 rounds. μ = 5's larger early steps of ρ made
    zone 1 of case13659pegase's cost objective fail in round 4 until Clarabel's retries gained iterative refinement
    (powerdp.opf.conic.RETRIES; docs/results/performance.md)."""

    name: ClassVar[str] = "balanced"
    per_entry: ClassVar[bool] = True
    summary: ClassVar[str] = "residual balancing per kind of shared variable"

    def __init__(self, mu: float = 5.0, tau: float = 2.0, every: int = 1, by_zone: bool = False, sqrt: bool = False):
        self.mu, self.tau, self.every, self.by_zone, self.sqrt = float(mu), float(tau), int(every), bool(by_zone), bool(sqrt)

    def update(self, c: Coordinator) -> bool:
        if c.round % self.every:
            return False
        g = c.groups if self.by_zone else c.kinds
        k = int(g.max()) + 1
        wg = c.w[c.gidx]
        sq = lambda v: np.bincount(g, v * v, minlength=k)  # noqa: E731
        primal = np.sqrt(sq(wg - c.released)) / np.maximum(np.sqrt(np.maximum(sq(wg), sq(c.released))), 1e-300)
        dual = np.sqrt(sq(c.rho * (c.w - c.w_prev)[c.gidx])) / np.maximum(np.sqrt(sq(c.lam)), 1e-300)
        if self.sqrt:
            factor = np.clip(np.sqrt(primal / np.maximum(dual, 1e-300)), 1 / self.tau, self.tau)
            factor = np.where((primal > self.mu * dual) | (dual > self.mu * primal), factor, 1.0)
        else:
            factor = np.where(primal > self.mu * dual, self.tau, np.where(dual > self.mu * primal, 1.0 / self.tau, 1.0))
        if np.all(factor == 1.0):
            return False
        c.rho = c.rho * factor[g]
        return True


#: the penalty rules by name (``rho_schedule``)
PENALTY_RULES: dict[str, type[PenaltyRule]] = {r.name: r for r in (ConstantPenalty, ResidualBalancing, SpectralPenalty, GroupBalancing)}
