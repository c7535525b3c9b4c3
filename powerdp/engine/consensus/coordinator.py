"""The ADMM coordinator: consensus averaging and dual updates as vectorized kernels.

The coordinator knows the public structure only: how many shared variables
there are and which of them each zone holds (index maps). It keeps the
consensus vector ``w``, the public copy of every zone's dual ``λ_p`` (each
zone updates its own copy identically), and the released values of the last
round. All zones' entries are stacked into one array, so the updates of
docs/algorithm.md steps 1 and 3 are a ``bincount`` and a few vector operations,
whatever the number of zones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .messages import ConsensusMessage, ZoneUpdate

__all__ = ["Coordinator", "Residuals"]


@dataclass(frozen=True)
class Residuals:
    primal: float  # ‖w^{t+1} − B z^{t+1}‖₂ over all zones (the paper's feasibility)
    dual: float  # ρ_t ‖w^{t+1} − w^t‖₂


class Coordinator:
    """Consensus ADMM coordinator (docs/algorithm.md).

    Parameters
    ----------
    n_shared: number of shared variables (entries of the consensus vector w).
    zone_maps: for each zone (in zone order), the global indices of its shared variables.
    rho: the penalty ρ.
    rho_schedule: ``"constant"`` or ``"adaptive"`` (residual balancing: ρ grows ×τ when the relative primal
        residual exceeds μ× the relative dual one and shrinks when the dual one dominates; μ = 10, τ = 2).
    """

    def __init__(self, n_shared: int, zone_maps: Sequence[np.ndarray], rho: float, rho_schedule: str = "constant"):
        self.n_shared = int(n_shared)
        self.zone_maps = [np.asarray(m, dtype=np.int64) for m in zone_maps]
        self.n_zones = len(self.zone_maps)
        self.sizes = np.array([len(m) for m in self.zone_maps], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self.gidx = np.concatenate(self.zone_maps) if self.zone_maps else np.zeros(0, np.int64)
        counts = np.bincount(self.gidx, minlength=self.n_shared)
        if np.any(counts < 2):
            k = int(np.flatnonzero(counts < 2)[0])
            raise ValueError(f"shared variable {k} is held by {counts[k]} zone(s); a shared variable needs two or more")
        self.counts = counts.astype(float)
        self.rho = float(rho)
        self.rho_schedule = rho_schedule
        self.w = np.zeros(self.n_shared)
        self.lam = np.zeros(len(self.gidx))  # stacked λ_p, public copies
        self.released = np.zeros(len(self.gidx))  # stacked B_p z_p^t
        self.round = 0

    # ------------------------------------------------------------- kernels
    def _stack(self, updates: Sequence[ZoneUpdate], expected_round: int) -> np.ndarray:
        if len(updates) != self.n_zones:
            raise ValueError(f"expected {self.n_zones} zone updates, got {len(updates)}")
        out = np.empty(len(self.gidx))
        for u in updates:
            if u.round != expected_round:
                raise ValueError(f"zone {u.zone} sent round {u.round}, expected {expected_round}")
            vals = np.asarray(u.released, dtype=float)
            if vals.shape != (self.sizes[u.zone],):
                raise ValueError(f"zone {u.zone} released {vals.shape} values, expected {self.sizes[u.zone]}")
            if not np.all(np.isfinite(vals)):
                raise FloatingPointError(f"zone {u.zone} released NaN or inf in round {u.round}")
            out[self.offsets[u.zone] : self.offsets[u.zone + 1]] = vals
        return out

    def start(self, updates: Sequence[ZoneUpdate]) -> None:
        """Take the zones' initial releases B_p z_p^1 (round 0)."""
        self.released = self._stack(updates, 0)
        self.round = 0

    def average(self) -> np.ndarray:
        """w^{t+1}_k = mean over zones p sharing k of (B_p z_p^t − λ_p^t/ρ_t)_k (docs/algorithm.md step 1)."""
        return np.bincount(self.gidx, self.released - self.lam / self.rho, minlength=self.n_shared) / self.counts

    def broadcast(self) -> list[ConsensusMessage]:
        """Start round t+1: compute the new consensus point and each zone's message."""
        self.w_prev = self.w
        self.w = self.average()
        self.round += 1
        return [
            ConsensusMessage(round=self.round, zone=p, w=self.w[m].copy(), rho=self.rho)
            for p, m in enumerate(self.zone_maps)
        ]

    def agreed(self) -> list[ConsensusMessage]:
        """The agreed point after the last round, one message per zone (its entries): the mean of the zones' last
        releases (:meth:`average`: the duals of a shared variable sum to zero, so it is the plain mean), which is
        post-processing of the releases. The zones hold it in their implemented dispatch; nothing of the coordinator's
        state changes."""
        w = self.average()
        return [ConsensusMessage(round=self.round, zone=p, w=w[m].copy(), rho=self.rho) for p, m in enumerate(self.zone_maps)]

    def receive(self, updates: Sequence[ZoneUpdate]) -> Residuals:
        """Take B_p z_p^{t+1}, update the duals (docs/algorithm.md step 3), return the residuals."""
        self.released = self._stack(updates, self.round)
        gap = self.w[self.gidx] - self.released
        self.lam = self.lam + self.rho * gap
        res = Residuals(primal=float(np.linalg.norm(gap)), dual=float(self.rho * np.linalg.norm(self.w - self.w_prev)))
        if self.rho_schedule == "adaptive":
            self._balance(res)
        return res

    def _balance(self, res: Residuals, mu: float = 10.0, tau: float = 2.0) -> None:
        """Residual balancing on relative residuals (Wohlberg 2017, Boyd et al. §3.4.1).

        The primal residual is in p.u. and the dual one in objective units per p.u., so
        their raw ratio depends on the objective's scale ($/h against p.u.²) and
        balancing them drove ρ the wrong way on the cost objective. Each is taken
        relative to its own scale instead: ‖w − Bz‖ / max(‖w‖, ‖Bz‖) against
        ρ‖B(w − w_prev)‖ / ‖λ‖. λ is the unscaled dual, so it stays valid when ρ changes.
        """
        primal, dual = res.primal, self.rho * float(np.linalg.norm((self.w - self.w_prev)[self.gidx]))
        scale_p = max(float(np.linalg.norm(self.w[self.gidx])), float(np.linalg.norm(self.released)))
        scale_d = float(np.linalg.norm(self.lam))
        if scale_p > 0 and scale_d > 0:
            primal, dual = primal / scale_p, dual / scale_d
        if primal > mu * dual:
            self.rho *= tau
        elif dual > mu * primal:
            self.rho /= tau

    # ----------------------------------------------------------- checkpoint
    def state_dict(self) -> dict:
        return {"w": self.w, "lam": self.lam, "released": self.released, "rho": self.rho, "round": self.round}

    def load_state_dict(self, state: dict) -> None:
        self.w = np.asarray(state["w"], dtype=float)
        self.lam = np.asarray(state["lam"], dtype=float)
        self.released = np.asarray(state["released"], dtype=float)
        self.rho = float(state["rho"])
        self.round = int(state["round"])
