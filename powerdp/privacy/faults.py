"""Deliberately broken runs for the test suite and the audit's self-test (docs/privacy.md, "What the guarantee
assumes of the implementation").

An :class:`InjectedFaults` reaches a run only as an explicit Python argument: the ``faults`` field of a
:class:`~powerdp.apps.power_flow.config.RunConfig` or :class:`~powerdp.apps.learning.config.LearnConfig` set in code. No
configuration file, command-line flag or environment variable can set it (``RunConfig.from_dict`` refuses it
and ``to_dict`` leaves it out), so a real run never carries one. The former environment switches
(``POWERDP_TEST_DISABLE_NOISE``, ``POWERDP_TEST_LEAK``) are read nowhere any more: a run with them set is an
ordinary run.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["InjectedFaults", "SAMPLERS", "LEAKS", "RESUMES", "MARKET_RELEASES", "replays"]

#: "grid": the product's sampler (powerdp.privacy.sampler); "numpy": the old fl(v + numpy noise) sampler whose
#: output set depends on v (the floating-point attack's target; benchmarks/fp_attack.py)
SAMPLERS = ("grid", "numpy")
#: "noise_magnitude": every ZoneUpdate carries the round's Σ|ξ| outside the allow-list (the pre-review leak)
LEAKS = (None, "noise_magnitude")
#: how a resumed zone draws its noise: "replay" (the product: its stream from its checkpoint, its journal; issue 36);
#: "fresh" (the old resume: a secret run keeps no stream and no journal, so repeated rounds go out with fresh noise)
RESUMES = ("replay", "fresh")
#: which rows a private DC-market zone penalizes in its step: "all" (the product: the proven bound covers every row it
#: releases); "screened" (the old step: only the active rows, while every row is released; issue 36 finding M1)
MARKET_RELEASES = ("all", "screened")


@dataclass(frozen=True)
class InjectedFaults:
    """What to break on purpose in a test run; the default breaks nothing.

    ``disable_noise``: every mechanism still draws its noise and the ledger still records the spend, but the
    released value is the noise-free one. ``leak``: a message field outside the allow-list (see :data:`LEAKS`).
    ``sampler``: ``"numpy"`` selects the old floating-point sampler (see :data:`SAMPLERS`). ``resume``: ``"fresh"``
    brings back the old resume (see :data:`RESUMES`). ``market_release``: ``"screened"`` the DC market's old step
    (see :data:`MARKET_RELEASES`). ``sensitivity_scale``: a power-flow perturbation calibrates its mechanism to its
    sensitivity times this factor (< 1: noise too small for the claim the ledger makes, the classic under-estimated
    sensitivity; the audit must catch it).
    """

    disable_noise: bool = False
    leak: str | None = None
    sampler: str = "grid"
    resume: str = "replay"
    market_release: str = "all"
    sensitivity_scale: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.sensitivity_scale, (int, float)) and 0 < self.sensitivity_scale <= 1):
            raise ConfigError(f"faults.sensitivity_scale = {self.sensitivity_scale!r}: a factor in (0, 1]")
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"faults.sampler = {self.sampler!r}: choose one of {', '.join(SAMPLERS)}")
        if self.leak not in LEAKS:
            raise ConfigError(f"faults.leak = {self.leak!r}: choose one of {LEAKS}")
        if self.resume not in RESUMES:
            raise ConfigError(f"faults.resume = {self.resume!r}: choose one of {', '.join(RESUMES)}")
        if self.market_release not in MARKET_RELEASES:
            raise ConfigError(f"faults.market_release = {self.market_release!r}: choose one of {', '.join(MARKET_RELEASES)}")

    def describe(self) -> str:
        """One line naming what is broken (for the audit's log and the learning audit's verdict line)."""
        parts = []
        if self.disable_noise:
            parts.append("noise switched off")
        if self.leak:
            parts.append(f"messages carry {self.leak}")
        if self.sampler != "grid":
            parts.append(f"the old {self.sampler} floating-point sampler")
        if self.resume != "replay":
            parts.append("a resume that draws fresh noise and keeps no journal")
        if self.market_release != "all":
            parts.append("the DC market's old step (only the screened rows penalized, every row released)")
        if self.sensitivity_scale != 1.0:
            parts.append(f"noise calibrated to {self.sensitivity_scale:g} x the sensitivity")
        return "injected faults: " + (", ".join(parts) or "none") + " (a test-only broken run)"


def check_faults(value, name: str = "faults") -> InjectedFaults | None:
    """``value`` if it is None or an :class:`InjectedFaults`; anything else (a table from a file) is refused."""
    if value is None or isinstance(value, InjectedFaults):
        return value
    raise ConfigError(f"{name}: test-only (an InjectedFaults set in Python by the test suite); never a configuration key")


def replays(faults: InjectedFaults | None) -> bool:
    """Whether a resumed zone replays its journaled releases (the product), not the test-only old resume."""
    return faults is None or faults.resume == "replay"
