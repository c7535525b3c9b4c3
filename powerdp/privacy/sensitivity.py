"""Sensitivities of ObjPert (the gradient ∇f_p) and OutPert (a local step's output) (docs/privacy.md)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError
from .params import ADJACENCIES, check_kind, check_positive, check_rule

__all__ = ["Sensitivity", "gradient_sensitivity", "output_sensitivity", "totals_sensitivity", "hierarchical_sensitivity",
           "Rule", "Adjacency"]

Rule = Literal["sound", "paper"]
Adjacency = Literal["value", "bus"]


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
    #: how many entries one neighbouring change moves, each by l1/coordinates (then the Laplace
    #: mechanism's privacy-loss distribution is exactly that of `coordinates` scalar Laplace steps);
    #: None when the bound covers a shift spread over many entries (output perturbation)
    coordinates: int | None = None

    def __post_init__(self) -> None:
        check_positive("Sensitivity.l1", self.l1)
        check_positive("Sensitivity.l2", self.l2)
        check_positive("Sensitivity.beta", self.beta)
        check_rule(self.rule)

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
    beta = check_positive("beta", beta)
    rule = check_rule(rule)
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
            coordinates=2,
        )
    note = {
        "paper": "ObjPert gradient, the paper's value Δ1 = Δ2 = 2β (Sec. 6.1); in its coordinates also a sound bound",
        "sound": "ObjPert gradient, value adjacency: one load value moves one entry of ∇f_p = 2(y + d) by 2β",
    }[rule]
    return Sensitivity(l1=2.0 * beta, l2=2.0 * beta, rule=rule, beta=beta, note=note, coordinates=1)


def totals_sensitivity(beta: float, adjacency: Adjacency = "value") -> Sensitivity:
    """Sensitivity of a zone's load totals (Σ pd, Σ qd over its own buses; p.u.), the one release of the totals
    perturbation (docs/privacy.md, "Input perturbation on the zone's totals").

    * ``adjacency="value"``: one load value moves by at most β, so one of the two totals moves by β:
      Δ₁ = Δ₂ = β, one coordinate.
    * ``adjacency="bus"``: pd_i and qd_i move by at most β each, so both totals move by β: Δ₁ = 2β,
      Δ₂ = √2·β, two coordinates.
    """
    beta = check_positive("beta", beta)
    if _adjacency(adjacency) == "bus":
        return Sensitivity(l1=2.0 * beta, l2=math.sqrt(2.0) * beta, rule="sound", beta=beta, coordinates=2,
                           note="zone load totals, bus adjacency: pd_i and qd_i move both totals by β")
    return Sensitivity(l1=beta, l2=beta, rule="sound", beta=beta, coordinates=1,
                       note="zone load totals, value adjacency: one load value moves one total by β")


def hierarchical_sensitivity(beta: float, adjacency: Adjacency = "value") -> Sensitivity:
    """Sensitivity of the hierarchical release (docs/privacy.md): a zone's two load totals and its own buses' load
    values in one vector, every entry with the same noise.

    * ``adjacency="value"``: one load value moves its own entry and its total by β each: Δ₁ = 2β, Δ₂ = √2·β,
      two coordinates.
    * ``adjacency="bus"``: pd_i and qd_i move their two entries and both totals by β each: Δ₁ = 4β, Δ₂ = 2β, four
      coordinates.
    """
    beta = check_positive("beta", beta)
    if _adjacency(adjacency) == "bus":
        return Sensitivity(l1=4.0 * beta, l2=2.0 * beta, rule="sound", beta=beta, coordinates=4,
                           note="zone totals and bus loads, bus adjacency: two loads and both totals move by β")
    return Sensitivity(l1=2.0 * beta, l2=math.sqrt(2.0) * beta, rule="sound", beta=beta, coordinates=2,
                       note="zone totals and bus loads, value adjacency: one load and its total move by β")


def output_sensitivity(
    grad_sens: Sensitivity,
    eta: float,
    n_vars: int,
    mechanism: str | None = None,
    rule: Rule | None = None,
) -> Sensitivity:
    """Sensitivity of one local step's output for OutPert (docs/privacy.md).

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
    eta = check_positive("eta", eta)
    if isinstance(n_vars, bool) or not isinstance(n_vars, numbers.Integral) or n_vars < 1:
        raise ConfigError(f"n_vars must be a positive integer, got {n_vars!r}")
    n_vars = int(n_vars)
    mech = check_kind(mechanism, "mechanism") if mechanism is not None else None
    rule = check_rule(grad_sens.rule if rule is None else rule)
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


