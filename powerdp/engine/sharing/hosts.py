"""Where sharing agents live: serial, worker processes, MPI ranks (docs/sharing.md).

The same three backends as the consensus runs, for the sharing contract of
:mod:`powerdp.engine.sharing.coordinator`. A host receives the specs of its agents only (each
spec holds that agent's own data), builds them once and serves commands; only
:class:`~powerdp.engine.sharing.coordinator.SharingMessage` and
:class:`~powerdp.engine.sharing.coordinator.Contribution` cross per round. Checkpoints are
written by each agent on its own host as ``agent_M_round_T.npz`` (arrays) +
``.json`` (everything else): no pickles.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...files import checkpoint
from ...files.zone_folders import agent_checkpoint_stem, agent_private_dir, prune_agent_checkpoints
from ..backends.base import HostedBackend, assign_zones, released, single_threaded_pools
from ..backends.process import PipeHosts, start_context

__all__ = ["SharingAgentSpec", "SHARING_BACKENDS", "make_sharing_backend", "launch_sharing", "save_state", "load_state"]

SHARING_BACKENDS = ("serial", "process", "mpi")


@dataclass(frozen=True)
class SharingAgentSpec:
    """What a host needs to build one agent: ``factory`` ("module:callable") called with ``agent`` and ``kwargs``.

    ``kwargs`` is that agent's own data and settings (its loads, its feature block); it goes to that
    agent's host only.
    """

    agent: int
    factory: str
    kwargs: dict = field(default_factory=dict)
    weight: int = 1  # for balancing agents over hosts


def build(spec: SharingAgentSpec):
    module, name = spec.factory.split(":")
    return getattr(importlib.import_module(module), name)(agent=spec.agent, **spec.kwargs)


# --------------------------------------------------------------------------- state files


def agent_path(out: str | Path, agent: int, round: int, kind: str = "agent") -> Path:
    """Agent ``agent``'s state after ``round``: in its own private folder, ``OUT/{kind}s.private/{kind}_M/checkpoint``
    (``kind``: ``"agent"`` for market and vertical agents, ``"client"`` for federated learning clients)."""
    return agent_checkpoint_stem(out, kind, agent, round)


def legacy_agent_path(out: str | Path, agent: int, round: int, kind: str = "agent") -> Path:
    """Where earlier versions kept it, beside the coordinator's state (read to resume their runs, never written)."""
    return Path(out) / "checkpoint" / f"{kind}_{agent}_round_{round}"


def save_state(stem: str | Path, state: dict, private: bool = False) -> None:
    """``state = {"arrays": {name: array}, "meta": JSON}`` → ``stem.npz`` + ``stem.json``, each atomically;
    ``private``: an agent's own state, 0600 files in a 0700 folder (:mod:`powerdp.files.private`)."""
    stem = Path(stem)
    if private:
        from ...files.private import write_private

        write_private(stem.with_name(stem.name + ".npz"),
                      lambda fh: np.savez(fh, **{k: np.asarray(v) for k, v in state["arrays"].items()}), binary=True)
        write_private(stem.with_name(stem.name + ".json"), lambda fh: fh.write(json.dumps(state["meta"])))
        return
    checkpoint.save_state(stem, flat_state(state))  # the one checkpoint writer (files/checkpoint.py)


def load_state(stem: str | Path) -> dict:
    """What :func:`save_state` wrote, as ``{"arrays": ..., "meta": ...}``; one line naming the file otherwise."""
    try:
        return nested_state(checkpoint.load_state(stem))
    except ConfigError as exc:
        raise ConfigError(f"cannot resume: {exc}") from None


def flat_state(state: dict) -> dict:
    """``{"arrays": ..., "meta": ...}`` as one flat dict (arrays and JSON values side by side)."""
    return {**{k: np.asarray(v) for k, v in state["arrays"].items()}, **state["meta"]}


def nested_state(state: dict) -> dict:
    """Undo :func:`flat_state`."""
    return {"arrays": {k: v for k, v in state.items() if isinstance(v, np.ndarray)},
            "meta": {k: v for k, v in state.items() if not isinstance(v, np.ndarray)}}


def _prune(out: str, agent: int, keep_round: int, kind: str = "agent") -> None:
    prune_agent_checkpoints(out, kind, agent, keep_round)
    for p in (Path(out) / "checkpoint").glob(f"{kind}_{agent}_round_*"):  # an earlier version's, once resumed
        p.unlink(missing_ok=True)


