"""Run a sharing ADMM: agents on a backend, the coordinator loop, history, files, resume (docs/sharing.md).

:func:`run_sharing` is the engine every sharing application uses (the DC
market, vertical learning). An application gives a :class:`SharingProblem`:
the coupling (a z-step), one :class:`~powerdp.engine.sharing.hosts.SharingAgentSpec`
per agent, its public configuration (for ``config.json`` and resume checks),
and an ``evaluate`` callable — the simulation's evaluation, which sees every
agent's diagnostics and is kept apart from the coordinator's view.

An output directory holds the run's two views apart, as a power-flow run's does (docs/privacy.md, "What a
deployment publishes"; powerdp/runs/views.py)::

    DIR/config.json                the problem's public configuration and the settings
    DIR/coordinator_view/          what the coordinator holds and a deployment would publish:
        history.csv                per round: residuals, ρ, ε spent, the coordinator's round time (COORDINATOR_COLUMNS)
        summary.json               settings, final residuals, the dual (prices), the ledger per agent (COORDINATOR_KEYS)
    DIR/simulation_evaluation/     what only a simulation holding every agent's data can compute (never published):
        history.csv                per round: the agents' solver work, the evaluation's columns (prefixed ``eval_``)
        summary.json               ``evaluation``: the application's final figures (cost, test log-loss, ...)
    DIR/checkpoint/                state.npz/json (the coordinator's; the history is in the views)
    DIR/agents.private/agent_M/    agent M's own checkpoint/round_T.npz/json (0700, files 0600), never beside the coordinator's

A result's ``history`` and ``summary`` in memory hold both views (``summary["coordinator_view"]``,
``summary["evaluation"]``), as ``--json`` writes them.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..engine.sharing.coordinator import SharingCoordinator
from ..engine.sharing.hosts import SHARING_BACKENDS, flat_state, launch_sharing, make_sharing_backend, nested_state
from ..errors import ConfigError, PowerDPError, SolverError
from ..files.jsonable import jsonable
from .directory import DirectoryLock, ensure_dir, prepare_run_dir
from .loop import Rounds, run_rounds
from .record import RunRecord
from .views import (
    COORDINATOR_VIEW,
    read_history,
    save_history_views,
    save_summary_views,
)

__all__ = ["SharingSettings", "SharingProblem", "SharingResult", "run_sharing", "gaussian_ledger", "RESUME_MAY_CHANGE_SHARING",
           "COORDINATOR_COLUMNS", "COORDINATOR_KEYS", "HISTORY_ORDER"]

#: history columns of the coordinator's view (an allow-list: computed from the contributions it receives, the
#: ledger and its own clock); every other column (the agents' solver work, ``eval_*``) is the simulation's evaluation
COORDINATOR_COLUMNS = ["round", "primal_residual", "dual_residual", "rho", "epsilon_spent", "wall_s"]
#: the order of a history's columns (the ``eval_*`` columns follow)
HISTORY_ORDER = ["round", "primal_residual", "dual_residual", "rho", "epsilon_spent", "solves", "iterations", "agent_s", "wall_s"]
#: summary keys of the coordinator's view (an allow-list); any other key (``evaluation``) is the simulation's
COORDINATOR_KEYS = ("problem", "config", "settings", "stopped", "rounds", "setup_s", "run_s", "coordinator_view")

class RunStopped(SolverError):
    """A sharing run failed in a round (exit status 1); the output directory keeps its history."""


RESUME_MAY_CHANGE_SHARING = ("rounds", "backend", "workers", "rank_timeout", "checkpoint_every", "tol")


@dataclass(frozen=True)
class SharingSettings:
    """How a sharing run runs (the problem's own settings live in :class:`SharingProblem`)."""

    rounds: int = 200
    rho: float = 1.0
    tau: float | None = None  # None: (M − 1)ρ
    rho_schedule: str = "constant"  # or "adaptive" (residual balancing during the first adapt_rounds rounds)
    adapt_rounds: int = 1000
    relaxation: float = 1.0  # over-relaxation α ∈ (0, 2) (docs/sharing.md)
    tol: float = 0.0  # stop when the primal and dual residuals both fall below tol (0: run all rounds)
    backend: str = "serial"
    workers: int | None = None
    checkpoint_every: int | None = None  # K rounds; None: by time (runs/loop.py); 0: only at the end (with an output directory)
    rank_timeout: float = 120.0
    # privacy (public): Gaussian output noise with σ = noise_multiplier × sensitivity per release, δ per run
    noise_multiplier: float | None = None
    delta: float = 1e-5

    def validate(self) -> None:
        if not isinstance(self.rounds, int) or self.rounds < 1:
            raise ConfigError(f"rounds must be a positive integer, got {self.rounds!r}")
        if not (isinstance(self.rho, (int, float)) and math.isfinite(self.rho) and self.rho > 0):
            raise ConfigError(f"rho must be a positive number, got {self.rho!r}")
        if self.tau is not None and not (math.isfinite(self.tau) and self.tau >= 0):
            raise ConfigError(f"tau must be a non-negative number, got {self.tau!r}")
        if self.backend not in SHARING_BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}; choose one of {', '.join(SHARING_BACKENDS)}")
        if self.noise_multiplier is not None and not self.noise_multiplier > 0:
            raise ConfigError(f"noise multiplier must be positive, got {self.noise_multiplier!r}")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta must lie in (0, 1), got {self.delta!r}")


