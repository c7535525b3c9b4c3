"""The command line's streams: standard output that names itself in errors, ``--json -``, Python warnings.

Kept apart from cli.py (the commands): how powerdp talks to the terminal, so that no input or environment
(a full disk behind ``> /dev/full``, a closed stdout, a library's warning) ends in a traceback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from pathlib import Path

__all__ = ["OVERWRITE_RULE", "STDOUT_NAME", "NamedStdout", "json_on_stdout", "refuse_existing_output", "route_python_warnings", "write_json"]

#: the one overwrite rule of every command (docs/cli.md, "Output files"; each --help names its --force)
OVERWRITE_RULE = "an existing output file or run directory is never replaced unless --force (or --overwrite) is given"

#: where ``--json -`` writes while :func:`json_on_stdout` has sent everything else to standard error
_json_stream = None


def route_python_warnings(verbose: bool = False) -> None:
    """Python warnings become one line, ``powerdp: warning: ...``, without the source line that raised them
    (a user reads what is wrong, not where in powerdp it was noticed), once per command: a command that builds
    the same mechanism for each of many runs (``powerdp audit``) says it once, not once a run. Libraries'
    deprecation notices are for their users' developers: shown only with ``-v``."""
    import warnings

    log = logging.getLogger("powerdp.warnings")
    shown: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None):
        if not verbose and issubclass(category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning)):
            return
        text = " ".join(str(message).split())
        text = text if issubclass(category, UserWarning) else f"{text} ({category.__name__})"
        if text in shown:
            return
        shown.add(text)
        log.warning("%s", text)

    warnings.showwarning = show


def refuse_existing_output(path: Path | None, flag: str, force: bool) -> None:
    """The overwrite rule (:data:`OVERWRITE_RULE`) for an output file, checked before any work is done:
    ``flag PATH`` naming an existing file is refused unless ``force``; a directory is refused always."""
    from ..errors import ConfigError

    if path is None or str(path) == "-":
        return
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a directory; it names a file")
    if path.exists() and not force:
        raise ConfigError(f"{flag} {path} exists; give --force to replace it")


def write_json(path: Path, data) -> None:
    """``--json PATH`` (atomically: a failed write keeps the old file), or standard output for ``--json -``."""
    from ..files.atomic import atomic_write_text
    from ..files.jsonable import jsonable

    text = json.dumps(jsonable(data), indent=2) + "\n"
    if str(path) == "-":
        (_json_stream or sys.stdout).write(text)
    else:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)


STDOUT_NAME = "standard output"


class NamedStdout:
    """sys.stdout whose write errors name it (`No space left on device` alone says nothing of where)."""

    def __init__(self, stream):
        self.stream = stream

    def _named(self, exc: OSError) -> OSError:
        return type(exc)(exc.errno, exc.strerror, STDOUT_NAME) if exc.errno is not None else exc

    def write(self, text):
        try:
            return self.stream.write(text)
        except OSError as exc:
            raise self._named(exc) from None

    def flush(self):
        try:
            return self.stream.flush()
        except OSError as exc:
            raise self._named(exc) from None

    def __getattr__(self, name):
        return getattr(self.stream, name)


@contextlib.contextmanager
def json_on_stdout(path):
    """With ``--json -`` standard output carries the JSON alone (a pipe into ``jq`` or ``json.load`` works):
    everything else the command prints, its progress and its summary, goes to standard error meanwhile."""
    global _json_stream
    if path is None or str(path) != "-":
        yield
        return
    real = sys.stdout
    _json_stream, sys.stdout = real, sys.stderr
    try:
        yield
    finally:
        sys.stdout, _json_stream = real, None