def _kind(agent: Any) -> str:
    """The private folder's kind an agent keeps its files under (``private_kind``; market and vertical: ``agent``)."""
    return getattr(agent, "private_kind", "agent")


def _journal(agent: Any, out: str, index: int, resumed_round: int | None = None) -> None:
    """Open an agent's release journal (privacy/journal.py) in its private checkpoint folder, if it keeps one."""
    journal = getattr(agent, "journal", None)
    if journal is not None:
        journal.open(agent_private_dir(out, _kind(agent), index) / "checkpoint", resumed_round)


# --------------------------------------------------------------------------- the host loop


def handle(agents: dict, cmd: str, arg: Any):
    """One command on a host's agents (in agent order); the serial backend calls it directly."""
    order = sorted(agents)
    if cmd == "init":
        return [agents[a].initialize() for a in order]
    if cmd == "step":  # each release journaled before it leaves the host (engine.backends.base.released)
        return [released(agents[a], agents[a].step(arg)) for a in order]
    if cmd == "step_each":  # one message per agent, {agent: message} (consensus runs: learning clients)
        return [released(agents[a], agents[a].step(arg[a])) for a in order]
    if cmd == "diag":  # arg: the diagnostics' keyword arguments, if any
        return {a: agents[a].diagnostics(**(arg or {})) for a in order}
    if cmd == "stats":  # the simulation's evaluation only: what each agent's local step cost
        return {a: agents[a].last_stats for a in order}
    if cmd == "privacy":  # each private agent's ledger report (public: the privacy receipt's entries)
        return {a: agents[a].privacy_report() for a in order if getattr(agents[a], "privacy_report", None) is not None}
    if cmd == "save":  # each agent's own state into its own private folder (arg: the run's directory)
        out, rnd = arg
        for a in order:
            save_state(agent_path(out, a, rnd, _kind(agents[a])), agents[a].state_dict(), private=True)
        return None
    if cmd == "journal":  # a new run: each agent starts its release journal (arg: the run's directory)
        for a in order:
            _journal(agents[a], arg, a)
        return None
    if cmd == "restore":
        out, rnd = arg
        for a in order:
            stem, legacy = agent_path(out, a, rnd, _kind(agents[a])), legacy_agent_path(out, a, rnd, _kind(agents[a]))
            if not stem.with_name(stem.name + ".json").is_file() and legacy.with_suffix(".json").is_file():
                stem = legacy  # a run directory of an earlier version
            agents[a].load_state_dict(load_state(stem))
            _journal(agents[a], out, a, int(rnd))  # what it released after that round: the replay
        return None
    if cmd == "prune":
        directory, rnd = arg
        for a in order:
            _prune(directory, a, rnd, _kind(agents[a]))
            journal = getattr(agents[a], "journal", None)
            if journal is not None:
                journal.prune(int(rnd))
        return None
    raise ValueError(f"unknown command {cmd!r}")


def serve(recv, send, specs: Sequence[SharingAgentSpec]) -> None:
    """A host's loop: build the agents, answer ``("ok", payload)`` or ``("error", …)`` and stop."""
    import traceback

    limits = single_threaded_pools()
    try:
        agents = {s.agent: build(s) for s in specs}
        send(("ok", None))
        while True:
            cmd, arg = recv()
            if cmd == "close":
                break
            send(("ok", handle(agents, cmd, arg)))
    except Exception as exc:  # noqa: BLE001 - reported to the coordinator's side
        try:
            send(("error", (type(exc).__name__, str(exc), None, traceback.format_exc())))
        except Exception:  # noqa: BLE001
            pass
    finally:
        if limits is not None:
            limits.restore_original_limits()


class SerialSharing:
    """Every agent in this process."""

    n_hosts = 1

    def __init__(self, specs: Sequence[SharingAgentSpec], settings=None):
        self._limits = single_threaded_pools()
        self.agents = {s.agent: build(s) for s in specs}

    def call(self, cmd: str, arg: Any = None):
        return handle(self.agents, cmd, arg)

    def close(self) -> None:
        if self._limits is not None:
            self._limits.restore_original_limits()
            self._limits = None


def _sender(update) -> int:
    """The agent that sent ``update``: a sharing :class:`~powerdp.engine.sharing.coordinator.Contribution` (``agent``) or a
    consensus :class:`~powerdp.engine.consensus.messages.ZoneUpdate` (``zone``)."""
    return update.agent if hasattr(update, "agent") else update.zone


