"""Sweeps: grids of distributed runs, fanned out in parallel, resumable, with one tidy table.

A sweep is described by a TOML file (or a :class:`SweepSpec`)::

    [sweep]
    cases = ["case14", "case118"]
    partitions = [{ zones = 3 }, { zones = 4, method = "spectral" }]   # or "area", a CSV file...
    algorithms = ["objl", "outl"]
    epsilons = [0.1, 1.0]          # ε per local step; or instead
    # target_epsilons = [1, 10]    # a total budget per zone; [run] target_delta is then the δ of
    #                              # every run that can use one (Laplace output perturbation: pure ε)
    local_updates = [1, 5]
    seeds = [0, 1, 2]
    # operator_evaluation = true   # each run also solves the centralized reference and evaluates its implemented
    #                              # dispatch and the reference's as an operator would (AC power flow, restoration)

    [run]            # every other RunConfig field, shared by all runs
    rounds = 100
    sensitivity = "paper"

``powerdp sweep FILE --out DIR`` runs the grid (cases × partitions × algorithms
× ε × E × seeds) over a local process pool, or over MPI ranks with
``mpi4py.futures`` when launched as ``mpiexec -n K python -m mpi4py.futures -m
powerdp sweep ...``. Each run saves to ``DIR/runs/RUN_ID/``; a run whose
``coordinator_view/summary.json`` says it ended is skipped, so an interrupted
sweep resumes. The tidy tables are ``DIR/rounds.csv`` (one row per run and
round) and ``DIR/runs.csv`` (one row per run): the simulation's record, both
views of every run joined for analysis (never published); the resolved
specification is saved as ``DIR/sweep.json``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import sys
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..apps.power_flow.config import RunConfig
from ..apps.power_flow.config_file import check_types
from ..apps.power_flow.plan import RESUME_MAY_CHANGE, resolve_coordination, resolve_partition_choice
from ..engine.backends.process import pool_worker_init, stop_pool
from ..errors import ConfigError

__all__ = ["SweepSpec", "load_sweep", "load_toml", "run_sweep", "sweep_tables"]

GRID_KEYS = {"cases", "partitions", "algorithms", "epsilons", "target_epsilons", "local_updates", "seeds"}
OPTION_KEYS = {"operator_evaluation"}  # [sweep] keys that are not a grid axis


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file; errors name the file and the line."""
    path = Path(path)
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    from ..files.text import NotUTF8, read_utf8

    try:
        return tomllib.loads(read_utf8(path))
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except NotUTF8 as exc:
        raise ConfigError(f"{path}: {exc}; a TOML file is expected") from None


