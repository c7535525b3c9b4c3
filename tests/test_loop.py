"""The one round loop (powerdp/runs/loop.py): when it checkpoints."""

from __future__ import annotations

import pytest

from powerdp.runs import loop
from powerdp.runs.loop import Rounds, run_rounds


class _Record:
    """What run_rounds needs of a RunRecord: somewhere to append rows."""

    directory = "D"
    command = "powerdp run"

    def append(self, row):
        pass


def _run(every, clock, rounds=10):
    """Rounds 1..rounds, each ``clock`` seconds long; the rounds after which a checkpoint was written."""
    now = [0.0]
    saved = []

    def step(t):
        now[0] += clock
        return {"round": t}

    def checkpoint(history):
        saved.append(history[-1]["round"])

    import unittest.mock

    with unittest.mock.patch.object(loop.time, "monotonic", lambda: now[0]):
        run_rounds(Rounds(step=step, partial=None, failed=None, checkpoint=checkpoint), 1, rounds, [], _Record(), every)
    return saved


@pytest.mark.parametrize("clock, expected", [
    (0.001, [10]),  # 5 000 one-millisecond rounds of a DC market: no checkpoint before the last round
    (12.0, [3, 6, 9, 10]),  # 12 s rounds: one checkpoint every 30 s, and the last round
])
def test_by_default_checkpoints_come_by_time(clock, expected):
    """Issue 38: ``--model dc --out`` took 47 s against 5.6 s without ``--out``: a checkpoint every 10 of 5 000 short
    rounds. The default (``checkpoint_every`` None) now checkpoints when 30 s have passed since the last one."""
    assert loop.CHECKPOINT_SECONDS == 30.0
    assert _run(None, clock) == expected


def test_an_explicit_interval_counts_rounds_and_zero_turns_them_off():
    assert _run(4, 100.0) == [4, 8, 10]
    assert _run(0, 100.0) == []
