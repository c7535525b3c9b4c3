"""Output directories: never overwrite a run by accident, never let two processes write one at once.

* :func:`prepare_run_dir` refuses a directory that already holds a run unless
  asked to overwrite it (then it removes that run's files, and only those), and
  refuses a path that is a file.
* :class:`DirectoryLock` is an exclusive lock on a directory, held by one process
  at a time: ``fcntl.flock`` on ``DIR/.powerdp.lock`` where it exists (the kernel
  drops it when its holder dies, so a stale lock never blocks), else a lock file
  created with ``O_EXCL`` that holds the holder's pid (a lock of a dead process
  is taken over).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Self

from ..errors import ConfigError

__all__ = ["RUN_FILES", "DirectoryLock", "ensure_dir", "holds_run", "prepare_run_dir"]

LOCK_NAME = ".powerdp.lock"
# everything a run writes into its directory (RunResult.save, the runner), and the mixed top-level files of
# earlier versions (results.LEGACY_FILES; the tables and pandapower.json among them removed only beside such a
# history or summary: a run's, not a user's file of the same name)
RUN_FILES = ("config.json", "inputs.json", "partition.csv", "failure.txt",
             "history.csv", "history.csv.tmp", "summary.json", "consensus.csv")
LEGACY_TABLES = ("generators.csv", "buses.csv", "branches.csv", "zones.csv", "pandapower.json",
                 "model.npz", "privacy.json", "lines.csv")  # the last three: learning runs', the DC market's
RUN_DIRS = ("checkpoint", "zones", "zones.private", "agents.private", "clients.private", "coordinator_view",
            "simulation_evaluation")


def ensure_dir(path: str | Path, what: str = "output directory") -> Path:
    """Create ``path`` (and its parents); an error naming it when that is impossible."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} is an existing file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {what} {path}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path} is not writable")
    return path


def holds_run(directory: str | Path) -> bool:
    d = Path(directory)
    return any((d / name).exists() for name in ("config.json", "history.csv", "summary.json", "checkpoint", "coordinator_view"))


def prepare_run_dir(directory: str | Path, overwrite: bool = False, resume: bool = False) -> Path:
    """Check (and create) a run's output directory before anything is computed.

    A directory holding a run is refused unless ``resume`` (continue it) or
    ``overwrite`` (its run's files are removed; other files are left alone).
    """
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise ConfigError(f"output directory {d} is an existing file, not a directory")
    if resume:
        if not d.is_dir():
            raise ConfigError(f"{d} holds no run to resume (no such directory)")
        refuse_links(d)
        return d
    if d.is_dir():
        refuse_links(d)
    if (d / "sweep.json").is_file():
        raise ConfigError(f"{d} holds a sweep (sweep.json); give the run a directory of its own")
    if holds_run(d):
        if not overwrite:
            raise ConfigError(
                f"{d} already holds a run; give another --out, --overwrite to replace it, or --resume {d} to continue it"
            )
        remove_run_files(d)
    return ensure_dir(d)


def refuse_links(d: Path) -> None:
    """No symbolic link among a run's files and folders: a run writes (and --overwrite removes) only inside its
    own directory, never through a link into another place."""
    names = [*RUN_FILES, *RUN_DIRS, LOCK_NAME, *LEGACY_TABLES]
    paths = [d / n for n in names]
    for sub in RUN_DIRS:
        if (d / sub).is_dir() and not (d / sub).is_symlink():
            paths.extend((d / sub).iterdir())
    for p in paths:
        if p.is_symlink():
            raise ConfigError(
                f"{p} is a symbolic link; powerdp writes only into the run directory's own files and folders: "
                "remove the link (or use another --out)"
            )


def remove_run_files(d: Path) -> None:
    legacy = (d / "history.csv").is_file() or (d / "summary.json").is_file()
    for name in (*RUN_FILES, *(LEGACY_TABLES if legacy else ())):
        try:
            (d / name).unlink()
        except FileNotFoundError:
            pass
    for name in RUN_DIRS:
        shutil.rmtree(d / name, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


class DirectoryLock:
    """An exclusive, process-wide lock on ``directory`` (context manager)."""

    def __init__(self, directory: str | Path, what: str = "run"):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self.what = what
        self._fd: int | None = None

    def _busy(self, holder: str) -> ConfigError:
        return ConfigError(
            f"{self.directory} is in use by another powerdp {self.what} ({holder}); wait for it to end or use another directory"
        )

    @staticmethod
    def _holder(path: Path) -> str:
        try:
            pid = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return "pid unknown"
        return f"pid {pid}"

    def acquire(self) -> DirectoryLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return self._acquire_exclusive_file()
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise self._busy(self._holder(self.path)) from None
                raise
            try:  # the file may have been removed by its previous holder between open and flock
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def _acquire_exclusive_file(self) -> DirectoryLock:  # pragma: no cover - exercised where fcntl is missing
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = self._holder(self.path)
                pid = int(holder.split()[1]) if holder.startswith("pid ") and holder.split()[1].isdigit() else -1
                if _pid_alive(pid):
                    raise self._busy(holder) from None
                try:  # a stale lock of a process that is gone
                    self.path.unlink()
                except FileNotFoundError:
                    pass
                continue
            os.write(fd, f"{os.getpid()}\n".encode())
            self._fd = fd
            return self
        raise self._busy(self._holder(self.path))

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink()
        except OSError:
            pass
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
