"""Where numba keeps powerdp's compiled kernels: a folder of the user's cache, not the installed package.

With ``@njit(cache=True)`` alone numba writes its cache next to the source, into the package's ``__pycache__``
folders. ``pip uninstall`` does not know those files and leaves them, and the leftover ``site-packages/powerdp``
folder (no ``__init__.py`` any more) is then imported as an empty namespace package ahead of an editable install:
``pip install .``, a run, then ``pip install -e ".[dev]"`` (the README's two steps, in that order) made every
``powerdp`` command fail with an ImportError. :func:`cached_njit` compiles with numba's cache in
:func:`kernel_cache_dir` instead:

* ``$NUMBA_CACHE_DIR`` when the user set it (numba's own setting: it is left alone);
* else ``powerdp/numba`` in the user's cache folder: ``$XDG_CACHE_HOME`` or ``~/.cache`` (``%LOCALAPPDATA%`` on
  Windows). numba mirrors each source file's full path under it, so two installations never share an entry;
* else, when that folder cannot be made or written, numba's default (next to the source), as before.

The folder holds compiled code only, keyed by the kernels' source and argument types: nothing of any run's data. A
file audit of a zone (``powerdp.studies.file_audit``) does not count numba's writes there, as it does not count the
package's ``__pycache__``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["kernel_cache_dir", "cached_njit", "in_kernel_cache"]


def _user_cache_root() -> Path:
    if sys.platform.startswith("win"):
        base = os.environ.get("LOCALAPPDATA")
        return Path(base) if base else Path.home() / "AppData" / "Local"
    base = os.environ.get("XDG_CACHE_HOME")
    return Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"


def _chosen_folder() -> Path | None:
    """``$NUMBA_CACHE_DIR``, else powerdp's folder in the user's cache (not created here); None without a home."""
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given:
        return Path(given)
    try:
        return _user_cache_root() / "powerdp" / "numba"
    except RuntimeError:  # Path.home() without a home
        return None


def kernel_cache_dir() -> Path | None:
    """The folder numba's cache of powerdp's kernels goes to, created if need be (module docstring); None: numba's
    default, next to the source (``$NUMBA_CACHE_DIR`` set by the user is numba's own choice, returned as it is)."""
    folder = _chosen_folder()
    if folder is None or os.environ.get("NUMBA_CACHE_DIR"):
        return folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only file system: numba's default
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def in_kernel_cache(path: str | Path) -> bool:
    """Is ``path`` (resolved) inside the folder of numba's cache of powerdp's kernels? (compiled code: not a zone's
    write.) Creates nothing."""
    folder = _chosen_folder()
    if folder is None:
        return False
    return Path(os.path.realpath(path)).is_relative_to(Path(os.path.realpath(folder)))


def cached_njit(**options: Any) -> Callable[[Callable], Any]:
    """``numba.njit(cache=True, **options)`` with the cache in :func:`kernel_cache_dir`.

    numba picks a function's cache folder when the function is decorated (from ``numba.core.config.CACHE_DIR``); the
    setting is changed for that moment only, so a user's own cached functions keep numba's default."""
    from numba import njit
    from numba.core import config

    def decorate(fn: Callable) -> Any:
        folder = None if config.CACHE_DIR else kernel_cache_dir()
        if folder is None:
            return njit(cache=True, **options)(fn)
        config.CACHE_DIR = str(folder)
        try:
            return njit(cache=True, **options)(fn)
        finally:
            config.CACHE_DIR = ""

    return decorate
