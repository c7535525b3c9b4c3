"""A zone's own host in a network deployment (powerdp.apps.power_flow.zone_host): what it refuses of the coordinator's
settings, and the agents it builds from its own files only."""

from __future__ import annotations

import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.plan import resolve_config
from powerdp.apps.power_flow.zone_data import load_public_network
from powerdp.apps.power_flow.zone_host import zone_builder
from powerdp.cli import main
from powerdp.engine.backends.net import public_digest
from powerdp.engine.backends.net_server import ZoneRefusal


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    d = tmp_path_factory.mktemp("split") / "dep"
    assert main(["-q", "partition", "case14", "--zones", "3", "--split", str(d)]) == 0
    return d


def _settings(split, **changes):
    cfg = RunConfig(case="deployment", deployment=str(split), evaluate=False, algorithm="objl", rounds=3, **changes)
    d = resolve_config(cfg, load_public_network(split)).to_dict()
    for key in ("deployment", "certs", "zones_at", "tls_cert", "tls_key", "tls_ca"):
        d.pop(key)
    return d


def test_the_zone_builds_its_own_agents_from_its_own_files(split):
    agents, shared, words = zone_builder(split)(_settings(split), [1])
    assert list(agents) == [1] and shared[1] > 0 and "objl" in words and "secret noise" in words
    assert agents[1].private_inputs["private load"]["path"].endswith("zone_1.private/loads.csv")


def test_the_zone_refuses_what_it_must_not_take(split, tmp_path):
    """Whatever the coordinator sends: a seeded run (unless allowed), an Ipopt profile read from a file of the zone's
    host, an option that makes Ipopt write a file there."""
    profile = tmp_path / "mine.opt"
    profile.write_text("tol 1e-8\n")
    for changes, code, words in (
        ({"seed": 3}, "refused-seeded", "--allow-seeded"),
        ({"ipopt_profile": str(profile)}, "refused-settings", "bundled profiles only"),
        ({"ipopt_options": {"output_file": "/tmp/x"}}, "refused-settings", "write or read files"),
    ):
        with pytest.raises(ZoneRefusal, match=words) as info:
            zone_builder(split)({**_settings(split), **changes}, [0])
        assert info.value.code == code


def test_settings_the_zone_cannot_read_are_refused(split):
    for settings in ({**_settings(split), "rounds": "two"}, {**_settings(split), "evaluate": True}, {**_settings(split), "faults": {}}, []):
        with pytest.raises(ZoneRefusal) as info:
            zone_builder(split)(settings, [0])
        assert info.value.code == "refused-settings"
    assert zone_builder(split, allow_seeded=True)(_settings(split, seed=3), [0])[0]


def test_the_public_digest_covers_the_public_files(split, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(split / "public", copy / "public")
    assert public_digest(copy) == public_digest(split)
    (copy / "public" / "partition.csv").write_text((split / "public" / "partition.csv").read_text().replace(",1\n", ",2\n", 1))
    assert public_digest(copy) != public_digest(split)
