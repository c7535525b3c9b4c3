"""The local-solver interface: what powerdp asks of a solver, and the registries of solvers.

Neutral ground: power flow (:mod:`powerdp.opf`) and learning (:mod:`powerdp.apps.learning`) both register
their local solvers here, and neither imports the other (``powerdp.opf.local_solver`` re-exports these
names). :data:`SOLVERS` holds the solvers of general (QCQP) local problems, :data:`BOX_SOLVERS` those of
problems whose feasible set is a box (a learning client's W_p = [−u, u]ⁿ).

A solver is built once from a :class:`~powerdp.opf.compiled.CompiledProblem` and then re-solved
many times with new objectives (:class:`~powerdp.opf.compiled.QuadraticObjective`: linear,
diagonal and quadratic terms) and, for the trust-region update, new bounds. Every solve returns a
:class:`SolveResult` whose ``outcome`` is one of powerdp's own statuses (:data:`OUTCOMES`), next to
the solver's raw status code and text. Solvers are registered by name in :data:`SOLVERS` and
imported lazily, so a new solver is one module with a class that follows :class:`LocalSolver`
plus one entry here (docs/contributing.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..errors import ConfigError, InfeasibleError, SolverError

if TYPE_CHECKING:
    from .compiled import CompiledProblem, QuadraticObjective

__all__ = ["LocalSolver", "SolveResult", "SOLVERS", "BOX_SOLVERS", "OUTCOMES", "SUCCESS_OUTCOMES", "solver_class", "AUTO",
           "auto_solver", "AUTO_ACTIVE_SET_MAX_N"]

#: powerdp's solver-neutral statuses of one solve
OUTCOMES = ("solved", "solved_inaccurate", "infeasible", "unbounded", "iteration_limit", "time_limit", "numerical_error", "failed")
#: the outcomes whose point powerdp accepts
SUCCESS_OUTCOMES = frozenset({"solved", "solved_inaccurate"})


@dataclass
class SolveResult:
    """The outcome of one solve, whatever the solver.

    ``status`` and ``status_name`` are the solver's own code and text (Ipopt's
    ApplicationReturnStatus, Clarabel's SolverStatus); ``outcome`` is powerdp's
    status (:data:`OUTCOMES`). ``callback_s`` is the time spent in powerdp's
    code during the solve (Ipopt's callbacks; 0 for solvers without callbacks).
    Multipliers are empty for a solver that does not report them.
    """

    x: np.ndarray
    objective: float
    status: int
    message: str
    iterations: int
    wall_s: float
    callback_s: float
    mult_g: np.ndarray = field(repr=False)
    mult_x_lower: np.ndarray = field(repr=False)
    mult_x_upper: np.ndarray = field(repr=False)
    status_name: str = ""
    outcome: str = "failed"
    solver: str = "Ipopt"  # the solver's display name, for messages

    @property
    def success(self) -> bool:
        return self.outcome in SUCCESS_OUTCOMES

    @property
    def solver_s(self) -> float:
        """Time inside the solver itself (wall time less powerdp's callbacks)."""
        return max(self.wall_s - self.callback_s, 0.0)

    @property
    def ipopt_s(self) -> float:
        """Old name of :attr:`solver_s`."""
        return self.solver_s

    def check(self, context: str = "") -> SolveResult:
        """Raise :class:`InfeasibleError` / :class:`SolverError` unless the solve succeeded."""
        if self.outcome == "infeasible":
            raise InfeasibleError(
                f"{self.solver} reports the problem {'locally ' if self.solver == 'Ipopt' else ''}infeasible "
                f"({self.status_name}) after {self.iterations} iterations",
                self.status,
                context,
            )
        if not self.success:
            raise SolverError(
                f"{self.solver} failed with {self.status_name} ({self.message}) after {self.iterations} iterations",
                self.status,
                context,
            )
        if not np.all(np.isfinite(self.x)):
            raise SolverError(f"{self.solver} returned a solution with NaN or inf entries", self.status, context)
        return self


@runtime_checkable
class LocalSolver(Protocol):
    """What powerdp needs of a solver (IpoptSolver and ClarabelSolver implement it).

    Class attributes:

    ``name``: the registry name (``--solver``, ``--local-solver``);
    ``label``: the display name in messages;
    ``wants_reduced``: whether the agent should give it the problem with flows and balance
    variables eliminated (z = P r, :mod:`powerdp.opf.reduction`) or the full problem in z;
    ``supports_warm_start``: whether :meth:`solve` uses a previous point and multipliers.
    """

    name: ClassVar[str]
    label: ClassVar[str]
    wants_reduced: ClassVar[bool]
    supports_warm_start: ClassVar[bool]
    problem: CompiledProblem

    @classmethod
    def from_config(
        cls, problem: CompiledProblem, objective_pattern: QuadraticObjective | None, config: Any, objective_scale: float | None = None
    ) -> LocalSolver:
        """The solver a distributed run's zone uses (``config`` is its RunConfig; read the solver's own options).
        ``objective_scale`` (or None) is a factor the solver may multiply every objective by (it does not move
        the minimiser; the agent sets it for heavily weighted objectives)."""

    @classmethod
    def check_config(cls, config: Any) -> None:
        """Raise ConfigError for settings of a run this solver cannot honour (e.g. another solver's options)."""

    def solve(
        self,
        objective: QuadraticObjective | None = None,
        x0: np.ndarray | None = None,
        mult_g: np.ndarray | None = None,
        mult_x_lower: np.ndarray | None = None,
        mult_x_upper: np.ndarray | None = None,
    ) -> SolveResult:
        """Minimise ``objective`` (default: the problem's own) over the problem's feasible set.

        ``objective``'s Hessian pattern must lie inside the one fixed at construction (the
        problem's objective, ``objective_pattern`` and the diagonal). ``x0`` and the multipliers
        are a warm start (ignored by solvers without one). Never raises on a failed solve."""

    def set_bounds(self, lb: np.ndarray, ub: np.ndarray, cl: np.ndarray, cu: np.ndarray) -> None:
        """Replace the variable and row bounds for the next solves (same structure)."""

    def enable_warm_start(self) -> None:
        """Switch to the settings of warm-started solves (called once, before the first warm start)."""


class _Registry(Mapping[str, type]):
    """Name → solver class, imported on first use (cyipopt and clarabel load only when asked for)."""

    def __init__(self, paths: dict[str, str]):
        self._paths = paths

    def __getitem__(self, name: str) -> type:
        path = self._paths[name]
        module, cls = path.rsplit(":", 1)
        return getattr(importlib.import_module(module), cls)

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


#: the registered solvers of general local problems (power flow); the first is the default
SOLVERS: Mapping[str, type] = _Registry(
    {
        "ipopt": "powerdp.opf.solvers:IpoptSolver",
        "clarabel": "powerdp.opf.conic:ClarabelSolver",
        "active-set": "powerdp.opf.active_set:ActiveSetSolver",
    }
)

#: the registered solvers of box-constrained local problems (a learning client's W_p); the first is the default
BOX_SOLVERS: Mapping[str, type] = _Registry({"box": "powerdp.opf.box:BoxProjection"})


#: ``local_solver = "auto"`` (a run's default): each zone takes the fastest solver that certifies its solutions where it
#: applies, :func:`auto_solver` (a run that sets Ipopt options or profiles takes Ipopt: RunConfig.asks_for_ipopt)
AUTO = "auto"
#: the largest zone problem (variables, after the reduction) the active set takes under ``auto``: its P⁻¹ is dense
AUTO_ACTIVE_SET_MAX_N = 1000


def auto_solver(n: int, strongly_convex: bool) -> str:
    """The solver ``auto`` picks for a zone problem of ``n`` variables: the active set (certified, 4.6× Clarabel on
    case118, docs/results/performance.md) when its objective is strongly convex in every variable (a proximal term on
    all of z: its working sets need P positive definite) and P⁻¹ is small enough, else Clarabel. A function of the
    zone's structure and the public settings only, so every host picks alike."""
    return "active-set" if strongly_convex and n <= AUTO_ACTIVE_SET_MAX_N else "clarabel"


def solver_class(name: str, what: str = "solver", registry: Mapping[str, type] | None = None) -> type:
    """The solver ``name`` of ``registry`` (default :data:`SOLVERS`); a ConfigError lists the known ones."""
    known = SOLVERS if registry is None else registry
    if name not in known:
        raise ConfigError(f"{what} = {name!r}: unknown solver; choose one of {', '.join(known)}")
    return known[name]
