"""The serial backend: every zone agent in this process."""

from __future__ import annotations

from collections.abc import Sequence

from ...grid.network import Network
from ..consensus.messages import ConsensusMessage, ZoneUpdate
from ..consensus.settings import ConsensusSettings
from .base import AgentSpec, Backend, build_agents, peak_rss_mb, restore_zone, single_threaded_pools

__all__ = ["SerialBackend"]


class SerialBackend(Backend):
    """All agents in this process, stepped one after another."""

    def __init__(self, net: Network, specs: Sequence[AgentSpec], config: ConsensusSettings):
        self._limits = single_threaded_pools()
        try:
            self.agents = build_agents(net, specs, config)
        except BaseException:
            self.close()
            raise
        self.zones = sorted(self.agents)

    def close(self) -> None:
        if getattr(self, "_limits", None) is not None:
            self._limits.restore_original_limits()
            self._limits = None

    def initialize(self) -> list[ZoneUpdate]:
        return [self.agents[z].initialize() for z in self.zones]

    def step(self, messages: Sequence[ConsensusMessage]) -> list[ZoneUpdate]:
        return [self.agents[m.zone].step(m) for m in messages]

    def diagnostics(self, with_solution: bool = False) -> list:
        return [self.agents[z].diagnostics(with_solution) for z in self.zones]

    def save_checkpoint(self, directory: str) -> None:
        for z in self.zones:
            self.agents[z].save_checkpoint(directory)

    def load_checkpoint(self, directory: str, round: int) -> None:
        for z in self.zones:
            restore_zone(self.agents[z], directory, round)

    def prune_checkpoints(self, directory: str, round: int) -> None:
        for z in self.zones:
            self.agents[z].prune_checkpoints(directory, round)

    def save_solutions(self, directory: str) -> None:
        for z in self.zones:
            self.agents[z].save_solution(directory)

    def setup_times(self) -> dict[int, dict[str, float]]:
        return {z: a.setup_s for z, a in self.agents.items()}

    def host_memory(self) -> list[float]:
        return [peak_rss_mb()]


# ---------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------


