"""A federated-learning run's settings (docs/learning.md), validated in one place.

:class:`LearnConfig` carries every knob of ``powerdp learn`` and offers the attributes the engine's
update rules and perturbations read of a run configuration (``eta``, ``local_updates``, ``extra``,
``epsilon``, ``delta``, ``mechanism``, ``sensitivity``, ``target_*``, :meth:`per_step_noise`), so
they run unchanged on a client. :data:`ALGORITHMS` names the papers' algorithms as
update × perturbation × mechanism of :mod:`powerdp.engine.consensus.algorithms`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ...engine.consensus.algorithms import Algorithm, AlgorithmChoices, resolve
from ...engine.consensus.updates import ETA_SCHEDULES
from ...engine.consensus.updates.trust_region import TRUST_SCHEDULES
from ...errors import ConfigError
from ...opf.local_solver import BOX_SOLVERS, solver_class
from ...privacy.faults import InjectedFaults, check_faults
from .data import parse_split
from .sensitivity import ADJACENCIES

__all__ = ["LearnConfig", "ALGORITHMS", "RUNNERS", "ALGORITHM_NAMES", "RHO_SCHEDULES", "penalty", "NONPRIVATE_RHO", "DEFAULT_ETA",
           "NONPRIVATE_TOL", "ADAPT_RHO_ROUNDS", "BACKENDS", "DEFAULT_ROUNDS", "NONPRIVATE_ROUNDS"]

#: the papers' algorithms: engine combination, and settings the algorithm fixes
ALGORITHMS: dict[str, tuple[str, dict[str, Any]]] = {
    "nonprivate": ("nonprivate", {}),
    "objl": ("objl", {}),  # 000: ObjPert, Laplace, E local steps
    "objg": ("objg", {}),  # 000: ObjPert, Gaussian
    "outl": ("outl", {}),  # 000: OutPert, Laplace
    "outg": ("outg", {}),  # 000: OutPert, Gaussian
    "objp": ("objl", {"local_updates": 1, "eta": "sqrt"}),  # 004 Alg. 1: ObjP, E = 1, η_t = a/√t (a = 1)
    "objt": ("objt", {"local_updates": 1}),  # 004 Alg. 2: trust region, Laplace, E = 1
    "outp": ("huang/output/gaussian", {"local_updates": 1}),  # Huang et al.'s DP-ADMM (004's baseline)
}
#: algorithms that are not a per-round consensus of P clients and so have their own runner (docs/learning.md):
#: name → (config class, run function) as "module:attribute" of this package, imported when used.
#: noisy-admm: 001's Algorithm 1, one user's gradient per iteration, only the final (x, λ) released.
RUNNERS: dict[str, tuple[str, str]] = {
    "noisy-admm": ("amplified:NoisyADMMConfig", "amplified:run_noisy_admm"),
}
ALGORITHM_NAMES = (*ALGORITHMS, *RUNNERS)


def runner_part(algorithm: str, which: int):
    """The config class (0) or run function (1) of an algorithm of :data:`RUNNERS`."""
    from importlib import import_module

    module, attr = RUNNERS[algorithm][which].split(":")
    return getattr(import_module(f"{__package__}.{module}"), attr)


def check_placement(config, bad) -> None:
    """Where a run's clients live: ``backend``, ``workers``, ``rank_timeout`` (LearnConfig and NoisyADMMConfig);
    ``bad(name, message)`` makes the error."""
    if config.backend not in BACKENDS:
        raise bad("backend", f"choose one of {', '.join(BACKENDS)}")
    if config.workers is not None and (isinstance(config.workers, bool) or int(config.workers) != config.workers or config.workers < 1):
        raise bad("workers", "must be a positive integer")
    if not (isinstance(config.rank_timeout, (int, float)) and config.rank_timeout > 0):
        raise bad("rank_timeout", "must be a positive number of seconds")


RHO_SCHEDULES = ("auto", "paper", "constant")
#: the first ρ of a non-private run under rho_schedule "auto"; residual balancing (Boyd et al. §3.4.1) adapts it
#: in the first ADAPT_RHO_ROUNDS rounds and then holds it (the convergence proof needs ρ fixed eventually)
NONPRIVATE_RHO = 1e-3
ADAPT_RHO_ROUNDS = 500
#: a non-private run stops when both relative residuals (Boyd et al. §3.3.1) are below this (``tol`` "auto")
NONPRIVATE_TOL = 1e-5
#: η of a private run under eta "auto", at R₂ = 1, scaled as 1/R₂² (the curvature scales as R₂²); public, as the
#: privacy analysis needs (output perturbation's sensitivity is Δ/(1/η + ρ)). A non-private run backtracks instead.
DEFAULT_ETA = 300.0
BACKENDS = ("serial", "process", "mpi")
#: rounds of a private run unless given; the round cap of a non-private one, which stops earlier by the residual
#: rule (digits: round 1032; MNIST at box 1, R₂ = 1, the slowest bundled set: round 4900, so the cap leaves it 2×)
DEFAULT_ROUNDS = 1000
NONPRIVATE_ROUNDS = 10000


def penalty(t: int, epsilon: float | None, c1: float = 2.0, c2: float = 5.0, tc: float = 1e4) -> float:
    """ρ̂_t = min{10⁹, c₁·1.2^⌊t/T_c⌋ + c₂/ε̄} (000 eq. 73, 004 eq. 21); non-private (ε̄ = ∞): c₁·1.2^⌊t/T_c⌋."""
    grow = c1 * 1.2 ** math.floor(t / tc) if t / tc < 200 else math.inf
    return float(min(1e9, grow + (c2 / epsilon if epsilon else 0.0)))


@dataclass
class LearnConfig(AlgorithmChoices):
    """A federated-learning run: data, clients, algorithm, privacy, schedule (docs/learning.md)."""

    dataset: str = "digits"  # digits, mnist, or a .csv / .npz path
    label: str = "label"  # the label column of a CSV
    clients: int = 10
    split: str = "iid"  # iid, label-skew, dirichlet:ALPHA
    split_seed: int = 0  # public: the train/test split and the clients' shares
    test_fraction: float = 0.2
    feature_range: tuple[float, float] | None = None  # public bounds of a user's features (bundled sets have theirs)
    bounds: str | None = None  # a file of per-column public bounds, CSV column,low,high (instead of feature_range)
    clip: float = 1.0  # R₂: every row clipped to ‖x‖₂ ≤ R₂
    clip_l1: float | None = None  # R₁ (default √J·R₂, implied by R₂)
    box: float | None = 1.0  # u of W_p = [−u, u]ⁿ; None: W_p = Rⁿ
    reg: float = 1e-6  # β of the ℓ2 term (β/P)‖z‖² per client
    algorithm: str = "nonprivate"
    epsilon: float = 0.1  # per local step
    delta: float = 1e-6  # per local step (Gaussian)
    target_epsilon: float | None = None  # total per client for the whole run; the per-step noise is calibrated to it
    target_delta: float | None = None
    sensitivity: str = "sound"  # or "paper": the papers' data-dependent value, NOT private
    adjacency: str = "replace-one"  # or "add-remove"
    # rounds (private runs: T, what the budget is spent over); None: DEFAULT_ROUNDS for a private run, the cap
    # NONPRIVATE_ROUNDS for a non-private one (which stops earlier by the residual rule)
    rounds: int | None = None
    local_updates: int = 1
    rho: float | None = None  # the constant ρ of rho_schedule "constant"
    # "auto": ρ̂_t for a private run; for a non-private one NONPRIVATE_RHO adapted by residual balancing; "paper":
    # ρ̂_t of 000 eq. 73 (ρ̂_1 = 102 at ε̄ = 0.05); "constant": rho
    rho_schedule: str = "auto"
    rho_c1: float = 2.0
    rho_c2: float = 5.0
    rho_tc: float = 1e4
    # η_t of the linearized updates: "auto" is DEFAULT_ETA / clip² for a private run (public) and backtracking on
    # each client's own curvature for a non-private one (powerdp/learning/steps.py); or a constant, capped, sqrt,
    # theorem as for power flow
    eta: str | float = "auto"
    # the stopping rule: both relative residuals (Boyd et al. §3.3.1) ≤ tol ends the run before `rounds`;
    # None ("auto"): NONPRIVATE_TOL for a non-private run, off (0) for a private one; 0: never
    tol: float | None = None
    eta_scale: float = 1.0  # a of OutP's η_t (Huang et al.)
    trust_radius: float = 1.0  # a of ObjT's radius δ_t
    trust_schedule: str = TRUST_SCHEDULES[0]  # constant (δ_t = a) or inverse-square (a/t²)
    # None (default): secret noise from OS entropy in each client, as a deployment; an integer: a reproducible
    # experiment whose noise anyone who knows the seed can replay (the summary says which: noise_source)
    seed: int | None = None
    evaluate: bool = True
    evaluate_every: int = 10  # rounds between evaluations of the global model (and of the ledger's figure)
    checkpoint_every: int | None = None  # K rounds; None: by time (runs/loop.py: CHECKPOINT_SECONDS); 0: never
    local_solver: str = "box"
    backend: str = "serial"  # serial, process (worker processes) or mpi (ranks; every rank runs the same program)
    workers: int | None = None  # process backend: worker processes (default: one per core, at most one per client)
    rank_timeout: float = 60.0  # mpi backend: a rank silent this long (no heartbeat) is reported lost
    blas_threads: int | None = 1  # BLAS threads during the run (None: the library's default)
    extra: dict[str, Any] = field(default_factory=dict)
    # TEST-ONLY (powerdp.privacy.faults): set in Python by the test suite or the audit's self-test, never from a
    # file or a flag (from_dict refuses it, to_dict leaves it out)
    faults: InjectedFaults | None = field(default=None, repr=False)
    # the round cap validate() resolved from the algorithm when rounds was not given (None: rounds was given); while
    # rounds still equals it, it is resolved again from the final settings (replace, or a changed algorithm)
    _default_rounds: int | None = field(default=None, init=False, repr=False, compare=False)

    application = "learning"  # what BoxProjection.check_config looks for (a class attribute, not a field)

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ checks
    def validate(self) -> LearnConfig:
        def bad(name: str, msg: str) -> ConfigError:
            return ConfigError.for_setting(name, getattr(self, name), msg)

        if self.algorithm in RUNNERS:
            cls = runner_part(self.algorithm, 0)
            raise bad("algorithm", f"has its own runner: use {cls.__module__}.{cls.__name__} and "
                      f"{runner_part(self.algorithm, 1).__name__} (powerdp learn --algorithm {self.algorithm})")
        if self.algorithm not in ALGORITHMS:
            raise bad("algorithm", f"choose one of {', '.join(ALGORITHM_NAMES)}")
        fixed = ALGORITHMS[self.algorithm][1]
        for key, value in fixed.items():
            if key == "local_updates" and self.local_updates != value:
                raise bad("local_updates", f"{self.algorithm} takes {value} local update per round (the paper's algorithm)")
        if isinstance(self.clients, bool) or int(self.clients) != self.clients or self.clients < 2:
            raise bad("clients", "need at least 2 clients")
        parse_split(self.split)
        if not 0 < self.test_fraction < 1:
            raise bad("test_fraction", "must lie in (0, 1)")
        if self.feature_range is not None:
            lo, hi = (float(v) for v in self.feature_range)
            if not hi > lo:
                raise bad("feature_range", "give LO,HI with HI > LO")
            self.feature_range = (lo, hi)
        if self.bounds is not None and self.feature_range is not None:
            raise bad("bounds", "give public bounds once: a bounds file or one feature_range for every column")
        for name in ("clip", "reg"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and (v > 0 if name == "clip" else v >= 0)):
                raise bad(name, "must be a positive number" if name == "clip" else "must be a non-negative number")
        if self.clip_l1 is not None and not self.clip_l1 > 0:
            raise bad("clip_l1", "must be a positive number")
        if self.box is not None and not (math.isfinite(self.box) and self.box > 0):
            raise bad("box", "the box half-width u must be a positive number (or none for W = Rⁿ)")
        spec = self.spec
        if spec.private:
            if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
                raise bad("epsilon", "must be a positive number")
            if spec.mechanism == "gaussian" and not 0 < self.delta < 1:
                raise bad("delta", "the Gaussian mechanism needs 0 < delta < 1")
        if self.sensitivity not in ("sound", "paper"):
            raise bad("sensitivity", "choose 'sound' or 'paper' (the papers' data-dependent value, not private)")
        if self.adjacency not in ADJACENCIES:
            raise bad("adjacency", f"choose one of {', '.join(ADJACENCIES)}")
        if self.rounds is None or (self._default_rounds is not None and self.rounds == self._default_rounds):
            # not given: T of a private run, the cap of a non-private one, from the algorithm as it is now
            self.rounds = self._default_rounds = DEFAULT_ROUNDS if spec.private else NONPRIVATE_ROUNDS
        else:
            self._default_rounds = None
        if isinstance(self.rounds, bool) or int(self.rounds) != self.rounds or self.rounds < 1:
            raise bad("rounds", "must be a positive integer")
        if int(self.local_updates) != self.local_updates or self.local_updates < 1:
            raise bad("local_updates", "must be a positive integer")
        if self.rho_schedule not in RHO_SCHEDULES:
            raise bad("rho_schedule", f"choose one of {', '.join(RHO_SCHEDULES)}")
        if self.rho is not None and not (math.isfinite(self.rho) and self.rho > 0):
            raise bad("rho", "must be a positive number")
        if self.rho is not None and self.rho_schedule != "constant":
            raise bad("rho", "a constant ρ goes with rho_schedule 'constant' (--rho-schedule constant)")
        if self.rho_schedule == "constant" and self.rho is None:
            raise bad("rho", "a constant penalty needs a value (--rho)")
        for name in ("rho_c1", "rho_tc", "eta_scale", "trust_radius"):
            if not getattr(self, name) > 0:
                raise bad(name, "must be a positive number")
        if self.rho_c2 < 0:
            raise bad("rho_c2", "must be >= 0")
        if isinstance(self.eta, str) and self.eta not in ETA_SCHEDULES + ("auto",):
            try:
                self.eta = float(self.eta)
            except ValueError:
                raise bad("eta", f"choose one of {', '.join(ETA_SCHEDULES)} or a positive number") from None
        if not isinstance(self.eta, str) and not float(self.eta) > 0:
            raise bad("eta", "a constant step must be positive")
        if self.eta == "theorem" and not spec.private:
            raise bad("eta", "the Theorem 5.1 schedule needs epsilon; use it with a DP algorithm")
        if self.trust_schedule not in TRUST_SCHEDULES:
            raise bad("trust_schedule", f"choose one of {', '.join(TRUST_SCHEDULES)}")
        if spec.update == "huang" and self.box is None:
            raise bad("box", "OutP's step size (Huang et al.) needs a bounded feasible set; give --box U")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise bad("seed", "must be a non-negative integer, or unset for secret noise")
        check_placement(self, bad)
        if self.tol is not None and not (isinstance(self.tol, (int, float)) and math.isfinite(self.tol) and self.tol >= 0):
            raise bad("tol", "must be a non-negative number (0: run every round)")
        check_faults(self.faults)
        solver_class(self.local_solver, "local_solver", BOX_SOLVERS).check_config(self)
        if isinstance(self.evaluate_every, bool) or int(self.evaluate_every) != self.evaluate_every or self.evaluate_every < 1:
            raise bad("evaluate_every", "must be a positive integer")
        if self.checkpoint_every is not None and (isinstance(self.checkpoint_every, bool)
                                                  or not isinstance(self.checkpoint_every, int) or self.checkpoint_every < 0):
            raise bad("checkpoint_every", "must be >= 0 (0 turns checkpoints off)")
        self._check_budget(spec, bad)
        self.rounds = int(self.rounds)
        self.local_updates = int(self.local_updates)
        self.clients = int(self.clients)
        return self

    def _check_budget(self, spec: Algorithm, bad) -> None:
        if self.target_epsilon is None:
            if self.target_delta is not None:
                raise bad("target_delta", "goes with target_epsilon (a total budget per client)")
            return
        if not spec.private:
            raise bad("target_epsilon", f"algorithm {self.algorithm!r} is not private; a privacy budget needs a DP algorithm")
        if not (math.isfinite(self.target_epsilon) and self.target_epsilon > 0):
            raise bad("target_epsilon", "must be a positive number (the total ε per client for the whole run)")
        if spec.mechanism == "gaussian":
            if self.target_delta is None or not 0 < self.target_delta < 1:
                raise bad("target_delta", "the Gaussian mechanism needs a total δ in (0, 1), e.g. 1e-6")
        elif self.target_delta not in (None, 0, 0.0):
            raise bad("target_delta", "a Laplace budget is pure ε-DP here (noise on every entry): leave target_delta unset or 0")
        self.per_step_noise()

    # ------------------------------------------------------- what the engine reads
    @property
    def spec(self) -> Algorithm:
        return resolve(ALGORITHMS[self.algorithm][0])

    @property
    def engine_eta(self) -> str | float:
        eta = ALGORITHMS[self.algorithm][1].get("eta", self.eta)
        return DEFAULT_ETA / self.clip**2 if eta == "auto" else eta

    @property
    def eta_rule(self) -> str:
        """How η is chosen: ``backtracking`` (non-private "auto"), ``public constant`` (private "auto"), or the setting."""
        eta = ALGORITHMS[self.algorithm][1].get("eta", self.eta)
        if eta == "auto":
            return "public constant" if self.private else "backtracking"
        return str(eta)

    @property
    def coordinator_rho_schedule(self) -> str:
        """``adaptive`` (residual balancing) for a non-private run under rho_schedule "auto", else ``constant``
        (the coordinator then takes ρ_t of :meth:`penalty` each round)."""
        return "adaptive" if self.rho_schedule == "auto" and not self.private else "constant"

    @property
    def stopping_tolerance(self) -> float:
        """The stopping rule's tolerance on both relative residuals (0: none): ``tol``, or its "auto" value."""
        if self.tol is not None:
            return float(self.tol)
        return 0.0 if self.private else NONPRIVATE_TOL

    @property
    def private_steps(self) -> int:
        return int(self.rounds) * int(self.local_updates)

    def per_step_noise(self) -> dict[str, float] | None:
        """Budget-first runs: the calibrated per-step noise (as :meth:`powerdp.apps.power_flow.config.RunConfig.per_step_noise`)."""
        if self.target_epsilon is None:
            return None
        from ...privacy.calibration import gaussian_noise_multiplier, laplace_epsilon_per_step

        try:
            if self.mechanism == "gaussian":
                return {"noise_multiplier": gaussian_noise_multiplier(float(self.target_epsilon), float(self.target_delta), self.private_steps)}
            return {"epsilon": laplace_epsilon_per_step(float(self.target_epsilon), self.private_steps)}
        except ConfigError as exc:
            raise ConfigError.for_setting("target_epsilon", self.target_epsilon, f"{exc}") from None

    @property
    def noise_source(self) -> str:
        """``"secret"`` (no seed: OS entropy per client) or ``"seeded"`` (replayable by whoever knows the seed)."""
        return "secret" if self.seed is None else "seeded"

    @property
    def step_epsilon(self) -> float | None:
        """ε̄, the per-step ε (what ρ̂_t and OutP's η_t use); None for a non-private run."""
        if not self.private:
            return None
        budget = self.per_step_noise()
        if budget is None:
            return float(self.epsilon)
        if "epsilon" in budget:
            return float(budget["epsilon"])
        import dp_accounting

        return float(dp_accounting.get_epsilon_gaussian(budget["noise_multiplier"], float(self.target_delta)))

    @property
    def step_delta(self) -> float:
        return float(self.target_delta) if self.target_epsilon is not None and self.target_delta else float(self.delta)

    def penalty(self, t: int) -> float:
        """ρ_t of round t: ρ̂_t (000 eq. 73) or the constant ρ. Data-independent: costs no privacy."""
        if self.rho_schedule == "constant":
            return float(self.rho)
        if self.rho_schedule == "auto" and not self.private:
            return NONPRIVATE_RHO
        return penalty(t, self.step_epsilon, self.rho_c1, self.rho_c2, self.rho_tc)

    def engine_view(self) -> EngineView:
        """The settings the update rules and perturbations read, with this algorithm's fixed choices."""
        return EngineView(self)

    # ------------------------------------------------------------ conversion
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("faults")  # test-only: never written, so never read back
        d.pop("_default_rounds")  # the written config holds the resolved rounds
        if d["feature_range"] is not None:
            d["feature_range"] = list(d["feature_range"])
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "configuration") -> LearnConfig:
        known = {f.name for f in dataclasses.fields(cls) if f.init} - {"faults"}  # test-only: set in Python, never from a file
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}")
        return cls(**data)

    def replace(self, **changes: Any) -> LearnConfig:
        """A new config with ``changes``; settings resolved from others (the round cap) are resolved again."""
        faults = changes.pop("faults", self.faults)
        settings = self.to_dict()
        if self._default_rounds is not None and self.rounds == self._default_rounds:
            settings["rounds"] = None  # not given: validate() resolves it from the new algorithm
        new = LearnConfig.from_dict({**settings, **changes})
        if faults is not None:
            new.faults = faults
            new.validate()
        return new


