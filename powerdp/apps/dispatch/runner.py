"""A day of private distributed dispatch: one distributed SOC OPF per period, warm-started from the previous one.

:func:`run_dispatch` builds the zone agents once (:class:`~powerdp.apps.dispatch.agent.DispatchZoneAgent`: compiled
once, re-aimed at each period's loads and renewable caps), then for each period hands each zone its own slice of the
period's data and runs the rounds in :func:`powerdp.runs.loop.run_rounds` until both residuals meet the tolerance or
the round cap. The consensus (w, λ), each zone's iterate, duals and solver warm start carry over from period to
period (``cold_start`` resets them: the benchmark's baseline). Its files (docs/multi_period.md):

```
D/config.json                        the DispatchConfig          D/inputs.json   input files and their SHA-256
D/partition.csv                      the zones
D/coordinator_view/history.csv       one row per round (period, round, residuals, ρ, ε spent)
D/coordinator_view/periods.csv       one row per period: rounds, residuals, ε spent per zone so far
D/coordinator_view/summary.json      the horizon: epsilon_total per zone, the neighbouring relation and the claim
D/simulation_evaluation/...          history.csv and periods.csv with the cost, the centralized reference, shedding,
                                     import, curtailment; res_gen/, res_sgen/, res_ext_grid/ (p_mw.csv per period);
                                     summary.json with max_relative_cost_gap and the periods
D/zones.private/zone_P/              each zone's checkpoint (0700/0600)
D/checkpoint/                        the coordinator's state after the last complete period (state.*, periods.*: the
                                     coordinator's columns) and the evaluation's (evaluation.*, periods_evaluation.*)
```

Checkpoints are per period: a run stopped by Ctrl-C (or a failed round) keeps every complete period, and ``resume``
continues at the period it stopped in; a seeded run resumed is bit-identical to one that ran through.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...engine.backends import AgentSpec, make_backend
from ...engine.consensus.coordinator import Coordinator
from ...errors import ConfigError, Interrupted, PowerDPError
from ...files.atomic import atomic_write
from ...files.checkpoint import load_state, save_state
from ...files.jsonable import jsonable
from ...files.zone_folders import simulation_folders
from ...grid.network import Network
from ...grid.partition import partition as make_partition
from ...runs.directory import DirectoryLock, ensure_dir, prepare_run_dir
from ...runs.inputs import case_entry, file_entry
from ...runs.loop import Rounds, run_rounds
from ...runs.record import RunRecord
from ...runs.stopping import deferred_stop, stop_requested
from ...runs.views import COORDINATOR_VIEW, EVALUATION_VIEW, save_summary_views
from ..power_flow.plan import resolve_config, resolve_partition
from .config import DispatchConfig, relation_text
from .operator_view import ac_check_row, implemented_row, implemented_summary, nested

log = logging.getLogger(__name__)

__all__ = ["run_dispatch", "DispatchResult", "DispatchFailed", "COORDINATOR_COLUMNS", "PERIOD_COORDINATOR_COLUMNS"]

AGENT = "powerdp.apps.dispatch.agent:DispatchZoneAgent"
#: the coordinator's history columns (an allow-list: the rest is the simulation's evaluation)
COORDINATOR_COLUMNS = ["period", "round", "feasibility", "dual_residual", "primal_relative", "dual_relative",
                       "consensus_norm", "rho", "epsilon_spent", "wall_s"]
#: the coordinator's columns of the per-period table
PERIOD_COORDINATOR_COLUMNS = ["period", "label", "rounds", "stopped", "feasibility", "dual_residual", "primal_relative",
                              "dual_relative", "epsilon_spent", "wall_s", "zones_s", "coordinator_s"]
#: summary keys of the coordinator's view
COORDINATOR_KEYS = ("source", "algorithm", "n_zones", "n_periods", "period_minutes", "relation", "relation_text", "beta",
                    "adjacency", "epsilon_total", "epsilon_claim", "target_epsilon", "private", "noise_source", "rounds_total",
                    "mean_rounds", "stopped", "wall_s", "setup_s", "wall_s_per_period", "cpu_s_per_period", "backend", "cold_start",
                    "resumed_from_period", "tolerance", "max_rounds", "ramp")
#: gen_kind → pandapower's result table
RESULT_TABLES = {"renewable": "res_sgen", "import": "res_ext_grid"}


class DispatchFailed(PowerDPError):
    """A period's rounds failed; the complete periods are kept."""

    exit_status = 1


