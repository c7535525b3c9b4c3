"""Ctrl-C and SIGTERM: stop a run at the end of its current round, with its files complete.

The command line installs :func:`stop_signals` around a command. A first Ctrl-C
(SIGINT) or SIGTERM during a run's rounds asks the runner to stop once the
round in progress is complete; the runner then writes its checkpoint and summary
and raises :class:`powerdp.errors.Interrupted`. Outside the rounds (loading,
setup, a centralized solve), or on a second signal, it interrupts at once
(``KeyboardInterrupt``); the run directory then still holds the history of every
finished round and the last checkpoint.

A ``KeyboardInterrupt`` can be lost on its way out: raised while the main thread is inside a call from C back into
Python (llvmlite's ctypes callbacks, which numba calls while it loads a compiled kernel) it is printed as "Exception
ignored" and dropped; raised inside a C extension's module initialisation that clears errors (seen importing
``pandas._libs.json``) it vanishes without a word; either way the command went on to its end and exited 0 (CI,
tests/test_signals.py). So once the handler has raised, a watcher thread waits for the interruption to leave the
command (:func:`stop_signals` exits): while the main thread is not handling an exception (our interruption, or what
a handler made of it, on its way out through cleanup code) at two looks in a row, the interruption was lost, and the
watcher delivers it again; and a command that returns normally with an interruption pending is interrupted there.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
import time
from contextlib import contextmanager

from ..errors import Interrupted

__all__ = ["STOP_SIGNALS", "deferred_stop", "pool_task_stop", "stop_requested", "stop_signals"]

STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s is not None)


class _State:
    installed = False  # stop_signals() is active (the command line)
    armed = False  # inside a run's rounds: a stop can wait for the end of the round
    requested: int | None = None  # the signal that asked to stop
    interrupting: int | None = None  # the signal whose KeyboardInterrupt is on its way out of the command
    watcher: threading.Thread | None = None


_STATE = _State()
WATCH_SECONDS = 0.05


def _handler(signum, frame) -> None:
    if _STATE.armed and _STATE.requested is None:
        _STATE.requested = signum
        return
    _interrupt(signum)


def _interrupt(signum: int) -> None:
    _STATE.interrupting = signum
    if _STATE.watcher is None or not _STATE.watcher.is_alive():
        _STATE.watcher = threading.Thread(target=_watch, args=(threading.main_thread().ident,),
                                          name="powerdp-stop-watcher", daemon=True)
        _STATE.watcher.start()
    raise KeyboardInterrupt


def _pending() -> bool:
    return _STATE.installed and _STATE.interrupting is not None


def _handling_an_exception(thread_id: int | None) -> bool:
    current = sys._current_exceptions().get(thread_id)
    if isinstance(current, tuple):  # Python 3.11: (type, value, traceback); 3.12 on: the exception
        current = current[1]
    return current is not None


def _watch(main_thread: int | None) -> None:
    idle = 0
    while _pending():
        time.sleep(WATCH_SECONDS)
        if not _pending():
            return
        idle = 0 if _handling_an_exception(main_thread) else idle + 1
        signum = _STATE.interrupting
        if idle >= 2 and signum is not None and _STATE.installed:
            _thread.interrupt_main(signum)  # lost: deliver it again (the handler runs in the main thread, as before)
            idle = 0


def _unraisable_hook(previous):
    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _STATE.interrupting is not None:
            return  # ours, dropped by a callback: the watcher delivers it again; nothing to print
        previous(unraisable)

    return hook


@contextmanager
def _interruptions_end_as_such():
    """What leaves with an interruption pending is the interruption: a normal return (it was lost on the way) and an
    error it caused (a C extension's initialisation turns it into ``ImportError: PyCapsule_Import could not import
    module "pandas"``) both end as a KeyboardInterrupt. :class:`~powerdp.errors.Interrupted` is the interruption
    already, with the command's own words (a sweep's "finished runs are kept in ..."), and stays."""
    try:
        yield
    except Interrupted:
        raise
    except Exception:
        if _STATE.interrupting is not None:
            raise KeyboardInterrupt from None
        raise
    if _STATE.interrupting is not None:  # a normal return with one pending: it was lost on the way, and ends here
        raise KeyboardInterrupt


@contextmanager
def _installed(handlers: dict):
    """The command's (or pool task's) signal ``handlers`` and the unraisable hook, for the block; then what was there."""
    previous = {s: signal.getsignal(s) for s in handlers}
    previous_hook = sys.unraisablehook
    for s, h in handlers.items():
        signal.signal(s, h)
    sys.unraisablehook = _unraisable_hook(previous_hook)
    _STATE.installed = True
    try:
        with _interruptions_end_as_such():
            yield
    finally:
        _STATE.installed = False  # first: the watcher stops
        for s, h in previous.items():
            signal.signal(s, h)
        sys.unraisablehook = previous_hook
        _STATE.requested = None
        _STATE.interrupting = None
        _STATE.armed = False


@contextmanager
def stop_signals():
    """Handle SIGINT and SIGTERM alike: deferred to the end of a round inside a run, else at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _installed({s: _handler for s in STOP_SIGNALS}):
        yield


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
    _interrupt(signum)


@contextmanager
def pool_task_stop():
    """A run inside a process-pool worker (sweeps): the pool's SIGTERM (Ctrl-C in the parent, ``stop_pool``)
    stops the run at the end of its round with its checkpoint written, however often it comes; Ctrl-C itself
    stays the parent's (ignored here, :func:`powerdp.engine.backends.process.worker_signals`)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return
    with _installed({signal.SIGTERM: _pool_task_handler}):
        yield
