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
    primal_relative: float = float("nan")  # ‖w − Bz‖ / max(‖w‖, ‖Bz‖) over the stacked copies (Boyd et al. §3.3.1)
    dual_relative: float = float("nan")  # ‖ρ ∘ B(w − w_prev)‖ / ‖λ‖


class Coordinator:
    """Consensus ADMM coordinator (docs/algorithm.md).

    Parameters
    ----------
    n_shared: number of shared variables (entries of the consensus vector w).
    zone_maps: for each zone (in zone order), the global indices of its shared variables.
    rho: the penalty ρ.
    rho_schedule: a rule of :data:`~powerdp.engine.consensus.penalties.PENALTY_RULES`: ``"constant"``,
        ``"adaptive"`` (residual balancing: ρ grows ×τ when the relative primal residual exceeds μ× the relative
        dual one and shrinks when the dual one dominates; μ = 10, τ = 2) or ``"spectral"`` (one ρ per zone and
        group of shared variables).
    groups: for each shared variable, the group it belongs to (e.g. its kind: voltage, flow); the spectral rule
        keeps one ρ per zone and group. None: one group.
    relaxation: the over-relaxation factor α ∈ (0, 2) (Boyd et al. §3.4.3): each zone is sent
        α w + (1 − α) x_p (x_p its last release) instead of w, and its dual moves by ρ(that − x_p). 1: none.
    acceleration: ``None`` or ``"anderson"`` (:mod:`~powerdp.engine.consensus.acceleration`); the zones then take
        their duals from the messages (``ConsensusMessage.lam``).
    """

    def __init__(self, n_shared: int, zone_maps: Sequence[np.ndarray], rho: float, rho_schedule: str = "constant",
                 groups: np.ndarray | None = None, relaxation: float = 1.0, acceleration: str | None = None,
                 penalty_options: dict | None = None, acceleration_options: dict | None = None):
        from .acceleration import Anderson

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
        self._penalty_options = (rho_schedule, dict(penalty_options or {}))  # the options are the first rule's
        self.rho_schedule = rho_schedule  # checks the name and builds self.penalty
        # each stacked entry's group: (its zone, the group of its shared variable)
        kinds = np.zeros(self.n_shared, np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
        n_kinds = int(kinds.max()) + 1 if kinds.size else 1
        zone_of_entry = np.repeat(np.arange(self.n_zones, dtype=np.int64), self.sizes)
        self.kinds = kinds[self.gidx]
        self.groups = zone_of_entry * n_kinds + self.kinds
        self.n_groups = self.n_zones * n_kinds
        # ρ: one number, or one per stacked entry for a per-entry rule
        self.rho = np.full(len(self.gidx), float(rho)) if self.penalty.per_entry else float(rho)
        self.relaxation = float(relaxation)
        if not 0.0 < self.relaxation < 2.0:
            raise ValueError(f"relaxation = {relaxation!r}: the over-relaxation factor must lie in (0, 2)")
        if acceleration not in (None, "none", "anderson"):
            raise ValueError(f"unknown acceleration {acceleration!r}; choose 'anderson' or none")
        self.anderson = Anderson(**(acceleration_options or {})) if acceleration == "anderson" else None
        self.w = np.zeros(self.n_shared)
        self.w_prev = self.w
        self.lam = np.zeros(len(self.gidx))  # stacked λ_p, public copies
        self.released = np.zeros(len(self.gidx))  # stacked B_p z_p^t
        self.x = self.released  # the releases the next consensus point averages (the accelerated ones)
        self.sent = self.released  # the stacked targets of the last messages (w, or its over-relaxed form)
        self.round = 0

    @property
    def rho_schedule(self) -> str:
        """The penalty rule's name. Setting another name swaps the rule from the next round on (learning balances ρ
        for its first rounds, then holds it: ``coordinator.rho_schedule = "constant"``); the same name keeps the rule
        and its state."""
        return self._rho_schedule

    @rho_schedule.setter
    def rho_schedule(self, name: str) -> None:
        from .penalties import PENALTY_RULES

        if name not in PENALTY_RULES:
            raise ValueError(f"unknown rho_schedule {name!r}; choose one of {', '.join(PENALTY_RULES)}")
        if name != getattr(self, "_rho_schedule", None):
            self._rho_schedule = name
            first, options = self._penalty_options
            self.penalty = PENALTY_RULES[name](**(options if name == first else {}))

    @property
    def sends_duals(self) -> bool:
        """Whether the messages carry each zone's duals (the coordinator changes them beyond the plain update)."""
        return self.anderson is not None

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
        self.x = self.released
        self.round = 0

    def average(self) -> np.ndarray:
        """w^{t+1}_k = mean over zones p sharing k of (B_p z_p^t − λ_p^t/ρ_t)_k (docs/algorithm.md step 1); with one ρ
        per entry the ρ-weighted mean Σ_p (ρ_pk x_pk − λ_pk) / Σ_p ρ_pk."""
        if np.ndim(self.rho) == 0:
            return np.bincount(self.gidx, self.x - self.lam / self.rho, minlength=self.n_shared) / self.counts
        weight = np.bincount(self.gidx, self.rho, minlength=self.n_shared)
        return np.bincount(self.gidx, self.rho * self.x - self.lam, minlength=self.n_shared) / weight

    def broadcast(self) -> list[ConsensusMessage]:
        """Start round t+1: compute the new consensus point and each zone's message."""
        self.w_prev = self.w
        self.w = self.average()
        self.round += 1
        target = self.w[self.gidx]
        if self.relaxation != 1.0:
            target = self.relaxation * target + (1.0 - self.relaxation) * self.x
        self.sent = target
        scalar = np.ndim(self.rho) == 0
        return [
            ConsensusMessage(round=self.round, zone=p, w=target[self.offsets[p] : self.offsets[p + 1]].copy(),
                             rho=self.rho if scalar else self.rho[self.offsets[p] : self.offsets[p + 1]].copy(),
                             lam=self.lam[self.offsets[p] : self.offsets[p + 1]].copy() if self.sends_duals else None)
            for p in range(self.n_zones)
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
        u_prev = (self.x, self.lam)
        self.released = self._stack(updates, self.round)
        self.lam = self.lam + self.rho * (self.sent - self.released)
        gap = self.w[self.gidx] - self.released
        step = self.w - self.w_prev
        if np.ndim(self.rho) == 0:
            dual = float(self.rho * np.linalg.norm(step))
            dual_stacked = self.rho * float(np.linalg.norm(step[self.gidx]))
        else:
            dual = float(np.linalg.norm(np.bincount(self.gidx, self.rho, minlength=self.n_shared) / self.counts * step))
            dual_stacked = float(np.linalg.norm(self.rho * step[self.gidx]))
        primal = float(np.linalg.norm(gap))
        scale_p = max(float(np.linalg.norm(self.w[self.gidx])), float(np.linalg.norm(self.released)), 1e-300)
        scale_d = max(float(np.linalg.norm(self.lam)), 1e-300)
        res = Residuals(primal=primal, dual=dual, primal_relative=primal / scale_p, dual_relative=dual_stacked / scale_d)
        self.x = self.released
        changed = self.penalty.update(self)
        if self.anderson is not None:
            if changed:
                self.anderson.reset()
            self._accelerate(u_prev)
        return res

    def _accelerate(self, u_prev: tuple[np.ndarray, np.ndarray]) -> None:
        """Anderson's next state (x, λ) from the round's u_prev → (released, λ), in ADMM's norm (√ρ x, λ/√ρ)."""
        root = np.sqrt(self.rho)
        n = len(self.gidx)
        u = np.concatenate([root * u_prev[0], u_prev[1] / root])
        g = np.concatenate([root * self.released, self.lam / root])
        nxt = self.anderson.step(u, g)
        self.x = nxt[:n] / root
        self.lam = nxt[n:] * root

    def relative_residuals(self) -> tuple[float, float]:
        """The last round's relative residuals (Boyd et al. §3.3.1), from the coordinator's arrays."""
        stacked = self.w[self.gidx]
        primal = float(np.linalg.norm(stacked - self.released)) / max(float(np.linalg.norm(stacked)), float(np.linalg.norm(self.released)), 1e-300)
        dual = float(np.linalg.norm(self.rho * (self.w - self.w_prev)[self.gidx])) / max(float(np.linalg.norm(self.lam)), 1e-300)
        return primal, dual

    # ----------------------------------------------------------- checkpoint
    def state_dict(self) -> dict:
        state = {"w": self.w, "lam": self.lam, "released": self.released, "rho": self.rho, "round": self.round}
        if self.x is not self.released:
            state["x"] = self.x
        for name, part in (("penalty", self.penalty), ("anderson", self.anderson)):
            sub = part.state_dict() if part is not None else {}
            state.update({f"{name}.{k}": v for k, v in sub.items() if v is not None})
        return state

    def load_state_dict(self, state: dict) -> None:
        self.w = np.asarray(state["w"], dtype=float)
        self.w_prev = self.w
        self.lam = np.asarray(state["lam"], dtype=float)
        self.released = np.asarray(state["released"], dtype=float)
        self.x = np.asarray(state["x"], dtype=float) if "x" in state else self.released
        self.sent = self.released  # each broadcast sets the round's targets anew
        rho = np.asarray(state["rho"], dtype=float)
        self.rho = float(rho) if rho.ndim == 0 else rho
        self.round = int(state["round"])
        for name, part in (("penalty", self.penalty), ("anderson", self.anderson)):
            if part is not None:
                part.load_state_dict({k.split(".", 1)[1]: v for k, v in state.items() if k.startswith(f"{name}.")})
