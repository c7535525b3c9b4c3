"""The network backend's wire schema and its certificates, without a network (the default suite: no grpcio needed).

The schema is the network's allow-list: every kind round-trips bit for bit, and anything it does not describe
exactly is refused with a line naming the kind and field (never a value). The certificates of ``powerdp certs
make`` are signed by the test CA, carry the names ``zones.toml`` gives, and every key is 0600.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from powerdp.cli import main
from powerdp.engine.backends import net_wire as wire
from powerdp.engine.backends.net_tls import make_certs, read_zone_map
from powerdp.engine.consensus.messages import ConsensusMessage, ZoneUpdate
from powerdp.errors import ConfigError


def _roundtrip(kind, **fields):
    got, out = wire.decode(wire.encode(kind, **fields))
    assert got == kind
    return out


def test_every_kind_round_trips_bit_for_bit():
    w = np.array([0.1, -2.5e-300, np.pi, 1e300])
    msg = ConsensusMessage(round=7, zone=2, w=w, rho=100.0)
    out = _roundtrip("STEP", messages=[msg])
    (m,) = wire.messages_of(out["messages"])
    assert (m.round, m.zone, m.rho) == (7, 2, 100.0) and m.w.tobytes() == w.tobytes()
    upd = ZoneUpdate(round=7, zone=2, released=-w)
    out = _roundtrip("UPDATES", updates=[upd], spent=[{"zone": 2, "epsilon": 2.1}])
    (u,) = wire.updates_of(out["updates"])
    assert u.released.tobytes() == (-w).tobytes() and out["spent"] == [{"zone": 2, "epsilon": 2.1}]
    out = _roundtrip("SETUP", session="ab12", zones=np.array([0, 3]), config={"rounds": 5, "seed": None}, run="", public="f" * 64)
    assert out["zones"].tolist() == [0, 3] and out["config"] == {"rounds": 5, "seed": None}
    out = _roundtrip("REPORTS", reports=[{"zone": 1, "epsilon": float("inf"), "ledger": {"zone": 1, "basic": {"epsilon": float("inf")}}}])
    assert out["reports"][0]["ledger"]["basic"]["epsilon"] == float("inf")
    out = _roundtrip("FAILED", zone=1, status=1, code="failed", round=3)
    assert out == {"zone": 1, "status": 1, "code": "failed", "round": 3}
    for kind in ("INIT", "REPORT", "CLOSE", "ACK"):
        assert _roundtrip(kind) == {}
    for kind in ("SAVE", "RESTORE", "PRUNE"):
        assert _roundtrip(kind, round=4, run="0a1b2c") == {"round": 4, "run": "0a1b2c"}


def test_the_schema_is_explicit_and_the_only_way_out():
    assert all(name.isupper() for name, _ in wire.SCHEMA.values())
    with pytest.raises(TypeError, match="not the schema's"):
        wire.encode("UPDATES", updates=[], spent=[], noise_magnitude=1.0)  # a field the schema does not declare
    leaky = ZoneUpdate(round=1, zone=0, released=np.ones(2))
    object.__setattr__(leaky, "noise_magnitude", 3.0)  # even an object carrying more: only the declared fields are read
    out = _roundtrip("UPDATES", updates=[leaky], spent=[])
    assert set(out["updates"][0]) == {"round", "zone", "released"}


@pytest.mark.parametrize("mutate, words", [
    (lambda b: b[:-3], "ends inside field"),
    (lambda b: b + b"\0", "bytes follow the last field"),
    (lambda b: b"XXXX" + b[4:], "wrong magic"),
    (lambda b: b[:4] + struct.pack("<H", 99) + b[6:], "schema version 99"),
    (lambda b: b[:6] + struct.pack("<H", 77) + b[8:], "kind 77"),
    (lambda b: b[:2], "shorter than its header"),
])
def test_a_message_the_schema_does_not_describe_is_refused(mutate, words):
    data = wire.encode("UPDATES", updates=[ZoneUpdate(round=1, zone=0, released=np.ones(3))], spent=[{"zone": 0, "epsilon": 0.1}])
    with pytest.raises(wire.WireError, match=words) as info:
        wire.decode(mutate(data))
    assert "1.0" not in str(info.value)  # a field is named, never a value


def test_counts_lengths_and_directions_are_bounded():
    header = wire.encode("SOLUTIONS", run="ab")[:8]
    huge = header + struct.pack("<I", wire.MAX_TEXT + 1) + b"a" * (wire.MAX_TEXT + 1)
    with pytest.raises(wire.WireError, match="more than the 256 allowed"):
        wire.decode(huge)
    bad_text = header + struct.pack("<I", 2) + b"\xff\xfe"
    with pytest.raises(wire.WireError, match="not UTF-8"):
        wire.decode(bad_text)
    answer = wire.encode("ACK")
    with pytest.raises(wire.WireError, match="not one this side accepts"):
        wire.decode(answer, wire.REQUESTS)  # a zone server takes requests only
    bad_json = wire.encode("SETUP", session="a", zones=np.array([0]), config={}, run="", public="x").replace(b"{}", b"{]")
    with pytest.raises(wire.WireError, match="not JSON"):
        wire.decode(bad_json)


def test_failure_codes_say_nothing_of_a_zone():
    """What a zone's failure may say is a fixed text per code: nothing the zone computed can be in it."""
    for code, text in wire.FAILURE_CODES.items():
        assert code.replace("-", "").isalpha() and "{" not in text