@dataclass
class SharingProblem:
    name: str
    zstep: Any
    specs: list
    config: dict = field(default_factory=dict)  # public, JSON
    evaluate: Callable[[SharingCoordinator, dict], dict] | None = None
    #: the input files the problem was made from (role → runs.inputs entry), recorded with their hashes
    inputs: dict = field(default_factory=dict)
    #: the command that resumes a run of this problem (messages: ``powerdp run --resume DIR``)
    command: str = "powerdp run"
    #: the neighbouring relation a private run's agents protect ({"name", "text", ...}: the privacy receipt's)
    relation: dict = field(default_factory=dict)


@dataclass
class SharingResult:
    history: pd.DataFrame
    summary: dict
    z: np.ndarray
    y: np.ndarray
    total: np.ndarray
    diagnostics: dict
    #: each private agent's ledger report (public); empty for a non-private run
    privacy: dict = field(default_factory=dict)
    #: the privacy receipt's run and relation parts (:func:`runs.receipt.write_receipt`), None when not private
    receipt: dict | None = None

    def save(self, out: str | Path) -> None:
        """The history and the summary, each in the two views (module docstring), and a private run's receipt."""
        out = Path(out)
        _write_history(out, self.history)
        self.save_summary(out)
        if self.receipt is not None and self.privacy:
            from .receipt import receipt_units, write_receipt

            write_receipt(out, self.receipt["application"], self.receipt["run"], self.receipt["relation"],
                          receipt_units(self.receipt["unit"], self.privacy))

    def save_summary(self, out: str | Path) -> None:
        save_summary_views(out, self.summary, COORDINATOR_KEYS)


def gaussian_ledger(noise_multiplier: float | None, steps: int, delta: float) -> dict:
    """Per agent: ``steps`` adaptive Gaussian releases with σ/Δ₂ = noise_multiplier, composed exactly (GDP)."""
    if noise_multiplier is None:
        return {"mechanism": "none", "steps": steps, "epsilon": 0.0, "delta": 0.0}
    from ..privacy.accounting import _exact_gaussian_epsilon

    return {
        "mechanism": "gaussian", "steps": steps, "noise_multiplier": noise_multiplier, "delta": delta,
        "epsilon": _exact_gaussian_epsilon(noise_multiplier, steps, delta) if steps else 0.0,
        "accountant": "analytic Gaussian composition (dp-accounting get_epsilon_gaussian)",
    }


def _write_history(out: Path, history: pd.DataFrame) -> None:
    """Each view's history.csv, written whole (never one file with both)."""
    if not len(history.columns):
        history = pd.DataFrame(columns=HISTORY_ORDER)
    save_history_views(out, history, COORDINATOR_COLUMNS)


def _read_saved_history(out: Path) -> pd.DataFrame:
    """The history in the run's files, both views joined; an earlier version's one mixed history.csv too."""
    return read_history(out, HISTORY_ORDER)


def _config_doc(problem: SharingProblem, settings: SharingSettings) -> dict:
    return jsonable({"kind": "sharing", "problem": problem.name, "config": problem.config, "settings": asdict(settings)})


