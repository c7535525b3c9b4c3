"""An algorithm is three choices: update rule × perturbation × mechanism (docs/algorithm.md).

:data:`ALIASES` names the combinations the paper and the product use
(``objl``, ``objg``, ``outl``, ``outg``, ``inpl``, ``inpg``, ``inps``, ``totl``, ``totg``, ``tots``, ``hrcl``, ``hrcg``, ``nonprivate``, ``exact``, ``objt``); any other
valid combination is written ``UPDATE/PERTURBATION/MECHANISM`` (or
``UPDATE/none``). :func:`resolve` turns a name into an :class:`Algorithm` and
checks it against the registries of update rules, perturbations and
mechanisms, which is where the CLI's choices and the validation rules come from.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError
from ...privacy import MECHANISMS
from .perturbations import PERTURBATIONS
from .updates import UPDATES

__all__ = ["Algorithm", "AlgorithmChoices", "ALIASES", "resolve", "name_of", "compose"]


@dataclass(frozen=True)
class Algorithm:
    update: str
    perturbation: str = "none"
    mechanism: str | None = None

    @property
    def private(self) -> bool:
        return self.perturbation != "none"

    @property
    def name(self) -> str:
        return name_of(self)

    def validate(self) -> Algorithm:
        if self.update not in UPDATES:
            raise ConfigError(f"unknown update rule {self.update!r}; choose one of {', '.join(UPDATES)}")
        if self.perturbation not in PERTURBATIONS:
            raise ConfigError(f"unknown perturbation {self.perturbation!r}; choose one of {', '.join(PERTURBATIONS)}")
        supported = UPDATES[self.update].perturbations
        if self.perturbation not in supported:
            raise ConfigError(
                f"update {self.update!r} does not support {self.perturbation!r} perturbation (it supports: {', '.join(supported)})"
            )
        if self.private and self.mechanism not in MECHANISMS:
            raise ConfigError(
                f"{self.perturbation} perturbation needs a mechanism: choose one of {', '.join(MECHANISMS)}, got {self.mechanism!r}"
            )
        if not self.private and self.mechanism is not None:
            raise ConfigError(f"mechanism {self.mechanism!r} given without a perturbation; choose a perturbation or drop it")
        return self


#: the names of the usual combinations (kept stable: configurations, sweeps and results use them)
ALIASES: dict[str, Algorithm] = {
    "exact": Algorithm("exact"),
    "nonprivate": Algorithm("linearized"),
    "objl": Algorithm("linearized", "objective", "laplace"),
    "objg": Algorithm("linearized", "objective", "gaussian"),
    "outl": Algorithm("linearized", "output", "laplace"),
    "outg": Algorithm("linearized", "output", "gaussian"),
    "objt": Algorithm("trust-region", "objective", "laplace"),
    "inpl": Algorithm("linearized", "input", "laplace"),
    "inpg": Algorithm("linearized", "input", "gaussian"),
    # ... with staircase noise: pure ε, a smaller variance than Laplace's at a large budget (docs/privacy.md)
    "inps": Algorithm("linearized", "input", "staircase"),
    # input perturbation on the zone's two load totals, then exact ADMM on loads built from them (docs/privacy.md)
    "totl": Algorithm("exact", "totals", "laplace"),
    "totg": Algorithm("exact", "totals", "gaussian"),
    "tots": Algorithm("exact", "totals", "staircase"),
    # ... and on the totals and the bus loads in one release, the bus loads shrunk toward the totals' equal shares
    "hrcl": Algorithm("exact", "hierarchical", "laplace"),
    "hrcg": Algorithm("exact", "hierarchical", "gaussian"),
}


def name_of(alg: Algorithm) -> str:
    """The alias of a combination, or ``UPDATE/PERTURBATION/MECHANISM``."""
    for name, spec in ALIASES.items():
        if spec == alg:
            return name
    return f"{alg.update}/none" if not alg.private else f"{alg.update}/{alg.perturbation}/{alg.mechanism}"


def resolve(name: str) -> Algorithm:
    """The combination an algorithm name stands for (an alias or ``UPDATE/PERTURBATION[/MECHANISM]``)."""
    if not isinstance(name, str):
        raise ConfigError(f"algorithm must be a name, got {name!r}")
    if name in ALIASES:
        return ALIASES[name]
    parts = name.split("/")
    if "/" not in name or not 2 <= len(parts) <= 3:
        raise ConfigError(
            f"unknown algorithm {name!r}; choose one of {', '.join(ALIASES)} or UPDATE/PERTURBATION/MECHANISM "
            f"(updates: {', '.join(UPDATES)}; perturbations: {', '.join(PERTURBATIONS)}; mechanisms: {', '.join(MECHANISMS)})"
        )
    return Algorithm(parts[0], parts[1], parts[2] if len(parts) == 3 else None).validate()


def compose(algorithm: str, update: str | None = None, perturbation: str | None = None, mechanism: str | None = None) -> str:
    """The name of ``algorithm`` with some of its three choices replaced (the CLI's --update,
    --perturbation, --mechanism). Dropping the perturbation drops the mechanism."""
    base = resolve(algorithm)
    pert = perturbation if perturbation is not None else base.perturbation
    mech = mechanism if mechanism is not None else (base.mechanism if pert != "none" else None)
    if pert != "none" and mech is None:
        mech = "laplace"
    alg = Algorithm(update if update is not None else base.update, pert, mech).validate()
    return name_of(alg)


class AlgorithmChoices:
    """What a run configuration derives from its :class:`Algorithm` (``spec``): the update rule, whether it
    is private, the mechanism and the perturbation. Power-flow and learning configurations share it."""

    spec: Algorithm

    @property
    def update(self) -> str:
        return self.spec.update

    @property
    def private(self) -> bool:
        return self.spec.private

    @property
    def mechanism(self) -> str | None:
        return self.spec.mechanism

    @property
    def perturbation(self) -> str | None:
        """``objective``, ``output`` or ``input`` for private runs, None otherwise."""
        pert = self.spec.perturbation
        return None if pert == "none" else pert
