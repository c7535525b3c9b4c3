"""Run federated learning on the engine: data → clients → coordinator loop → :class:`LearnResult`.

:func:`run_federated` is the one entry point of the CLI (``powerdp learn``), sweeps and notebooks. It uses
the engine's :class:`~powerdp.engine.consensus.coordinator.Coordinator` as it is (every client shares every entry of
the global model), writes an output directory with the two views of a run apart, as ``powerdp run`` does
(docs/privacy.md, "What a deployment publishes"; powerdp/runs/views.py), and can continue an interrupted run
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
    DIR/checkpoint/                state.json (the coordinator's state and history columns), evaluation.json (the
                                   evaluation's history columns), coordinator_round_T.npz, each client's own files

Both ``history.csv`` are appended every round; a checkpoint every ``checkpoint_every`` rounds (npz + JSON).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...engine.consensus.coordinator import Coordinator
from ...engine.consensus.messages import ZoneUpdate
from ...errors import ConfigError, Interrupted, PowerDPError
from ...files.jsonable import jsonable
from ...runs.directory import DirectoryLock, ensure_dir, prepare_run_dir
from ...runs.stopping import deferred_stop, stop_requested
from ...runs.views import (
    COORDINATOR_VIEW,
    EVALUATION_VIEW,
    append_history_views,
    save_history_views,
    save_summary_views,
)
from .client import ClientAgent
from .config import LearnConfig
from .data import Dataset, load_dataset, preprocess, split_clients
from .model import SoftmaxLoss, centralized_fit, error_rate

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
    "local_solver", "resumed_from",
)
#: the mixed top-level files of learning runs written before the views were split
LEGACY_FILES = ("history.csv", "summary.json", "model.npz", "privacy.json")
RESUME_MAY_CHANGE = ("rounds", "checkpoint_every", "evaluate", "evaluate_every", "blas_threads")


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
        np.savez(out / COORDINATOR_VIEW / "model.npz", w=self.model)
        save_summary_views(out, self.summary, COORDINATOR_KEYS, privacy=self.privacy)  # the ledger: public


@dataclass
class PreparedData:
    data: Dataset
    parts: list[np.ndarray]

    @property
    def n_train(self) -> int:
        return len(self.data.y_train)


def prepare_data(config: LearnConfig, data: Dataset | None = None, parts: list[np.ndarray] | None = None) -> PreparedData:
    """The run's data after public preprocessing, and each client's sample indices (``parts``, else the split)."""
    raw = data if data is not None else load_dataset(
        config.dataset, label=config.label, test_fraction=config.test_fraction, split_seed=config.split_seed,
        feature_range=config.feature_range,
    )
    pre = raw if raw.preprocessing else preprocess(raw, clip=config.clip, clip_l1=config.clip_l1)
    if parts is None:
        parts = split_clients(pre.y_train, config.clients, config.split, seed=config.split_seed)
    elif len(parts) != config.clients:
        raise ConfigError(f"parts: {len(parts)} clients' samples given for clients = {config.clients}")
    return PreparedData(pre, parts)


def build_clients(config: LearnConfig, prepared: PreparedData) -> list[ClientAgent]:
    d = prepared.data
    R2, R1 = d.preprocessing["R2"], d.preprocessing["R1"]
    return [
        ClientAgent(p, d.X_train[idx], d.y_train[idx], d.n_classes, prepared.n_train, config, R2, R1)
        for p, idx in enumerate(prepared.parts)
    ]


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
    a, b = saved.to_dict(), config.to_dict()
    changed = [k for k in a if k not in RESUME_MAY_CHANGE and a[k] != b.get(k)]
    if saved.target_epsilon is not None and saved.private_steps != config.private_steps:
        raise ConfigError(f"{out}: the run's noise was calibrated to a total budget over {saved.rounds} rounds; --rounds cannot change")
    if changed:
        what = ", ".join(f"{k} {b.get(k)!r} (saved: {a[k]!r})" for k in changed)
        raise ConfigError(f"cannot resume {out} with other settings: {what}; a resumed run may change only {', '.join(RESUME_MAY_CHANGE)}")


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
    """Run the (private) federated ADMM of docs/learning.md and return its :class:`LearnResult`.

    ``data``: a :class:`Dataset` (raw or already preprocessed) instead of ``config.dataset``. ``out``: the
    output directory (refused if it holds a run, unless ``resume`` or ``overwrite``). ``progress`` is called
    with every round's history row; ``observe`` with what the coordinator receives each round (the audit).
    ``reference``: also solve the centralized problem (needs ``config.evaluate``). ``parts``: each client's sample
    indices into ``data`` (default: ``config.split``).
    """
    from threadpoolctl import threadpool_limits

    config.validate()
    if resume and out is None:
        raise ConfigError("resume needs the output directory of the run")
    # one BLAS thread: a client's products are small (400 × 784 × 10 on the MNIST subset: 0.57 ms on one
    # thread, 0.98 ms on two; benchmarks/learning.py), and clients are the unit of parallelism
    with threadpool_limits(limits=config.blas_threads):
        if out is None:
            return _run(config, data, None, False, progress, status, reference, observe, parts)
        out_dir = ensure_dir(out)
        with DirectoryLock(out_dir):
            prepare_run_dir(out_dir, overwrite=overwrite, resume=resume)
            return _run(config, data, out_dir, resume, progress, status, reference, observe, parts)


def _load_state(out: Path) -> dict:
    path = out / "checkpoint" / "state.json"
    if not path.is_file():
        raise ConfigError(f"{out} has no checkpoint to resume from ({path} is missing)")
    try:
        state = json.loads(path.read_text())
        int(state["round"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} is not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    return state


def _save_checkpoint(out: Path, coordinator: Coordinator, clients: list[ClientAgent], history: list[dict]) -> None:
    """Each client's state first (its own files), then the coordinator's state.json naming the round, then
    older client files are pruned: a crash at any point leaves a complete earlier checkpoint."""
    d = out / "checkpoint"
    d.mkdir(parents=True, exist_ok=True)
    t = coordinator.round
    for c in clients:
        c.save(d, t)
    np.savez(d / f"coordinator_round_{t}.npz", w=coordinator.w, lam=coordinator.lam, released=coordinator.released)
    coord_rows, eval_rows = _split_rows(history)  # the two views stay apart in the checkpoint too
    for name, doc in (("evaluation", {"round": t, "history": eval_rows}),  # before the state that names the round
                      ("state", {"round": t, "rho": coordinator.rho, "history": coord_rows})):
        tmp = d / f"{name}.json.tmp"
        tmp.write_text(json.dumps(jsonable(doc)))
        tmp.replace(d / f"{name}.json")
    for old in d.iterdir():
        if old.suffix in (".npz", ".json") and "_round_" in old.name and not old.stem.endswith(f"_round_{t}"):
            old.unlink(missing_ok=True)


def _split_rows(history: list[dict]) -> tuple[list[dict], list[dict]]:
    """The history rows as the coordinator's columns and as ``round`` + the evaluation's."""
    coord = [{c: row[c] for c in COORDINATOR_COLUMNS if c in row} for row in history]
    ev = [{c: v for c, v in row.items() if c == "round" or c not in COORDINATOR_COLUMNS} for row in history]
    return coord, ev


def _checkpoint_history(out: Path, state: dict) -> list[dict]:
    """The checkpointed history, both views joined (a checkpoint of an earlier version has whole rows in state.json)."""
    path = out / "checkpoint" / "evaluation.json"
    ev: list[dict] = []
    if path.is_file():
        try:
            ev = list(json.loads(path.read_text())["history"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path} is not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    by_round = {int(row["round"]): row for row in ev}
    return [{**by_round.get(int(row["round"]), {}), **row} for row in state["history"]]


def _load_checkpoint(out: Path, state: dict, coordinator: Coordinator, clients: list[ClientAgent]) -> None:
    d = out / "checkpoint"
    t = int(state["round"])
    with np.load(d / f"coordinator_round_{t}.npz", allow_pickle=False) as npz:
        coordinator.load_state_dict({"w": npz["w"], "lam": npz["lam"], "released": npz["released"], "rho": state["rho"], "round": t})
    for c in clients:
        c.load(d, t)


def _append_history(out: Path, row: dict) -> None:
    """One line per round in each view's history.csv (never one file with both)."""
    append_history_views(out, row, COORDINATOR_COLUMNS, HISTORY_COLUMNS)


