"""A zone agent: one zone's private data, its compiled local problem, its local updates.

The agent builds its zone's Pyomo model once (docs/formulation.md), compiles it, and from
then on only re-solves the compiled problem with new linear and diagonal
objective terms (docs/algorithm.md step 2). Its loads live inside its compiled objective
``f_p`` and never leave it: :meth:`ZoneAgent.step` returns a
:class:`~powerdp.engine.consensus.messages.ZoneUpdate` holding only ``B_p z_p`` and solver
statistics. :meth:`ZoneAgent.diagnostics` (the true objective and the
constraint violation of the released point) exists for experiments, which is
how the paper's figures are drawn; the coordinator never calls it.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...engine.consensus.messages import ConsensusMessage, SolverStats, ZoneUpdate
from ...engine.consensus.perturbations import PERTURBATIONS, Perturbation
from ...engine.consensus.updates import UPDATES, LocalUpdate, step_size
from ...errors import ConfigError
from ...files.checkpoint import zone_checkpoint_path
from ...grid.network import Network
from ...opf.compiled import CompiledProblem, QuadraticObjective
from ...opf.direct import compile_zone
from ...opf.formulation import BALANCE_VARIABLES
from ...opf.local_solver import AUTO, LocalSolver, auto_solver, solver_class
from ...opf.objectives import OBJECTIVES, generation_cost, total_shedding_mw
from ...opf.reduction import eliminate, sparse_elimination
from ...privacy import PrivacyLedger, noise_rng
from ...privacy.faults import replays
from ...privacy.journal import ReleaseJournal, privacy_report
from ...privacy.sampler import warm_up as warm_up_sampler
from .config import RunConfig
from .implemented import ZoneImplemented, held_flows, solve_implemented, with_loads
from .zone_persistence import ZonePersistence
from .zone_terms import lipschitz_constant, load_positions, objective_scaling
from .zone_terms import maybe_leak as _maybe_leak

__all__ = ["ZoneAgent", "hosted_zone_agent", "ZoneDiagnostics", "ZoneImplemented", "step_size", "lipschitz_constant",
           "zone_checkpoint_path"]


@dataclass(frozen=True)
class ZoneDiagnostics:
    """Evaluation-only figures of a zone (experiments and plots; never sent to the coordinator)."""

    zone: int
    objective: float  # f_p at the released point, with the true loads
    max_violation: float  # how far the released point lies outside W_p
    epsilon_spent: float
    privacy: dict[str, Any] | None
    solution: dict[Hashable, float] | None = None
    cost: float = math.nan  # generation cost of the released dispatch ($/h; NaN without costs)
    shedding_mw: float = math.nan  # Σ over own buses of |yp + pd| at the released point, MW
    # the zone's own statistics of its last round (solver work, Σ|ξ|): zone-private, evaluation only (None without)
    stats: SolverStats | None = None


class ZoneAgent(ZonePersistence):
    """One zone's operator in the distributed solve.

    Parameters
    ----------
    net: the network (the agent reads only its own buses' loads).
    zone: the zone id.
    own_buses: internal indices of the buses the zone owns.
    shared_keys: the zone's shared variables, in the order of its consensus entries.
    config: the run configuration.
    """

    def __init__(
        self,
        net: Network,
        zone: int,
        own_buses: np.ndarray,
        shared_keys: Sequence[Hashable],
        config: RunConfig,
    ):
        self.zone = int(zone)
        self.config = config
        self.private_inputs: dict[str, dict] = {}  # the zone's own input files with their SHA-256 (hosted_zone_agent)
        t0 = time.perf_counter()
        # everything alive before this zone's model is kept out of the collection below (gc.freeze), which then
        # scans only the model: 0.04 s instead of 0.7 s a zone on case118 (loaded machine); gc.unfreeze
        # gives them back to the collector
        gc.freeze()
        try:
            # the zone's model compiled to arrays: straight from the network's arrays where opf.direct writes
            # the model build_model defines (the shedding objective), else built with Pyomo and compiled
            self.problem: CompiledProblem = compile_zone(
                net, own_buses, objective=config.objective, flows=config.flows, name=f"{net.name}/zone{zone}",
                shedding_weight=config.shedding_weight,
            )
            t1 = time.perf_counter()
            gc.collect()  # drop a Pyomo model now rather than inside the solver's callbacks
        finally:
            gc.unfreeze()
        t2 = time.perf_counter()
        prob = self.problem
        self.n = prob.n
        self._f = prob.objective  # the private local objective (holds the loads)
        self.shedding_weight = prob.meta.get("shedding_weight")  # ω of a weighted objective, else None
        self.shared_cols = prob.index_of(list(shared_keys))
        self.n_shared = len(self.shared_cols)
        self._shared_mask = np.zeros(self.n)
        self._shared_mask[self.shared_cols] = 1.0
        # the balance variables y: the only entries of z through which the loads enter f_p
        y_cols = np.flatnonzero([key[0] in BALANCE_VARIABLES for key in prob.var_keys])
        # what the linearized and trust-region rules linearize (docs/algorithm.md): all of f_p, or with
        # linearize "private" only the terms on y; the rest (e.g. the generation cost) holds no load and
        # is kept exact in every local problem, and the proximal term covers only what is linearized
        self._f_lin, free = self._f, None
        self._y_cols = y_cols
        if config.linearize == "private" and y_cols.size:
            private, rest = self._f.split(y_cols)
            # a zone of an objective with a data-free part is treated so even when its own part is zero (no generator
            # in the zone): linearized with the proximal term on all of z and L = 2ω, such a zone moved by ~ρ/ω a
            # round and the run settled 1.5e-3 above the optimum (case118, 16 modularity zones: docs/algorithm.md)
            if not rest.is_zero or OBJECTIVES[config.objective].data_free_terms:
                self._f_lin, free = private, rest
        self._prox_mask = np.ones(self.n)
        self.private_prox: np.ndarray | None = None  # τ on the entries neither linearized nor shared (None: none)
        if free is not None:
            self._prox_mask = np.zeros(self.n)
            self._prox_mask[self._f_lin.support()] = 1.0
            if config.proximal > 0:
                rest = (self._prox_mask == 0) & (self._shared_mask == 0)
                self.private_prox = np.where(rest, float(config.proximal) * float(config.rho), 0.0)
        self.lipschitz = lipschitz_constant(self._f_lin, self.n)
        self._gen_cols = prob.index_of([("pg", int(g)) for g in prob.meta["gens"]])
        self._gens = np.asarray(prob.meta["gens"], dtype=np.int64)
        self._net = net
        # the algorithm works in z (flows included in "variables" mode, as in the paper); a solver that
        # wants it (Ipopt, Clarabel) solves the smaller problem in r with the flows and balance variables
        # eliminated (z = P r), another the problem in z itself (P = I)
        # "auto": the active set where the local problem is strongly convex in every entry (the proximal term covers
        # all of z) and small, else Clarabel (opf.local_solver.auto_solver; both solve the reduced problem)
        solver_name = "ipopt" if config.local_solver == AUTO and config.asks_for_ipopt else config.local_solver
        solver_cls = solver_class("clarabel" if solver_name == AUTO else solver_name, "local_solver")
        # (the balance variables too unless that fills the zone's KKT factor in: reduction.sparse_elimination)
        # a weighted objective (ω(y + d)², ω ~ 1e9 with auto ω) keeps y: eliminated, it writes ω·MᵀM into every entry of
        # the solver's Hessian (M: the balance rows' admittances), which no solver then solves to better than ~1e-2
        # (docs/results/performance.md, "cost+shedding at scale")
        if not solver_cls.wants_reduced:
            self.reduction = eliminate(prob, ())
        elif OBJECTIVES[config.objective].weighted and config.proximal > 0:
            self.reduction = eliminate(prob, ("ohm",))
        else:
            self.reduction = sparse_elimination(prob)
        red = self.reduction
        if solver_name == AUTO:
            solver_name = auto_solver(red.reduced.n, bool(self._prox_mask.all()))
            solver_cls = solver_class(solver_name, "local_solver")
        self.solver_name = solver_name
        self._f_r = red.reduced.objective  # f_p in the solver's coordinates (exact ADMM)
        self._free_r = red.pull_objective(free) if free is not None else None  # the data-free part, kept exact
        # the update rule decides what the solver is built for (docs/algorithm.md)
        self.update: LocalUpdate = UPDATES[config.update](config)
        local, pattern = self.update.local_problem(red, self._f_r)
        if self._free_r is not None:
            pattern = QuadraticObjective(
                c=pattern.c,
                qi=np.concatenate([pattern.qi, self._free_r.qi]),
                qj=np.concatenate([pattern.qj, self._free_r.qj]),
                qv=np.concatenate([pattern.qv, np.zeros(len(self._free_r.qv))]),
            )
        scale = objective_scaling(self.shedding_weight).get("obj_scaling_factor")
        self.solver: LocalSolver = solver_cls.from_config(local, pattern, config, objective_scale=scale)
        self._warm_start = bool(config.warm_start and solver_cls.supports_warm_start)
        self._z_flat = prob.x0.copy()  # data-independent flat start (docs/algorithm.md)
        self._r_flat = red.reduced.x0.copy()
        self.rng = noise_rng(config.seed, self.zone, faults=config.faults)  # secret unless seeded; never leaves the zone
        self.grad_sensitivity = None
        # where ObjPert's noise goes: the balance variables y, the only entries of ∇f_p that hold
        # loads (noise_on "data"), or every entry of z as the paper draws it ("all")
        self.noise_cols = y_cols if config.noise_support == "data" else np.arange(self.n)
        if config.private:
            if y_cols.size == 0:
                raise ConfigError(f"zone {self.zone}: objective {config.objective!r} has no balance variables; DP needs them")
            warm_up_sampler()  # the compiled noise kernels load in the set-up, not in the first private round
            # the objective unit's own rule (docs/privacy.md): 2β on y for shedding, 2ωβ for cost+shedding
            self.grad_sensitivity = OBJECTIVES[config.objective].gradient_sensitivity(
                config.beta, config.sensitivity, config.adjacency, weight=self.shedding_weight
            )
        own = np.asarray(prob.meta.get("own", own_buses), dtype=np.int64)
        self._own_loads = (np.asarray(net.pd[own], dtype=float), np.asarray(net.qd[own], dtype=float))
        self.perturbation: Perturbation = PERTURBATIONS[config.spec.perturbation](
            config,
            gradient_sensitivity=self.grad_sensitivity,
            rng=self.rng,
            noise_cols=self.noise_cols,
            n=self.n,
            zone=self.zone,
            update=self.update,
            lipschitz=self.lipschitz,
            loads=self._own_loads,
        )
        # the balance variables of the own buses, in own-bus order (where the loads enter f_p: 2ω·d on y)
        self._y_own = (prob.index_of([("yp", int(i)) for i in own]), prob.index_of([("yq", int(i)) for i in own])) \
            if y_cols.size else None
        self._round_f: QuadraticObjective | None = None  # f_p with the perturbation's loads (totals), else None
        self._held = held_flows(net, prob, own_buses, shared_keys)  # the tie-line flows the implemented dispatch holds
        self.z_implemented: np.ndarray | None = None  # the implemented point, once computed (implement)
        # what the zone has released, so that a resumed zone never releases a round again with fresh noise
        # (privacy/journal.py); opened in its private checkpoint folder when the run keeps checkpoints
        replay = replays(config.faults)  # False only under the test-only old resume (privacy/faults.py)
        self.journal = ReleaseJournal(self.zone, self.rng, self.ledger) if config.private and replay else None
        self._data_changed()
        if self.perturbation.once:
            self._draw_input()
        self.z_last: np.ndarray | None = None  # last local iterate (the next round starts here)
        self.z_released: np.ndarray | None = None  # z_p^{t+1}, the mean of the round's iterates
        self.lam = np.zeros(self.n_shared)
        self.round = 0
        self._warm: tuple[np.ndarray, ...] | None = None
        self.last_stats: SolverStats | None = None  # zone-private (messages.SolverStats)
        self.stats_log: list[tuple[int, SolverStats]] = []
        # build_s: the compiled problem (Pyomo's build and compile, or opf.direct); compile_s: the collection after it
        self.setup_s = {"build_s": t1 - t0, "compile_s": t2 - t1, "solver_s": time.perf_counter() - t2}

    # ------------------------------------------------------------ input perturbation
    def _draw_input(self) -> None:
        """Input perturbation: release the zone's data term on the noise support once (its loads' 2ωd) and compute with
        that noisy term from now on (:meth:`use_input_term`). A perturbation that releases from the loads themselves
        (the totals): release them and aim the rounds at the loads the release stands for (:meth:`_aim_rounds`)."""
        if self.perturbation.from_loads:
            self.perturbation.draw(*self._own_loads)
            self._aim_rounds()
            return
        self.use_input_term(self.perturbation.draw(self._f_lin_true.c[self.noise_cols]))

    def _data_changed(self) -> None:
        """The zone's objectives were (re)built on its true data: the linearized one and the exact step's are those."""
        self._f_lin_true = self._f_lin
        self._f_exact = self._f_r  # what an exact step solves with (input perturbation: its noisy term in place of d)

    def use_input_term(self, term: np.ndarray) -> None:
        """Put the released noisy term ``term`` where the zone's objective holds its data (the linear term on the noise
        support): the linearized steps' gradient and an exact step's objective are then those of f_p with d̃, computed
        from ``term`` alone (no rounding that involves d after the one draw); the true f_p stays for the evaluation."""
        cols = self.noise_cols
        if self.config.shrink_loads:
            term = self._shrunk(term)
        data = self._f_lin_true.c
        lin = data.copy()
        lin[cols] = term
        full = self._f.c.copy()
        full[cols] = (self._f.c[cols] - data[cols]) + term  # the data-free rest (0 on the data's entries) + n
        self._f_lin = dataclasses.replace(self._f_lin_true, c=lin)
        self._f_exact = self.reduction.pull_objective(dataclasses.replace(self._f, c=full))

    def _shrunk(self, term: np.ndarray) -> np.ndarray:
        """``--shrink-loads``: the released term with each block of it (the own buses' p loads, then their q loads)
        shrunk toward the block's mean (:func:`~powerdp.privacy.shrinkage.shrink_to_mean`, the noise's variance per
        entry being the mechanism's, public): a function of the release alone, so post-processing."""
        from ...privacy.shrinkage import shrink_blocks

        blocks = load_positions(self.noise_cols, self._y_own or ())  # every balance entry is on the noise support
        return shrink_blocks(term, list(blocks), float(self.perturbation.mechanism.variance))

    # ------------------------------------------------------------ internals
    def _aim_rounds(self) -> None:
        """The objective the rounds solve with: f_p itself, or (a perturbation whose release stands for the loads: the
        totals) f_p with the release's loads written in place of the zone's own, so nothing of the true loads is left
        in what the rounds compute. Refreshes the linearized part and the exact step's form (:attr:`_f_lin`,
        :attr:`_f_exact`); the true f_p (:attr:`_f`) stays for the evaluation and the implemented dispatch."""
        loads = self.perturbation.round_loads()
        f = self._f
        if loads is not None:
            f = self._round_f = self._with_loads(*loads)
        self._f_lin = f.split(self._y_cols)[0] if self._free_r is not None else f
        self._f_exact = self.reduction.pull_objective(f)

    def _with_loads(self, pd: np.ndarray, qd: np.ndarray) -> QuadraticObjective:
        """f_p with the loads ``pd``, ``qd`` (own buses, p.u.) instead of the zone's (:func:`.implemented.with_loads`)."""
        what = f"zone {self.zone}: objective {self.config.objective!r}"
        return with_loads(self._f, self._y_own, self._own_loads, pd, qd, float(self.shedding_weight or 1.0), what)

    @property
    def mechanism(self):
        """The zone's noise mechanism of the current round (None when non-private)."""
        return self.perturbation.mechanism

    @property
    def ledger(self) -> PrivacyLedger | None:
        return self.perturbation.ledger

    @property
    def shared_mask(self) -> np.ndarray:
        return self._shared_mask

    def _context(self, step: int | None = None) -> str:
        ctx = f"zone {self.zone}, round {self.round}"
        return ctx + (f", local step {step}" if step is not None else "")

    @property
    def prox_mask(self) -> np.ndarray:
        """1 on the entries of z the linearized part of f_p depends on (all of z when all of f_p is linearized)."""
        return self._prox_mask

    def gradient(self, z: np.ndarray) -> np.ndarray:
        """∇ of the linearized part of f_p at z: 2(y + d) on the balance variables for ``shedding``,
        2ω(y + d) for ``cost+shedding`` (plus the cost gradient with linearize "all"); holds the loads, stays here."""
        return self._f_lin.gradient(z)

    def solve(
        self,
        c: np.ndarray,
        diag: np.ndarray,
        step: int | None,
        exact: bool = False,
        bounds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
    ):
        """Solve min_{z ∈ W_p} c·z + ½ Σ diag_k z_k² (+ f_p if ``exact``); returns (z, SolveResult).

        ``bounds`` (lb, ub, cl, cu), in the solver's coordinates, replace the solver's variable and
        row bounds for this solve (an update rule that moves its feasible set, e.g. a trust region).
        """
        if bounds is not None:
            self.solver.set_bounds(*bounds)
        return self._solve(c, diag, step, exact)

    def _solve(self, c: np.ndarray, diag: np.ndarray, step: int | None, exact: bool = False):
        """Solve min_{z ∈ W_p} c·z + ½ Σ diag_k z_k² (+ f_p if ``exact``, else + its data-free part if it is
        kept exact); returns (z, SolveResult)."""
        objective = self.reduction.pull(c, diag, base=self._f_exact if exact else self._free_r)
        if self._warm is not None:
            # primal-dual warm start from the previous local solve (benchmarks/warmstart.py)
            x_prev, mult_g, zl, zu = self._warm
            res = self.solver.solve(objective, x0=x_prev, mult_g=mult_g, mult_x_lower=zl, mult_x_upper=zu)
        else:
            res = self.solver.solve(objective, x0=self._r_flat)
        res.check(self._context(step))
        if self._warm_start:
            self._set_warm((res.x, res.mult_g, res.mult_x_lower, res.mult_x_upper))
        return self.reduction.lift(res.x), res

    def _set_warm(self, point) -> None:
        if not self._warm_start:
            return
        if point is not None and self._warm is None:
            self.solver.enable_warm_start()  # from now on every solve is warm-started
        self._warm = point

    # ------------------------------------------------------------- protocol
    def initialize(self) -> ZoneUpdate:
        """Project the data-independent flat start onto W_p (docs/algorithm.md) and release its shared part."""
        t = time.perf_counter()
        z, res = self._solve(-self._z_flat, np.ones(self.n), None)
        self.z_last = z
        self.z_released = z
        self._record_stats(SolverStats(1, res.iterations, res.solver_s, time.perf_counter() - t, (res.outcome,), 0.0))
        return ZoneUpdate(round=0, zone=self.zone, released=z[self.shared_cols].copy())

    def _record_stats(self, stats: SolverStats) -> None:
        """Keep a round's solver statistics and noise magnitude with the zone (they never cross)."""
        self.last_stats = stats
        self.stats_log.append((self.round, stats))

    def step(self, msg: ConsensusMessage) -> ZoneUpdate:
        """One ADMM round (docs/algorithm.md steps 2–3): E local updates, release B_p z_p^{t+1}, update λ_p."""
        if msg.zone != self.zone:
            raise ValueError(f"message for zone {msg.zone} delivered to zone {self.zone}")
        if self.z_last is None:
            raise RuntimeError(f"zone {self.zone} has not been initialized")
        t_start = time.perf_counter()
        self.round = t = msg.round
        cfg = self.config
        w, rho = msg.w, msg.rho
        if msg.lam is not None:  # the coordinator's duals (accelerated): public values computed from releases
            self.lam = np.asarray(msg.lam, dtype=float)
        # B_pᵀ(ρ w + λ): the ADMM term's linear part, fixed for the round
        admm_lin = np.zeros(self.n)
        admm_lin[self.shared_cols] = rho * w + self.lam
        self.perturbation.start_round(t)
        outcome = self.update.run_round(self, t, self._penalty(rho), admm_lin)
        if cfg.private:
            self.perturbation.end_round(len(outcome.iterates))
        iterates = outcome.iterates
        self.z_last = iterates[-1]
        self.z_released = iterates[0] if len(iterates) == 1 else np.mean(iterates, axis=0)
        released = self.z_released[self.shared_cols].copy()
        self.lam = self.lam + rho * (w - released)  # docs/algorithm.md step 3
        self._record_stats(SolverStats(
            solves=len(iterates),
            iterations=outcome.iterations,
            solver_s=outcome.solver_s,
            wall_s=time.perf_counter() - t_start,
            statuses=tuple(outcome.statuses),
            noise_magnitude=outcome.noise,
        ))
        return _maybe_leak(ZoneUpdate(round=t, zone=self.zone, released=released), outcome.noise, cfg.faults)

    def _penalty(self, rho: float | np.ndarray) -> float | np.ndarray:
        """ρ as the update rules take it: the number itself, or one per entry of z (0 off the shared entries)."""
        if np.ndim(rho) == 0:
            return rho
        out = np.zeros(self.n)
        out[self.shared_cols] = rho
        return out

    # ------------------------------------------------------ implemented dispatch
    def implement(self, msg: ConsensusMessage) -> ZoneImplemented | None:
        """The zone's implemented dispatch (:mod:`powerdp.apps.power_flow.implemented`): its problem re-solved with its
        true loads, the active power into each of its tie-lines held at the agreed value ``msg.w`` (the mean of the
        last releases). Nothing is released: the simulation's evaluation gets the point (``config.evaluate``), a
        deployment's zone keeps it (:meth:`save_solution` writes it into its private folder) and returns None."""
        if msg.zone != self.zone:
            raise ValueError(f"message for zone {msg.zone} delivered to zone {self.zone}")
        scale = objective_scaling(self.shedding_weight).get("obj_scaling_factor")
        point = solve_implemented(self.problem, self._f, self._held, msg.w, self.shedding_weight, objective_scale=scale,
                                  reduction=self.reduction)
        self.z_implemented = point.z
        if not self.config.evaluate:
            return None
        z = point.z
        balance = self.problem.expressions.get("sp")
        sp = balance(z) if balance is not None else np.zeros(0)
        buses = [int(b) for b in balance.keys] if balance is not None else []
        return ZoneImplemented(
            zone=self.zone, solution=dict(zip(self.problem.var_keys, z.tolist())),
            shed_mw={b: float(v) * self._net.base_mva for b, v in zip(buses, sp)},
            shedding_mw=total_shedding_mw(sp, self._net.base_mva), objective=self._f.value(z),
            cost=generation_cost(self._net, z[self._gen_cols], self._gens), held=point.held, outcome=point.outcome,
            solver_s=point.solver_s,
            held_mw={k: float(v) * self._net.base_mva for k, v in zip(self._held.keys, self._held.values(msg.w))},
        )

    # ----------------------------------------------------------- evaluation
    def diagnostics(self, with_solution: bool = False) -> ZoneDiagnostics:
        """True objective and W_p violation of the released point, and the privacy spend.

        The first two (and the solution) depend on the zone's private data and are
        reported only when ``config.evaluate`` is on (experiments); otherwise they
        are NaN / None and only the data-independent privacy spend is reported.
        """
        z = self.z_released
        evaluate = self.config.evaluate
        solution = dict(zip(self.problem.var_keys, z.tolist())) if (with_solution and evaluate) else None
        return ZoneDiagnostics(
            zone=self.zone,
            objective=self._f.value(z) if evaluate else math.nan,
            max_violation=self.problem.max_violation(z) if evaluate else math.nan,
            cost=generation_cost(self._net, z[self._gen_cols], self._gens) if evaluate else math.nan,
            shedding_mw=total_shedding_mw(self.problem.expressions["sp"](z), self._net.base_mva) if evaluate else math.nan,
            epsilon_spent=self.ledger.epsilon_spent() if self.ledger is not None else 0.0,
            privacy=self.privacy_report(),
            solution=solution,
            stats=self.last_stats if evaluate else None,
        )

    def privacy_report(self) -> dict[str, Any] | None:
        """The ledger's report (public: data-independent), with what the zone's journal replayed after a resume."""
        return privacy_report(self.ledger, self.journal)


def hosted_zone_agent(net: Network, zone: int, own_buses: np.ndarray, shared_keys: tuple[Hashable, ...],
                      config: RunConfig) -> ZoneAgent:
    """Zone ``zone``'s agent as its host builds it (the engine's ``AgentSpec.agent``): in a deployment the zone
    reads its own load file on its own host, and no other."""
    if config.deployment is None:
        return ZoneAgent(net, zone, own_buses, shared_keys, config)
    from ...runs.inputs import file_entry
    from .zone_data import zone_loads_path, zone_network

    agent = ZoneAgent(zone_network(config.deployment, zone, net, own_buses), zone, own_buses, shared_keys, config)
    agent.private_inputs = {"private load": file_entry(zone_loads_path(config.deployment, zone))}  # checked on resume
    return agent
