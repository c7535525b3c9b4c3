"""The ``powerdp`` command's entry point: Ctrl-C and SIGTERM are handled before anything heavy is imported.

Importing powerdp (pandas, Pyomo, pandapower, scipy) takes a second or more; a signal in that time used to end
in a ``KeyboardInterrupt`` traceback (SIGINT) or a silent exit 143 (SIGTERM). This module lives outside the
``powerdp`` package, whose ``__init__`` imports all of that, so that its first act can be to install the
handlers: until the command installs its own (a run stops at the end of its round, powerdp.runs.stopping),
and again after it returns, a stop signal prints one line and exits with status 130 at once. Nothing has been
written yet at that point (and every output file of powerdp is written atomically), so nothing is lost.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["main"]

EXIT_INTERRUPTED = 130
_SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s is not None)


def _stop_at_once(signum, frame) -> None:
    try:
        os.write(2, b"powerdp: interrupted\n")
    finally:
        os._exit(EXIT_INTERRUPTED)


def main() -> int:
    """``powerdp ARGS``: install the stop handlers, then import and run the command line."""
    for s in _SIGNALS:
        signal.signal(s, _stop_at_once)
    from powerdp.cli import main as run_command_line

    status = run_command_line()
    _forget_handled_interrupts()
    if status == EXIT_INTERRUPTED:  # objects the interruption left half-built complain as they are collected
        sys.unraisablehook = _quiet
    return status


def _quiet(unraisable) -> None:
    """After an interruption: a finalizer's error (llvmlite's ``ObjectRef.__del__`` on an object whose ``__init__`` was
    interrupted: "'PassBuilder' object has no attribute '_as_parameter_'") is not printed after `powerdp: interrupted`."""


def _forget_handled_interrupts() -> None:
    """A KeyboardInterrupt that passed through an ``eval`` or ``exec`` of a string (``collections.namedtuple`` and
    ``dataclasses`` build their classes so, at import) leaves CPython's "unhandled KeyboardInterrupt" flag set, even
    though the command handled it; ``python -m`` then ends the process by SIGINT after it exits with 130. Each
    evaluation of a string clears that flag first (``run_eval_code_obj`` in Python/pythonrun.c), so one more does."""
    eval("None")  # noqa: S307 - a constant string, evaluated for the side effect above


if __name__ == "__main__":
    sys.exit(main())
