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
    DIR/zones/zone_P.csv          each zone's final solution (variable, index, value): zone-private
    DIR/checkpoint/               what --resume needs: the coordinator's state and history columns (state.*),
                                  the evaluation's history columns (evaluation.*), each zone's private folder

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
from ...opf.tables import Dispatch, ResultTables
from .config import RunConfig

__all__ = ["RunResult", "HISTORY_COLUMNS", "OLD_HISTORY_NAMES", "COORDINATOR_COLUMNS", "COORDINATOR_KEYS",
           "COORDINATOR_VIEW", "EVALUATION_VIEW", "LEGACY_FILES", "split_views", "split_history", "summary_path",
           "read_summary", "read_history", "VIEW_LABELS", "save_summary_views", "save_history_views",
           "append_history_views", "evaluation_columns"]

#: the folders of the two views of a run (never mixed)
COORDINATOR_VIEW = "coordinator_view"
EVALUATION_VIEW = "simulation_evaluation"
#: history columns the coordinator computes from what it receives (and its own clock); all others are evaluation
COORDINATOR_COLUMNS = ["round", "feasibility", "dual_residual", "wall_s", "epsilon_spent", "rho"]
#: summary keys of the coordinator's view (an allow-list: any other key is the simulation's evaluation)
COORDINATOR_KEYS = (
    "case", "algorithm", "objective", "n_zones", "n_shared", "load_values", "rounds", "stopped", "shedding_weight",
    "final_feasibility", "final_dual_residual", "wall_s", "setup_s", "local_solver", "epsilon_total", "epsilon_per_step",
    "epsilon_basic", "target_epsilon", "target_delta", "private", "noise_source", "privacy_warnings", "backend", "hosts",
    "resumed_from",
)

#: how each view's summary.json says whose it is
VIEW_LABELS = {
    COORDINATOR_VIEW: "the coordinator's view: what a deployment publishes",
    EVALUATION_VIEW: "the simulation's evaluation: needs every zone's data; never published",
}

#: the mixed top-level files of run directories written before the views were split (still read by load)
LEGACY_FILES = ("history.csv", "summary.json", "consensus.csv", "generators.csv", "buses.csv", "branches.csv",
                "zones.csv", "pandapower.json")

#: history columns renamed since: old name → new name (runs written before still load)
OLD_HISTORY_NAMES = {"ipopt_s": "solver_s"}