@dataclass
class DispatchResult:
    """The periods of a dispatch run (both views; only the coordinator's is published)."""

    config: DispatchConfig
    periods: pd.DataFrame  # one row per period: the coordinator's columns and the simulation's evaluation
    history: pd.DataFrame  # one row per round
    summary: dict[str, Any]  # the horizon: both views' keys
    dispatch: dict[str, pd.DataFrame] = field(default_factory=dict)  # res_gen / res_sgen / res_ext_grid: p_mw per period
    privacy: dict[int, Any] = field(default_factory=dict)  # each zone's ledger report (public; the privacy receipt's)

    def views(self) -> dict[str, dict[str, Any]]:
        """The JSON of ``--json``: the coordinator's view and the simulation's evaluation, apart."""
        coord = {k: v for k, v in self.summary.items() if k in COORDINATOR_KEYS}
        ev = {k: v for k, v in self.summary.items() if k not in COORDINATOR_KEYS}
        coord["periods"] = self.periods[[c for c in PERIOD_COORDINATOR_COLUMNS if c in self.periods]].to_dict("records")
        ev["periods"] = [nested(r) for r in self.periods.to_dict("records")]
        return jsonable({"coordinator_view": coord, "simulation_evaluation": ev})


def _zone_gens(net: Network, zone_of_bus: np.ndarray, n_zones: int) -> dict[int, np.ndarray]:
    zg = zone_of_bus[net.gen_bus]
    return {z: np.flatnonzero(zg == z) for z in range(n_zones)}


def run_dispatch(config: DispatchConfig, horizon, out: str | Path | None = None, resume: bool = False,
                 overwrite: bool = False, progress: Callable[[dict[str, Any]], None] | None = None,
                 status: Callable[[str], None] | None = None, reference: bool = True,
                 ac_check: bool = False, ac_evaluation: bool = True,
                 observe: Callable[[list], None] | None = None) -> DispatchResult:
    """Run the dispatch of ``horizon`` (a :class:`~powerdp.grid.profiles.Horizon`) with ``config`` (module docstring).

    ``progress`` is called after every round with its row (``period``, ``round``, residuals) and after every period
    with ``{"period_done": k, ...}``; ``status`` with a short message as each stage starts. ``reference`` solves the
    centralized SOC OPF of every period (the simulation's evaluation); ``ac_check`` runs pandapower's AC power flow
    at every period's dispatch (the simulation's evaluation: ``ac_*`` columns, as ``powerdp run --ac-check``).
    After every period each zone computes its implemented dispatch (its true loads, its tie-line flows held at the
    agreed values; :mod:`powerdp.apps.power_flow.implemented`); ``ac_evaluation`` evaluates it as an operator would,
    beside the period's centralized dispatch evaluated the same way (the ``implemented_*`` and
    ``implemented_reference_*`` columns; :mod:`powerdp.opf.ac_evaluation`).
    ``observe`` is called with every round's updates: what the coordinator receives (the audits' and tests' hook).
    """
    config.validate()
    if horizon.pd.shape[0] != config.periods:
        raise ConfigError(f"the horizon holds {horizon.pd.shape[0]} periods, the configuration {config.periods}")
    if out is None:
        if resume:
            raise ConfigError("resume needs the output directory of the run")
        return _run(config, horizon, None, False, progress, status, reference, ac_check, ac_evaluation, observe)
    out_dir = ensure_dir(out)
    if resume and not (out_dir / "config.json").is_file():
        raise ConfigError(f"{out_dir} holds no dispatch run to resume")
    with DirectoryLock(out_dir):
        prepare_run_dir(out_dir, overwrite=overwrite, resume=resume)
        return _run(config, horizon, out_dir, resume, progress, status, reference, ac_check, ac_evaluation, observe)


