"""Re-account a privacy receipt with dp-accounting's own accountants (``powerdp privacy verify``; docs/privacy.md,
"The privacy receipt").

Independent of powerdp's ledger on purpose: this module reads the receipt's JSON and calls ``dp_accounting`` directly;
it imports nothing of :mod:`powerdp.privacy.accounting`, :mod:`~powerdp.privacy.mechanisms` or
:mod:`~powerdp.privacy.calibration` (an import-linter contract in pyproject.toml holds it to that). What it trusts is the
receipt's description of each release: the noise distribution, its scale on the grid, the sensitivity, the values per
release and the count. From those it derives each release's privacy loss on the grid itself:

* **discrete Laplace** (integer scale t): a neighbouring change moves each of the ``coordinates`` entries it touches by
  at most Δ₁/(c·γ) grid steps, so by at most k = ⌊Δ₁/(cγ)⌋ + 1 after rounding; with the coordinates unknown the
  whole shift is at most Δ₁/γ + m steps in L1. The pure ε of a release is Σ k/t. Its privacy-loss distribution is
  built exactly (the loss is a(|x − k| − |x|), a = 1/t, x two-sided geometric: two atoms and a geometric run between,
  summed per bucket in closed form and rounded up: a pessimistic PLD) — dp-accounting's own discrete-Laplace PLD
  enumerates every integer in the shift, ~2⁴⁰ of them at the product's grid, so it cannot be used.
* **discrete Gaussian** (σ in grid steps): the integer shift is at most K = Δ₂/γ + √m in L2; its privacy profile is the
  continuous Gaussian's of multiplier σ/K up to terms below exp(−2π²σ²) (Canonne, Kamath & Steinke 2020, Thms 7 and
  15; σ ≈ 2⁴⁰ here), so dp-accounting's Gaussian PLD, RDP and analytic accountants apply at that multiplier.
* every release adds its stated tail δ (the Gaussian's cut beyond ≈ 39.6σ) and a privacy-loss slack for the sampler's
  pmf error (2⁻⁴⁰ relative, stated by the receipt).

For each unit (zone, client, agent, party, user) it reports the ledger's ε at the ledger's δ, what each accountant
gives at that δ, whether they agree (within :data:`TOLERANCE` of the accountant the ledger names), and whether the
receipt supports the claim: the smallest ε a valid accountant proves must not exceed the ledger's (by more than
:data:`TOLERANCE`); ``powerdp privacy verify`` exits 3 when it does.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["TOLERANCE", "SCHEMA", "load_receipt", "verify_receipt", "reaccount", "RECEIPT_FILE"]

#: agreement of the ledger with the re-accounted figure (relative)
TOLERANCE = 0.01
#: the receipt's schema name (docs/privacy.md, "The privacy receipt")
SCHEMA = "powerdp-privacy-receipt/1"
#: where a run writes it
RECEIPT_FILE = "privacy_receipt.json"
#: the privacy-loss grid of the PLDs, relative to one release's largest loss (finer than dp-accounting's default at
#: the small per-step ε of a long run, where a fixed 1e-4 would round each step's loss up by a large part)
_RELATIVE_INTERVAL = 1e-3


def load_receipt(path: str | Path) -> dict[str, Any]:
    """A receipt from its file, or from a run directory (``coordinator_view/privacy_receipt.json``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "coordinator_view" / RECEIPT_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no privacy receipt (a private run writes coordinator_view/{RECEIPT_FILE})") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable privacy receipt ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("units"), list):
        raise ConfigError(f"{path}: not a privacy receipt of schema {SCHEMA}")
    return data


# --------------------------------------------------------------------------- one release's privacy loss


def _number(release: dict[str, Any], key: str, where: str, positive: bool = True) -> float:
    value = release.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (positive and value <= 0):
        raise ConfigError(f"{where}: {key} = {value!r} is not a {'positive ' if positive else ''}number")
    return float(value)


def _laplace_shifts(release: dict[str, Any], where: str) -> tuple[float, list[int] | None, float]:
    """(a = 1/t, the integer shift of each moved entry or None when unknown, the pure ε of one release)."""
    t = _number(release, "grid_scale", where)
    gamma = _number(release, "grid", where)
    delta1 = _number(release, "sensitivity", where)
    m = int(_number(release, "entries", where))
    coords = release.get("coordinates")
    a = 1.0 / t
    if coords:
        c = int(coords)
        k = math.floor(delta1 / (c * gamma)) + 1
        return a, [k] * c, a * k * c
    return a, None, a * (delta1 / gamma + m)


def _staircase_pure(release: dict[str, Any], where: str) -> float:
    """The pure ε of one discrete staircase release, from its grid, step and sensitivity: a moved entry shifts by at
    most k = ⌊Δ₁/(m γ)⌋ + 1 grid units, which crosses at most ⌈k/d⌉ levels of steps d, each worth ε/m."""
    gamma = _number(release, "grid", where)
    delta1 = _number(release, "sensitivity", where)
    c = int(_number(release, "coordinates", where))
    d = int(_number(release, "step", where))
    r = int(_number(release, "step_level", where))
    eps = _number(release, "epsilon", where)
    eps_entry = _number(release, "entry_epsilon", where)
    if not 1 <= r <= d or abs(eps_entry * c - eps) > 1e-12 * eps:
        raise ConfigError(f"{where}: an inconsistent staircase release (step {d}, its level {r}, ε {eps} over {c} "
                          f"entries, {eps_entry} each)")
    k = math.floor(delta1 / (c * gamma)) + 1
    return c * math.ceil(k / d) * eps_entry


def _gaussian_multiplier(release: dict[str, Any], where: str) -> float:
    """σ/K in grid steps: the continuous Gaussian whose privacy profile bounds the discrete release's."""
    sigma = _number(release, "grid_scale", where)
    gamma = _number(release, "grid", where)
    delta2 = _number(release, "sensitivity", where)
    m = int(_number(release, "entries", where))
    return sigma / (delta2 / gamma + math.sqrt(m))


def _slack(release: dict[str, Any], pure: float) -> float:
    """The privacy-loss slack of one release for the sampler's pmf error η (relative): twice η per shifted value, η
    growing by one per 9 scales of the shift; generous."""
    eta = float((release.get("tail") or {}).get("pmf_relative_error") or 0.0)
    values = int(release.get("coordinates") or release.get("entries") or 1)
    return 4.0 * eta * values * (1.0 + pure)


def _discrete_laplace_pld(a: float, k: int, interval: float):
    """The exact privacy-loss distribution of the discrete Laplace (pmf ∝ exp(−a|x|)) against its shift by the integer
    k, pessimistically rounded to ``interval``: loss ak on x ≤ 0 (mass 1/(1 + r)), −ak on x ≥ k (mass r^k/(1 + r)),
    a(k − 2x) for 0 < x < k (mass (1 − r)r^x/(1 + r)), r = e^(−a); the run between summed per bucket in closed form."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    r = math.exp(-a)
    norm = 1.0 + r
    top = a * k
    pmf: dict[int, float] = {}

    def add(index: int, mass: float) -> None:
        if mass > 0:
            pmf[index] = pmf.get(index, 0.0) + mass

    # every index one bucket up: the float error of a loss at a bucket's edge can only make the PLD more pessimistic
    add(math.ceil(top / interval) + 1, 1.0 / norm)
    add(math.ceil(-top / interval) + 1, math.exp(-a * k) / norm)
    if k > 1:
        # bucket j holds the losses in ((j − 1)·h, j·h]: x in [ceil((k − j h/a)/2), floor((k − (j − 1) h/a)/2 − tiny)]
        j_lo, j_hi = math.ceil(a * (k - 2 * (k - 1)) / interval), math.ceil(a * (k - 2) / interval)
        for j in range(j_lo, j_hi + 1):
            x_lo = max(1, math.ceil((k - j * interval / a) / 2))
            x_hi = min(k - 1, math.ceil((k - (j - 1) * interval / a) / 2) - 1)
            if x_hi < x_lo:
                continue
            # Σ_{x=x_lo}^{x_hi} (1 − r) r^x / (1 + r) = r^x_lo (1 − r^(x_hi − x_lo + 1)) / (1 + r)
            add(j + 1, math.exp(-a * x_lo) * -math.expm1(-a * (x_hi - x_lo + 1)) / norm)
    return pld.PrivacyLossDistribution.create_from_rounded_probability(pmf, 0.0, interval, pessimistic_estimate=True)


def _release_pld(release: dict[str, Any], where: str):
    """(the pessimistic PLD of one release, its pure ε or None)."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    kind = release.get("mechanism")
    if kind == "discrete_laplace":
        a, shifts, pure = _laplace_shifts(release, where)
        interval = min(1e-4, pure * _RELATIVE_INTERVAL)
        if shifts is None:  # the moved entries unknown: the pure-ε bound only
            return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(pure, 0.0), value_discretization_interval=interval), pure
        one = _discrete_laplace_pld(a, shifts[0], interval)
        out = one
        for k in shifts[1:]:
            out = out.compose(_discrete_laplace_pld(a, k, interval))
        return out, pure
    if kind == "discrete_staircase":  # pure ε only: the PLD of the worst ε-DP mechanism
        pure = _staircase_pure(release, where)
        interval = min(1e-4, pure * _RELATIVE_INTERVAL)
        return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(pure, 0.0), value_discretization_interval=interval), pure
    if kind == "discrete_gaussian":
        z = _gaussian_multiplier(release, where)
        interval = min(1e-4, _RELATIVE_INTERVAL * 6.0 / z)
        return pld.from_gaussian_mechanism(z, sensitivity=1.0, value_discretization_interval=interval, use_connect_dots=True), None
    raise ConfigError(f"{where}: mechanism {kind!r} is not one this verifier knows (discrete_laplace, discrete_gaussian, discrete_staircase)")


