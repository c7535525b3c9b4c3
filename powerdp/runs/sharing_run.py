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
    DIR/checkpoint/                state.npz/json (coordinator) + agent_M_round_T.npz/json (the history is in the views)

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
from ..engine.sharing.hosts import SHARING_BACKENDS, launch_sharing, load_state, make_sharing_backend, save_state
from ..errors import ConfigError, PowerDPError, SolverError
from ..files.jsonable import jsonable
from .directory import DirectoryLock, ensure_dir, prepare_run_dir
from .stopping import deferred_stop, stop_requested
from .views import (
    COORDINATOR_VIEW,
    EVALUATION_VIEW,
    append_history_views,
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
    checkpoint_every: int = 0  # 0: only at the end when an output directory is given
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


@dataclass
class SharingResult:
    history: pd.DataFrame
    summary: dict
    z: np.ndarray
    y: np.ndarray
    total: np.ndarray
    diagnostics: dict

    def save(self, out: str | Path) -> None:
        """The history and the summary, each in the two views (module docstring)."""
        out = Path(out)
        _write_history(out, self.history)
        self.save_summary(out)

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


def _append_history(out: Path, row: dict, header: bool) -> None:
    """One line per round in each view's history.csv (repr floats: round-trip exact)."""
    append_history_views(out, row, COORDINATOR_COLUMNS, list(row), header=header)


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


def _save_checkpoint(out: Path, coordinator: SharingCoordinator, backend, history: list[dict]) -> None:
    d = out / "checkpoint"
    d.mkdir(parents=True, exist_ok=True)
    backend.call("save", (str(d), coordinator.round))
    save_state(d / "state", coordinator.state_dict())  # the history is in history.csv, one line per round
    backend.call("prune", (str(d), coordinator.round))


def _run(problem: SharingProblem, settings: SharingSettings, out: Path | None, resume: bool, progress, observe) -> SharingResult:
    seen = observe or (lambda updates: None)
    doc = _config_doc(problem, settings)
    n_agents = len(problem.specs)
    coordinator = SharingCoordinator(problem.zstep, n_agents, settings.rho, settings.tau, settings.rho_schedule, settings.adapt_rounds, settings.relaxation)
    history: list[dict] = []
    if resume:
        _check_resume(out, doc)
        main = load_state(out / "checkpoint" / "state")
    t_setup = time.perf_counter()
    backend = make_sharing_backend(settings.backend, problem.specs, settings)
    try:
        if resume:
            coordinator.load_state_dict(main)
            try:  # the rounds up to the checkpoint (a killed run may have logged later ones)
                saved = _read_saved_history(out)
            except ConfigError as exc:
                raise ConfigError(f"cannot resume {out}: {exc}") from None
            saved = saved[saved["round"] <= coordinator.round]
            if len(saved) != coordinator.round:
                raise ConfigError(f"cannot resume {out}: {COORDINATOR_VIEW}/history.csv has {len(saved)} of the "
                                  f"{coordinator.round} checkpointed rounds")
            history = saved.to_dict("records")
            backend.call("restore", (str(out / "checkpoint"), coordinator.round))
            if coordinator.round > settings.rounds:
                raise ConfigError(f"{out}: the run already has {coordinator.round} rounds; rounds = {settings.rounds} cannot shorten it")
        else:
            initial = backend.call("init")
            seen(initial)
            coordinator.start(initial)
        if out is not None:
            (out / "config.json").write_text(json.dumps(doc, indent=2))
            for name in ("history.csv", "summary.json"):  # an earlier version's mixed files, rewritten in the views
                (out / name).unlink(missing_ok=True)
            for view in (COORDINATOR_VIEW, EVALUATION_VIEW):
                (out / view / "summary.json").unlink(missing_ok=True)  # of an earlier attempt; written when this one ends
                if not history:
                    (out / view / "history.csv").unlink(missing_ok=True)
            if history:
                _write_history(out, pd.DataFrame(history))
        setup_s = time.perf_counter() - t_setup
        stopped = "rounds"
        diags: dict = {}
        with deferred_stop():
            for t in range(coordinator.round + 1, settings.rounds + 1):
                t0 = time.perf_counter()
                rho = coordinator.rho
                try:
                    updates = backend.call("step", coordinator.broadcast())
                    seen(updates)
                    res = coordinator.receive(updates)
                except (PowerDPError, FloatingPointError, ValueError) as exc:  # a failed step, a lost host, a NaN release
                    if out is not None:
                        _write_history(out, pd.DataFrame(history))
                        (out / "failure.txt").write_text(f"round {t}: {exc}\n")
                    raise RunStopped(f"sharing run stopped in round {t}: {exc}") from exc
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
                history.append(row)
                if out is not None:  # one line per round: a killed run keeps its history
                    _append_history(out, row, header=len(history) == 1)
                if progress is not None:
                    progress(row)
                if out is not None and settings.checkpoint_every and t % settings.checkpoint_every == 0:
                    _save_checkpoint(out, coordinator, backend, history)
                if stop_requested():
                    stopped = "interrupted"
                    break
                if settings.tol > 0 and res.primal <= settings.tol and res.dual <= settings.tol:
                    stopped = "converged"
                    break
        if out is not None:
            _save_checkpoint(out, coordinator, backend, history)
        if problem.evaluate is not None and not diags:
            diags = backend.call("diag")
    finally:
        backend.close()
    hist = pd.DataFrame(history)
    final_eval = problem.evaluate(coordinator, diags) if problem.evaluate is not None else {}
    rounds_done = coordinator.round
    summary = {
        "problem": problem.name, "config": problem.config, "settings": asdict(settings), "stopped": stopped,
        "rounds": rounds_done, "setup_s": setup_s,
        "run_s": float(hist["wall_s"].sum()) if len(hist) else 0.0,
        "coordinator_view": {
            "primal_residual": float(hist["primal_residual"].iloc[-1]) if len(hist) else None,
            "dual_residual": float(hist["dual_residual"].iloc[-1]) if len(hist) else None,
            "dual": coordinator.y, "ledger": {a: gaussian_ledger(settings.noise_multiplier, rounds_done, settings.delta) for a in range(n_agents)},
        },
        "evaluation": final_eval,
    }
    result = SharingResult(history=hist, summary=summary, z=coordinator.z, y=coordinator.y, total=coordinator.total, diagnostics=diags)
    if out is not None:
        result.save(out)
    if stopped == "interrupted":
        from ..errors import Interrupted

        raise Interrupted(f"stopped after round {rounds_done}" + (f"; resume with --resume {out}" if out else ""), result)
    return result
