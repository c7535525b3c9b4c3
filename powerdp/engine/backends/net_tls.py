"""The network backend's identities: a test certificate authority, the certificates it signs, and the zone map.

``powerdp certs make DIR --zones K`` (:func:`make_certs`) writes::

    DIR/ca.crt                       the test CA's certificate (both sides trust it; its key is not kept)
    DIR/coordinator.crt, .key        the coordinator's certificate and key (name "coordinator")
    DIR/zone_P.crt, .key             zone P's server certificate and key (name "zone-P")
    DIR/zones.toml                   where each zone listens and the name its certificate must carry

Every key is written 0600 in a 0700 folder (:mod:`powerdp.files.private`). The CA's own key is thrown away once
the certificates are signed: nobody can sign another certificate for this deployment afterwards (make a new set
instead). With ``--servers S`` the zones are spread over S zone servers (a server hosts several zones: its files
are ``server_S.crt``, ``.key``, name ``server-S``). An operator with a real CA uses its certificates instead: the
names in ``zones.toml`` are what the coordinator checks (docs/deployment.md).

The zone map, ``zones.toml``::

    [coordinator]
    name = "coordinator"             # the name the coordinator's certificate must carry (zones check it)

    [zones.0]
    address = "127.0.0.1:50100"      # where zone 0's server listens
    name = "zone-0"                  # the name (subject alternative name) its certificate must carry

Certificates are ECDSA P-256 with SHA-256, a subject alternative name for the peer's name (the coordinator
checks the zone's, a zone the coordinator's), valid from an hour ago for ``days`` days.

The coordinator's side reads its files into :class:`NetSettings` (:func:`net_settings`), and :func:`probe_tls` says in
words which side refused a TLS connection that gRPC reports only as closed.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import ConfigError
from ..consensus.settings import ConsensusSettings

__all__ = ["ZoneAddress", "ZoneMap", "make_certs", "read_zone_map", "file_stem", "parse_address", "COORDINATOR_NAME",
           "DEFAULT_PORT", "NetSettings", "net_settings", "probe_tls", "read_file"]

COORDINATOR_NAME = "coordinator"
DEFAULT_PORT = 50100
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$")


@dataclass(frozen=True)
class ZoneAddress:
    """Where one zone's server listens and the certificate name it must present."""

    zone: int
    host: str
    port: int
    name: str

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class ZoneMap:
    """A deployment's zone map (``zones.toml``): each zone's address and name, the coordinator's name."""

    zones: dict[int, ZoneAddress]
    coordinator: str = COORDINATOR_NAME
    source: str = "zones.toml"

    def servers(self) -> list[tuple[ZoneAddress, list[int]]]:
        """The zone servers: each distinct (address, name) with the zones it hosts, in zone order."""
        groups: dict[tuple[str, int, str], list[int]] = {}
        for z in sorted(self.zones):
            a = self.zones[z]
            groups.setdefault((a.host, a.port, a.name), []).append(z)
        return [(self.zones[zs[0]], zs) for zs in groups.values()]

    def check_zones(self, n_zones: int) -> None:
        """Every zone 0..n_zones-1 has an address, and no other zone is listed."""
        want = set(range(n_zones))
        missing, extra = sorted(want - set(self.zones)), sorted(set(self.zones) - want)
        if missing:
            raise ConfigError(f"{self.source}: no address for zone {missing[0]} (the deployment has {n_zones} zones)")
        if extra:
            raise ConfigError(f"{self.source}: zone {extra[0]} is not a zone of the deployment (it has {n_zones} zones)")
        by_address: dict[tuple[str, int], str] = {}
        for a in self.zones.values():
            other = by_address.setdefault((a.host, a.port), a.name)
            if other != a.name:
                raise ConfigError(f"{self.source}: {a.address} is given the names {other!r} and {a.name!r}; one server has one name")


def file_stem(name: str) -> str:
    """The file stem of a certificate name: "zone-3" → "zone_3" (``DIR/zone_3.crt``, ``.key``)."""
    return name.replace("-", "_")