def _start_files(out: Path, config: LearnConfig, history: list[dict]) -> None:
    (out / "config.json").write_text(json.dumps(jsonable(config.to_dict()), indent=2) + "\n")
    if (out / "history.csv").is_file() or (out / "summary.json").is_file():  # an earlier version's mixed files
        for name in LEGACY_FILES:
            (out / name).unlink(missing_ok=True)
    save_history_views(out, pd.DataFrame(history, columns=HISTORY_COLUMNS), COORDINATOR_COLUMNS)
    for stale in ("failure.txt", f"{COORDINATOR_VIEW}/summary.json", f"{EVALUATION_VIEW}/summary.json"):
        (out / stale).unlink(missing_ok=True)


def _run(config, data, out_dir, resume, progress, status, reference, observe, parts=None) -> LearnResult:
    say = status or (lambda msg: None)
    seen = observe or (lambda updates: None)
    t_setup = time.perf_counter()
    state = None
    if resume:
        state = _load_state(out_dir)
        saved = LearnConfig.from_dict(json.loads((out_dir / "config.json").read_text()), source=str(out_dir / "config.json"))
        _check_resume(saved, config, out_dir)
        if int(state["round"]) > config.rounds:
            raise ConfigError(f"{out_dir}: the run already has {state['round']} rounds; give more than that to extend it")
    say(f"loading {config.dataset}")
    prepared = prepare_data(config, data, parts)
    d = prepared.data
    say(f"{prepared.n_train} training samples, {len(d.y_test)} test samples, {d.n_features} features, {d.n_classes} classes, "
        f"{config.clients} clients ({config.split})")
    central = None
    if reference and config.evaluate:
        say("centralized reference solve (L-BFGS-B on the pooled data, same box and ℓ2 term)")
        central = centralized_reference(config, prepared)
    clients = build_clients(config, prepared)
    n = clients[0].n
    coordinator = Coordinator(n, [np.arange(n)] * config.clients, config.penalty(1))
    pooled = SoftmaxLoss(d.X_train, d.y_train, d.n_classes, prepared.n_train, reg=config.reg) if config.evaluate else None
    history: list[dict[str, Any]] = []
    start = 1
    if resume:
        _load_checkpoint(out_dir, state, coordinator, clients)
        history = _checkpoint_history(out_dir, state)
        _start_files(out_dir, config, history)
        start = coordinator.round + 1
    else:
        initial = [c.initialize() for c in clients]
        seen(initial)
        coordinator.start(initial)
        if out_dir is not None:
            _start_files(out_dir, config, history)
    setup_s = time.perf_counter() - t_setup
    run_start = time.perf_counter()
    stopped = "rounds"
    with deferred_stop():
        for t in range(start, config.rounds + 1):
            t0 = time.perf_counter()
            coordinator.rho = rho = config.penalty(t)  # ρ_t: data-independent schedule
            try:
                msgs = coordinator.broadcast()
                updates = [c.step(m) for c, m in zip(clients, msgs, strict=True)]
                seen(updates)
                res = coordinator.receive(updates)
            except (PowerDPError, FloatingPointError) as exc:
                partial = _result(config, prepared, coordinator, clients, history, central, setup_s, None, "failed")
                if out_dir is not None:
                    partial.save(out_dir)
                    (out_dir / "failure.txt").write_text(f"round {t}: {exc}\n")
                raise LearnFailed(f"run stopped in round {t}: {exc}", partial) from exc
            wall = time.perf_counter() - t0
            spend = t % config.evaluate_every == 0 or t == config.rounds or not history
            row = _row(t, config, coordinator, clients, pooled if spend else None, d, res, rho, wall, spend, history)
            history.append(row)
            if out_dir is not None:
                _append_history(out_dir, row)
            if progress is not None:
                progress(row)
            if out_dir is not None and config.checkpoint_every and (t % config.checkpoint_every == 0 or t == config.rounds):
                _save_checkpoint(out_dir, coordinator, clients, history)
            if stop_requested() is not None and t < config.rounds:
                if out_dir is not None and config.checkpoint_every:
                    _save_checkpoint(out_dir, coordinator, clients, history)
                partial = _result(config, prepared, coordinator, clients, history, central, setup_s, time.perf_counter() - run_start, "interrupted")
                if out_dir is not None:
                    partial.save(out_dir)
                where = f"; history and checkpoint in {out_dir} (powerdp learn --resume {out_dir} continues)" if out_dir else ""
                raise Interrupted(f"interrupted after round {t} of {config.rounds}{where}", partial)
    result = _result(config, prepared, coordinator, clients, history, central, setup_s, time.perf_counter() - run_start, stopped)
    result.summary["resumed_from"] = start - 1 if resume else None
    if out_dir is not None:
        result.save(out_dir)
    return result