def _run(config: DispatchConfig, horizon, out_dir: Path | None, resume: bool, progress, status,
         reference: bool, ac_check: bool = False, ac_evaluation: bool = True, observe=None) -> DispatchResult:
    say = status or (lambda msg: None)
    t_setup = time.perf_counter()
    net: Network = horizon.network
    # ρ and ω explicit; ω is the cost file's shedding_weight unless it is "auto" (docs/profiles.md)
    weight = horizon.costs.shedding_weight
    run_cfg = resolve_config(config.run_config(net.name, None if weight == "auto" else float(weight)), net)
    if resume and out_dir is not None and (out_dir / "partition.csv").is_file():  # the zones the run was made with
        part = make_partition(net, str(out_dir / "partition.csv"))
    else:
        part = resolve_partition(net, run_cfg)
    keys = part.shared_keys(run_cfg.flows)
    if not keys:
        raise ConfigError(f"the partition of {net.name} into {part.n_zones} zone(s) shares no variables")
    by_zone = part.shared_by_zone(run_cfg.flows)
    index = {k: i for i, k in enumerate(keys)}
    zone_maps = [np.array([index[k] for k in by_zone[p]], dtype=np.int64) for p in range(part.n_zones)]
    specs = [AgentSpec(zone=p, own_buses=part.own_buses(p), shared_keys=tuple(by_zone[p]), agent=AGENT)
             for p in range(part.n_zones)]
    own_buses = {p: np.asarray(s.own_buses, dtype=np.int64) for p, s in enumerate(specs)}
    own_gens = _zone_gens(net, part.zone_of_bus, part.n_zones)
    ramp = _ramp_limits(config, horizon)
    _bus_rating(config, horizon)  # refuses --clip-loads without public ratings before anything is built
    record = None
    folders = None
    if out_dir is not None:
        record = RunRecord(out_dir, COORDINATOR_COLUMNS, command="powerdp dispatch")
        folders = simulation_folders(out_dir)
        if resume:
            _check_saved(record, config)
            record.verify_inputs("resume")  # the profile and cost files, unchanged
        else:
            record.write_config({**config.to_dict(), "shedding_weight": run_cfg.shedding_weight, "rho_resolved": run_cfg.rho})
            part.to_csv(out_dir / "partition.csv")
            record.record_inputs({"case": case_entry(config.source) if not config.source.startswith("simbench:") else None,
                                  "profiles": file_entry(config.profiles) if config.profiles else None,
                                  "costs": file_entry(config.costs) if config.costs else None,
                                  "partition.csv": file_entry(out_dir / "partition.csv")})
    if config.private:
        say(relation_text(config.relation, config.beta, config.periods, config.adjacency))
    say(f"building {part.n_zones} zone agents ({config.backend} backend)")
    # the zones' models are built once with every generator's largest available output over the horizon; each period
    # then caps it (a model built on period 0's caps could never use more renewable output than at period 0)
    widest = replace(net, pmax=np.maximum(net.pmax, np.asarray(horizon.gen_pmax, dtype=float).max(axis=0)))
    backend = make_backend(config.backend, widest, specs, run_cfg)
    coordinator = Coordinator(len(keys), zone_maps, run_cfg.rho, run_cfg.rho_schedule)
    history: list[dict] = []
    periods: list[dict] = []
    evaluation: dict[str, Any] = {"central_pg": None, "dispatch": []}
    first = 0
    resumed_from = None
    try:
        if resume and record.has_checkpoint():
            state, saved = record.load_checkpoint()
            done = int(state["period"])
            coordinator.load_state_dict(state)
            backend.load_checkpoint(folders, coordinator.round)
            history = list(saved or [])
            periods, evaluation = _load_periods(out_dir / "checkpoint")
            first = done + 1
            resumed_from = first
            log.info("resuming %s at period %d", out_dir, first)
        elif record is not None and config.private:  # each zone journals its releases in its private folder, and the
            backend.open_journals(folders)  # zones' states before period 0 are a checkpoint: every release can be replayed
            _checkpoint(record, folders, backend, coordinator, -1, history, periods, evaluation)
        if record is not None:
            record.start(history)
        setup_s = time.perf_counter() - t_setup
        t_run = time.perf_counter()
        with deferred_stop():
            for k in range(first, config.periods):
                try:
                    row = _period(k, config, horizon, backend, coordinator, own_buses, own_gens, ramp, history, record,
                                  progress, reference, evaluation, run_cfg, part if ac_check else None,
                                  part if ac_evaluation else None, observe)
                except Interrupted:  # inside a period's rounds: the complete periods are kept
                    raise Interrupted(f"interrupted in period {k} of {config.periods}{_kept(out_dir, k)}", None) from None
                except DispatchFailed as exc:
                    raise DispatchFailed(f"{exc}{_kept(out_dir, k)}") from exc
                periods.append(row)
                if record is not None:
                    _checkpoint(record, folders, backend, coordinator, k, history, periods, evaluation)
                    _write_periods(out_dir, periods)
                    if config.private:  # what the zones released so far, for anyone to re-account
                        _write_receipt(out_dir, config, {int(d.zone): d.privacy for d in backend.diagnostics()})
                if progress is not None:
                    progress({"period_done": k, **row})
                if stop_requested() is not None and k < config.periods - 1:
                    raise Interrupted(f"interrupted after period {k} of {config.periods}{_kept(out_dir, k + 1)}", None)
        run_s = time.perf_counter() - t_run
        diags = backend.diagnostics()
    finally:
        backend.close()
    result = _result(config, horizon, run_cfg, part, history, periods, evaluation, diags, setup_s, run_s, resumed_from)
    if out_dir is not None:
        _save(result, out_dir)
    return result


