"""Writing output files so that a failure never costs the last good copy, and says which file failed.

Every file is written to ``NAME.tmp`` beside it and renamed over ``NAME`` only when complete
(``os.replace`` is atomic on POSIX), so a full disk, a file-size limit or a kill in the middle leaves
the previous version in place and no half-written file. A failure is an :class:`OutputError`
naming the file (exit status 2, as every output path that cannot be written).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..errors import OutputError

__all__ = ["OutputError", "atomic_write", "atomic_write_text", "atomic_to_csv", "write_error"]


def write_error(path: str | Path, exc: OSError) -> OutputError:
    reason = exc.strerror or str(exc) or type(exc).__name__
    return OutputError(f"cannot write {path}: {reason}")


def atomic_write(path: str | Path, write: Callable[[object], None], binary: bool = False, opener=None) -> Path:
    """Call ``write(fh)`` on ``PATH.tmp``, then rename it to ``path``; on failure remove the temporary,
    keep ``path`` as it was and raise :class:`OutputError` naming ``path``. ``opener``: as :func:`open`'s
    (``powerdp.files.private`` creates the temporary 0600 with it)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb" if binary else "w", opener=opener, **({} if binary else {"newline": "", "encoding": "utf-8"})) as fh:
            write(fh)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(exc, OutputError):
            raise
        raise write_error(path, exc) from None
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda fh: fh.write(text))


def atomic_to_csv(frame, path: str | Path, **kwargs) -> Path:
    """``frame.to_csv(path, **kwargs)`` (a pandas DataFrame), atomically."""
    return atomic_write(path, lambda fh: frame.to_csv(fh, **kwargs))
