"""A zone agent's small pure pieces: its objective's Lipschitz constant and Ipopt scaling, and the test-only leak
switch's message (:mod:`powerdp.apps.power_flow.agent` uses them)."""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse.linalg as spla

from ...engine.consensus.messages import ZoneUpdate
from ...opf.compiled import QuadraticObjective

__all__ = ["lipschitz_constant", "objective_scaling", "PENALTY_CURVATURE_TARGET", "maybe_leak", "LeakyZoneUpdate",
           "load_positions"]


@dataclasses.dataclass(frozen=True)
class LeakyZoneUpdate(ZoneUpdate):
    """A ZoneUpdate with a field the allow-list forbids (the test-only leak switch)."""

    noise_magnitude: float = 0.0


def maybe_leak(update: ZoneUpdate, noise: float, faults) -> ZoneUpdate:
    """The test-only side channel (``RunConfig.faults.leak == "noise_magnitude"``): every ZoneUpdate carries the
    round's Σ|ξ| in a field outside the allow-list, as before the privacy review; ``powerdp audit`` must fail on it."""
    if faults is not None and faults.leak == "noise_magnitude":
        return LeakyZoneUpdate(update.round, update.zone, update.released, float(noise))
    return update


def lipschitz_constant(objective: QuadraticObjective, n: int) -> float:
    """L_p = λ_max of the objective's Hessian (docs/algorithm.md).

    For the shedding objective in the paper's coordinates the Hessian is 2·I on
    the balance variables and 0 elsewhere, so L_p = 2 exactly; a diagonal
    Hessian is read off, any other goes to an eigensolver with a fixed start
    vector, so the value (and the run) is the same on every execution.
    """
    H = objective.hessian_matrix(n).tocoo()
    if H.nnz == 0:
        return 0.0
    if np.all(H.row == H.col):
        return float(max(H.data.max(), 0.0))
    if n <= 400:
        return float(max(np.linalg.eigvalsh(H.toarray()).max(), 0.0))
    val = spla.eigsh(H.tocsr(), k=1, which="LA", return_eigenvectors=False, tol=1e-8, v0=np.ones(n))
    return float(max(val[0], 0.0))


#: the curvature 2ω·s of the shedding penalty Ipopt should see: with ω ~ 1e9 $/h per p.u.² (auto ω) a
#: warm-started local solve otherwise fails (Ipopt scales the objective only from a cold start's gradient)
PENALTY_CURVATURE_TARGET = 1e4


def objective_scaling(shedding_weight: float | None) -> dict[str, float]:
    """Ipopt's obj_scaling_factor for a weighted objective: 2ω·s = PENALTY_CURVATURE_TARGET (s ≤ 1); {} otherwise.

    Scaling the objective does not move its minimiser; a user's own obj_scaling_factor wins.
    """
    if not shedding_weight:
        return {}
    return {"obj_scaling_factor": min(1.0, PENALTY_CURVATURE_TARGET / (2.0 * float(shedding_weight)))}


def load_positions(noise_cols: np.ndarray, blocks) -> tuple[np.ndarray, ...]:
    """Where the own buses' balance entries (``blocks``: yp's columns, then yq's) sit on the noise support
    ``noise_cols``: one index array per block, in own-bus order (the loads' entries of a released term)."""
    at = {int(c): j for j, c in enumerate(noise_cols)}
    return tuple(np.array([at[int(i)] for i in block], dtype=np.int64) for block in blocks)
