"""Anderson acceleration of the consensus ADMM fixed point (docs/algorithm.md, "Acceleration").

One ADMM round is a map T of the state u = (x, λ) (the zones' releases and their duals: the next consensus point and
every zone's next problem are functions of it). Type-II Anderson acceleration (Walker & Ni 2011; for ADMM Zhang et
al. 2019) replaces the plain next state g_k = T(u_k) by the affine combination of the last m + 1 values of T whose
residuals f = T(u) − u combine to the smallest one:

    γ = argmin ‖f_k − ΔF γ‖² + r‖ΔF‖²‖γ‖²,      u_{k+1} = g_k − ΔG γ,

ΔF, ΔG the differences of consecutive residuals and values. The coordinates are weighted as ADMM's own norm,
(√ρ x, λ/√ρ), so voltages, flows and prices weigh alike; an affine combination keeps Σ_p λ_p = 0.

Safeguard: a plain ADMM round never increases ‖f‖ in that norm (the iteration is firmly non-expansive), so when the
residual at an accelerated point is larger than ``safeguard`` × the last one, the memory is cleared and the next
state is the plain g_k (ADMM from any point converges; the clearing is counted in ``restarts``). A change of ρ
changes the norm, so it clears the memory too.

Everything here is a deterministic function of the released values (post-processing: no privacy spent) and of its
memory, which the coordinator checkpoints.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Anderson"]


class Anderson:
    """Type-II Anderson acceleration with memory ``memory``, Tikhonov ``regularization`` and a restart safeguard."""

    def __init__(self, memory: int = 5, regularization: float = 1e-10, safeguard: float = 1.0):
        self.memory = int(memory)
        self.regularization = float(regularization)
        self.safeguard = float(safeguard)
        self.f: list[np.ndarray] = []  # residuals f_i = g_i − u_i, oldest first
        self.g: list[np.ndarray] = []  # values g_i = T(u_i)
        self.last_norm: float | None = None
        self.restarts = 0
        self.accelerated = 0

    def reset(self) -> None:
        self.f.clear()
        self.g.clear()
        self.last_norm = None

    def step(self, u: np.ndarray, g: np.ndarray) -> np.ndarray:
        """The next state after a round took ``u`` to ``g`` = T(u) (both weighted)."""
        f = g - u
        norm = float(np.linalg.norm(f))
        if self.last_norm is not None and norm > self.safeguard * self.last_norm:
            self.reset()
            self.restarts += 1
            self.f.append(f)
            self.g.append(g)
            self.last_norm = norm
            return g
        self.f.append(f)
        self.g.append(g)
        self.last_norm = norm
        if len(self.f) > self.memory + 1:
            del self.f[0], self.g[0]
        if len(self.f) < 2:
            return g
        dF = np.diff(np.stack(self.f, axis=1), axis=1)
        dG = np.diff(np.stack(self.g, axis=1), axis=1)
        gram = dF.T @ dF
        reg = self.regularization * float(np.trace(gram))
        try:
            gamma = np.linalg.solve(gram + reg * np.eye(gram.shape[0]), dF.T @ f)
        except np.linalg.LinAlgError:
            return g
        if not np.all(np.isfinite(gamma)):
            return g
        self.accelerated += 1
        return g - dG @ gamma

    def state_dict(self) -> dict[str, Any]:
        return {"f": np.stack(self.f) if self.f else np.zeros((0, 0)), "g": np.stack(self.g) if self.g else np.zeros((0, 0)),
                "last_norm": self.last_norm, "restarts": self.restarts, "accelerated": self.accelerated}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        f, g = np.asarray(state["f"], dtype=float), np.asarray(state["g"], dtype=float)
        self.f = [row.copy() for row in f] if f.size else []
        self.g = [row.copy() for row in g] if g.size else []
        self.last_norm = None if state.get("last_norm") is None else float(state["last_norm"])
        self.restarts, self.accelerated = int(state.get("restarts", 0)), int(state.get("accelerated", 0))
