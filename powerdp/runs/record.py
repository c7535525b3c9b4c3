"""One run's directory as every application writes it: written once here, used by power flow, the market,
federated and vertical learning (docs/architecture.md, "The run directory").

A :class:`RunRecord` is opened on an output directory with the application's allow-list of coordinator
columns, and writes:

* ``config.json``: the run's public configuration (atomically);
* ``inputs.json``: every input file with its SHA-256 (:mod:`powerdp.runs.inputs`), checked again on resume;
* the two views' ``history.csv`` (:mod:`powerdp.runs.views`): rewritten whole at the start, one line per round after;
* ``checkpoint/``: the coordinator's state and history columns (``state.*``) and the evaluation's history columns
  (``evaluation.*``), crash-consistent: the evaluation first, then the state naming the round;
* ``failure.txt`` with the partial result of a run that stopped on an error.

Every file is written whole or not at all; a write that fails names the file and says what is kept.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import ConfigError
from ..files.atomic import OutputError, atomic_write_text
from ..files.checkpoint import load_state, refuse_pickles, save_state, state_exists
from ..files.jsonable import jsonable
from . import views
from .inputs import record_inputs, record_run_file, verify_inputs

log = logging.getLogger(__name__)

__all__ = ["RunRecord", "check_resume", "read_config_file"]


class RunRecord:
    """The files of one run in ``directory`` (module docstring). ``coordinator_columns`` is the application's
    allow-list of history columns; ``history_columns`` fixes the order of the columns (None: as the rows come).
    ``command`` is the command that resumes the run, for messages (``powerdp run``, ``powerdp learn``)."""

    def __init__(self, directory: str | Path, coordinator_columns: list[str], history_columns: list[str] | None = None,
                 command: str = "powerdp run"):
        self.directory = Path(directory)
        self.coordinator_columns = list(coordinator_columns)
        self.history_columns = list(history_columns) if history_columns is not None else None
        self.command = command
        self._header = False  # the history files need their column names (the columns come with the first row)

    # ----------------------------------------------------------------- config, inputs
    def write_config(self, doc: dict[str, Any]) -> None:
        """``config.json``, and its SHA-256 with the run's inputs (a resume refuses an edited one)."""
        atomic_write_text(self.directory / "config.json", json.dumps(jsonable(doc), indent=2) + "\n")
        record_run_file(self.directory)

    def read_config(self) -> dict[str, Any]:
        return read_config_file(self.directory / "config.json")

    def record_inputs(self, entries: dict[str, dict | None]) -> None:
        record_inputs(self.directory, entries)

    def verify_inputs(self, action: str = "resume") -> dict[str, dict]:
        return verify_inputs(self.directory, action)

    # ----------------------------------------------------------------- history
    def start(self, history: list[dict], legacy: tuple[str, ...] = ()) -> None:
        """The history files as round 1 (or the first resumed round) starts: rewritten from ``history`` (which
        drops rounds logged after the checkpoint); a stale failure and summary of an earlier attempt removed."""
        views.remove_legacy_files(self.directory, legacy)
        frame = pd.DataFrame(history, columns=self.history_columns) if self.history_columns else pd.DataFrame(history)
        if len(frame.columns):
            views.save_history_views(self.directory, frame, self.coordinator_columns)
            self._header = False
        else:  # no column known before the first row
            for view in (views.COORDINATOR_VIEW, views.EVALUATION_VIEW):
                (self.directory / view / "history.csv").unlink(missing_ok=True)
            self._header = True
        for stale in ("failure.txt", f"{views.COORDINATOR_VIEW}/summary.json", f"{views.EVALUATION_VIEW}/summary.json"):
            (self.directory / stale).unlink(missing_ok=True)

    def append(self, row: dict[str, Any]) -> None:
        """One line per round in each view's history (repr floats: round-trip exact); a failed append is an error
        naming the file (a resume rewrites the history from the checkpoint)."""
        columns = self.history_columns or list(row)
        try:
            views.append_history_views(self.directory, row, self.coordinator_columns, columns, header=self._header)
        except OSError as exc:
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            raise OutputError(f"cannot write {where}{exc.strerror or exc}; {self.kept()}") from None
        self._header = False

    # ----------------------------------------------------------------- checkpoint
    @property
    def checkpoint_dir(self) -> Path:
        return self.directory / "checkpoint"

    def has_checkpoint(self) -> bool:
        return state_exists(self.checkpoint_dir / "state")

    def save_checkpoint(self, state: dict[str, Any], history: list[dict], t: int,
                        agents: Callable[[Path], None] | None = None, prune: Callable[[Path], None] | None = None) -> None:
        """Crash-consistent checkpoint after round ``t`` (no pickle: .npz + JSON): first the agents' own files
        (``agents(dir)``: each on its host), then the evaluation's history rows, then the coordinator's ``state``
        naming the round with its history rows; only then older agent files are pruned (``prune(dir)``). A crash at
        any point leaves a complete earlier checkpoint."""
        d = self.checkpoint_dir
        try:
            d.mkdir(parents=True, exist_ok=True)
            if agents is not None:
                agents(d)
            coord, ev = split_rows(history, self.coordinator_columns)  # the two views stay apart here too
            save_state(d / "evaluation", {"history": ev})
            save_state(d / "state", {**state, "history": coord})
        except OSError as exc:  # a full disk, a file-size limit: the previous checkpoint stays complete
            raise self._checkpoint_error(t, exc) from None
        if prune is not None:
            prune(d)

    def load_checkpoint(self) -> tuple[dict[str, Any], list[dict] | None]:
        """(the coordinator's state, the history rows) of the last checkpoint; one line naming the file otherwise.
        The rows are None for a checkpoint of an earlier version that kept them in the history files only."""
        d = self.checkpoint_dir
        refuse_pickles(d)  # an older version's pickles: refused without being opened
        if not state_exists(d / "state"):
            missing = [d / name for name in ("state.json", "state.npz") if not (d / name).is_file()]
            raise ConfigError(f"{self.directory} has no checkpoint to resume from ({' and '.join(map(str, missing))} "
                              f"{'is' if len(missing) == 1 else 'are'} missing)")
        state = load_state(d / "state")
        evaluation = load_state(d / "evaluation") if state_exists(d / "evaluation") else {"history": []}
        try:
            int(state["round"])
            history = join_rows(list(state.pop("history")), list(evaluation["history"])) if "history" in state else None
        except Exception as exc:  # noqa: BLE001 - another program's files
            raise ConfigError(f"{d / 'state.json'} is not a readable checkpoint ({type(exc).__name__}: {exc})") from None
        return state, history

    def _checkpoint_error(self, t: int, exc: OSError) -> OutputError:
        d = self.checkpoint_dir
        for partial in d.rglob("*.tmp"):  # the unfinished files of this attempt; the last complete checkpoint is intact
            try:
                partial.unlink()
            except OSError:
                pass
        where = str(exc).removeprefix("cannot write ") if isinstance(exc, OutputError) else (
            f"{exc.filename}: {exc.strerror or exc}" if exc.filename else f"a checkpoint file in {d}: {exc.strerror or exc}"
        )
        kept = (
            f"the history and the last complete checkpoint are kept in {self.directory} ({self.command} --resume "
            f"{self.directory} continues once the file can be written)" if self.has_checkpoint()
            else f"the history is kept in {self.directory}, but no checkpoint to resume from"
        )
        return OutputError(f"cannot write the checkpoint of round {t}, {where}; {kept}")

    # ----------------------------------------------------------------- endings
    def kept(self) -> str:
        """What a stopped run leaves behind, for its one-line message."""
        if self.has_checkpoint():
            return f"history and last checkpoint kept in {self.directory} ({self.command} --resume {self.directory} continues)"
        return f"history kept in {self.directory}, no checkpoint to resume from"

    def save_failed(self, save: Callable[[Path], None], failure: str) -> None:
        """A failed run's files (``save(dir)``: the partial result) and ``failure.txt``; a write failure here must
        not hide the failure being reported."""
        try:  # the failure first: under MPI the job is aborted soon after, and failure.txt is what says why
            atomic_write_text(self.directory / "failure.txt", failure)
            save(self.directory)
        except OSError as exc:
            log.warning("could not write the failed run's files: %s", exc)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A run's saved ``config.json`` as a JSON object, every problem an error naming the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise ConfigError(f"{path.parent}: no such directory (give the --out folder of a run)") from None
        raise ConfigError(f"{path.parent} holds no run (missing {path.name})") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable run configuration ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a readable run configuration (a JSON object is expected)")
    return data


