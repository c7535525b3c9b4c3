"""Run the distributed solve: partition → agents on a backend → coordinator loop → RunResult.

:func:`run_distributed` is the one entry point used by the CLI, the sweeps
and notebooks. It checkpoints every ``config.checkpoint_every`` rounds into
the output directory, so an interrupted or failed run keeps its history and
can continue with ``resume=True`` (``powerdp run --resume DIR``).
"""

from __future__ import annotations

import csv
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...engine.backends import AgentSpec, launch, make_backend
from ...engine.consensus.coordinator import Coordinator
from ...engine.consensus.messages import ZoneUpdate
from ...errors import ConfigError, Interrupted, ModelError, PowerDPError
from ...files.atomic import OutputError, atomic_to_csv, atomic_write, atomic_write_text
from ...files.checkpoint import load_state, refuse_pickles, save_state, state_exists
from ...files.jsonable import jsonable
from ...grid.loading import load_case
from ...grid.network import Network
from ...grid.partition import Partition
from ...grid.partition import partition as make_partition
from ...grid.partition_sources import bundled_csv
from ...opf.objectives import OBJECTIVES, median_marginal_cost, resolve_shedding_weight
from ...runs.directory import DirectoryLock, ensure_dir, prepare_run_dir
from ...runs.inputs import case_entry, case_source, file_entry, partition_entry, record_inputs, verify_inputs
from ...runs.stopping import deferred_stop, stop_requested
from .config import RunConfig
from .config_file import read_config_json
from .result import (
    COORDINATOR_COLUMNS,
    COORDINATOR_VIEW,
    EVALUATION_VIEW,
    HISTORY_COLUMNS,
    OLD_HISTORY_NAMES,
    RunResult,
    remove_legacy_files,
)

log = logging.getLogger(__name__)

__all__ = [
    "run_distributed", "resolve_partition", "resolve_config", "default_rho", "bundled_case_name", "RunFailed", "load_config",
    "RESUME_MAY_CHANGE",
]

# settings a resumed run may change: none of them changes the results
RESUME_MAY_CHANGE = ("rounds", "backend", "workers", "rank_timeout", "checkpoint_every")
DEFAULT_RHO = 100.0
EXACT_COST_RHO_FACTOR = 0.25  # ρ = 0.25 × the median marginal cost ($/h per p.u.), see default_rho


class RunFailed(PowerDPError):
    """A run stopped on an error; ``result`` holds the history up to the failure."""

    exit_status = 1

    def __init__(self, message: str, result: RunResult | None, cause: BaseException):
        super().__init__(message)
        self.result = result
        self.cause = cause


def bundled_case_name(case: Any) -> str | None:
    """``case`` itself when it names a bundled case (not a file of the same name), else None."""
    from ...grid.loading import bundled_path

    if not isinstance(case, (str, Path)):
        return None
    text = str(case)
    path = Path(text)
    if path.exists() or path.suffix != "" or bundled_path(text) is None:
        return None
    return text


def bundled_partition_name(case: Any, zones: int | None) -> str | None:
    """The bundled partition of a bundled case into ``zones`` zones (``case118_3areas``), or None."""
    name = bundled_case_name(case)
    if name is None or zones is None:
        return None
    for suffix in ("zones", "areas"):
        stem = f"{name}_{int(zones)}{suffix}"
        if bundled_csv(stem) is not None:
            return stem
    return None


def resolve_partition_choice(config: RunConfig) -> RunConfig:
    """Make ``partition_method="auto"`` explicit: the bundled partition of a bundled case, else modularity.

    Only the bundled case itself gets its bundled partition (a user's file whose
    MATPOWER function is also called ``case14`` does not), and an explicit method
    is always used. The result names the partition that is used, and that is
    what ``config.json`` records.
    """
    if config.partition is not None or config.partition_method != "auto":
        return config
    stem = bundled_partition_name(config.case, config.zones)
    if stem is not None:
        return config.replace(partition=stem)
    return config.replace(partition_method="modularity")


