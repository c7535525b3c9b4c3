"""The MPI backend: zone agents on MPI ranks (``pip install "powerdp[mpi]"``).

Run every rank with the same command::

    mpiexec -n 4 python -m powerdp run case118 --zones 3 --algorithm objl --backend mpi

Rank 0 is the coordinator; ranks 1..K-1 host the zone agents (several zones per
rank when zones outnumber ranks, balanced by size). Only the messages of
:mod:`powerdp.engine.consensus.messages` cross ranks; a rank receives the network with every
load it does not own set to zero, and its agents' state never leaves it.
:func:`powerdp.run_distributed` does the right thing on every rank: rank 0
runs the coordinator and returns the result, the other ranks serve their
agents and return ``None``.

Lost ranks. Every rank runs a heartbeat thread that sends a small beacon to
its peers (rank 0 to every agent rank, agent ranks to rank 0) every
``rank_timeout / 10`` seconds, and every wait for a message checks the
sender's beacons. A rank silent for ``config.rank_timeout`` seconds is
reported lost: on rank 0 the run stops with a :class:`~powerdp.engine.backends.WorkerError`
naming the rank, its zones and the round; the output directory keeps the
history and the last checkpoint (``powerdp run --resume DIR`` continues), and
the job then aborts so that no rank waits forever. An agent rank that loses
rank 0 aborts the job the same way.

MPICH's ``mpiexec`` kills every rank as soon as one dies unless it is started
with ``-disable-auto-cleanup``; use that flag to get the error message. Without
it the job ends at once, and the output directory still holds the history of
every finished round and the last checkpoint.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
from collections.abc import Sequence

import numpy as np

from ...errors import ConfigError
from ...grid.network import Network
from ..consensus.settings import ConsensusSettings
from .base import AgentSpec, HostedBackend, WorkerError, assign_zones, private_view, serve

__all__ = ["MPIBackend", "rank", "serve_rank", "RankLost"]

TAG = 7  # commands and replies
HEARTBEAT = 8  # liveness beacons


def _comm():
    try:
        from mpi4py import MPI
    except ImportError:
        raise ConfigError('the mpi backend needs mpi4py: pip install "powerdp[mpi]"') from None
    return MPI.COMM_WORLD


def rank() -> int:
    """This process's MPI rank (0 when mpi4py is missing or the run is not under mpiexec)."""
    try:
        from mpi4py import MPI
    except ImportError:
        return 0
    return MPI.COMM_WORLD.Get_rank()


#: a wait sleeps between probes for at most WAIT_SHARE of the time it has waited so far (between
#: WAIT_MIN_S and WAIT_MAX_S): it wakes a few dozen times a second instead of spinning, and a message
#: is picked up at most ~WAIT_SHARE late
WAIT_SHARE, WAIT_MIN_S, WAIT_MAX_S = 0.05, 2e-3, 0.05


def wait_delay(previous: float, waited: float) -> float:
    """The sleep before the next probe: doubling from 0.1 ms up to WAIT_SHARE·``waited`` (bounds above)."""
    cap = min(max(WAIT_SHARE * waited, WAIT_MIN_S), WAIT_MAX_S)
    return min(max(2 * previous, 1e-4), cap)


class RankLost(Exception):
    """A peer rank sent no heartbeat for longer than the timeout."""

    def __init__(self, peer: int, silent_s: float):
        super().__init__(f"no heartbeat from MPI rank {peer} for {silent_s:.0f} s")
        self.peer = peer
        self.silent_s = silent_s


