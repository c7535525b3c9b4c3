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
import pickle
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from .backends import AgentSpec, make_backend
from .config import RunConfig
from .coordinator import Coordinator
from .errors import ConfigError, PowerDPError
from .network import Network, load_case
from .partition import Partition, bundled_partition, partition as make_partition
from .results import HISTORY_COLUMNS, RunResult, _jsonable

log = logging.getLogger(__name__)

__all__ = ["run_distributed", "resolve_partition", "RunFailed", "load_config"]


class RunFailed(PowerDPError):
    """A run stopped on an error; ``result`` holds the history up to the failure."""

    def __init__(self, message: str, result: RunResult | None, cause: BaseException):
        super().__init__(message)
        self.result = result
        self.cause = cause


def resolve_partition(net: Network, config: RunConfig) -> Partition:
    """The run's zones: an explicit partition source, else the bundled one for that zone count, else automatic."""
    if config.partition is not None:
        return make_partition(net, config.partition, allow_disconnected=config.allow_disconnected)
    bundled = bundled_partition(net, config.zones)
    if bundled is not None:
        return bundled
    return make_partition(net, zones=config.zones, method=config.partition_method, seed=config.seed)


def load_config(directory: str | Path) -> RunConfig:
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise ConfigError(f"{directory} holds no run (missing {path.name})")
    return RunConfig.from_dict(json.loads(path.read_text()), source=str(path))


def _centralized_reference(net: Network, config: RunConfig) -> float | None:
    from .opf import solve_opf

    try:
        res = solve_opf(net, objective=config.objective, convention=config.convention, flows=config.flows)
    except PowerDPError as exc:
        log.warning("centralized reference solve failed: %s", exc)
        return None
    return res.objective if res.success else None


def _checkpoint_dir(out: Path) -> Path:
    return out / "checkpoint"


def _save_checkpoint(out: Path, coordinator: Coordinator, backend, history: list[dict]) -> None:
    """Crash-consistent checkpoint after the coordinator's current round.

    Each zone first writes its own ``zone_Z_round_T.pkl`` on its host (its state
    never reaches the coordinator); then the coordinator's ``state.pkl``, naming
    round T, replaces the previous one atomically; only then are older zone
    files pruned. A crash at any point leaves a complete earlier checkpoint.
    (``history.csv`` is appended every round; resuming rewrites it from here.)
    """
    d = _checkpoint_dir(out)
    d.mkdir(parents=True, exist_ok=True)
    backend.save_checkpoint(str(d))
    tmp = d / "state.pkl.tmp"
    with open(tmp, "wb") as fh:
        pickle.dump({"coordinator": coordinator.state_dict(), "meta": {"history": history}}, fh)
    tmp.replace(d / "state.pkl")
    backend.prune_checkpoints(str(d), coordinator.round)


def _write_history(out: Path, history: list[dict]) -> None:
    tmp = out / "history.csv.tmp"
    pd.DataFrame(history, columns=HISTORY_COLUMNS).to_csv(tmp, index=False)
    tmp.replace(out / "history.csv")


def _append_history(out: Path, row: dict) -> None:
    """One line per round (csv, repr floats: round-trip exact), cheap enough for every round."""
    with open(out / "history.csv", "a", newline="") as fh:
        csv.writer(fh).writerow([row.get(c, "") for c in HISTORY_COLUMNS])


def _load_checkpoint(out: Path) -> dict:
    d = _checkpoint_dir(out)
    if not (d / "state.pkl").is_file():
        raise ConfigError(f"{out} has no checkpoint to resume from ({d / 'state.pkl'} is missing)")
    with open(d / "state.pkl", "rb") as fh:
        return pickle.load(fh)


def run_distributed(
    config: RunConfig,
    network: Network | None = None,
    partition: Partition | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    progress: Callable[[dict[str, Any]], None] | None = None,
    reference: bool = True,
) -> RunResult | None:
    """Run the (private) distributed ADMM of SPEC §5 and return its :class:`RunResult`.

    With ``config.backend == "mpi"`` call it on every rank: rank 0 returns the
    result, the other ranks host agents and return ``None``.

    Parameters
    ----------
    config: the run configuration.
    network, partition: pass already-loaded objects, else they come from ``config``.
    out: output directory (results, checkpoints); required for ``resume``.
    resume: continue from the last checkpoint in ``out``.
    progress: called after every round with that round's history row.
    reference: also solve the centralized problem to report the gap to it.
    """
    config.validate()
    if config.backend == "mpi":
        from .mpi import liveness, rank, serve_rank

        if rank() != 0:  # worker ranks host agents; rank 0 coordinates and returns the result
            serve_rank(config)
            return None
        liveness(config)  # heartbeats from now on: the agent ranks wait while rank 0 sets up
        try:
            return _run(config, network, partition, out, resume, progress, reference)
        except BaseException:
            from .mpi import release_ranks

            release_ranks()  # a failure before the zones were handed out: free the agent ranks
            raise
    return _run(config, network, partition, out, resume, progress, reference)


