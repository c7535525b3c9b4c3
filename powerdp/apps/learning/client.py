"""A federated-learning client: one holder of training samples, on the engine's local-problem contract.

:class:`ClientAgent` offers what an update rule may use of an agent
(:class:`powerdp.engine.consensus.updates.base.LocalProblem`: ``gradient``, ``solve``, masks, ``lipschitz``, the
zone's ``perturbation`` and ``reduction``), so :class:`~powerdp.engine.consensus.updates.LinearizedUpdate`,
:class:`~powerdp.engine.consensus.updates.trust_region.TrustRegionUpdate`, the perturbations, the mechanisms and
:class:`~powerdp.privacy.PrivacyLedger` run on it unchanged. Its samples live in its
:class:`~powerdp.apps.learning.model.SoftmaxLoss` and never leave it: :meth:`ClientAgent.step` returns a
:class:`~powerdp.engine.consensus.messages.ZoneUpdate` holding its released model only. Every entry of z is shared
(the global model w), and the local step is the closed-form box projection (``box`` solver).

Places that follow the engine's privacy contract (docs/contributing.md, "The agent contract"): the noise
generator (:func:`client_rng`: ``privacy.noise_rng``), the allow-listed message (the release only; solver
statistics stay with the client), and the checkpoint state (arrays and JSON values, never pickles).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import privacy
from ...engine.consensus.messages import ConsensusMessage, SolverStats, ZoneUpdate
from ...engine.consensus.perturbations import PERTURBATIONS, Perturbation
from ...engine.consensus.updates import UPDATES, LocalUpdate
from ...opf.box import BoxProblem, IdentityReduction
from ...opf.local_solver import BOX_SOLVERS, solver_class
from ...privacy import PrivacyLedger, Sensitivity
from ...privacy.faults import replays
from ...privacy.journal import ReleaseJournal, privacy_report
from .config import LearnConfig
from .model import SoftmaxLoss, lipschitz_bound
from .sensitivity import gradient_sensitivity, paper_sensitivity
from .steps import BacktrackingLinearizedUpdate, curvature_diagonal

__all__ = ["ClientAgent", "ClientDiagnostics", "client_rng"]


def client_rng(config: LearnConfig, client: int) -> privacy.NoiseSource:
    """The client's noise generator: :func:`powerdp.privacy.noise_rng`, where every agent gets its generator
    (secret OS entropy for ``seed`` None, else the reproducible seeded one)."""
    return privacy.noise_rng(config.seed, client, faults=config.faults)


def _message(t: int, client: int, released: np.ndarray) -> ZoneUpdate:
    """The client's release as the engine's allow-listed message (its solver statistics stay with it)."""
    return ZoneUpdate(round=t, zone=client, released=released)


@dataclass(frozen=True)
class ClientDiagnostics:
    """Evaluation-only figures of a client (experiments and plots; never sent to the coordinator)."""

    zone: int
    objective: float  # f_p at the released model
    noise_magnitude: float  # Σ|ξ| over the round's local steps (000 eq. 29)
    max_violation: float  # how far the released model lies outside W_p (OutPert may leave it)
    epsilon_spent: float
    privacy: dict[str, Any] | None


class ClientAgent:
    """Client ``client`` holding samples ``X`` (rows already preprocessed) with labels ``y`` in 0..K−1.

    ``I`` is the public number of training samples of all clients; ``R2``/``R1`` the public row bounds.
    """

    def __init__(self, client: int, X: np.ndarray, y: np.ndarray, K: int, I: int, config: LearnConfig, R2: float, R1: float):
        self.zone = int(client)
        self.config = config
        engine = config.engine_view()
        self.loss = SoftmaxLoss(X, y, K, I, reg=config.reg / config.clients)  # private: holds the samples
        self.n = self.loss.n
        self.samples = len(y)
        self.lipschitz = lipschitz_bound(self.samples, I, R2, self.loss.reg)  # data-independent (public I_p, I, R₂)
        self.shared_mask = np.ones(self.n)  # every entry is the global model's
        self.prox_mask = np.ones(self.n)
        u = config.box if config.box is not None else np.inf
        self.problem = BoxProblem(np.full(self.n, -u), np.full(self.n, u), name=f"client {client}")
        self.reduction = IdentityReduction(self.problem)
        self.update: LocalUpdate = (  # a non-private run's "auto" step backtracks on f_p (its data: no privacy to keep)
            BacktrackingLinearizedUpdate(engine, curvature_diagonal(self.loss.X, K, I, self.loss.reg))
            if config.eta_rule == "backtracking"
            else UPDATES[engine.spec.update](engine)
        )
        solver_problem, pattern = self.update.local_problem(self.reduction, None)
        self.solver = solver_class(config.local_solver, "local_solver", BOX_SOLVERS).from_config(solver_problem, pattern, engine)
        self.rng = client_rng(config, client)  # engine: the zone's noise generator
        self.grad_sensitivity: Sensitivity | None = None
        if engine.private:
            self.grad_sensitivity = (
                paper_sensitivity(X, I) if config.sensitivity == "paper" else gradient_sensitivity(R2, R1, I, config.adjacency)
            )
        self.perturbation: Perturbation = PERTURBATIONS[engine.spec.perturbation](
            engine, gradient_sensitivity=self.grad_sensitivity, rng=self.rng, noise_cols=np.arange(self.n),
            n=self.n, zone=self.zone, update=self.update, lipschitz=self.lipschitz,
        )
        # what the client has released, so that a resumed client never releases a round again with fresh noise
        # (privacy/journal.py); its host opens it in the client's private checkpoint folder
        self.journal = ReleaseJournal(self.zone, self.rng, self.ledger) if engine.private and replays(config.faults) else None
        self.z_last: np.ndarray | None = None
        self.z_released: np.ndarray | None = None
        self.lam = np.zeros(self.n)
        self.round = 0
        self.last_noise = 0.0

    # ------------------------------------------------------- the local-problem contract
    @property
    def ledger(self) -> PrivacyLedger | None:
        return self.perturbation.ledger

    @property
    def mechanism(self):
        return self.perturbation.mechanism

    def gradient(self, z: np.ndarray) -> np.ndarray:
        """∇f_p(z) = (1/I) X_pᵀ(H − Y) + (2β/P) z (holds the samples; never leaves the client)."""
        return self.loss.gradient(z)

    def solve(self, c: np.ndarray, diag: np.ndarray, step: int | None, exact: bool = False, bounds=None):
        """min over W_p (or the update rule's bounds) of c·z + ½ Σ diag z²: the box projection."""
        if exact:
            raise NotImplementedError("a learning client has no exact local solve (use a linearized or trust-region rule)")
        if bounds is not None:
            self.solver.set_bounds(*bounds)
        res = self.solver.solve(self.reduction.pull(c, diag))
        res.check(f"client {self.zone}, round {self.round}, local step {step}")
        return res.x, res

    # ------------------------------------------------------------------- protocol
    def initialize(self) -> ZoneUpdate:
        """z¹ = the projection of the data-independent start 0 onto W_p (the zero model)."""
        z = np.clip(np.zeros(self.n), self.problem.lb, self.problem.ub)
        self.z_last = self.z_released = z
        self.last_stats = SolverStats(1, 0, 0.0, 0.0, ("solved",))
        return _message(0, self.zone, z.copy())

    def step(self, msg: ConsensusMessage) -> ZoneUpdate:
        """One ADMM round: E local steps of the update rule, release the mean iterate, update λ_p."""
        if msg.zone != self.zone:
            raise ValueError(f"message for client {msg.zone} delivered to client {self.zone}")
        t0 = time.perf_counter()
        self.round = t = msg.round
        w, rho = msg.w, msg.rho
        admm_lin = rho * w + self.lam  # B_pᵀ(ρ w + λ) with B_p = I
        self.perturbation.start_round(t)
        outcome = self.update.run_round(self, t, rho, admm_lin)
        if self.config.private:
            self.perturbation.end_round(len(outcome.iterates))
        its = outcome.iterates
        self.z_last = its[-1]
        self.z_released = its[0] if len(its) == 1 else np.mean(its, axis=0)
        self.lam = self.lam + rho * (w - self.z_released)
        self.last_noise = outcome.noise  # evaluation only: stays with the client
        self.last_stats = SolverStats(  # client-side: what the round's solves cost (no noise figure in it)
            solves=len(its), iterations=outcome.iterations, solver_s=outcome.solver_s,
            wall_s=time.perf_counter() - t0, statuses=tuple(outcome.statuses),
        )
        return _message(t, self.zone, self.z_released.copy())

    def diagnostics(self, evaluate: bool = True, privacy: bool = True) -> ClientDiagnostics:
        """The client's evaluation figures; ``privacy=False`` skips the ledger's accountant (NaN spend)."""
        ledger = self.ledger
        z = self.z_released
        viol = 0.0
        if z is not None and self.config.box is not None:
            viol = float(max(np.abs(z).max() - self.config.box, 0.0))
        return ClientDiagnostics(
            zone=self.zone,
            objective=self.loss.value(z) if (evaluate and z is not None) else float("nan"),
            noise_magnitude=self.last_noise,
            max_violation=viol,
            epsilon_spent=(ledger.epsilon_spent() if privacy else float("nan")) if ledger is not None else 0.0,
            privacy=privacy_report(ledger, self.journal) if privacy else None,
        )

    # ----------------------------------------------------------------- checkpoint
    # engine: a client's state is numpy arrays plus plain JSON values (no pickle)
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {"z_last": self.z_last, "z_released": self.z_released, "lam": self.lam}
        ledger = self.ledger
        meta = {
            "zone": self.zone,
            "round": self.round,
            # the noise stream, secret or seeded: a resumed client redraws the noise of the rounds it repeats
            "rng": self.rng.state if (self.rng.seeded or replays(self.config.faults)) else None,
            "ledger_steps": ledger.steps if ledger is not None else 0,
            "ledger": ledger.state_dict() if ledger is not None else None,
        }
        if isinstance(self.update, BacktrackingLinearizedUpdate):
            meta["step"] = self.update.state()
        return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        if int(meta["zone"]) != self.zone:
            raise ValueError(f"checkpoint of client {meta['zone']} loaded into client {self.zone}")
        self.round = int(meta["round"])
        self.z_last = np.asarray(arrays["z_last"], dtype=float)
        self.z_released = np.asarray(arrays["z_released"], dtype=float)
        self.lam = np.asarray(arrays["lam"], dtype=float)
        if meta.get("rng") is not None:
            self.rng.state = meta["rng"]
        if isinstance(self.update, BacktrackingLinearizedUpdate):
            self.update.load(meta["step"])
        if self.ledger is not None and meta.get("ledger") is not None:
            self.ledger.load_state_dict(meta["ledger"])
        elif self.ledger is not None and int(meta["ledger_steps"]) > self.ledger.steps:  # an earlier version's checkpoint
            if self.config.spec.perturbation == "output":  # the mechanism of each past round, as it was recorded
                for t in range(1, self.round + 1):
                    self.perturbation.start_round(t)
                    self.ledger.record(self.config.local_updates, mechanism=self.perturbation.mechanism)
            else:
                self.ledger.record(int(meta["ledger_steps"]) - self.ledger.steps)
