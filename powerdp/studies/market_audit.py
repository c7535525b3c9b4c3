"""The DC market's release against the sensitivity its noise is calibrated to (docs/market.md, "Private loads"; issue 36,
finding M1), and ``powerdp audit CASE --model dc``.

The market's claim rests on a per-round bound: given the public history (the broadcast and the zone's own previous
release), a zone's release moves by at most Δ₂ = β·max_b ‖[1; H_{:,b}]‖₂ when one of its loads moves by β.
:func:`release_sensitivity` tests it the way the red team did: it runs the market (noise and all), and in every round
it also takes, from that round's public message and the zone's own previous release, the zone's noise-free step on its
loads and on each neighbouring set of loads (every load of the zone moved by +β and by −β), and measures ‖Δr‖₂/Δ₂.
A ratio above 1 means the noise covers less than the zone releases.

:func:`run_market_audit` is the audit of a private market run: that check on the audited zone as one channel (it
fails the audit by itself when a ratio exceeds 1 beyond the solver's tolerance), and the linear distinguishing attack
of :mod:`powerdp.studies.distinguishers` on the zone's releases over secret-noise runs on both data sets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["release_sensitivity", "SensitivityReport", "run_market_audit", "SENSITIVITY_SLACK"]

#: a ratio ‖Δr‖/Δ₂ up to 1 + this passes (the zones' QPs are solved to 1e-11; the bound is exact)
SENSITIVITY_SLACK = 1e-6


@dataclass
class SensitivityReport:
    """Per (zone, bus, sign) the largest ‖Δr‖₂/Δ₂ over the rounds, and where the worst one was."""

    ratios: dict[tuple[int, int, int], float] = field(default_factory=dict)
    worst: tuple[int, int, int, int] | None = None  # (zone, bus, sign, round)
    rounds: int = 0
    pairs: int = 0  # (round, load, sign) pairs measured
    above: int = 0  # of which above 1 + SENSITIVITY_SLACK

    @property
    def max_ratio(self) -> float:
        return max(self.ratios.values(), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"max_ratio": self.max_ratio, "worst": self.worst, "rounds": self.rounds, "pairs": self.pairs,
                "above": self.above}


def release_sensitivity(net, zone_of_bus, settings, beta: float = 0.01, seed: int | None = None, faults=None,
                        zones: list[int] | None = None, buses: list[int] | None = None, line_scale: float = 1.0,
                        progress=None) -> SensitivityReport:
    """Run the market of ``settings`` (its noise, its rounds) in this process and measure every round's ‖Δr‖₂/Δ₂ of
    each zone in ``zones`` (default: all) for each of its loaded buses (or ``buses``, internal indices) moved by ±β
    (module docstring). ``faults``: test-only (the old step, :class:`~powerdp.privacy.faults.InjectedFaults`)."""
    from ..apps.market.dc_market import market_problem
    from ..engine.sharing.coordinator import SharingCoordinator
    from ..engine.sharing.hosts import build
    from ..opf.dc import dc_model

    model = dc_model(net)
    zone_of_bus = np.asarray(zone_of_bus, dtype=np.int64)
    problem, model, sigmas = market_problem(net, zone_of_bus, settings.noise_multiplier, beta, seed, model, None, line_scale,
                                            True, None, delta=settings.delta, faults=faults)
    coordinator = SharingCoordinator(problem.zstep, len(problem.specs), settings.rho, settings.tau, settings.rho_schedule,
                                     settings.adapt_rounds, settings.relaxation)
    agents = {s.agent: build(s) for s in problem.specs}
    zones = sorted(agents) if zones is None else list(zones)
    # the probes: noise-free copies of each audited zone, on its loads and on each neighbouring set
    probes: dict[tuple[int, int, int], Any] = {}
    base: dict[int, Any] = {}
    for m in zones:
        spec = problem.specs[m]
        own = np.flatnonzero(zone_of_bus == m)
        loads = np.asarray(spec.kwargs["loads"], dtype=float)
        chosen = [i for i, b in enumerate(own) if (buses is None and loads[i] != 0) or (buses is not None and b in buses)]
        quiet = {**spec.kwargs, "noise_sigma": 0.0, "noise_multiplier": None, "cost_gamma": None}
        base[m] = build(type(spec)(agent=m, factory=spec.factory, kwargs=quiet))
        for i in chosen:
            for sign in (1, -1):
                moved = loads.copy()
                moved[i] += sign * beta
                probes[(m, int(own[i]), sign)] = build(type(spec)(agent=m, factory=spec.factory, kwargs={**quiet, "loads": moved}))
    private_rows = settings.noise_multiplier is not None and getattr(faults, "market_release", "all") == "all"
    for probe in [*base.values(), *probes.values()]:
        probe._all_rows = private_rows  # the step the private zone takes (quiet copies have no noise source)
    coordinator.start([agents[a].initialize() for a in sorted(agents)])
    report = SensitivityReport(ratios={k: 0.0 for k in probes})
    for t in range(1, settings.rounds + 1):
        msg = coordinator.broadcast()
        ref = {}
        for m in zones:
            base[m].own = agents[m].own  # the zone's own previous release: public
            ref[m] = base[m].local_step(msg)[0]
        for (m, b, sign), probe in probes.items():
            probe.own = agents[m].own
            r = probe.local_step(msg)[0]
            ratio = float(np.linalg.norm(r - ref[m])) / sigmas[m]["sensitivity"]
            report.pairs += 1
            report.above += ratio > 1.0 + SENSITIVITY_SLACK
            if ratio > report.ratios[(m, b, sign)]:
                report.ratios[(m, b, sign)] = ratio
                if report.worst is None or ratio >= report.max_ratio:
                    report.worst = (m, b, sign, t)
        coordinator.receive([agents[a].step(msg) for a in sorted(agents)])
        report.rounds = t
        if progress is not None:
            progress(t, report)
    return report


def run_market_audit(net, zone_of_bus, settings, beta: float, zone: int, bus: int | None, runs: int, seed: int | None,
                     faults=None, confidence: float = 0.95) -> dict[str, Any]:
    """The audit of a private market (module docstring): the release-sensitivity channel on every zone (each of its
    loads moved by ±β, every round of one run), and the linear attack on ``zone``'s releases over ``runs`` runs per
    data set (D, and D′ with ``bus``'s load moved by β; ``bus`` None: the zone's largest load), each test at a
    Bonferroni-corrected confidence. Returns the channels, the claim (the zone's ledger) and the verdict."""
    from ..apps.market.dc_market import market_problem
    from ..engine.sharing.coordinator import SharingCoordinator
    from ..engine.sharing.hosts import build
    from ..opf.dc import dc_model
    from .distinguishers import attack

    zone_of_bus = np.asarray(zone_of_bus, dtype=np.int64)
    own = np.flatnonzero(zone_of_bus == zone)
    model = dc_model(net)
    if bus is None:
        bus = int(own[np.argmax(np.abs(model.load[own]))])
    sens = release_sensitivity(net, zone_of_bus, settings, beta, seed, faults)
    sensitivity_failed = sens.max_ratio > 1.0 + SENSITIVITY_SLACK
    channel = {**sens.to_dict(), "failed": sensitivity_failed,
               "method": "every load of every zone moved by ±β; each zone's noise-free step from each round's public "
                         "message and its own previous release, against the Δ₂ its noise is calibrated to"}
    if sensitivity_failed:  # the claim's premise is false: no attack needed to fail it
        return {"zone": int(zone), "bus": int(bus), "beta": beta, "claim": None, "runs": 0, "rounds": settings.rounds,
                "channels": {"release": None, "release_sensitivity": channel}, "verdict": "failed",
                "faults": None if faults is None else faults.describe()}
    moved = net.pd.copy()
    moved[bus] += beta
    releases: list[list[np.ndarray]] = [[], []]
    claim = None
    for h, data in enumerate((net, net.with_loads(moved, net.qd))):
        for i in range(runs):
            problem, _, _ = market_problem(data, zone_of_bus, settings.noise_multiplier, beta, None if seed is None else seed + i,
                                           dc_model(data), None, 1.0, True, None, delta=settings.delta, faults=faults)
            coordinator = SharingCoordinator(problem.zstep, len(problem.specs), settings.rho, settings.tau, settings.rho_schedule,
                                             settings.adapt_rounds, settings.relaxation)
            agents = {s.agent: build(s) for s in problem.specs}
            coordinator.start([agents[a].initialize() for a in sorted(agents)])
            mine = []
            for _ in range(settings.rounds):
                msg = coordinator.broadcast()
                updates = [agents[a].step(msg) for a in sorted(agents)]
                mine.append(np.asarray(updates[zone].released, dtype=float))
                coordinator.receive(updates)
            releases[h].append(np.concatenate(mine))
            claim = agents[zone].ledger.headline()  # the audited zone's ledger (the same on every run)
    level = 1.0 - (1.0 - confidence) / 2  # two tests: the attack and the sensitivity channel's (exact) check
    release = attack(np.array(releases[0]), np.array(releases[1]), delta=float(claim["delta"]), confidence=level)
    eps = float(claim["epsilon"])
    attack_failed = release["epsilon_lower_bound"] > eps * (1.0 + 1e-9) + 1e-12
    return {
        "zone": int(zone), "bus": int(bus), "beta": beta, "claim": {"epsilon": eps, "delta": float(claim["delta"])},
        "runs": runs, "rounds": settings.rounds, "channels": {"release": release, "release_sensitivity": channel},
        "verdict": "failed" if attack_failed else "passed", "faults": None if faults is None else faults.describe(),
    }
