"""Differential privacy for the zone agents: sensitivities, noise, accounting (SPEC §6).

Pure mathematics: nothing here builds a model or calls a solver.

* :func:`gradient_sensitivity` / :func:`output_sensitivity` turn the adjacency
  (``β``, one load value or one whole bus) into the L1/L2 sensitivities of
  ObjPert (the gradient ∇f_p, in the paper's coordinates with explicit balance
  variables y) and OutPert (the output of a local step). ``rule="sound"`` gives
  bounds that hold; ``rule="paper"`` reproduces the values the paper uses
  (Δ = 2β, resp. β). For ObjPert the two agree; the paper's OutPert value is
  *not* a proven bound for constrained problems and is labelled so.
* :class:`LaplaceMechanism` and :class:`GaussianMechanism` draw the noise ξ of
  one local step; :func:`make_mechanism` picks one from a :class:`Sensitivity`.
* :func:`zone_rng` gives every zone its own reproducible generator.
* :class:`PrivacyLedger` counts the released local steps of one zone and
  reports what they cost: per step, basic composition, the paper's
  Theorem 4.9 (Gaussian) and a tight figure from Google's ``dp-accounting``.
* :func:`noise_magnitude` is the paper's eq. (29) for one noise vector.

Neighbouring datasets (β-adjacency): one load value pd_i or qd_i of the zone
moves by at most β (p.u.), everything else equal. All mechanisms are
calibrated per local step, so a run of T rounds with E local steps is a
T·E-fold adaptive composition of identical (ε, δ) mechanisms per zone. The
step size η_t may change the *sensitivity* (OutPert) from round to round, but
the noise is re-calibrated each time, so the noise multiplier (noise scale /
sensitivity) and hence the per-step (ε, δ) stay the same; this is what the
ledger composes.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError

__all__ = [
    "Sensitivity",
    "gradient_sensitivity",
    "output_sensitivity",
    "LaplaceMechanism",
    "GaussianMechanism",
    "make_mechanism",
    "zone_rng",
    "PrivacyLedger",
    "PrivacyWarning",
    "noise_magnitude",
    "theorem_4_9_epsilon",
    "SENSITIVITY_RULES",
    "ADJACENCIES",
    "MECHANISMS",
    "Mechanism",
]

Rule = Literal["sound", "paper"]
Kind = Literal["laplace", "gaussian"]
Adjacency = Literal["value", "bus"]
SENSITIVITY_RULES = ("sound", "paper")
ADJACENCIES = ("value", "bus")
TIGHT_METHODS = ("auto", "analytic", "pld", "rdp", "none")

# Relative slack when comparing a claimed epsilon with the exact one (the exact
# value comes from a root finder with tolerance 1e-12).
_REL_TOL = 1e-9


class PrivacyWarning(UserWarning):
    """A privacy parameter is outside the range where a guarantee is proven."""


# --------------------------------------------------------------------------- #
# parameter checks
# --------------------------------------------------------------------------- #


def _real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ConfigError(f"{name} must be finite, got {value!r}")
    return value


def _positive(name: str, value: Any) -> float:
    value = _real(name, value)
    if value <= 0.0:
        raise ConfigError(f"{name} must be > 0, got {value!r}")
    return value


def _delta(name: str, value: Any) -> float:
    value = _real(name, value)
    if not 0.0 < value < 1.0:
        raise ConfigError(f"{name} must lie in the open interval (0, 1), got {value!r}")
    return value


def _rule(rule: Any) -> str:
    if rule not in SENSITIVITY_RULES:
        raise ConfigError(f"rule must be one of {SENSITIVITY_RULES}, got {rule!r}")
    return rule


def _kind(kind: Any, name: str = "kind") -> str:
    if not isinstance(kind, str) or kind.lower() not in MECHANISMS:
        raise ConfigError(f"{name} must be one of {tuple(MECHANISMS)}, got {kind!r}")
    return kind.lower()


# --------------------------------------------------------------------------- #
# sensitivities
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Sensitivity:
    """L1 and L2 sensitivity of one released quantity under β-adjacency.

    ``rule`` is ``"sound"`` (a proven, data-independent bound) or ``"paper"``
    (the value the paper uses, Sec. 6.1: Δ₁ = Δ₂ = 2β for ObjPert, which in
    the paper's coordinates is also sound, and β for OutPert, which is not a
    proven bound for constrained problems). ``note`` says which quantity it
    bounds and how it was obtained.
    """

    l1: float
    l2: float
    rule: str
    beta: float
    note: str = ""

    def __post_init__(self) -> None:
        _positive("Sensitivity.l1", self.l1)
        _positive("Sensitivity.l2", self.l2)
        _positive("Sensitivity.beta", self.beta)
        _rule(self.rule)

    @property
    def is_sound(self) -> bool:
        return self.rule == "sound"


def _adjacency(adjacency: Any) -> str:
    if adjacency not in ADJACENCIES:
        raise ConfigError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
    return adjacency


def gradient_sensitivity(beta: float, rule: Rule = "sound", adjacency: Adjacency = "value") -> Sensitivity:
    """Sensitivity of the gradient ∇f_p for ObjPert, in the paper's coordinates (docs/privacy.md).

    With the balance variables y in z, f_p = Σ_i (yp_i + pd_i)² + (yq_i + qd_i)²
    and ∇f_p = 2(y + d) on the y entries, 0 elsewhere. The loads enter one
    gradient entry each, with coefficient 2, whatever the topology:

    * ``adjacency="value"`` (the paper's β-adjacency: one load value pd_i or
      qd_i moves by at most β): one entry moves by 2β, so Δ₁ = Δ₂ = 2β. This
      is also the paper's value, so ``rule="paper"`` gives the same numbers.
    * ``adjacency="bus"`` (pd_i and qd_i of one bus both move by at most β):
      two entries move by 2β each, so Δ₁ = 4β and Δ₂ = 2√2·β. The paper
      defines no such adjacency, so ``rule="paper"`` refuses it.
    """
    beta = _positive("beta", beta)
    rule = _rule(rule)
    adjacency = _adjacency(adjacency)
    if adjacency == "bus":
        if rule == "paper":
            raise ConfigError(
                "adjacency='bus' has no paper value: the paper's β-adjacency moves one load value; "
                "use rule='sound' (Δ1 = 4β, Δ2 = 2√2·β)"
            )
        return Sensitivity(
            l1=4.0 * beta,
            l2=2.0 * math.sqrt(2.0) * beta,
            rule="sound",
            beta=beta,
            note="ObjPert gradient, bus adjacency: pd_i and qd_i move two entries of ∇f_p = 2(y + d) by 2β each",
        )
    if rule == "paper":
        return Sensitivity(
            l1=2.0 * beta,
            l2=2.0 * beta,
            rule="paper",
            beta=beta,
            note="ObjPert gradient, the paper's value Δ1 = Δ2 = 2β (Sec. 6.1); in its coordinates also a sound bound",
        )
    return Sensitivity(
        l1=2.0 * beta,
        l2=2.0 * beta,
        rule="sound",
        beta=beta,
        note="ObjPert gradient, value adjacency: one load value moves one entry of ∇f_p = 2(y + d) by 2β",
    )


def output_sensitivity(
    grad_sens: Sensitivity,
    eta: float,
    n_vars: int,
    mechanism: str | None = None,
    rule: Rule | None = None,
) -> Sensitivity:
    """Sensitivity of one local step's output for OutPert (SPEC §6).

    * ``rule="sound"``: the local problem is (1/η)-strongly convex and the data
      enter only through the linear term ∇f_p, so the minimiser moves at most
      η·Δ₂ in L2. Hence ``l2 = η·Δ₂`` (used by the Gaussian mechanism) and
      ``l1 = √n_vars·η·Δ₂`` (‖x‖₁ ≤ √n‖x‖₂; used by the Laplace mechanism).
      Requires a sound ``grad_sens``.
    * ``rule="paper"``: Δ₁ = Δ₂ = β (``grad_sens.beta``), the paper's value,
      reproduction only.

    ``rule`` defaults to ``grad_sens.rule``. Both fields of the result are
    filled; ``mechanism`` (``"laplace"``/``"gaussian"``, optional) is only
    checked and recorded in the note — :func:`make_mechanism` picks the field.
    """
    if not isinstance(grad_sens, Sensitivity):
        raise ConfigError(f"grad_sens must be a Sensitivity, got {type(grad_sens).__name__}")
    eta = _positive("eta", eta)
    if isinstance(n_vars, bool) or not isinstance(n_vars, numbers.Integral) or n_vars < 1:
        raise ConfigError(f"n_vars must be a positive integer, got {n_vars!r}")
    n_vars = int(n_vars)
    mech = _kind(mechanism, "mechanism") if mechanism is not None else None
    rule = _rule(grad_sens.rule if rule is None else rule)
    for_ = f" (for the {mech} mechanism)" if mech else ""
    if rule == "paper":
        return Sensitivity(
            l1=grad_sens.beta,
            l2=grad_sens.beta,
            rule="paper",
            beta=grad_sens.beta,
            note=f"OutPert output, paper's value Δ = β (Sec. 6.1); NOT a sound bound{for_}",
        )
    if grad_sens.rule != "sound":
        raise ConfigError(
            "rule='sound' output sensitivity needs a sound gradient sensitivity, "
            f"got grad_sens.rule={grad_sens.rule!r}"
        )
    l2 = eta * grad_sens.l2
    return Sensitivity(
        l1=math.sqrt(n_vars) * l2,
        l2=l2,
        rule="sound",
        beta=grad_sens.beta,
        note=(
            f"OutPert output, sound: l2 = η·Δ2, l1 = √n·η·Δ2 with η = {eta:.6g}, "
            f"n = {n_vars}{for_}"
        ),
    )


# --------------------------------------------------------------------------- #
# mechanisms
# --------------------------------------------------------------------------- #


def _check_rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(
            f"rng must be a numpy.random.Generator (see zone_rng), got {type(rng).__name__}"
        )
    return rng


class LaplaceMechanism:
    """i.i.d. Laplace noise with scale b = Δ₁/ε (variance 2b²): (ε, 0)-DP per step."""

    kind = "laplace"
    norm = "l1"

    @classmethod
    def from_sensitivity(cls, sensitivity: Sensitivity, epsilon: float, delta: float | None = None) -> "LaplaceMechanism":
        """Calibrated to ``sensitivity.l1``; ``delta`` is not used (pure ε)."""
        return cls(sensitivity.l1, epsilon)

    def dp_event(self):
        """The ``dp_accounting`` event one step of this mechanism stands for."""
        import dp_accounting

        return dp_accounting.LaplaceDpEvent(noise_multiplier=self.noise_multiplier)

    def __init__(self, l1_sensitivity: float, epsilon: float):
        self.sensitivity = _positive("l1_sensitivity", l1_sensitivity)
        self.epsilon = _positive("epsilon", epsilon)
        self.delta = 0.0
        self.scale = self.sensitivity / self.epsilon

    @property
    def noise_multiplier(self) -> float:
        """Scale over sensitivity, 1/ε: what the accountant composes."""
        return self.scale / self.sensitivity

    @property
    def variance(self) -> float:
        return 2.0 * self.scale**2

    @property
    def std(self) -> float:
        return math.sqrt(2.0) * self.scale

    def per_step(self) -> tuple[float, float]:
        return (self.epsilon, 0.0)

    def sample(self, rng: np.random.Generator, size: Any = None) -> np.ndarray:
        return np.asarray(_check_rng(rng).laplace(0.0, self.scale, size), dtype=float)

    def __repr__(self) -> str:
        return f"LaplaceMechanism(l1_sensitivity={self.sensitivity!r}, epsilon={self.epsilon!r})"


class GaussianMechanism:
    """i.i.d. Gaussian noise, σ² = 2·ln(1.25/δ)·(Δ₂/ε)²: (ε, δ)-DP per step.

    This is the classic calibration (Dwork & Roth, Thm A.1; the paper's
    Lemma 2.3 / Theorem 4.6), proven for ε < 1. For ε ≥ 1 a
    :class:`PrivacyWarning` is issued; the mechanism is still built, and
    :class:`PrivacyLedger` checks the per-step claim against the exact
    (analytic) Gaussian privacy profile.
    """

    kind = "gaussian"
    norm = "l2"

    @classmethod
    def from_sensitivity(cls, sensitivity: Sensitivity, epsilon: float, delta: float | None = None) -> "GaussianMechanism":
        """Calibrated to ``sensitivity.l2`` at the per-step (ε, δ)."""
        if delta is None:
            raise ConfigError("delta is required for the Gaussian mechanism (0 < delta < 1)")
        return cls(sensitivity.l2, epsilon, delta)

    def dp_event(self):
        """The ``dp_accounting`` event one step of this mechanism stands for."""
        import dp_accounting

        return dp_accounting.GaussianDpEvent(noise_multiplier=self.noise_multiplier)

    def __init__(self, l2_sensitivity: float, epsilon: float, delta: float):
        self.sensitivity = _positive("l2_sensitivity", l2_sensitivity)
        self.epsilon = _positive("epsilon", epsilon)
        self.delta = _delta("delta", delta)
        if self.epsilon >= 1.0:
            warnings.warn(
                f"Gaussian mechanism with epsilon={self.epsilon:g} >= 1: the classic calibration "
                "sigma^2 = 2 ln(1.25/delta) (Delta2/epsilon)^2 is proven only for epsilon < 1; "
                "the privacy ledger verifies the per-step claim numerically",
                PrivacyWarning,
                stacklevel=2,
            )
        self.sigma = math.sqrt(2.0 * math.log(1.25 / self.delta)) * self.sensitivity / self.epsilon

    @property
    def noise_multiplier(self) -> float:
        """σ/Δ₂ = √(2 ln(1.25/δ))/ε: what the accountant composes."""
        return self.sigma / self.sensitivity

    @property
    def variance(self) -> float:
        return self.sigma**2

    @property
    def std(self) -> float:
        return self.sigma

    def per_step(self) -> tuple[float, float]:
        return (self.epsilon, self.delta)

    def sample(self, rng: np.random.Generator, size: Any = None) -> np.ndarray:
        return np.asarray(_check_rng(rng).normal(0.0, self.sigma, size), dtype=float)

    def __repr__(self) -> str:
        return (
            f"GaussianMechanism(l2_sensitivity={self.sensitivity!r}, epsilon={self.epsilon!r}, "
            f"delta={self.delta!r})"
        )


Mechanism = LaplaceMechanism | GaussianMechanism

#: mechanism name → class; a new mechanism is one class with the same protocol and one entry here
MECHANISMS: dict[str, type] = {"laplace": LaplaceMechanism, "gaussian": GaussianMechanism}


def make_mechanism(
    kind: Kind, sensitivity: Sensitivity, epsilon: float, delta: float | None = None
) -> Mechanism:
    """Laplace (uses ``sensitivity.l1``; ``delta`` must be None or 0) or Gaussian
    (uses ``sensitivity.l2``; ``delta`` in (0, 1) required)."""
    kind = _kind(kind)
    if not isinstance(sensitivity, Sensitivity):
        raise ConfigError(f"sensitivity must be a Sensitivity, got {type(sensitivity).__name__}")
    if kind == "laplace" and delta is not None and _real("delta", delta) != 0.0:
        raise ConfigError(f"delta must be None or 0 for the Laplace mechanism, got {delta!r}")
    return MECHANISMS[kind].from_sensitivity(sensitivity, epsilon, delta)


# --------------------------------------------------------------------------- #
# randomness
# --------------------------------------------------------------------------- #


def zone_rng(seed: int, zone: int) -> np.random.Generator:
    """The noise generator of one zone: ``Generator(PCG64(SeedSequence([seed, zone])))``.

    It depends only on the run seed and the zone id — not on the process,
    thread or host that runs the zone — so the same seed gives the same noise
    on every execution backend (serial, threads, processes, MPI), and distinct
    zones get statistically independent streams.
    """
    for name, value in (("seed", seed), ("zone", zone)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(zone)])))


def noise_magnitude(xi: Any) -> float:
    """Σ_i |ξ_i| of one noise vector (the paper's eq. 29 sums this over zones and steps)."""
    return float(np.abs(np.asarray(xi, dtype=float)).sum())


# --------------------------------------------------------------------------- #
# accounting
# --------------------------------------------------------------------------- #


def theorem_4_9_epsilon(epsilon: float, delta: float, k: int) -> float:
    """The paper's Theorem 4.9: k = T·E adaptive steps of the (ε̄, δ̄) Gaussian
    mechanism (σ² = 2 ln(1.25/δ̄)(Δ₂/ε̄)²) are claimed (ε', δ̄)-DP with

        ε' = √(k·ln(1/δ̄) / ln(1.25/δ̄)) · ε̄ .

    Verbatim from the paper (Theorem 4.9: "guarantees
    (√(TE ln(1/δ̄)/ln(1.25/δ̄)) ε̄, δ̄)-DP", proof 4.10 via the moments
    accountant, eqs. 24a–24h). Caveat: with L = ln(1.25/δ̄) the per-step
    log-moment is τ(τ+1)ε̄²/(4L) (eq. 24b), and minimising over real τ gives
    the sufficient condition ε' ≥ ε̄·√(k ln(1/δ̄)/L) + k·ε̄²/(4L); the proof
    drops the additive term (its chain of inequalities yields a necessary,
    not a sufficient, condition). So for large k·ε̄² the stated ε' is *below*
    the exact ε of the composition and the claim is false (e.g. the paper's
    own ε̄ = 1, δ̄ = 1e-2, T·E = 100: 9.77 stated, 11.92 exact).
    :class:`PrivacyLedger` checks it against the exact value.
    """
    return math.sqrt(k * math.log(1.0 / delta) / math.log(1.25 / delta)) * epsilon


def _exact_gaussian_epsilon(noise_multiplier: float, k: int, delta: float) -> float:
    """Exact ε(δ) of k adaptive Gaussian mechanisms with σ/Δ₂ = noise_multiplier.

    Such a composition is exactly (√k/z)-GDP (Dong, Roth & Su 2022, Cor. 3.3),
    i.e. one Gaussian mechanism with noise multiplier z/√k, whose privacy
    profile is analytic (Balle & Wang 2018, eq. 6): computed by
    ``dp_accounting.get_epsilon_gaussian``.
    """
    import dp_accounting

    if k == 0:
        return 0.0
    return float(dp_accounting.get_epsilon_gaussian(noise_multiplier / math.sqrt(k), delta))


def _finite_or_none(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


class PrivacyLedger:
    """Privacy spent by one zone: counts released local steps and composes them.

    ``target_delta`` is the δ of the whole run at which ε is reported by the
    accountants. Default: the per-step δ — that is the δ at which the paper's
    Theorem 4.9 states its bound, so all Gaussian figures are comparable.
    For Laplace the default is therefore 0, and no tight figure is computed
    (a PLD at δ = 0 only reproduces the pure-ε sum); pass ``target_delta > 0``
    to get dp-accounting's Laplace PLD ε as an extra figure.

    ``tight_method`` selects the accountant of the ``tight`` figure:

    * ``"analytic"`` (Gaussian only): exact, ``dp_accounting.get_epsilon_gaussian``
      on the composed mechanism (see :func:`_exact_gaussian_epsilon`); microseconds.
    * ``"pld"``: ``dp_accounting.pld.PLDAccountant`` with
      ``SelfComposedDpEvent(GaussianDpEvent|LaplaceDpEvent(noise_multiplier), k)``;
      a pessimistic discretisation of the exact value, up to seconds for large k·ε.
    * ``"rdp"``: ``dp_accounting.rdp.RdpAccountant``, same events; a looser,
      valid bound; about a millisecond.
    * ``"auto"`` (default): ``"analytic"`` for Gaussian, ``"pld"`` for Laplace.
    * ``"none"``: no tight figure.

    For Laplace the PLD models scalar noise; for vector noise bounded in ‖·‖₁,
    taking the one-dimensional shift as the worst case is an assumption, so the
    Laplace PLD figure is reported as an extra and never used as the headline.

    Headline (:meth:`epsilon_spent`, :meth:`headline`):

    * Laplace: basic composition (k·ε, 0) — the exact pure-ε sum.
    * Gaussian: the smallest ε among the *valid* guarantees whose δ is at most
      ``target_delta``, reported as (ε, target_delta): the tight figure; the
      basic composition (k·ε, k·δ) if its per-step claim is verified and
      k·δ ≤ target_delta; Theorem 4.9 (ε', δ) if δ ≤ target_delta and ε' is at
      least the exact ε at δ. If none applies (e.g. ``tight_method="none"``),
      the basic composition (k·ε, k·δ) is the headline.

    Results are cached per step count, so calling :meth:`report` or
    :meth:`epsilon_spent` every round costs at most one accountant call per
    new k (the default Gaussian headline is analytic and cheap).
    """

    def __init__(
        self,
        mechanism: Mechanism,
        target_delta: float | None = None,
        tight_method: str = "auto",
        zone: int | None = None,
    ):
        if not isinstance(mechanism, (LaplaceMechanism, GaussianMechanism)):
            raise ConfigError(
                f"mechanism must be a LaplaceMechanism or GaussianMechanism, got {type(mechanism).__name__}"
            )
        self.mechanism = mechanism
        self.kind = mechanism.kind
        self.zone = zone
        eps, delta = mechanism.per_step()
        self.epsilon, self.delta = eps, delta
        self.noise_multiplier = mechanism.noise_multiplier
        if target_delta is None:
            target_delta = delta
        target_delta = _real("target_delta", target_delta)
        if self.kind == "gaussian":
            target_delta = _delta("target_delta", target_delta)
        elif not 0.0 <= target_delta < 1.0:
            raise ConfigError(f"target_delta must lie in [0, 1), got {target_delta!r}")
        self.target_delta = target_delta
        if tight_method not in TIGHT_METHODS:
            raise ConfigError(f"tight_method must be one of {TIGHT_METHODS}, got {tight_method!r}")
        if tight_method == "auto":
            tight_method = "analytic" if self.kind == "gaussian" else "pld"
        if tight_method == "analytic" and self.kind != "gaussian":
            raise ConfigError("tight_method='analytic' is available for the Gaussian mechanism only")
        if self.kind == "laplace" and self.target_delta == 0.0:
            tight_method = "none"
        self.tight_method = tight_method
        self._steps = 0
        # the history of released steps: runs of steps of one mechanism (opacus-style ledger);
        # consecutive steps with the same parameters are one entry
        self._history: list[list[Any]] = []
        self._cache: dict[tuple[str, int, int], Any] = {}
        self._per_step_exact_eps: float | None = None

    # -- recording ---------------------------------------------------------

    @property
    def steps(self) -> int:
        """Number k of released local steps so far."""
        return self._steps

    @staticmethod
    def _signature(mechanism: Mechanism) -> tuple:
        eps, delta = mechanism.per_step()
        return (mechanism.kind, eps, delta, mechanism.noise_multiplier)

    @property
    def history(self) -> list[tuple[Mechanism, int]]:
        """The recorded steps as (mechanism, number of steps), in order."""
        return [(m, n) for m, n in self._history]

    @property
    def homogeneous(self) -> bool:
        """Whether every recorded step used the ledger's own mechanism parameters."""
        first = self._signature(self.mechanism)
        return all(self._signature(m) == first for m, _ in self._history)

    def record(self, n_steps: int = 1, mechanism: Mechanism | None = None) -> int:
        """Record ``n_steps`` released local steps of ``mechanism`` (default: the ledger's); returns the total.

        Steps of other mechanisms (another kind, ε, δ or noise multiplier) are composed too: the
        ledger keeps the history and composes it (basic composition, and the accountant's figure).
        """
        if isinstance(n_steps, bool) or not isinstance(n_steps, numbers.Integral) or n_steps < 0:
            raise ConfigError(f"n_steps must be a non-negative integer, got {n_steps!r}")
        mechanism = self.mechanism if mechanism is None else mechanism
        if not hasattr(mechanism, "per_step") or getattr(mechanism, "kind", None) not in MECHANISMS:
            raise ConfigError(f"mechanism must follow the mechanism protocol (kind, per_step, noise_multiplier), got {mechanism!r}")
        if n_steps == 0:
            return self._steps
        if self._history and self._signature(self._history[-1][0]) == self._signature(mechanism):
            self._history[-1][1] += int(n_steps)
        else:
            self._history.append([mechanism, int(n_steps)])
        self._steps += int(n_steps)
        kinds = {m.kind for m, _ in self._history}
        if len(kinds) > 1 and self.kind != "mixed":
            self.kind = "mixed"
            if self.tight_method in ("analytic", "none") and self.target_delta > 0:
                self.tight_method = "pld"
        # results are cached per history; older ones are never asked for again
        key = (self._steps, len(self._history))
        self._cache = {k: v for k, v in self._cache.items() if k[1:] == key}
        return self._steps

    # -- individual figures --------------------------------------------------

    def per_step(self) -> tuple[float, float]:
        """The per-step (ε, δ); with a mixed history, the largest of each (a valid bound per step)."""
        if self.homogeneous:
            return (self.epsilon, self.delta)
        eps = [m.per_step()[0] for m, _ in self._history] + [self.epsilon]
        dels = [m.per_step()[1] for m, _ in self._history] + [self.delta]
        return (max(eps), max(dels))

    def basic(self) -> tuple[float, float]:
        """Basic composition (Dwork & Roth Thm 3.16): (Σ k_i·ε_i, min(Σ k_i·δ_i, 1))."""
        if self.homogeneous:
            k = self._steps
            return (k * self.epsilon, min(k * self.delta, 1.0))
        eps = sum(n * m.per_step()[0] for m, n in self._history)
        delta = sum(n * m.per_step()[1] for m, n in self._history)
        return (eps, min(delta, 1.0))

    def theorem_4_9(self) -> tuple[float, float] | None:
        """Gaussian only: the paper's Theorem 4.9 figure (ε', δ); see :func:`theorem_4_9_epsilon`."""
        if self.kind != "gaussian" or not self.homogeneous:
            return None
        return (theorem_4_9_epsilon(self.epsilon, self.delta, self._steps), self.delta)

    def _cached(self, name: str, fn):
        key = (name, self._steps, len(self._history))
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def _exact(self, delta: float) -> float:
        """Gaussian: exact ε of the k-fold composition at ``delta``."""
        if self.homogeneous:
            return self._cached(
                f"exact@{delta!r}",
                lambda: _exact_gaussian_epsilon(self.noise_multiplier, self._steps, delta),
            )
        # Gaussian steps with different multipliers z_i compose to μ-GDP with μ² = Σ k_i/z_i²
        mu2 = sum(n / m.noise_multiplier**2 for m, n in self._history)
        return self._cached(f"exact@{delta!r}", lambda: _exact_gaussian_epsilon(1.0 / math.sqrt(mu2), 1, delta))

    def per_step_verified(self) -> bool:
        """Whether the per-step claim (ε, δ) holds exactly (always for Laplace;
        for Gaussian checked with the analytic profile — proven for ε < 1)."""
        if self.kind == "laplace":
            return True
        if self.homogeneous:
            return self._per_step_exact() <= self.epsilon * (1 + _REL_TOL) + 1e-12
        return all(
            m.kind == "laplace"
            or _exact_gaussian_epsilon(m.noise_multiplier, 1, m.delta) <= m.epsilon * (1 + _REL_TOL) + 1e-12
            for m, _ in self._history
        )

    def _per_step_exact(self) -> float:
        """Gaussian: exact ε of one step at the per-step δ."""
        if self._per_step_exact_eps is None:
            self._per_step_exact_eps = _exact_gaussian_epsilon(self.noise_multiplier, 1, self.delta)
        return self._per_step_exact_eps

    def theorem_4_9_valid(self) -> bool | None:
        """Whether Theorem 4.9's (ε', δ) is a true guarantee here (ε' ≥ exact ε at δ)."""
        thm = self.theorem_4_9()
        if thm is None:
            return None
        return thm[0] >= self._exact(self.delta) * (1 - _REL_TOL) - 1e-12

    def _tight_value(self) -> float | None:
        method, k = self.tight_method, self._steps
        if method == "none":
            return None
        if k == 0:
            return 0.0
        if method == "analytic":
            return self._exact(self.target_delta)
        import dp_accounting
        from dp_accounting import pld, rdp

        accountant = pld.PLDAccountant() if method == "pld" else rdp.RdpAccountant()
        if self.homogeneous:
            accountant.compose(dp_accounting.SelfComposedDpEvent(self.mechanism.dp_event(), k))
        else:
            accountant.compose(
                dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(m.dp_event(), n) for m, n in self._history])
            )
        return float(accountant.get_epsilon(self.target_delta))

    def tight(self) -> dict[str, Any] | None:
        """The accountant's ε at ``target_delta`` (None when not computed); cached per k."""
        value = self._cached(f"tight:{self.tight_method}", self._tight_value)
        if value is None:
            return None
        return {
            "epsilon": value,
            "delta": self.target_delta,
            "method": self.tight_method,
            "library": "dp-accounting",
        }

    # -- headline and reports ------------------------------------------------

    def headline(self) -> dict[str, Any]:
        """The headline guarantee {epsilon, delta, source}; see the class docstring."""
        return self._cached("headline", self._headline)

    def _headline(self) -> dict[str, Any]:
        k = self._steps
        basic_eps, basic_delta = self.basic()
        if self.kind == "laplace" or k == 0:
            return {"epsilon": basic_eps, "delta": basic_delta, "source": "basic"}
        candidates: list[tuple[float, str]] = []
        tight = self.tight()
        if tight is not None and math.isfinite(tight["epsilon"]):
            candidates.append((tight["epsilon"], f"tight:{tight['method']}"))
        if self.per_step_verified() and basic_delta <= self.target_delta:
            candidates.append((basic_eps, "basic"))
        thm = self.theorem_4_9()
        if thm is not None and thm[1] <= self.target_delta and self.theorem_4_9_valid():
            candidates.append((thm[0], "theorem_4_9"))
        if not candidates:
            return {"epsilon": basic_eps, "delta": basic_delta, "source": "basic"}
        eps, source = min(candidates, key=lambda c: c[0])
        return {"epsilon": eps, "delta": self.target_delta, "source": source}

    def epsilon_spent(self) -> float:
        """The headline ε so far (cheap: cached per k; analytic by default for Gaussian)."""
        return self.headline()["epsilon"]

    def report(self) -> dict[str, Any]:
        """Everything known about the privacy spent so far (python floats; may hold inf)."""
        k = self._steps
        basic_eps, basic_delta = self.basic()
        out: dict[str, Any] = {
            "zone": self.zone,
            "mechanism": self.kind,
            "steps": k,
            "target_delta": self.target_delta,
            "per_step": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "verified": self.per_step_verified(),
            },
            "basic": {
                "epsilon": basic_eps,
                "delta": basic_delta,
                "valid": self.per_step_verified(),
            },
            "theorem_4_9": None,
            "exact": None,
            "tight": self.tight(),
            "headline": self.headline(),
            "history": [
                {"mechanism": m.kind, "epsilon": m.per_step()[0], "delta": m.per_step()[1],
                 "noise_multiplier": m.noise_multiplier, "steps": n}
                for m, n in self._history
            ],
        }
        if self.kind == "gaussian" and self.homogeneous:
            thm_eps, thm_delta = self.theorem_4_9()
            out["theorem_4_9"] = {
                "epsilon": thm_eps,
                "delta": thm_delta,
                "valid": self.theorem_4_9_valid(),
                "note": "paper's Theorem 4.9 as stated; 'valid' = not below the exact epsilon at this delta",
            }
            out["exact"] = {
                "epsilon": self._exact(self.target_delta),
                "delta": self.target_delta,
                "method": "analytic Gaussian composition (GDP), dp_accounting.get_epsilon_gaussian",
            }
            out["per_step"]["exact_epsilon"] = self._per_step_exact()
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: mechanism configuration plus :meth:`report` (inf → None, tuples → lists)."""
        mech = self.mechanism
        data = {
            "config": {
                "mechanism": self.kind,
                "epsilon": self.epsilon,
                "delta": self.delta,
                "sensitivity": mech.sensitivity,
                "std": mech.std,
                "noise_multiplier": self.noise_multiplier,
                "target_delta": self.target_delta,
                "tight_method": self.tight_method,
            },
            **self.report(),
        }
        return _jsonable(data)

    def __repr__(self) -> str:
        return (
            f"PrivacyLedger(zone={self.zone!r}, {self.kind}, per_step={self.per_step()}, "
            f"steps={self._steps})"
        )


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return _finite_or_none(x)
    return x
