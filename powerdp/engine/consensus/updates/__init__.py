"""Local update rules, registered by name (docs/algorithm.md; how to add one: docs/contributing.md)."""

from __future__ import annotations

from .base import LocalProblem, LocalUpdate, RoundOutcome
from .exact import ExactUpdate
from .huang import HuangUpdate
from .linearized import ETA_SCHEDULES, LinearizedUpdate, step_size
from .trust_region import TrustRegionUpdate

__all__ = ["LocalUpdate", "LocalProblem", "RoundOutcome", "UPDATES", "ETA_SCHEDULES", "step_size"]

#: update name → class; a new update rule is one module and one entry here
UPDATES: dict[str, type[LocalUpdate]] = {
    "exact": ExactUpdate,
    "linearized": LinearizedUpdate,
    "trust-region": TrustRegionUpdate,
    "huang": HuangUpdate,
}
