"""The one round loop every application runs (power flow, the market, federated and vertical learning).

An application hands :func:`run_rounds` a :class:`Rounds`: how to do round ``t`` (returning its history row),
how to checkpoint, and how to make its result so far. The loop does the rest, the same way for every
application: each row is appended to the two views' history files as the round ends (a killed run keeps its
history), the progress callback sees it, a checkpoint is written every ``checkpoint_every`` rounds (by default, None:
when :data:`CHECKPOINT_SECONDS` have passed since the last one, so a run of 5 000 one-millisecond rounds does not spend
its time writing checkpoints, and a run of slow rounds still checkpoints often enough), a run stops
early when the application's tolerance is met, a failed round saves the partial result with ``failure.txt`` and
raises the application's error, and Ctrl-C or SIGTERM (:mod:`powerdp.runs.stopping`) lets the round in progress
finish, checkpoints, saves the partial result and raises :class:`~powerdp.errors.Interrupted`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import Interrupted, PowerDPError
from .record import RunRecord
from .stopping import deferred_stop, stop_requested

__all__ = ["CHECKPOINT_SECONDS", "Rounds", "run_rounds", "ROUND_FAILURES"]

#: the default checkpoint interval (``checkpoint_every`` None): a checkpoint after the first round that ends at least
#: this long after the last one (and after the last round, at the tolerance, when stopped)
CHECKPOINT_SECONDS = 30.0

#: what a failed round raises: a failed solve, a lost host, a NaN release
ROUND_FAILURES = (PowerDPError, FloatingPointError)


@dataclass
class Rounds:
    """An application's side of the loop."""

    #: round t: broadcast, collect, receive; returns the round's history row (``round`` first)
    step: Callable[[int], dict[str, Any]]
    #: the result so far, given the history rows and how the run stopped ("failed", "interrupted", ...)
    partial: Callable[[list[dict], str], Any]
    #: the error a failed round raises: (round, what went wrong, the partial result) → exception
    failed: Callable[[int, str, Any, BaseException], Exception]
    #: write a checkpoint after the current round (None: the application has none)
    checkpoint: Callable[[list[dict]], None] | None = None
    #: the application's stopping test on a row (None: run every round)
    converged: Callable[[dict[str, Any]], bool] | None = None
    #: also checkpoint after the last round (on top of every ``checkpoint_every``)
    checkpoint_last: bool = True
    #: what else a failed round raises (the sharing agents' NaN checks raise ValueError)
    failures: tuple[type[BaseException], ...] = ROUND_FAILURES
    #: also checkpoint before the first round of a new run (a private run: every release after it can be replayed
    #: from a checkpoint, even one killed before its first periodic checkpoint; privacy/journal.py)
    checkpoint_first: bool = False


def run_rounds(rounds: Rounds, first: int, last: int, history: list[dict], record: RunRecord | None,
               checkpoint_every: int | None = 0, progress: Callable[[dict], None] | None = None, resumed: bool = False) -> str:
    """Run rounds ``first`` … ``last``, appending to ``history``; returns how the run stopped ("rounds" or
    "tolerance"). Raises the application's error for a failed round, :class:`Interrupted` when stopped.
    ``checkpoint_every``: K rounds, 0 never, None by time (:data:`CHECKPOINT_SECONDS`)."""
    every = checkpoint_every if (record is not None and rounds.checkpoint is not None) else 0
    last_checkpoint = first - 1 if resumed else None
    since = time.monotonic()

    def checkpoint(t: int) -> None:
        nonlocal last_checkpoint, since
        if every != 0 and last_checkpoint != t:
            rounds.checkpoint(history)
            last_checkpoint = t
            since = time.monotonic()

    def due(t: int) -> bool:
        if every is None:
            return time.monotonic() - since >= CHECKPOINT_SECONDS
        return bool(every) and t % int(every) == 0

    if every != 0 and rounds.checkpoint_first and not resumed:  # None (by time) checkpoints too
        checkpoint(first - 1)
    with deferred_stop():  # Ctrl-C / SIGTERM during the rounds: finish the round in progress, then stop below
        for t in range(first, last + 1):
            try:
                row = rounds.step(t)
            except rounds.failures as exc:
                partial = rounds.partial(history, "failed")
                detail = str(exc).removeprefix(f"round {t}: ")  # when the error already names the round
                if record is not None:
                    record.save_failed(partial.save, f"round {t}: {detail}\n")
                raise rounds.failed(t, detail, partial, exc) from exc
            history.append(row)
            if record is not None:  # every round, so a killed run keeps its history
                record.append(row)
            if progress is not None:
                progress(row)
            if due(t) or (every != 0 and t == last and rounds.checkpoint_last):
                checkpoint(t)
            if rounds.converged is not None and rounds.converged(row):
                checkpoint(t)
                return "tolerance"
            if stop_requested() is not None and t < last:
                checkpoint(t)
                partial = rounds.partial(history, "interrupted")
                if record is not None:
                    partial.save(record.directory)
                raise Interrupted(interrupted_message(t, last, record, every), partial)
    return "rounds"


def interrupted_message(t: int, last: int, record: RunRecord | None, every: int) -> str:
    msg = f"interrupted after round {t} of {last}"
    if record is None:
        return msg + " (no output directory: nothing kept)"
    if every == 0:
        return msg + f"; history kept in {record.directory}, no checkpoint (--checkpoint-every 0), so it cannot be resumed"
    return msg + f"; history and checkpoint of round {t} in {record.directory} ({record.command} --resume {record.directory} continues)"
