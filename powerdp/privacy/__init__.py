"""Differential privacy for the zone agents: sensitivities, noise, accounting (docs/privacy.md).

Pure mathematics: nothing here builds a model or calls a solver.

* :func:`gradient_sensitivity` / :func:`output_sensitivity` turn the adjacency
  (``β``, one load value or one whole bus) into the L1/L2 sensitivities of
  ObjPert (the gradient ∇f_p, in the paper's coordinates with explicit balance
  variables y) and OutPert (the output of a local step). ``rule="sound"`` gives
  bounds that hold; ``rule="paper"`` reproduces the values the paper uses
  (Δ = 2β, resp. β). For ObjPert the two agree; the paper's OutPert value is
  *not* a proven bound for constrained problems and is labelled so.
* :class:`LaplaceMechanism`, :class:`GaussianMechanism` and :class:`StaircaseMechanism` draw the noise ξ of
  one local step; :func:`make_mechanism` picks one from a :class:`Sensitivity`.
* :func:`noise_rng` gives every zone its own :class:`NoiseSource`: secret (the OS's CSPRNG) by default,
  :func:`zone_rng` (reproducible from the run seed) for seeded experiments; :mod:`.sampler` is the one
  sampler every release goes through (a data-independent grid, exact integer noise).
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

from .accounting import TIGHT_METHODS, PrivacyLedger, theorem_4_9_epsilon
from .faults import InjectedFaults
from .mechanisms import (
    MECHANISMS,
    NOISE_SOURCES,
    GaussianMechanism,
    LaplaceMechanism,
    Mechanism,
    StaircaseMechanism,
    make_mechanism,
    noise_magnitude,
    noise_rng,
    noise_source,
    zone_rng,
)
from .params import ADJACENCIES, SENSITIVITY_RULES, PrivacyWarning
from .sampler import NoiseSource
from .sensitivity import Sensitivity, gradient_sensitivity, hierarchical_sensitivity, output_sensitivity, totals_sensitivity

__all__ = [
    "Sensitivity",
    "gradient_sensitivity",
    "output_sensitivity",
    "totals_sensitivity",
    "hierarchical_sensitivity",
    "LaplaceMechanism",
    "GaussianMechanism",
    "StaircaseMechanism",
    "make_mechanism",
    "zone_rng",
    "noise_rng",
    "NoiseSource",
    "InjectedFaults",
    "noise_source",
    "NOISE_SOURCES",
    "PrivacyLedger",
    "PrivacyWarning",
    "noise_magnitude",
    "theorem_4_9_epsilon",
    "SENSITIVITY_RULES",
    "ADJACENCIES",
    "MECHANISMS",
    "Mechanism",
    "TIGHT_METHODS",
]