class _Hosted(HostedBackend):
    """Common relay of the process and MPI backends: the same command to every host, answers merged."""

    def call(self, cmd: str, arg: Any = None):
        if cmd == "step_each":  # each host gets its own agents' messages only
            out = self._call(cmd, [{a: arg[a] for a in group} for group in self.groups])
        else:
            out = self._call(cmd, [arg] * self.n_hosts)
        if cmd in ("init", "step", "step_each"):
            return sorted((u for host in out for u in host), key=_sender)
        if cmd in ("diag", "stats", "privacy"):
            merged: dict = {}
            for part in out:
                merged.update(part)
            return merged
        return None


def _worker_main(conn, specs, parent_pid):
    from ..backends.process import die_with_parent, worker_signals

    die_with_parent(parent_pid)
    worker_signals()
    try:
        serve(conn.recv, conn.send, specs)
    finally:
        conn.close()


class ProcessSharing(PipeHosts, _Hosted):
    """Persistent worker processes, each hosting a group of agents."""

    host_kind = "agents"

    def __init__(self, specs: Sequence[SharingAgentSpec], settings=None):
        workers = getattr(settings, "workers", None) or min(len(specs), os.cpu_count() or 1)
        self.groups = assign_zones([s.weight for s in specs], max(1, min(workers, len(specs))))
        self.n_hosts = len(self.groups)
        spec_of = {s.agent: s for s in specs}
        self._start_hosts(start_context(), _worker_main, lambda h, group: ([spec_of[a] for a in group],), "powerdp-sharing")


class MPISharing(_Hosted):
    """Rank 0 coordinates; ranks 1..K−1 host the agents (``mpiexec -n K``; every rank runs the same program)."""

    def __init__(self, specs: Sequence[SharingAgentSpec], settings=None):
        from ..backends import mpi

        self.comm = mpi._comm()
        size = self.comm.Get_size()
        if size < 2:
            raise ConfigError("the mpi backend needs at least 2 ranks: mpiexec -n K python -m powerdp ... --backend mpi")
        self.live = mpi.liveness(settings)
        spec_of = {s.agent: s for s in specs}
        self.groups = assign_zones([s.weight for s in specs], size - 1)
        self.n_hosts = len(self.groups)
        self.live.zones_sent = True
        for h, group in enumerate(self.groups):
            self.comm.send([spec_of[a] for a in group], dest=h + 1, tag=mpi.TAG)
        for r in range(self.n_hosts + 1, size):
            self.comm.send(None, dest=r, tag=mpi.TAG)
        for h in range(self.n_hosts):
            self._recv(h, "setup")

    def _host_name(self, h: int) -> str:
        return f"MPI rank {h + 1} (agents {self.groups[h]})"

    def _send(self, h: int, obj) -> None:
        from ..backends import mpi

        self.comm.send(obj, dest=h + 1, tag=mpi.TAG)

    def _recv_raw(self, h: int, what: str):
        from ..backends import mpi
        from ..backends.base import WorkerError

        try:
            return self.live.recv(h + 1)
        except mpi.RankLost as exc:
            raise WorkerError(f"{self._host_name(h)} was lost during {what}: {exc}") from None

    def close(self) -> None:
        from ..backends import mpi

        for h in range(self.n_hosts):
            try:
                self.comm.send(("close", None), dest=h + 1, tag=mpi.TAG)
            except Exception:  # noqa: BLE001
                pass
        self.n_hosts = 0
        mpi._stop_liveness()


def _serve_mpi_rank(settings) -> None:
    from ..backends import mpi

    comm = mpi._comm()
    live = mpi.liveness(settings)
    try:
        specs = live.recv(0)
        if specs is None:
            return
        serve(lambda: live.recv(0), lambda obj: comm.send(obj, dest=0, tag=mpi.TAG), specs)
    finally:
        mpi._stop_liveness()


def launch_sharing(settings, run):
    """Run the coordinator's side ``run()``. Under MPI every rank calls this: rank 0 coordinates and returns
    the result, the other ranks host agents until released and return None."""
    if settings.backend != "mpi":
        return run()
    from ..backends import mpi

    if mpi.rank() != 0:
        _serve_mpi_rank(settings)
        return None
    mpi.liveness(settings)
    try:
        return run()
    except BaseException:
        mpi.release_ranks()
        raise


def make_sharing_backend(name: str, specs: Sequence[SharingAgentSpec], settings=None):
    classes = {"serial": SerialSharing, "process": ProcessSharing, "mpi": MPISharing}
    try:
        return classes[name](specs, settings)
    except KeyError:
        raise ConfigError(f"unknown backend {name!r}; choose one of {', '.join(SHARING_BACKENDS)}") from None
