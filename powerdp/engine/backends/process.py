"""The process backend: persistent worker processes, each hosting a group of zones.

An agent's state (its compiled problem, iterate, duals, noise generator) stays in its worker for the
whole run, and only messages cross the pipe. A worker receives the network with the loads of every
bus it does not own set to zero, and ends with its parent.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
from collections.abc import Sequence

import numpy as np

from ...grid.network import Network
from ..consensus.settings import ConsensusSettings
from .base import AgentSpec, HostedBackend, WorkerError, assign_zones, private_view, serve

__all__ = ["ProcessBackend", "die_with_parent", "worker_signals"]


def die_with_parent(parent_pid: int | None = None, use_prctl: bool = True, poll_s: float = 0.5) -> None:
    """End this process as soon as its parent process ends, however the parent ends (even SIGKILL).

    On Linux the kernel sends SIGKILL when the parent dies (``prctl(PR_SET_PDEATHSIG)``).
    Everywhere, a daemon thread also watches the parent: multiprocessing's parent
    sentinel (a pipe or handle that the parent's death closes) and, on POSIX, the
    parent pid (a re-parented process gets a new one). Worker processes, MPI-less
    sweep pools and their children call this first thing.
    """
    parent_pid = os.getppid() if parent_pid is None else parent_pid
    if use_prctl and sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl: the watchdog remains
            pass
    if os.name == "posix" and os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    parent = mp.parent_process()
    sentinel = parent.sentinel if parent is not None and parent.pid == parent_pid else None
    threading.Thread(target=_watch_parent, args=(parent_pid, sentinel, poll_s), name="powerdp-parent-watchdog", daemon=True).start()


def _watch_parent(parent_pid: int, sentinel, poll_s: float) -> None:
    from multiprocessing.connection import wait

    while True:
        if sentinel is not None:
            try:
                if wait([sentinel], timeout=poll_s):
                    os._exit(1)
            except OSError:  # a closed sentinel: the parent is gone
                os._exit(1)
        else:
            threading.Event().wait(poll_s)
        if os.name == "posix" and os.getppid() != parent_pid:
            os._exit(1)


def worker_signals() -> None:
    """Signals of an agent host or sweep worker: Ctrl-C is the coordinating process's to handle.

    A terminal's Ctrl-C reaches every process of the foreground group; workers
    ignore it (no traceback from each of them) and end when their parent closes
    them or dies (:func:`die_with_parent`). SIGTERM keeps its default: end at once.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def pool_worker_init() -> None:
    """A worker of a process pool (sweeps, audits): Ctrl-C is the parent's to handle, and it ends with it."""
    die_with_parent()
    worker_signals()


def stop_pool(pool) -> None:
    """Ctrl-C on a ``concurrent.futures`` process pool: no new tasks, and the running ones end now."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # shutdown() forgets them
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)


def _default_start_method() -> str:
    """``fork`` where the platform has it (fast, works from notebooks and stdin), else ``spawn``."""
    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def _worker_main(conn, net: Network, specs: Sequence[AgentSpec], config: ConsensusSettings, parent_pid: int | None = None) -> None:
    """Entry point of a worker process: :func:`serve` over a pipe; it ends with its parent."""
    die_with_parent(parent_pid)
    worker_signals()
    try:
        serve(conn.recv, conn.send, net, specs, config)
    finally:
        conn.close()


class PipeHosts:
    """Worker processes on pipes, as a :class:`HostedBackend` relays to them: start, send, receive, close.
    The consensus backend below and the sharing one (``engine/sharing/hosts.py``) share it."""

    host_kind = "zones"  # what a host holds, for messages
    groups: list[list[int]]
    n_hosts: int

    def _start_hosts(self, ctx, target, host_args, name: str) -> None:
        """One process per group, ``target(child_conn, *host_args(h, group), parent_pid)``; waits for each to set up."""
        self.conns, self.procs = [], []
        for h, group in enumerate(self.groups):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=target, args=(child, *host_args(h, group), os.getpid()), name=f"{name}-{h}", daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        for h in range(self.n_hosts):
            self._recv(h, "setup")

    def _error_context(self) -> str:
        return ""

    def _host_name(self, h: int) -> str:
        return f"worker process {h} ({self.host_kind} {self.groups[h]})"

    def _send(self, h: int, obj) -> None:
        try:
            self.conns[h].send(obj)
        except (BrokenPipeError, ConnectionError, OSError):
            raise WorkerError(
                f"{self._host_name(h)} is gone (exit code {self.procs[h].exitcode})", context=self._error_context()
            ) from None

    def _recv_raw(self, h: int, what: str):
        try:
            return self.conns[h].recv()
        except (EOFError, ConnectionError, OSError):
            self.procs[h].join(timeout=1)
            raise WorkerError(
                f"{self._host_name(h)} died during {what} (exit code {self.procs[h].exitcode})",
                context=self._error_context(),
            ) from None

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(("close", None))
            except Exception:  # noqa: BLE001 - a host already gone
                pass
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
        self.conns, self.procs = [], []


def start_context(start_method: str | None = None):
    """The multiprocessing context of worker hosts: ``start_method``, ``POWERDP_START_METHOD``, else fork where there is one."""
    return mp.get_context(start_method or os.environ.get("POWERDP_START_METHOD") or _default_start_method())


class ProcessBackend(PipeHosts, HostedBackend):
    """Persistent worker processes, each hosting a group of zones."""

    def __init__(
        self,
        net: Network,
        specs: Sequence[AgentSpec],
        config: ConsensusSettings,
        workers: int | None = None,
        start_method: str | None = None,
    ):
        n_workers = workers or config.workers or min(len(specs), os.cpu_count() or 1)
        n_workers = max(1, min(n_workers, len(specs)))
        spec_of = {s.zone: s for s in specs}
        self.groups = assign_zones([len(s.own_buses) for s in specs], n_workers)
        self.n_hosts = len(self.groups)
        self.round = 0

        def host_args(h, group):
            own = np.concatenate([spec_of[z].own_buses for z in group])
            return private_view(net, own), [spec_of[z] for z in group], config

        self._start_hosts(start_context(start_method), _worker_main, host_args, "powerdp-worker")

    def _error_context(self) -> str:
        return f"round {self.round}"


