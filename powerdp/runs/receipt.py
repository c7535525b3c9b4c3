"""The privacy receipt every private run writes: ``coordinator_view/privacy_receipt.json`` (docs/privacy.md, "The privacy
receipt").

One schema for every application. Per unit (a power-flow or dispatch zone, a learning client, a market agent, a
vertical party, noisy-admm's users), the ledger's claim and the list of what it actually released under, each entry
written by the mechanism object that released (``Mechanism.receipt()``, through
:meth:`~powerdp.privacy.accounting.PrivacyLedger.releases`): the noise distribution, its scale on the grid, the norm and
sensitivity, the values per release, the count, the tail's δ and the sampler's pmf error. Everything in it is public
(data-independent: the coordinator holds every ledger report already); ``powerdp privacy verify`` re-accounts it with
dp-accounting, independently of the ledger (:mod:`powerdp.privacy.verify`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..files.atomic import atomic_write_text
from ..files.jsonable import jsonable
from ..privacy.verify import RECEIPT_FILE, SCHEMA
from .views import COORDINATOR_VIEW

__all__ = ["write_receipt", "receipt_unit", "receipt_units", "RECEIPT_FILE"]


def receipt_units(unit: str, reports: dict[int, dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The entries of units ``unit`` ("zone", "client", "agent", "party") from their ledger reports, by index."""
    return [receipt_unit(unit, int(i), reports[i]) for i in sorted(reports, key=int)]


def receipt_unit(unit: str, index: int, report: dict[str, Any] | None, resume: dict[str, Any] | None = None) -> dict[str, Any]:
    """One unit's entry from its ledger's report (:meth:`~powerdp.privacy.accounting.PrivacyLedger.report`; its
    ``resume`` key, when a zone's journal added one, says what a resume replayed)."""
    report = report or {}
    resume = resume if resume is not None else report.get("resume")
    headline = report.get("headline") or {"epsilon": 0.0, "delta": 0.0, "source": "none"}
    return {
        "unit": unit, "id": int(index),
        "ledger": {"epsilon": headline["epsilon"], "delta": headline["delta"], "source": headline["source"],
                   "steps": int(report.get("steps", 0))},
        "releases": list(report.get("releases") or []),
        "recharged_steps": int(report.get("recharged_steps", 0)),
        **({"resume": resume} if resume is not None else {}),
    }


def write_receipt(directory: str | Path, application: str, run: dict[str, Any], relation: dict[str, Any],
                  units: list[dict[str, Any]]) -> Path:
    """Write the receipt into ``directory/coordinator_view/`` (whole or not at all); returns its path. ``run``: the
    public settings that say what was claimed (algorithm, noise source, the claim); ``relation``: the neighbouring
    relation ({"name", "text", ...}); ``units``: :func:`receipt_unit` entries."""
    doc = {"schema": SCHEMA, "application": application, "run": run, "relation": relation, "units": units}
    path = Path(directory) / COORDINATOR_VIEW / RECEIPT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(jsonable(doc), indent=1) + "\n")
    return path