@dataclass
class SweepSpec:
    """A grid of runs: the lists below × ``base`` (the shared RunConfig fields)."""

    cases: list[str] = field(default_factory=lambda: ["case14"])
    partitions: list[dict[str, Any]] = field(default_factory=lambda: [{"zones": 3}])
    algorithms: list[str] = field(default_factory=lambda: ["objl"])
    epsilons: list[float] = field(default_factory=lambda: [0.1])
    #: total budgets per zone (budget-first runs, docs/privacy.md); [None]: ε per step from ``epsilons``
    target_epsilons: list[float | None] = field(default_factory=lambda: [None])
    local_updates: list[int] = field(default_factory=lambda: [1])
    seeds: list[int] = field(default_factory=lambda: [0])
    base: dict[str, Any] = field(default_factory=dict)
    source: str = "sweep"
    #: every run also solves the centralized reference and evaluates its implemented dispatch and the reference's as
    #: an operator would (powerdp.opf.ac_evaluation): the runs table's implemented_* columns
    operator_evaluation: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.operator_evaluation, bool):
            raise ConfigError(f"{self.source}: sweep.operator_evaluation must be true or false")
        for name in GRID_KEYS:
            value = getattr(self, name)
            if not isinstance(value, list) or not value:
                raise ConfigError(f"{self.source}: sweep.{name} must be a non-empty list")
        grid_fields = {"case", "zones", "partition", "partition_method", "algorithm", "epsilon", "target_epsilon", "local_updates", "seed"}
        clash = sorted(grid_fields & set(self.base))
        if clash:
            raise ConfigError(f"{self.source}: [run] sets {', '.join(clash)}, which the [sweep] grid sets")
        if self.target_epsilons != [None] and self.epsilons != [0.1]:
            raise ConfigError(f"{self.source}: give sweep.epsilons (ε per step) or sweep.target_epsilons (a total budget), not both")
        self.configs()  # validate every grid point before anything runs

    @staticmethod
    def _partition_fields(p: Any, source: str) -> dict[str, Any]:
        if isinstance(p, int):
            return {"zones": p, "partition": None}
        if isinstance(p, str):
            return {"zones": None, "partition": p}
        if not isinstance(p, dict):
            raise ConfigError(f"{source}: each sweep.partitions entry is a zone count, a source string or a table")
        unknown = sorted(set(p) - {"zones", "method", "source"})
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)} in sweep.partitions (known: zones, method, source)")
        out = {"zones": p.get("zones"), "partition": p.get("source")}
        if "method" in p:
            out["partition_method"] = p["method"]
        return out

    def configs(self) -> list[tuple[str, RunConfig]]:
        """Every run of the grid as (run id, RunConfig), validated."""
        out = []
        budgets = [(eps, None) for eps in self.epsilons] if self.target_epsilons == [None] else [(None, te) for te in self.target_epsilons]
        for case, part, alg, (eps, target), E, seed in itertools.product(
            self.cases, self.partitions, self.algorithms, budgets, self.local_updates, self.seeds
        ):
            fields = {**self.base, "case": case, "algorithm": alg, "local_updates": E, "seed": seed}
            if target is None:
                fields["epsilon"] = eps
            else:
                fields["target_epsilon"] = target
                if not _takes_delta(alg):  # [run] target_delta applies where a δ can be used (module doc)
                    fields.pop("target_delta", None)
            fields.update(self._partition_fields(part, self.source))
            try:
                check_types(fields, self.source)
                cfg = resolve_partition_choice(RunConfig.from_dict(fields, source=self.source))
            except ConfigError as exc:
                budget = f"eps={eps}" if target is None else f"total eps={target}"
                raise ConfigError(f"{self.source}: run {case}/{alg}/{budget}/E={E}/seed={seed}: {exc}") from None
            out.append((run_id(cfg), cfg))
        return _unique_ids(out, self.source)

    def check_inputs(self) -> None:
        """Load every case and partition once, so a missing file or too many zones fails before any solve."""
        from ..apps.power_flow.plan import resolve_partition
        from ..grid.loading import load_case

        seen = set()
        for _, cfg in self.configs():
            key = (cfg.case, cfg.convention, cfg.zones, cfg.partition, cfg.partition_method)
            if key in seen:
                continue
            seen.add(key)
            try:
                net = load_case(cfg.case, convention=cfg.convention)
                resolve_partition(net, cfg)
            except Exception as exc:
                raise ConfigError(f"{self.source}: case {cfg.case!r}, zones {cfg.zones or cfg.partition}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "source"}


def _takes_delta(algorithm: str) -> bool:
    """Whether a budget run of ``algorithm`` can use a total δ > 0: Gaussian runs, and Laplace runs whose
    privacy loss is exact (objective and input perturbation); Laplace output perturbation is pure ε-DP."""
    from ..engine.consensus.algorithms import resolve
    from ..engine.consensus.perturbations import PERTURBATIONS

    try:
        spec = resolve(algorithm)
    except ConfigError:
        return True  # RunConfig names the bad algorithm
    return spec.mechanism == "gaussian" or PERTURBATIONS[spec.perturbation].exact_privacy_loss


def _unique_ids(runs: list[tuple[str, RunConfig]], source: str) -> list[tuple[str, RunConfig]]:
    """Two grid points never share a directory: the same settings twice are refused; two cases or partitions
    whose files have the same name (bundled ``case14`` and ``other/case14.m``) keep the first one's id and
    the others get a short hash of their file's path."""
    import hashlib

    seen: dict[str, RunConfig] = {}
    out = []
    for rid, cfg in runs:
        if rid in seen and seen[rid].to_dict() == cfg.to_dict():
            raise ConfigError(f"{source}: the grid holds run {rid} twice; list each case, partition, algorithm, ε, E and seed once")
        if rid in seen:
            where = f"{Path(str(cfg.case)).resolve() if Path(str(cfg.case)).exists() else cfg.case}|{cfg.partition}"
            rid = f"{rid}-{hashlib.sha256(where.encode()).hexdigest()[:8]}"
            if rid in seen:
                raise ConfigError(f"{source}: two grid entries would both run as {rid}")
        seen[rid] = cfg
        out.append((rid, cfg))
    return out


def run_id(cfg: RunConfig) -> str:
    """A readable, unique directory name of a run inside a sweep."""
    part = f"z{cfg.zones}-{cfg.partition_method}" if cfg.partition is None else Path(str(cfg.partition)).stem
    case = Path(cfg.case).stem
    budget = f"eps{cfg.epsilon:g}" if cfg.target_epsilon is None else f"total{cfg.target_epsilon:g}"
    return f"{case}_{part}_{cfg.algorithm.replace('/', '-')}_{budget}_E{cfg.local_updates}_s{cfg.seed}"


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and validate a sweep TOML file (see module doc)."""
    data = load_toml(path)
    src = str(path)
    unknown = sorted(set(data) - {"sweep", "run"})
    if unknown:
        raise ConfigError(f"{src}: unknown table(s) {', '.join(unknown)}; a sweep file has [sweep] and [run]")
    for table in ("sweep", "run"):
        if not isinstance(data.get(table, {}), dict):
            raise ConfigError(f"{src}: {table} must be a table ([{table}]), not a {type(data[table]).__name__}")
    grid = dict(data.get("sweep", {}))
    if not grid:
        raise ConfigError(f"{src}: no [sweep] grid; a sweep file lists at least sweep.cases (see examples/sweep_small.toml)")
    if "epsilons" in grid and "target_epsilons" in grid:
        raise ConfigError(f"{src}: give sweep.epsilons (ε per step) or sweep.target_epsilons (a total budget), not both")
    bad = sorted(set(grid) - GRID_KEYS - OPTION_KEYS)
    if bad:
        raise ConfigError(f"{src}: unknown key(s) {', '.join(bad)} in [sweep]; known: {', '.join(sorted(GRID_KEYS | OPTION_KEYS))}")
    base = dict(data.get("run", {}))
    known = {f.name for f in dataclasses.fields(RunConfig)}
    bad = sorted(set(base) - known)
    if bad:
        raise ConfigError(f"{src}: unknown key(s) {', '.join(bad)} in [run]; known: {', '.join(sorted(known))}")
    check_types(base, src, "run")
    return SweepSpec(**grid, base=base, source=src)


def _one(run: str, cfg: RunConfig, out: str, evaluation: bool = False) -> tuple[str, str | None]:
    """Run one grid point into out/runs/<run>; returns (run id, error or None). ``evaluation``: the centralized
    reference and the operator's evaluation too (SweepSpec.operator_evaluation)."""
    from ..apps.power_flow.runner import run_distributed
    from ..files.checkpoint import state_exists
    from ..runs.stopping import pool_task_stop

    logging.getLogger("pyomo").setLevel(logging.ERROR)
    d = Path(out) / "runs" / run
    resume = state_exists(d / "checkpoint" / "state")
    try:  # an unfinished run resumes from its checkpoint; one without a checkpoint starts again
        with pool_task_stop():  # the sweep's Ctrl-C: this run ends after its round, checkpoint written
            run_distributed(cfg, out=d, resume=resume, overwrite=not resume, reference=evaluation, ac_evaluation=evaluation)
    except Exception as exc:  # one failed run must not sink the sweep
        return run, f"{type(exc).__name__}: {exc}"
    return run, None


def _executor(jobs: int | None) -> Executor:
    if os.environ.get("POWERDP_SWEEP_EXECUTOR", "") == "mpi" or "mpi4py.futures" in sys.modules:
        from mpi4py.futures import MPIPoolExecutor

        return MPIPoolExecutor()
    return ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1, initializer=pool_worker_init)


