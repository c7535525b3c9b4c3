"""Which application made a run directory, read from its ``config.json`` (every application writes one).

The commands that take a run directory (``run --resume``, ``learn --resume``, ``plot``, ``export``) dispatch on
:func:`run_kind`, so each works on every application's run or says in one line why not.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["RUN_KINDS", "run_kind", "describe"]

#: kind → how a user knows it (for one-line messages) and the command that resumes it. A new application's
#: config.json says ``"application": NAME`` and NAME gets one entry here (docs/architecture.md)
RUN_KINDS = {
    "power_flow": ("a distributed power-flow run (powerdp run)", "powerdp run --resume DIR"),
    "deployment": ("a deployment run (powerdp run --deployment)", "powerdp run --resume DIR"),
    "dc_market": ("a DC market run (powerdp run --model dc)", "powerdp run --resume DIR"),
    "learning": ("a federated-learning run (powerdp learn)", "powerdp learn --resume DIR"),
    "noisy_admm": ("a noisy-admm run (powerdp learn --algorithm noisy-admm)", None),
    "vertical": ("a vertical-learning run (powerdp learn --vertical)", "powerdp learn --resume DIR"),
    "dispatch": ("a multi-period dispatch run (powerdp dispatch)", "powerdp dispatch --resume DIR"),
}
SHARING_PROBLEMS = {"dc-market": "dc_market", "vertical-logreg": "vertical"}


def run_kind(directory: str | Path) -> str | None:
    """The kind of run in ``directory`` (a key of :data:`RUN_KINDS`), or None when it holds no config.json (a sweep,
    another folder). A config.json that is there but damaged is an error naming it, not "not a powerdp run"."""
    from ..errors import ConfigError

    path = Path(directory) / "config.json"
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ConfigError(f"{path} is damaged ({type(exc).__name__}); this run's configuration cannot be read") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path} is damaged (a JSON object is expected); this run's configuration cannot be read")
    if doc.get("application") in RUN_KINDS:  # an application that names itself (a new one: one entry above)
        return str(doc["application"])
    if doc.get("kind") == "sharing":
        return SHARING_PROBLEMS.get(str(doc.get("problem")), "dc_market")
    if doc.get("algorithm") == "noisy-admm":
        return "noisy_admm"
    if "dataset" in doc:
        return "learning"
    if doc.get("deployment") is not None:
        return "deployment"
    return "power_flow"


def describe(kind: str | None) -> str:
    return RUN_KINDS[kind][0] if kind in RUN_KINDS else "not a powerdp run"
