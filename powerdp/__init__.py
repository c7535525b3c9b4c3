"""powerdp: privacy-preserving distributed optimization, first of all optimal power flow.

The same engine (update rule × perturbation × mechanism, ledger, backends, audit) serves
three applications: the SOC optimal power flow below (consensus ADMM over zones), federated
learning (:func:`run_federated`, :mod:`powerdp.apps.learning`; 001's noisy ADMM with the
amplification-by-iteration ledger, :func:`run_noisy_admm`) and ADMM sharing (the zonal DC
market :func:`run_market`, vertical learning :func:`run_vertical_learning`).

Layers, data flowing one way: case data (:mod:`powerdp.grid.matpower`) → network
arrays (:class:`Network`) → zone partition (:class:`Partition`) → SOC
formulation in Pyomo (:func:`build_model`) → compiled problem
(:func:`compile_model`) → a local solver (:data:`SOLVERS`: Ipopt via cyipopt,
:class:`IpoptSolver`, or Clarabel on the conic form, :class:`ClarabelSolver`) → zone
agents (:class:`ZoneAgent`) and the ADMM :class:`Coordinator` → a run on a
backend (:func:`run_distributed`) → :class:`RunResult`.

Quick start::

    import powerdp
    net = powerdp.load_case("case118")
    central = powerdp.solve_opf(net)                       # centralized SOC relaxation
    cfg = powerdp.RunConfig(case="case118", zones=3, algorithm="objl", epsilon=0.1)
    result = powerdp.run_distributed(cfg)                  # private distributed solve
    result.history.plot(x="round", y="objective", logy=True)
"""

from __future__ import annotations

from ._version import __version__
from .apps.learning import LearnConfig, LearnResult, NoisyADMMConfig, NoisyADMMRun, run_federated, run_noisy_admm
from .apps.learning.vertical import run_vertical_learning
from .apps.market.dc_market import run_market
from .apps.power_flow.agent import ZoneAgent
from .apps.power_flow.config import RunConfig
from .apps.power_flow.result import RunResult
from .apps.power_flow.runner import RunFailed, run_distributed
from .engine.consensus.coordinator import Coordinator
from .engine.consensus.messages import ConsensusMessage, SolverStats, ZoneUpdate
from .engine.sharing.coordinator import SharingAgent, SharingCoordinator
from .errors import (
    CaseDataError,
    ConfigError,
    InfeasibleError,
    ModelError,
    PartitionError,
    PowerDPError,
    SolverError,
)
from .grid.loading import bundled_cases, load_case
from .grid.matpower import MatpowerData, read_matpower
from .grid.network import DCLines, Network
from .grid.partition import Partition, bundled_partition, partition
from .grid.profiles import Horizon, load_horizon
from .grid.public_costs import DEFAULT_COSTS, PublicCosts, read_costs
from .opf.centralized import OPFResult, solve_opf
from .opf.compiled import CompiledProblem, LinearMap, QuadraticObjective, compile_model
from .opf.conic import ClarabelSolver
from .opf.dc import DCModel, DCResult, dc_model, solve_dc_opf
from .opf.formulation import build_model
from .opf.local_solver import SOLVERS, LocalSolver
from .opf.pandapower_io import ACCheck, ac_check, to_pandapower
from .opf.solvers import IpoptSolver, SolveResult, load_ipopt_profile
from .opf.tables import Dispatch, ResultTables, physical_tables
from .privacy import GaussianMechanism, LaplaceMechanism, PrivacyLedger, noise_rng
from .privacy.amplification import AmplifiedGuarantee, first_user_guarantee
from .runs.sharing_run import SharingSettings, run_sharing
from .studies.audit import AuditResult, run_audit

__all__ = [
    "__version__",
    "Network",
    "DCLines",
    "load_case",
    "load_horizon",
    "Horizon",
    "PublicCosts",
    "DEFAULT_COSTS",
    "read_costs",
    "bundled_cases",
    "read_matpower",
    "MatpowerData",
    "build_model",
    "compile_model",
    "CompiledProblem",
    "QuadraticObjective",
    "LinearMap",
    "IpoptSolver",
    "ClarabelSolver",
    "LocalSolver",
    "SOLVERS",
    "SolveResult",
    "load_ipopt_profile",
    "solve_opf",
    "OPFResult",
    "Dispatch",
    "ResultTables",
    "physical_tables",
    "ACCheck",
    "ac_check",
    "to_pandapower",
    "Partition",
    "partition",
    "bundled_partition",
    "RunConfig",
    "ZoneAgent",
    "Coordinator",
    "ConsensusMessage",
    "ZoneUpdate",
    "SolverStats",
    "LaplaceMechanism",
    "GaussianMechanism",
    "PrivacyLedger",
    "run_distributed",
    "RunResult",
    "RunFailed",
    "run_audit",
    "AuditResult",
    "run_federated",
    "LearnConfig",
    "LearnResult",
    "run_noisy_admm",
    "NoisyADMMConfig",
    "NoisyADMMRun",
    "first_user_guarantee",
    "AmplifiedGuarantee",
    "noise_rng",
    "PowerDPError",
    "CaseDataError",
    "PartitionError",
    "ModelError",
    "SolverError",
    "InfeasibleError",
    "ConfigError",
    # ADMM sharing (docs/sharing.md, docs/market.md, docs/vertical.md)
    "SharingCoordinator",
    "SharingAgent",
    "SharingSettings",
    "run_sharing",
    "run_market",
    "run_vertical_learning",
    "DCModel",
    "DCResult",
    "dc_model",
    "solve_dc_opf",
]
