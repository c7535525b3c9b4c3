"""ADMM sharing: the coordinator, its messages and the agents' contract (docs/sharing.md).

Sharing form (Boyd et al. §7.3; papers/admm-sharing-distributed-features, "002"):

    min Σ_m f_m(x_m) + g(Σ_m A_m x_m)

Agent m keeps x_m (and its private data) and releases only its contribution
r_m = A_m x_m. The coordinator holds z (its copy of the sum) and the dual y,
and does, per round (Jacobi: every agent in parallel, 002 eqs. 7–9):

* x_m ← argmin f_m(x) + ⟨y, A_m x⟩ + ρ/2‖S − r_m + A_m x − z‖² + τ/2‖A_m x − r_m‖²   (agent, eq. 7)
* z ← argmin g(z) − ⟨y, z⟩ + ρ/2‖S − z‖² = prox_{g/ρ}(S + y/ρ)                     (coordinator, eq. 8)
* y ← y + ρ(S − z)                                                                  (coordinator, eq. 9)

with S = Σ_m r_m the sum of the released contributions. τ = 0 is 002's update
exactly; τ = (M − 1)ρ (the default) adds the proximal term that makes the
Jacobi update Boyd's sharing ADMM, which converges for every ρ > 0 on convex
problems (docs/sharing.md "Choosing ρ and τ").

What crosses: the coordinator sends every agent the same :class:`SharingMessage`
(S − z, y, ρ, τ: all public) and receives one :class:`Contribution` per agent
(the released r_m and solver counters). An agent's data, its x_m, its noise and
its noise statistics stay with it. An agent uses its own *released* r_m (noisy
when private) for its previous contribution, so each round's release is a
function of its data and public values only (what the privacy proofs need).

The z-steps (``g``) are a registry, :data:`ZSTEPS`: a new coupling is one class
with ``prox(v, rho)`` and a registry entry.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "SharingMessage", "Contribution", "SharingStats", "SharingResiduals", "SharingCoordinator", "SharingAgent",
    "ZSTEPS", "BoxZStep", "LogisticZStep", "make_zstep",
]


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class SharingMessage:
    """Coordinator → every agent at the start of round ``round``: public values only."""

    round: int
    residual: np.ndarray  # S^t − z^t
    dual: np.ndarray  # y^t
    rho: float
    tau: float
    active: np.ndarray | None = None  # rows in the coupling's penalty (None: all); see SharingCoordinator
    relaxation: float = 1.0  # α of over-relaxation; residual is then Ŝ − z with Ŝ = αS + (1 − α)z_prev


@dataclass(frozen=True)
class SharingStats:
    """AGENT-PRIVATE: what an agent's local step cost (its iteration count and time depend on its data).
    Never part of a :class:`Contribution`; a one-machine simulation reads it with the agent's diagnostics."""

    solves: int
    iterations: int
    wall_s: float


@dataclass(frozen=True)
class Contribution:
    """Agent → coordinator at the end of round ``round``: the released r_m = A_m x_m (+ noise) only."""

    round: int
    agent: int
    released: np.ndarray


# --------------------------------------------------------------------------- z-steps


class BoxZStep:
    """g = indicator{lo ≤ z ≤ hi}: the z-step is a projection (equalities: lo = hi).

    The market's coupling (docs/market.md): z_0 = 0 (system balance) and each
    monitored line's PTDF flow inside its limits.
    """

    name = "box"

    def __init__(self, lo: np.ndarray, hi: np.ndarray, screened: np.ndarray | None = None):
        self.lo = np.asarray(lo, dtype=float)
        self.hi = np.asarray(hi, dtype=float)
        if self.lo.shape != self.hi.shape or np.any(self.lo > self.hi):
            raise ValueError("box z-step needs lo ≤ hi of one shape")
        # rows whose constraint enters the penalty only once it binds (docs/sharing.md "Screened rows")
        self.screened = None if screened is None else np.asarray(screened, dtype=bool)

    @property
    def size(self) -> int:
        return len(self.lo)

    def prox(self, v: np.ndarray, rho: float) -> np.ndarray:
        return np.clip(v, self.lo, self.hi)

    def value(self, z: np.ndarray) -> float:
        return 0.0 if np.all((z >= self.lo - 1e-12) & (z <= self.hi + 1e-12)) else float("inf")