def _finished(d: Path) -> bool:
    """A run directory holds a finished run: a summary that does not say it failed or was interrupted."""
    from ..runs.views import summary_path

    path = summary_path(d)
    if not path.is_file():
        return False
    try:
        stopped = json.loads(path.read_text())["summary"].get("stopped")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    return stopped not in ("failed", "interrupted")


def _settings(cfg: RunConfig) -> dict[str, Any]:
    """The settings that decide a run's results (ρ and ω are compared apart: a run records the values it resolved)."""
    return {k: v for k, v in cfg.to_dict().items() if k not in RESUME_MAY_CHANGE and k not in ("rho", "shedding_weight")}


def changed_runs(spec: SweepSpec, out: Path) -> dict[str, str]:
    """Runs of ``spec`` already in ``out`` that were made with other settings: run id → what changed."""
    from ..apps.power_flow.config_file import read_config_json

    changed = {}
    for run, cfg in spec.configs():
        path = out / "runs" / run / "config.json"
        if not path.is_file():
            continue
        try:
            old = read_config_json(path)
        except ConfigError as exc:
            changed[run] = str(exc)
            continue
        a, b = _settings(resolve_coordination(old)), _settings(resolve_coordination(cfg))  # "auto" as the run resolved it
        if old.rounds != cfg.rounds:
            a["rounds"], b["rounds"] = old.rounds, cfg.rounds
        diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        if old.rho is not None and cfg.rho is not None and old.rho != cfg.rho:
            diff.append("rho")
            a["rho"], b["rho"] = old.rho, cfg.rho
        auto = (None, "auto")  # a spec that leaves ω to the run accepts the value the run resolved
        if cfg.shedding_weight not in auto and old.shedding_weight not in auto and old.shedding_weight != cfg.shedding_weight:
            diff.append("shedding_weight")
            a["shedding_weight"], b["shedding_weight"] = old.shedding_weight, cfg.shedding_weight
        if diff:
            changed[run] = ", ".join(f"{k} {a.get(k)!r} → {b.get(k)!r}" for k in diff)
    return changed


