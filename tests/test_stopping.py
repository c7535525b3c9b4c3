"""Ctrl-C and SIGTERM inside a command (powerdp/runs/stopping.py): an interruption is never lost.

Two ways one was (CI, test_signals.py's "imports" case: the run went on to its end and exited 0): a
KeyboardInterrupt raised inside a call from C back into Python (numba loading a cached kernel calls llvmlite's
ctypes callbacks) is dropped by ctypes; one raised inside a C extension's initialisation that clears errors (pandas's
json module) vanishes. The second is stood for here by Python code that swallows it, as a bare ``except:`` would."""

from __future__ import annotations

import ctypes
import signal
import sys
import time
from contextlib import contextmanager

import pytest

from powerdp.runs.loop import Rounds, run_rounds
from powerdp.runs.stopping import stop_requested, stop_signals

pytestmark = pytest.mark.skipif(not hasattr(signal, "raise_signal"), reason="needs signal.raise_signal")


def _interrupted_inside_a_c_callback(signum: int) -> None:
    """Raise ``signum`` so that its handler runs inside a ctypes callback, as it does when the signal arrives while
    the main thread is in a C call that calls back into Python."""

    def callback() -> None:
        signal.raise_signal(signum)
        for _ in range(1000):  # the handler runs here, at the loop's check for pending signals
            pass

    ctypes.CFUNCTYPE(None)(callback)()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_stop_swallowed_by_a_c_callback_is_delivered_again(signum):
    seen = []
    hook = sys.unraisablehook
    sys.unraisablehook = seen.append  # what Python would have printed as "Exception ignored"
    try:
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            with stop_signals():
                _interrupted_inside_a_c_callback(signum)
                while time.monotonic() - t0 < 5.0:  # the command goes on: the stop must reach it here
                    time.sleep(0.001)
        assert time.monotonic() - t0 < 1.0
    finally:
        sys.unraisablehook = hook
    assert seen == [], "our own interruption was reported as an ignored exception"
    assert sys.unraisablehook is hook


def test_other_unraisable_exceptions_still_reach_the_previous_hook():
    seen = []
    hook = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        with stop_signals():

            def callback() -> None:
                raise ValueError("a library's own error in a callback")

            ctypes.CFUNCTYPE(None)(callback)()
            time.sleep(0.1)
    finally:
        sys.unraisablehook = hook
    assert [type(u.exc_value) for u in seen] == [ValueError]


def _busy(seconds: float) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        pass


def _interrupted_and_caught(then: BaseException | None = None) -> None:
    """SIGINT now; its KeyboardInterrupt is caught here and swallowed (``then`` None: a bare ``except``, a C extension
    that clears the error) or replaced by ``then``."""
    try:
        signal.raise_signal(signal.SIGINT)
        _busy(1.0)
    except KeyboardInterrupt:
        if then is not None:
            raise then from None


def test_a_stop_swallowed_without_a_word_is_delivered_again():
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with stop_signals():
            _interrupted_and_caught()  # a library swallows it
            _busy(5.0)  # the command goes on: the interruption must reach it here
    assert time.monotonic() - t0 < 1.0


def test_a_command_that_ends_right_after_swallowing_a_stop_is_interrupted_as_it_ends():
    with pytest.raises(KeyboardInterrupt):
        with stop_signals():
            _interrupted_and_caught()


def test_an_error_the_interruption_caused_ends_as_the_interruption():
    """Seen once in 120 interrupted runs of the installed command: the interruption landed in pandas's C extension
    initialisation, which raised ``ImportError: PyCapsule_Import could not import module "pandas"`` instead: a
    traceback and exit status 1. An error that leaves with an interruption pending is the interruption."""
    with pytest.raises(KeyboardInterrupt):
        with stop_signals():
            _interrupted_and_caught(ImportError('PyCapsule_Import could not import module "pandas"'))


def test_an_interruption_a_command_put_in_its_own_words_keeps_them():
    from powerdp.errors import Interrupted

    with pytest.raises(Interrupted, match="finished runs are kept"):
        with stop_signals():
            _interrupted_and_caught(Interrupted("interrupted; finished runs are kept in OUT"))


