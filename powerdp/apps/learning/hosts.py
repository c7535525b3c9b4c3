"""Where learning clients live: the engine's sharing hosts (serial, worker processes, MPI ranks).

A client is built on its host from a :class:`~powerdp.engine.sharing.hosts.SharingAgentSpec` that holds its own
samples only (the spec goes to that host alone) and serves the hosts' commands: ``init``, ``step_each`` (its
:class:`~powerdp.engine.consensus.messages.ConsensusMessage`), ``diag``, ``save``/``restore``/``prune`` (its state as
``agent_P_round_T.npz`` + ``.json`` on its own host, no pickles). Only the released model crosses back.
The arithmetic is the same on every backend (one BLAS thread per host), so a seeded run is bit-identical
across them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...engine.consensus.messages import ConsensusMessage, ZoneUpdate
from ...engine.sharing.hosts import SharingAgentSpec
from .client import ClientAgent, ClientDiagnostics
from .config import LearnConfig

__all__ = ["HostedClient", "client_specs", "LEARNING_BACKENDS"]

LEARNING_BACKENDS = ("serial", "process", "mpi")


class HostedClient:
    """A :class:`ClientAgent` on the sharing hosts' contract (built as ``HostedClient(agent=P, ...)``)."""

    private_kind = "client"  # its checkpoints: OUT/clients.private/client_P (sharing_hosts' save/restore/prune)

    def __init__(self, agent: int, X: np.ndarray, y: np.ndarray, K: int, I: int, config: LearnConfig, R2: float, R1: float):
        self.client = ClientAgent(agent, X, y, K, I, config, R2, R1)

    @property
    def journal(self):
        """The client's release journal (the host journals each release before it leaves)."""
        return self.client.journal

    def initialize(self) -> ZoneUpdate:
        return self.client.initialize()

    def step(self, msg: ConsensusMessage) -> ZoneUpdate:
        return self.client.step(msg)

    def diagnostics(self, evaluate: bool = False, privacy: bool = True) -> ClientDiagnostics:
        return self.client.diagnostics(evaluate=evaluate, privacy=privacy)

    @property
    def last_stats(self):
        return self.client.last_stats

    def state_dict(self) -> dict[str, Any]:
        arrays, meta = self.client.state_dict()
        return {"arrays": arrays, "meta": meta}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.client.load_state_dict(state["arrays"], state["meta"])


def client_specs(config: LearnConfig, X: np.ndarray, y: np.ndarray, parts: list[np.ndarray], K: int, R2: float, R1: float) -> list[SharingAgentSpec]:
    """One spec per client: its samples ``X[parts[p]]``, ``y[parts[p]]`` and the public settings."""
    return [
        SharingAgentSpec(
            agent=p, factory="powerdp.apps.learning.hosts:HostedClient", weight=len(idx),
            kwargs=dict(X=X[idx], y=y[idx], K=K, I=len(y), config=config, R2=R2, R1=R1),
        )
        for p, idx in enumerate(parts)
    ]