def run_sweep(
    spec: SweepSpec,
    out: str | Path,
    jobs: int | None = None,
    progress: Callable[[str, str | None, int, int], None] | None = None,
    overwrite: bool = False,
) -> pd.DataFrame:
    """Run every grid point not already finished; return the per-run table (``runs.csv``).

    Runs already in ``out`` that were made with other settings than ``spec``'s are
    refused (:class:`ConfigError`), or with ``overwrite`` run again; finished runs
    with the same settings are kept. ``out`` is locked while the sweep runs.
    """
    from ..runs.directory import DirectoryLock, ensure_dir, holds_run, remove_run_files

    out = Path(out)
    spec.check_inputs()
    if holds_run(out):
        raise ConfigError(f"{out} holds a single run (config.json); give the sweep a directory of its own")
    ensure_dir(out)
    with DirectoryLock(out, what="sweep"):
        changed = changed_runs(spec, out)
        if changed and not overwrite:
            first = next(iter(changed))
            raise ConfigError(
                f"{out} holds {len(changed)} run(s) made with other settings than {spec.source} "
                f"(e.g. {first}: {changed[first]}); use another --out, or --overwrite to run them again"
            )
        for run in changed:
            remove_run_files(out / "runs" / run)
        (out / "sweep.json").write_text(json.dumps(spec.to_dict(), indent=2, default=str) + "\n")
        configs = spec.configs()
        todo = [(r, c) for r, c in configs if not _finished(out / "runs" / r)]
        total = len(configs)
        done = total - len(todo)
        errors: dict[str, str] = {}
        try:
            (out / "errors.json").unlink()
        except FileNotFoundError:
            pass
        if todo:
            pool = _executor(jobs)
            try:
                futures = [pool.submit(_one, r, c, str(out), spec.operator_evaluation) for r, c in todo]
                for fut in as_completed(futures):
                    run, err = fut.result()
                    done += 1
                    if err:
                        errors[run] = err
                    if progress is not None:
                        progress(run, err, done, total)
            except BaseException:
                stop_pool(pool)
                raise
            pool.shutdown(wait=True)
        if errors:
            (out / "errors.json").write_text(json.dumps(errors, indent=2) + "\n")
        rounds, runs = sweep_tables(out, spec)
        rounds.to_csv(out / "rounds.csv", index=False)
        runs.to_csv(out / "runs.csv", index=False)
    return runs


def run_dirs(out: str | Path) -> list[Path]:
    """The run directories of a sweep directory, or ``[out]`` when ``out`` is one run's directory."""
    from ..runs.views import summary_path

    out = Path(out)
    if summary_path(out).is_file() and not (out / "runs").is_dir():
        return [out]
    return sorted(d for d in (out / "runs").glob("*") if d.is_dir())


