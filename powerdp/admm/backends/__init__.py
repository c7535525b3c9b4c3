"""Execution backends: where the zone agents live and how messages reach them.

* :class:`SerialBackend` keeps every agent in this process.
* :class:`ProcessBackend` starts persistent worker processes, each hosting a
  group of zones; an agent's state (its compiled problem, iterate, duals,
  noise generator) stays in its worker for the whole run, and only messages
  cross the pipe. A worker receives the network with the loads of every bus
  it does not own set to zero.
* ``mpi`` (see :mod:`powerdp.admm.backends.mpi`) hosts the agents on MPI ranks.

Every backend returns identical results for the same seed: each zone draws
its noise from its own generator (seed, zone) and does the same arithmetic
wherever it runs.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import traceback
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import errors as _errors
from ...errors import ConfigError, PowerDPError, SolverError
from ...grid.network import Network
from ..config import RunConfig
from ..messages import ConsensusMessage, ZoneUpdate

__all__ = [
    "AgentSpec", "Backend", "SerialBackend", "ProcessBackend", "make_backend", "assign_zones", "WorkerError", "die_with_parent",
]


@dataclass(frozen=True)
class AgentSpec:
    """What a host needs to build one zone agent (public structure only)."""

    zone: int
    own_buses: np.ndarray
    shared_keys: tuple[Hashable, ...]


class WorkerError(SolverError):
    """A zone failed (or its host died) inside a backend; names the zone, host and round."""


def private_view(net: Network, own_buses: np.ndarray) -> Network:
    """The network as a host of the given buses sees it: every other bus's load set to zero."""
    keep = np.zeros(net.n_bus, dtype=bool)
    keep[own_buses] = True
    return net.with_loads(np.where(keep, net.pd, 0.0), np.where(keep, net.qd, 0.0))


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


def restore_zone(agent, directory: str, round: int) -> None:
    """``agent.load_checkpoint`` with an error naming the zone's file when it is missing or unreadable."""
    from ..agent import zone_checkpoint_path

    try:
        agent.load_checkpoint(directory, round)
    except PowerDPError:
        raise
    except Exception as exc:  # noqa: BLE001 - unpickling a damaged file raises anything
        path = zone_checkpoint_path(directory, agent.zone, round)
        what = "is missing" if isinstance(exc, FileNotFoundError) else f"is not a readable checkpoint ({type(exc).__name__}: {exc})"
        raise ConfigError(f"cannot resume zone {agent.zone}: {path} {what}") from None


def peak_rss_mb() -> float:
    """This process's peak resident set size in MB (0 where the platform does not report it)."""
    try:
        import resource
    except ImportError:  # not on Windows
        return 0.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def single_threaded_pools():
    """Hold this process's BLAS/OpenMP thread pools to one thread; returns the limiter (or None).

    Agents do the same arithmetic with the same thread counts on every backend
    (a threaded reduction may sum in another order), and parallel hosts do not
    fight idle pool threads for the cores. ``POWERDP_HOST_THREADS=inherit``
    leaves the pools alone.
    """
    if os.environ.get("POWERDP_HOST_THREADS") == "inherit":
        return None
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


def _build_agents(net: Network, specs: Sequence[AgentSpec], config: RunConfig):
    from ..agent import ZoneAgent

    return {s.zone: ZoneAgent(net, s.zone, s.own_buses, s.shared_keys, config) for s in specs}


