"""Results of a distributed run: per-round history, final point, privacy report; files.

A :class:`RunResult` saves to a directory holding the run's two views apart, never mixed in one file
(docs/privacy.md, "What a deployment publishes")::

    DIR/config.json               the resolved RunConfig (public settings)
    DIR/inputs.json, partition.csv  the files the run was made from; the public partition
    DIR/coordinator_view/         what the coordinator holds and a deployment would publish:
        history.csv               per round: residuals, the coordinator's round time, ε spent, ρ (COORDINATOR_COLUMNS)
        consensus.csv             the final consensus point w (variable, index, value)
        summary.json              public settings, residuals, the ledger per zone, noise_source, private (COORDINATOR_KEYS)
    DIR/simulation_evaluation/    what only a simulation holding every zone's data can compute (never published):
        history.csv               per round: objective at the true loads, violations, Σ|ξ|, zone solver work
        summary.json              objective, cost, shedding MW, centralized reference and gap, AC check, zone timings
        generators.csv, buses.csv, branches.csv, zones.csv
                                  the final point in physical units, with the loads (powerdp.opf.tables)
        pandapower.json           the dispatch written into a copy of a pandapower source network
    DIR/zones.private/zone_P/     zone P's own files (0700, files 0600; powerdp.files.zone_folders): solution.csv
                                  (its final solution: variable, index, value), implemented.csv, stats.csv (--no-evaluation: the
                                  evaluation's history.csv has the same figures otherwise), checkpoint/ (a simulation
                                  only: a deployment's zones keep theirs in DEP/zone_P.private/runs/RUN on their hosts)
    DIR/checkpoint/               what --resume needs: the coordinator's state and history columns (state.*),
                                  the evaluation's history columns (evaluation.*)

:meth:`RunResult.load` reads it back, and reads run directories of earlier versions too (their
top-level ``history.csv``, ``summary.json``, ``consensus.csv`` and tables: :data:`LEGACY_FILES`).
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ConfigError
from ...files.atomic import atomic_to_csv, atomic_write_text
from ...files.jsonable import jsonable
from ...files.zone_folders import simulation_folders
from ...opf.tables import Dispatch, ResultTables
from ...runs import views
from ...runs.inputs import record_run_file
from ...runs.views import (
    COORDINATOR_VIEW,
    EVALUATION_VIEW,
    OLD_HISTORY_NAMES,
    VIEW_LABELS,
    append_history_views,
    is_legacy,
    read_file,
    read_summary,
    save_history_views,
    save_summary_views,
    summary_path,
)
from .config import RunConfig

__all__ = ["RunResult", "HISTORY_COLUMNS", "OLD_HISTORY_NAMES", "COORDINATOR_COLUMNS", "COORDINATOR_KEYS",
           "COORDINATOR_VIEW", "EVALUATION_VIEW", "LEGACY_FILES", "split_views", "split_history", "summary_path",
           "read_summary", "read_history", "VIEW_LABELS", "save_summary_views", "save_history_views",
           "append_history_views", "evaluation_columns"]

#: the mixed top-level files of run directories written before the views were split (still read by load)
LEGACY_FILES = ("history.csv", "summary.json", "consensus.csv", "generators.csv", "buses.csv", "branches.csv",
                "zones.csv", "pandapower.json")

#: history columns the coordinator computes from what it receives (and its own clock); all others are evaluation
COORDINATOR_COLUMNS = ["round", "feasibility", "dual_residual", "primal_relative", "dual_relative", "wall_s", "epsilon_spent",
                       "rho"]
#: summary keys of the coordinator's view (an allow-list: any other key is the simulation's evaluation)
COORDINATOR_KEYS = (
    "case", "algorithm", "objective", "n_zones", "n_shared", "load_values", "rounds", "stopped", "shedding_weight",
    "final_feasibility", "final_dual_residual", "stopping_tolerance", "final_primal_relative", "final_dual_relative",
    "consensus_gap_mw", "consensus_gap_mvar", "wall_s", "setup_s", "local_solver", "epsilon_total", "epsilon_per_step",
    "epsilon_basic", "target_epsilon", "target_delta", "private", "noise_source", "privacy_warnings", "backend", "hosts",
    "resumed_from", "zone_run", "network",
)

HISTORY_COLUMNS = [
    "round",
    "noise_magnitude",
    "objective",
    "feasibility",
    "dual_residual",
    "primal_relative",
    "dual_relative",
    "max_violation",
    "solver_iterations",
    "solves",
    "solver_s",
    "wall_s",
    "epsilon_spent",
    "rho",
]


def _key_frame(keys: list[Hashable], values: np.ndarray | list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {"variable": [k[0] for k in keys], "index": [k[1] for k in keys], "value": np.asarray(values, dtype=float)}
    )


@dataclass
class RunResult:
    """Everything a distributed run produced.

    ``history`` has one row per round (columns :data:`HISTORY_COLUMNS`);
    ``consensus`` is the final consensus vector ``w`` with ``shared_keys``;
    ``zone_solutions`` maps zone → {variable key: value} (the released z_p);
    ``privacy`` maps zone → the ledger's report; ``summary`` holds the final
    figures (see :meth:`summary_dict`). ``tables`` holds the final point in physical
    units (``generators``, ``buses``, ``branches``, ``zones``; None without evaluation),
    ``dispatch`` its per-unit arrays (after a run, not after :meth:`load`), ``ac_check``
    the AC check once :meth:`check_ac` has run (``summary["ac_check"]``).
    """

    config: RunConfig
    history: pd.DataFrame
    shared_keys: list[Hashable]
    consensus: np.ndarray
    zone_solutions: dict[int, dict[Hashable, float]] = field(repr=False)
    privacy: dict[int, Any]
    summary: dict[str, Any]
    tables: ResultTables | None = field(default=None, repr=False)
    dispatch: Dispatch | None = field(default=None, repr=False)
    ac_check: Any = field(default=None, repr=False)
    implemented: dict[int, Any] = field(default_factory=dict, repr=False)  # zone → its implemented dispatch (evaluation)

    @property
    def final(self) -> pd.Series:
        return self.history.iloc[-1]

    def _table(self, name: str) -> pd.DataFrame:
        if self.tables is None:
            raise ConfigError("this run has no physical-unit tables (its zones' solutions were not evaluated)")
        return getattr(self.tables, name)

    @property
    def generators(self) -> pd.DataFrame:
        """Per generator: ``p_mw``, ``q_mvar``, ``cost_per_h`` ($/h) (powerdp.opf.tables)."""
        return self._table("generators")

    @property
    def buses(self) -> pd.DataFrame:
        """Per bus: ``vm_pu``, ``vm_kv``, load and shedding in MW and Mvar (powerdp.opf.tables)."""
        return self._table("buses")

    @property
    def branches(self) -> pd.DataFrame:
        """Per branch: MW and Mvar at both ends, losses, ``loading_percent`` (powerdp.opf.tables)."""
        return self._table("branches")

    @property
    def zones(self) -> pd.DataFrame:
        """Per zone: totals of generation, cost, load, shedding, losses and export (powerdp.opf.tables)."""
        return self._table("zones")

    def final_dispatch(self, network=None) -> Dispatch:
        """The run's final point as a :class:`Dispatch` (from the tables, else assembled from the zones' solutions)."""
        if self.dispatch is not None:
            return self.dispatch
        from ...opf.tables import dispatch_from_tables

        net = network if network is not None else self.network()
        if self.tables is None:
            raise ConfigError("this run has no final point: its zones' solutions were not evaluated (--no-evaluation)")
        return dispatch_from_tables(net, self.tables, where="run tables")

    def network(self):
        """The run's network, loaded again from its configuration."""
        from ...grid.loading import load_case

        return load_case(self.config.case, convention=self.config.convention)

    def check_ac(self, network=None, **options: Any):
        """pandapower's AC power flow at the run's final point (:func:`powerdp.opf.pandapower_io.ac_check`).

        Also recorded in ``summary["ac_check"]`` (and so in ``summary.json`` on the next save).
        """
        from ...opf.pandapower_io import ac_check

        net = network if network is not None else self.network()
        self.ac_check = ac_check(net, self.final_dispatch(net), **options)
        self.summary["ac_check"] = self.ac_check.to_dict()
        return self.ac_check

    def to_pandapower(self, network=None):
        """A pandapower network holding the run's final dispatch (a copy of the source net for pandapower cases)."""
        from ...opf.pandapower_io import to_pandapower

        net = network if network is not None else self.network()
        return to_pandapower(net, self.final_dispatch(net)).net

    def summary_dict(self) -> dict[str, Any]:
        return dict(self.summary)

    def views(self) -> dict[str, dict[str, Any]]:
        """The summary split into the coordinator's view and the simulation's evaluation."""
        return split_views(self.summary)

    def to_json(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(jsonable(self.summary), indent=2) + "\n")

    # ----------------------------------------------------------------- files
    def save(self, directory: str | Path) -> Path:
        """Write the run into ``directory``, each view in its own folder (the module's docstring)."""
        d = Path(directory)
        coord, evaluation = d / COORDINATOR_VIEW, d / EVALUATION_VIEW
        for sub in (coord, evaluation):
            sub.mkdir(parents=True, exist_ok=True)
        # each file written whole or not at all (files/atomic.py): a full disk keeps the last good copy and names the file
        atomic_write_text(d / "config.json", json.dumps(jsonable(self.config.to_dict()), indent=2) + "\n")
        record_run_file(d)  # its SHA-256 with the inputs: a resume refuses an edited config.json
        coord_hist, eval_hist = split_history(self.history)
        atomic_to_csv(coord_hist, coord / "history.csv", index=False)
        atomic_to_csv(eval_hist, evaluation / "history.csv", index=False)
        atomic_to_csv(_key_frame(self.shared_keys, self.consensus), coord / "consensus.csv", index=False)
        views = self.views()
        atomic_write_text(coord / "summary.json", json.dumps(jsonable({
            "view": VIEW_LABELS[COORDINATOR_VIEW],
            "summary": views["coordinator_view"],
            "privacy": self.privacy,  # the ledger per zone: data-independent, public
        }), indent=2) + "\n")
        atomic_write_text(evaluation / "summary.json", json.dumps(jsonable({
            "view": VIEW_LABELS[EVALUATION_VIEW],
            "summary": views["simulation_evaluation"],
        }), indent=2) + "\n")
        if self.config.private and self.privacy:  # what each zone released under, for anyone to re-account
            self.save_receipt(d)
        folders = simulation_folders(d)  # the simulation's evaluation holds every zone's solution: zone-private files
        for zone, sol in self.zone_solutions.items():
            keys = list(sol)
            folders.write_csv(_key_frame(keys, [sol[k] for k in keys]), folders.solution_path(zone))
        for zone, imp in self.implemented.items():  # each zone's implemented set-points: its own private file
            keys = list(imp.solution)
            folders.write_csv(_key_frame(keys, [imp.solution[k] for k in keys]), folders.implemented_path(zone))
        if self.tables is not None:
            self.tables.save(evaluation)
        remove_legacy_files(d)
        return d

    def save_receipt(self, directory: str | Path) -> Path:
        """``coordinator_view/privacy_receipt.json`` (docs/privacy.md, "The privacy receipt")."""
        from ...runs.receipt import receipt_units, write_receipt

        cfg = self.config
        return write_receipt(directory, "power_flow", run=privacy_claim(cfg), relation=adjacency_relation(cfg),
                             units=receipt_units("zone", self.privacy))

    @classmethod
    def load(cls, directory: str | Path) -> RunResult:
        """Read a saved run; a missing or unreadable file is a :class:`ConfigError` naming it.

        Reads the two views (the module's docstring); a directory holding only ``config.json`` and
        ``coordinator_view/`` (what a deployment publishes) loads with NaN evaluation columns and no
        tables. Run directories of earlier versions (one mixed ``history.csv``, ``summary.json`` ...
        at the top level) load as before.
        """
        from .config_file import read_config_json

        d = Path(directory)
        config = read_config_json(d / "config.json")
        legacy = is_legacy(d)
        coord = d if legacy else d / COORDINATOR_VIEW
        evaluation = d if legacy else d / EVALUATION_VIEW
        history = read_history(d)
        summary = read_summary(d)
        data = json.loads(summary_path(d).read_text())  # read_summary checked it
        cons = read_file(coord / "consensus.csv", lambda p: pd.read_csv(p, float_precision="round_trip"), ["variable", "index", "value"])
        keys = [(v, _index(i)) for v, i in zip(cons["variable"], cons["index"])]
        sols = {}
        folders = simulation_folders(d)
        files = {int(f.parent.name.split("_")[1]): f for f in folders.root_path.glob("zone_*/solution.csv")}
        for f in (d / "zones").glob("zone_*.csv"):  # earlier versions' zones/zone_P.csv
            files.setdefault(int(f.stem.split("_")[1]), f)
        for zone, f in sorted(files.items()):
            frame = read_file(f, lambda p: pd.read_csv(p, float_precision="round_trip"), ["variable", "index", "value"])
            sols[zone] = {
                (v, _index(i)): float(x) for v, i, x in zip(frame["variable"], frame["index"], frame["value"])
            }
        privacy = {int(k): v for k, v in (data.get("privacy") or {}).items()}
        return cls(
            config=config,
            history=history,
            shared_keys=keys,
            consensus=cons["value"].to_numpy(),
            zone_solutions=sols,
            privacy=privacy,
            summary=summary,
            tables=read_file(evaluation, ResultTables.load, []),  # None without evaluation, or for runs older than the tables
        )


