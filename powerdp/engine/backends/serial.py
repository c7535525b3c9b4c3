"""The serial backend: every zone agent in this process."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...grid.network import Network
from ..consensus.messages import ConsensusMessage, ZoneUpdate
from ..consensus.settings import ConsensusSettings
from .base import (
    AgentSpec,
    Backend,
    WorkerError,
    build_agents,
    open_journal,
    peak_rss_mb,
    released,
    restore_zone,
    single_threaded_pools,
    zone_failure,
)

__all__ = ["SerialBackend"]


class SerialBackend(Backend):
    """All agents in this process, stepped one after another."""

    def __init__(self, net: Network, specs: Sequence[AgentSpec], config: ConsensusSettings):
        self.config = config
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

    def _zone_call(self, zone: int, call):
        """``call()`` for one zone; in a deployment its failure is "zone P failed" (the detail goes to its log)."""
        if self.config.deployment is None:
            return call()
        try:
            return call()
        except Exception as exc:
            import traceback

            redacted = zone_failure(self.config, [zone], exc, traceback.format_exc())
            if redacted is None:
                raise
            raise WorkerError(f"{redacted[1]} (the zone's own log keeps the details)") from None

    def initialize(self) -> list[ZoneUpdate]:
        return [self._zone_call(z, self.agents[z].initialize) for z in self.zones]

    def step(self, messages: Sequence[ConsensusMessage]) -> list[ZoneUpdate]:
        return [self._zone_call(m.zone, lambda m=m: released(self.agents[m.zone], self.agents[m.zone].step(m))) for m in messages]

    def diagnostics(self, with_solution: bool = False) -> list:
        return [self.agents[z].diagnostics(with_solution) for z in self.zones]

    def call(self, method: str, by_zone: dict[int, Any]) -> dict[int, Any]:
        return {z: self._zone_call(z, lambda z=z: getattr(self.agents[z], method)(by_zone[z])) for z in sorted(by_zone)}

    def save_checkpoint(self, folders) -> None:
        for z in self.zones:
            self.agents[z].save_checkpoint(folders)

    def load_checkpoint(self, folders, round: int) -> None:
        for z in self.zones:
            restore_zone(self.agents[z], folders, round)

    def open_journals(self, folders) -> None:
        for z in self.zones:
            open_journal(self.agents[z], folders)

    def prune_checkpoints(self, folders, round: int) -> None:
        for z in self.zones:
            self.agents[z].prune_checkpoints(folders, round)

    def save_solutions(self, folders) -> None:
        for z in self.zones:
            self.agents[z].save_solution(folders)

    def setup_times(self) -> dict[int, dict[str, float]]:
        return {z: a.setup_s for z, a in self.agents.items()}

    def host_memory(self) -> list[float]:
        return [peak_rss_mb()]


# ---------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------