HISTORY_COLUMNS = [
    "round",
    "noise_magnitude",
    "objective",
    "feasibility",
    "dual_residual",
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
        from ...grid.network import load_case

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
        for sub in (d / "zones", coord, evaluation):
            sub.mkdir(parents=True, exist_ok=True)
        # each file written whole or not at all (fileio.py): a full disk keeps the last good copy and names the file
        atomic_write_text(d / "config.json", json.dumps(jsonable(self.config.to_dict()), indent=2) + "\n")
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
        for zone, sol in self.zone_solutions.items():
            keys = list(sol)
            atomic_to_csv(_key_frame(keys, [sol[k] for k in keys]), d / "zones" / f"zone_{zone}.csv", index=False)
        if self.tables is not None:
            self.tables.save(evaluation)
        remove_legacy_files(d)
        return d

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
        legacy = _is_legacy(d)
        coord = d if legacy else d / COORDINATOR_VIEW
        evaluation = d if legacy else d / EVALUATION_VIEW
        history = read_history(d)
        summary = read_summary(d)
        data = json.loads(summary_path(d).read_text())  # read_summary checked it
        cons = _read(coord / "consensus.csv", lambda p: pd.read_csv(p, float_precision="round_trip"), ["variable", "index", "value"])
        keys = [(v, _index(i)) for v, i in zip(cons["variable"], cons["index"])]
        sols = {}
        for f in sorted((d / "zones").glob("zone_*.csv")):
            frame = _read(f, lambda p: pd.read_csv(p, float_precision="round_trip"), ["variable", "index", "value"])
            sols[int(f.stem.split("_")[1])] = {
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
            tables=_read(evaluation, ResultTables.load, []),  # None without evaluation, or for runs older than the tables
        )


def split_history(history: pd.DataFrame, columns: list[str] = COORDINATOR_COLUMNS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the coordinator's columns, ``round`` + every other column): the allow-list ``columns`` (a power-flow
    run's :data:`COORDINATOR_COLUMNS`, or another run type's) decides; a column it does not name is the
    simulation's evaluation."""
    coord = [c for c in columns if c in history.columns]
    return history[coord], history[["round"] + [c for c in history.columns if c not in columns]]


def evaluation_columns(all_columns: list[str], columns: list[str] = COORDINATOR_COLUMNS) -> list[str]:
    """``round`` + the columns of ``all_columns`` that the allow-list ``columns`` does not name."""
    return ["round"] + [c for c in all_columns if c not in columns]


def save_history_views(directory: str | Path, history: pd.DataFrame, columns: list[str]) -> None:
    """Write a history in the two views' ``history.csv`` (split by the allow-list ``columns``; each file whole)."""
    d = Path(directory)
    for view, part in zip((COORDINATOR_VIEW, EVALUATION_VIEW), split_history(history, columns)):
        (d / view).mkdir(parents=True, exist_ok=True)
        atomic_to_csv(part, d / view / "history.csv", index=False)


def append_history_views(directory: str | Path, row: dict[str, Any], columns: list[str], all_columns: list[str],
                         header: bool = False) -> None:
    """Append one round to each view's ``history.csv`` (repr floats: round-trip exact); ``all_columns`` fixes the
    order, ``columns`` (the allow-list) the split; ``header``: start the files with their column names."""
    import csv

    d = Path(directory)
    coord = [c for c in columns if c in all_columns]
    for view, names in ((COORDINATOR_VIEW, coord), (EVALUATION_VIEW, evaluation_columns(all_columns, columns))):
        (d / view).mkdir(parents=True, exist_ok=True)
        with open(d / view / "history.csv", "w" if header else "a", newline="") as fh:
            writer = csv.writer(fh)
            if header:
                writer.writerow(names)
            writer.writerow([repr(float(v)) if isinstance(v, float) else v for v in (row.get(c, "") for c in names)])


def save_summary_views(directory: str | Path, summary: dict[str, Any], keys: tuple[str, ...],
                       **coordinator_extra: Any) -> None:
    """Write a summary in the two views' ``summary.json``, split by the allow-list ``keys`` (a key it does not
    name is the simulation's evaluation); ``coordinator_extra`` (the ledger ...) goes beside the coordinator's."""
    d = Path(directory)
    views = split_views(summary, keys)
    for view, extra in ((COORDINATOR_VIEW, coordinator_extra), (EVALUATION_VIEW, {})):
        (d / view).mkdir(parents=True, exist_ok=True)
        atomic_write_text(d / view / "summary.json", json.dumps(jsonable({
            "view": VIEW_LABELS[view], "summary": views[view], **extra}), indent=2) + "\n")


def read_history(directory: str | Path, order: list[str] | None = HISTORY_COLUMNS) -> pd.DataFrame:
    """A run directory's per-round history, both views joined in ``order`` (a power-flow run's
    :data:`HISTORY_COLUMNS`; None: the coordinator's columns, then the evaluation's) (also of a run
    still going, failed or interrupted: the files are appended every round). Without
    ``simulation_evaluation/history.csv`` (a deployment's published view) the evaluation columns are NaN; a run
    directory of an earlier version has one mixed ``history.csv``."""
    d = Path(directory)
    if _is_legacy(d):
        return _read_history(d / "history.csv")
    coord, ev_path = d / COORDINATOR_VIEW / "history.csv", d / EVALUATION_VIEW / "history.csv"
    history = _read_history(coord)
    if ev_path.is_file():
        ev = _read_history(ev_path)
        if len(ev) == len(history) and np.array_equal(ev["round"].to_numpy(), history["round"].to_numpy()):
            history = pd.concat([history, ev.drop(columns="round")], axis=1)
        else:  # a run killed between its two appends: the coordinator's rounds, NaN where the evaluation has none
            history = history.merge(ev.drop_duplicates("round", keep="last"), on="round", how="left")
    if order is None:
        return history
    return history.reindex(columns=order + [c for c in history.columns if c not in order])


def _is_legacy(d: Path) -> bool:
    """A run directory of an earlier version: the mixed top-level history or summary (not yet rewritten)."""
    return (d / "summary.json").is_file() or (d / "history.csv").is_file()


def summary_path(directory: str | Path) -> Path:
    """The file that says a run ended and how (``summary["stopped"]``): ``coordinator_view/summary.json``, or the
    top-level ``summary.json`` of an earlier version's run directory."""
    d = Path(directory)
    return d / "summary.json" if _is_legacy(d) else d / COORDINATOR_VIEW / "summary.json"


def read_summary(directory: str | Path) -> dict[str, Any]:
    """A saved run's summary, both views merged (the coordinator's, then the evaluation's keys); a missing or
    unreadable file is a :class:`ConfigError` naming it."""
    d = Path(directory)
    data = _read(summary_path(d), lambda p: json.loads(p.read_text()), ["summary"])
    if not isinstance(data.get("summary"), dict):
        raise ConfigError(f"{summary_path(d)}: not a powerdp run summary (no 'summary' object)")
    summary = dict(data["summary"])
    ev = d / EVALUATION_VIEW / "summary.json"
    if not _is_legacy(d) and ev.is_file():
        ev_data = _read(ev, lambda p: json.loads(p.read_text()), ["summary"])
        summary.update(ev_data["summary"] if isinstance(ev_data.get("summary"), dict) else {})
    return summary


def remove_legacy_files(d: Path) -> None:
    """Drop an earlier version's mixed top-level files once the run is written in the two views (a resumed or
    re-saved old run); the tables only where they sit beside such a history or summary (a run's, not a user's)."""
    if not _is_legacy(d):
        return
    for name in LEGACY_FILES:
        try:
            (d / name).unlink()
        except FileNotFoundError:
            pass


def _read_history(path: Path) -> pd.DataFrame:
    history = _read(path, lambda p: pd.read_csv(p, float_precision="round_trip"), HISTORY_COLUMNS[:1])
    return history.rename(columns={k: v for k, v in OLD_HISTORY_NAMES.items() if v not in history.columns})


def split_views(summary: dict[str, Any], keys: tuple[str, ...] = COORDINATOR_KEYS) -> dict[str, dict[str, Any]]:
    """``{"coordinator_view": ..., "simulation_evaluation": ...}``: the keys of the allow-list ``keys`` (a
    power-flow run's :data:`COORDINATOR_KEYS`, or another run type's), and the rest."""
    return {
        "coordinator_view": {k: v for k, v in summary.items() if k in keys},
        "simulation_evaluation": {k: v for k, v in summary.items() if k not in keys},
    }


def _read(path: Path, reader, needed: list[str]):
    """``reader(path)``, with every failure (missing, truncated, garbage) a ConfigError naming the file."""
    try:
        data = reader(path)
    except FileNotFoundError:
        raise ConfigError(f"{path} is missing") from None
    except Exception as exc:  # noqa: BLE001 - json, csv and decoding errors of a damaged file
        raise ConfigError(f"{path} is not readable ({type(exc).__name__}: {exc})") from None
    have = set(data.columns) if isinstance(data, pd.DataFrame) else set(data) if isinstance(data, dict) else set()
    missing = [k for k in needed if k not in have]
    if missing:
        raise ConfigError(f"{path} is not a powerdp run file (no {', '.join(missing)})")
    return data


def _index(i: Any) -> Any:
    try:
        return int(i)
    except (TypeError, ValueError):
        return i
