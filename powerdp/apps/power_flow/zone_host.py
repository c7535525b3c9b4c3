"""A zone's own host in a network deployment: its agents, built from the coordinator's settings and its own files.

:func:`zone_builder` is what ``powerdp zone serve`` hands the zone server
(:class:`~powerdp.engine.backends.net_server.ZoneServer`): given the run's settings as the coordinator sends them
(``config.json``'s keys, without the coordinator's paths), it checks them on the zone's side, then builds each of its
zones' agents exactly as every other backend does (:func:`~powerdp.apps.power_flow.agent.hosted_zone_agent`) from the
deployment's public files and the zone's own ``zone_P.private/loads.csv``, and nothing else on this host.

What a zone refuses, whatever the coordinator says:

* a seeded run, unless its operator allows one (``--allow-seeded``): whoever chose the seed can replay the noise;
* a run that evaluates (``evaluate``: the zone's objective and violations would be asked for);
* an Ipopt profile given as a path instead of a bundled name (it would read a file of the zone's host; options
  that write or read files are refused by the settings' own checks, on every host).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...engine.backends.net_server import ZoneRefusal, describe
from ...errors import ConfigError
from .config import RunConfig

__all__ = ["zone_builder"]


def _checked_config(settings: dict[str, Any], deployment: str, allow_seeded: bool) -> RunConfig:
    if not isinstance(settings, dict):
        raise ZoneRefusal("refused-settings", "the run's settings are not a table")
    from .config_file import check_types

    try:
        check_types(settings, "the coordinator's settings")
        config = RunConfig.from_dict({**settings, "deployment": deployment, "backend": "net"}, source="the coordinator's settings")
    except ConfigError as exc:
        raise ZoneRefusal("refused-settings", f"the coordinator's settings are refused: {exc}") from None
    if config.evaluate:
        raise ZoneRefusal("refused-settings", "the run evaluates (evaluate = true): a deployment's zone reports no objective")
    if config.seed is not None and not allow_seeded:
        raise ZoneRefusal("refused-seeded", f"the run is seeded (seed {config.seed}): its noise is known to whoever knows the "
                                            "seed; start the server with --allow-seeded to take part in a seeded experiment")
    for name in ("ipopt_profile", "ipopt_warm_profile"):
        value = str(getattr(config, name))
        if "/" in value or "\\" in value or value.endswith(".opt"):
            raise ZoneRefusal("refused-settings", f"{name} {value!r} names a file; a zone takes bundled profiles only")
    if config.rho is None:
        raise ZoneRefusal("refused-settings", "the settings are not resolved (rho unset)")
    return config


def zone_builder(deployment: str | Path, allow_seeded: bool = False):
    """The ``build(settings, zones)`` of a zone server of ``deployment`` (module docstring)."""
    from ...engine.backends.base import build_agents
    from .plan import resolve_partition, shared_layout
    from .zone_data import load_public_network

    deployment = str(Path(deployment).resolve())

    def build(settings: dict[str, Any], zones: list[int]):
        config = _checked_config(settings, deployment, allow_seeded)
        net = load_public_network(deployment)
        part = resolve_partition(net, config)
        bad = [z for z in zones if not 0 <= z < part.n_zones]
        if bad:
            raise ZoneRefusal("wrong-zone", f"zone {bad[0]} is not a zone of {deployment} ({part.n_zones} zones)")
        _, _, specs = shared_layout(part, config)
        mine = [specs[z] for z in zones]
        agents = build_agents(net, mine, config)  # each reads its own zone_P.private/loads.csv (hosted_zone_agent)
        return agents, {s.zone: len(s.shared_keys) for s in mine}, describe(settings)

    return build