def default_rho(config: RunConfig, net: Network) -> float:
    """The ADMM penalty when ``config.rho`` is None.

    100 (the paper's) for the linearized algorithms, whose objectives are in p.u.².
    Exact ADMM on ``cost``, and every update on ``cost+shedding``, work in $/h, where ρ must be on the scale
    of the marginal costs: ρ = 0.25 × the median over generators of the marginal
    cost at mid-range output ($/h per p.u.; for piecewise-linear costs the median
    segment slope). Measured (``benchmarks/exact.py``, README): case14, case118 and
    case2000_goc all reach a 1e-3 relative gap within 35 rounds with it.
    """
    if config.rho is not None:
        return float(config.rho)
    unit = OBJECTIVES[config.objective]
    if not (unit.weighted or (config.update == "exact" and unit.unit == "$/h")):
        return DEFAULT_RHO
    mc = median_marginal_cost(net)
    if mc is None:
        return DEFAULT_RHO
    return float(EXACT_COST_RHO_FACTOR * mc)


def resolve_config(config: RunConfig, net: Network | None = None) -> RunConfig:
    """``config`` with its automatic choices made explicit (partition; ρ and ω when ``net`` is given)."""
    config = resolve_partition_choice(config)
    if config.rho is None and net is not None:
        config = config.replace(rho=default_rho(config, net))
    if net is not None and OBJECTIVES[config.objective].weighted and (config.shedding_weight in (None, "auto")):
        try:
            config = config.replace(shedding_weight=resolve_shedding_weight(config.objective, config.shedding_weight, net))
        except ModelError as exc:
            raise ConfigError(str(exc)) from None
    return config


def _load_network(config: RunConfig) -> Network:
    """The coordinator's network: the case, or in a deployment only the public network (every load NaN)."""
    if config.deployment is not None:
        from .zone_data import load_public_network

        return load_public_network(config.deployment)
    return load_case(config.case, convention=config.convention)


def resolve_partition(net: Network, config: RunConfig) -> Partition:
    """The run's zones: an explicit partition source, else the bundled one of a bundled case, else automatic.

    A distributed run needs at least two zones: one zone is refused here (``partition`` itself only warns).
    """
    import warnings

    if config.deployment is not None:
        from .zone_data import public_partition_path

        part = make_partition(net, str(public_partition_path(config.deployment)), allow_disconnected=True)
        _require_zones(net, part)
        return part
    config = resolve_partition_choice(config)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*has a single zone")
        if config.partition is not None:
            part = make_partition(net, config.partition, allow_disconnected=config.allow_disconnected)
        else:
            part = make_partition(net, zones=config.zones, method=config.partition_method, seed=config.seed or 0)
    _require_zones(net, part)
    return part


def _require_zones(net: Network, part: Partition) -> None:
    if part.n_zones < 2:
        raise ConfigError(
            f"the partition of {net.name} ({part.source}) has a single zone; a distributed run needs at least 2 "
            "(--zones 2 or more, or a partition with several zones)"
        )


def load_config(directory: str | Path) -> RunConfig:
    return read_config_json(Path(directory) / "config.json")


def check_resume_config(saved: RunConfig, config: RunConfig, directory: Path) -> None:
    """Refuse to resume the run saved in ``directory`` with settings that would change its results."""
    a, b = saved.to_dict(), config.to_dict()
    changed = [k for k in a if k not in RESUME_MAY_CHANGE and a[k] != b.get(k)]
    if saved.target_epsilon is not None and config.private_steps != saved.private_steps:  # the budget covers these steps only
        raise ConfigError(
            f"{directory}: the run's noise was calibrated to a total budget (ε = {saved.target_epsilon:g}) over "
            f"{saved.rounds} rounds; more rounds would spend more than the budget, so --rounds cannot change"
        )
    if changed:
        what = ", ".join(f"{k} {b.get(k)!r} (saved: {a[k]!r})" for k in changed)
        raise ConfigError(
            f"cannot resume {directory} with other settings: {what}; a resumed run may change only "
            f"{', '.join(RESUME_MAY_CHANGE)}"
        )


def _centralized_reference(net: Network, config: RunConfig) -> float | None:
    """The centralized optimum of the run's objective, solved with Ipopt whatever the local solver: the
    reference the product is specified on (Clarabel does not reach its tolerances on some large
    centralized problems, README "Choosing the local solver")."""
    from ...opf.centralized import solve_opf

    try:
        res = solve_opf(
            net, objective=config.objective, convention=config.convention, flows=config.flows,
            shedding_weight=config.shedding_weight, solver="ipopt",
        )
    except PowerDPError as exc:
        log.warning("centralized reference solve failed: %s", exc)
        return None
    if not res.success:
        log.warning("centralized reference solve failed (%s); the run reports no gap to it", res.status_name)
        return None
    return res.objective


