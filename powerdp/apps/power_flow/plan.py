"""Resolve once, then run: a power-flow run planned in one place into an immutable :class:`RunPlan`.

:func:`plan_run` validates and completes the configuration (the partition choice, ρ, the shedding weight), loads
the network (the case by the path recorded in ``inputs.json`` on resume, or a deployment's public network) and the
partition (the run's own ``partition.csv`` on resume), checks a resumed run's checkpoint, inputs and settings,
decides the centralized reference, and lays out the agents. :func:`~powerdp.apps.power_flow.runner.run_distributed`
executes the plan; nothing below it reads the configuration again to decide anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...engine.backends import AgentSpec
from ...errors import ConfigError, ModelError, PowerDPError
from ...files.zone_folders import LEGACY_TEST_ONLY, ZoneFolders, deployment_folders, new_run_id, simulation_folders
from ...grid.loading import load_case
from ...grid.network import Network
from ...grid.partition import Partition
from ...grid.partition import partition as make_partition
from ...grid.partition_sources import bundled_csv
from ...opf.objectives import OBJECTIVES, median_marginal_cost, resolve_shedding_weight
from ...runs.inputs import case_source
from ...runs.record import RunRecord, check_resume
from .config import RunConfig
from .config_file import read_config_json
from .result import COORDINATOR_COLUMNS, HISTORY_COLUMNS

log = logging.getLogger(__name__)

__all__ = ["RunPlan", "plan_run", "resolve_config", "resolve_partition", "resolve_partition_choice", "default_rho",
           "bundled_case_name", "bundled_partition_name", "load_config", "check_resume_config", "RESUME_MAY_CHANGE",
           "shared_layout"]


@dataclass(frozen=True)
class RunPlan:
    """Everything a run needs, decided before it starts (frozen: handed down, never changed)."""

    config: RunConfig  # validated and completed (partition, ρ, ω explicit): what config.json records
    network: Network  # the coordinator's network (a deployment's: the public one, every load NaN)
    partition: Partition
    shared_keys: tuple  # the consensus variables, in order
    zone_maps: tuple  # per zone: the indices of its shared variables among shared_keys
    specs: tuple  # per zone: its AgentSpec (buses, shared keys)
    reference: bool  # solve the centralized problem for the gap (the simulation's evaluation)
    record: RunRecord | None  # the run directory (None: no output)
    resume: bool
    folders: ZoneFolders | None  # where each zone keeps its private files (None: no output)


def plan_run(config: RunConfig, network: Network | None = None, partition: Partition | None = None,
             out: Path | None = None, resume: bool = False, reference: bool = True,
             status: Callable[[str], None] | None = None, zone_layout: str | None = None) -> RunPlan:
    """Plan a run (module docstring); ``out`` is an output directory already checked and locked."""
    say = status or (lambda msg: None)
    record = RunRecord(out, COORDINATOR_COLUMNS, HISTORY_COLUMNS) if out is not None else None
    records: dict[str, dict] = {}  # the input files recorded by the run being resumed (runs/inputs.py)
    if resume:
        done = int(record.load_checkpoint()[0]["round"])  # missing or unreadable: fails before any work
        if done > config.rounds:
            raise ConfigError(
                f"{out}: the run already has {done} rounds; rounds = {config.rounds} cannot shorten it "
                f"(give more than {done} to extend it)"
            )
        saved = load_config(out)
        records = record.verify_inputs("resume")  # the case by its recorded absolute path, unchanged; partition.csv unedited
        if not records and network is None and config.deployment is None:
            log.warning(
                "%s was made before powerdp recorded its input files (inputs.json); the case is reopened as %r from the "
                "current directory, unchecked", out, str(config.case),
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
        check_resume_config(resolve_config(saved, net), config, out)
    folders = zone_folders_of(config, out, resume, zone_layout, record)
    _check_costs(net, config)
    _warn_large_step(config)
    if partition is None and resume and (out / "partition.csv").is_file():  # the zones the run was made with
        partition = _saved_partition(net, out)
    part = partition if partition is not None else resolve_partition(net, config)
    say(f"partition: {part.n_zones} zones from {part.source}")
    keys, zone_maps, specs = shared_layout(part, config)
    if not keys:
        raise ConfigError(f"the partition of {net.name} into {part.n_zones} zone(s) shares no variables; nothing to coordinate")
    return RunPlan(config=config, network=net, partition=part, shared_keys=tuple(keys), zone_maps=zone_maps, specs=specs,
                   reference=bool(reference and config.evaluate), record=record, resume=resume, folders=folders)



def shared_layout(part: Partition, config: RunConfig) -> tuple[tuple, tuple, tuple]:
    """The consensus variables, each zone's indices among them, and each zone's AgentSpec (its buses, shared keys):
    what the coordinator and every zone's host derive alike from the public partition."""
    by_zone = part.shared_by_zone(config.flows)
    keys = tuple(part.shared_keys(config.flows))
    key_index = {k: i for i, k in enumerate(keys)}
    zone_maps = tuple(np.array([key_index[k] for k in by_zone[p]], dtype=np.int64) for p in range(part.n_zones))
    specs = tuple(AgentSpec(zone=p, own_buses=part.own_buses(p), shared_keys=tuple(by_zone[p])) for p in range(part.n_zones))
    return keys, zone_maps, specs


