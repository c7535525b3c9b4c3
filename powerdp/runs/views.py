"""The two views of a run directory, written and read the same way for every application.

A run directory holds what the coordinator sees apart from what only a simulation holding every agent's data can
compute, never mixed in one file (docs/privacy.md, "What a deployment publishes")::

    DIR/coordinator_view/          history.csv (the coordinator's columns), summary.json (its keys, the ledger)
    DIR/simulation_evaluation/     history.csv (``round`` + every other column), summary.json (every other key)

Each application names its allow-lists (the coordinator's history columns and summary keys); a column or key it
does not name is the simulation's evaluation. Run directories of earlier versions (one mixed ``history.csv`` and
``summary.json`` at the top) are still read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..files.atomic import atomic_to_csv, atomic_write_text
from ..files.jsonable import jsonable

__all__ = ["COORDINATOR_VIEW", "EVALUATION_VIEW", "VIEW_LABELS", "OLD_HISTORY_NAMES", "split_history", "evaluation_columns",
           "save_history_views", "append_history_views", "save_summary_views", "read_history", "is_legacy", "summary_path",
           "read_summary", "remove_legacy_files", "split_views", "read_file"]

#: the folders of the two views of a run (never mixed)
COORDINATOR_VIEW = "coordinator_view"
EVALUATION_VIEW = "simulation_evaluation"

#: how each view's summary.json says whose it is
VIEW_LABELS = {
    COORDINATOR_VIEW: "the coordinator's view: what a deployment publishes",
    EVALUATION_VIEW: "the simulation's evaluation: needs every zone's data; never published",
}

#: history columns renamed since: old name → new name (runs written before still load)
OLD_HISTORY_NAMES = {"ipopt_s": "solver_s"}


def split_history(history: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the coordinator's columns, ``round`` + every other column): the allow-list ``columns`` (the
    application's coordinator columns) decides; a column it does not name is the
    simulation's evaluation."""
    coord = [c for c in columns if c in history.columns]
    return history[coord], history[["round"] + [c for c in history.columns if c not in columns]]


def evaluation_columns(all_columns: list[str], columns: list[str]) -> list[str]:
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


def read_history(directory: str | Path, order: list[str] | None = None) -> pd.DataFrame:
    """A run directory's per-round history, both views joined in ``order`` (the
    application's history columns; None: the coordinator's columns, then the evaluation's) (also of a run
    still going, failed or interrupted: the files are appended every round). Without
    ``simulation_evaluation/history.csv`` (a deployment's published view) the evaluation columns are NaN; a run
    directory of an earlier version has one mixed ``history.csv``."""
    d = Path(directory)
    if is_legacy(d):
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


def is_legacy(d: Path) -> bool:
    """A run directory of an earlier version: the mixed top-level history or summary (not yet rewritten)."""
    return (d / "summary.json").is_file() or (d / "history.csv").is_file()


def summary_path(directory: str | Path) -> Path:
    """The file that says a run ended and how (``summary["stopped"]``): ``coordinator_view/summary.json``, or the
    top-level ``summary.json`` of an earlier version's run directory."""
    d = Path(directory)
    return d / "summary.json" if is_legacy(d) else d / COORDINATOR_VIEW / "summary.json"


def read_summary(directory: str | Path) -> dict[str, Any]:
    """A saved run's summary, both views merged (the coordinator's, then the evaluation's keys); a missing or
    unreadable file is a :class:`ConfigError` naming it."""
    d = Path(directory)
    data = read_file(summary_path(d), lambda p: json.loads(p.read_text()), ["summary"])
    if not isinstance(data.get("summary"), dict):
        raise ConfigError(f"{summary_path(d)}: not a powerdp run summary (no 'summary' object)")
    summary = dict(data["summary"])
    ev = d / EVALUATION_VIEW / "summary.json"
    if not is_legacy(d) and ev.is_file():
        ev_data = read_file(ev, lambda p: json.loads(p.read_text()), ["summary"])
        summary.update(ev_data["summary"] if isinstance(ev_data.get("summary"), dict) else {})
    return summary


def remove_legacy_files(d: Path, names: tuple[str, ...]) -> None:
    """Drop an earlier version's mixed top-level files once the run is written in the two views (a resumed or
    re-saved old run); the tables only where they sit beside such a history or summary (a run's, not a user's)."""
    if not is_legacy(d):
        return
    for name in names:
        try:
            (d / name).unlink()
        except FileNotFoundError:
            pass


def _read_history(path: Path) -> pd.DataFrame:
    history = read_file(path, lambda p: pd.read_csv(p, float_precision="round_trip"), ["round"])
    return history.rename(columns={k: v for k, v in OLD_HISTORY_NAMES.items() if v not in history.columns})


def split_views(summary: dict[str, Any], keys: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``{"coordinator_view": ..., "simulation_evaluation": ...}``: the keys of the allow-list ``keys`` (the
    application's coordinator keys), and the rest."""
    return {
        "coordinator_view": {k: v for k, v in summary.items() if k in keys},
        "simulation_evaluation": {k: v for k, v in summary.items() if k not in keys},
    }


def read_file(path: Path, reader, needed: list[str]):
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