def _checkpoint_dir(out: Path) -> Path:
    return out / "checkpoint"


def _save_checkpoint(out: Path, coordinator: Coordinator, backend, history: list[dict]) -> None:
    """Crash-consistent checkpoint after the coordinator's current round (no pickle: .npz + JSON).

    Each zone first writes its own ``zone_Z.private/round_T`` files on its host (its state
    never reaches the coordinator); then the evaluation's history rows (``evaluation``: objective,
    Σ|ξ|, zone solver work) and the coordinator's ``state`` (.npz + .json, naming round T, with the
    coordinator's history rows) replace the previous ones, the JSON last; only then are older zone
    files pruned. A crash at any point leaves a complete earlier checkpoint.
    (each view's ``history.csv`` is appended every round; resuming rewrites them from here.)
    """
    d = _checkpoint_dir(out)
    try:
        d.mkdir(parents=True, exist_ok=True)
        backend.save_checkpoint(str(d))
        coord_rows, eval_rows = _split_rows(history)  # the two views stay apart in the checkpoint too
        save_state(d / "evaluation", {"history": eval_rows})  # before the state that names the round (crash-consistent)
        save_state(d / "state", {**coordinator.state_dict(), "history": coord_rows})
    except OSError as exc:  # a full disk, a file-size limit: the previous checkpoint stays complete
        raise _checkpoint_write_error(out, d, coordinator.round, exc) from None
    backend.prune_checkpoints(str(d), coordinator.round)


def _split_rows(history: list[dict]) -> tuple[list[dict], list[dict]]:
    """The history rows as the coordinator's columns and as ``round`` + the evaluation's (JSON-ready)."""
    coord = [jsonable({c: row[c] for c in COORDINATOR_COLUMNS if c in row}) for row in history]
    ev = [jsonable({c: v for c, v in row.items() if c == "round" or c not in COORDINATOR_COLUMNS}) for row in history]
    return coord, ev


def _join_rows(coord: list[dict], ev: list[dict]) -> list[dict]:
    """Undo :func:`_split_rows` (a checkpoint of an earlier version holds whole rows in ``coord`` and no ``ev``)."""
    by_round = {int(row["round"]): row for row in ev}
    return [{**by_round.get(int(row["round"]), {}), **row} for row in coord]


def _checkpoint_write_error(out: Path, d: Path, t: int, exc: OSError) -> OutputError:
    for partial in d.rglob("*.tmp"):  # the unfinished files of this attempt; the last complete checkpoint is intact
        try:
            partial.unlink()
        except OSError:
            pass
    where = str(exc).removeprefix("cannot write ") if isinstance(exc, OutputError) else (
        f"{exc.filename}: {exc.strerror or exc}" if exc.filename else f"a checkpoint file in {d}: {exc.strerror or exc}"
    )
    kept = (
        f"the history and the last complete checkpoint are kept in {out} (powerdp run --resume {out} continues once "
        "the file can be written)" if _has_checkpoint(out) else f"the history is kept in {out}, but no checkpoint to resume from"
    )
    return OutputError(f"cannot write the checkpoint of round {t}, {where}; {kept}")


def _renamed(row: dict) -> dict:
    """A history row with its old column names (``ipopt_s``) renamed to the current ones."""
    out = dict(row)
    for old, new in OLD_HISTORY_NAMES.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def _history_files(out: Path) -> tuple[tuple[Path, list[str]], tuple[Path, list[str]]]:
    """The two per-round files and their columns: the coordinator's view, the simulation's evaluation
    (results.py's docstring; never one file with both)."""
    evaluation = ["round"] + [c for c in HISTORY_COLUMNS if c not in COORDINATOR_COLUMNS]
    return ((out / COORDINATOR_VIEW / "history.csv", COORDINATOR_COLUMNS),
            (out / EVALUATION_VIEW / "history.csv", evaluation))


def _write_history(out: Path, history: list[dict]) -> None:
    frame = pd.DataFrame(history, columns=HISTORY_COLUMNS)
    for path, columns in _history_files(out):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_to_csv(frame[columns], path, index=False)


