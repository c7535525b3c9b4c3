"""Federated learning on the engine (docs/learning.md): the papers' second application.

Clients holding training samples run the same private ADMM as power-flow zones: the engine's update rules,
perturbations, mechanisms and ledger, unchanged, on a multiclass logistic-regression model. This package
uses the engine (:mod:`powerdp.engine`), :mod:`powerdp.privacy` and the run directory (:mod:`powerdp.runs`), never the grid,
the SOC model or another application.
"""

from .amplified import NoisyADMMConfig, NoisyADMMRun, run_noisy_admm
from .client import ClientAgent, ClientDiagnostics
from .config import ALGORITHM_NAMES, ALGORITHMS, RUNNERS, LearnConfig
from .data import BUNDLED, Dataset, load_dataset, preprocess, split_clients
from .model import SoftmaxLoss, centralized_fit, error_rate
from .runner import LearnFailed, LearnResult, run_federated

__all__ = [
    "run_federated", "LearnConfig", "LearnResult", "LearnFailed", "ALGORITHMS", "RUNNERS", "ALGORITHM_NAMES", "NoisyADMMConfig", "NoisyADMMRun", "run_noisy_admm",
    "ClientAgent", "ClientDiagnostics",
    "Dataset", "BUNDLED", "load_dataset", "preprocess", "split_clients", "SoftmaxLoss", "centralized_fit", "error_rate",
]
