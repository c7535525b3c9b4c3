"""The contract of a local update rule (docs/algorithm.md, docs/contributing.md).

A :class:`LocalUpdate` is what a zone does with one consensus message: it owns
its local-step loop, the objective terms of its local problem, the shape of
the problem the solver is built for, and the argument that bounds how far its
output can move when one load moves (what output perturbation needs). The
agent gives it a :class:`LocalProblem`: the zone's private objective, its
compiled problem, a solve routine and the perturbation hooks; the update rule
never sees the loads except through ∇f_p.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from ....errors import ConfigError
from ....opf.compiled import CompiledProblem, QuadraticObjective

if TYPE_CHECKING:
    from ....opf.local_solver import SolveResult
    from ....opf.reduction import Reduction
    from ....privacy import Sensitivity
    from ..perturbations import Perturbation
    from ..settings import ConsensusSettings

__all__ = ["LocalUpdate", "LocalProblem", "RoundOutcome"]


class LocalProblem(Protocol):
    """What an update rule may use of its zone agent."""

    config: ConsensusSettings
    n: int
    lipschitz: float
    z_last: np.ndarray
    shared_mask: np.ndarray  # 1 on the zone's shared entries of z, else 0
    prox_mask: np.ndarray  # 1 on the entries the linearized part of f_p depends on (all of z, or y only)
    private_prox: np.ndarray | None  # τ on the entries neither linearized nor shared (None: no such proximal term)
    perturbation: Perturbation
    reduction: Reduction

    def gradient(self, z: np.ndarray) -> np.ndarray:
        """∇ of the linearized part of f_p at z (all of f_p, or its private part when the data-free part is
        kept exact; holds the zone's loads; never leaves the zone)."""

    def solve(
        self,
        c: np.ndarray,
        diag: np.ndarray,
        step: int | None,
        exact: bool = False,
        bounds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, SolveResult]:
        """min over W_p of c·z + ½ Σ diag_k z_k² (+ f_p if ``exact``, else + f_p's data-free part when it is
        kept exact), optionally with the solver's
        bounds (lb, ub, cl, cu) replaced; returns z and the solver's result."""


@dataclass
class RoundOutcome:
    """The E iterates of one round and what they cost."""

    iterates: list[np.ndarray] = field(default_factory=list)
    iterations: int = 0
    solver_s: float = 0.0
    statuses: list[str] = field(default_factory=list)
    noise: float = 0.0

    def add(self, z: np.ndarray, res: SolveResult) -> None:
        self.iterates.append(z)
        self.iterations += res.iterations
        self.solver_s += res.solver_s
        self.statuses.append(res.outcome)


class LocalUpdate(ABC):
    """One zone's local update rule. Subclasses set ``name`` and ``perturbations`` and implement
    :meth:`run_round`; the registry in :mod:`powerdp.engine.consensus.updates` makes them selectable by name."""

    #: the name used in configurations (``RunConfig.algorithm = "UPDATE/PERTURBATION/MECHANISM"``)
    name: ClassVar[str]
    #: the perturbations this rule supports; its privacy argument covers only these
    perturbations: ClassVar[tuple[str, ...]]
    #: one line for ``--help`` and the docs
    summary: ClassVar[str] = ""
    #: the keys of ``config.extra`` this rule reads; any other key is refused (a misspelt option is never ignored)
    extra_options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: ConsensusSettings):
        self.config = config

    @classmethod
    def check_config(cls, config: ConsensusSettings) -> None:
        """Reject settings this rule cannot run with (called by ``RunConfig.validate``; raise ConfigError).
        Rule-specific options live in ``config.extra``; the default accepts everything."""
        return None

    # ---------------------------------------------------------------- building
    def local_problem(self, reduction: Reduction, f_r: QuadraticObjective) -> tuple[CompiledProblem, QuadraticObjective]:
        """The problem (in the solver's coordinates) the zone's solver is built once for, and an
        objective whose Hessian pattern covers every objective this rule will solve with."""
        n = reduction.full.n
        return reduction.reduced, reduction.pull(np.zeros(n), np.ones(n))

    # ---------------------------------------------------------------- a round
    @abstractmethod
    def run_round(self, zone: LocalProblem, t: int, rho: float, admm_lin: np.ndarray) -> RoundOutcome:
        """The local steps of round ``t``. ``admm_lin`` = B_pᵀ(ρ w + λ), the ADMM term's linear part."""

    # ---------------------------------------------------------------- privacy
    def uniform_penalty(self, t: int) -> float:
        """ρ_t when it adds strong convexity to *every* entry of the local problem, else 0.

        That is the case when every entry of z is shared (B_p = I, a learning client) and the run's penalty
        is a public schedule: the configuration then offers ``penalty(t)`` and ``extra["all_shared"]``. An OPF
        zone keeps private entries, so only the proximal term's 1/η_t is uniform there (returns 0)."""
        penalty = getattr(self.config, "penalty", None)
        if not (callable(penalty) and self.config.extra.get("all_shared")):
            return 0.0
        return float(penalty(t))

    def output_sensitivity(self, grad: Sensitivity, t: int, n: int, lipschitz: float) -> Sensitivity:
        """How far one local step's output can move when one load moves (output perturbation)."""
        raise ConfigError(f"update {self.name!r} has no output-sensitivity bound; it cannot be used with output perturbation")
