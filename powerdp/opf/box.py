"""The closed-form local solver of a box-constrained problem (registered as ``box`` in
:data:`powerdp.opf.local_solver.BOX_SOLVERS`).

Every local problem the linearized and trust-region updates pose is

    min_{lb ≤ z ≤ ub}  c·z + ½ Σ_k d_k z_k²,   d > 0,

separable, so its minimiser is the projection z = clip(−c/d, lb, ub): no iterations. The problem is the
client's box W_p = [−u, u]ⁿ (or Rⁿ); the trust-region update narrows the bounds each step through
:meth:`BoxProjection.set_bounds`, exactly as it does for an OPF zone's solver.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from ..errors import ConfigError
from .local_solver import SolveResult

__all__ = ["BoxProjection", "BoxProblem", "IdentityReduction", "LinearDiagonal"]

INF = 1e20  # as powerdp.opf.compiled.INF: |bound| ≥ this is no bound


@dataclass
class LinearDiagonal:
    """c·z + ½ Σ d z² (the objectives of the linearized and trust-region rules)."""

    c: np.ndarray
    diag: np.ndarray | None
    const: float = 0.0


@dataclass
class BoxProblem:
    """A box-constrained problem in the fields the engine's update rules read of a compiled problem
    (no constraint rows: ``A`` is 0 × n)."""

    lb: np.ndarray
    ub: np.ndarray
    name: str = "client box"
    x0: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.lb)
        self.var_keys = range(n)
        self.con_keys: list = []
        self.cl = self.cu = np.zeros(0)
        self.A = sp.csr_matrix((0, n))
        self.qrow = self.qi = self.qj = np.zeros(0, np.int64)
        self.qv = np.zeros(0)
        self.objective = None
        self.expressions: dict = {}
        if self.x0 is None:
            self.x0 = np.zeros(n)

    @property
    def n(self) -> int:
        return len(self.lb)

    @property
    def m(self) -> int:
        return 0


class IdentityReduction:
    """The engine's reduction interface for a problem solved in z itself (nothing eliminated, z = r)."""

    def __init__(self, problem: BoxProblem):
        self.full = self.reduced = problem
        self.kept = np.arange(problem.n)
        self.P = sp.identity(problem.n, format="csr")

    def pull(self, c: np.ndarray, diag: np.ndarray | None, const: float = 0.0, base: Any = None) -> LinearDiagonal:
        if base is not None:
            raise ConfigError("a box client keeps no exact part in its local problems")
        return LinearDiagonal(c, diag, const)

    def lift(self, r: np.ndarray) -> np.ndarray:
        return r

    def restrict(self, z: np.ndarray) -> np.ndarray:
        return z


class BoxProjection:
    """Closed-form minimiser of a separable quadratic over a box (the module docstring)."""

    name: ClassVar[str] = "box"
    label: ClassVar[str] = "box projection"
    wants_reduced: ClassVar[bool] = False
    supports_warm_start: ClassVar[bool] = False

    def __init__(self, problem):
        self.problem = problem
        if problem.m and (np.any(np.asarray(problem.cl) > -INF) or np.any(np.asarray(problem.cu) < INF)):
            raise ConfigError(f"{problem.name}: the box solver solves problems without constraint rows")
        self.lb = np.asarray(problem.lb, dtype=float)
        self.ub = np.asarray(problem.ub, dtype=float)

    @classmethod
    def from_config(cls, problem, objective_pattern=None, config=None, objective_scale=None) -> BoxProjection:
        return cls(problem)

    @classmethod
    def check_config(cls, config: Any) -> None:
        if getattr(config, "application", None) != "learning":
            raise ConfigError("local_solver 'box' solves box-constrained local problems (powerdp learn) only")

    def set_bounds(self, lb: np.ndarray, ub: np.ndarray, cl: np.ndarray, cu: np.ndarray) -> None:
        if len(cl) and (np.any(np.asarray(cl) > -INF) or np.any(np.asarray(cu) < INF)):
            raise ConfigError("the box solver cannot take constraint rows")
        self.lb, self.ub = np.asarray(lb, dtype=float), np.asarray(ub, dtype=float)

    def enable_warm_start(self) -> None:
        return None

    def solve(self, objective=None, x0=None, mult_g=None, mult_x_lower=None, mult_x_upper=None) -> SolveResult:
        t = time.perf_counter()
        c, d = objective.c, objective.diag
        if d is None or np.any(d <= 0):
            raise ConfigError("the box solver needs a positive diagonal (a proximal or penalty term on every entry)")
        x = np.clip(-c / d, self.lb, self.ub)  # the minimiser of a separable convex quadratic over a box
        val = float(c @ x + 0.5 * np.dot(d, x * x)) + objective.const
        empty = np.zeros(0)
        return SolveResult(
            x=x, objective=val, status=0, message="closed form", iterations=0, wall_s=time.perf_counter() - t,
            callback_s=0.0, mult_g=empty, mult_x_lower=empty, mult_x_upper=empty, status_name="solved",
            outcome="solved", solver="box projection",
        )
