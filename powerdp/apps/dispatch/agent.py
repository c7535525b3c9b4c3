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
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...grid.network import Network
from ...opf.objectives import OBJECTIVES
from ..power_flow.agent import ZoneAgent
from ..power_flow.config import RunConfig

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
        sp_keys = {k: j for j, k in enumerate(prob.expressions["sp"].keys)}
        self._sp_rows = np.array([sp_keys[int(i)] for i in self._own], dtype=np.int64)
        self._pg_r = self.reduction.reduced.index_of([("pg", int(g)) for g in self._gens])
        self._bounds0 = tuple(np.array(b, dtype=float) for b in self.solver.bounds)
        self._ub0 = prob.ub.copy()
        self._lb0 = prob.lb.copy()
        self.period: int | None = None
        self._pending_draw = False  # input perturbation: this period's fresh d̃ not yet in the ledger

    # ------------------------------------------------------------------ periods
    def set_period(self, data: dict[str, Any]) -> None:
        """Take period ``data["period"]``: the zone's own loads ``pd``, ``qd`` (p.u., its own buses in order), its
        generators' available output ``pmax`` (p.u., its generators in order), and optional ramp limits
        (``ramp``: p.u. per period per generator, inf where none) around its own previous dispatch. ``cold``
        forgets the previous period (duals, warm start: the caller then projects the flat start again);
        ``redraw`` draws input perturbation's noise afresh for this period."""
        self.period = int(data["period"])
        self._set_loads(np.asarray(data["pd"], dtype=float), np.asarray(data["qd"], dtype=float))
        self._set_generation(np.asarray(data["pmax"], dtype=float), data.get("ramp"))
        if data.get("cold"):
            self.lam = np.zeros(self.n_shared)
            self._warm = None
        if data.get("redraw") and self.config.spec.perturbation == "input":
            p = self.perturbation
            p.xi = p.mechanism.sample(self.rng, len(p.noise_cols))  # the period's own d̃ (once per period)
            self._pending_draw = True

    def _set_loads(self, pd: np.ndarray, qd: np.ndarray) -> None:
        if pd.shape != self._pd.shape or qd.shape != self._qd.shape:
            raise ValueError(f"zone {self.zone}: period loads of shape {pd.shape}, expected {self._pd.shape}")
        w = self._omega
        f = self._f
        c = f.c.copy()
        # ω (y + d)² = ω y² + 2ω d y + ω d²: only the linear term on y and the constant hold d
        c[self._yp] += 2.0 * w * (pd - self._pd)
        c[self._yq] += 2.0 * w * (qd - self._qd)
        const = f.const + w * float(np.sum(pd**2 - self._pd**2) + np.sum(qd**2 - self._qd**2))
        self._f = dataclasses.replace(f, c=c, const=const)
        self._pd, self._qd = pd.copy(), qd.copy()
        if self._free_r is not None:  # only the part holding the loads is linearized; the rest is unchanged
            self._f_lin, _ = self._f.split(np.concatenate([self._yp, self._yq]))
        else:
            self._f_lin = self._f
        self._f_r = self.reduction.pull_objective(self._f)
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
        update = super().step(msg)
        if self._pending_draw and self.ledger is not None:
            self.ledger.record(1)  # the period's fresh d̃ is released (through its post-processing) from its first round
            self._pending_draw = False
        return update

    def period_dispatch(self, _: Any = None) -> dict[int, float]:
        """The zone's own generators' p (p.u.) at its released point: the simulation's evaluation only."""
        if not self.config.evaluate:
            return {}
        return {int(g): float(v) for g, v in zip(self._gens, self.z_released[self._gen_cols])}

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["period"] = -1 if self.period is None else int(self.period)
        return state


def period_slices(own_buses: dict[int, np.ndarray], own_gens: dict[int, np.ndarray], pd: np.ndarray, qd: np.ndarray,
                  pmax: np.ndarray, period: int, ramp: np.ndarray | None, cold: bool, redraw: bool) -> dict[int, dict]:
    """Each zone's own slice of one period's data (what :meth:`DispatchZoneAgent.set_period` takes)."""
    return {
        z: {"period": int(period), "pd": pd[own_buses[z]], "qd": qd[own_buses[z]], "pmax": pmax[own_gens[z]],
            "ramp": None if ramp is None else ramp[own_gens[z]], "cold": bool(cold), "redraw": bool(redraw)}
        for z in own_buses
    }