PARAM_COLUMNS = [
    "run", "case", "zones", "partition", "partition_method", "algorithm", "epsilon", "target_epsilon", "privacy", "local_updates", "seed", "sensitivity", "eta",
]


#: the implemented dispatch's figures a runs table carries (``implemented_*``, ``reference_*``: the run's summary
#: objects ``implemented`` and ``implemented_reference``; NaN where a run has none)
IMPLEMENTED_FIGURES = ("objective", "cost", "relative_cost_gap", "shedding_mw", "ac_converged", "max_line_loading_percent",
                       "max_voltage_violation_pu", "max_q_violation_mvar", "slack_mismatch_mw", "restoration",
                       "max_p_shift_mw")


def implemented_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """A run summary's implemented dispatch and reference as flat columns (:data:`IMPLEMENTED_FIGURES`)."""
    out: dict[str, Any] = {}
    for key, prefix in (("implemented", "implemented_"), ("implemented_reference", "reference_")):
        obj = summary.get(key) or {}
        for name in IMPLEMENTED_FIGURES:
            if key == "implemented" or name != "objective":
                out[prefix + name] = obj.get(name)
        out[prefix + "direct_max_q_violation_mvar"] = (obj.get("direct") or {}).get("max_q_violation_mvar")
        out[prefix + "direct_max_voltage_violation_pu"] = (obj.get("direct") or {}).get("max_voltage_violation_pu")
    return out


def privacy_label(cfg) -> str:
    """What a run's ε is, for a figure's panel: "non-private", "ε = 1 in total" (a budget), "ε = 0.1 per step"
    (``--epsilon``; a non-private or budgeted run never used it) or "ε = 0.1 for one release" (``--epsilon`` of a run
    that releases its data once: input perturbation, the totals)."""
    if not cfg.private:
        return "non-private"
    if cfg.target_epsilon is not None:
        return f"ε = {cfg.target_epsilon:g} in total"
    return f"ε = {cfg.epsilon:g} " + ("for one release" if cfg.releases_once else "per step")


def sweep_tables(out: str | Path, spec: SweepSpec | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tidy tables of a sweep directory: (rounds, runs)."""
    from ..apps.power_flow.result import RunResult
    from ..runs.views import summary_path

    out = Path(out)
    rows, summaries = [], []
    wanted = {r for r, _ in spec.configs()} if spec is not None else None
    for d in run_dirs(out):
        if not summary_path(d).is_file() or (wanted is not None and d.name not in wanted):
            continue
        res = RunResult.load(d)
        cfg = res.config
        params = {
            "run": d.name, "case": Path(cfg.case).stem, "zones": cfg.zones, "partition": cfg.partition,
            # a given partition (a file, a bundled one, area/zone columns) is labelled by its name
            "partition_method": cfg.partition_method if cfg.partition is None else Path(str(cfg.partition)).stem,
            "algorithm": cfg.algorithm, "epsilon": cfg.epsilon, "target_epsilon": cfg.target_epsilon,
            "privacy": privacy_label(cfg),
            "local_updates": cfg.local_updates, "seed": cfg.seed, "sensitivity": cfg.sensitivity, "eta": str(cfg.eta),
        }
        h = res.history.copy()
        for k, v in params.items():
            h[k] = v
        rows.append(h)
        s = res.summary
        n_zones = s.get("n_zones")
        summaries.append({
            **params,
            "n_zones": n_zones,
            "rounds": s.get("rounds", len(res.history)),
            "final_objective": s.get("final_objective"),
            "final_feasibility": s.get("final_feasibility"),
            "max_violation": s.get("max_violation"),
            "wall_s": s.get("wall_s"),
            "epsilon_total": max(s["epsilon_total"].values()) if s.get("epsilon_total") else 0.0,
            "beta": cfg.beta,
            "load_values": s.get("load_values"),
            "total_shedding_mw": s.get("total_shedding_mw"),
            **implemented_columns(s),
        })
    rounds = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=PARAM_COLUMNS)
    if rows:
        rounds = rounds[PARAM_COLUMNS + [c for c in rounds.columns if c not in PARAM_COLUMNS]]
    return rounds, pd.DataFrame(summaries)
