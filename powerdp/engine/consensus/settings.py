"""What the engine reads from a run's settings, as a protocol: the engine never imports an application's
configuration (``RunConfig`` of power flow, ``LearnConfig`` of learning), each of which satisfies it."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ConsensusSettings"]


class ConsensusSettings(Protocol):
    """The settings an update rule, a perturbation and a backend read (docs/architecture.md)."""

    # the algorithm: update rule × perturbation × mechanism, and the rule's own options
    update: str
    perturbation: str
    mechanism: str
    local_updates: int
    extra: dict[str, Any]
    # the privacy budget (public)
    epsilon: float
    delta: float
    target_epsilon: float | None
    target_delta: float | None
    noise_source: str | None
    claim_holds: bool
    # where the agents run; a deployment's directory (None in a simulation): there only "zone P failed" crosses
    deployment: str | None
    backend: str
    workers: int | None
    rank_timeout: float

    def per_step_noise(self) -> dict[str, Any]:
        """The calibrated per-step noise of a budget-first run (``target_epsilon``)."""
        ...
