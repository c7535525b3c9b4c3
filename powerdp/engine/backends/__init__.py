"""Execution backends: where the zone agents live and how messages reach them.

* :class:`SerialBackend` keeps every agent in this process.
* :class:`ProcessBackend` starts persistent worker processes, each hosting a
  group of zones; an agent's state (its compiled problem, iterate, duals,
  noise generator) stays in its worker for the whole run, and only messages
  cross the pipe. A worker receives the network with the loads of every bus
  it does not own set to zero.
* ``mpi`` (see :mod:`powerdp.engine.backends.mpi`) hosts the agents on MPI ranks.
* ``net`` (see :mod:`powerdp.engine.backends.net`) reaches zone servers on other hosts over gRPC with mutual TLS
  (the zones' side: :mod:`powerdp.engine.backends.net_server`; docs/deployment.md).

Every backend returns identical results for the same seed: each zone draws
its noise from its own generator (seed, zone) and does the same arithmetic
wherever it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TypeVar

from ...errors import ConfigError
from ...grid.network import Network
from ..consensus.settings import ConsensusSettings
from .base import AgentSpec, Backend, HostedBackend, WorkerError, assign_zones, private_view

__all__ = ["AgentSpec", "Backend", "HostedBackend", "WorkerError", "BACKENDS", "backend_class", "make_backend",
           "launch", "assign_zones", "private_view"]

#: backend name → "module:Class", imported on first use (MPI and the network are optional extras)
BACKENDS: dict[str, str] = {
    "serial": "powerdp.engine.backends.serial:SerialBackend",
    "process": "powerdp.engine.backends.process:ProcessBackend",
    "mpi": "powerdp.engine.backends.mpi:MPIBackend",
    "net": "powerdp.engine.backends.net:NetBackend",
}

T = TypeVar("T")


def backend_class(name: str) -> type[Backend]:
    """The class registered as ``name`` (ConfigError naming the known ones otherwise)."""
    try:
        module, cls = BACKENDS[name].split(":")
    except KeyError:
        raise ConfigError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}") from None
    return getattr(importlib.import_module(module), cls)


def make_backend(name: str, net: Network, specs: Sequence[AgentSpec], config: ConsensusSettings) -> Backend:
    return backend_class(name)(net, specs, config)


def launch(config: ConsensusSettings, run: Callable[[], T]) -> T | None:
    """Run ``run`` (the coordinator's side) the way the configured backend needs: under MPI every rank
    calls this, rank 0 coordinates and the others host agents (they return None)."""
    return backend_class(config.backend).launch(config, run)
