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

import importlib
from typing import TYPE_CHECKING, Any


def _scipy_without_pyomo_eager_stats() -> None:
    """Pyomo registers an import hook on scipy: the first ``import scipy.sparse`` anywhere also imports scipy.stats,
    .integrate and .spatial (``pyomo.common.dependencies._finalize_scipy``), about 0.5 s of every command's start-up
    that powerdp never uses. The hook is dropped: Pyomo's own deferred ``scipy`` still resolves (with its submodules) the
    first time Pyomo itself asks for it. (benchmarks/startup.py measures the start-up with and without.)"""
    try:
        from pyomo.common.dependencies import DeferredImportCallbackFinder
    except ImportError:  # pragma: no cover - another Pyomo layout: the start-up is only slower
        return
    callbacks = getattr(DeferredImportCallbackFinder, "_callbacks", None)
    if isinstance(callbacks, dict):
        callbacks.pop("scipy", None)


_scipy_without_pyomo_eager_stats()  # first, before anything imports Pyomo or scipy

from ._version import __version__  # noqa: E402

#: where each public name lives: imported on first use (PEP 562), so that ``import powerdp`` (and with it every
#: command's start-up) loads only what is used: the learning, market and audit modules stay out of a power-flow run
_PUBLIC: dict[str, str] = {
    "LearnConfig": ".apps.learning",
    "LearnResult": ".apps.learning",
    "NoisyADMMConfig": ".apps.learning",
    "NoisyADMMRun": ".apps.learning",
    "run_federated": ".apps.learning",
    "run_noisy_admm": ".apps.learning",
    "run_vertical_learning": ".apps.learning.vertical",
    "run_market": ".apps.market.dc_market",
    "ZoneAgent": ".apps.power_flow.agent",
    "RunConfig": ".apps.power_flow.config",
    "RunResult": ".apps.power_flow.result",
    "RunFailed": ".apps.power_flow.runner",
    "run_distributed": ".apps.power_flow.runner",
    "Coordinator": ".engine.consensus.coordinator",
    "ConsensusMessage": ".engine.consensus.messages",
    "SolverStats": ".engine.consensus.messages",
    "ZoneUpdate": ".engine.consensus.messages",
    "SharingAgent": ".engine.sharing.coordinator",
    "SharingCoordinator": ".engine.sharing.coordinator",
    "CaseDataError": ".errors",
    "ConfigError": ".errors",
    "InfeasibleError": ".errors",
    "ModelError": ".errors",
    "PartitionError": ".errors",
    "PowerDPError": ".errors",
    "SolverError": ".errors",
    "bundled_cases": ".grid.loading",
    "load_case": ".grid.loading",
    "MatpowerData": ".grid.matpower",
    "read_matpower": ".grid.matpower",
    "DCLines": ".grid.network",
    "Network": ".grid.network",
    "Partition": ".grid.partition",
    "bundled_partition": ".grid.partition",
    "partition": ".grid.partition",
    "Horizon": ".grid.profiles",
    "load_horizon": ".grid.profiles",
    "DEFAULT_COSTS": ".grid.public_costs",
    "PublicCosts": ".grid.public_costs",
    "read_costs": ".grid.public_costs",
    "OPFResult": ".opf.centralized",
    "solve_opf": ".opf.centralized",
    "CompiledProblem": ".opf.compiled",
    "LinearMap": ".opf.compiled",
    "QuadraticObjective": ".opf.compiled",
    "compile_model": ".opf.compiled",
    "ClarabelSolver": ".opf.conic",
    "DCModel": ".opf.dc",
    "DCResult": ".opf.dc",
    "dc_model": ".opf.dc",
    "solve_dc_opf": ".opf.dc",
    "build_model": ".opf.formulation",
    "SOLVERS": ".opf.local_solver",
    "LocalSolver": ".opf.local_solver",
    "ACCheck": ".opf.pandapower_io",
    "ac_check": ".opf.pandapower_io",
    "to_pandapower": ".opf.pandapower_io",
    "IpoptSolver": ".opf.solvers",
    "SolveResult": ".opf.solvers",
    "load_ipopt_profile": ".opf.solvers",
    "Dispatch": ".opf.tables",
    "ResultTables": ".opf.tables",
    "physical_tables": ".opf.tables",
    "GaussianMechanism": ".privacy",
    "LaplaceMechanism": ".privacy",
    "PrivacyLedger": ".privacy",
    "noise_rng": ".privacy",
    "AmplifiedGuarantee": ".privacy.amplification",
    "first_user_guarantee": ".privacy.amplification",
    "SharingSettings": ".runs.sharing_run",
    "run_sharing": ".runs.sharing_run",
    "AuditResult": ".studies.audit",
    "run_audit": ".studies.audit",
}

if TYPE_CHECKING:  # the names as a type checker and an IDE see them
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
    from .errors import CaseDataError, ConfigError, InfeasibleError, ModelError, PartitionError, PowerDPError, SolverError
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


def __getattr__(name: str) -> Any:
    """A public name of :data:`__all__`, imported from its module the first time it is used (``_PUBLIC``)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'powerdp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once: the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    """Every public name, imported or not yet."""
    return sorted(set(globals()) | set(_PUBLIC))


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