def _kept(out_dir: Path | None, k: int) -> str:
    """What a run stopped in (or before) period ``k`` leaves, for its one-line message."""
    if out_dir is None:
        return " (no output directory: nothing kept)"
    if k == 0 and not (out_dir / "checkpoint" / "state.json").is_file():
        return f"; no period complete in {out_dir} (start it again)"
    kept = f"periods 0-{k - 1} kept" if k > 0 else "no period complete"  # a private day checkpoints before period 0
    return f"; {kept} in {out_dir} (powerdp dispatch --resume {out_dir} continues at period {k})"


def _check_saved(record: RunRecord, config: DispatchConfig) -> None:
    saved = record.read_config()
    saved = {k: v for k, v in saved.items() if k not in ("shedding_weight", "rho_resolved")}
    may_change = ("backend", "workers")
    # a setting added after the run was made is saved as its default (a run of an older version resumes)
    defaults = DispatchConfig(source=config.source, periods=config.periods).to_dict()
    changed = [k for k, v in config.to_dict().items() if k not in may_change and saved.get(k, defaults[k]) != v]
    if changed:
        what = ", ".join(f"{k} {getattr(config, k)!r} (saved: {saved.get(k)!r})" for k in changed)
        raise ConfigError(f"cannot resume {record.directory} with other settings: {what}")


def _bus_rating(config: DispatchConfig, horizon) -> np.ndarray | None:
    """Per bus, the public rated power of its loads (p.u.; 0 at a bus without one) when the perturbed loads are
    clipped (``clip_loads``), else None."""
    if not config.clip_loads:
        return None
    if horizon.load_rating is None:
        raise ConfigError(f"clip_loads: {horizon.source} carries no public load ratings (SimBench's load.sn_mva); "
                          "run without --clip-loads")
    return np.bincount(np.asarray(horizon.load_bus, dtype=np.int64), weights=np.asarray(horizon.load_rating, dtype=float),
                       minlength=horizon.network.n_bus)


def _ramp_limits(config: DispatchConfig, horizon) -> np.ndarray | None:
    """Per generator, the most its p may move between consecutive periods (p.u.; inf for renewables and imports)."""
    if config.ramp is None:
        return None
    net = horizon.network
    kinds = np.asarray(horizon.gen_kind).astype(str)
    return np.where(kinds == "conventional", float(config.ramp) * np.abs(net.pmax), np.inf)