def split_history(history: pd.DataFrame, columns: list[str] = COORDINATOR_COLUMNS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A power-flow run's history as (the coordinator's columns, ``round`` + the evaluation's) (:mod:`powerdp.runs.views`)."""
    return views.split_history(history, columns)


def evaluation_columns(all_columns: list[str], columns: list[str] = COORDINATOR_COLUMNS) -> list[str]:
    return views.evaluation_columns(all_columns, columns)


def read_history(directory: str | Path, order: list[str] | None = HISTORY_COLUMNS) -> pd.DataFrame:
    """A run directory's history, both views joined, in a power-flow run's column order (:mod:`powerdp.runs.views`)."""
    return views.read_history(directory, order)


def split_views(summary: dict[str, Any], keys: tuple[str, ...] = COORDINATOR_KEYS) -> dict[str, dict[str, Any]]:
    """A power-flow run's summary as its two views (:mod:`powerdp.runs.views`)."""
    return views.split_views(summary, keys)


def remove_legacy_files(d: Path) -> None:
    """An earlier version's mixed top-level files of a power-flow run (:data:`LEGACY_FILES`)."""
    views.remove_legacy_files(d, LEGACY_FILES)


def _index(i: Any) -> Any:
    try:
        return int(i)
    except (TypeError, ValueError):
        return i


def privacy_claim(cfg) -> dict[str, Any]:
    """The receipt's ``run`` part of a power-flow (or dispatch) configuration: what the run claims and how."""
    return {"algorithm": cfg.algorithm, "noise_source": cfg.noise_source, "private": bool(cfg.claim_holds),
            "target_epsilon": cfg.target_epsilon, "target_delta": cfg.target_delta, "epsilon_per_step": cfg.epsilon,
            "delta_per_step": cfg.delta, "rounds": cfg.rounds, "local_updates": cfg.local_updates,
            "sensitivity_rule": cfg.sensitivity}


def adjacency_relation(cfg) -> dict[str, Any]:
    """The receipt's neighbouring relation of a power-flow run (docs/privacy.md, "What is private")."""
    text = {"value": f"one load value pd_i or qd_i of the zone moves by at most beta = {cfg.beta:g} p.u.",
            "bus": f"pd_i and qd_i of one bus of the zone both move by at most beta = {cfg.beta:g} p.u."}[cfg.adjacency]
    return {"name": cfg.adjacency, "text": text, "beta": cfg.beta}