class LogisticZStep:
    """g(z) = (1/N) Σ_i log(1 + exp(−b_i z_i)), labels b ∈ {−1, +1} held by the coordinator (002 §3).

    The prox is separable; each entry is a one-dimensional strictly convex
    problem solved by Newton's method safeguarded by bisection on a bracket of the root
    (it lies within 1/(Nρ) of v), to machine precision in a fixed number of steps.
    """

    name = "logistic"

    def __init__(self, labels: np.ndarray):
        b = np.asarray(labels, dtype=float)
        if not np.all(np.isin(b, (-1.0, 1.0))):
            raise ValueError("logistic z-step needs labels in {-1, +1}")
        self.b = b
        self.n = len(b)

    @property
    def size(self) -> int:
        return self.n

    def value(self, z: np.ndarray) -> float:
        return float(np.mean(np.logaddexp(0.0, -self.b * z)))

    def prox(self, v: np.ndarray, rho: float, iterations: int = 60) -> np.ndarray:
        # minimise h(z) = ℓ(b z)/N + ρ/2 (z − v)²; h' is increasing, its root lies in [v, v + 1/(Nρ)] (b = +1)
        # or [v − 1/(Nρ), v] (b = −1), since 0 ≤ −b·ℓ' ≤ 1/N
        b, n = self.b, self.n
        lo = np.where(b > 0, v, v - 1.0 / (n * rho))
        hi = np.where(b > 0, v + 1.0 / (n * rho), v)
        z = 0.5 * (lo + hi)
        for _ in range(iterations):
            with np.errstate(over="ignore"):
                s = 1.0 / (1.0 + np.exp(b * z))  # σ(−b z)
            grad = -b * s / n + rho * (z - v)
            lo = np.where(grad < 0, z, lo)
            hi = np.where(grad >= 0, z, hi)
            step = z - grad / (s * (1.0 - s) / n + rho)
            inside = (step > lo) & (step < hi)
            z = np.where(inside, step, 0.5 * (lo + hi))
        return z


#: name → z-step class (one module or class per coupling, docs/sharing.md)
ZSTEPS: dict[str, type] = {"box": BoxZStep, "logistic": LogisticZStep}


def make_zstep(name: str, **params: Any):
    try:
        return ZSTEPS[name](**params)
    except KeyError:
        raise ValueError(f"unknown z-step {name!r}; known: {', '.join(ZSTEPS)}") from None


# --------------------------------------------------------------------------- coordinator


@dataclass(frozen=True)
class SharingResiduals:
    primal: float  # ‖S^{t+1} − z^{t+1}‖₂
    dual: float  # ρ‖z^{t+1} − z^t‖₂


