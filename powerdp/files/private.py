"""Zone-private files on disk: folders created 0700 and files created 0600, whatever the umask.

What a zone keeps to itself (its loads, checkpoints, solution, noise magnitude, log) is written only
through these functions (docs/privacy.md, "Files and permissions"):

* :func:`private_dir` creates a folder (and every missing parent) with mode 0700 from the start
  (``os.mkdir(path, 0o700)``: never wider, whatever the umask); a restrictive umask that strips the
  owner's own bits is undone on the new folder only. An existing folder wider than 0700 (of an older
  version) is narrowed to 0700 before anything is written into it.
* :func:`write_private` writes a file whole or not at all: a temporary created with
  ``O_CREAT | O_EXCL`` and mode 0600 (nobody else can open it at any moment), then renamed over the target.
* :func:`private_tree_problems` lists every folder of a tree that is not 0700 and every file that is not
  0600 (the audit's and the tests' check).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from .atomic import atomic_write, write_error

__all__ = ["DIR_MODE", "FILE_MODE", "private_dir", "write_private", "write_private_text", "write_private_csv",
           "private_tree_problems", "mode_of"]

DIR_MODE = 0o700
FILE_MODE = 0o600


def mode_of(path: str | Path) -> int:
    """The permission bits of ``path`` (not following a final symbolic link)."""
    return stat.S_IMODE(os.lstat(path).st_mode)


def private_dir(path: str | Path) -> Path:
    """Create ``path`` and its missing parents with mode 0700; an existing ``path`` is narrowed to 0700."""
    path = Path(path)
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for p in reversed(missing):
        try:
            os.mkdir(p, DIR_MODE)  # created 0700 & ~umask: never wider than 0700
        except FileExistsError:  # made meanwhile by another zone's host on the same machine
            pass
        if mode_of(p) != DIR_MODE and not p.is_symlink():
            os.chmod(p, DIR_MODE)  # a umask that strips the owner's bits: only ever narrower before
    if path.is_symlink() or not path.is_dir():
        raise NotADirectoryError(f"{path} is not a folder")
    if mode_of(path) != DIR_MODE:
        os.chmod(path, DIR_MODE)  # an older version's 0755 folder: closed before anything is written into it
    return path


def _private_opener(path: str, flags: int) -> int:
    """``open``'s opener for a private temporary: created anew (``O_EXCL``, a stale one of a killed writer removed
    first) with mode 0600, never through a symbolic link."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, flags | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    if stat.S_IMODE(os.fstat(fd).st_mode) != FILE_MODE:
        os.fchmod(fd, FILE_MODE)  # a umask that strips the owner's bits (never wider than 0600 before)
    return fd


def write_private(path: str | Path, write: Callable[[object], None], binary: bool = False) -> Path:
    """Call ``write(fh)`` on a new 0600 temporary beside ``path`` (in a 0700 folder), then rename it to ``path``.

    On failure the temporary is removed, ``path`` stays as it was, and an :class:`~powerdp.errors.OutputError`
    names ``path`` (:func:`powerdp.files.atomic.atomic_write`).
    """
    path = Path(path)
    try:
        private_dir(path.parent)
    except OSError as exc:
        raise write_error(path, exc) from None
    return atomic_write(path, write, binary=binary, opener=_private_opener)


def write_private_text(path: str | Path, text: str) -> Path:
    return write_private(path, lambda fh: fh.write(text))


def write_private_csv(frame, path: str | Path, **kwargs) -> Path:
    """``frame.to_csv`` (a pandas DataFrame) into a private file."""
    return write_private(path, lambda fh: frame.to_csv(fh, **kwargs))


def private_tree_problems(root: str | Path) -> list[str]:
    """Every folder under (and including) ``root`` whose mode is not 0700 and every file not 0600, as lines."""
    root = Path(root)
    out = []
    if not root.exists():
        return out
    entries = [root, *sorted(root.rglob("*"))]
    for p in entries:
        want = DIR_MODE if p.is_dir() and not p.is_symlink() else FILE_MODE
        if p.is_symlink():
            out.append(f"{p} is a symbolic link")
            continue
        got = mode_of(p)
        if got != want:
            out.append(f"{p} has mode {got:04o} (must be {want:04o})")
    return out
