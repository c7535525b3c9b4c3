"""Where noisy-admm's users live: P clients on the engine's sharing hosts (serial, worker processes, MPI ranks).

001's Algorithm 1 (:mod:`powerdp.apps.learning.noisy_admm`) as a star. The users' samples (a_i, b_i) are dealt to
P clients in contiguous public blocks (:func:`user_blocks`); each client's spec holds its block only and goes to
its host alone. The coordinator holds (x̃_t, λ_t) and computes y_t and λ_{t+1} from them
(:func:`~powerdp.apps.learning.noisy_admm.dual_step`: no user's data). Iteration t's user's client gets
:class:`IterateMessage` (x̃_t, y_t, λ_{t+1} and which of its users, from the public order), takes the gradient step
of Lemma 3.2 on that user's sample and adds N(0, σ²I) with its own noise source (secret OS entropy on its own host
unless the run is seeded), and sends back x̃_{t+1} only (:class:`~powerdp.engine.consensus.messages.ZoneUpdate`).
Nothing else crosses; a client writes no file (noisy-admm keeps no checkpoint).

What the coordinator sees is every x̃_t: the run's headline (every user, zCDP composed over every use, no
amplification) holds against it; 001's amplified figure for the first user is against whoever sees the final
release only (docs/learning.md, "noisy-admm on the backends").

Every client draws from its own stream (``noise_rng(seed, client)``) for its own rows only, and a row's arithmetic
does not depend on the other rows, so a seeded run is bit-identical on every backend.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...engine.consensus.messages import ZoneUpdate
from ...engine.sharing.hosts import SharingAgentSpec
from ...errors import ConfigError
from ...privacy.mechanisms import noise_rng
from ...privacy.sampler import gaussian_release
from .noisy_admm import primal_step

__all__ = ["IterateMessage", "HostedUsers", "user_blocks", "user_specs"]


@dataclass(frozen=True)
class IterateMessage:
    """Coordinator → client at iteration ``round``: the runs whose user this iteration is one of the client's, those
    users (the client's own indices; the order is public) and the runs' x̃_t, y_t, λ_{t+1} (released or computed
    from released values only)."""

    round: int
    client: int
    runs: np.ndarray  # (k,) indices of the batched runs
    users: np.ndarray  # (k,) each run's user, an index into the client's block
    x: np.ndarray  # (k, n) x̃_t
    y: np.ndarray  # (k, n) y_t
    lam: np.ndarray  # (k, n) λ_{t+1}


class HostedUsers:
    """A client holding a block of users' samples, on the sharing hosts' contract (``HostedUsers(agent=P, ...)``)."""

    private_kind = "client"  # its folder would be OUT/clients.private/client_P; noisy-admm keeps no checkpoint, so none is made

    def __init__(self, agent: int, features: np.ndarray, targets: np.ndarray, eta: float, beta: float, ridge_in_f: float,
                 sigma: float, seed: int | None, sensitivity: float | None = None):
        self.agent = agent
        self.features, self.targets = features, targets
        self.eta, self.beta, self.ridge_in_f, self.sigma = eta, beta, ridge_in_f, sigma
        self.sensitivity = sensitivity  # ηΔ, public: what the sampler's rounding is calibrated to (None: σ/10⁴ assumed)
        self.rng = noise_rng(seed, agent)  # made on this host: a secret run's bits never leave it

    def step(self, msg: IterateMessage) -> ZoneUpdate:
        """x̃_{t+1} of the message's runs: the gradient step on each run's user, then the noise (drawn here)."""
        if len(msg.runs) == 0:
            return ZoneUpdate(round=msg.round, zone=self.agent, released=msg.x)
        x = primal_step(msg.x, msg.y, msg.lam, self.features[msg.users], self.targets[msg.users], eta=self.eta,
                        beta=self.beta, ridge_in_f=self.ridge_in_f)
        if self.sigma > 0:
            x = gaussian_release(x, self.sigma, self.sensitivity, self.rng)[0]  # the product's sampler, as in-process noisy_admm
        return ZoneUpdate(round=msg.round, zone=self.agent, released=x)


def user_blocks(users: int, clients: int) -> np.ndarray:
    """The first user of each client's block and the end (``clients + 1`` offsets): contiguous, public, as even as
    they go (the users are already in a random public order: the synthetic draw or the test split's shuffle)."""
    if clients > users:
        raise ConfigError(f"clients = {clients}: more clients than the {users} training users")
    return np.linspace(0, users, clients + 1).round().astype(np.int64)


def user_specs(features: np.ndarray, targets: np.ndarray, clients: int, *, eta: float, beta: float, ridge_in_f: float,
               sigma: float, seed: int | None, sensitivity: float | None = None) -> list[SharingAgentSpec]:
    """One spec per client: its block of samples and the public settings (``sensitivity``: ηΔ, one step's L2
    sensitivity, which the sampler's rounding is calibrated to)."""
    edges = user_blocks(len(targets), clients)
    return [
        SharingAgentSpec(
            agent=p, factory="powerdp.apps.learning.noisy_hosts:HostedUsers", weight=int(hi - lo),
            kwargs=dict(features=features[lo:hi].copy(), targets=targets[lo:hi].copy(), eta=eta, beta=beta, ridge_in_f=ridge_in_f,
                        sigma=sigma, seed=seed, sensitivity=sensitivity),
        )
        for p, (lo, hi) in enumerate(zip(edges[:-1], edges[1:]))
    ]
