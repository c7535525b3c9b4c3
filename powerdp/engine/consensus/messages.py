"""The messages agents and coordinator exchange — an allow-list: nothing else crosses (docs/privacy.md).

A round is two messages per zone: the coordinator's :class:`ConsensusMessage`
(the zone's entries of the consensus vector, the penalty ρ_t and, when the coordinator accelerates, the zone's
duals, which it computes from released values anyway) and the
agent's :class:`ZoneUpdate` (the released shared values B_p z_p, and nothing
computed from the zone's noise ξ or from its loads). Both hold plain numbers
and numpy arrays, so they cross processes and MPI ranks as they are.
:data:`MESSAGE_FIELDS` is the allow-list, checked field by field by
tests/test_messages.py and enforced on every update the coordinator takes.

:class:`SolverStats` is **not** a message: what a zone's local solves cost (iterations,
times, statuses) and its noise magnitude Σ|ξ| (the paper's eq. 29) depend on its
loads and its noise, so they stay with the zone. A one-machine simulation reads them
for its evaluation (:class:`powerdp.apps.power_flow.agent.ZoneDiagnostics`); a deployment never hands
them over.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

__all__ = ["ConsensusMessage", "ZoneUpdate", "SolverStats", "MESSAGE_FIELDS", "check_message"]


@dataclass(frozen=True)
class ConsensusMessage:
    """Coordinator → agent, at the start of round ``round`` (docs/algorithm.md step 1)."""

    round: int
    zone: int
    w: np.ndarray  # the zone's entries of w^{t+1} (over-relaxed: α w + (1 − α) x_p^t), in its shared-variable order
    rho: float | np.ndarray  # ρ_t: one number, or one per entry (a per-entry penalty rule)
    #: the zone's duals λ_p^t when the coordinator changed them beyond the plain update (Anderson acceleration);
    #: None: the zone keeps its own copy, updated as docs/algorithm.md step 3
    lam: np.ndarray | None = None


@dataclass(frozen=True)
class ZoneUpdate:
    """Agent → coordinator, at the end of round ``round`` (docs/algorithm.md step 2): B_p z_p^{t+1} only."""

    round: int
    zone: int
    released: np.ndarray  # the zone's released shared values, in its shared-variable order


#: every field each message type may carry (the protocol's allow-list; round and zone are public counters)
MESSAGE_FIELDS: dict[type, tuple[str, ...]] = {
    ConsensusMessage: ("round", "zone", "w", "rho", "lam"),
    ZoneUpdate: ("round", "zone", "released"),
}


def check_message(msg: object) -> None:
    """Raise ``ValueError`` unless ``msg`` is exactly an allowed message type with exactly its allowed fields."""
    allowed = next((fields for t, fields in MESSAGE_FIELDS.items() if isinstance(msg, t)), None)
    if allowed is None:
        raise ValueError(f"{type(msg).__name__} is not a protocol message; only {', '.join(t.__name__ for t in MESSAGE_FIELDS)} cross")
    names = tuple(f.name for f in dataclasses.fields(msg)) + tuple(sorted(getattr(msg, "__dict__", {}).keys() - {f.name for f in dataclasses.fields(msg)}))
    extra = [n for n in names if n not in allowed]
    if extra:
        raise ValueError(f"{type(msg).__name__} carries field(s) outside the allow-list: {', '.join(extra)}")


@dataclass(frozen=True)
class SolverStats:
    """ZONE-PRIVATE: what a zone's local solves cost in one round, and its noise magnitude. Never a message."""

    solves: int
    iterations: int
    solver_s: float  # time inside the local solver
    wall_s: float
    statuses: tuple[str, ...]  # each solve's outcome (powerdp.opf.local_solver.OUTCOMES)
    noise_magnitude: float = 0.0  # Σ|ξ| over the round's local steps (docs/algorithm.md, paper eq. 29)

    def to_row(self, round: int) -> list:
        """The round's statistics as JSON values (a zone's private checkpoint keeps its log so)."""
        return [int(round), int(self.solves), int(self.iterations), float(self.solver_s), float(self.wall_s),
                list(self.statuses), float(self.noise_magnitude)]

    @staticmethod
    def from_row(row: list) -> tuple[int, SolverStats]:
        """(round, statistics) back from :meth:`to_row`."""
        r, n, it, s, w, st, xi = row
        return int(r), SolverStats(int(n), int(it), float(s), float(w), tuple(st), float(xi))
