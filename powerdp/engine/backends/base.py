"""What every backend shares: zone specs, the private view a host receives, the agents' host loop,
and the base classes (docs/contributing.md: a new backend is one module and one registry entry)."""

from __future__ import annotations

import os
import traceback
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import errors as _errors
from ...errors import ConfigError, PowerDPError, SolverError
from ...grid.network import Network
from ..consensus.messages import ConsensusMessage, ZoneUpdate
from ..consensus.settings import ConsensusSettings

__all__ = ["AgentSpec", "Backend", "HostedBackend", "WorkerError", "assign_zones", "build_agents", "private_view", "serve",
           "restore_zone", "peak_rss_mb", "single_threaded_pools", "zone_failure", "ZONE_FAILED", "HostCommands", "append_zone_log",
           "released", "open_journal"]


@dataclass(frozen=True)
class AgentSpec:
    """What a host needs to build one zone agent (public structure only)."""

    zone: int
    own_buses: np.ndarray
    shared_keys: tuple[Hashable, ...]
    #: the agent class as "module:Class" (a host imports it); tests put a solver-free fake here
    agent: str = "powerdp.apps.power_flow.agent:hosted_zone_agent"


class WorkerError(SolverError):
    """A zone failed (or its host died) inside a backend; names the zone, host and round."""


def private_view(net: Network, own_buses: np.ndarray) -> Network:
    """The network as a host of the given buses sees it: every other bus's load set to zero."""
    keep = np.zeros(net.n_bus, dtype=bool)
    keep[own_buses] = True
    return net.with_loads(np.where(keep, net.pd, 0.0), np.where(keep, net.qd, 0.0))


def released(agent, update):
    """A zone's message on its way out of its host: journaled (and fsynced) first when the zone keeps a release
    journal (:mod:`powerdp.privacy.journal`), so that a resumed zone never sends a counted release again with fresh
    noise. Every host loop sends what this returns."""
    journal = getattr(agent, "journal", None)
    if journal is not None and journal.active:
        journal.release(update.round, update.released)
    return update


def open_journal(agent, folders) -> None:
    """A new run: the zone starts its release journal in its private checkpoint folder (agents without one: nothing)."""
    start = getattr(agent, "open_journal", None)
    if start is not None:
        start(folders)


def restore_zone(agent, folders, round: int) -> None:
    """``agent.load_checkpoint`` with an error naming the zone's file when it is missing or unreadable."""

    try:
        agent.load_checkpoint(folders, round)
    except PowerDPError:
        raise
    except Exception as exc:  # noqa: BLE001 - unpickling a damaged file raises anything
        path = folders.checkpoint_stem(agent.zone, round)
        what = "is missing" if isinstance(exc, FileNotFoundError) else f"is not a readable checkpoint ({type(exc).__name__}: {exc})"
        raise ConfigError(f"cannot resume zone {agent.zone}: {path} {what}") from None


#: the error kind a deployment's zone host sends instead of its failure: "zone P failed", nothing else crosses
ZONE_FAILED = "ZoneFailed"


def zone_failure(config: ConsensusSettings, zones, exc: BaseException, detail: str) -> tuple[str, str] | None:
    """In a deployment, a zone's failure crosses as "zone P failed" only: the detail (solver status, iteration
    count, traceback) goes to the zone's own log (``DEP/zone_P.private/log.txt``, 0600), and this returns the
    (kind, message) to send. Bad input (exit status 2: a missing checkpoint, a damaged load file) crosses as it
    is; outside a deployment this returns None (a simulation reports the detail in its evaluation)."""
    if config.deployment is None or (isinstance(exc, PowerDPError) and exc.exit_status == 2):
        return None
    append_zone_log(config.deployment, zones, f"zone {', '.join(str(z) for z in zones)} failed: {type(exc).__name__}: {exc}\n{detail}")
    names = ", ".join(str(z) for z in zones)
    return ZONE_FAILED, f"zone {names} failed"


def append_zone_log(deployment, zones, text: str) -> None:
    """A line (with the time) in each zone's own log, ``DEP/zone_P.private/log.txt`` (0600 in its 0700 folder): what
    went wrong on its host, in full. A log that cannot be written is the zone's own business: nothing is raised."""
    import time

    from ...files.private import private_dir
    from ...files.zone_folders import zone_log_path

    for z in zones:
        path = zone_log_path(deployment, z)
        try:
            private_dir(path.parent)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text.rstrip()}\n")
        except OSError:
            pass


