"""A dispatch zone agent: the power-flow zone agent, compiled once, re-aimed at each period's data.

:class:`DispatchZoneAgent` is :class:`~powerdp.apps.power_flow.agent.ZoneAgent` (the same model, update rules,
perturbations, ledger and checkpoints) plus :meth:`~DispatchZoneAgent.set_period`: a new period's loads change only
the linear and constant terms of the zone's objective on its balance variables (the loads enter f_p only through
ω Σ (y + d)², docs/formulation.md), and a new renewable cap or a ramp limit only the bounds of its generators'
``pg``. Nothing is rebuilt or recompiled; the iterate, the duals λ_p, the solver's primal-dual warm start and the
privacy ledger carry over from the previous period (warm start), or are reset (``cold``).

The zone receives only its own buses' loads and its own generators' caps (the host calls it with the zone's slice).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ...engine.consensus.messages import SolverStats, ZoneUpdate
from ...errors import ConfigError, SolverError
from ...grid.network import Network
from ...opf.objectives import OBJECTIVES
from ...privacy.sampler import snap
from ..power_flow.agent import ZoneAgent
from ..power_flow.config import RunConfig
from ..power_flow.zone_terms import load_positions

__all__ = ["DispatchZoneAgent", "period_slices"]


class DispatchZoneAgent(ZoneAgent):
    """A zone agent whose compiled problem takes each period's loads and generator limits without a rebuild."""

    def __init__(self, net: Network, zone: int, own_buses: np.ndarray, shared_keys, config: RunConfig):
        super().__init__(net, zone, own_buses, shared_keys, config)
        if not OBJECTIVES[config.objective].balance_variables:
            raise ConfigError(f"dispatch needs an objective with balance variables (shedding, cost+shedding), not {config.objective!r}")
        prob = self.problem
        self._own = np.asarray(prob.meta["own"], dtype=np.int64)
        self._yp = prob.index_of([("yp", int(i)) for i in self._own])
        self._yq = prob.index_of([("yq", int(i)) for i in self._own])
        self._omega = float(self.shedding_weight) if self.shedding_weight else 1.0
        self._pd = np.asarray(net.pd[self._own], dtype=float).copy()
        self._qd = np.asarray(net.qd[self._own], dtype=float).copy()
        # the objective built on the network's loads: every period's is computed from it and the period's loads alone,
        # never from the previous period's, so a resumed day (a fresh agent) computes the very same bits
        self._f0, self._pd0, self._qd0 = self._f, self._pd.copy(), self._qd.copy()
        sp_keys = {k: j for j, k in enumerate(prob.expressions["sp"].keys)}
        self._sp_rows = np.array([sp_keys[int(i)] for i in self._own], dtype=np.int64)
        self._pg_r = self.reduction.reduced.index_of([("pg", int(g)) for g in self._gens])
        self._bounds0 = tuple(np.array(b, dtype=float) for b in self.solver.bounds)
        self._ub0 = prob.ub.copy()
        self._lb0 = prob.lb.copy()
        self.period: int | None = None
        # the public clipping of the perturbed loads (--clip-loads): per noise column, which load value it perturbs
        self._rating: np.ndarray | None = None  # the own buses' public ratings (p.u.), set by set_period
        cols = np.asarray(self.noise_cols, dtype=np.int64)
        self._clip_ok = bool(len(cols) == len(self._yp) + len(self._yq)
                             and np.array_equal(np.sort(cols), np.sort(np.concatenate([self._yp, self._yq]))))
        if config.private and not self.perturbation.once:
            self.perturbation.perturb_objective = self._perturb_clipped  # the instance's own: clips when asked
        self.local_failures = 0  # private rounds whose local solve failed (the previous point released again)

    # ------------------------------------------------------------------ periods
    def set_period(self, data: dict[str, Any]) -> None:
        """Take period ``data["period"]``: the zone's own loads ``pd``, ``qd`` (p.u., its own buses in order), its
        generators' available output ``pmax`` (p.u., its generators in order), and optional ramp limits
        (``ramp``: p.u. per period per generator, inf where none) around its own previous dispatch. ``cold``
        forgets the previous period (duals, warm start: the caller then projects the flat start again). Input
        perturbation draws the period's own d̃ from the period's loads (once per period)."""
        self.period = int(data["period"])
        self._set_loads(np.asarray(data["pd"], dtype=float), np.asarray(data["qd"], dtype=float))
        self._set_generation(np.asarray(data["pmax"], dtype=float), data.get("ramp"))
        rating = data.get("rating")
        if rating is not None and not self._clip_ok:
            raise ConfigError(f"zone {self.zone}: --clip-loads needs the noise on the balance variables only (noise_on data)")
        self._rating = None if rating is None else np.asarray(rating, dtype=float)
        if data.get("cold"):
            self.lam = np.zeros(self.n_shared)
            self._warm = None
        if self.perturbation.once:  # input perturbation (d̃) or the totals: the period's own, drawn once from its loads
            self._draw_input()

    def _draw_input(self) -> None:
        """Input perturbation's draw for the period (:meth:`ZoneAgent._draw_input`); with public ratings the perturbed
        loads it stands for, d̃ = n/(2ω), are projected onto their public range once, before the zone computes with
        them: post-processing of the draw, from n alone."""
        if getattr(self, "period", None) is None:  # the constructor: a day draws per period, from its loads (set_period)
            return
        if self.perturbation.from_loads:  # the totals of the period's own loads (no public clipping: refused)
            super()._draw_input()
            return
        term = self.perturbation.draw(self._f_lin_true.c[self.noise_cols])
        if self._rating is not None:
            term = self._clip_term(term)
        self.use_input_term(term)

    def _clip_term(self, term: np.ndarray) -> np.ndarray:
        """n = 2ω·d̃ on each perturbed load value, with d̃ projected onto its public range ([0, R] for p, [−R, R] for q),
        back on the sampler's grid: a function of n and public ratings only."""
        w2 = 2.0 * self._omega
        cols = self.noise_cols
        lo, hi = self._load_ranges(cols)
        noisy = term / w2
        out = (noisy < lo) | (noisy > hi)
        gamma = self.perturbation.mechanism.grid
        clipped = term.copy()
        clipped[out] = np.round(w2 * np.clip(noisy[out], lo[out], hi[out]) / gamma) * gamma
        return clipped

    def _load_ranges(self, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per noise column, the public range of the load value it perturbs: [0, R] (p) or [−R, R] (q)."""
        jp, jq = load_positions(cols, (self._yp, self._yq))
        lo, hi = np.empty(len(cols)), np.empty(len(cols))
        lo[jp], hi[jp] = 0.0, self._rating
        lo[jq], hi[jq] = -self._rating, self._rating
        return lo, hi

    def _perturb_clipped(self, c: np.ndarray) -> float:
        """Objective perturbation's noise on the linear term, then (with public ratings) the perturbed loads it stands for
        projected onto their public range: a load value's d̃ = d + ξ/(2ω) onto [0, R] (p) or [−R, R] (q), R the bus's
        public rated power. Post-processing of the noisy linear term (docs/privacy.md, "Privacy over time"): the
        local problem then sees 2ω(y + clip(d̃)) where it saw 2ω(y + d̃), and the ledger's account is unchanged."""
        perturb = type(self.perturbation).perturb_objective.__get__(self.perturbation)
        if self._rating is None:
            return perturb(c)
        cols = self.noise_cols
        before = c[cols].copy()
        magnitude = perturb(c)
        w2 = 2.0 * self._omega
        lo, hi = self._load_ranges(cols)
        d = np.empty(len(cols))
        jp, jq = load_positions(cols, (self._yp, self._yq))
        d[jp], d[jq] = self._pd, self._qd
        noisy = d + (c[cols] - before) / w2  # d̃: the perturbed load value the noisy linear term stands for
        out = noisy < lo
        out |= noisy > hi
        # entries inside the range keep the noisy term as drawn (on the sampler's grid); outside, the load is the bound.
        # The clipped term stands for 2ω(y + bound), which holds no load; computed from d it could carry d's low bits,
        # so it goes back onto the sampler's grid γ (coarser than that rounding by ~2^12 relative to the noise scale):
        # the released term's set of values is the grid again, as for every unclipped entry (docs/privacy.md)
        gamma = self.perturbation.mechanism.grid
        c[cols[out]] = snap(before[out] + w2 * (np.clip(noisy[out], lo[out], hi[out]) - d[out]), gamma) * gamma
        return magnitude

    def _set_loads(self, pd: np.ndarray, qd: np.ndarray) -> None:
        if pd.shape != self._pd.shape or qd.shape != self._qd.shape:
            raise ValueError(f"zone {self.zone}: period loads of shape {pd.shape}, expected {self._pd.shape}")
        w = self._omega
        f = self._f0
        c = f.c.copy()
        # ω (y + d)² = ω y² + 2ω d y + ω d²: only the linear term on y and the constant hold d. From the fixed base f0
        # (the network's loads d0), not from the last period's: the result depends on this period's loads only
        c[self._yp] += 2.0 * w * (pd - self._pd0)
        c[self._yq] += 2.0 * w * (qd - self._qd0)
        const = f.const + w * float(np.sum(pd**2 - self._pd0**2) + np.sum(qd**2 - self._qd0**2))
        self._f = dataclasses.replace(f, c=c, const=const)
        self._pd, self._qd = pd.copy(), qd.copy()
        self._own_loads = (self._pd.copy(), self._qd.copy())
        if self._free_r is not None:  # only the part holding the loads is linearized; the rest is unchanged
            self._f_lin, _ = self._f.split(np.concatenate([self._yp, self._yq]))
        else:
            self._f_lin = self._f
        self._f_r = self.reduction.pull_objective(self._f)
        self._data_changed()
        for name, vals in (("sp", pd), ("sq", qd)):
            lm = self.problem.expressions[name]
            const_e = np.array(lm.const, dtype=float)
            const_e[self._sp_rows] = vals
            self.problem.expressions[name] = dataclasses.replace(lm, const=const_e)

    def _set_generation(self, pmax: np.ndarray, ramp) -> None:
        lb, ub, cl, cu = (b.copy() for b in self._bounds0)
        # the model is built with every generator's largest output over the horizon (the runner's network); a cap
        # below pmin lowers pmin, as in the centralized reference (Horizon.network_at)
        lo = np.minimum(self._lb0[self._gen_cols], pmax)
        hi = np.minimum(self._ub0[self._gen_cols], pmax)
        if ramp is not None and self.z_released is not None:  # a cold start forgets the iterate, not the dispatch
            prev = self.z_released[self._gen_cols]  # the zone's own dispatch of the previous period (released to it)
            r = np.asarray(ramp, dtype=float)
            lo = np.maximum(lo, prev - r)
            hi = np.minimum(hi, prev + r)
        hi = np.maximum(hi, lo)
        lb[self._pg_r], ub[self._pg_r] = lo, hi
        self.problem.lb[self._gen_cols], self.problem.ub[self._gen_cols] = lo, hi
        self.solver.set_bounds(lb, ub, cl, cu)

    def step(self, msg):
        try:
            return super().step(msg)
        except SolverError:
            if not self.config.private:  # a non-private day stops at a failed solve (the runner says where)
                raise
            return self._failed_step(msg)

    def _failed_step(self, msg) -> ZoneUpdate:
        """A private round whose local solve failed (under large noise: Clarabel's iteration limit, Ipopt's local
        infeasibility): the zone releases its previous released point again and the day goes on.

        Privacy: the failed solve is a function of the round's noisy linear term (and of public data and earlier
        releases), and so is the repeated release (post-processing of the round's step): the step is charged to the
        ledger as if it had succeeded, so the ledger's total per zone stays the claim. The failures are counted in the
        zone (``local_failures``: the simulation's evaluation; they never cross as such)."""
        t = msg.round
        self.round = t
        if self.perturbation.once:  # input perturbation: its draw is charged once (the period's first round)
            self.perturbation.end_round(1)
        else:
            self.perturbation.end_round(int(self.config.local_updates))
        self.local_failures += 1
        released = self.z_released[self.shared_cols].copy()
        self.lam = self.lam + msg.rho * (msg.w - released)
        self._record_stats(SolverStats(solves=1, iterations=0, solver_s=0.0, wall_s=0.0, statuses=("failed",),
                                       noise_magnitude=0.0))
        return ZoneUpdate(round=t, zone=self.zone, released=released)

    def period_failures(self, _: Any = None) -> int:
        """The local solves that failed so far (the simulation's evaluation only; -1 outside it)."""
        if not self.config.evaluate:
            return -1
        return int(self.local_failures)

    def period_dispatch(self, _: Any = None) -> dict[int, float]:
        """The zone's own generators' p (p.u.) at its released point: the simulation's evaluation only."""
        if not self.config.evaluate:
            return {}
        return {int(g): float(v) for g, v in zip(self._gens, self.z_released[self._gen_cols])}

    def process_cpu(self, _: Any = None) -> tuple[int, float]:
        """(pid, CPU seconds) of the process hosting this zone: the simulation's evaluation of the time per period
        (several zones may share a process; the runner counts each process once). A solve's time depends on the
        zone's data, so outside the simulation's evaluation (``config.evaluate`` off) it is NaN."""
        import os
        import time

        if not self.config.evaluate:  # a deployment: a zone's CPU time could time its private solves
            return os.getpid(), math.nan
        return os.getpid(), time.process_time()

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.pop("stats_log", None)  # a day writes no stats.csv: the per-period checkpoints need not carry the log
        state["period"] = -1 if self.period is None else int(self.period)
        state["local_failures"] = int(self.local_failures)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.local_failures = int(state.get("local_failures", 0))


def period_slices(own_buses: dict[int, np.ndarray], own_gens: dict[int, np.ndarray], pd: np.ndarray, qd: np.ndarray,
                  pmax: np.ndarray, period: int, ramp: np.ndarray | None, cold: bool,
                  rating: np.ndarray | None = None) -> dict[int, dict]:
    """Each zone's own slice of one period's data (what :meth:`DispatchZoneAgent.set_period` takes); ``rating``: the
    buses' public rated load (p.u.) when the perturbed loads are clipped."""
    return {
        z: {"period": int(period), "pd": pd[own_buses[z]], "qd": qd[own_buses[z]], "pmax": pmax[own_gens[z]],
            "ramp": None if ramp is None else ramp[own_gens[z]], "cold": bool(cold),
            "rating": None if rating is None else rating[own_buses[z]]}
        for z in own_buses
    }