def _row(t, config, coordinator, clients, pooled, d, res, rho, wall, spend=True, history=()) -> dict[str, Any]:
    """One history row. The ledger's figure (an accountant call) and the model's evaluation are computed every
    ``evaluate_every`` rounds and at the last; in between the spend is carried forward and the rest is NaN."""
    diags = [c.diagnostics(evaluate=False, privacy=spend) for c in clients]
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


def _result(config, prepared, coordinator, clients, history, central, setup_s, run_s, stopped) -> LearnResult:
    frame = pd.DataFrame(history, columns=HISTORY_COLUMNS)
    d = prepared.data
    diags = [c.diagnostics(evaluate=False) for c in clients]
    w = global_model(coordinator) if coordinator.round > 0 else np.zeros(clients[0].n)
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
            else (clients[0].grad_sensitivity.note if clients[0].grad_sensitivity is not None else None)
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
        "wall_s": float(frame["wall_s"].sum()) if run_s is None else float(run_s),
        "round_ms": float(1e3 * frame["wall_s"].median()) if len(frame) else None,
        "setup_s": float(setup_s),
        "backend": config.backend,
        "local_solver": config.local_solver,
    }
    if central and summary["final_objective"] is not None and np.isfinite(summary["final_objective"]):
        summary["relative_gap_to_centralized"] = (summary["final_objective"] - central["objective"]) / abs(central["objective"])
    return LearnResult(config=config, history=frame, model=w.reshape(d.n_features, d.n_classes), summary=summary, privacy=privacy)