def _measures_cross(config: ConsensusSettings) -> bool:
    """Whether a host may send its zones' set-up times and peak memory: only to a simulation's evaluation (one machine
    holds every zone's data anyway); never in a deployment or a run without the evaluation."""
    return getattr(config, "deployment", None) is None and bool(getattr(config, "evaluate", True))


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


def build_agents(net: Network, specs: Sequence[AgentSpec], config: ConsensusSettings):
    """The agents of ``specs`` on this host: ``spec.agent`` (a class or factory, "module:name") called with the
    host's view of the network, the zone, its buses, its shared keys and the settings."""
    import importlib

    def agent_class(path: str):
        module, name = path.split(":")
        return getattr(importlib.import_module(module), name)

    return {s.zone: agent_class(s.agent)(net, s.zone, s.own_buses, s.shared_keys, config) for s in specs}


class Backend:
    """Interface: hosts agents and relays messages."""

    n_hosts: int = 1

    @classmethod
    def launch(cls, config: ConsensusSettings, run):
        """Run the coordinator's side, ``run()``, and return its result. A backend whose hosts are
        started from outside (MPI: every rank runs the same program) overrides this."""
        return run()

    def initialize(self) -> list[ZoneUpdate]:
        raise NotImplementedError

    def call(self, method: str, by_zone: dict[int, Any]) -> dict[int, Any]:
        """``agent.method(by_zone[z])`` on every zone ``z`` of ``by_zone``, on its host (an application's own agent
        method, e.g. the dispatch's next period); returns zone → answer."""
        raise NotImplementedError

    def step(self, messages: Sequence[ConsensusMessage]) -> list[ZoneUpdate]:
        raise NotImplementedError

    def diagnostics(self, with_solution: bool = False) -> list:
        raise NotImplementedError

    def save_checkpoint(self, folders) -> None:
        """Every zone writes its own state into its private folder (``folders``: a
        :class:`~powerdp.files.zone_folders.ZoneFolders`), on its own host."""
        raise NotImplementedError

    def load_checkpoint(self, folders, round: int) -> None:
        """Every zone restores the state it saved after ``round`` (and reopens its release journal)."""
        raise NotImplementedError

    def open_journals(self, folders) -> None:
        """A new run with checkpoints: every zone starts its release journal in its private folder, on its own host."""
        raise NotImplementedError

    def prune_checkpoints(self, folders, round: int) -> None:
        """Every zone deletes its state files of other rounds than ``round``."""
        raise NotImplementedError

    def save_solutions(self, folders) -> None:
        """Every zone writes its released solution and its own statistics into its private folder (on its own host)."""
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


def assign_zones(sizes: Sequence[int], n_hosts: int) -> list[list[int]]:
    """Greedy balance: the largest zone first, each to the least-loaded host (deterministic)."""
    loads = [0] * n_hosts
    groups: list[list[int]] = [[] for _ in range(n_hosts)]
    for z in sorted(range(len(sizes)), key=lambda z: (-sizes[z], z)):
        h = min(range(n_hosts), key=lambda h: (loads[h], h))
        groups[h].append(z)
        loads[h] += sizes[z]
    return [sorted(g) for g in groups if g]


def serve(recv, send, net: Network, specs: Sequence[AgentSpec], config: ConsensusSettings) -> None:
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