def _period(k, config, horizon, backend, coordinator, own_buses, own_gens, ramp, history, record, progress, reference,
            evaluation, run_cfg, ac_part=None, impl_part=None, observe=None) -> dict[str, Any]:
    """One period: its data to the zones, (re)start, the rounds until the residuals meet the tolerance.

    Its times: ``wall_s``/``cpu_s`` are the dispatch's own (the zones' data, their solves, the coordinator; CPU of
    this process: with the serial backend the zones' too), ``zones_s`` the wall time in the zones' steps,
    ``coordinator_s`` the rest of the rounds; ``evaluation_s``/``evaluation_cpu_s`` the simulation's evaluation
    (every round's diagnostics, the centralized reference, the AC check), which the dispatch's time excludes."""
    from .agent import period_slices

    t0, c0 = time.perf_counter(), time.process_time()
    clock = {"zones": 0.0, "eval": 0.0, "eval_cpu": 0.0}
    z0 = _zone_cpu(backend, own_buses)
    f0 = _failures(backend, own_buses)
    pmax = np.asarray(horizon.gen_pmax[k], dtype=float)
    backend.call("set_period", period_slices(own_buses, own_gens, horizon.pd[k], horizon.qd[k], pmax, k, ramp,
                                             config.cold_start and k > 0, _bus_rating(config, horizon)))
    if config.cold_start or k == 0:  # the flat start projected, zero duals (period 0 always)
        r = coordinator.round
        coordinator.w = np.zeros_like(coordinator.w)
        coordinator.lam = np.zeros_like(coordinator.lam)
        coordinator.start(backend.initialize())
        coordinator.round = r
    tol = config.tolerance

    def step(t: int) -> dict[str, Any]:
        ts = time.perf_counter()
        rho = coordinator.rho
        messages = coordinator.broadcast()
        tz = time.perf_counter()
        updates = backend.step(messages)
        clock["zones"] += time.perf_counter() - tz
        if observe is not None:
            observe(updates)
        res = coordinator.receive(updates)
        primal_rel, dual_rel = relative_residuals(coordinator, res)
        te, ce = time.perf_counter(), time.process_time()
        diags = backend.diagnostics()  # ε spent (the ledger, public) and the evaluation's objective and violation
        clock["eval"] += time.perf_counter() - te
        clock["eval_cpu"] += time.process_time() - ce
        return {
            "period": k, "round": t, "feasibility": res.primal, "dual_residual": res.dual, "primal_relative": primal_rel,
            "dual_relative": dual_rel, "rho": rho, "consensus_norm": float(np.linalg.norm(coordinator.w)),
            "epsilon_spent": float(max(d.epsilon_spent for d in diags)), "wall_s": time.perf_counter() - ts,
            "objective": float(sum(d.objective for d in diags)),
            "max_violation": float(max(d.max_violation for d in diags)),
        }

    def failed(t, detail, result, exc):
        return DispatchFailed(f"period {k}, round {t}: {detail}")

    rounds = Rounds(step=step, partial=lambda rows, stopped: _Partial(), failed=failed,
                    converged=lambda row: _converged(row, tol))
    start = len(history)
    stopped = run_rounds(rounds, coordinator.round + 1, coordinator.round + config.max_rounds, history, record, 0,
                         progress, False)
    rows = history[start:]
    # the zones' implemented dispatch: their true loads, their tie-line flows held at the agreed values (the mean of
    # the last releases); nothing crosses back in a deployment (the evaluation reads it)
    ti = time.perf_counter()
    implemented = {int(z): v for z, v in backend.call("implement", {m.zone: m for m in coordinator.agreed()}).items()
                   if v is not None}
    implemented_s = time.perf_counter() - ti
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    te, ce = time.perf_counter(), time.process_time()
    diags = backend.diagnostics()
    last = rows[-1]
    row: dict[str, Any] = {
        "period": k, "label": str(horizon.labels[k]) if len(horizon.labels) > k else str(k), "rounds": len(rows),
        "stopped": stopped, "feasibility": last["feasibility"], "dual_residual": last["dual_residual"],
        "primal_relative": last["primal_relative"], "dual_relative": last["dual_relative"],
        "epsilon_spent": float(max(d.epsilon_spent for d in diags)),
        "wall_s": wall - clock["eval"], "cpu_s": cpu - clock["eval_cpu"],
        "zones_s": clock["zones"], "coordinator_s": wall - clock["eval"] - clock["zones"],
        "zones_cpu_s": _zone_cpu(backend, own_buses, z0),  # the zones' processes' CPU (each process once); evaluation only
        # private rounds whose local solve failed (the zone released its previous point again; docs/multi_period.md)
        "local_failures": _failures(backend, own_buses) - f0,
        "implemented_solve_s": implemented_s,
    }
    row.update(_evaluate(k, config, horizon, backend, diags, reference, evaluation, ramp, run_cfg, ac_part))
    row.update(implemented_row(k, horizon, implemented, evaluation, impl_part))
    row["evaluation_s"] = clock["eval"] + time.perf_counter() - te
    row["evaluation_cpu_s"] = clock["eval_cpu"] + time.process_time() - ce
    return row