def _append_history(out: Path, row: dict) -> None:
    """One line per round in each view's history (csv, repr floats: round-trip exact), cheap enough for every
    round. A failed append is an error naming the file (a resume rewrites the history from the checkpoint)."""
    for path, columns in _history_files(out):
        try:
            with open(path, "a", newline="") as fh:
                csv.writer(fh).writerow([row.get(c, "") for c in columns])
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}; {_kept(out).removeprefix('; ')}") from None


def _load_checkpoint(out: Path) -> dict:
    d = _checkpoint_dir(out)
    refuse_pickles(d)  # an older version's pickles: refused without being opened
    if not state_exists(d / "state"):
        raise ConfigError(f"{out} has no checkpoint to resume from ({d / 'state.json'} is missing)")
    state = load_state(d / "state")
    evaluation = load_state(d / "evaluation") if state_exists(d / "evaluation") else {"history": []}
    try:
        int(state["round"])
        history = _join_rows(list(state["history"]), list(evaluation["history"]))
    except Exception as exc:  # noqa: BLE001 - another program's files
        raise ConfigError(f"{d / 'state.json'} is not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    return {"coordinator": {k: v for k, v in state.items() if k != "history"}, "meta": {"history": history}}


def _has_checkpoint(out: Path | None) -> bool:
    return out is not None and state_exists(_checkpoint_dir(out) / "state")


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

    With ``config.evaluate`` the result holds the final point in physical units
    (``result.generators``, ``.buses``, ``.branches``, ``.zones``), saved as CSVs in ``out``;
    a run on a pandapower network also writes its dispatch into a copy of that network
    (``out/pandapower.json``).
    """
    config.validate()
    if ac_check and not config.evaluate:
        raise ConfigError(
            "the AC check needs the run's final point, which is not evaluated without evaluation "
            "(--no-evaluation keeps each zone's solution with the zone)"
        )
    # the backend decides how the run starts (under MPI only rank 0 coordinates; docs/contributing.md)
    return launch(
        config, lambda: _locked_run(config, network, partition, out, resume, progress, reference, overwrite, status, ac_check, observe)
    )


def _locked_run(
    config, network, partition, out, resume, progress, reference, overwrite, status, ac_check=False, observe=None,
) -> RunResult:
    if out is None:
        if resume:
            raise ConfigError("resume needs the output directory of the run")
        return _run(config, network, partition, None, False, progress, reference, status, ac_check, observe)
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"output directory {out_dir} is an existing file, not a directory")
    if resume and not out_dir.is_dir():
        raise ConfigError(f"{out_dir} holds no run to resume (no such directory)")
    ensure_dir(out_dir)
    with DirectoryLock(out_dir):  # checked under the lock: a run that just finished there is seen
        prepare_run_dir(out_dir, overwrite=overwrite, resume=resume)
        return _run(config, network, partition, out_dir, resume, progress, reference, status, ac_check, observe)


def _run(config, network, partition, out_dir, resume, progress, reference, status, ac_check=False, observe=None) -> RunResult:
    say = status or (lambda msg: None)
    seen = observe or (lambda updates: None)
    if config.deployment is not None:  # a deployment's coordinator takes nothing outside the allow-list
        from ...engine.consensus.messages import check_message

        def seen(updates, _observe=seen):
            for u in updates:
                try:
                    check_message(u)
                except ValueError as exc:
                    from ...engine.backends.base import WorkerError

                    raise WorkerError(f"zone {u.zone} broke the protocol: {exc}") from None
            _observe(updates)
    t_setup = time.perf_counter()
    records: dict[str, dict] = {}  # the input files recorded by the run being resumed (provenance.py)
    if resume:
        done = int(_load_checkpoint(out_dir)["coordinator"]["round"])  # missing or unreadable: fails before any work
        if done > config.rounds:
            raise ConfigError(
                f"{out_dir}: the run already has {done} rounds; rounds = {config.rounds} cannot shorten it "
                f"(give more than {done} to extend it)"
            )
        saved = load_config(out_dir)
        records = verify_inputs(out_dir, "resume")  # the case by its recorded absolute path, unchanged; partition.csv unedited
        if not records and network is None and config.deployment is None:
            log.warning(
                "%s was made before powerdp recorded its input files (inputs.json); the case is reopened as %r from the "
                "current directory, unchecked", out_dir, str(config.case),
            )
    say(f"loading {config.deployment or config.case}")
    if network is not None:
        net = network
    elif config.deployment is not None:
        net = _load_network(config)
    else:
        net = load_case(case_source(records, config.case), convention=config.convention)
    config = resolve_config(config, net)
    if resume:
        check_resume_config(resolve_config(saved, net), config, out_dir)
    _check_costs(net, config)
    _warn_large_step(config)
    if partition is None and resume and (out_dir / "partition.csv").is_file():  # the zones the run was made with
        partition = _saved_partition(net, out_dir)
    part = partition if partition is not None else resolve_partition(net, config)
    say(f"partition: {part.n_zones} zones from {part.source}")
    by_zone = part.shared_by_zone(config.flows)
    keys = part.shared_keys(config.flows)
    if not keys:
        raise ConfigError(f"the partition of {net.name} into {part.n_zones} zone(s) shares no variables; nothing to coordinate")
    key_index = {k: i for i, k in enumerate(keys)}
    zone_maps = [np.array([key_index[k] for k in by_zone[p]], dtype=np.int64) for p in range(part.n_zones)]
    specs = [AgentSpec(zone=p, own_buses=part.own_buses(p), shared_keys=tuple(by_zone[p])) for p in range(part.n_zones)]
    central = None
    reference_s = 0.0  # the centralized solve reads every load: the simulation's, kept out of the coordinator's setup time
    if reference and config.evaluate:
        say(f"centralized reference solve of {net.name} ({net.n_bus} buses)")
        t_ref = time.perf_counter()
        central = _centralized_reference(net, config)
        reference_s = time.perf_counter() - t_ref

    history: list[dict[str, Any]] = []
    start_round = 1
    init_s = 0.0
    coordinator = Coordinator(len(keys), zone_maps, config.rho, config.rho_schedule)
    say(f"building {part.n_zones} zone agents ({config.backend} backend)")
    backend = make_backend(config.backend, net, specs, config)
    last_diags: dict[int, Any] = {}  # each zone's latest report: its privacy spend survives a lost host
    try:
        setup_times = backend.setup_times()
        if resume:
            main = _load_checkpoint(out_dir)
            coordinator.load_state_dict(main["coordinator"])
            backend.load_checkpoint(str(_checkpoint_dir(out_dir)), coordinator.round)
            history = [_renamed(row) for row in main["meta"]["history"]]  # checkpoints of older versions
            _start_files(out_dir, config, part, history)  # drop rounds logged after the checkpoint, and a stale failure
            start_round = coordinator.round + 1
            log.info("resuming %s at round %d", out_dir, start_round)
        else:
            say(f"initial projection of {part.n_zones} zones")
            t_init = time.perf_counter()
            initial = backend.initialize()
            seen(initial)
            coordinator.start(initial)
            init_s = time.perf_counter() - t_init
            if out_dir is not None:
                _start_files(out_dir, config, part, history)
                _record_inputs(out_dir, config)
        setup_s = time.perf_counter() - t_setup - reference_s
        run_start = time.perf_counter()
        stopped = "rounds"
        last_checkpoint = start_round - 1 if resume else None
        with deferred_stop():  # Ctrl-C / SIGTERM during the rounds: finish the round in progress, then stop below
            for t in range(start_round, config.rounds + 1):
                t0 = time.perf_counter()
                rho = coordinator.rho
                try:
                    updates = backend.step(coordinator.broadcast())
                    seen(updates)
                    res = coordinator.receive(updates)
                    diags = backend.diagnostics()
                except (PowerDPError, FloatingPointError) as exc:  # a failed solve, a lost host, a NaN release
                    partial = _result(
                        config, net, part, keys, coordinator, history, backend, central, setup_s, setup_times, False,
                        init_s=init_s, last_diags=last_diags,
                    )
                    detail = str(exc).removeprefix(f"round {t}: ")  # when the error already names the round
                    if out_dir is not None:
                        _save_partial(partial, out_dir, f"round {t}: {detail}\n")
                    raise RunFailed(f"run stopped in round {t}: {detail}{_kept(out_dir)}", partial, exc) from exc
                last_diags.update((int(d.zone), d) for d in diags)
                row = {
                    "round": t,
                    **_zone_stats(diags),  # zone-private statistics: the simulation's evaluation only
                    "objective": float(sum(d.objective for d in diags)),
                    "feasibility": res.primal,
                    "dual_residual": res.dual,
                    "max_violation": float(max(d.max_violation for d in diags)),
                    "wall_s": time.perf_counter() - t0,
                    "epsilon_spent": float(max(d.epsilon_spent for d in diags)),
                    "rho": rho,
                }
                history.append(row)
                if out_dir is not None:  # every round, so a killed run keeps its history
                    _append_history(out_dir, row)
                if progress is not None:
                    progress(row)
                if out_dir is not None and config.checkpoint_every and (t % config.checkpoint_every == 0 or t == config.rounds):
                    _save_checkpoint(out_dir, coordinator, backend, history)
                    last_checkpoint = t
                if (config.tol_primal > 0 or config.tol_dual > 0) and res.primal <= config.tol_primal and res.dual <= config.tol_dual:
                    stopped = "tolerance"
                    if out_dir is not None and config.checkpoint_every and last_checkpoint != t:
                        _save_checkpoint(out_dir, coordinator, backend, history)
                    break
                if stop_requested() is not None and t < config.rounds:
                    if out_dir is not None and config.checkpoint_every and last_checkpoint != t:
                        _save_checkpoint(out_dir, coordinator, backend, history)
                    partial = _result(
                        config, net, part, keys, coordinator, history, backend, central, setup_s, setup_times, True,
                        run_s=time.perf_counter() - run_start, stopped="interrupted", init_s=init_s, last_diags=last_diags,
                    )
                    if out_dir is not None:
                        partial.save(out_dir)
                    raise Interrupted(_interrupted_message(t, config, out_dir), partial)
        result = _result(
            config, net, part, keys, coordinator, history, backend, central, setup_s, setup_times, True,
            run_s=time.perf_counter() - run_start, stopped=stopped, init_s=init_s, last_diags=last_diags,
        )
        result.summary["resumed_from"] = start_round - 1 if resume else None
        result.summary["reference_s"] = reference_s
        if out_dir is not None and not config.evaluate:
            backend.save_solutions(str(out_dir / "zones"))  # each zone's host writes its own solution
    finally:
        backend.close()
    _final_point(result, net, part, out_dir, ac_check, say)
    if out_dir is not None:
        result.save(out_dir)
    return result


def _final_point(result: RunResult, net: Network, part: Partition, out_dir: Path | None, ac_check: bool, say) -> None:
    """The final point in physical units, the AC check, and the dispatch in a copy of a pandapower source net."""
    from ...opf.tables import dispatch_from_zones, physical_tables

    if not result.config.evaluate or not result.zone_solutions:
        return
    result.dispatch = dispatch_from_zones(net, part.zone_of_bus, result.zone_solutions)
    result.tables = physical_tables(net, result.dispatch, part.zone_of_bus, part.labels)
    if out_dir is not None:  # what was computed is kept before anything optional runs
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


def _save_partial(partial: RunResult, out_dir: Path, failure: str) -> None:
    """A failed run's files; a write failure here must not hide the failure being reported."""
    try:
        partial.save(out_dir)
        atomic_write_text(out_dir / "failure.txt", failure)
    except OSError as exc:
        log.warning("could not write the failed run's files: %s", exc)


def _start_files(out_dir: Path, config: RunConfig, part: Partition, history: list[dict]) -> None:
    """The run's files as round 1 (or the first resumed round) starts."""
    atomic_write_text(out_dir / "config.json", json.dumps(jsonable(config.to_dict()), indent=2) + "\n")
    part.to_csv(out_dir / "partition.csv")
    remove_legacy_files(out_dir)  # an earlier version's mixed files: the history is rewritten below in the two views
    _write_history(out_dir, history)
    stale = ("failure.txt", f"{COORDINATOR_VIEW}/summary.json", f"{EVALUATION_VIEW}/summary.json")
    for name in stale:  # of an earlier attempt; written again when this one ends
        try:
            (out_dir / name).unlink()
        except FileNotFoundError:
            pass


def _record_inputs(out_dir: Path, config: RunConfig) -> None:
    """inputs.json of a new run: the case and partition files it was made from, and its own partition.csv."""
    if config.deployment is not None:  # the coordinator's public files (a zone's private file is its own)
        from .zone_data import public_dir, public_partition_path

        pub = public_dir(config.deployment)
        record_inputs(out_dir, {
            "public network": file_entry(pub / "network.npz"),
            "public network (json)": file_entry(pub / "network.json"),
            "public partition": file_entry(public_partition_path(config.deployment)),
            "partition.csv": file_entry(out_dir / "partition.csv"),
        })
        return
    record_inputs(out_dir, {
        "case": case_entry(config.case),
        "partition": partition_entry(config.partition),
        "partition.csv": file_entry(out_dir / "partition.csv"),
    })


def _saved_partition(net: Network, out_dir: Path) -> Partition:
    """The zones a run was made with, from its partition.csv; a damaged file is one line naming it."""
    path = out_dir / "partition.csv"
    try:
        part = make_partition(net, str(path), allow_disconnected=True)
    except PowerDPError as exc:
        raise ConfigError(f"{path} does not fit the run's case ({exc}); it is damaged: restore it or start a new run") from None
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ConfigError(f"{path} is damaged ({type(exc).__name__}); restore it or start a new run") from None
    _require_zones(net, part)
    return part


def _kept(out_dir: Path | None) -> str:
    """What a stopped run leaves behind, for its one-line message."""
    if out_dir is None:
        return ""
    if _has_checkpoint(out_dir):
        return f"; history and last checkpoint kept in {out_dir} (powerdp run --resume {out_dir} continues)"
    return f"; history kept in {out_dir}, no checkpoint to resume from"


def _interrupted_message(t: int, config: RunConfig, out_dir: Path | None) -> str:
    msg = f"interrupted after round {t} of {config.rounds}"
    if out_dir is None:
        return msg + " (no output directory: nothing kept)"
    if not config.checkpoint_every:
        return msg + f"; history kept in {out_dir}, no checkpoint (--checkpoint-every 0), so it cannot be resumed"
    return msg + f"; history and checkpoint of round {t} in {out_dir} (powerdp run --resume {out_dir} continues)"


LARGE_STEP = 1.0  # a constant η above it exceeds the capped schedule's 1.9/L_p = 0.95 (L_p = 2, docs/algorithm.md)


def _warn_large_step(config: RunConfig) -> None:
    if not isinstance(config.eta, str) and float(config.eta) > LARGE_STEP:
        log.warning(
            "constant step eta = %g is above 1.9/L_p (0.95 on the shedding objective, L_p = 2); the run may diverge "
            "(the default schedule 'capped' stays below it)", float(config.eta),
        )


def _check_costs(net: Network, config: RunConfig) -> None:
    if OBJECTIVES[config.objective].unit == "$/h" and not net.has_costs:
        from ...grid.network import missing_costs_message

        raise ConfigError(missing_costs_message(net))


def privacy_labels(config: RunConfig) -> dict[str, Any]:
    """What a run's ε means (docs/privacy.md, "Threat model"): whether the claim is a proven guarantee
    (``private``), and whether the noise is secret or replayable from the seed (``noise_source``)."""
    labels: dict[str, Any] = {"private": bool(config.claim_holds), "noise_source": config.noise_source}
    warnings = []
    if config.private and not config.claim_holds:
        warnings.append(
            f"sensitivity 'paper' with {config.perturbation} perturbation is not a proven bound: the printed epsilon "
            "is the paper's, not a guarantee"
        )
    if config.private and config.noise_source == "seeded":
        warnings.append(
            f"seeded noise (seed {config.seed}): the guarantee holds only against observers who do not know the seed"
        )
    labels["privacy_warnings"] = warnings
    return labels


def _zone_stats(diags) -> dict[str, float]:
    """Σ over zones of their own round statistics (noise magnitude, solver work), as the zones report them
    to the simulation's evaluation; NaN in a deployment-view run (they stay with the zones)."""
    stats = [getattr(d, "stats", None) for d in diags]
    if not stats or any(s is None for s in stats):
        return {"noise_magnitude": np.nan, "solver_iterations": np.nan, "solves": np.nan, "solver_s": np.nan}
    return {
        "noise_magnitude": float(sum(s.noise_magnitude for s in stats)),
        "solver_iterations": int(sum(s.iterations for s in stats)),
        "solves": int(sum(s.solves for s in stats)),
        "solver_s": float(sum(s.solver_s for s in stats)),
    }


def _finite_sum(values: list[float]) -> float | None:
    """The sum, or None when a value is missing (not evaluated, no costs) or there are none."""
    vals = [float(v) for v in values if v is not None]
    if not vals or len(vals) != len(values) or not all(np.isfinite(vals)):
        return None
    return float(sum(vals))


def _result(
    config, net, part, keys, coordinator, history, backend, central, setup_s, setup_times, complete,
    run_s=None, stopped="failed", init_s=0.0, last_diags=None,
):
    frame = pd.DataFrame(history, columns=HISTORY_COLUMNS)
    try:
        diags = backend.diagnostics(with_solution=True) if (history or complete) else []
        host_mb = backend.host_memory()
    except PowerDPError:
        if complete:
            raise
        # a lost host cannot report: each zone's spend and privacy report as of the last round it completed
        diags, host_mb = sorted((last_diags or {}).values(), key=lambda d: d.zone), []
    privacy = {d.zone: d.privacy for d in diags if d.privacy is not None}
    final_obj = float(frame["objective"].iloc[-1]) if len(frame) else None
    # the released dispatch, from the zones' evaluation diagnostics (None when not evaluated)
    final_cost = _finite_sum([d.cost for d in diags]) if len(frame) else None
    shedding_mw = _finite_sum([d.shedding_mw for d in diags]) if len(frame) else None
    summary: dict[str, Any] = {
        "case": net.name,
        "algorithm": config.algorithm,
        "objective": config.objective,
        "n_zones": part.n_zones,
        "n_shared": len(keys),
        "load_values": 2 * int(net.n_bus),  # pd and qd of every bus: the private values (docs/privacy.md)
        "rounds": int(len(frame)),
        "stopped": stopped,
        "final_objective": final_obj,
        "shedding_weight": config.shedding_weight,
        "final_cost": final_cost,  # Σ_g cost_g(pg) at the released dispatch, $/h
        "total_shedding_mw": shedding_mw,  # Σ_i |yp_i + pd_i| · baseMVA at the released point, MW
        "final_feasibility": float(frame["feasibility"].iloc[-1]) if len(frame) else None,
        "final_dual_residual": float(frame["dual_residual"].iloc[-1]) if len(frame) else None,
        "max_violation": float(frame["max_violation"].max()) if len(frame) else None,
        "final_max_violation": float(frame["max_violation"].iloc[-1]) if len(frame) else None,
        "wall_s": float(frame["wall_s"].sum()) if run_s is None else float(run_s),
        "setup_s": float(setup_s),  # everything before round 1 (load, partition, build, compile, projection)
        # but the centralized reference solve (the simulation's evaluation: result.summary["reference_s"])
        "init_s": float(init_s),  # of which the initial projection onto each W_p (0 on resume)
        "local_solver": config.local_solver,
        "solver_s": float(frame["solver_s"].sum()),
        "ipopt_s": float(frame["solver_s"].sum()),  # old name of solver_s, kept for readers of older summaries
        "solves": int(frame["solves"].sum()),  # zone-private statistics (0 when the zones kept them: no evaluation)
        "solver_iterations": int(frame["solver_iterations"].sum()),
        "epsilon_total": {int(d.zone): float(d.epsilon_spent) for d in diags},  # the ledger's tightest valid figure
        "epsilon_per_step": {int(d.zone): d.privacy["per_step"]["epsilon"] for d in diags if d.privacy},
        "epsilon_basic": {int(d.zone): d.privacy["basic"]["epsilon"] for d in diags if d.privacy},
        "target_epsilon": config.target_epsilon,
        "target_delta": config.target_delta,
        **privacy_labels(config),
        "centralized_objective": central,
        "gap_to_centralized": None,
        "relative_gap_to_centralized": None,
        "backend": config.backend,
        "hosts": getattr(backend, "n_hosts", 1),
        "setup_times": {int(z): v for z, v in setup_times.items()},
        "host_peak_rss_mb": [round(m, 1) for m in host_mb],  # per agent host (serial: this process)
    }
    if central is not None and final_obj is not None:
        summary["gap_to_centralized"] = final_obj - central
        if abs(central) > 1e-9:
            summary["relative_gap_to_centralized"] = (final_obj - central) / abs(central)
    return RunResult(
        config=config,
        history=frame,
        shared_keys=list(keys),
        consensus=coordinator.w.copy(),
        zone_solutions={int(d.zone): d.solution for d in diags if d.solution is not None},
        privacy=privacy,
        summary=summary,
    )
