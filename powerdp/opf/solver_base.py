"""The local-solver interface and registry now live in :mod:`powerdp.solver_base` (neutral ground shared
with :mod:`powerdp.learning`); these names stay importable from here."""

from ..solver_base import BOX_SOLVERS, OUTCOMES, SOLVERS, SUCCESS_OUTCOMES, LocalSolver, SolveResult, solver_class

__all__ = ["LocalSolver", "SolveResult", "SOLVERS", "BOX_SOLVERS", "OUTCOMES", "SUCCESS_OUTCOMES", "solver_class"]