def relative_residuals(coordinator: Coordinator, res) -> tuple[float, float]:
    """The period's stopping residuals, scale-free (Boyd et al. 2011, §3.3.1; from released values only):
    primal ‖w − Bz‖ / max(‖w‖, ‖Bz‖) over the zones' stacked copies, and dual ρ‖B(w − w_prev)‖ / ‖λ‖, the dual
    residual against the duals (the prices of the shared variables, $/h per p.u.). Neither depends on the per-unit
    base or on the costs' unit, unlike the absolute residuals (p.u. and $/h per p.u.)."""
    gidx = coordinator.gidx
    w = coordinator.w[gidx]
    scale_p = max(float(np.linalg.norm(w)), float(np.linalg.norm(coordinator.released)), 1e-12)
    dual = coordinator.rho * float(np.linalg.norm((coordinator.w - coordinator.w_prev)[gidx]))
    scale_d = max(float(np.linalg.norm(coordinator.lam)), 1e-12)
    return res.primal / scale_p, dual / scale_d


def _zone_cpu(backend, zones, before: dict[int, float] | None = None):
    """The CPU seconds of the processes hosting the zones (pid → seconds), or with ``before`` the sum of their
    increase since then; the runner's own process when the zones run in it (serial)."""
    import os

    now = {int(pid): float(cpu) for pid, cpu in backend.call("process_cpu", {int(z): None for z in zones}).values()}
    if before is None:
        return now
    own = os.getpid()
    return float(sum(cpu - before.get(pid, 0.0) for pid, cpu in now.items() if pid != own or len(now) == 1))


def _failures(backend, zones) -> int:
    """The zones' failed local solves so far (the simulation's evaluation)."""
    return int(sum(max(int(n), 0) for n in backend.call("period_failures", {int(z): None for z in zones}).values()))


def _converged(row: dict[str, Any], tol: float) -> bool:
    """The period's stopping rule: both relative residuals at most ``tol`` (:func:`relative_residuals`)."""
    return row["primal_relative"] <= tol and row["dual_relative"] <= tol


class _Partial:
    """What a failed period leaves: the complete periods, already saved."""

    def save(self, directory) -> None:
        return None


def _evaluate(k, config, horizon, backend, diags, reference, evaluation, ramp, run_cfg, ac_part=None) -> dict[str, Any]:
    """The simulation's evaluation of period ``k``: every zone's data, the centralized reference and, with the
    partition ``ac_part``, the AC check of the period's dispatch."""
    net = horizon.network
    base = net.base_mva
    pg = np.zeros(net.n_gen)
    for part in backend.call("period_dispatch", {int(d.zone): None for d in diags}).values():
        for g, v in part.items():
            pg[int(g)] = v
    evaluation["dispatch"].append(pg.tolist())
    kinds = np.asarray(horizon.gen_kind).astype(str)
    pmax = np.asarray(horizon.gen_pmax[k], dtype=float)
    cost = float(sum(d.objective for d in diags))
    generation = float(sum(d.cost for d in diags))
    offset = float(horizon.curtailment_offset[k])
    row: dict[str, Any] = {
        "cost": cost,
        "generation_cost": generation,
        # the generation cost with curtailment as a cost: non-renewables' cost + the price of the curtailed energy
        # (the renewables' −π·p plus the constant π·available the objective leaves out; docs/profiles.md)
        "curtailment_offset": offset,
        "cost_with_curtailment": generation + offset,
        "shedding_mw": float(sum(d.shedding_mw for d in diags)),
        "load_mw": float(np.sum(horizon.pd[k]) * base),
        "import_mw": float(pg[kinds == "import"].sum() * base),
        "curtailment_mw": float(np.clip(pmax - pg, 0, None)[kinds == "renewable"].sum() * base),
        "max_violation": float(max(d.max_violation for d in diags)),
        "centralized_cost": None, "relative_cost_gap": None,
    }
    if reference:
        central = _central(k, horizon, evaluation, ramp, run_cfg)
        if central is not None:
            row["centralized_cost"] = central
            row["relative_cost_gap"] = abs(cost - central) / max(abs(central), 1e-9)
    if ac_part is not None:
        row.update(ac_check_row(k, horizon, backend, diags, ac_part))
    return row


