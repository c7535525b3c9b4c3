"""The MPI backend: zone agents on MPI ranks (``pip install "powerdp[mpi]"``).

Run every rank with the same command::

    mpiexec -n 4 python -m powerdp run case118 --zones 3 --algorithm objl --backend mpi

Rank 0 is the coordinator; ranks 1..K-1 host the zone agents (several zones per
rank when zones outnumber ranks, balanced by size). Only the messages of
:mod:`powerdp.messages` cross ranks; a rank receives the network with every
load it does not own set to zero, and its agents' state never leaves it.
:func:`powerdp.run_distributed` does the right thing on every rank: rank 0
runs the coordinator and returns the result, the other ranks serve their
agents and return ``None``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .backends import AgentSpec, HostedBackend, WorkerError, assign_zones, private_view, serve
from .config import RunConfig
from .errors import ConfigError
from .network import Network

__all__ = ["MPIBackend", "rank", "serve_rank"]

TAG = 7


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


def serve_rank() -> None:
    """Worker rank: receive this rank's agents from rank 0, then serve commands until told to stop."""
    comm = _comm()
    setup = comm.recv(source=0, tag=TAG)
    if setup is None:  # this rank hosts no zone
        return
    net, specs, config = setup
    serve(lambda: comm.recv(source=0, tag=TAG), lambda obj: comm.send(obj, dest=0, tag=TAG), net, specs, config)


class MPIBackend(HostedBackend):
    """Rank 0's view: the agents live on ranks 1..K-1."""

    def __init__(self, net: Network, specs: Sequence[AgentSpec], config: RunConfig):
        self.comm = _comm()
        size = self.comm.Get_size()
        if size < 2:
            raise ConfigError("the mpi backend needs at least 2 ranks: mpiexec -n K python -m powerdp run ... --backend mpi")
        spec_of = {s.zone: s for s in specs}
        self.groups = assign_zones([len(s.own_buses) for s in specs], size - 1)
        self.n_hosts = len(self.groups)
        self.round = 0
        for h, group in enumerate(self.groups):
            own = np.concatenate([spec_of[z].own_buses for z in group])
            self.comm.send((private_view(net, own), [spec_of[z] for z in group], config), dest=h + 1, tag=TAG)
        for r in range(self.n_hosts + 1, size):  # idle ranks
            self.comm.send(None, dest=r, tag=TAG)
        for h in range(self.n_hosts):
            self._recv(h, "setup")

    def _host_name(self, h: int) -> str:
        return f"MPI rank {h + 1} (zones {self.groups[h]})"

    def _send(self, h: int, obj) -> None:
        self.comm.send(obj, dest=h + 1, tag=TAG)

    def _recv_raw(self, h: int, what: str):
        try:
            return self.comm.recv(source=h + 1, tag=TAG)
        except Exception as exc:  # an MPI error from a dead rank
            raise WorkerError(f"{self._host_name(h)} failed during {what}: {exc}", context=f"round {self.round}") from None

    def close(self) -> None:
        for h in range(self.n_hosts):
            try:
                self.comm.send(("close", None), dest=h + 1, tag=TAG)
            except Exception:
                pass
        self.n_hosts = 0