class SharingCoordinator:
    """Sharing ADMM coordinator: z-step (a prox of g) and dual step (002 eqs. 8–9).

    Parameters
    ----------
    zstep: the coupling g (:data:`ZSTEPS`); ``zstep.size`` is the length of every contribution.
    n_agents: M.
    rho: the penalty ρ. tau: the proximal weight τ of the agents' step (None: (M − 1)ρ, Boyd's sharing).
    rho_schedule: ``"constant"`` or ``"adaptive"``: residual balancing on relative residuals (ρ ×2 when the
        primal residual exceeds 10× the dual one, ÷2 in the opposite case) during the first ``adapt_rounds``
        rounds, then constant, so the convergence guarantee of a fixed ρ applies from there on.
    """

    def __init__(self, zstep, n_agents: int, rho: float, tau: float | None = None, rho_schedule: str = "constant",
                 adapt_rounds: int = 1000, relaxation: float = 1.0):
        self.zstep = zstep
        self.n = int(zstep.size)
        self.n_agents = int(n_agents)
        self.rho = float(rho)
        if not self.rho > 0:
            raise ValueError(f"rho must be positive, got {rho!r}")
        self.tau_factor = None if tau is None else float(tau) / self.rho  # τ follows ρ when ρ adapts
        self.tau = float((self.n_agents - 1) * self.rho if tau is None else tau)
        if rho_schedule not in ("constant", "adaptive"):
            raise ValueError(f"rho_schedule must be 'constant' or 'adaptive', got {rho_schedule!r}")
        self.rho_schedule = rho_schedule
        self.adapt_rounds = int(adapt_rounds)
        if not 0.0 < relaxation < 2.0:
            raise ValueError(f"relaxation must lie in (0, 2), got {relaxation!r}")
        self.relaxation = float(relaxation)
        screened = getattr(zstep, "screened", None)
        self.active = None if screened is None else ~screened  # screened rows join once their constraint binds
        self.z = np.zeros(self.n)
        self.y = np.zeros(self.n)
        self.total = np.zeros(self.n)  # S = Σ_m r_m
        self.total_hat = self.total  # Ŝ, the relaxed sum (= S when relaxation = 1)
        self.round = 0

    def _sum(self, updates, expected_round: int) -> np.ndarray:
        if len(updates) != self.n_agents:
            raise ValueError(f"expected {self.n_agents} contributions, got {len(updates)}")
        parts = [None] * self.n_agents
        for u in updates:
            if u.round != expected_round:
                raise ValueError(f"agent {u.agent} sent round {u.round}, expected {expected_round}")
            r = np.asarray(u.released, dtype=float)
            if r.shape != (self.n,):
                raise ValueError(f"agent {u.agent} released {r.shape} values, expected {self.n}")
            if not np.all(np.isfinite(r)):
                raise FloatingPointError(f"agent {u.agent} released NaN or inf in round {u.round}")
            parts[u.agent] = r
        total = np.zeros(self.n)
        for r in parts:  # fixed order: the same sum on every backend
            total = total + r
        return total

    def start(self, updates) -> None:
        """Round 0: the agents' initial contributions; z⁰ = prox(S⁰), y⁰ = 0."""
        self.total = self._sum(updates, 0)
        self.z = self.zstep.prox(self.total, self.rho)
        self.total_hat = self.total
        self.y = np.zeros(self.n)
        self.round = 0
        if self.active is not None:
            self.active = self.active | (self.total != self.z)

    def broadcast(self) -> SharingMessage:
        self.round += 1
        active = None if self.active is None else self.active.copy()
        return SharingMessage(round=self.round, residual=self.total_hat - self.z, dual=self.y.copy(), rho=self.rho, tau=self.tau,
                              active=active, relaxation=self.relaxation)

    def receive(self, updates) -> SharingResiduals:
        """S^{t+1} from the contributions, then the z-step (eq. 8) and the dual step (eq. 9)."""
        self.total = self._sum(updates, self.round)
        z_prev = self.z
        a = self.relaxation  # over-relaxation (Boyd et al. §3.4.3): Ŝ = αS + (1 − α)z^t in the z- and y-steps
        self.total_hat = self.total if a == 1.0 else a * self.total + (1.0 - a) * z_prev
        self.z = self.zstep.prox(self.total_hat + self.y / self.rho, self.rho)
        gap = self.total_hat - self.z
        self.y = self.y + self.rho * gap
        if self.active is not None:  # a screened row whose constraint binds (z ≠ S) joins the penalty for good
            self.active = self.active | (gap != 0.0)
        res = SharingResiduals(primal=float(np.linalg.norm(self.total - self.z)), dual=float(self.rho * np.linalg.norm(self.z - z_prev)))
        if self.rho_schedule == "adaptive" and self.round <= self.adapt_rounds:
            self._balance(res)
        return res

    def _balance(self, res: SharingResiduals, mu: float = 10.0, factor: float = 2.0) -> None:
        """Residual balancing (Boyd et al. §3.4.1) on residuals relative to their scales (‖S‖, ‖z‖; ‖y‖)."""
        scale_p = max(float(np.linalg.norm(self.total)), float(np.linalg.norm(self.z)))
        scale_d = float(np.linalg.norm(self.y))
        if scale_p == 0 or scale_d == 0:
            return
        primal, dual = res.primal / scale_p, res.dual / scale_d
        if primal > mu * dual:
            self.rho *= factor
        elif dual > mu * primal:
            self.rho /= factor
        else:
            return
        self.tau = (self.n_agents - 1) * self.rho if self.tau_factor is None else self.tau_factor * self.rho

    def state_dict(self) -> dict:
        arrays = {"z": self.z, "y": self.y, "total": self.total, "total_hat": self.total_hat}
        if self.active is not None:
            arrays["active"] = self.active
        return {"arrays": arrays, "meta": {"round": self.round, "rho": self.rho, "tau": self.tau}}

    def load_state_dict(self, state: dict) -> None:
        a, m = state["arrays"], state["meta"]
        self.z, self.y, self.total = (np.asarray(a[k], dtype=float) for k in ("z", "y", "total"))
        self.total_hat = np.asarray(a["total_hat"], dtype=float) if "total_hat" in a else self.total
        if "active" in a:
            self.active = np.asarray(a["active"], dtype=bool)
        self.round, self.rho, self.tau = int(m["round"]), float(m["rho"]), float(m["tau"])


# --------------------------------------------------------------------------- agents


