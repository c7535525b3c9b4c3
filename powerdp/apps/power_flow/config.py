"""Run configuration: every knob of a distributed run, validated in one place.

A :class:`RunConfig` is what ``powerdp run`` flags, a TOML file or Python code
describe; it is saved next to every result (``config.json``) so a run can be
resumed or repeated exactly.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...engine.consensus.algorithms import ALIASES, Algorithm, AlgorithmChoices, resolve
from ...engine.consensus.penalties import PENALTY_RULES
from ...engine.consensus.perturbations import PERTURBATIONS
from ...engine.consensus.updates import ETA_SCHEDULES, UPDATES
from ...errors import ConfigError
from ...opf.local_solver import AUTO, SOLVERS, solver_class
from ...opf.objectives import OBJECTIVES
from ...privacy.faults import InjectedFaults, check_faults

__all__ = ["RunConfig", "ALGORITHMS", "ETA_SCHEDULES", "ADJACENCIES", "NOISE_SUPPORTS", "LINEARIZE", "default_algorithm",
           "BUDGET_ALGORITHM"]

ALGORITHMS = tuple(ALIASES)  # the named combinations; any UPDATE/PERTURBATION/MECHANISM is accepted too
ADJACENCIES = ("value", "bus")
NOISE_SUPPORTS = ("data", "all")
LINEARIZE = ("private", "all")
BACKENDS = ("serial", "process", "mpi", "net")
ACCELERATIONS = ("none", "anderson")
#: the zones' solvers: "auto" (each zone the fastest certified one that applies: opf.local_solver.auto_solver) or one
LOCAL_SOLVERS = (AUTO, *SOLVERS)
#: what ``"auto"`` coordination settings resolve to in a power-flow run (docs/algorithm.md, "Coordination"): a
#: non-private run balances one ρ per kind of shared variable, over-relaxes by 1.6 and accelerates (measured:
#: docs/results/performance.md, "Time to an answer"); a private run keeps the paper's constant ρ, no relaxation, no acceleration (every
#: one of them would be post-processing of its releases, and allowed, but none measured better under noise)
COORDINATION = {
    False: {"rho_schedule": "balanced", "relaxation": 1.6, "acceleration": "anderson"},
    True: {"rho_schedule": "constant", "relaxation": 1.0, "acceleration": "none"},
}
#: the fixed path: what "auto" resolves to where a caller does not ask for a run's defaults (an application built on
#: power flow, e.g. dispatch), and what a run directory written before these settings ran with
FIXED_COORDINATION = COORDINATION[True]
#: the stopping rule's default tolerance on both relative residuals (docs/algorithm.md, "Stopping")
DEFAULT_TOLERANCE = 1e-4

#: the mechanism of a run given a total budget but no algorithm (``powerdp run CASE --target-epsilon E``): the one that
#: measured best at a total budget (docs/results/utility.md): the zone's two load totals released once with Laplace
#: noise (at δ > 0 calibrated with the exact privacy-loss distribution), exact ADMM on loads built from them, and the
#: implemented dispatch on the true loads
BUDGET_ALGORITHM = "totl"
#: without a budget: objective perturbation at ``epsilon`` per local step (the paper's method)
DEFAULT_ALGORITHM = "objl"


def default_algorithm(target_epsilon: float | None) -> str:
    """The algorithm of a run that names none: :data:`BUDGET_ALGORITHM` with a total budget, else
    :data:`DEFAULT_ALGORITHM`."""
    return BUDGET_ALGORITHM if target_epsilon is not None else DEFAULT_ALGORITHM


@dataclass
class RunConfig(AlgorithmChoices):
    """A distributed run (docs/algorithm.md, docs/privacy.md).

    Defaults are the product's best measured settings: ``eta="capped"``,
    sound sensitivities, primal-dual warm starts. The paper's settings are
    ``eta="sqrt"``, ``sensitivity="paper"``. ``flows="variables"`` (default) runs the
    algorithm on z = (W, flows, pg, qg) as the paper does — its linearized steps are far
    better conditioned than in W-space — while Ipopt solves each local problem with the
    flows eliminated; ``flows="expressions"`` runs it on (W, pg, qg) only. ``local_solver``
    picks the zones' solver: ``"auto"`` (default: the active set where it certifies, Clarabel elsewhere,
    :func:`~powerdp.opf.local_solver.auto_solver`), ``"ipopt"``, ``"clarabel"`` or ``"active-set"`` (for the
    last three the ``ipopt_*`` fields must keep their defaults unless it is ``"ipopt"``).
    """

    case: str = "case14"
    zones: int | None = 3
    partition: str | None = None  # a bus,zone CSV, or "area"/"zone"; overrides zones
    partition_method: str = "auto"  # auto: a bundled case's bundled partition for `zones` if there is one, else modularity
    allow_disconnected: bool = True  # accept given zones made of several islands (e.g. native areas), with a warning
    algorithm: str = "objl"
    objective: str = "shedding"
    # ω of the cost+shedding objective ($/h per p.u.²); None or "auto": scaled to the network's costs
    # (powerdp.opf.objectives.auto_shedding_weight; the run records the number it used)
    shedding_weight: float | str | None = None
    # what the linearized and trust-region updates linearize: "private" (only the part of f_p that holds
    # loads; a data-free part such as the generation cost stays exact) or "all" (all of f_p, the paper's)
    linearize: str = "private"
    epsilon: float = 0.1
    delta: float = 1e-2
    # budget-first runs: a total (ε, δ) per zone for the whole run (rounds × local_updates steps); the
    # per-step noise is calibrated to it (docs/privacy.md) and `epsilon`/`delta` are not used
    target_epsilon: float | None = None
    target_delta: float | None = None  # Gaussian: required, in (0, 1); Laplace: 0 (pure ε-DP) or δ > 0 (exact PLD)
    beta: float = 0.01
    sensitivity: str = "sound"
    adjacency: str = "value"  # neighbouring loads: one load value moves by beta, or one bus (pd and qd)
    noise_on: str | None = None  # ObjPert noise support: "data" (y entries; default) or "all" (every entry of z)
    # input perturbation: the zone computes with its perturbed loads shrunk toward their mean (James–Stein; post-
    # processing of its one release: no privacy cost; powerdp.privacy.shrinkage, docs/privacy.md)
    shrink_loads: bool = False
    rounds: int = 100
    local_updates: int = 1
    rho: float | None = None  # None: 100, or for exact ADMM on the cost objective one scaled to the costs (runner.default_rho)
    # how the coordinator moves (docs/algorithm.md, "Coordination"): the penalty rule ("constant", "adaptive",
    # "balanced", "spectral": engine/consensus/penalties.py), the over-relaxation α (1: none) and the acceleration
    # ("none", "anderson"); "auto": a run's defaults, COORDINATION (resolved by plan.resolve_config)
    rho_schedule: str = "auto"
    relaxation: float | str = "auto"
    acceleration: str = "auto"
    # τ/ρ₀ of a proximal term ½τ‖z − z_last‖² on a zone's entries that are neither shared nor linearized (the
    # data-free part kept exact: cost+shedding's generation cost); 0: none (docs/algorithm.md, "Proximal term")
    proximal: float = 0.0
    eta: str | float = "capped"
    # None (default): every zone draws its noise from secret OS entropy ("noise_source": "secret"); an
    # integer: a reproducible experiment whose noise anyone who knows the seed can replay ("seeded")
    seed: int | None = None
    backend: str = "serial"
    workers: int | None = None
    rank_timeout: float = 60.0  # mpi backend: a rank silent this long (no heartbeat) is reported lost
    # net backend (docs/deployment.md): the coordinator's certificates (a folder of `powerdp certs make`: ca.crt,
    # coordinator.crt/.key, zones.toml), each file may be given alone; how long a zone may take to answer one
    # request (a round), and how long a zone server that is not reachable (not yet started, or dropped) is waited for
    certs: str | None = None
    zones_at: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    round_timeout: float = 600.0
    zone_timeout: float = 60.0
    flows: str = "variables"  # z includes branch flows (paper); Ipopt solves with them eliminated
    convention: str = "powermodels"
    # the stopping rule (docs/algorithm.md, "Stopping"): stop once both relative residuals (primal ‖w − Bz‖ /
    # max(‖w‖, ‖Bz‖), dual ‖ρ ∘ B(w − w_prev)‖ / ‖λ‖) are at most `tolerance`; `rounds` is the cap (0: every round)
    tolerance: float = DEFAULT_TOLERANCE
    tol_primal: float = 0.0  # also: absolute residuals at most these (p.u. and objective units per p.u.; 0: not used)
    tol_dual: float = 0.0
    warm_start: bool = True  # primal-dual warm start of local solves (measured: benchmarks/warmstart.py)
    checkpoint_every: int | None = None  # K rounds; None: by time (runs/loop.py: CHECKPOINT_SECONDS); 0: never
    # evaluation figures cross to the coordinator's side: each zone's true objective and W_p violation
    # every round, its solution at the end (experiments, the paper's figures). False in a deployment:
    # then only released values, solver statistics and the data-independent privacy spend cross, and
    # each zone writes its own solution file on its own host.
    evaluate: bool = True
    # deployment: a directory written by `powerdp partition --split`; the coordinator reads only its public
    # network (no loads) and each zone's host only its own zone's load file (powerdp.apps.power_flow.zone_data)
    deployment: str | None = None
    local_solver: str = AUTO  # the zones' solver: "auto" (opf.local_solver.auto_solver) or one of SOLVERS
    ipopt_profile: str = "default"  # Ipopt options of cold solves (a bundled profile or a .opt file)
    ipopt_warm_profile: str = "warm"  # options switched on once solves are warm-started
    ipopt_options: dict[str, Any] = field(default_factory=dict)  # extra Ipopt options, e.g. {"print_level": 5}
    extra: dict[str, Any] = field(default_factory=dict)  # options of the update rule (e.g. trust_radius)
    # TEST-ONLY (powerdp.privacy.faults): a deliberately broken run, set in Python by the test suite or the audit's
    # self-test; never read from a file or a flag (from_dict refuses it, to_dict leaves it out)
    faults: InjectedFaults | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ checks
    def validate(self) -> RunConfig:
        def bad(name: str, msg: str) -> ConfigError:
            return ConfigError.for_setting(name, getattr(self, name), msg)

        try:
            spec = resolve(self.algorithm)
        except ConfigError as exc:
            raise bad("algorithm", str(exc)) from None
        if not isinstance(self.extra, dict):
            raise bad("extra", "must be a table of options (e.g. an update rule's)")
        rule = UPDATES[spec.update]
        unknown = sorted(set(self.extra) - set(rule.extra_options))
        if unknown:
            known = ", ".join(rule.extra_options) or "none"
            raise ConfigError(f"extra.{unknown[0]}: not an option of update rule {spec.update!r} (its options: {known})")
        rule.check_config(self)
        if self.objective not in OBJECTIVES:
            raise bad("objective", f"choose one of {', '.join(OBJECTIVES)}")
        self._check_weight(bad)
        if self.linearize not in LINEARIZE:
            raise bad("linearize", f"choose one of {', '.join(LINEARIZE)}")
        if spec.private and not OBJECTIVES[self.objective].dp_eligible:
            raise ConfigError(
                f"algorithm {self.algorithm!r} is differentially private, but {OBJECTIVES[self.objective].dp_refusal()}"
            )
        if spec.private:
            if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
                raise bad("epsilon", "must be a positive number")
            if spec.mechanism == "gaussian" and not (0 < self.delta < 1):
                raise bad("delta", "the Gaussian mechanism needs 0 < delta < 1")
            if not (self.beta > 0 and math.isfinite(self.beta)):
                raise bad("beta", "must be a positive number (p.u.)")
        self._check_budget(spec, bad)
        if self.sensitivity not in ("sound", "paper"):
            raise bad("sensitivity", "choose 'sound' or 'paper'")
        if self.adjacency not in ADJACENCIES:
            raise bad("adjacency", f"choose one of {', '.join(ADJACENCIES)}")
        if self.adjacency == "bus" and self.sensitivity == "paper":
            raise bad("adjacency", "the paper defines one-value adjacency only, so 'bus' has no paper sensitivity; use sensitivity 'sound'")
        if self.noise_on is not None and self.noise_on not in NOISE_SUPPORTS:
            raise bad("noise_on", f"choose one of {', '.join(NOISE_SUPPORTS)}")
        if spec.perturbation == "output" and self.linearize == "private" and OBJECTIVES[self.objective].data_free_terms:
            raise bad(
                "linearize",
                f"output perturbation's sensitivity needs the proximal term on all of z, but with objective {self.objective!r} "
                "the data-free part is kept exact and the proximal term covers y only; use linearize 'all' or objective perturbation",
            )
        if self.noise_on == "data" and spec.perturbation == "output":
            raise bad(
                "noise_on",
                "output perturbation adds noise to every entry of the local solution (its sensitivity bounds all of z); "
                "leave noise_on unset or use 'all'",
            )
        if self.noise_on == "all" and spec.perturbation in ("input", "totals", "hierarchical"):
            raise bad("noise_on", f"{spec.perturbation} perturbation perturbs the loads, which enter only the balance-variable "
                      "entries; leave noise_on unset")
        if not isinstance(self.shrink_loads, bool):
            raise bad("shrink_loads", "must be true or false")
        if self.shrink_loads and spec.perturbation != "input":
            what = "adds no noise" if not spec.private else f"is {spec.perturbation} perturbation"
            raise bad("shrink_loads", "shrinks the perturbed loads of input perturbation (inpl, inpg, inps, exact/input/laplace, "
                      f"exact/input/gaussian); {self.algorithm} {what}")
        if int(self.rounds) != self.rounds or self.rounds < 1:
            raise bad("rounds", "must be a positive integer")
        if int(self.local_updates) != self.local_updates or self.local_updates < 1:
            raise bad("local_updates", "must be a positive integer")
        if self.rho is not None and not (self.rho > 0 and math.isfinite(self.rho)):
            raise bad("rho", "must be a positive number")
        if self.rho_schedule not in (AUTO, *PENALTY_RULES):
            raise bad("rho_schedule", f"choose one of {', '.join((AUTO, *PENALTY_RULES))}")
        if self.relaxation != AUTO and (isinstance(self.relaxation, bool) or not isinstance(self.relaxation, (int, float))
                                        or not 0 < self.relaxation < 2):
            raise bad("relaxation", "the over-relaxation factor must be a number in (0, 2) (1: none) or 'auto'")
        if isinstance(self.proximal, bool) or not isinstance(self.proximal, (int, float)) or not (math.isfinite(self.proximal) and self.proximal >= 0):
            raise bad("proximal", "the proximal weight τ/ρ must be a number >= 0 (0: none)")
        if self.acceleration not in (AUTO, *ACCELERATIONS):
            raise bad("acceleration", f"choose one of {', '.join((AUTO, *ACCELERATIONS))}")
        if isinstance(self.eta, str) and self.eta not in ETA_SCHEDULES:
            try:
                self.eta = float(self.eta)
            except ValueError:
                raise bad("eta", f"choose one of {', '.join(ETA_SCHEDULES)} or a positive number") from None
        if not isinstance(self.eta, str) and not (float(self.eta) > 0 and math.isfinite(float(self.eta))):
            raise bad("eta", "a constant step must be a positive number")
        if self.eta == "theorem" and not spec.private:
            raise bad("eta", "the Theorem 5.1 schedule needs epsilon; use it with a DP algorithm")
        if not isinstance(self.local_solver, str) or self.local_solver not in LOCAL_SOLVERS:
            raise bad("local_solver", f"choose one of {', '.join(LOCAL_SOLVERS)}")
        if self.local_solver != AUTO or self.asks_for_ipopt:
            solver_class(self.local_solver if self.local_solver != AUTO else "ipopt", "local_solver").check_config(self)
        if self.backend not in BACKENDS:
            raise bad("backend", f"choose one of {', '.join(BACKENDS)}")
        if self.workers is not None and self.workers < 1:
            raise bad("workers", "must be at least 1")
        if not (isinstance(self.rank_timeout, (int, float)) and self.rank_timeout > 0):
            raise bad("rank_timeout", "must be a positive number of seconds")
        for name in ("round_timeout", "zone_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
                raise bad(name, "must be a positive number of seconds")
        if self.backend == "net" and self.deployment is None:
            raise bad("backend", "the net backend runs a split case over the network: give deployment "
                      "(--deployment DIR, written by powerdp partition --split)")
        if self.flows not in ("expressions", "variables"):
            raise bad("flows", "choose 'expressions' or 'variables'")
        if self.convention not in ("powermodels", "matpower"):
            raise bad("convention", "choose 'powermodels' or 'matpower'")
        if self.zones is not None and self.partition is None and self.zones < 1:
            raise bad("zones", "must be at least 1")
        if self.zones is None and self.partition is None:
            raise ConfigError("give zones (a count) or partition (a bus,zone CSV file, 'area' or 'zone')")
        for name in ("tolerance", "tol_primal", "tol_dual"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value >= 0):
                raise bad(name, "must be a number >= 0 (0: not used)")
        if self.deployment is not None and self.evaluate:
            raise bad("deployment", "a deployment has no zone's loads on the coordinator's side, so nothing to evaluate; "
                      "set evaluate false (--no-evaluation)")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0):
            raise bad("seed", "must be a non-negative integer, or unset for secret noise")
        if self.checkpoint_every is not None and (isinstance(self.checkpoint_every, bool)
                                                  or not isinstance(self.checkpoint_every, int) or self.checkpoint_every < 0):
            raise bad("checkpoint_every", "must be >= 0 (0 turns checkpoints off)")
        check_faults(self.faults)
        self.rounds = int(self.rounds)
        self.local_updates = int(self.local_updates)
        return self

    def _check_weight(self, bad) -> None:
        """ω only for a weighted objective (never silently ignored), and then "auto" or a positive number."""
        w = self.shedding_weight
        if w is None:
            return
        unit = OBJECTIVES[self.objective]
        if not unit.weighted:
            users = ", ".join(repr(n) for n, u in OBJECTIVES.items() if u.weighted)
            raise bad("shedding_weight", f"objective {self.objective!r} has no shedding penalty to weight; ω is used only by {users}")
        if w == "auto":
            return
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not (math.isfinite(w) and w > 0):
            raise bad("shedding_weight", "the shedding weight ω must be a positive number ($/h per p.u.²) or 'auto'")

    def _check_budget(self, spec: Algorithm, bad) -> None:
        """A total budget: a private algorithm, ε > 0, a δ that fits the mechanism, noise within bounds."""
        if self.target_epsilon is None:
            if self.target_delta is not None:
                raise bad("target_delta", "goes with target_epsilon (a total budget per zone)")
            return
        if not spec.private:
            raise bad("target_epsilon", f"algorithm {self.algorithm!r} is not private; a privacy budget needs a DP algorithm")
        if isinstance(self.target_epsilon, bool) or not isinstance(self.target_epsilon, (int, float)) or not (
            math.isfinite(self.target_epsilon) and self.target_epsilon > 0
        ):
            raise bad("target_epsilon", "must be a positive number (the total ε per zone for the whole run)")
        if spec.mechanism == "gaussian":
            if self.target_delta is None or not (0 < self.target_delta < 1):
                raise bad("target_delta", "the Gaussian mechanism needs a total δ in (0, 1), e.g. 1e-5")
        elif self.target_delta not in (None, 0, 0.0):
            if isinstance(self.target_delta, bool) or not isinstance(self.target_delta, (int, float)) or not 0 < self.target_delta < 1:
                raise bad("target_delta", "must lie in [0, 1): 0 (or unset) for pure ε-DP, or a small δ such as 1e-5")
            if self._laplace_coordinates() is None:
                raise bad(
                    "target_delta",
                    "a Laplace budget at delta > 0 is calibrated with the exact privacy-loss distribution, which output "
                    "perturbation does not have (its noise bound covers all of z); leave target_delta unset or 0",
                )
        self.per_step_noise()  # refuses a budget whose noise would exceed the sane bound

    @property
    def asks_for_ipopt(self) -> bool:
        """Whether Ipopt options or profiles are set: then ``local_solver = "auto"`` means Ipopt (they would mean
        nothing to the active set or Clarabel)."""
        return bool(self.ipopt_options) or str(self.ipopt_profile) != "default" or str(self.ipopt_warm_profile) != "warm"

    @property
    def releases_once(self) -> bool:
        """Whether the perturbation releases each zone's data once for the whole run (input perturbation, the
        totals): its ε is then spent by that one release, not per local step."""
        return bool(PERTURBATIONS[self.spec.perturbation].once)

    @property
    def private_steps(self) -> int:
        """Private releases per zone over the whole run: rounds × local updates, or one when the
        perturbation releases the zone's data once (input perturbation)."""
        if self.releases_once:
            return 1
        return int(self.rounds) * int(self.local_updates)

    def per_step_noise(self) -> dict[str, float] | None:
        """Budget-first runs: the calibrated per-step noise (``epsilon`` for Laplace, ``noise_multiplier``
        for Gaussian); None when the run states ε per step."""
        if self.target_epsilon is None:
            return None
        from ...privacy.calibration import gaussian_noise_multiplier, laplace_epsilon_per_step

        try:
            if self.mechanism == "gaussian":
                return {"noise_multiplier": gaussian_noise_multiplier(float(self.target_epsilon), float(self.target_delta), self.private_steps)}
            # the staircase is accounted by summing its pure ε (it claims no privacy-loss distribution): δ is not used
            delta = float(self.target_delta or 0.0) if self.mechanism == "laplace" else 0.0
            coordinates = self._laplace_coordinates() if delta > 0 else None
            return {"epsilon": laplace_epsilon_per_step(float(self.target_epsilon), self.private_steps, delta, coordinates)}
        except ConfigError as exc:
            raise ConfigError.for_setting("target_epsilon", self.target_epsilon, f"{exc}") from None

    def _laplace_coordinates(self) -> int | None:
        """The released entries one neighbouring change moves, or None: the gradient's entries (objective and input
        perturbation), or those of the loads' own release (the totals: 1 or 2; the hierarchical release: 2 or 4)."""
        perturbation = PERTURBATIONS[self.spec.perturbation]
        if not perturbation.exact_privacy_loss:
            return None
        if getattr(perturbation, "from_loads", False):  # its release's own sensitivity, not the gradient's
            return perturbation.release_sensitivity(self).coordinates
        unit = OBJECTIVES[self.objective]
        if not unit.dp_eligible or unit.sensitivity is None:
            return None
        return unit.sensitivity(self.beta, self.sensitivity, self.adjacency).coordinates  # ω scales, not moves, entries

    @property
    def spec(self) -> Algorithm:
        """The three choices the algorithm name stands for (docs/algorithm.md)."""
        return resolve(self.algorithm)

    @property
    def claim_holds(self) -> bool:
        """Whether the ledger's ε is a proven guarantee: a private algorithm whose sensitivity rule is a sound
        bound (``sensitivity = "paper"`` with output perturbation is a reproduction switch, not a guarantee)."""
        if not self.private:
            return False
        return self.sensitivity == "sound" or PERTURBATIONS[self.spec.perturbation].paper_rule_sound

    @property
    def noise_source(self) -> str:
        """``"secret"`` (no seed: OS entropy per zone) or ``"seeded"`` (replayable by whoever knows the seed)."""
        from ...privacy.mechanisms import noise_source

        return noise_source(self.seed)

    @property
    def noise_support(self) -> str:
        """Where noise is drawn: ``data`` (the y entries; ObjPert's default) or ``all`` (OutPert always)."""
        if self.noise_on is not None:
            return self.noise_on
        return "all" if self.perturbation == "output" else "data"

    # ------------------------------------------------------------ conversion
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("faults")  # test-only: never written, so never read back
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "configuration") -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)} - {"faults"}  # test-only: set in Python, never from a file
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}")
        return cls(**data)

    def replace(self, **changes: Any) -> RunConfig:
        faults = changes.pop("faults", self.faults)
        new = RunConfig.from_dict({**self.to_dict(), **changes})
        return new if faults is None else dataclasses.replace(new, faults=faults)
