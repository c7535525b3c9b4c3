"""A zone agent without a solver, for coordinator and backend tests (AgentSpec(agent="tests.fakes:FakeAgent")).

It follows the agent protocol the backends use (initialize, step, diagnostics, checkpoints, solution
files) with a closed-form local update: it moves its release halfway from the consensus value to a
private target that depends on its own loads, with noise from its own generator. Deterministic per
(seed, zone), like the real agent, so backends can be compared bit for bit in milliseconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from powerdp.apps.power_flow.agent import ZoneDiagnostics
from powerdp.engine.consensus.messages import ConsensusMessage, ZoneUpdate
from powerdp.privacy import noise_rng
from powerdp.privacy.sampler import gaussian_release


class FakeAgent:
    def __init__(self, net, zone, own_buses, shared_keys, config):
        self.zone = int(zone)
        self.config = config
        self.n_shared = len(shared_keys)
        # a private target from the zone's own loads (other zones' loads are zero on a host: private_view)
        self.target = np.full(self.n_shared, float(net.pd[own_buses].sum()))
        self.rng = noise_rng(config.seed, self.zone)
        self.released = np.zeros(self.n_shared)
        self.round = 0
        self.pid = os.getpid()
        self.seen_load = float(net.pd.sum())  # what this host can see of the network's loads
        self.setup_s = {"build_s": 0.0, "compile_s": 0.0, "solver_s": 0.0}

    def _update(self, t: int) -> ZoneUpdate:
        return ZoneUpdate(round=t, zone=self.zone, released=self.released.copy())

    def initialize(self) -> ZoneUpdate:
        return self._update(0)

    def step(self, msg: ConsensusMessage) -> ZoneUpdate:
        self.round = msg.round
        self.released = gaussian_release(0.5 * (msg.w + self.target), 0.01, None, self.rng)[0]
        return self._update(msg.round)

    def diagnostics(self, with_solution: bool = False) -> ZoneDiagnostics:
        return ZoneDiagnostics(self.zone, float(np.sum((self.released - self.target) ** 2)), 0.0, 0.0, {"pid": self.pid, "seen_load": self.seen_load})

    def save_checkpoint(self, folders) -> Path:
        state = {"round": self.round, "released": self.released, "rng": self.rng.state}
        return folders.save_state(self.zone, self.round, state)

    def load_checkpoint(self, folders, round: int) -> None:
        state = folders.load_state(self.zone, round)
        self.round, self.released = int(state["round"]), state["released"]
        self.rng.state = state["rng"]

    def prune_checkpoints(self, folders, keep_round: int) -> None:
        folders.prune(self.zone, keep_round)

    def save_solution(self, folders) -> Path:
        import pandas as pd

        return folders.write_csv(pd.DataFrame({"value": self.released}), folders.solution_path(self.zone))