class Liveness:
    """Heartbeats between this rank and its peers, and waits that notice a lost peer.

    A daemon thread sends a beacon to every peer every ``interval`` seconds
    (non-blocking sends, so a dead peer cannot stall it). :meth:`recv` polls
    for the awaited message, draining beacons as they come, and raises
    :class:`RankLost` once the sender has been silent for ``timeout`` seconds.
    """

    def __init__(self, comm, peers: Sequence[int], timeout: float):
        self.comm = comm
        self.peers = list(peers)
        self.timeout = float(timeout)
        self.interval = min(1.0, self.timeout / 10)
        now = time.monotonic()
        self.last_seen = {p: now for p in self.peers}
        self.lost: set[int] = set()
        self.zones_sent = False  # rank 0: the agent ranks have received their zones
        self._stop = threading.Event()
        self._pending: list = []
        self._thread = threading.Thread(target=self._beat, name="powerdp-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        """Send the beacons until stopped. A send or a test that fails (MPI reports an error for a dead peer on some
        transports) marks that peer lost and the beacons to the others go on: if this thread died, the peers would
        see this rank silent and abort the job, killing it before it could record the failure (failure.txt)."""
        while not self._stop.wait(self.interval):
            pending = []
            for peer, request in self._pending:
                try:
                    if not request.Test():
                        pending.append((peer, request))
                except Exception:  # noqa: BLE001 - an MPI error from a dead peer
                    self.lost.add(peer)
            self._pending = pending
            for p in self.peers:
                if p not in self.lost:
                    try:
                        self._pending.append((p, self.comm.isend(None, dest=p, tag=HEARTBEAT)))
                    except Exception:  # noqa: BLE001 - as above
                        self.lost.add(p)

    def drain(self) -> None:
        from mpi4py import MPI

        status = MPI.Status()
        while self.comm.iprobe(source=MPI.ANY_SOURCE, tag=HEARTBEAT, status=status):
            src = status.Get_source()
            self.comm.recv(source=src, tag=HEARTBEAT)
            self.last_seen[src] = time.monotonic()

    def recv(self, source: int, tag: int = TAG):
        """Receive the next message from ``source``, or raise :class:`RankLost`."""
        if source in self.lost:
            raise RankLost(source, time.monotonic() - self.last_seen[source])
        delay, start = 0.0, time.monotonic()
        while not self.comm.iprobe(source=source, tag=tag):
            self.drain()
            now = time.monotonic()
            silent = now - self.last_seen[source]
            if silent > self.timeout or source in self.lost:  # silent, or its beacons failed (_beat)
                self.lost.add(source)
                raise RankLost(source, silent)
            if delay:
                time.sleep(delay)
            delay = wait_delay(delay, now - start)
        self.last_seen[source] = time.monotonic()
        return self.comm.recv(source=source, tag=tag)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


_LIVENESS: Liveness | None = None


def liveness(config: ConsensusSettings) -> Liveness:
    """This rank's heartbeats (started once per process): rank 0 watches every rank, the others watch rank 0."""
    global _LIVENESS
    if _LIVENESS is None:
        comm = _comm()
        me, size = comm.Get_rank(), comm.Get_size()
        peers = range(1, size) if me == 0 else [0]
        _LIVENESS = Liveness(comm, peers, config.rank_timeout)
    return _LIVENESS


def _stop_liveness() -> None:
    global _LIVENESS
    if _LIVENESS is not None:
        _LIVENESS.stop()
        _LIVENESS.drain()
        _LIVENESS = None


def release_ranks() -> None:
    """If rank 0 fails before handing out the zones, tell every agent rank there is nothing to host.

    Does nothing once the zones are out (:meth:`MPIBackend.close` releases the ranks then).
    """
    if _LIVENESS is None or _LIVENESS.zones_sent:
        return
    comm = _comm()
    for r in range(1, comm.Get_size()):
        comm.send(None, dest=r, tag=TAG)
    _stop_liveness()


def _abort_at_exit(code: int = 1) -> None:
    """After a lost rank, MPI_Finalize would wait forever: end the job once Python has finished."""

    def abort() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        _comm().Abort(code)

    atexit.register(abort)


def serve_rank(config: ConsensusSettings) -> None:
    """Agent rank: receive this rank's agents from rank 0, then serve commands until told to stop."""
    comm = _comm()
    live = liveness(config)

    def recv():
        try:
            return live.recv(0)
        except RankLost as exc:
            print(f"powerdp: MPI rank {comm.Get_rank()} lost the coordinator (rank 0): {exc}; aborting", file=sys.stderr, flush=True)
            comm.Abort(1)

    try:
        setup = recv()
        if setup is None:  # this rank hosts no zone
            return
        net, specs, cfg = setup
        serve(recv, lambda obj: comm.send(obj, dest=0, tag=TAG), net, specs, cfg)
    finally:
        _stop_liveness()


class MPIBackend(HostedBackend):
    """Rank 0's view: the agents live on ranks 1..K-1."""

    @classmethod
    def launch(cls, config: ConsensusSettings, run):
        """Every rank calls this: ranks 1..K-1 host agents until released (and return None); rank 0
        sends heartbeats from now on and runs the coordinator, releasing the agent ranks if it fails
        before the zones were handed out."""
        if rank() != 0:
            serve_rank(config)
            return None
        liveness(config)
        try:
            return run()
        except BaseException:
            release_ranks()
            raise

    def __init__(self, net: Network, specs: Sequence[AgentSpec], config: ConsensusSettings):
        self.comm = _comm()
        size = self.comm.Get_size()
        if size < 2:
            _stop_liveness()
            raise ConfigError("the mpi backend needs at least 2 ranks: mpiexec -n K python -m powerdp run ... --backend mpi")
        self.live = liveness(config)
        spec_of = {s.zone: s for s in specs}
        self.groups = assign_zones([len(s.own_buses) for s in specs], size - 1)
        self.n_hosts = len(self.groups)
        self.round = 0
        self.live.zones_sent = True
        for h, group in enumerate(self.groups):
            own = np.concatenate([spec_of[z].own_buses for z in group])
            self.comm.send((private_view(net, own), [spec_of[z] for z in group], config), dest=h + 1, tag=TAG)
        for r in range(self.n_hosts + 1, size):  # idle ranks
            self.comm.send(None, dest=r, tag=TAG)
        try:
            for h in range(self.n_hosts):
                self._recv(h, "setup")
        except Exception:
            self.close()  # release the ranks that did set up
            raise

    def _host_name(self, h: int) -> str:
        return f"MPI rank {h + 1} (zones {self.groups[h]})"

    def _send(self, h: int, obj) -> None:
        if h + 1 in self.live.lost:
            raise WorkerError(f"{self._host_name(h)} was lost earlier in the run", context=f"round {self.round}")
        self.comm.send(obj, dest=h + 1, tag=TAG)

    def _recv_raw(self, h: int, what: str):
        try:
            return self.live.recv(h + 1)
        except RankLost as exc:
            raise WorkerError(f"{self._host_name(h)} was lost during {what}: {exc}", context=f"round {self.round}") from None
        except Exception as exc:  # an MPI error from a dead rank
            raise WorkerError(f"{self._host_name(h)} failed during {what}: {exc}", context=f"round {self.round}") from None

    def close(self) -> None:
        lost = bool(self.live.lost)
        for h in range(self.n_hosts):
            if h + 1 not in self.live.lost:
                try:
                    self.comm.send(("close", None), dest=h + 1, tag=TAG)
                except Exception:
                    pass
        self.n_hosts = 0
        _stop_liveness()
        if lost:
            _abort_at_exit(1)