class HostCommands:
    """What a host does with one command of the coordinator's side, on its agents: the loop of :func:`serve` (worker
    processes, MPI ranks) and the network backend's zone server share it. ``zone`` names the zone at work while a
    command runs (the one a failure is reported for; None outside a zone's own work). Every release leaves through
    :func:`released` (journaled and fsynced first). ``measures_cross``: whether the host answers ``setup`` and ``memory``
    with its zones' figures (a simulation's evaluation only; a deployment's zone keeps them)."""

    def __init__(self, agents: dict, measures_cross: bool = False):
        self.agents = agents
        self.measures_cross = measures_cross
        self.zone: int | None = None

    def run(self, cmd: str, arg):
        agents = self.agents
        if cmd == "init":
            out = []
            for z in sorted(agents):
                self.zone = z
                out.append(agents[z].initialize())
        elif cmd == "step":
            out = []
            for m in arg:
                self.zone = m.zone
                out.append(released(agents[m.zone], agents[m.zone].step(m)))
        elif cmd == "diag":
            out = [agents[z].diagnostics(arg) for z in sorted(agents)]
        elif cmd == "save":  # each zone writes its own file; nothing but an acknowledgement returns
            for z in sorted(agents):
                self.zone = z
                try:
                    agents[z].save_checkpoint(arg)
                except OSError as exc:  # a full disk: named, and reported as an output error (exit 2), not a failed run
                    if isinstance(exc, _errors.OutputError):
                        raise
                    raise _errors.OutputError(f"cannot write {exc.filename or f'the checkpoint of zone {z}'}: {exc.strerror or exc}") from None
            out = None
        elif cmd == "journal":  # a new run: each zone starts its release journal in its own folder
            for z in sorted(agents):
                self.zone = z
                open_journal(agents[z], arg)
            out = None
        elif cmd == "restore":
            folders, rnd = arg
            for z in sorted(agents):
                self.zone = z
                restore_zone(agents[z], folders, rnd)
            out = None
        elif cmd == "prune":
            folders, rnd = arg
            for z in sorted(agents):
                agents[z].prune_checkpoints(folders, rnd)
            out = None
        elif cmd == "solutions":
            for z in sorted(agents):
                self.zone = z
                agents[z].save_solution(arg)
            out = None
        elif cmd == "call":  # an application's own agent method, with each zone's own argument
            method, by_zone = arg
            out = {}
            for z in sorted(by_zone):
                self.zone = z
                out[z] = getattr(agents[z], method)(by_zone[z])
        elif cmd in ("setup", "memory") and not self.measures_cross:
            # a deployment's zone keeps its set-up times and memory: how long its model took to build and how much
            # memory it holds are measured on its data's host, outside the message allow-list (issue 36)
            out = {} if cmd == "setup" else float("nan")
        elif cmd == "setup":
            out = {z: a.setup_s for z, a in agents.items()}
        elif cmd == "memory":
            out = peak_rss_mb()
        else:
            raise ValueError(f"unknown command {cmd!r}")
        self.zone = None
        return out


def _serve(recv, send, net: Network, specs: Sequence[AgentSpec], config: ConsensusSettings) -> None:
    host = None
    try:
        host = HostCommands(build_agents(net, specs, config), measures_cross=_measures_cross(config))
        send(("ok", None))
        while True:
            cmd, arg = recv()
            if cmd == "close":
                break
            send(("ok", host.run(cmd, arg)))
    except Exception as exc:  # report every failure to the coordinator's side, then stop
        tb = traceback.format_exc()
        zone = host.zone if host is not None else None
        zones = [zone] if zone is not None else sorted(s.zone for s in specs)
        redacted = zone_failure(config, zones, exc, tb)
        try:
            if redacted is not None:  # a deployment: only "zone P failed" crosses
                send(("error", (*redacted, zone, "")))
            else:
                send(("error", (type(exc).__name__, str(exc), zone, tb)))
        except Exception:
            pass


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
            if kind == ZONE_FAILED:  # a deployment's zone: its own log keeps the details
                raise WorkerError(f"{msg} (on {self._host_name(h)}; the zone's own log keeps the details)")
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

    def save_checkpoint(self, folders) -> None:
        self._call_all("save", [folders] * self.n_hosts)

    def _call_all(self, cmd: str, args_per_host: Sequence[Any]) -> list[Any]:
        """As :meth:`_call`, but every host's answer is awaited before the first error is raised: a write that
        failed on one host is reported only once no other host is still writing (its partial files can go)."""
        for h in range(self.n_hosts):
            self._send(h, (cmd, args_per_host[h]))
        answers, first = [], None
        for h in range(self.n_hosts):
            try:
                answers.append(self._recv(h, cmd))
            except PowerDPError as exc:
                first = first or exc
        if first is not None:
            raise first
        return answers

    def load_checkpoint(self, folders, round: int) -> None:
        self._call("restore", [(folders, int(round))] * self.n_hosts)

    def open_journals(self, folders) -> None:
        self._call_all("journal", [folders] * self.n_hosts)

    def prune_checkpoints(self, folders, round: int) -> None:
        self._call("prune", [(folders, int(round))] * self.n_hosts)

    def save_solutions(self, folders) -> None:
        self._call("solutions", [folders] * self.n_hosts)

    def host_memory(self) -> list[float]:
        return [float(m) for m in self._call("memory") if m == m]  # a deployment's hosts keep theirs (NaN)

    def call(self, method: str, by_zone: dict[int, Any]) -> dict[int, Any]:
        out: dict[int, Any] = {}
        for part in self._call("call", [(method, {z: by_zone[z] for z in g if z in by_zone}) for g in self.groups]):
            out.update(part)
        return out

    def setup_times(self) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        for part in self._call("setup"):
            out.update(part)
        return out