class EngineView:
    """A :class:`LearnConfig` as the engine's update rules and perturbations read a run configuration."""

    def __init__(self, config: LearnConfig):
        self._c = config
        self.eta = config.engine_eta
        self.local_updates = config.local_updates
        self.extra = {
            **config.extra,
            "trust_radius": config.trust_radius,
            "trust_schedule": config.trust_schedule,
            "eta_scale": config.eta_scale,
            "radius": config.box,
            "all_shared": True,  # every entry of a client's z is the global model's (B_p = I)
        }
        self.epsilon = config.epsilon
        self.delta = config.delta
        self.target_epsilon = config.target_epsilon
        self.target_delta = config.target_delta
        self.sensitivity = config.sensitivity
        self.private = config.private
        self.mechanism = config.mechanism
        self.spec = config.spec
        self.seed = config.seed
        self.faults = config.faults
        self.application = "learning"

    @property
    def noise_source(self) -> str:
        """``"secret"`` (no seed: OS entropy per client) or ``"seeded"`` (replayable by whoever knows the seed)."""
        from ...privacy.mechanisms import noise_source

        return noise_source(self.seed)

    @property
    def claim_holds(self) -> bool:
        """Whether the ledger's ε is a proven guarantee: the papers' data-dependent sensitivity (``paper``) is
        never one, whatever the perturbation (docs/learning.md)."""
        return bool(self.private) and self.sensitivity == "sound"

    def per_step_noise(self) -> dict[str, float] | None:
        return self._c.per_step_noise()

    def penalty(self, t: int) -> float:
        return self._c.penalty(t)

    @property
    def step_epsilon(self) -> float | None:
        return self._c.step_epsilon

    @property
    def step_delta(self) -> float:
        return self._c.step_delta