def parse_address(text: str, what: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPv6]:PORT`` → (host, port), refused in one line otherwise."""
    text = str(text).strip()
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d+)", text) or re.fullmatch(r"([^:\s]+):(\d+)", text)
    if m is None:
        raise ConfigError(f"{what} {text!r}: expected HOST:PORT (an IPv6 host in brackets: [::1]:50100)")
    port = int(m.group(2))
    if not 0 < port < 65536:
        raise ConfigError(f"{what} {text!r}: the port must lie in 1..65535")
    return m.group(1), port


def _check_name(name: object, where: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}: name {name!r} must be letters, digits, '.' and '-' (at most 63, a letter or digit first)")
    return name


def read_zone_map(path: str | Path) -> ZoneMap:
    """Read ``zones.toml``; every mistake is one line naming the file, the zone and the field."""
    from ...files.text import read_utf8

    path = Path(path)
    try:
        text = read_utf8(path)
    except FileNotFoundError:
        raise ConfigError(f"zone map {path} is missing (write one with powerdp certs make, or give --zones-at FILE)") from None
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not a TOML file ({exc})") from None
    unknown = sorted(set(data) - {"coordinator", "zones"})
    if unknown:
        raise ConfigError(f"{path}: unknown table {unknown[0]!r}; a zone map has [coordinator] and [zones.P] tables")
    coordinator = data.get("coordinator", {})
    if not isinstance(coordinator, dict) or set(coordinator) - {"name"}:
        raise ConfigError(f"{path}: [coordinator] holds one key, name")
    coord_name = _check_name(coordinator.get("name", COORDINATOR_NAME), f"{path}: [coordinator]")
    tables = data.get("zones", {})
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"{path}: no [zones.P] table; each zone needs an address and a name")
    zones = {}
    for key, entry in tables.items():
        where = f"{path}: [zones.{key}]"
        if not key.isdigit():
            raise ConfigError(f"{where}: a zone is a number (0, 1, ...)")
        if not isinstance(entry, dict) or set(entry) != {"address", "name"}:
            raise ConfigError(f"{where}: give exactly address = \"HOST:PORT\" and name = \"...\"")
        host, port = parse_address(entry["address"], f"{where} address")
        zones[int(key)] = ZoneAddress(int(key), host, port, _check_name(entry["name"], where))
    zone_map = ZoneMap(zones, coord_name, str(path))
    return zone_map


def _zone_map_text(addresses: list[ZoneAddress], coordinator: str) -> str:
    lines = [
        "# powerdp zone map: where each zone's server listens, and the name its certificate must carry.",
        "# The coordinator reads it (powerdp run --backend net --certs DIR, or --zones-at FILE); a zone server reads",
        "# its own entry (powerdp zone serve --zone P --certs DIR). docs/deployment.md",
        "",
        "[coordinator]",
        f'name = "{coordinator}"',
    ]
    for a in addresses:
        lines += ["", f"[zones.{a.zone}]", f'address = "{a.address}"', f'name = "{a.name}"']
    return "\n".join(lines) + "\n"


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "powerdp test deployment"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca(days: int, label: str):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    key = _key()
    start = _now() - _dt.timedelta(hours=1)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(label)).issuer_name(_name(label))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(start + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(name: str, ca_key, ca_cert, days: int, hosts: list[str]):
    """A certificate for ``name`` (its subject alternative names: the name, and each host given), signed by the CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = _key()
    alt: list = [x509.DNSName(name)]
    for h in hosts:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            alt.append(x509.DNSName(h))
    start = _now() - _dt.timedelta(hours=1)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name)).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(start + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=True, key_cert_sign=False, crl_sign=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _pem(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def make_certs(directory: str | Path, zones: int, host: str = "127.0.0.1", port: int = DEFAULT_PORT, servers: int | None = None,
               days: int = 30, overwrite: bool = False) -> list[Path]:
    """Write a test CA, the coordinator's and each zone server's certificate and key, and ``zones.toml`` (module
    docstring). ``servers`` (default: one per zone) zone servers listen on ``host`` at ports ``port``, ``port + 1``, …;
    with fewer servers than zones, server s hosts a consecutive block of zones. Returns the files written."""
    from ...files.private import private_dir, write_private

    if zones < 1:
        raise ConfigError(f"--zones {zones}: at least 1")
    servers = zones if servers is None else int(servers)
    if not 1 <= servers <= zones:
        raise ConfigError(f"--servers {servers}: between 1 and the number of zones ({zones})")
    if not 0 < port or port + servers - 1 > 65535:
        raise ConfigError(f"--port {port}: the ports {port}..{port + servers - 1} must lie in 1..65535")
    if days < 1:
        raise ConfigError(f"--days {days}: at least 1")
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise ConfigError(f"{d} is a file, not a folder")
    if d.is_dir() and any(d.iterdir()) and not overwrite:
        raise ConfigError(f"{d} is not empty; certificates are never replaced without --force (give a new folder)")
    private_dir(d)
    ca_key, ca_cert = _ca(days, "powerdp test CA")
    written = [write_private(d / "ca.crt", lambda fh: fh.write(_pem(ca_cert)), binary=True)]

    def leaf(name: str, hosts: list[str]) -> None:
        key, cert = _leaf(name, ca_key, ca_cert, days, hosts)
        stem = file_stem(name)
        written.append(write_private(d / f"{stem}.crt", lambda fh: fh.write(_pem(cert)), binary=True))
        written.append(write_private(d / f"{stem}.key", lambda fh: fh.write(_key_pem(key)), binary=True))

    leaf(COORDINATOR_NAME, [])
    bounds = [round(s * zones / servers) for s in range(servers + 1)]
    addresses = []
    for s in range(servers):
        block = range(bounds[s], bounds[s + 1])
        name = f"zone-{block[0]}" if servers == zones else f"server-{s}"
        leaf(name, [host])
        addresses += [ZoneAddress(z, host, port + s, name) for z in block]
    text = _zone_map_text(addresses, COORDINATOR_NAME)
    written.append(write_private(d / "zones.toml", lambda fh: fh.write(text)))
    return written


#: HTTP/2's client connection preface and an empty SETTINGS frame (RFC 9113 §3.4): a gRPC server answers with its own
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def read_file(path: str | Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} is missing") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class NetSettings:
    """Where the coordinator's side finds its certificate, key, CA and the zone map, and its two timeouts."""

    zone_map: ZoneMap
    cert: bytes
    key: bytes
    ca: bytes
    round_timeout: float
    zone_timeout: float
    cert_path: str = ""
    key_path: str = ""


def probe_tls(host: str, port: int, name: str, settings: NetSettings, timeout: float = 5.0) -> str | None:
    """Why a TLS connection to a zone server fails, in words, or None when it does not (or nobody listens).

    gRPC reports a refused handshake as a closed socket; this one connection with Python's own TLS says which side
    refused: the server's certificate (not signed by the CA, or for another name), this side's (the server sends an
    alert), or a server that does not speak TLS."""
    import socket
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=settings.ca.decode("ascii", "replace"))
    ctx.load_cert_chain(settings.cert_path, settings.key_path)
    # gRPC's server hangs up on a TLS client that does not negotiate HTTP/2 by ALPN, whatever its certificate:
    # without this the probe took every server for one that refused the coordinator's certificate
    ctx.set_alpn_protocols(["h2"])
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        return None
    try:
        with ctx.wrap_socket(raw, server_hostname=name) as tls:
            tls.settimeout(timeout)
            # TLS 1.3: a server that refuses this side's certificate says so (or hangs up) after the handshake; one
            # that accepts it answers HTTP/2's connection preface with its settings
            try:
                tls.sendall(HTTP2_PREFACE)
                first = tls.recv(1)
            except TimeoutError:
                return None
            except ssl.SSLError as exc:
                return f"it refused the coordinator's certificate ({exc.reason or exc})"
            except OSError:
                first = b""
            if not first:
                return "it hung up right after the TLS handshake: it refused the coordinator's certificate (not signed by its CA?)"
            return None
    except ssl.SSLCertVerificationError as exc:
        if "match" in str(exc) or "hostname" in str(exc).lower():
            return f"its certificate is not made out to {name!r} (the name in the zone map)"
        return f"its certificate is not signed by the deployment's CA ({exc.verify_message})"
    except ssl.SSLError as exc:
        reason = exc.reason or str(exc)
        if reason in ("WRONG_VERSION_NUMBER", "UNEXPECTED_EOF_WHILE_READING", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"):
            return f"it does not speak TLS ({reason})"
        return f"it refused the TLS handshake ({reason})"
    except (ConnectionError, TimeoutError, OSError) as exc:
        return f"it closed the connection during the TLS handshake ({type(exc).__name__}): it does not speak TLS, or refused the coordinator's certificate"


def net_settings(config: ConsensusSettings) -> NetSettings:
    """The network settings of a run (``certs``: a folder of ``powerdp certs make``; each file may be given alone)."""
    certs = getattr(config, "certs", None)
    d = Path(certs) if certs else None

    def path(override: str | None, name: str, flag: str) -> Path:
        if override:
            return Path(override)
        if d is None:
            raise ConfigError(f"the net backend needs --certs DIR (or {flag} FILE)")
        return d / name

    zone_map = read_zone_map(path(getattr(config, "zones_at", None), "zones.toml", "--zones-at"))
    stem = file_stem(zone_map.coordinator)
    cert = path(getattr(config, "tls_cert", None), f"{stem}.crt", "--cert")
    key = path(getattr(config, "tls_key", None), f"{stem}.key", "--key")
    return NetSettings(
        zone_map=zone_map,
        cert=read_file(cert, "the coordinator's certificate"),
        key=read_file(key, "the coordinator's key"),
        ca=read_file(path(getattr(config, "tls_ca", None), "ca.crt", "--ca"), "the CA certificate"),
        round_timeout=float(getattr(config, "round_timeout", 600.0)),
        zone_timeout=float(getattr(config, "zone_timeout", 60.0)),
        cert_path=str(cert), key_path=str(key),
    )
