"""Where a private zone puts its noise: nowhere, in the objective, on the output, or on its loads once
(docs/privacy.md).

A :class:`Perturbation` is built once per zone from the run configuration, the
zone's gradient sensitivity and its update rule. It holds the zone's noise
generator, its mechanism and its :class:`~powerdp.privacy.PrivacyLedger`, and
gives the update rule two hooks: :meth:`Perturbation.perturb_objective` (adds
ξ to the linear term of a local problem, in place) and
:meth:`Perturbation.perturb_output` (adds ξ to a local solution). The registry
:data:`PERTURBATIONS` makes them selectable by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from ...privacy import MECHANISMS, GaussianMechanism, Mechanism, PrivacyLedger, Sensitivity, noise_magnitude

if TYPE_CHECKING:
    from .settings import ConsensusSettings

__all__ = ["Perturbation", "ObjectivePerturbation", "OutputPerturbation", "InputPerturbation", "PERTURBATIONS"]



class OutputSensitivity(Protocol):
    """What output perturbation asks of the update rule (:meth:`~.updates.base.LocalUpdate.output_sensitivity`)."""

    def output_sensitivity(self, gradient: Sensitivity, t: int, n: int, lipschitz: float) -> Sensitivity: ...


class Perturbation:
    """No noise; the base of the others (``name = "none"``)."""

    name: ClassVar[str] = "none"
    summary: ClassVar[str] = "no noise (non-private)"
    #: whether the zone's data is released once for the whole run (then the run costs one step's ε,
    #: whatever the rounds and local steps) rather than once per local step
    once: ClassVar[bool] = False
    #: whether its noise lands on the entries a neighbouring change moves (the gradient's y entries), so
    #: the mechanism's privacy-loss distribution is exact and a Laplace budget may use δ > 0 (docs/privacy.md)
    exact_privacy_loss: ClassVar[bool] = False
    #: whether the paper's sensitivity value (``sensitivity = "paper"``) is a sound bound for this perturbation
    #: (docs/privacy.md: measured 2β for objective and input perturbation; not for output perturbation)
    paper_rule_sound: ClassVar[bool] = True

    def __init__(self, config: ConsensusSettings, **_: Any):
        self.config = config
        self.mechanism: Mechanism | None = None
        self.ledger: PrivacyLedger | None = None

    def start_round(self, t: int) -> None:
        """Called before the local steps of round ``t``."""

    def perturb_objective(self, c: np.ndarray) -> float:
        """Add ξ to the linear term ``c`` in place; returns Σ|ξ| (the paper's eq. 29)."""
        return 0.0

    def perturb_output(self, z: np.ndarray) -> tuple[np.ndarray, float]:
        """A local solution with ξ added, and Σ|ξ|."""
        return z, 0.0

    def end_round(self, steps: int) -> None:
        """Called after a round of ``steps`` released local steps."""

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The perturbation's own state for the zone's checkpoint (arrays; none by default)."""
        return {}

    def load_state_arrays(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_arrays` saved (``state`` is the zone's whole checkpoint)."""


def _mechanism(config: ConsensusSettings, sensitivity: Sensitivity) -> Mechanism:
    """The per-step mechanism: from ``epsilon``/``delta`` per step, or calibrated to the run's total budget."""
    budget = config.per_step_noise()
    if budget is None:
        return MECHANISMS[config.mechanism].from_sensitivity(sensitivity, config.epsilon, config.delta)
    if config.mechanism == "gaussian":
        return GaussianMechanism.from_noise_multiplier(sensitivity.l2, budget["noise_multiplier"], config.target_delta)
    return MECHANISMS[config.mechanism].from_sensitivity(sensitivity, budget["epsilon"])


def _ledger(config: ConsensusSettings, mechanism: Mechanism, zone: int) -> PrivacyLedger:
    """A budget-first run is accounted at its target δ (so the tight figure is the one the budget names)."""
    target_delta = config.target_delta if config.target_epsilon is not None and config.target_delta else None
    return PrivacyLedger(
        mechanism, target_delta=target_delta, zone=zone, noise_source=config.noise_source, claim_holds=config.claim_holds
    )


class ObjectivePerturbation(Perturbation):
    """ObjPert: ξ^{t,e} in the linear term of every local problem, on the zone's noise support."""

    name: ClassVar[str] = "objective"
    exact_privacy_loss: ClassVar[bool] = True
    summary: ClassVar[str] = "noise in the linear term of every local problem (every release stays feasible)"

    def __init__(self, config: ConsensusSettings, *, gradient_sensitivity: Sensitivity, rng: np.random.Generator,
                 noise_cols: np.ndarray, zone: int, **_: Any):
        super().__init__(config)
        self.rng = rng
        self.noise_cols = noise_cols
        self.mechanism = _mechanism(config, gradient_sensitivity)
        self.ledger = _ledger(config, self.mechanism, zone)

    def perturb_objective(self, c: np.ndarray) -> float:
        # the mechanism is fl(g + ξ) on the noise support: g is put on the sampler's grid first, so g + ξ is exact
        c[self.noise_cols], xi = self.mechanism.release(c[self.noise_cols], self.rng)
        return noise_magnitude(xi)

    def end_round(self, steps: int) -> None:
        self.ledger.record(steps)


class OutputPerturbation(Perturbation):
    """OutPert (baseline): ξ added to every entry of each local solution, scaled to the update rule's
    output sensitivity in round t."""

    name: ClassVar[str] = "output"
    paper_rule_sound: ClassVar[bool] = False  # measured ‖Δz‖₂ = 1.37β, ‖Δz‖₁ = 5.2β at t = 1 against the β it assumes
    summary: ClassVar[str] = "noise added to every local solution (releases may leave W_p)"

    def __init__(self, config: ConsensusSettings, *, gradient_sensitivity: Sensitivity, rng: np.random.Generator,
                 n: int, zone: int, update: OutputSensitivity, lipschitz: float, **_: Any):
        super().__init__(config)
        self.rng = rng
        self.n = n
        self._sensitivity: Callable[[int], Sensitivity] = lambda t: update.output_sensitivity(gradient_sensitivity, t, n, lipschitz)
        # the scale depends on the round; the per-step (ε, δ), which the ledger composes, does not
        self.mechanism = _mechanism(config, self._sensitivity(1))
        self.ledger = _ledger(config, self.mechanism, zone)

    def start_round(self, t: int) -> None:
        self.mechanism = _mechanism(self.config, self._sensitivity(t))

    def perturb_output(self, z: np.ndarray) -> tuple[np.ndarray, float]:
        released, xi = self.mechanism.release(z, self.rng)
        return released, noise_magnitude(xi)

    def end_round(self, steps: int) -> None:
        self.ledger.record(steps, mechanism=self.mechanism)


class InputPerturbation(Perturbation):
    """InpPert (baseline, load obfuscation): the zone perturbs its loads once, d̃ = d + ξ/2, and then runs
    the non-private update on d̃ (docs/privacy.md).

    In the paper's coordinates the loads enter f_p = Σ (y + d)² only through the linear term 2⟨d, y⟩, so f_p with d̃ is
    f_p with that term replaced. The zone releases the term once (:meth:`draw`): n = γ(round(2d/γ) + Z) on the sampler's
    grid, Z calibrated to the gradient sensitivity (2β for one load value, which is the load sensitivity β with
    d̃ − d = ξ/2), and from then on its objective holds n where it held 2d (the agent installs it): every step computes
    with n, never with d, so the noisy term is rounded once per draw (issue 36: rounding 2(y + d) again at every step
    made the differences between steps noise-free). Everything the zone releases is post-processing of n, so the whole
    run costs one draw's ε, whatever T and E (the ledger records it at the end of the round after the draw).
    """

    name: ClassVar[str] = "input"
    summary: ClassVar[str] = "the loads perturbed once, then the non-private update (the run costs ε once)"
    once: ClassVar[bool] = True
    exact_privacy_loss: ClassVar[bool] = True

    def __init__(self, config: ConsensusSettings, *, gradient_sensitivity: Sensitivity, rng: np.random.Generator,
                 noise_cols: np.ndarray, zone: int, **_: Any):
        super().__init__(config)
        self.noise_cols = noise_cols
        self.rng = rng
        self.mechanism = _mechanism(config, gradient_sensitivity)
        self.ledger = _ledger(config, self.mechanism, zone)
        self.term: np.ndarray | None = None  # n: the released noisy term, what the zone's objective holds
        self.xi: np.ndarray | None = None  # its noise (the simulation's Σ|ξ|)
        self._uncharged = False  # a draw not yet in the ledger

    def draw(self, data_term: np.ndarray) -> np.ndarray:
        """Release the zone's data term (its linear term on the noise support) once: n = γ(round(c/γ) + Z); returns n,
        which the zone puts in its objective in place of the data."""
        self.term, self.xi = self.mechanism.release(np.asarray(data_term, dtype=float), self.rng)
        self._uncharged = True
        return self.term

    def perturb_objective(self, c: np.ndarray) -> float:
        return noise_magnitude(self.xi)  # n is in the zone's objective already: nothing is added per step

    def state_arrays(self) -> dict[str, np.ndarray]:
        # drawn once: a resumed run (secret noise too) must keep this d̃
        return {"input_noise": self.xi, "input_term": self.term, "input_uncharged": np.array(self._uncharged)}

    def load_state_arrays(self, state: dict[str, Any]) -> None:
        if state.get("input_noise") is not None:
            self.xi = np.asarray(state["input_noise"], dtype=float)
        if state.get("input_term") is not None:
            self.term = np.asarray(state["input_term"], dtype=float)
        if "input_uncharged" in state:
            self._uncharged = bool(np.asarray(state["input_uncharged"]))
        elif self.ledger is not None:  # an earlier version's checkpoint: charged from the first round on
            self._uncharged = self.ledger.steps == 0

    def end_round(self, steps: int) -> None:
        if self._uncharged:  # d̃ is released (through its post-processing) from the round after its draw on
            self.ledger.record(1)
            self._uncharged = False


#: perturbation name → class; a new perturbation is one class and one entry here
PERTURBATIONS: dict[str, type[Perturbation]] = {
    "none": Perturbation,
    "objective": ObjectivePerturbation,
    "output": OutputPerturbation,
    "input": InputPerturbation,
}