def _central(k, horizon, evaluation, ramp, run_cfg) -> float | None:
    """The centralized SOC OPF of period ``k`` (its ramp limits around its own previous dispatch)."""
    from ...opf.centralized import solve_opf

    net_k = horizon.network_at(k)
    prev = evaluation.get("central_pg")
    if ramp is not None and prev is not None:
        prev = np.asarray(prev, dtype=float)
        net_k.pmin = np.maximum(net_k.pmin, prev - ramp)
        net_k.pmax = np.maximum(np.minimum(net_k.pmax, prev + ramp), net_k.pmin)
    net_k = replace(net_k, pandapower_net=None, pandapower_gens=None)
    try:
        res = solve_opf(net_k, objective=run_cfg.objective, convention=run_cfg.convention, flows=run_cfg.flows,
                        shedding_weight=run_cfg.shedding_weight, solver="ipopt")
    except PowerDPError as exc:
        log.warning("period %d: centralized reference solve failed: %s", k, exc)
        return None
    if not res.success:
        log.warning("period %d: centralized reference solve failed (%s)", k, res.status_name)
        return None
    evaluation["central_pg"] = np.asarray(res.dispatch.pg, dtype=float).tolist()
    evaluation["central_result"] = res  # the period's centralized dispatch, for the operator's evaluation
    return float(res.objective)


def _checkpoint(record, folders, backend, coordinator, k, history, periods, evaluation) -> None:
    """After period ``k``: the zones' own states (their folders), the periods (the coordinator's columns in
    ``periods.*``, the simulation's evaluation in ``periods_evaluation.*``: the two views apart here too), then the
    coordinator's state."""
    def evaluation_files(d: Path) -> None:
        backend.save_checkpoint(folders)
        coord = [{c: r[c] for c in PERIOD_COORDINATOR_COLUMNS if c in r} for r in periods]
        ev = [{c: v for c, v in r.items() if c == "period" or c not in PERIOD_COORDINATOR_COLUMNS} for r in periods]
        save_state(d / "periods_evaluation", {"periods": jsonable(ev), "central_pg": evaluation["central_pg"],
                                              "dispatch": evaluation["dispatch"]})
        save_state(d / "periods", {"periods": jsonable(coord), "columns": list(periods[0]) if periods else []})

    record.save_checkpoint({**coordinator.state_dict(), "period": k}, history,
                           coordinator.round, agents=evaluation_files,
                           prune=lambda d: backend.prune_checkpoints(folders, coordinator.round))


def _load_periods(d: Path) -> tuple[list[dict], dict[str, Any]]:
    """The periods and the evaluation's state of a checkpoint, the two views joined (a checkpoint of an earlier version
    kept them in one ``periods`` file)."""
    coord = load_state(d / "periods")
    ev = load_state(d / "periods_evaluation") if (d / "periods_evaluation.json").is_file() else coord
    by_period = {int(r["period"]): dict(r) for r in ev["periods"]}
    order = list(coord.get("columns") or [])
    periods = []
    for r in coord["periods"]:
        row = {**by_period.get(int(r["period"]), {}), **dict(r)}
        periods.append({**{c: row[c] for c in order if c in row}, **row})  # the columns in the order they were made
    return periods, {"central_pg": ev.get("central_pg"), "dispatch": [list(map(float, r)) for r in ev.get("dispatch", [])]}


def _write_periods(out_dir: Path, periods: list[dict]) -> None:
    frame = pd.DataFrame(periods)
    for view, cols in ((COORDINATOR_VIEW, [c for c in PERIOD_COORDINATOR_COLUMNS if c in frame]), (EVALUATION_VIEW, list(frame))):
        (out_dir / view).mkdir(parents=True, exist_ok=True)
        atomic_write(out_dir / view / "periods.csv", lambda fh, cols=cols: frame[cols].to_csv(fh, index=False))