def split_rows(history: list[dict], coordinator_columns: list[str]) -> tuple[list[dict], list[dict]]:
    """The history rows as the coordinator's columns and as ``round`` + the evaluation's (JSON-ready)."""
    coord = [jsonable({c: row[c] for c in coordinator_columns if c in row}) for row in history]
    ev = [jsonable({c: v for c, v in row.items() if c == "round" or c not in coordinator_columns}) for row in history]
    return coord, ev


def join_rows(coord: list[dict], ev: list[dict]) -> list[dict]:
    """Undo :func:`split_rows` (a checkpoint of an earlier version holds whole rows in ``coord`` and no ``ev``)."""
    by_round = {int(row["round"]): row for row in ev}
    return [{**by_round.get(int(row["round"]), {}), **row} for row in coord]


def check_resume(saved: dict[str, Any], now: dict[str, Any], may_change: tuple[str, ...], directory: Path,
                 budget: str | None = None) -> None:
    """Refuse to resume the run saved in ``directory`` with settings that would change its results: every key of
    ``saved`` but those of ``may_change`` must be equal in ``now``. ``budget``: the one-line refusal of a run whose
    noise was calibrated to a total budget over its rounds, when the rounds change (None: no such budget)."""
    if budget is not None:
        raise ConfigError(budget)
    changed = [k for k in saved if k not in may_change and saved[k] != now.get(k)]
    if changed:
        what = ", ".join(f"{k} {now.get(k)!r} (saved: {saved[k]!r})" for k in changed)
        raise ConfigError(f"cannot resume {directory} with other settings: {what}; a resumed run may change only "
                          f"{', '.join(may_change)}")
