"""A dispatch run's configuration (what ``config.json`` records) and its privacy over time.

The neighbouring relation over a horizon of T periods (docs/privacy.md, "Privacy over time"):

* ``user`` (default): one load's whole profile moves by at most β in every period. Every period's releases touch
  the changed values, so the zone's releases compose over the horizon: the budget ``target_epsilon`` is split over
  T × (rounds per period) × (local steps) objective-perturbation steps, or over T draws of input perturbation
  (noise once per period). The ledger's total over the horizon is the claim.
* ``event``: one load value in one period moves by at most β. Period t's value enters only period t's releases
  (the state a zone carries to the next period is its released point and duals, post-processing of releases), so
  the budget covers one period's releases: each period is calibrated to ``target_epsilon``; the claim is the
  largest per-period spend, while the ledger's total over the horizon (T times more) is the user-level figure for
  the same noise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ...engine.consensus.algorithms import resolve
from ...engine.consensus.perturbations import PERTURBATIONS
from ...errors import ConfigError
from ..power_flow.config import ADJACENCIES, RunConfig

__all__ = ["DispatchConfig", "RELATIONS", "DISPATCH_ALGORITHMS", "GAUSSIAN_ALGORITHMS", "relation_text", "default_algorithm"]

RELATIONS = ("user", "event")
#: the algorithms a dispatch runs: the non-private linearized and exact updates, and the pure-ε mechanisms (Laplace,
#: and the staircase's inps and tots: a budget over the horizon split exactly by the ledger's basic composition);
#: exact/input/laplace is input perturbation under exact ADMM (the period's perturbed loads d̃, then the non-private
#: exact update)
DISPATCH_ALGORITHMS = ("nonprivate", "exact", "objl", "inpl", "outl", "exact/input/laplace", "totl", "hrcl", "inps", "tots")
#: the default stopping tolerance on the relative residuals (measured on SimBench 1-HV-mixed--0-sw, docs/multi_period.md)
TOLERANCE = 2e-4
#: the Gaussian mechanisms: a total (ε, δ) over the horizon, every step's noise multiplier calibrated so that the
#: ledger's exact Gaussian composition (Gaussian DP: k steps of multiplier z are one of z/√k) of all the horizon's steps
#: is the target; far less noise per step than splitting a pure ε over as many steps (docs/privacy.md)
GAUSSIAN_ALGORITHMS = ("objg", "inpg", "exact/input/gaussian", "totg", "hrcg")


def default_algorithm(target_epsilon: float | None, target_delta: float | None, relation: str) -> str:
    """The algorithm of a dispatch that names none (docs/results/dispatch.md): without a budget the non-private
    linearized update; with one, the zones' load totals released once a period, with Laplace noise when one
    release per period carries the budget (``event``, or ``user`` without a δ) and Gaussian noise when a δ is given
    for the horizon's composition under ``user`` (96 Gaussian releases at σ = 36.6 β against a Laplace standard
    deviation of 50.8 β at ε = 1, δ = 1e-5 calibrated with the exact privacy-loss distribution)."""
    if target_epsilon is None:
        return "nonprivate"
    if relation == "user" and target_delta:
        return "totg"
    return "totl"


def relation_text(relation: str, beta: float, periods: int, adjacency: str = "value") -> str:
    """What a run's ε protects, in one line (printed at the start of a private run). ``adjacency`` says what one
    neighbouring change holds: one load value (pd or qd: "value"), or one bus's pd and qd together ("bus")."""
    if relation == "user":
        what = "one load's whole profile" if adjacency == "value" else "one bus's whole load profile (pd and qd each)"
        return (f"user-level: {what} over the {periods} periods may move by up to beta = {beta:g} p.u. "
                "in every period; the budget covers the whole horizon")
    what = "one load value" if adjacency == "value" else "one bus's pd and qd (each)"
    return (f"event-level: {what} in one period may move by up to beta = {beta:g} p.u.; the budget covers one "
            f"period's releases (a load's profile over the {periods} periods is protected only at the ledger's total, "
            "T times more)")


