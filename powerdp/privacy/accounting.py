"""Privacy accounting: the ledger of a zone's released steps and what they cost (docs/privacy.md)."""

from __future__ import annotations

import math
import numbers
from typing import Any

from ..errors import ConfigError
from ..files.jsonable import jsonable
from .mechanisms import (
    MECHANISMS,
    PURE_KINDS,
    GaussianMechanism,
    LaplaceMechanism,
    Mechanism,
    StaircaseMechanism,
    mechanism_from_dict,
    mechanism_to_dict,
)
from .params import check_delta, check_real

__all__ = ["PrivacyLedger", "theorem_4_9_epsilon", "laplace_pld_epsilon", "TIGHT_METHODS"]

TIGHT_METHODS = ("auto", "analytic", "pld", "rdp", "none")

# Relative slack when comparing a claimed epsilon with the exact one (the exact
# value comes from a root finder with tolerance 1e-12).
_REL_TOL = 1e-9


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


def laplace_pld_epsilon(epsilon_step: float, steps: int, delta: float, coordinates: int = 1) -> float:
    """ε at ``delta`` of ``steps`` adaptive Laplace steps of per-step ε, each moving ``coordinates``
    entries by Δ₁/coordinates: dp-accounting's PLD, the accountant :class:`PrivacyLedger` uses."""
    import dp_accounting
    from dp_accounting import pld

    mech = LaplaceMechanism(1.0, epsilon_step, coordinates=coordinates)
    accountant = pld.PLDAccountant()
    accountant.compose(dp_accounting.SelfComposedDpEvent(mech.dp_event(), int(steps)))
    return float(accountant.get_epsilon(delta))


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

    For Laplace the PLD models scalar noise. When the mechanism knows which entries a
    neighbouring change moves (``LaplaceMechanism.coordinates``: objective and input
    perturbation, one entry per load value) the PLD is exact, and at ``target_delta > 0``
    it is a headline candidate next to the pure-ε sum. For vector noise bounded only in
    ‖·‖₁ (output perturbation) the one-dimensional shift as the worst case is an
    assumption, so that PLD figure is reported as an extra and never used as the headline.

    Headline (:meth:`epsilon_spent`, :meth:`headline`):

    * Laplace: basic composition (k·ε, 0) — the exact pure-ε sum — or, with an exact PLD and
      ``target_delta > 0``, the PLD's ε at ``target_delta`` when it is smaller.
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
        noise_source: str = "secret",
        claim_holds: bool = True,
    ):
        if not isinstance(mechanism, (LaplaceMechanism, GaussianMechanism, StaircaseMechanism)):
            raise ConfigError(
                f"mechanism must be a LaplaceMechanism, GaussianMechanism or StaircaseMechanism, got {type(mechanism).__name__}"
            )
        self.mechanism = mechanism
        self.kind = mechanism.kind
        self.zone = zone
        # "secret" (OS entropy) or "seeded" (replayable by whoever knows the seed), and whether the
        # sensitivity the mechanism is calibrated to is a proven bound: what the figures below mean
        self.noise_source = noise_source
        self.claim_holds = bool(claim_holds)
        eps, delta = mechanism.per_step()
        self.epsilon, self.delta = eps, delta
        self.noise_multiplier = mechanism.noise_multiplier
        if target_delta is None:
            target_delta = delta
        target_delta = check_real("target_delta", target_delta)
        if self.kind == "gaussian":
            target_delta = check_delta("target_delta", target_delta)
        elif not 0.0 <= target_delta < 1.0:
            raise ConfigError(f"target_delta must lie in [0, 1), got {target_delta!r}")
        self.target_delta = target_delta
        if tight_method not in TIGHT_METHODS:
            raise ConfigError(f"tight_method must be one of {TIGHT_METHODS}, got {tight_method!r}")
        if tight_method == "auto":
            tight_method = "analytic" if self.kind == "gaussian" else "pld"
        if tight_method == "analytic" and self.kind != "gaussian":
            raise ConfigError("tight_method='analytic' is available for the Gaussian mechanism only")
        if (self.kind == "laplace" and self.target_delta == 0.0) or self.kind == "staircase":
            tight_method = "none"  # pure ε sums exactly (and the staircase claims nothing tighter)
        self.tight_method = tight_method
        self._steps = 0
        # the history of released steps: runs of steps of one mechanism (opacus-style ledger);
        # consecutive steps with the same parameters are one entry
        self._history: list[list[Any]] = []
        self._cache: dict[tuple[str, int, int], Any] = {}
        self._per_step_exact_eps: float | None = None
        # a resumed zone repeating releases it journaled (privacy/journal.py): they are in the ledger already, so the
        # steps of the rounds it repeats are not recorded again; and the steps charged twice because a replay diverged
        self.paused = False
        self.recharged: list[list[Any]] = []

    # -- recording ---------------------------------------------------------

    @property
    def steps(self) -> int:
        """Number k of released local steps so far."""
        return self._steps

    @staticmethod
    def _signature(mechanism: Mechanism) -> tuple:
        eps, delta = mechanism.per_step()
        # to 12 significant digits: a mechanism re-calibrated each round (output perturbation) has the same
        # parameters up to rounding, and must stay one history entry (else every report costs O(rounds))
        return (mechanism.kind, float(f"{eps:.12g}"), float(f"{delta:.12g}"), float(f"{mechanism.noise_multiplier:.12g}"))

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
        if n_steps == 0 or self.paused:  # paused: a replayed round, charged when it first crossed
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
            if "staircase" in kinds:  # no privacy-loss distribution is claimed for it: basic composition only
                self.tight_method = "none"
        # results are cached per history; older ones are never asked for again
        key = (self._steps, len(self._history))
        self._cache = {k: v for k, v in self._cache.items() if k[1:] == key}
        return self._steps

    # -- resume: the ledger in a zone's checkpoint and journal (docs/privacy.md, "Resume") ----------------

    def releases(self) -> list[dict[str, Any]]:
        """The privacy receipt's entries of this zone: each recorded run of steps as its mechanism describes itself
        (``receipt()``, docs/contributing.md) with its ``count``."""
        return [{**m.receipt(), "count": int(n)} for m, n in self._history]

    def history_state(self) -> list[list[Any]]:
        """The recorded steps as JSON values: [[mechanism as a dict, steps], ...] (:func:`mechanism_to_dict`)."""
        return [[mechanism_to_dict(m), int(n)] for m, n in self._history]

    def state_dict(self) -> dict[str, Any]:
        """What a zone's checkpoint keeps of its ledger (JSON values only)."""
        return {"steps": self._steps, "history": self.history_state(),
                "recharged": [[mechanism_to_dict(m), int(n)] for m, n in self.recharged]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the ledger must be empty: a zone's fresh one)."""
        self.replace_history(state.get("history") or [])
        self.recharged = [[mechanism_from_dict(m), int(n)] for m, n in state.get("recharged") or []]

    def replace_history(self, history: list[list[Any]]) -> None:
        """Make the recorded steps ``history`` ([[mechanism dict, steps], ...], a checkpoint's or a journal entry's)."""
        self._history, self._steps, self._cache = [], 0, {}
        self.kind = self.mechanism.kind
        paused, self.paused = self.paused, False
        for m, n in history:
            self.record(int(n), mechanism=m if hasattr(m, "per_step") else mechanism_from_dict(m))
        self.paused = paused

    def add_recharged(self, charges: list[list[Any]]) -> None:
        """Note steps charged twice (``[[mechanism or its dict, steps], ...]``): the releases of rounds a resumed zone
        released once and now releases again with fresh noise after its replay diverged (privacy/journal.py)."""
        for m, n in charges:
            if int(n):
                self.recharged.append([m if hasattr(m, "per_step") else mechanism_from_dict(m), int(n)])

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

    @property
    def pld_exact(self) -> bool:
        """Laplace: whether every recorded step's PLD is its exact privacy loss (see the class doc)."""
        mechanisms = [m for m, _ in self._history] or [self.mechanism]
        return all(getattr(m, "pld_exact", False) for m in mechanisms)

    def per_step_verified(self) -> bool:
        """Whether the per-step claim (ε, δ) holds exactly (always for Laplace;
        for Gaussian checked with the analytic profile — proven for ε < 1)."""
        if self.kind in PURE_KINDS:
            return True
        if self.homogeneous:
            return self._per_step_exact() <= self.epsilon * (1 + _REL_TOL) + 1e-12
        return all(
            m.kind in PURE_KINDS
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
        if self.kind == "laplace" and k > 0 and self.target_delta > 0 and self.pld_exact:
            tight = self.tight()
            if tight is not None and tight["epsilon"] < basic_eps:
                return {"epsilon": tight["epsilon"], "delta": self.target_delta, "source": "tight:pld"}
        if self.kind in PURE_KINDS or k == 0:
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
            "noise_source": self.noise_source,
            "private": self.claim_holds,
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
            # steps charged twice: rounds a resumed zone released again with fresh noise after its replay diverged
            "recharged_steps": int(sum(n for _, n in self.recharged)),
            # what each run of releases was, from the mechanism objects that released (the privacy receipt's entries)
            "releases": self.releases(),
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
        return jsonable(data)

    def __repr__(self) -> str:
        return (
            f"PrivacyLedger(zone={self.zone!r}, {self.kind}, per_step={self.per_step()}, "
            f"steps={self._steps})"
        )