# --------------------------------------------------------------------------- a unit's releases


def reaccount(releases: list[dict[str, Any]], delta: float, where: str = "receipt") -> dict[str, Any]:
    """What dp-accounting's accountants give for ``releases`` (the receipt's entries of one unit) at ``delta``:
    ``pure`` (Σ of the pure ε, when every release is pure), ``pld``, ``rdp`` and ``analytic`` (when every release is
    Gaussian), each None where it does not apply; ``tail_delta`` (the δ the samplers' tails take, spent first) and
    ``slack`` (the pmf error's ε, added to each)."""
    import dp_accounting
    from dp_accounting import rdp as rdp_lib

    if not releases:
        return {"pure": 0.0, "pld": 0.0, "rdp": None, "analytic": None, "zcdp": None, "tail_delta": 0.0, "slack": 0.0, "steps": 0}
    tail = sum(int(r.get("count", 0)) * float((r.get("tail") or {}).get("delta") or 0.0) for r in releases)
    budget = delta - tail
    slack = 0.0
    pure_total: float | None = 0.0
    composed = None
    gaussian_only = all(r.get("mechanism") == "discrete_gaussian" for r in releases)
    rdp = rdp_lib.RdpAccountant() if gaussian_only else None
    mu2 = 0.0
    steps = 0
    for i, r in enumerate(releases):
        at = f"{where}, release group {i}"
        n = int(_number(r, "count", at, positive=False))
        if n == 0:
            continue
        steps += n
        one, pure = _release_pld(r, at)
        slack += n * _slack(r, pure or 0.0)
        pure_total = None if (pure is None or pure_total is None) else pure_total + n * pure
        group = one.self_compose(n)
        composed = group if composed is None else composed.compose(group)
        if gaussian_only:
            z = _gaussian_multiplier(r, at)
            rdp.compose(dp_accounting.GaussianDpEvent(z), n)
            mu2 += n / z**2
    out: dict[str, Any] = {"pure": None, "pld": None, "rdp": None, "analytic": None, "zcdp": None, "tail_delta": tail,
                           "slack": slack, "steps": steps}
    if budget < 0:
        out["error"] = f"the samplers' tails alone take δ = {tail:.3g}, more than the ledger's {delta:.3g}"
        return out
    if pure_total is not None:
        out["pure"] = pure_total + slack
    if composed is not None and budget > 0:  # at δ = 0 the PLD's truncated tails say ∞: the pure sum is the figure
        out["pld"] = float(composed.get_epsilon_for_delta(budget)) + slack
    if gaussian_only and budget > 0:
        out["rdp"] = float(rdp.get_epsilon(budget)) + slack
        out["analytic"] = float(dp_accounting.get_epsilon_gaussian(1.0 / math.sqrt(mu2), budget)) + slack
        rho = mu2 / 2.0  # the Gaussians' zCDP, converted by the better of dp-accounting's RDP and Bun–Steinke's ρ + 2√(ρ ln 1/δ)
        zcdp = rdp_lib.RdpAccountant()
        zcdp.compose(dp_accounting.ZCDpEvent(rho))
        out["zcdp"] = min(float(zcdp.get_epsilon(budget)), rho + 2.0 * math.sqrt(rho * math.log(1.0 / budget))) + slack
    return out


