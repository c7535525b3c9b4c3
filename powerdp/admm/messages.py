"""The messages agents and coordinator exchange (and nothing else crosses).

A round is two messages per zone: the coordinator's :class:`ConsensusMessage`
(the zone's entries of the consensus vector and the penalty ρ_t) and the
agent's :class:`ZoneUpdate` (the released shared values and solver statistics).
Both hold plain numbers and numpy arrays, so they pickle across processes and
MPI ranks. A zone's loads, its private variables and its local objective never
appear in either.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ConsensusMessage", "ZoneUpdate", "SolverStats"]


@dataclass(frozen=True)
class ConsensusMessage:
    """Coordinator → agent, at the start of round ``round`` (docs/algorithm.md step 1)."""

    round: int
    zone: int
    w: np.ndarray  # the zone's entries of w^{t+1}, in the zone's shared-variable order
    rho: float


@dataclass(frozen=True)
class SolverStats:
    """What a zone tells about its local solves in one round (no data-dependent values)."""

    solves: int
    iterations: int
    solver_s: float  # time inside the local solver
    wall_s: float
    statuses: tuple[str, ...]  # each solve's outcome (powerdp.opf.solver_base.OUTCOMES)
    noise_magnitude: float = 0.0  # Σ|ξ| over the round's local steps (docs/algorithm.md, paper eq. 29)


@dataclass(frozen=True)
class ZoneUpdate:
    """Agent → coordinator, at the end of round ``round`` (docs/algorithm.md step 2): B_p z_p^{t+1} only."""

    round: int
    zone: int
    released: np.ndarray
    stats: SolverStats