def test_an_error_without_an_interruption_is_left_as_it_is():
    with pytest.raises(ImportError):
        with stop_signals():
            raise ImportError("a real one")


def test_after_an_interruption_the_entry_point_prints_no_finalizer_noise(monkeypatch):
    import powerdp.cli
    import powerdp_entry

    hook = sys.unraisablehook
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        monkeypatch.setattr(powerdp.cli, "main", lambda: 0)
        assert powerdp_entry.main() == 0 and sys.unraisablehook is hook
        monkeypatch.setattr(powerdp.cli, "main", lambda: powerdp_entry.EXIT_INTERRUPTED)
        assert powerdp_entry.main() == 130 and sys.unraisablehook is powerdp_entry._quiet
    finally:
        sys.unraisablehook = hook
        for s, h in handlers.items():
            signal.signal(s, h)


@contextmanager
def _closing(cleaned: list):
    try:
        yield
    finally:
        _busy(0.6)
        cleaned.append(True)


def _cleanup_in_finally(cleaned: list) -> None:
    try:
        signal.raise_signal(signal.SIGINT)
        _busy(1.0)
    finally:
        _busy(0.6)
        cleaned.append(True)


def _cleanup_in_except(cleaned: list) -> None:
    try:
        signal.raise_signal(signal.SIGINT)
        _busy(1.0)
    except BaseException:
        _busy(0.6)
        cleaned.append(True)
        raise


def _cleanup_in_a_context_manager(cleaned: list) -> None:
    with _closing(cleaned):
        signal.raise_signal(signal.SIGINT)
        _busy(1.0)


@pytest.mark.parametrize("command", [_cleanup_in_finally, _cleanup_in_except, _cleanup_in_a_context_manager],
                         ids=["finally", "except-and-raise", "context-manager"])
def test_cleanup_on_the_way_out_is_not_interrupted_again(command):
    """An interruption on its way out runs cleanup code (a backend closing its workers, a sweep stopping its pool):
    however long that takes, the watcher does not deliver the interruption again into it."""
    cleaned: list = []
    with pytest.raises(KeyboardInterrupt):
        with stop_signals():
            command(cleaned)
    assert cleaned == [True]


def test_no_watcher_is_left_behind():
    from powerdp.runs import stopping

    with pytest.raises(KeyboardInterrupt):
        with stop_signals():
            signal.raise_signal(signal.SIGTERM)
            _busy(1.0)
    stopping._STATE.watcher.join(timeout=1.0)
    assert not stopping._STATE.watcher.is_alive()


class _Record:
    directory = "D"
    command = "powerdp run"

    def append(self, row):
        pass


def _rounds(stop_in: int, after: list[str]):
    def step(t):
        if t == stop_in:
            signal.raise_signal(signal.SIGINT)
        return {"round": t}

    def partial(history, why):
        class _Partial:
            def save(self, directory):
                after.append(f"partial {why} after {history[-1]['round']}")

        return _Partial()

    return Rounds(step=step, partial=partial, failed=None, checkpoint=lambda history: after.append(
        f"checkpoint {history[-1]['round']}"))


def test_a_stop_during_the_rounds_ends_the_run_after_its_round():
    from powerdp.errors import Interrupted

    after: list[str] = []
    with pytest.raises(Interrupted):
        with stop_signals():
            run_rounds(_rounds(2, after), 1, 5, [], _Record(), 1)
    assert after == ["checkpoint 1", "checkpoint 2", "partial interrupted after 2"]
    assert stop_requested() is None


def test_a_stop_in_the_last_round_lets_the_run_finish():
    """The round in progress was the last one: the run is complete, and it ends as a finished run."""
    after: list[str] = []
    with stop_signals():
        assert run_rounds(_rounds(5, after), 1, 5, [], _Record(), 1) == "rounds"
    assert after == [f"checkpoint {t}" for t in range(1, 6)]