#: the ledger's sources (PrivacyLedger.headline) → the accountant here that computes the same quantity
_SAME = {"basic": "pure", "tight:pld": "pld", "tight:analytic": "analytic", "tight:rdp": "rdp", "theorem_4_9": "analytic",
         "zcdp": "zcdp"}


def verify_unit(unit: dict[str, Any], where: str) -> dict[str, Any]:
    """One unit's row: the ledger's claim, the accountants' figures, agreement and support."""
    ledger = unit.get("ledger") or {}
    eps = _number(ledger, "epsilon", f"{where}: ledger", positive=False)
    delta = _number(ledger, "delta", f"{where}: ledger", positive=False)
    acc = reaccount(unit.get("releases") or [], delta, where)
    valid = [v for k, v in acc.items() if k in ("pure", "pld", "rdp", "analytic", "zcdp") and v is not None and math.isfinite(v)]
    best = min(valid) if valid else math.inf
    same = _SAME.get(str(ledger.get("source", "")).split(" ")[0], "pld")
    named = acc.get(same)
    if named is None or not math.isfinite(named):
        named, same = best, "best"
    scale = max(abs(eps), abs(named), 1e-12)
    row = {"unit": unit.get("unit", "zone"), "id": unit.get("id"), "ledger_epsilon": eps, "ledger_delta": delta,
           "ledger_source": ledger.get("source"), "accountant": same, "reaccounted": named, "best": best, **acc,
           "recharged_steps": int(unit.get("recharged_steps") or 0),
           "agrees": abs(eps - named) <= TOLERANCE * scale,
           "supported": "error" not in acc and eps >= best * (1.0 - TOLERANCE) - 1e-12}
    return row


def verify_receipt(receipt: dict[str, Any]) -> list[dict[str, Any]]:
    """Every unit of the receipt, verified (:func:`verify_unit`)."""
    return [verify_unit(u, f"{u.get('unit', 'unit')} {u.get('id')}") for u in receipt["units"]]