class SharingAgent:
    """The agent side of the contract. Subclasses implement :meth:`local_step` and :meth:`initial_release`.

    The base class keeps the agent's last released contribution, adds the
    output noise of its mechanism (if any) and times the step. State for
    checkpoints is :meth:`state_dict` — arrays and JSON values, never pickles.
    """

    def __init__(self, agent: int):
        self.agent = int(agent)
        self.released = None  # r̃_m^t, what the coordinator received last
        self.last_stats = SharingStats(0, 0, 0.0)  # agent-private: what its last local step cost
        self.own = None  # r̂_m^t: the released contribution, over-relaxed (= r̃_m^t when relaxation = 1)
        self.steps_released = 0
        self.rng = None  # a private agent's noise source (privacy.noise_rng), its ledger and its release journal
        self.ledger = None
        self.journal = None
        self._noise_multiplier = self._delta = None

    def _private(self, seed: int | None, noise_multiplier: float, delta: float) -> None:
        """Make this agent private: its noise source (secret unless seeded), a ledger of Gaussian releases of noise
        multiplier ``noise_multiplier`` accounted at ``delta``, and its release journal (privacy/journal.py)."""
        from ...privacy import GaussianMechanism, PrivacyLedger, noise_rng, noise_source
        from ...privacy.journal import ReleaseJournal

        self.rng = noise_rng(None if seed is None else int(seed), self.agent)
        self._noise_multiplier, self._delta = float(noise_multiplier), float(delta)
        nominal = GaussianMechanism.from_noise_multiplier(1.0, self._noise_multiplier, self._delta)
        self.ledger = PrivacyLedger(nominal, target_delta=self._delta, zone=self.agent, noise_source=noise_source(seed))
        self.journal = ReleaseJournal(self.agent, self.rng, self.ledger)

    def _release(self, value: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray]:
        """``value`` released with the discrete Gaussian of standard deviation ``sigma`` = noise multiplier × this
        round's sensitivity (the product's sampler), and recorded in the agent's ledger: (release, noise)."""
        from ...privacy import GaussianMechanism

        z = self._noise_multiplier
        mech = GaussianMechanism.from_noise_multiplier(sigma / z, z, self._delta, sigma=sigma)
        released, noise = mech.release(value, self.rng)
        self.ledger.record(1, mechanism=mech)
        return released, noise

    def privacy_report(self) -> dict | None:
        """The agent's ledger report (public: data-independent), with what its journal replayed after a resume."""
        from ...privacy.journal import privacy_report

        return privacy_report(self.ledger, self.journal)

    # --- to implement
    def initial_release(self) -> np.ndarray:
        raise NotImplementedError

    def local_step(self, msg: SharingMessage) -> tuple[np.ndarray, int]:
        """x-step (eq. 7) given the public message; returns (A_m x_m, solver iterations)."""
        raise NotImplementedError

    def perturb(self, contribution: np.ndarray, msg: SharingMessage) -> np.ndarray:
        """The release mechanism (default: none)."""
        return contribution

    def diagnostics(self) -> dict:
        """The simulation's evaluation of this agent (never seen by the coordinator in a deployment)."""
        return {}

    def extra_state(self) -> dict:
        return {"arrays": {}, "meta": {}}

    def load_extra_state(self, state: dict) -> None:
        pass

    # --- the protocol
    def initialize(self) -> Contribution:
        t0 = time.perf_counter()
        self.released = np.asarray(self.initial_release(), dtype=float)
        self.own = self.released
        self.last_stats = SharingStats(0, 0, time.perf_counter() - t0)
        return Contribution(round=0, agent=self.agent, released=self.released.copy())

    def step(self, msg: SharingMessage) -> Contribution:
        t0 = time.perf_counter()
        value, iterations = self.local_step(msg)
        self.released = np.asarray(self.perturb(np.asarray(value, dtype=float), msg), dtype=float)
        a = msg.relaxation
        if a == 1.0:
            self.own = self.released
        else:  # r̂ = α r̃ + (1 − α) ζ with ζ = r̂_prev − (ρ/κ)(Ŝ − z), this agent's copy (docs/sharing.md)
            self.own = a * self.released + (1.0 - a) * (self.own - msg.rho / (msg.rho + msg.tau) * msg.residual)
        self.steps_released += 1
        self.last_stats = SharingStats(1, int(iterations), time.perf_counter() - t0)  # stays with the agent
        return Contribution(round=msg.round, agent=self.agent, released=self.released.copy())

    def others_minus_z(self, msg: SharingMessage) -> np.ndarray:
        """Σ_{k≠m} r_k^t − z^t, from the broadcast S^t − z^t and this agent's own release (relaxed: Ŝ, r̂)."""
        return msg.residual - self.own

    def state_dict(self) -> dict:
        extra = self.extra_state()
        arrays = {"released": self.released, "own": self.own, **extra["arrays"]}
        meta = {"agent": self.agent, "steps_released": self.steps_released, **extra["meta"]}
        if self.rng is not None:  # the noise stream, secret or seeded: a resumed agent redraws what it repeats
            meta["rng"] = self.rng.state
            meta["ledger"] = self.ledger.state_dict()
        return {"arrays": arrays, "meta": meta}

    def load_state_dict(self, state: dict) -> None:
        self.released = np.asarray(state["arrays"]["released"], dtype=float)
        self.own = np.asarray(state["arrays"].get("own", self.released), dtype=float)
        self.steps_released = int(state["meta"]["steps_released"])
        meta = state["meta"]
        if self.rng is not None:
            if meta.get("rng") is not None:
                self.rng.state = meta["rng"]
            if meta.get("ledger") is not None:
                self.ledger.load_state_dict(meta["ledger"])
            else:  # an earlier version's checkpoint: one release a round
                self.ledger.record(self.steps_released)
        self.load_extra_state(state)