class Backend:
    """Interface: hosts agents and relays messages."""

    n_hosts: int = 1

    def initialize(self) -> list[ZoneUpdate]:
        raise NotImplementedError

    def step(self, messages: Sequence[ConsensusMessage]) -> list[ZoneUpdate]:
        raise NotImplementedError

    def diagnostics(self, with_solution: bool = False) -> list:
        raise NotImplementedError

    def save_checkpoint(self, directory: str) -> None:
        """Every zone writes its own state file into ``directory`` (on its own host)."""
        raise NotImplementedError

    def load_checkpoint(self, directory: str, round: int) -> None:
        """Every zone restores the state it saved after ``round``."""
        raise NotImplementedError

    def prune_checkpoints(self, directory: str, round: int) -> None:
        """Every zone deletes its state files of other rounds than ``round``."""
        raise NotImplementedError

    def save_solutions(self, directory: str) -> None:
        """Every zone writes its released solution into ``directory`` (on its own host)."""
        raise NotImplementedError

    def setup_times(self) -> dict[int, dict[str, float]]:
        raise NotImplementedError

    def host_memory(self) -> list[float]:
        """Peak resident memory (MB) of each host process so far."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------
# serial
# ---------------------------------------------------------------------------


class SerialBackend(Backend):
    """All agents in this process, stepped one after another."""

    def __init__(self, net: Network, specs: Sequence[AgentSpec], config: RunConfig):
        self._limits = single_threaded_pools()
        try:
            self.agents = _build_agents(net, specs, config)
        except BaseException:
            self.close()
            raise
        self.zones = sorted(self.agents)

    def close(self) -> None:
        if getattr(self, "_limits", None) is not None:
            self._limits.restore_original_limits()
            self._limits = None

    def initialize(self) -> list[ZoneUpdate]:
        return [self.agents[z].initialize() for z in self.zones]

    def step(self, messages: Sequence[ConsensusMessage]) -> list[ZoneUpdate]:
        return [self.agents[m.zone].step(m) for m in messages]

    def diagnostics(self, with_solution: bool = False) -> list:
        return [self.agents[z].diagnostics(with_solution) for z in self.zones]

    def save_checkpoint(self, directory: str) -> None:
        for z in self.zones:
            self.agents[z].save_checkpoint(directory)

    def load_checkpoint(self, directory: str, round: int) -> None:
        for z in self.zones:
            restore_zone(self.agents[z], directory, round)

    def prune_checkpoints(self, directory: str, round: int) -> None:
        for z in self.zones:
            self.agents[z].prune_checkpoints(directory, round)

    def save_solutions(self, directory: str) -> None:
        for z in self.zones:
            self.agents[z].save_solution(directory)

    def setup_times(self) -> dict[int, dict[str, float]]:
        return {z: a.setup_s for z, a in self.agents.items()}

    def host_memory(self) -> list[float]:
        return [peak_rss_mb()]


# ---------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------


def assign_zones(sizes: Sequence[int], n_hosts: int) -> list[list[int]]:
    """Greedy balance: the largest zone first, each to the least-loaded host (deterministic)."""
    loads = [0] * n_hosts
    groups: list[list[int]] = [[] for _ in range(n_hosts)]
    for z in sorted(range(len(sizes)), key=lambda z: (-sizes[z], z)):
        h = min(range(n_hosts), key=lambda h: (loads[h], h))
        groups[h].append(z)
        loads[h] += sizes[z]
    return [sorted(g) for g in groups if g]


def _default_start_method() -> str:
    """``fork`` where the platform has it (fast, works from notebooks and stdin), else ``spawn``."""
    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def serve(recv, send, net: Network, specs: Sequence[AgentSpec], config: RunConfig) -> None:
    """A host's command loop (worker process or MPI rank): build the agents once, then serve.

    ``recv()`` returns the next ``(command, argument)``; ``send(obj)`` answers with
    ``("ok", payload)`` or, on any failure, ``("error", (type, message, zone, traceback))``
    after which the loop ends.

    The host's BLAS and OpenMP pools are held to one thread while it serves
    (:func:`single_threaded_pools`): hosts already run in parallel, one per core,
    and idle pool threads spinning beside them only steal cycles (measured with
    ``benchmarks/scale.py``: case2000_goc, 3 areas, process backend, 2.69 → 2.20 s
    per round).
    """
    import logging

    logging.getLogger("pyomo").setLevel(logging.ERROR)
    limits = single_threaded_pools()
    try:
        _serve(recv, send, net, specs, config)
    finally:
        if limits is not None:
            limits.restore_original_limits()


def _serve(recv, send, net: Network, specs: Sequence[AgentSpec], config: RunConfig) -> None:
    zone = None
    try:
        agents = _build_agents(net, specs, config)
        send(("ok", None))
        while True:
            cmd, arg = recv()
            if cmd == "close":
                break
            if cmd == "init":
                out = []
                for z in sorted(agents):
                    zone = z
                    out.append(agents[z].initialize())
            elif cmd == "step":
                out = []
                for m in arg:
                    zone = m.zone
                    out.append(agents[m.zone].step(m))
            elif cmd == "diag":
                out = [agents[z].diagnostics(arg) for z in sorted(agents)]
            elif cmd == "save":  # each zone writes its own file; nothing but an acknowledgement returns
                for z in sorted(agents):
                    zone = z
                    agents[z].save_checkpoint(arg)
                out = None
            elif cmd == "restore":
                directory, rnd = arg
                for z in sorted(agents):
                    zone = z
                    restore_zone(agents[z], directory, rnd)
                out = None
            elif cmd == "prune":
                directory, rnd = arg
                for z in sorted(agents):
                    agents[z].prune_checkpoints(directory, rnd)
                out = None
            elif cmd == "solutions":
                for z in sorted(agents):
                    zone = z
                    agents[z].save_solution(arg)
                out = None
            elif cmd == "setup":
                out = {z: a.setup_s for z, a in agents.items()}
            elif cmd == "memory":
                out = peak_rss_mb()
            else:
                raise ValueError(f"unknown command {cmd!r}")
            zone = None
            send(("ok", out))
    except Exception as exc:  # report every failure to the coordinator's side, then stop
        try:
            send(("error", (type(exc).__name__, str(exc), zone, traceback.format_exc())))
        except Exception:
            pass


def _worker_main(conn, net: Network, specs: Sequence[AgentSpec], config: RunConfig, parent_pid: int | None = None) -> None:
    """Entry point of a worker process: :func:`serve` over a pipe; it ends with its parent."""
    die_with_parent(parent_pid)
    worker_signals()
    try:
        serve(conn.recv, conn.send, net, specs, config)
    finally:
        conn.close()


class HostedBackend(Backend):
    """Common logic of backends whose agents live on other hosts (processes, MPI ranks).

    Subclasses set ``groups`` (zones per host) and implement ``_send(h, obj)``,
    ``_recv_raw(h)`` and ``_host_name(h)``.
    """

    groups: list[list[int]]
    round: int = 0

    def _send(self, h: int, obj) -> None:
        raise NotImplementedError

    def _recv_raw(self, h: int):
        raise NotImplementedError

    def _host_name(self, h: int) -> str:
        raise NotImplementedError

    def _recv(self, h: int, what: str):
        status, payload = self._recv_raw(h, what)
        if status == "error":
            kind, msg, zone, tb = payload
            bad_input = getattr(_errors, kind, None)
            if isinstance(bad_input, type) and issubclass(bad_input, PowerDPError) and bad_input.exit_status == 2:
                raise bad_input(msg)  # bad input found on a host (an Ipopt option, a checkpoint file): not a failed run
            where = f"zone {zone}, " if zone is not None and f"zone {zone}" not in msg else ""
            raise WorkerError(f"{where}{self._host_name(h)}: {kind}: {msg}")
        return payload

    def _call(self, cmd: str, args_per_host: Sequence[Any] | None = None) -> list[Any]:
        for h in range(self.n_hosts):
            self._send(h, (cmd, None if args_per_host is None else args_per_host[h]))
        return [self._recv(h, cmd) for h in range(self.n_hosts)]

    @staticmethod
    def _merge(per_host: list[list]) -> list:
        items = [x for host in per_host for x in host]
        return sorted(items, key=lambda u: u.zone)

    def initialize(self) -> list[ZoneUpdate]:
        return self._merge(self._call("init"))

    def step(self, messages: Sequence[ConsensusMessage]) -> list[ZoneUpdate]:
        self.round = messages[0].round if messages else self.round
        by_zone = {m.zone: m for m in messages}
        return self._merge(self._call("step", [[by_zone[z] for z in g] for g in self.groups]))

    def diagnostics(self, with_solution: bool = False) -> list:
        return self._merge(self._call("diag", [with_solution] * self.n_hosts))

    def save_checkpoint(self, directory: str) -> None:
        self._call("save", [str(directory)] * self.n_hosts)

    def load_checkpoint(self, directory: str, round: int) -> None:
        self._call("restore", [(str(directory), int(round))] * self.n_hosts)

    def prune_checkpoints(self, directory: str, round: int) -> None:
        self._call("prune", [(str(directory), int(round))] * self.n_hosts)

    def save_solutions(self, directory: str) -> None:
        self._call("solutions", [str(directory)] * self.n_hosts)

    def host_memory(self) -> list[float]:
        return [float(m) for m in self._call("memory")]

    def setup_times(self) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        for part in self._call("setup"):
            out.update(part)
        return out


class ProcessBackend(HostedBackend):
    """Persistent worker processes, each hosting a group of zones."""

    def __init__(
        self,
        net: Network,
        specs: Sequence[AgentSpec],
        config: RunConfig,
        workers: int | None = None,
        start_method: str | None = None,
    ):
        n_workers = workers or config.workers or min(len(specs), os.cpu_count() or 1)
        n_workers = max(1, min(n_workers, len(specs)))
        spec_of = {s.zone: s for s in specs}
        self.groups = assign_zones([len(s.own_buses) for s in specs], n_workers)
        self.n_hosts = len(self.groups)
        ctx = mp.get_context(start_method or os.environ.get("POWERDP_START_METHOD") or _default_start_method())
        self.conns = []
        self.procs = []
        self.round = 0
        for h, group in enumerate(self.groups):
            own = np.concatenate([spec_of[z].own_buses for z in group])
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=_worker_main,
                args=(child, private_view(net, own), [spec_of[z] for z in group], config, os.getpid()),
                name=f"powerdp-worker-{h}",
                daemon=True,
            )
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        for h in range(self.n_hosts):
            self._recv(h, "setup")

    def _host_name(self, h: int) -> str:
        return f"worker process {h} (zones {self.groups[h]})"

    def _send(self, h: int, obj) -> None:
        try:
            self.conns[h].send(obj)
        except (BrokenPipeError, ConnectionError, OSError):
            raise WorkerError(
                f"{self._host_name(h)} is gone (exit code {self.procs[h].exitcode})", context=f"round {self.round}"
            ) from None

    def _recv_raw(self, h: int, what: str):
        try:
            return self.conns[h].recv()
        except (EOFError, ConnectionError, OSError):
            self.procs[h].join(timeout=1)
            raise WorkerError(
                f"{self._host_name(h)} died during {what} (exit code {self.procs[h].exitcode})",
                context=f"round {self.round}",
            ) from None

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(("close", None))
            except Exception:
                pass
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
        self.conns, self.procs = [], []


def make_backend(name: str, net: Network, specs: Sequence[AgentSpec], config: RunConfig) -> Backend:
    if name == "serial":
        return SerialBackend(net, specs, config)
    if name == "process":
        return ProcessBackend(net, specs, config)
    if name == "mpi":
        from .mpi import MPIBackend

        return MPIBackend(net, specs, config)
    raise PowerDPError(f"unknown backend {name!r}")