def _check_resume(out: Path, doc: dict) -> None:
    try:
        saved = json.loads((out / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{out}/config.json is missing or unreadable: {exc}") from None
    changed = [k for k in ("problem", "config") if saved.get(k) != doc.get(k)]
    a, b = saved.get("settings", {}), doc["settings"]
    changed += [f"settings.{k}" for k in a if k not in RESUME_MAY_CHANGE_SHARING and a[k] != b.get(k)]
    if changed:
        raise ConfigError(f"cannot resume {out} with other settings ({', '.join(changed)}); a resumed run may change only "
                          f"{', '.join(RESUME_MAY_CHANGE_SHARING)}")


def run_sharing(
    problem: SharingProblem,
    settings: SharingSettings,
    out: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: Callable[[dict], None] | None = None,
    observe: Callable[[list], None] | None = None,
) -> SharingResult | None:
    """Run sharing ADMM (docs/sharing.md). Under ``backend="mpi"`` call it on every rank: rank 0 returns
    the result, the others host agents and return None. ``observe`` gets every round's contributions
    (round 0 included): exactly what the coordinator receives (audit hook)."""
    settings.validate()
    return launch_sharing(settings, lambda: _locked(problem, settings, out, resume, overwrite, progress, observe))


def _locked(problem, settings, out, resume, overwrite, progress, observe):
    if out is None:
        if resume:
            raise ConfigError("resume needs the output directory of the run")
        return _run(problem, settings, None, False, progress, observe)
    out = Path(out)
    if resume and not out.is_dir():
        raise ConfigError(f"{out} holds no run to resume (no such directory)")
    ensure_dir(out)
    with DirectoryLock(out):
        prepare_run_dir(out, overwrite=overwrite, resume=resume)
        return _run(problem, settings, out, resume, progress, observe)


def _run(problem: SharingProblem, settings: SharingSettings, out: Path | None, resume: bool, progress, observe) -> SharingResult:
    seen = observe or (lambda updates: None)
    doc = _config_doc(problem, settings)
    n_agents = len(problem.specs)
    coordinator = SharingCoordinator(problem.zstep, n_agents, settings.rho, settings.tau, settings.rho_schedule, settings.adapt_rounds, settings.relaxation)
    record = RunRecord(out, COORDINATOR_COLUMNS, command=problem.command) if out is not None else None
    history: list[dict] = []
    if resume:
        _check_resume(out, doc)
        record.verify_inputs("resume")  # the files the problem was made from, unchanged (an edited case is refused)
        main, history = record.load_checkpoint()
    t_setup = time.perf_counter()
    backend = make_sharing_backend(settings.backend, problem.specs, settings)
    try:
        if resume:
            coordinator.load_state_dict(nested_state(main))
            if history is None:  # an earlier version's checkpoint: the rounds up to it from history.csv
                history = _saved_history(out, coordinator.round)
            backend.call("restore", (str(out), coordinator.round))  # each agent from OUT/agents.private/agent_M
            if coordinator.round > settings.rounds:
                raise ConfigError(f"{out}: the run already has {coordinator.round} rounds; rounds = {settings.rounds} cannot shorten it")
        else:
            initial = backend.call("init")
            seen(initial)
            coordinator.start(initial)
        if record is not None:
            record.write_config(doc)
            record.start(history, legacy=("history.csv", "summary.json"))  # an earlier version's mixed files
            if not resume and problem.inputs:
                record.record_inputs(problem.inputs)
            if not resume and settings.noise_multiplier is not None:  # each agent journals its releases (privacy/journal.py)
                backend.call("journal", str(out))
        setup_s = time.perf_counter() - t_setup
        diags: dict = {}

        def step(t: int) -> dict:
            nonlocal diags
            t0 = time.perf_counter()
            rho = coordinator.rho
            updates = backend.call("step", coordinator.broadcast())
            seen(updates)
            res = coordinator.receive(updates)
            ledger = gaussian_ledger(settings.noise_multiplier, t, settings.delta)
            row = {
                "round": t, "primal_residual": res.primal, "dual_residual": res.dual, "rho": rho,
                "epsilon_spent": ledger["epsilon"],
            }
            if problem.evaluate is not None:  # the simulation's evaluation: agent-private figures
                stats = list(backend.call("stats").values())
                row.update({
                    "solves": int(sum(s.solves for s in stats)),
                    "iterations": int(sum(s.iterations for s in stats)),
                    "agent_s": float(max(s.wall_s for s in stats)),
                })
            row["wall_s"] = time.perf_counter() - t0
            if problem.evaluate is not None:
                diags = backend.call("diag")
                row.update({f"eval_{k}": v for k, v in problem.evaluate(coordinator, diags).items()})
            return row

        def partial(rows, stopped):
            if stopped != "failed" and problem.evaluate is not None and not diags:
                diags.update(backend.call("diag"))
            result = _result(problem, settings, coordinator, rows, stopped, setup_s, diags if stopped != "failed" else {})
            if settings.noise_multiplier is not None and stopped != "failed":  # the agents' ledgers, for the receipt
                result.privacy = backend.call("privacy") or {}
                result.receipt = _receipt(problem, settings)
            return result

        def checkpoint(rows):
            t = coordinator.round
            # each agent into OUT/agents.private/agent_M (0700/0600), then the coordinator's state
            record.save_checkpoint(flat_state(coordinator.state_dict()), rows, t, agents=lambda d: backend.call("save", (str(out), t)),
                                   prune=lambda d: backend.call("prune", (str(out), t)))

        rounds = Rounds(
            step=step, partial=partial, checkpoint=checkpoint,
            failed=lambda t, detail, result, exc: RunStopped(f"sharing run stopped in round {t}: {detail}"),
            converged=(lambda row: row["primal_residual"] <= settings.tol and row["dual_residual"] <= settings.tol)
            if settings.tol > 0 else None,
            failures=(PowerDPError, FloatingPointError, ValueError),  # a failed step, a lost host, a NaN release
            checkpoint_first=settings.noise_multiplier is not None,
        )
        # a checkpoint every checkpoint_every rounds (None: by time), and always after the last (0: only then)
        every = settings.rounds if settings.checkpoint_every == 0 else settings.checkpoint_every
        stopped = run_rounds(rounds, coordinator.round + 1, settings.rounds, history, record, every, progress, resume)
        stopped = "converged" if stopped == "tolerance" else stopped
        result = partial(history, stopped)
    finally:
        backend.close()
    if out is not None:
        result.save(out)
    return result


def _receipt(problem: SharingProblem, settings: SharingSettings) -> dict:
    """The privacy receipt's parts a sharing run knows: the problem, its settings and its neighbouring relation."""
    unit = "party" if problem.name.startswith("vertical") else "agent"
    return {"application": problem.name, "unit": unit, "relation": problem.relation or {"name": "unstated"},
            "run": {"algorithm": "gaussian output perturbation (sharing)", "noise_source": "seeded" if problem.config.get("seeded") else "secret",
                    "private": True, "noise_multiplier": settings.noise_multiplier, "target_delta": settings.delta,
                    "rounds": settings.rounds}}


def _saved_history(out: Path, rounds: int) -> list[dict]:
    """The rounds up to the checkpoint from the views' history.csv (a killed run may have logged later ones)."""
    try:
        saved = _read_saved_history(out)
    except ConfigError as exc:
        raise ConfigError(f"cannot resume {out}: {exc}") from None
    saved = saved[saved["round"] <= rounds]
    if len(saved) != rounds:
        raise ConfigError(f"cannot resume {out}: {COORDINATOR_VIEW}/history.csv has {len(saved)} of the {rounds} checkpointed rounds")
    return saved.to_dict("records")


def _result(problem, settings, coordinator, history, stopped, setup_s, diags) -> SharingResult:
    hist = pd.DataFrame(history)
    final_eval = problem.evaluate(coordinator, diags) if (problem.evaluate is not None and diags) else {}
    rounds_done = coordinator.round
    summary = {
        "problem": problem.name, "config": problem.config, "settings": asdict(settings), "stopped": stopped,
        "rounds": rounds_done, "setup_s": setup_s,
        "run_s": float(hist["wall_s"].sum()) if len(hist) else 0.0,
        "coordinator_view": {
            "primal_residual": float(hist["primal_residual"].iloc[-1]) if len(hist) else None,
            "dual_residual": float(hist["dual_residual"].iloc[-1]) if len(hist) else None,
            "dual": coordinator.y, "ledger": {a: gaussian_ledger(settings.noise_multiplier, rounds_done, settings.delta)
                                              for a in range(len(problem.specs))},
        },
        "evaluation": final_eval,
    }
    return SharingResult(history=hist, summary=summary, z=coordinator.z, y=coordinator.y, total=coordinator.total, diagnostics=diags)