def _result(config, horizon, run_cfg, part, history, periods, evaluation, diags, setup_s, run_s, resumed_from):
    frame = pd.DataFrame(periods)
    eps_total = {int(d.zone): float(d.epsilon_spent) for d in diags}
    per_period_max = float(frame["epsilon_spent"].diff().fillna(frame["epsilon_spent"]).max()) if len(frame) else 0.0
    claim = None
    if config.private:
        claim = max(eps_total.values()) if config.relation == "user" else per_period_max
    gaps = [g for g in frame.get("relative_cost_gap", pd.Series(dtype=float)).tolist() if g is not None and np.isfinite(g)]
    summary: dict[str, Any] = {
        "source": horizon.source, "algorithm": config.algorithm, "n_zones": part.n_zones, "n_periods": config.periods,
        "period_minutes": float(horizon.period_minutes), "relation": config.relation,
        "relation_text": relation_text(config.relation, config.beta, config.periods, config.adjacency) if config.private else None,
        "beta": config.beta if config.private else None, "adjacency": config.adjacency if config.private else None,
        "epsilon_total": eps_total, "epsilon_claim": claim,
        "target_epsilon": config.target_epsilon, "private": config.private,
        "noise_source": "seeded" if config.seed is not None else "secret",
        "rounds_total": int(frame["rounds"].sum()) if len(frame) else 0,
        "mean_rounds": float(frame["rounds"].mean()) if len(frame) else None,
        "stopped": {str(k): int(v) for k, v in frame["stopped"].value_counts().items()} if len(frame) else {},
        # wall_s: the whole run, the evaluation included; per period: the dispatch's own time, the evaluation apart
        "wall_s": run_s, "setup_s": setup_s,
        "wall_s_per_period": float(frame["wall_s"].mean()) if len(frame) else None,
        "cpu_s_per_period": float(frame["cpu_s"].mean()) if len(frame) else None,
        "evaluation_s_per_period": float(frame["evaluation_s"].mean()) if "evaluation_s" in frame else None,
        "backend": config.backend, "cold_start": config.cold_start, "resumed_from_period": resumed_from,
        "tolerance": config.tolerance, "max_rounds": config.max_rounds, "ramp": config.ramp,
        # the simulation's evaluation
        "max_relative_cost_gap": max(gaps) if gaps else None,
        "total_cost": float(frame["cost"].sum()) if len(frame) else None,
        "total_shedding_mwh": float(frame["shedding_mw"].sum() * horizon.period_minutes / 60.0) if len(frame) else None,
        "shedding_weight": run_cfg.shedding_weight, "rho": run_cfg.rho,
        "total_cost_with_curtailment": float(frame["cost_with_curtailment"].sum()) if "cost_with_curtailment" in frame else None,
        **implemented_summary(frame),
    }
    dispatch = _tables(horizon, evaluation["dispatch"])
    privacy = {int(d.zone): d.privacy for d in diags if d.privacy is not None}
    return DispatchResult(config=config, periods=frame, history=pd.DataFrame(history), summary=summary, dispatch=dispatch,
                          privacy=privacy)


def _write_receipt(out_dir: Path, config: DispatchConfig, privacy: dict[int, Any]) -> None:
    """``coordinator_view/privacy_receipt.json`` of a private day (docs/privacy.md, "The privacy receipt"): the ledger per
    zone over the horizon, and the relation's claim (user: the horizon's total; event: one period's releases)."""
    from ...runs.receipt import receipt_units, write_receipt

    write_receipt(out_dir, "dispatch", run={
        "algorithm": config.algorithm, "noise_source": "seeded" if config.seed is not None else "secret", "private": True,
        "target_epsilon": config.target_epsilon, "target_delta": config.target_delta, "periods": config.periods,
        "max_rounds": config.max_rounds,
        "claim_scope": "the horizon (the ledger's total)" if config.relation == "user" else "one period's releases",
    }, relation={"name": config.relation, "text": relation_text(config.relation, config.beta, config.periods, config.adjacency), "beta": config.beta,
                                                 "adjacency": config.adjacency},
        units=receipt_units("zone", privacy))


def _tables(horizon, rows: list[list[float]]) -> dict[str, pd.DataFrame]:
    """p_mw per period of every generator, by the horizon's names, in pandapower's result tables (OutputWriter's
    layout: one row per period, one column per element)."""
    if not rows:
        return {}
    net = horizon.network
    pg = np.asarray(rows, dtype=float) * net.base_mva
    kinds = np.asarray(horizon.gen_kind).astype(str)
    names = [str(n) for n in horizon.gen_names]
    index = pd.Index(range(horizon.start, horizon.start + len(rows)), name="period")
    out = {}
    for table in ("res_gen", "res_sgen", "res_ext_grid"):
        cols = [g for g in range(net.n_gen) if RESULT_TABLES.get(kinds[g], "res_gen") == table]
        if cols:
            out[table] = pd.DataFrame(pg[:, cols], columns=[names[g] for g in cols], index=index)
    return out


def _save(result: DispatchResult, out_dir: Path) -> None:
    save_summary_views(out_dir, result.summary, COORDINATOR_KEYS)
    if result.config.private and result.privacy:
        _write_receipt(out_dir, result.config, result.privacy)
    _write_periods(out_dir, result.periods.to_dict("records"))
    for table, frame in result.dispatch.items():
        d = out_dir / EVALUATION_VIEW / table
        d.mkdir(parents=True, exist_ok=True)
        atomic_write(d / "p_mw.csv", lambda fh, frame=frame: frame.to_csv(fh))
