"""Run the distributed solve: the plan (:mod:`.plan`) → agents on a backend → the shared round loop → RunResult.

:func:`run_distributed` is the one entry point used by the CLI, the sweeps
and notebooks. The rounds run in :func:`powerdp.runs.loop.run_rounds` and the files are those of
:class:`powerdp.runs.record.RunRecord`: it checkpoints every ``config.checkpoint_every`` rounds into
the output directory, so an interrupted or failed run keeps its history and
can continue with ``resume=True`` (``powerdp run --resume DIR``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ...engine.backends import launch, make_backend
from ...engine.consensus.coordinator import Coordinator
from ...engine.consensus.messages import ZoneUpdate
from ...errors import ConfigError, Interrupted, PowerDPError
from ...files.atomic import atomic_write
from ...grid.network import Network
from ...grid.partition import Partition
from ...opf.objectives import OBJECTIVES
from ...runs.directory import DirectoryLock, ensure_dir, prepare_run_dir
from ...runs.inputs import case_entry, file_entry, partition_entry
from ...runs.loop import Rounds, run_rounds
from ...runs.record import RunRecord
from ...runs.views import EVALUATION_VIEW
from .config import RunConfig
from .operator_view import evaluate_implemented, evaluation_line, implement_zones
from .plan import RunPlan, plan_run
from .result import LEGACY_FILES, OLD_HISTORY_NAMES, RunResult
from .run_summary import add_zone_times, privacy_labels, run_result, zone_stats

log = logging.getLogger(__name__)

__all__ = ["run_distributed", "RunFailed", "privacy_labels"]


class RunFailed(PowerDPError):
    """A run stopped on an error; ``result`` holds the history up to the failure."""

    exit_status = 1

    def __init__(self, message: str, result: RunResult | None, cause: BaseException):
        super().__init__(message)
        self.result = result
        self.cause = cause


def run_distributed(
    config: RunConfig,
    network: Network | None = None,
    partition: Partition | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    progress: Callable[[dict[str, Any]], None] | None = None,
    reference: bool = True,
    overwrite: bool = False,
    status: Callable[[str], None] | None = None,
    ac_check: bool = False,
    observe: Callable[[list[ZoneUpdate]], None] | None = None,
    ac_evaluation: bool = True,
    _zone_layout: str | None = None,
) -> RunResult | None:
    """Run the (private) distributed ADMM of docs/algorithm.md and return its :class:`RunResult`.

    With ``config.backend == "mpi"`` call it on every rank: rank 0 returns the
    result, the other ranks host agents and return ``None``.

    Parameters
    ----------
    config: the run configuration.
    network, partition: pass already-loaded objects, else they come from ``config``.
    out: output directory (results, checkpoints); required for ``resume``. A directory
        that already holds a run is refused unless ``resume`` or ``overwrite``; it is
        locked while the run writes to it.
    resume: continue from the last checkpoint in ``out``; settings that change the
        results must match the saved run (:data:`RESUME_MAY_CHANGE` may differ).
    progress: called after every round with that round's history row.
    reference: also solve the centralized problem to report the gap to it.
    overwrite: replace the run already in ``out``.
    status: called with a short message as each setup stage starts (loading, reference solve...).
    ac_check: run pandapower's AC power flow at the final point (``result.ac_check``,
        ``summary["ac_check"]``; docs/operating_point.md). Needs ``config.evaluate``.
    observe: called with the zones' :class:`ZoneUpdate` messages of every round, round 0 (the initial
        projection) included: exactly what the coordinator receives (``powerdp audit`` records them).
    ac_evaluation: evaluate the implemented dispatch as an operator would (pandapower's AC power flow on the true
        loads, restored when the set-points break a limit; docs/operating_point.md), beside the centralized
        dispatch evaluated the same way: ``summary["implemented"]``, ``summary["implemented_reference"]``. Needs
        ``config.evaluate`` and an objective with costs and balance variables (``cost+shedding``); else skipped.
    _zone_layout: TEST-ONLY: ``"legacy-test-only"`` writes the zones' files where earlier versions did (under
        ``out``, default permissions), for the tests that show the file audit catching it. Never in a real run.

    Each zone keeps its checkpoints, solution and statistics in a private folder of its own (0700, files 0600;
    :mod:`powerdp.files.zone_folders`): ``out/zones.private/zone_P`` in a simulation, ``DEP/zone_P.private/runs/RUN``
    on the zone's own host in a deployment (nothing of a zone under ``out``).

    With ``config.evaluate`` the result holds the final point in physical units
    (``result.generators``, ``.buses``, ``.branches``, ``.zones``), saved as CSVs in ``out``;
    a run on a pandapower network also writes its dispatch into a copy of that network
    (``out/pandapower.json``).
    """
    config.validate()
    if ac_check and not config.evaluate:
        raise ConfigError("the AC check needs the run's final point, which is not evaluated without evaluation "
                          "(--no-evaluation keeps each zone's solution with the zone)")
    # the backend decides how the run starts (under MPI only rank 0 coordinates; docs/contributing.md)
    return launch(
        config, lambda: _locked_run(config, network, partition, out, resume, progress, reference, overwrite, status, ac_check,
                                    observe, _zone_layout, ac_evaluation)
    )


def _locked_run(
    config, network, partition, out, resume, progress, reference, overwrite, status, ac_check=False, observe=None,
    zone_layout=None, ac_evaluation=True,
) -> RunResult:
    if out is None:
        if resume:
            raise ConfigError("resume needs the output directory of the run")
        return _run(plan_run(config, network, partition, None, False, reference, status, zone_layout), progress, status, ac_check,
                    observe, ac_evaluation)
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"output directory {out_dir} is an existing file, not a directory")
    if resume and not out_dir.is_dir():
        raise ConfigError(f"{out_dir} holds no run to resume (no such directory)")
    ensure_dir(out_dir)
    with DirectoryLock(out_dir):  # checked under the lock: a run that just finished there is seen
        prepare_run_dir(out_dir, overwrite=overwrite, resume=resume)
        plan = plan_run(config, network, partition, out_dir, resume, reference, status, zone_layout)
        phase = {"rounds_done": False}
        try:
            return _run(plan, progress, status, ac_check, observe, ac_evaluation, phase)
        except KeyboardInterrupt:
            # a Ctrl-C between rounds is Interrupted already (runs/loop.py); one after the last round (the implemented
            # dispatch, the evaluation, the final files) says what the directory holds and how the run continues
            if phase["rounds_done"] and plan.record.has_checkpoint():
                raise Interrupted(f"interrupted after the last round, before the run's final files were written; "
                                  f"{plan.record.kept()}") from None
            raise


def _checked(observe):
    """A deployment's coordinator takes nothing outside the allow-list of a zone's message."""
    from ...engine.backends.base import WorkerError
    from ...engine.consensus.messages import check_message

    def seen(updates):
        for u in updates:
            try:
                check_message(u)
            except ValueError as exc:
                raise WorkerError(f"zone {u.zone} broke the protocol: {exc}") from None
        observe(updates)

    return seen


def _run(plan: RunPlan, progress, status, ac_check=False, observe=None, ac_evaluation=True, phase=None) -> RunResult:
    """Execute ``plan``: the reference solve, the agents on their backend, the rounds, the final point."""
    say = status or (lambda msg: None)
    seen = observe or (lambda updates: None)
    config, net, part, record = plan.config, plan.network, plan.partition, plan.record
    if config.deployment is not None:
        seen = _checked(seen)
    t_setup = time.perf_counter()
    central = None
    central_solve = None  # the centralized OPF (its dispatch is the operator's reference)
    reference_s = 0.0  # the centralized solve reads every load: the simulation's, kept out of the coordinator's setup time
    if plan.reference:
        say(f"centralized reference solve of {net.name} ({net.n_bus} buses)")
        t_ref = time.perf_counter()
        central_solve = _centralized_reference(net, config)
        central = central_solve.objective if central_solve is not None else None
        reference_s = time.perf_counter() - t_ref
    keys = plan.shared_keys
    history: list[dict[str, Any]] = []
    init_s = 0.0
    coordinator = Coordinator(len(keys), list(plan.zone_maps), config.rho, config.rho_schedule, groups=_key_groups(keys),
                              relaxation=config.relaxation, acceleration=None if config.acceleration == "none" else config.acceleration)
    _compile_kernels(config, say)
    say(f"building {part.n_zones} zone agents ({config.backend} backend)")
    backend = make_backend(config.backend, net, plan.specs, config)
    last_diags: dict[int, Any] = {}  # each zone's latest report: its privacy spend survives a lost host
    zone_times: dict[int, list[float]] = {}  # zone → [solver s, round s] summed over the rounds (evaluation only)
    try:
        # the zones' set-up times and memory: the simulation's evaluation only (a deployment's zones keep theirs)
        setup_times = backend.setup_times() if config.evaluate else {}
        if plan.resume:
            state, saved = record.load_checkpoint()
            coordinator.load_state_dict(state)
            backend.load_checkpoint(plan.folders, coordinator.round)
            history = [_renamed(row) for row in saved]  # checkpoints of older versions
            _start_files(record, config, part, history)  # drop rounds logged after the checkpoint, and a stale failure
            log.info("resuming %s at round %d", record.directory, coordinator.round + 1)
        else:
            say(f"initial projection of {part.n_zones} zones")
            t_init = time.perf_counter()
            initial = backend.initialize()
            seen(initial)
            coordinator.start(initial)
            init_s = time.perf_counter() - t_init
            if record is not None:
                _start_files(record, config, part, history)
                _record_inputs(record, config)
                if config.private and config.checkpoint_every != 0:  # each zone journals its releases (privacy/journal.py)
                    backend.open_journals(plan.folders)  # in its private folder: what a resume must not send again
        start_round = coordinator.round + 1
        setup_s = time.perf_counter() - t_setup - reference_s
        run_start = time.perf_counter()

        def partial(rows, stopped, complete=False):
            run_s = None if stopped == "failed" else time.perf_counter() - run_start
            return run_result(config, net, part, keys, coordinator, rows, backend, central, setup_s, setup_times, complete,
                           run_s=run_s, stopped=stopped, init_s=init_s, last_diags=last_diags, zone_times=zone_times)

        def step(t: int) -> dict[str, Any]:
            t0 = time.perf_counter()
            rho = coordinator.rho if np.ndim(coordinator.rho) == 0 else float(np.median(coordinator.rho))
            updates = backend.step(coordinator.broadcast())
            seen(updates)
            res = coordinator.receive(updates)
            diags = backend.diagnostics()
            last_diags.update((int(d.zone), d) for d in diags)
            add_zone_times(zone_times, diags)
            return {
                "round": t,
                **zone_stats(diags),  # zone-private statistics: the simulation's evaluation only
                "objective": float(sum(d.objective for d in diags)),
                "feasibility": res.primal,
                "dual_residual": res.dual,
                "primal_relative": res.primal_relative,
                "dual_relative": res.dual_relative,
                "max_violation": float(max(d.max_violation for d in diags)),
                "wall_s": time.perf_counter() - t0,
                "epsilon_spent": float(max(d.epsilon_spent for d in diags)),
                "rho": rho,
            }

        def failed(t, detail, result, exc):
            kept = f"; {record.kept()}" if record is not None else ""
            return RunFailed(f"run stopped in round {t}: {detail}{kept}", result, exc)

        def checkpoint(rows):
            # each zone writes its own checkpoint/round_T files into its private folder on its host (plan.folders: never
            # under the coordinator's views); the deployment's run id names those folders: a resumed run finds them again
            record.save_checkpoint({**coordinator.state_dict(), "zone_run": plan.folders.run}, rows, coordinator.round,
                                   agents=lambda d: backend.save_checkpoint(plan.folders),
                                   prune=lambda d: backend.prune_checkpoints(plan.folders, coordinator.round))

        rounds = Rounds(step=step, partial=partial, failed=failed, checkpoint=checkpoint,
                        checkpoint_first=config.private, converged=stopping_rule(config))
        stopped = run_rounds(rounds, start_round, config.rounds, history, record, config.checkpoint_every, progress, plan.resume)
        if phase is not None:
            phase["rounds_done"] = True  # what follows (the implemented dispatch, the final files) resumes from there
        result = partial(history, stopped, complete=True)
        if stopped == "rounds" and config.tolerance > 0 and history and not config.private:  # a private run spends its T rounds
            log.warning("the run reached its round cap (%d) before both relative residuals met the tolerance %g "
                        "(primal %.2e, dual %.2e); --rounds raises the cap", config.rounds, config.tolerance,
                        history[-1].get("primal_relative", float("nan")), history[-1].get("dual_relative", float("nan")))
        if stopped in ("rounds", "tolerance") and OBJECTIVES[config.objective].balance_variables:
            implement_zones(backend, coordinator, result, say)
        result.summary["resumed_from"] = start_round - 1 if plan.resume else None
        if plan.folders is not None and plan.folders.run:  # names each zone's folder DEP/zone_P.private/runs/RUN on its host
            result.summary["zone_run"] = plan.folders.run
        result.summary["reference_s"] = reference_s
        if record is not None and not config.evaluate:
            backend.save_solutions(plan.folders)  # each zone's host writes its own solution into its private folder
    finally:
        backend.close()
    out_dir = record.directory if record is not None else None
    # the two dispatches' AC costs: only an objective with a generation cost has them (shedding's run reports its shed only)
    evaluate_ac = bool(ac_evaluation and result.implemented and net.has_costs and OBJECTIVES[config.objective].priced)
    _final_point(result, net, part, out_dir, ac_check, say, more_follows=evaluate_ac)
    if evaluate_ac:
        say(evaluation_line(net))
        try:
            evaluate_implemented(result, net, part, central_solve)
        except PowerDPError as exc:  # a network pandapower cannot hold: the run's results are kept
            log.warning("the operator's evaluation failed: %s", exc)
            result.summary["implemented_evaluation_error"] = str(exc)
    if out_dir is not None:
        result.save(out_dir)
    return result


def _compile_kernels(config: RunConfig, say: Callable[[str], None]) -> None:
    """The working sets' numba kernels (the active set's, Clarabel's polish), compiled here once per installation with
    a line saying so, before the hosts start: each host then loads them from numba's cache instead of compiling them
    too (side by side, on a 2-core machine, in every worker)."""
    if config.local_solver == "ipopt":
        return
    from ...opf import _active_set_kernel

    if not _active_set_kernel.cached():
        say("compiling the local solver's numba kernels, once per installation (≈ 30 s of CPU; later runs load them "
            "from numba's cache)")
        _active_set_kernel.warm_up()


def stopping_rule(config: RunConfig) -> Callable[[dict[str, Any]], bool] | None:
    """The run's stopping test on a history row (docs/algorithm.md, "Stopping"): both relative residuals at most
    ``config.tolerance`` and, when set, the absolute ones at most ``tol_primal`` / ``tol_dual``; None: every round."""
    tests = []
    if config.tolerance > 0:
        tests.append(lambda row: row["primal_relative"] <= config.tolerance and row["dual_relative"] <= config.tolerance)
    if config.tol_primal > 0 or config.tol_dual > 0:
        tests.append(lambda row: row["feasibility"] <= config.tol_primal and row["dual_residual"] <= config.tol_dual)
    if not tests:
        return None
    return lambda row: all(test(row) for test in tests)


def _key_groups(keys) -> np.ndarray:
    """Each shared variable's group for a per-group penalty: its kind (w, wr, wi, pf, ...), numbered in order of
    first appearance (public: the shared keys are the partition's)."""
    kinds: dict[str, int] = {}
    return np.array([kinds.setdefault(k[0], len(kinds)) for k in keys], dtype=np.int64)


def _renamed(row: dict) -> dict:
    """A history row of a checkpoint with its old column names (``ipopt_s``) renamed to the current ones, and the
    JSON null a NaN was written as (a run without the evaluation has no objective) read back as NaN."""
    out = {k: (np.nan if v is None else v) for k, v in row.items()}
    for old, new in OLD_HISTORY_NAMES.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


#: the centralized references a process has solved (and evaluated), by what decides them: a sweep's runs of one case
#: share one (its solve and its AC evaluation take longer than a private case118 run)
_REFERENCES: dict[tuple, Any] = {}


def _reference_key(net: Network, config: RunConfig) -> tuple:
    import hashlib

    h = hashlib.sha256()
    for a in (net.pd, net.qd, net.pmin, net.pmax, net.qmin, net.qmax, net.cost_c2, net.cost_c1, net.rate_a, net.vmin, net.vmax):
        h.update(np.ascontiguousarray(a, dtype=float).tobytes())
    return (net.name, net.n_bus, net.n_branch, h.hexdigest(), config.objective, config.convention, config.flows,
            config.shedding_weight)


def _centralized_reference(net: Network, config: RunConfig):
    """The centralized optimum of the run's objective (an :class:`~powerdp.opf.centralized.OPFResult`, None when it
    fails), solved with Ipopt whatever the local solver: the reference the product is specified on (Clarabel does
    not reach its tolerances on some large centralized problems, docs/guide.md "Choosing the local solver"). The
    ``shedding`` objective (no generation cost, 0 on a feasible case) is solved with Clarabel first, which reaches it
    in a fraction of Ipopt's time (case118: 0.04 s against 0.2 s, and no cyipopt import), Ipopt when Clarabel does
    not report it solved."""
    from ...opf.centralized import solve_opf

    key = _reference_key(net, config)
    if key in _REFERENCES:
        return _REFERENCES[key]
    res = None
    for solver in ("clarabel", "ipopt") if config.objective == "shedding" else ("ipopt",):
        try:
            res = solve_opf(
                net, objective=config.objective, convention=config.convention, flows=config.flows,
                shedding_weight=config.shedding_weight, solver=solver,
            )
        except PowerDPError as exc:
            if solver != "ipopt":
                continue
            log.warning("centralized reference solve failed: %s", exc)
            return None
        if res.success and (solver == "ipopt" or res.status_name == "Solved"):
            break
    if not res.success:
        log.warning("centralized reference solve failed (%s); the run reports no gap to it", res.status_name)
        return None
    if len(_REFERENCES) > 8:
        _REFERENCES.clear()
    _REFERENCES[key] = res
    return res


def _final_point(result: RunResult, net: Network, part: Partition, out_dir: Path | None, ac_check: bool, say,
                 more_follows: bool = False) -> None:
    """The final point in physical units, the AC check, the dispatch in a pandapower copy; saved first if more follows."""
    from ...opf.tables import dispatch_from_zones, physical_tables

    if not result.config.evaluate or not result.zone_solutions:
        return
    result.dispatch = dispatch_from_zones(net, part.zone_of_bus, result.zone_solutions)
    result.tables = physical_tables(net, result.dispatch, part.zone_of_bus, part.labels)
    if out_dir is not None and (ac_check or net.pandapower_net is not None or more_follows):  # kept before an optional step
        result.save(out_dir)
    if ac_check:
        say("AC check: pandapower power flow at the final point")
        result.check_ac(net)
    if out_dir is not None and net.pandapower_net is not None:
        _write_pandapower_copy(result, net, out_dir)


def _write_pandapower_copy(result: RunResult, net: Network, out_dir: Path) -> None:
    """The dispatch in a copy of the source pandapower network (an extra nobody asked for: skipped with a warning
    when the network holds elements the dispatch cannot be written into)."""
    import pandapower as pp


    try:
        pp_net = result.ac_check.pandapower.net if result.ac_check is not None else result.to_pandapower(net)
    except PowerDPError as exc:
        log.warning("no %s: %s", out_dir / EVALUATION_VIEW / "pandapower.json", exc)
        return
    atomic_write(out_dir / EVALUATION_VIEW / "pandapower.json", lambda fh: fh.write(pp.to_json(pp_net)))


def _start_files(record: RunRecord, config: RunConfig, part: Partition, history: list[dict]) -> None:
    """The run's files as round 1 (or the first resumed round) starts."""
    record.write_config(config.to_dict())
    part.to_csv(record.directory / "partition.csv")
    record.start(history, legacy=LEGACY_FILES)  # an earlier version's mixed files: the history is rewritten in the two views

def _record_inputs(record: RunRecord, config: RunConfig) -> None:
    """inputs.json of a new run: the case and partition files it was made from, and its own partition.csv."""
    out_dir = record.directory
    if config.deployment is not None:  # the coordinator's public files (a zone's private file is its own)
        from .zone_data import public_dir, public_partition_path

        pub = public_dir(config.deployment)
        record.record_inputs({
            "public network": file_entry(pub / "network.npz"),
            "public network (json)": file_entry(pub / "network.json"),
            "public partition": file_entry(public_partition_path(config.deployment)),
            "partition.csv": file_entry(out_dir / "partition.csv"),
        })
        return
    record.record_inputs({
        "case": case_entry(config.case),
        "partition": partition_entry(config.partition),
        "partition.csv": file_entry(out_dir / "partition.csv"),
    })