# settings a resumed run may change: none of them changes the results


RESUME_MAY_CHANGE = ("rounds", "backend", "workers", "rank_timeout", "checkpoint_every", "certs", "zones_at", "tls_cert", "tls_key",
                     "tls_ca", "round_timeout", "zone_timeout")


DEFAULT_RHO = 100.0


EXACT_COST_RHO_FACTOR = 0.25  # ρ = 0.25 × the median marginal cost ($/h per p.u.), see default_rho


def zone_folders_of(config: RunConfig, out_dir: Path | None, resume: bool, layout: str | None = None,
                    record: RunRecord | None = None) -> ZoneFolders | None:
    """Where the run's zones keep their private files (:mod:`powerdp.files.zone_folders`); None without an output
    directory (nothing is written). A simulation's are ``OUT/zones.private/zone_P``; a deployment's are in each zone's
    own ``DEP/zone_P.private/runs/RUN``, RUN a fresh id (resumed: the one in the checkpoint). ``layout`` (tests only)
    selects the layout of earlier versions, which the file audit must catch."""
    if out_dir is None:
        return None
    if layout == LEGACY_TEST_ONLY:
        return ZoneFolders(str(out_dir), LEGACY_TEST_ONLY)
    if layout is not None:
        raise ValueError(f"unknown zone layout {layout!r}")
    old = sorted((out_dir / "checkpoint").glob("zone_*.private")) if resume else []
    if config.deployment is None:
        if old:
            _move_old_zone_states(out_dir, old)
        return simulation_folders(out_dir)
    record = record or RunRecord(out_dir, COORDINATOR_COLUMNS)
    run = record.load_checkpoint()[0].get("zone_run") if resume else new_run_id()
    if resume and (old or not run):
        raise ConfigError(
            f"{out_dir} was written by an earlier powerdp whose zone processes kept their state in the coordinator's "
            f"directory ({old[0] if old else out_dir / 'checkpoint'}); it is not resumed from there: remove "
            "that folder and start the run again"
        )
    return deployment_folders(config.deployment, run)


def _move_old_zone_states(out_dir: Path, old: list[Path]) -> None:
    """A simulation run directory of an earlier version (zone states in ``checkpoint/zone_P.private``): its zones'
    states move into ``zones.private/zone_P/checkpoint``, closed to 0700/0600, before the run resumes."""
    import os
    import shutil

    from ...files.private import DIR_MODE, FILE_MODE, private_dir

    folders = simulation_folders(out_dir)
    for d in old:
        zone = int(d.name.removeprefix("zone_").removesuffix(".private"))
        target = folders.checkpoint_dir(zone)
        private_dir(target.parent)
        if target.exists():
            shutil.rmtree(target)
        os.chmod(d, DIR_MODE)
        for f in d.iterdir():
            os.chmod(f, FILE_MODE)
        d.rename(target)
    shutil.rmtree(out_dir / "zones", ignore_errors=True)  # the old zones/ (solutions, statistics): written anew


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
    segment slope). Measured (``benchmarks/exact.py``, docs/results/power_flow.md): case14, case118 and
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
    budget = None
    if saved.target_epsilon is not None and config.private_steps != saved.private_steps:  # the budget covers these steps only
        budget = (f"{directory}: the run's noise was calibrated to a total budget (ε = {saved.target_epsilon:g}) over "
                  f"{saved.rounds} rounds; more rounds would spend more than the budget, so --rounds cannot change")
    check_resume(saved.to_dict(), config.to_dict(), RESUME_MAY_CHANGE, directory, budget)


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
