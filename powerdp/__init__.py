"""powerdp: privacy-preserving distributed optimal power flow.

Layers, data flowing one way: case data (:mod:`powerdp.matpower`) → network
arrays (:class:`Network`) → zone partition (:class:`Partition`) → SOC
formulation in Pyomo (:func:`build_model`) → compiled problem
(:func:`compile_model`) → Ipopt via cyipopt (:class:`IpoptSolver`).
"""

from __future__ import annotations

__version__ = "0.1.0"

from .compiled import CompiledProblem, LinearMap, QuadraticObjective, compile_model
from .errors import (
    CaseDataError,
    ConfigError,
    InfeasibleError,
    ModelError,
    PartitionError,
    PowerDPError,
    SolverError,
)
from .formulation import build_model
from .matpower import MatpowerData, read_matpower
from .network import Network, bundled_cases, load_case
from .opf import OPFResult, solve_opf
from .solver import IpoptSolver, SolveResult, load_ipopt_profile

__all__ = [
    "__version__",
    "Network",
    "load_case",
    "bundled_cases",
    "read_matpower",
    "MatpowerData",
    "build_model",
    "compile_model",
    "CompiledProblem",
    "QuadraticObjective",
    "LinearMap",
    "IpoptSolver",
    "SolveResult",
    "load_ipopt_profile",
    "solve_opf",
    "OPFResult",
    "PowerDPError",
    "CaseDataError",
    "PartitionError",
    "ModelError",
    "SolverError",
    "InfeasibleError",
    "ConfigError",
]
