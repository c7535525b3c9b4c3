"""Run federated learning on the engine: data → clients → coordinator loop → :class:`LearnResult`.

:func:`run_federated` is the one entry point of the CLI (``powerdp learn``), sweeps and notebooks. It uses
the engine's :class:`~powerdp.engine.consensus.coordinator.Coordinator` as it is (every client shares every entry of
the global model), writes an output directory with the two views of a run apart, as ``powerdp run`` does
(docs/privacy.md, "What a deployment publishes"; powerdp/admm/results.py), and can continue an interrupted run
(``resume=True``)::

    DIR/config.json                the resolved LearnConfig (public settings)
    DIR/coordinator_view/          what the coordinator holds and a deployment would publish:
        history.csv                per round: residuals, ε spent, ρ, the coordinator's round time (COORDINATOR_COLUMNS)
        summary.json               public settings, final residual, the ledger per client, timings (COORDINATOR_KEYS)
        model.npz                  the global model w (the consensus of the released models)
    DIR/simulation_evaluation/     what only a simulation holding every client's data can compute (never published):
        history.csv                per round: training objective, test/train error, Σ|ξ|, box violation
        summary.json               final objective and errors, the centralized reference and gap, sample counts,
                                   the preprocessing (its norms are of the data)
    DIR/inputs.json                the data set's file and its SHA-256 (checked, and reopened by that path, on resume)
    DIR/checkpoint/                state.* (the coordinator's state and history columns), evaluation.* (the
                                   evaluation's history columns), each client's own files (written on its host)

The rounds run in the shared loop (:mod:`powerdp.runs.loop`) and the files are the shared run directory's
(:class:`powerdp.runs.record.RunRecord`): both ``history.csv`` are appended every round; a checkpoint every
``checkpoint_every`` rounds (npz + JSON, no pickle), every file written whole or not at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...engine.consensus.coordinator import Coordinator, Residuals
from ...engine.consensus.messages import ZoneUpdate
from ...engine.sharing.hosts import launch_sharing, make_sharing_backend
from ...errors import ConfigError, PowerDPError
from ...files.atomic import atomic_write
from ...runs.directory import DirectoryLock, ensure_dir, prepare_run_dir
from ...runs.inputs import file_entry
from ...runs.loop import Rounds, run_rounds
from ...runs.record import RunRecord, check_resume
from ...runs.views import COORDINATOR_VIEW, save_summary_views
from .client import ClientAgent
from .config import ADAPT_RHO_ROUNDS, LearnConfig
from .data import Dataset, load_dataset, preprocess, split_clients
from .hosts import client_specs
from .model import SoftmaxLoss, centralized_fit, error_rate
from .sensitivity import gradient_sensitivity

log = logging.getLogger(__name__)

__all__ = ["run_federated", "LearnResult", "LearnFailed", "prepare_data", "HISTORY_COLUMNS", "RESUME_MAY_CHANGE",
           "COORDINATOR_COLUMNS", "COORDINATOR_KEYS", "LEGACY_FILES"]

HISTORY_COLUMNS = [
    "round", "objective", "test_error", "train_error", "noise_magnitude", "feasibility", "dual_residual",
    "max_violation", "epsilon_spent", "rho", "wall_s",
]
#: history columns of the coordinator's view (an allow-list: computed from the released models, the ledger and
#: its own clock); every other column (objective, errors, Σ|ξ|, box violation) is the simulation's evaluation
COORDINATOR_COLUMNS = ["round", "feasibility", "dual_residual", "wall_s", "epsilon_spent", "rho"]
#: summary keys of the coordinator's view (an allow-list: public settings, residual, ledger, its timings); any
#: other key (final objective and errors, the centralized reference, sample counts, the data's norms) is evaluation
COORDINATOR_KEYS = (
    "application", "dataset", "algorithm", "engine_algorithm", "clients", "split", "features", "classes", "box", "reg",
    "rounds", "local_updates", "stopped", "final_feasibility", "private", "noise_source", "seed", "sensitivity",
    "sensitivity_note", "adjacency", "epsilon_per_step_setting", "epsilon_total", "epsilon_per_step", "epsilon_basic",
    "target_epsilon", "target_delta", "rho_schedule", "rho_first", "wall_s", "round_ms", "setup_s", "backend",
    "local_solver", "resumed_from", "eta_rule", "rho_final", "stopping_tolerance", "final_relative_residuals",
)
#: the mixed top-level files of learning runs written before the views were split
LEGACY_FILES = ("history.csv", "summary.json", "model.npz", "privacy.json")
#: a seeded run is bit-identical on every backend, so a resume may also move it to another one
RESUME_MAY_CHANGE = ("rounds", "checkpoint_every", "evaluate", "evaluate_every", "blas_threads", "backend", "workers", "rank_timeout")


class LearnFailed(PowerDPError):
    """A learning run stopped on an error; ``result`` holds the history up to the failure."""

    exit_status = 1

    def __init__(self, message: str, result: LearnResult | None):
        super().__init__(message)
        self.result = result


@dataclass
class LearnResult:
    """A federated-learning run: its configuration, per-round history, final global model and summary."""

    config: LearnConfig
    history: pd.DataFrame
    model: np.ndarray  # the global model w (J × K)
    summary: dict[str, Any] = field(default_factory=dict)
    privacy: dict[int, Any] = field(default_factory=dict)

    def views(self) -> dict[str, dict[str, Any]]:
        """The summary split into the coordinator's view and the simulation's evaluation (:data:`COORDINATOR_KEYS`)."""
        from ...runs.views import split_views

        return split_views(self.summary, COORDINATOR_KEYS)

    def save(self, out: str | Path) -> None:
        """The summary in the two views, the global model and the ledger in the coordinator's (module docstring);
        the history files are appended every round by the run."""
        out = Path(out)
        (out / COORDINATOR_VIEW).mkdir(parents=True, exist_ok=True)
        atomic_write(out / COORDINATOR_VIEW / "model.npz", lambda fh: np.savez(fh, w=self.model), binary=True)
        save_summary_views(out, self.summary, COORDINATOR_KEYS, privacy=self.privacy)  # the ledger: public
        if self.config.private and self.privacy:  # what each client released under, for anyone to re-account
            from ...runs.receipt import receipt_units, write_receipt

            cfg = self.config
            neighbours = {"replace-one": "one training sample of the client replaced by another (features and label)",
                          "add-remove": "one training sample of the client added or removed"}.get(cfg.adjacency, cfg.adjacency)
            write_receipt(out, "learning", run={
                "algorithm": cfg.algorithm, "noise_source": cfg.noise_source, "private": cfg.sensitivity != "paper",
                "target_epsilon": cfg.target_epsilon, "target_delta": cfg.target_delta, "rounds": cfg.rounds,
                "local_updates": cfg.local_updates, "sensitivity_rule": cfg.sensitivity,
            }, relation={"name": cfg.adjacency, "text": neighbours, "sensitivity": self.summary.get("sensitivity_note")},
                units=receipt_units("client", self.privacy))


@dataclass
class PreparedData:
    data: Dataset
    parts: list[np.ndarray]

    @property
    def n_train(self) -> int:
        return len(self.data.y_train)


def prepare_data(config: LearnConfig, data: Dataset | None = None, parts: list[np.ndarray] | None = None,
                 source: str | None = None) -> PreparedData:
    """The run's data after public preprocessing, and each client's sample indices (``parts``, else the split).
    ``source``: where to load ``config.dataset`` from (a resumed run: its recorded absolute path)."""
    raw = data if data is not None else load_dataset(
        source if source is not None else config.dataset, label=config.label, test_fraction=config.test_fraction, split_seed=config.split_seed,
        feature_range=config.feature_range, bounds=config.bounds,
    )
    pre = raw if raw.preprocessing else preprocess(raw, clip=config.clip, clip_l1=config.clip_l1)
    if parts is None:
        parts = split_clients(pre.y_train, config.clients, config.split, seed=config.split_seed)
    elif len(parts) != config.clients:
        raise ConfigError(f"parts: {len(parts)} clients' samples given for clients = {config.clients}")
    return PreparedData(pre, parts)


def build_clients(config: LearnConfig, prepared: PreparedData) -> list[ClientAgent]:
    """Every client in this process (benchmarks; a run builds them on its backend's hosts from :func:`specs`)."""
    d = prepared.data
    R2, R1 = d.preprocessing["R2"], d.preprocessing["R1"]
    return [
        ClientAgent(p, d.X_train[idx], d.y_train[idx], d.n_classes, prepared.n_train, config, R2, R1)
        for p, idx in enumerate(prepared.parts)
    ]


def specs(config: LearnConfig, prepared: PreparedData):
    """The clients' specs for the backend's hosts: each holds that client's samples only."""
    d = prepared.data
    return client_specs(config, d.X_train, d.y_train, prepared.parts, d.n_classes, d.preprocessing["R2"], d.preprocessing["R1"])


def centralized_reference(config: LearnConfig, prepared: PreparedData) -> dict[str, float]:
    """The same problem solved centrally on the pooled training data (same box, same ℓ2 term)."""
    d = prepared.data
    pooled = SoftmaxLoss(d.X_train, d.y_train, d.n_classes, prepared.n_train, reg=config.reg)
    z, f = centralized_fit(pooled, config.box)
    return {
        "objective": f,
        "test_error": error_rate(z, d.X_test, d.y_test, d.n_classes),
        "train_error": error_rate(z, d.X_train, d.y_train, d.n_classes),
    }


def _check_resume(saved: LearnConfig, config: LearnConfig, out: Path) -> None:
    budget = None
    if saved.target_epsilon is not None and saved.private_steps != config.private_steps:
        budget = f"{out}: the run's noise was calibrated to a total budget over {saved.rounds} rounds; --rounds cannot change"
    check_resume(saved.to_dict(), config.to_dict(), RESUME_MAY_CHANGE, out, budget)


def run_federated(
    config: LearnConfig,
    data: Dataset | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: Callable[[dict[str, Any]], None] | None = None,
    status: Callable[[str], None] | None = None,
    reference: bool = True,
    observe: Callable[[list[ZoneUpdate]], None] | None = None,
    parts: list[np.ndarray] | None = None,
) -> LearnResult:
    """Run the (private) federated ADMM of docs/learning.md and return its :class:`LearnResult`. Under
    ``backend="mpi"`` call it on every rank: rank 0 returns the result, the others host clients and return None.

    ``data``: a :class:`Dataset` (raw or already preprocessed) instead of ``config.dataset``. ``out``: the
    output directory (refused if it holds a run, unless ``resume`` or ``overwrite``). ``progress`` is called
    with every round's history row; ``observe`` with what the coordinator receives each round (the audit).
    ``reference``: also solve the centralized problem (needs ``config.evaluate``). ``parts``: each client's sample
    indices into ``data`` (default: ``config.split``).
    """
    config.validate()
    if resume and out is None:
        raise ConfigError("resume needs the output directory of the run")
    return launch_sharing(config, lambda: _run_here(config, data, out, resume, overwrite, progress, status, reference, observe, parts))


def _run_here(config, data, out, resume, overwrite, progress, status, reference, observe, parts) -> LearnResult:
    """The coordinator's side of :func:`run_federated` (the only side of a serial or process run)."""
    from threadpoolctl import threadpool_limits

    # one BLAS thread: a client's products are small (400 × 784 × 10 on the MNIST subset: 0.57 ms on one
    # thread, 0.98 ms on two; benchmarks/learning.py), and clients are the unit of parallelism
    with threadpool_limits(limits=config.blas_threads):
        if out is None:
            return _run(config, data, None, False, progress, status, reference, observe, parts)
        out_dir = ensure_dir(out)
        with DirectoryLock(out_dir):
            prepare_run_dir(out_dir, overwrite=overwrite, resume=resume)
            return _run(config, data, out_dir, resume, progress, status, reference, observe, parts)


def _record_inputs(record: RunRecord, config: LearnConfig) -> None:
    """inputs.json of a new run: the data set's file (a bundled set is no file: nothing to record)."""
    path = Path(str(config.dataset))
    if path.is_file():
        record.record_inputs({"dataset": file_entry(path, config.dataset)})


def _dataset_source(records: dict[str, dict], config: LearnConfig, out: Path) -> str:
    """What a resumed run loads: the data set by its recorded absolute path (checked unchanged), not as typed."""
    e = records.get("dataset")
    if e and "path" in e:
        return e["path"]
    if Path(str(config.dataset)).is_file() and not records:
        log.warning("%s was made before powerdp recorded its input files (inputs.json); the data set is reopened as %r "
                    "from the current directory, unchecked", out, str(config.dataset))
    return config.dataset


def _start_files(record: RunRecord, config: LearnConfig, history: list[dict]) -> None:
    record.write_config(config.to_dict())
    record.start(history, legacy=LEGACY_FILES)


def _run(config, data, out_dir, resume, progress, status, reference, observe, parts=None) -> LearnResult:
    say = status or (lambda msg: None)
    t_setup = time.perf_counter()
    record = RunRecord(out_dir, COORDINATOR_COLUMNS, HISTORY_COLUMNS, command="powerdp learn") if out_dir is not None else None
    resumed = None
    source = config.dataset
    if resume:
        resumed = record.load_checkpoint()  # missing or unreadable: fails before any work
        saved = LearnConfig.from_dict(record.read_config(), source=str(out_dir / "config.json"))
        _check_resume(saved, config, out_dir)
        if int(resumed[0]["round"]) > config.rounds:
            raise ConfigError(f"{out_dir}: the run already has {resumed[0]['round']} rounds; give more than that to extend it")
        if data is None:  # the data set by the path recorded when the run was made, unchanged
            source = _dataset_source(record.verify_inputs("resume"), config, out_dir)
    say(f"loading {config.dataset}")
    prepared = prepare_data(config, data, parts, source=source)
    d = prepared.data
    say(f"{prepared.n_train} training samples, {len(d.y_test)} test samples, {d.n_features} features, {d.n_classes} classes, "
        f"{config.clients} clients ({config.split})")
    central = None
    if reference and config.evaluate:
        say("centralized reference solve (L-BFGS-B on the pooled data, same box and ℓ2 term)")
        central = centralized_reference(config, prepared)
    n = d.n_features * d.n_classes
    coordinator = Coordinator(n, [np.arange(n)] * config.clients, config.penalty(1), config.coordinator_rho_schedule)
    if config.backend != "serial":
        say(f"starting the {config.backend} backend's hosts")
    backend = make_sharing_backend(config.backend, specs(config, prepared), config)
    try:
        return _loop(config, prepared, central, coordinator, backend, record, resumed, progress, observe, t_setup)
    finally:
        backend.close()


def _loop(config, prepared, central, coordinator, backend, record, resumed, progress, observe, t_setup) -> LearnResult:
    """The rounds on the shared loop (runs/loop.py): broadcast, the clients' steps on their hosts, the coordinator's
    update, the evaluation."""
    seen = observe or (lambda updates: None)
    d = prepared.data
    pooled = SoftmaxLoss(d.X_train, d.y_train, d.n_classes, prepared.n_train, reg=config.reg) if config.evaluate else None
    history: list[dict[str, Any]] = []
    if resumed is not None:
        state, history = resumed
        coordinator.load_state_dict(state)
        backend.call("restore", (str(record.directory), coordinator.round))
        _start_files(record, config, history)
    else:
        initial = backend.call("init")
        seen(initial)
        coordinator.start(initial)
        if record is not None:
            _start_files(record, config, history)
            _record_inputs(record, config)
            if config.private and config.checkpoint_every != 0:  # each client journals its releases (privacy/journal.py)
                backend.call("journal", str(record.directory))
    start = coordinator.round + 1
    setup_s = time.perf_counter() - t_setup
    run_start = time.perf_counter()
    tol = config.stopping_tolerance
    converged = {"round": None}

    def step(t: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        if config.coordinator_rho_schedule == "adaptive":  # residual balancing, then ρ held (non-private runs)
            coordinator.rho_schedule = "adaptive" if t <= ADAPT_RHO_ROUNDS else "constant"
        else:
            coordinator.rho = config.penalty(t)  # ρ_t: data-independent schedule
        rho = coordinator.rho
        msgs = coordinator.broadcast()
        updates = backend.call("step_each", {m.zone: m for m in msgs})
        seen(updates)
        res = coordinator.receive(updates)
        wall = time.perf_counter() - t0
        done = tol > 0 and max(relative_residuals(coordinator, res, rho)) <= tol
        converged["round"] = t if done else None
        spend = t % config.evaluate_every == 0 or t == config.rounds or not history or done
        diags = _diagnostics(backend, privacy=spend)
        return _row(t, coordinator, diags, pooled if spend else None, d, res, rho, wall, spend, history)

    def partial(rows, stopped):
        run_s = None if stopped == "failed" else time.perf_counter() - run_start
        return _result(config, prepared, coordinator, backend, rows, central, setup_s, run_s, stopped)

    def checkpoint(rows):
        t = coordinator.round  # each client's state on its own host, then the coordinator's
        # each client into its own private folder on its host (OUT/clients.private/client_P), then the coordinator's
        record.save_checkpoint(coordinator.state_dict(), rows, t, agents=lambda cd: backend.call("save", (str(record.directory), t)),
                               prune=lambda cd: backend.call("prune", (str(record.directory), t)))

    rounds = Rounds(step=step, partial=partial, checkpoint=checkpoint, checkpoint_first=config.private,
                    converged=lambda row: converged["round"] == row["round"],
                    failed=lambda t, detail, result, exc: LearnFailed(f"run stopped in round {t}: {detail}", result))
    stopped = run_rounds(rounds, start, config.rounds, history, record, config.checkpoint_every, progress, resumed is not None)
    stopped = "converged" if stopped == "tolerance" else stopped
    result = partial(history, stopped)
    result.summary["resumed_from"] = start - 1 if resumed is not None else None
    if tol > 0 and stopped == "rounds":  # a run that should converge and did not: say so (its model is short of the optimum)
        primal, dual = result.summary["final_relative_residuals"] or (float("nan"), float("nan"))  # None after one round
        log.warning("%s stopped at the round cap (%d) before its residuals met the tolerance %g (relative primal %.2e, "
                    "dual %.2e): the model may be short of the optimum; give more --rounds", config.algorithm, config.rounds,
                    tol, primal, dual)
    if record is not None:
        result.save(record.directory)
    return result


def relative_residuals(coordinator: Coordinator, res, rho: float) -> tuple[float, float]:
    """Boyd et al. §3.3.1's residuals relative to their scales: ‖w − z‖/max(‖w‖, ‖z‖) and
    ρ‖w − w_prev‖/‖λ‖ over the stacked clients (every entry shared), ρ the round's penalty."""
    stacked = coordinator.w[coordinator.gidx]
    primal = res.primal / max(float(np.linalg.norm(stacked)), float(np.linalg.norm(coordinator.released)), 1e-300)
    prev = getattr(coordinator, "w_prev", None)  # none in a coordinator restored from a checkpoint
    if prev is None:
        return primal, float("nan")
    step = float(np.linalg.norm((coordinator.w - prev)[coordinator.gidx]))
    dual = rho * step / max(float(np.linalg.norm(coordinator.lam)), 1e-300)
    return primal, dual


def _diagnostics(backend, evaluate: bool = False, privacy: bool = True) -> list:
    """Every client's evaluation figures, in client order (asked of the hosts; they never cross in a deployment)."""
    out = backend.call("diag", {"evaluate": evaluate, "privacy": privacy})
    return [out[p] for p in sorted(out)]


def _row(t, coordinator, diags, pooled, d, res, rho, wall, spend=True, history=()) -> dict[str, Any]:
    """One history row. The ledger's figure (an accountant call) and the model's evaluation are computed every
    ``evaluate_every`` rounds and at the last; in between the spend is carried forward and the rest is NaN."""
    row: dict[str, Any] = {
        "round": t,
        "noise_magnitude": float(sum(x.noise_magnitude for x in diags)),  # evaluation only (000 eq. 29)
        "feasibility": res.primal,
        "dual_residual": res.dual,
        "max_violation": float(max(x.max_violation for x in diags)),
        "epsilon_spent": float(max(x.epsilon_spent for x in diags)) if spend else history[-1]["epsilon_spent"],
        "rho": rho,
        "wall_s": wall,
        "objective": float("nan"),
        "test_error": float("nan"),
        "train_error": float("nan"),
    }
    if pooled is not None:  # the simulation's evaluation of the global model the coordinator holds
        w = global_model(coordinator)
        row["objective"] = pooled.value(w)
        row["test_error"] = error_rate(w, d.X_test, d.y_test, d.n_classes)
        row["train_error"] = error_rate(w, d.X_train, d.y_train, d.n_classes)
    return row


def global_model(coordinator: Coordinator) -> np.ndarray:
    """The model the coordinator holds after a round: the next consensus point, mean of (z_p − λ_p/ρ)."""
    return coordinator.average()


def _result(config, prepared, coordinator, backend, history, central, setup_s, run_s, stopped) -> LearnResult:
    frame = pd.DataFrame(history, columns=HISTORY_COLUMNS)
    d = prepared.data
    try:
        diags = _diagnostics(backend)
    except PowerDPError:  # a host that failed the round cannot answer: the ledger is then unknown
        if stopped != "failed":
            raise
        diags = []
    w = global_model(coordinator) if coordinator.round > 0 else np.zeros(coordinator.n_shared)
    last = history[-1] if history else {}
    privacy = {x.zone: x.privacy for x in diags if x.privacy is not None}
    summary: dict[str, Any] = {
        "application": "learning",
        "dataset": config.dataset,
        "algorithm": config.algorithm,
        "engine_algorithm": config.spec.name,
        "clients": config.clients,
        "split": config.split,
        "client_samples": [int(len(p)) for p in prepared.parts],
        "train_samples": prepared.n_train,
        "test_samples": int(len(d.y_test)),
        "features": d.n_features,
        "classes": d.n_classes,
        "box": config.box,
        "reg": config.reg,
        "preprocessing": d.preprocessing,
        "rounds": int(len(frame)),
        "local_updates": config.local_updates,
        "stopped": stopped,
        "final_objective": last.get("objective"),
        "final_test_error": last.get("test_error"),
        "final_train_error": last.get("train_error"),
        "final_feasibility": last.get("feasibility"),
        "final_max_violation": last.get("max_violation"),
        "centralized_objective": central["objective"] if central else None,
        "centralized_test_error": central["test_error"] if central else None,
        "relative_gap_to_centralized": None,
        "private": config.private,
        "noise_source": config.noise_source if config.private else None,
        "seed": config.seed,
        "sensitivity": config.sensitivity,
        "sensitivity_note": (
            "the papers' data-dependent sensitivity: NOT differentially private" if config.private and config.sensitivity == "paper"
            else (gradient_sensitivity(d.preprocessing["R2"], d.preprocessing["R1"], prepared.n_train, config.adjacency).note
                  if config.private else None)
        ),
        "adjacency": config.adjacency,
        "epsilon_per_step_setting": config.step_epsilon,
        "epsilon_total": {int(x.zone): float(x.epsilon_spent) for x in diags},  # the ledger's tightest valid figure
        "epsilon_per_step": {int(x.zone): x.privacy["per_step"]["epsilon"] for x in diags if x.privacy},
        "epsilon_basic": {int(x.zone): x.privacy["basic"]["epsilon"] for x in diags if x.privacy},
        "target_epsilon": config.target_epsilon,
        "target_delta": config.target_delta,
        "rho_schedule": config.rho_schedule,
        "rho_first": config.penalty(1),
        "rho_final": coordinator.rho,
        "eta_rule": config.eta_rule,
        "stopping_tolerance": config.stopping_tolerance,
        "final_relative_residuals": (list(relative_residuals(coordinator, Residuals(last["feasibility"], last["dual_residual"]), last["rho"]))
                                     if history and coordinator.round > 1 else None),
        "wall_s": float(frame["wall_s"].sum()) if run_s is None else float(run_s),
        "round_ms": float(1e3 * frame["wall_s"].median()) if len(frame) else None,
        "setup_s": float(setup_s),
        "backend": config.backend,
        "local_solver": config.local_solver,
    }
    if central and summary["final_objective"] is not None and np.isfinite(summary["final_objective"]):
        summary["relative_gap_to_centralized"] = (summary["final_objective"] - central["objective"]) / abs(central["objective"])
    return LearnResult(config=config, history=frame, model=w.reshape(d.n_features, d.n_classes), summary=summary, privacy=privacy)
