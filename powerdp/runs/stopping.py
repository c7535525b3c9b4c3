"""Ctrl-C and SIGTERM: stop a run at the end of its current round, with its files complete.

The command line installs :func:`stop_signals` around a command. A first Ctrl-C
(SIGINT) or SIGTERM during a run's rounds asks the runner to stop once the
round in progress is complete; the runner then writes its checkpoint and summary
and raises :class:`powerdp.errors.Interrupted`. Outside the rounds (loading,
setup, a centralized solve), or on a second signal, it interrupts at once
(``KeyboardInterrupt``); the run directory then still holds the history of every
finished round and the last checkpoint.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

__all__ = ["STOP_SIGNALS", "deferred_stop", "pool_task_stop", "stop_requested", "stop_signals"]

STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s is not None)


class _State:
    installed = False  # stop_signals() is active (the command line)
    armed = False  # inside a run's rounds: a stop can wait for the end of the round
    requested: int | None = None  # the signal that asked to stop


_STATE = _State()


def _handler(signum, frame) -> None:
    if _STATE.armed and _STATE.requested is None:
        _STATE.requested = signum
        return
    raise KeyboardInterrupt


@contextmanager
def stop_signals():
    """Handle SIGINT and SIGTERM alike: deferred to the end of a round inside a run, else at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, _handler)
    _STATE.installed = True
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _STATE.installed = False
        _STATE.requested = None
        _STATE.armed = False


@contextmanager
def deferred_stop():
    """Inside: a stop signal only sets :func:`stop_requested` (when :func:`stop_signals` is active). Nested (a
    dispatch's periods around each period's round loop), leaving the inner block keeps the outer one armed."""
    outer = _STATE.armed
    _STATE.armed = _STATE.installed
    try:
        yield
    finally:
        _STATE.armed = outer


def stop_requested() -> int | None:
    """The signal number that asked the run to stop, or None."""
    return _STATE.requested


def _pool_task_handler(signum, frame) -> None:
    if _STATE.armed:  # inside the rounds: finish the round (checkpoint and all), then stop; repeats change nothing
        if _STATE.requested is None:
            _STATE.requested = signum
        return
    raise KeyboardInterrupt


@contextmanager
def pool_task_stop():
    """A run inside a process-pool worker (sweeps): the pool's SIGTERM (Ctrl-C in the parent, ``stop_pool``)
    stops the run at the end of its round with its checkpoint written, however often it comes; Ctrl-C itself
    stays the parent's (ignored here, :func:`powerdp.engine.backends.process.worker_signals`)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _pool_task_handler)
    _STATE.installed = True
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _STATE.installed = False
        _STATE.requested = None
        _STATE.armed = False
