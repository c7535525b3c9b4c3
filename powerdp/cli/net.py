"""``powerdp certs make`` and ``powerdp zone serve``: the two sides of a deployment over the network
(docs/deployment.md), and the ``run --backend net`` flags."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from ..errors import ConfigError
from .args import integer, real

__all__ = ["add_certs_parser", "add_zone_parser", "add_net_run_flags", "NET_RUN_FIELDS", "cmd_certs", "cmd_zone", "zone_list"]

#: run flag → RunConfig field (``powerdp run --backend net``); none of them changes a run's results
NET_RUN_FIELDS = {"certs": "certs", "zones_at": "zones_at", "cert": "tls_cert", "key": "tls_key", "ca": "tls_ca",
                  "round_timeout": "round_timeout", "zone_timeout": "zone_timeout"}

CERTS_DESCRIPTION = textwrap.dedent(
    """\
    Write a test certificate authority and the certificates of a deployment over the
    network into DIR (a new or empty folder, 0700):

      DIR/ca.crt                   the CA's certificate (its key is not kept: nobody can sign more)
      DIR/coordinator.crt, .key    the coordinator's (name "coordinator")
      DIR/zone_P.crt, .key         zone P's server (name "zone-P"); with --servers S < K, server s
                                   hosts a block of zones: DIR/server_S.crt, .key (name "server-S")
      DIR/zones.toml               each zone's address (--host, ports --port, --port+1, ...) and the
                                   name its certificate must carry

    Every file is 0600. Each party gets ca.crt, zones.toml and its own .crt and .key only.
    An operator with a real CA uses its certificates instead (docs/deployment.md).
    """
)

ZONE_DESCRIPTION = textwrap.dedent(
    """\
    Serve zone P of a split case (powerdp partition --split) to the coordinator of a
    deployment over the network: powerdp run --deployment DEP --backend net --certs DIR.

    The server listens at the zone's address in zones.toml (or --listen), with mutual TLS:
    it accepts only a peer whose certificate is signed by the CA and names the coordinator,
    and presents the zone's own certificate. It reads only DEP/public and its own zones'
    DEP/zone_P.private, and keeps everything of its zones there: checkpoints, solution,
    statistics and its log (DEP/zone_P.private/runs/RUN/, log.txt; 0700/0600). Only the
    released shared values, the ledger's privacy spend, and on failure a code cross.

    One run at a time; the server keeps serving runs until Ctrl-C or SIGTERM (--once: until
    the first run closes). A server restarted during a run rejoins it: the coordinator waits
    for it (--zone-timeout), and its zones resume from their own checkpoint. A seeded run is
    refused unless --allow-seeded (the seed's holder can replay the noise).

    exit status: 0 (--once: the run closed), 2 bad input (files, address in use), 130 Ctrl-C.
    """
)


def zone_list(text: str) -> list[int]:
    """``P``, ``P,Q`` or ``A-B`` (and combinations) → sorted zone numbers."""
    zones: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        try:
            if "-" in part:
                a, b = (int(x) for x in part.split("-", 1))
                if a > b or a < 0:
                    raise ValueError
                zones.update(range(a, b + 1))
            else:
                z = int(part)
                if z < 0:
                    raise ValueError
                zones.add(z)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a zone list (P, P,Q or A-B)") from None
    return sorted(zones)


def add_certs_parser(sub) -> None:
    p = sub.add_parser("certs", help="certificates of a deployment over the network", description=CERTS_DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="certs_action", metavar="ACTION")
    actions.required = True
    m = actions.add_parser("make", help="write a test CA, certificates and zones.toml", description=CERTS_DESCRIPTION,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("directory", metavar="DIR", type=Path, help="the folder to write (new or empty)")
    m.add_argument("--zones", type=integer(1), required=True, metavar="K", help="number of zones of the deployment")
    m.add_argument("--host", default="127.0.0.1", help="the zone servers' host in zones.toml and their certificates (default 127.0.0.1)")
    m.add_argument("--port", type=integer(1), default=50100, metavar="P", help="the first server's port; the next ones follow (default 50100)")
    m.add_argument("--servers", type=integer(1), metavar="S", help="zone servers (default: one per zone); server s hosts a block of zones")
    m.add_argument("--days", type=integer(1), default=30, help="how long the certificates are valid (default 30)")
    m.add_argument("--force", action="store_true", help="write into a folder that is not empty")
    p.set_defaults(func=cmd_certs)


def cmd_certs(args: argparse.Namespace) -> int:
    from ..engine.backends.net_tls import make_certs

    written = make_certs(args.directory, args.zones, host=args.host, port=args.port, servers=args.servers, days=args.days,
                         overwrite=args.force)
    if not getattr(args, "quiet", False):
        print(f"wrote {len(written)} files to {args.directory} (keys 0600): give each party ca.crt, zones.toml and its own "
              "certificate and key only")
    return 0


def add_zone_parser(sub) -> None:
    p = sub.add_parser("zone", help="serve a deployment's zone over the network", description=ZONE_DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="zone_action", metavar="ACTION")
    actions.required = True
    s = actions.add_parser("serve", help="serve zone P to the coordinator (mutual TLS)", description=ZONE_DESCRIPTION,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--deployment", metavar="DEP", type=Path, required=True, help="the split case (its public folder and this zone's own)")
    s.add_argument("--zone", metavar="P", type=zone_list, action="append", required=True,
                   help="the zone(s) this server hosts: P, P,Q or A-B (repeatable); they share one address in zones.toml")
    s.add_argument("--certs", metavar="DIR", type=Path, help="the folder with ca.crt, zones.toml and this server's certificate and key")
    s.add_argument("--listen", metavar="HOST:PORT", help="listen here instead of the zone's address in zones.toml")
    s.add_argument("--cert", metavar="FILE", type=Path, help="this server's certificate (default DIR/zone_P.crt)")
    s.add_argument("--key", metavar="FILE", type=Path, help="this server's key (default DIR/zone_P.key)")
    s.add_argument("--ca", metavar="FILE", type=Path, help="the CA certificate (default DIR/ca.crt)")
    s.add_argument("--zones-at", metavar="FILE", type=Path, help="the zone map (default DIR/zones.toml)")
    s.add_argument("--allow-seeded", action="store_true",
                   help="take part in seeded runs (reproducible experiments: whoever knows the seed can replay the noise)")
    s.add_argument("--once", action="store_true", help="stop when the first run closes")
    p.set_defaults(func=cmd_zone)


def cmd_zone(args: argparse.Namespace) -> int:
    from ..apps.power_flow.zone_host import zone_builder
    from ..engine.backends.net_server import ZoneServer
    from ..engine.backends.net_tls import file_stem, parse_address, read_file, read_zone_map

    zones = sorted({z for group in args.zone for z in group})
    d = args.certs

    def path(given: Path | None, name: str, flag: str) -> Path:
        if given is not None:
            return given
        if d is None:
            raise ConfigError(f"give --certs DIR (or {flag} FILE)")
        return d / name

    zone_map = read_zone_map(path(args.zones_at, "zones.toml", "--zones-at"))
    entries = []
    for z in zones:
        if z not in zone_map.zones:
            raise ConfigError(f"{zone_map.source}: no address for zone {z}")
        entries.append(zone_map.zones[z])
    if len({(e.host, e.port, e.name) for e in entries}) != 1:
        raise ConfigError(f"{zone_map.source}: zones {zones} have different addresses or names; one server serves zones of one address")
    host, port = parse_address(args.listen, "--listen") if args.listen else (entries[0].host, entries[0].port)
    stem = file_stem(entries[0].name)
    dep = args.deployment
    if not (dep / "public").is_dir():
        raise ConfigError(f"--deployment {dep} is not a split case (no public folder; powerdp partition --split)")
    missing = [z for z in zones if not (dep / f"zone_{z}.private").is_dir()]
    if missing:
        raise ConfigError(f"--deployment {dep} holds no folder of zone {missing[0]} (zone_{missing[0]}.private) on this host")
    server = ZoneServer(
        zones, host, port,
        cert=read_file(path(args.cert, f"{stem}.crt", "--cert"), "the zone server's certificate"),
        key=read_file(path(args.key, f"{stem}.key", "--key"), "the zone server's key"),
        ca=read_file(path(args.ca, "ca.crt", "--ca"), "the CA certificate"),
        coordinator=zone_map.coordinator, deployment=dep.resolve(), build=zone_builder(dep, args.allow_seeded), once=args.once,
    )
    server.start()
    try:
        server.wait()
    finally:
        server.stop()
    return 0


def add_net_run_flags(p: argparse.ArgumentParser) -> None:
    """``powerdp run``'s flags of the net backend."""
    g = p.add_argument_group("net backend (--backend net: zones on servers of their own; docs/deployment.md)")
    g.add_argument("--certs", metavar="DIR", type=Path, help="the coordinator's certificates: DIR/ca.crt, coordinator.crt, "
                   "coordinator.key and zones.toml (powerdp certs make)")
    g.add_argument("--zones-at", metavar="FILE", type=Path, help="the zone map (default DIR/zones.toml)")
    g.add_argument("--cert", metavar="FILE", type=Path, help="the coordinator's certificate (default DIR/coordinator.crt)")
    g.add_argument("--key", metavar="FILE", type=Path, help="the coordinator's key (default DIR/coordinator.key)")
    g.add_argument("--ca", metavar="FILE", type=Path, help="the CA certificate (default DIR/ca.crt)")
    g.add_argument("--round-timeout", type=real(0, lo_open=True), default=600.0, metavar="SECONDS",
                   help="stop the run (resumable) when a zone takes longer to answer a round or a request (default 600)")
    g.add_argument("--zone-timeout", type=real(0, lo_open=True), default=60.0, metavar="SECONDS",
                   help="wait this long for a zone server that is not reachable, at the start or after it dropped, "
                   "before the run stops (resumable) (default 60)")


def net_run_values(args: argparse.Namespace, dest: str):
    """The RunConfig value of one net flag (paths made absolute: a resumed run may start from elsewhere)."""
    value = getattr(args, dest)
    if isinstance(value, Path):
        return str(value.resolve())
    return value