@dataclass(frozen=True)
class DispatchConfig:
    """Everything a dispatch run needs (``config.json``; docs/multi_period.md)."""

    source: str  # a SimBench code (simbench:CODE) or a case (bundled name or file)
    periods: int
    zones: int = 4
    start: int = 0
    profiles: str | None = None  # the user's own time series (CSV or parquet)
    costs: str | None = None  # public costs overriding the defaults
    algorithm: str = "nonprivate"
    target_epsilon: float | None = None  # the total ε per zone over the horizon
    target_delta: float | None = None  # the Gaussian mechanisms' total δ per zone over the horizon (e.g. 1e-5)
    relation: str = "user"
    beta: float = 0.01
    adjacency: str = "value"  # a neighbouring change moves one load value, or one bus's pd and qd ("bus")
    # project the perturbed loads onto [0, the bus's public rated load] (post-processing; docs/privacy.md)
    clip_loads: bool = False
    ramp: float | None = None  # a generator's p moves by at most this fraction of its pmax between periods
    max_rounds: int = 100  # the round cap of one period
    # stop a period when both relative residuals (primal ‖w − Bz‖/max(‖w‖, ‖Bz‖); dual ρ‖Δw‖/‖λ‖) are at most this
    # (runner.relative_residuals; docs/multi_period.md)
    tolerance: float = TOLERANCE
    seed: int | None = None
    backend: str = "serial"
    workers: int | None = None
    local_solver: str = "clarabel"  # Ipopt fails the local solves of SimBench grids (their imports are bounded by ±1932 p.u.)
    cold_start: bool = False  # every period from the flat start with zero duals (the benchmark's baseline)
    rho: float | None = None
    convention: str = "powermodels"
    objective: str = "cost+shedding"
    application: str = "dispatch"
    base_mva: float | None = None  # the per-unit base of a SimBench grid or pandapower net (None: 100 MVA for SimBench)

    def validate(self) -> DispatchConfig:
        def bad(name, msg):
            return ConfigError.for_setting(name, getattr(self, name), msg)

        if not isinstance(self.periods, int) or isinstance(self.periods, bool) or self.periods <= 0:
            raise bad("periods", "must be a positive integer")
        if not isinstance(self.start, int) or self.start < 0:
            raise bad("start", "must be a non-negative integer (the first period of the data)")
        if self.algorithm not in DISPATCH_ALGORITHMS + GAUSSIAN_ALGORITHMS:
            raise bad("algorithm", f"a dispatch runs one of {', '.join(DISPATCH_ALGORITHMS + GAUSSIAN_ALGORITHMS)}")
        if self.gaussian and not (self.target_delta is not None and 0 < self.target_delta < 1):
            raise bad("target_delta", f"{self.algorithm} (Gaussian) needs a total delta in (0, 1) over the horizon, e.g. 1e-5")
        if not self.gaussian and self.target_delta not in (None, 0, 0.0):
            if not PERTURBATIONS[resolve(self.algorithm).perturbation].exact_privacy_loss:
                raise bad("target_delta", f"goes with a Gaussian algorithm (objg, inpg, exact/input/gaussian, totg) or a Laplace "
                          f"one calibrated with the exact privacy-loss distribution (objl, inpl, totl); {self.algorithm} is "
                          "pure epsilon")
            if not 0 < self.target_delta < 1:
                raise bad("target_delta", "a Laplace budget's delta lies in [0, 1)")
        if self.relation not in RELATIONS:
            raise bad("relation", f"choose one of {', '.join(RELATIONS)}")
        if self.adjacency not in ADJACENCIES:
            raise bad("adjacency", f"choose one of {', '.join(ADJACENCIES)}")
        if not (isinstance(self.max_rounds, int) and self.max_rounds > 0):
            raise bad("max_rounds", "must be a positive integer")
        if not (self.tolerance >= 0 and math.isfinite(self.tolerance)):
            raise bad("tolerance", "must be a non-negative number")
        if self.base_mva is not None and (isinstance(self.base_mva, bool) or not isinstance(self.base_mva, (int, float))
                                          or not (self.base_mva > 0 and math.isfinite(self.base_mva))):
            raise bad("base_mva", "must be a positive number of MVA")
        if self.base_mva is not None and not str(self.source).startswith(("simbench:", "pandapower:")):
            raise bad("base_mva", "a MATPOWER case keeps its own baseMVA (--base-mva is for SimBench grids and pandapower nets)")
        if self.ramp is not None and not (self.ramp > 0 and math.isfinite(self.ramp)):
            raise bad("ramp", "must be a positive fraction of a generator's pmax per period")
        private = resolve(self.algorithm).private
        if private and self.target_epsilon is None:
            raise bad("target_epsilon", f"{self.algorithm} needs a budget over the horizon (--target-epsilon)")
        if not private and self.target_epsilon is not None:
            private_ones = [a for a in DISPATCH_ALGORITHMS + GAUSSIAN_ALGORITHMS if resolve(a).private]
            raise bad("target_epsilon", f"{self.algorithm} is not private; a budget needs one of {', '.join(private_ones)}")
        if self.clip_loads and not private:
            raise bad("clip_loads", "clips the perturbed loads of a private algorithm; the non-private day has none")
        if self.clip_loads and resolve(self.algorithm).perturbation == "output":
            raise bad("clip_loads", f"{self.algorithm} adds its noise to the zone's solution, not to its loads; there is "
                      "no perturbed load to clip")
        if self.clip_loads and resolve(self.algorithm).perturbation in ("totals", "hierarchical"):
            raise bad("clip_loads", f"{self.algorithm} perturbs the zones' load totals, not each load; there is nothing to clip")
        if self.target_epsilon is not None and not (self.target_epsilon > 0 and math.isfinite(self.target_epsilon)):
            raise bad("target_epsilon", "must be a positive number (the total ε per zone over the horizon)")
        self.run_config("case", None).validate()
        return self

    @property
    def private(self) -> bool:
        return resolve(self.algorithm).private

    @property
    def gaussian(self) -> bool:
        return resolve(self.algorithm).mechanism == "gaussian"

    @property
    def budget_periods(self) -> int:
        """The periods one zone's budget covers: the horizon (user-level) or one period (event-level)."""
        return int(self.periods) if self.relation == "user" else 1

    def private_steps(self) -> int:
        """The private releases per zone the budget is split over: the whole horizon (user-level) or one period
        (event-level); input perturbation releases once per period, the others once per local step of a round."""
        per_period = 1 if PERTURBATIONS[resolve(self.algorithm).perturbation].once else int(self.max_rounds)
        return per_period * (int(self.periods) if self.relation == "user" else 1)

    def epsilon_per_step(self) -> float | None:
        """The calibrated per-step ε (Laplace, pure ε: the budget over :meth:`private_steps` steps), or None (not
        private, Gaussian, or Laplace at δ > 0: their noise is calibrated by the zones' settings, :class:`HorizonRunConfig`,
        with the ledger's accountant)."""
        if not self.private or self.gaussian or self.target_delta:
            return None
        from ...privacy.calibration import laplace_epsilon_per_step

        return laplace_epsilon_per_step(float(self.target_epsilon), self.private_steps())

    def run_config(self, case: Any, shedding_weight: float | None) -> RunConfig:
        """The zones' settings (a :class:`RunConfig`: the power-flow agents run them)."""
        eps = self.epsilon_per_step()
        extra: dict[str, Any] = {"epsilon": eps} if eps is not None else {}
        if self.private and (self.gaussian or self.target_delta):  # Gaussian, or Laplace at δ > 0 (the exact PLD)
            extra = {"target_epsilon": float(self.target_epsilon), "target_delta": float(self.target_delta),
                     "budget_periods": self.budget_periods}
        if resolve(self.algorithm).perturbation == "output":  # its sensitivity needs the proximal term on all of z
            extra["linearize"] = "all"
        return HorizonRunConfig(
            case=case, zones=self.zones, objective=self.objective, algorithm=self.algorithm, beta=self.beta,
            adjacency=self.adjacency,
            rounds=self.max_rounds, rho=self.rho, seed=self.seed, backend=self.backend, workers=self.workers,
            local_solver=self.local_solver, convention=self.convention, checkpoint_every=0,
            shedding_weight=shedding_weight, **extra,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "configuration") -> DispatchConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown dispatch setting(s) {', '.join(unknown)}")
        return cls(**data)

    def replace(self, **changes: Any) -> DispatchConfig:
        return replace(self, **changes)



@dataclass
class HorizonRunConfig(RunConfig):
    """The zones' settings of a dispatch: a :class:`RunConfig` whose budget (``target_epsilon``, ``target_delta``)
    covers ``budget_periods`` periods of ``rounds`` × ``local_updates`` steps each (the horizon under the user-level
    relation), so the calibrated per-step noise and the ledger's accounting at the target δ are the horizon's."""

    budget_periods: int = 1

    @property
    def private_steps(self) -> int:
        return RunConfig.private_steps.fget(self) * int(self.budget_periods)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "budget_periods": int(self.budget_periods)}

    def replace(self, **changes: Any) -> HorizonRunConfig:
        periods = int(changes.pop("budget_periods", self.budget_periods))
        faults = changes.pop("faults", self.faults)
        data = {k: v for k, v in self.to_dict().items() if k != "budget_periods"}
        new = HorizonRunConfig(**RunConfig.from_dict({**data, **changes}).to_dict(), budget_periods=periods)
        return new if faults is None else replace(new, faults=faults)