def _run(config, network, partition, out, resume, progress, reference) -> RunResult:
    t_setup = time.perf_counter()
    net = network if network is not None else load_case(config.case, convention=config.convention)
    part = partition if partition is not None else resolve_partition(net, config)
    out_dir = Path(out) if out is not None else None
    if resume and out_dir is None:
        raise ConfigError("resume needs the output directory of the run")
    by_zone = part.shared_by_zone(config.flows)
    keys = part.shared_keys(config.flows)
    if not keys:
        raise ConfigError(f"the partition of {net.name} into {part.n_zones} zone(s) shares no variables; nothing to coordinate")
    key_index = {k: i for i, k in enumerate(keys)}
    zone_maps = [np.array([key_index[k] for k in by_zone[p]], dtype=np.int64) for p in range(part.n_zones)]
    specs = [AgentSpec(zone=p, own_buses=part.own_buses(p), shared_keys=tuple(by_zone[p])) for p in range(part.n_zones)]
    central = _centralized_reference(net, config) if (reference and config.evaluate) else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "config.json").write_text(json.dumps(_jsonable(config.to_dict()), indent=2) + "\n")
        part.to_csv(out_dir / "partition.csv")

    history: list[dict[str, Any]] = []
    start_round = 1
    init_s = 0.0
    coordinator = Coordinator(len(keys), zone_maps, config.rho, config.rho_schedule)
    backend = make_backend(config.backend, net, specs, config)
    try:
        setup_times = backend.setup_times()
        if resume:
            main = _load_checkpoint(out_dir)
            coordinator.load_state_dict(main["coordinator"])
            backend.load_checkpoint(str(_checkpoint_dir(out_dir)), coordinator.round)
            history = main["meta"]["history"]
            _write_history(out_dir, history)  # drop rounds logged after the checkpoint
            start_round = coordinator.round + 1
            log.info("resuming %s at round %d", out_dir, start_round)
        else:
            t_init = time.perf_counter()
            coordinator.start(backend.initialize())
            init_s = time.perf_counter() - t_init
            if out_dir is not None:
                _write_history(out_dir, history)
        setup_s = time.perf_counter() - t_setup
        run_start = time.perf_counter()
        stopped = "rounds"
        for t in range(start_round, config.rounds + 1):
            t0 = time.perf_counter()
            rho = coordinator.rho
            try:
                updates = backend.step(coordinator.broadcast())
                res = coordinator.receive(updates)
                diags = backend.diagnostics()
            except (PowerDPError, FloatingPointError) as exc:  # a failed solve, a lost host, a NaN release
                partial = _result(config, net, part, keys, coordinator, history, backend, central, setup_s, setup_times, False, init_s=init_s)
                if out_dir is not None:
                    partial.save(out_dir)
                    (out_dir / "failure.txt").write_text(f"round {t}: {exc}\n")
                raise RunFailed(
                    f"run stopped in round {t}: {exc}"
                    + (f"; history and last checkpoint kept in {out_dir}" if out_dir is not None else ""),
                    partial,
                    exc,
                ) from exc
            row = {
                "round": t,
                "noise_magnitude": float(sum(u.stats.noise_magnitude for u in updates)),
                "objective": float(sum(d.objective for d in diags)),
                "feasibility": res.primal,
                "dual_residual": res.dual,
                "max_violation": float(max(d.max_violation for d in diags)),
                "solver_iterations": int(sum(u.stats.iterations for u in updates)),
                "solves": int(sum(u.stats.solves for u in updates)),
                "ipopt_s": float(sum(u.stats.ipopt_s for u in updates)),
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
            if (config.tol_primal > 0 or config.tol_dual > 0) and res.primal <= config.tol_primal and res.dual <= config.tol_dual:
                stopped = "tolerance"
                if out_dir is not None and config.checkpoint_every:
                    _save_checkpoint(out_dir, coordinator, backend, history)
                break
        result = _result(
            config, net, part, keys, coordinator, history, backend, central, setup_s, setup_times, True,
            run_s=time.perf_counter() - run_start, stopped=stopped, init_s=init_s,
        )
        if out_dir is not None and not config.evaluate:
            backend.save_solutions(str(out_dir / "zones"))  # each zone's host writes its own solution
    finally:
        backend.close()
    if out_dir is not None:
        result.save(out_dir)
    return result


def _result(config, net, part, keys, coordinator, history, backend, central, setup_s, setup_times, complete, run_s=None, stopped="failed", init_s=0.0):
    frame = pd.DataFrame(history, columns=HISTORY_COLUMNS)
    try:
        diags = backend.diagnostics(with_solution=True) if (history or complete) else []
        host_mb = backend.host_memory()
    except PowerDPError:
        if complete:
            raise
        diags, host_mb = [], []  # a failed host cannot report; the history is still kept
    privacy = {d.zone: d.privacy for d in diags if d.privacy is not None}
    final_obj = float(frame["objective"].iloc[-1]) if len(frame) else None
    summary: dict[str, Any] = {
        "case": net.name,
        "algorithm": config.algorithm,
        "objective": config.objective,
        "n_zones": part.n_zones,
        "n_shared": len(keys),
        "rounds": int(len(frame)),
        "stopped": stopped if complete else "failed",
        "final_objective": final_obj,
        "final_feasibility": float(frame["feasibility"].iloc[-1]) if len(frame) else None,
        "final_dual_residual": float(frame["dual_residual"].iloc[-1]) if len(frame) else None,
        "max_violation": float(frame["max_violation"].max()) if len(frame) else None,
        "final_max_violation": float(frame["max_violation"].iloc[-1]) if len(frame) else None,
        "wall_s": float(frame["wall_s"].sum()) if run_s is None else float(run_s),
        "setup_s": float(setup_s),  # everything before round 1 (load, partition, build, compile, projection)
        "init_s": float(init_s),  # of which the initial projection onto each W_p (0 on resume)
        "ipopt_s": float(frame["ipopt_s"].sum()),
        "solves": int(frame["solves"].sum()),
        "solver_iterations": int(frame["solver_iterations"].sum()),
        "epsilon_total": {int(d.zone): float(d.epsilon_spent) for d in diags},
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