def test_certs_make_writes_a_ca_certificates_and_the_zone_map(tmp_path):
    from cryptography import x509

    from powerdp.files.private import private_tree_problems

    d = tmp_path / "certs"
    assert main(["-q", "certs", "make", str(d), "--zones", "3", "--port", "41000"]) == 0
    assert sorted(p.name for p in d.iterdir()) == ["ca.crt", "coordinator.crt", "coordinator.key", "zone_0.crt", "zone_0.key",
                                                  "zone_1.crt", "zone_1.key", "zone_2.crt", "zone_2.key", "zones.toml"]
    assert private_tree_problems(d) == []  # 0700 folder, 0600 files
    ca = x509.load_pem_x509_certificate((d / "ca.crt").read_bytes())
    for stem, name in (("coordinator", "coordinator"), ("zone_1", "zone-1")):
        cert = x509.load_pem_x509_certificate((d / f"{stem}.crt").read_bytes())
        cert.verify_directly_issued_by(ca)
        assert name in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    zone_map = read_zone_map(d / "zones.toml")
    assert [(a.address, a.name) for a in zone_map.zones.values()] == [
        ("127.0.0.1:41000", "zone-0"), ("127.0.0.1:41001", "zone-1"), ("127.0.0.1:41002", "zone-2")]
    assert zone_map.coordinator == "coordinator"
    # certificates are never replaced without --force
    assert main(["-q", "certs", "make", str(d), "--zones", "3"]) == 2


def test_several_zones_per_server(tmp_path):
    make_certs(tmp_path / "c", 16, port=42000, servers=2)
    zone_map = read_zone_map(tmp_path / "c" / "zones.toml")
    servers = zone_map.servers()
    assert [(a.address, a.name, zones) for a, zones in servers] == [
        ("127.0.0.1:42000", "server-0", list(range(8))), ("127.0.0.1:42001", "server-1", list(range(8, 16)))]
    assert (tmp_path / "c" / "server_1.key").is_file()
    zone_map.check_zones(16)
    with pytest.raises(ConfigError, match="no address for zone 16"):
        zone_map.check_zones(17)


@pytest.mark.parametrize("text, words", [
    ("[zones.0]\naddress = \"127.0.0.1\"\nname = \"zone-0\"\n", "expected HOST:PORT"),
    ("[zones.0]\naddress = \"127.0.0.1:70000\"\nname = \"zone-0\"\n", "1..65535"),
    ("[zones.x]\naddress = \"127.0.0.1:1\"\nname = \"zone-0\"\n", "a zone is a number"),
    ("[zones.0]\naddress = \"127.0.0.1:1\"\n", "exactly address"),
    ("[zones.0]\naddress = \"127.0.0.1:1\"\nname = \"zone 0/..\"\n", "letters, digits"),
    ("[zones.0]\naddress = \"127.0.0.1:1\"\nname = \"a\"\n[zones.1]\naddress = \"127.0.0.1:1\"\nname = \"b\"\n", "one server has one name"),
    ("[other]\n", "unknown table"),
    ("zones = [", "not a TOML file"),
])
def test_a_bad_zone_map_is_one_line_naming_the_field(tmp_path, text, words):
    path = tmp_path / "zones.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words):
        read_zone_map(path).check_zones(2 if "zones.1" in text else 1)


def test_without_grpcio_the_error_names_the_extra(monkeypatch):
    import sys

    from powerdp.engine.backends.net import grpc_module

    monkeypatch.setitem(sys.modules, "grpc", None)  # as if the net extra were not installed
    with pytest.raises(ConfigError, match=r'pip install "powerdp\[net\]"'):
        grpc_module()


def test_the_net_backend_needs_a_deployment():
    from powerdp.apps.power_flow.config import RunConfig

    with pytest.raises(ConfigError, match="give deployment"):
        RunConfig(case="case14", backend="net")
    with pytest.raises(ConfigError, match="round_timeout"):
        RunConfig(case="case14", round_timeout=0)
