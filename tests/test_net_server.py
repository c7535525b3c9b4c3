"""A zone server's side of the protocol without a network (powerdp.engine.backends.net_server._Session): every
request is checked field by field before an agent sees it, and a refused one is a code, never a value."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.plan import resolve_config
from powerdp.apps.power_flow.zone_data import load_public_network
from powerdp.apps.power_flow.zone_host import zone_builder
from powerdp.cli import main
from powerdp.engine.backends import net_wire as wire
from powerdp.engine.backends.net import public_digest
from powerdp.engine.backends.net_server import _Session
from powerdp.engine.consensus.messages import ConsensusMessage


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    d = tmp_path_factory.mktemp("split") / "dep"
    assert main(["-q", "partition", "case14", "--zones", "2", "--split", str(d)]) == 0
    return d


def _session(split, zones=(0,)):
    said: list[str] = []
    server = SimpleNamespace(zones=list(zones), deployment=str(split), build=zone_builder(split), say=said.append)
    return _Session(server), said


def _setup(split, zones=(0,), **changes):
    cfg = RunConfig(case="deployment", deployment=str(split), evaluate=False, algorithm="objl", rounds=3, **changes)
    settings = resolve_config(cfg, load_public_network(split)).to_dict()
    for key in ("deployment", "certs", "zones_at", "tls_cert", "tls_key", "tls_ca"):
        settings.pop(key)
    return wire.encode("SETUP", session="s1", zones=np.asarray(zones), config=settings, run="", public=public_digest(split))


def _answer(session, data):
    answer, end = session.handle(data)
    return (*wire.decode(answer), end)


def test_a_round_on_the_zone_side(split):
    session, said = _session(split)
    kind, ready, end = _answer(session, _setup(split))
    assert kind == "READY" and ready["zones"].tolist() == [0] and not end
    n = int(ready["shared"][0])
    kind, out, _ = _answer(session, wire.encode("INIT"))
    assert kind == "UPDATES" and out["updates"][0]["released"].shape == (n,) and out["spent"] == [{"zone": 0, "epsilon": 0.0}]
    step = wire.encode("STEP", messages=[ConsensusMessage(round=1, zone=0, w=np.zeros(n), rho=100.0)])
    kind, out, _ = _answer(session, step)
    assert kind == "UPDATES" and out["updates"][0]["round"] == 1 and out["spent"][0]["epsilon"] == pytest.approx(0.1)
    kind, out, _ = _answer(session, wire.encode("REPORT"))
    assert kind == "REPORTS" and out["reports"][0]["ledger"]["zone"] == 0
    assert _answer(session, wire.encode("CLOSE"))[::2] == ("ACK", True)
    assert any("set up" in line for line in said)


@pytest.mark.parametrize("request_of, words", [
    (lambda n: b"garbage!" * 3, "invalid request"),
    (lambda n: wire.encode("STEP", messages=[ConsensusMessage(round=1, zone=1, w=np.zeros(n), rho=100.0)]), "zones [1]"),
    (lambda n: wire.encode("STEP", messages=[ConsensusMessage(round=5, zone=0, w=np.zeros(n), rho=100.0)]), "expected round 1"),
    (lambda n: wire.encode("STEP", messages=[ConsensusMessage(round=1, zone=0, w=np.zeros(n + 1), rho=100.0)]), "values, not"),
    (lambda n: wire.encode("STEP", messages=[ConsensusMessage(round=1, zone=0, w=np.full(n, np.nan), rho=100.0)]), "not finite"),
    (lambda n: wire.encode("STEP", messages=[ConsensusMessage(round=1, zone=0, w=np.zeros(n), rho=-1.0)]), "rho <= 0"),
    (lambda n: wire.encode("SAVE", round=0, run="../../etc"), "not a run id"),
    (lambda n: wire.encode("SAVE", round=3, run="abcdef"), "zones are at round 0"),
])
def test_a_request_the_protocol_does_not_allow_is_refused(split, request_of, words):
    session, said = _session(split)
    n = int(_answer(session, _setup(split))[1]["shared"][0])
    _answer(session, wire.encode("INIT"))
    kind, out, end = _answer(session, request_of(n))
    assert kind == "FAILED" and out["code"] == "invalid-request" and end
    assert words in said[-1]
    assert words in (split / "zone_0.private" / "log.txt").read_text()


def test_setup_checks_the_zones_and_the_public_files(split):
    session, _ = _session(split, zones=(1,))
    kind, out, _ = _answer(session, _setup(split, zones=(0,)))
    assert (kind, out["code"], out["status"]) == ("FAILED", "wrong-zone", 2)
    session, _ = _session(split)
    bad = _setup(split).replace(public_digest(split).encode(), b"0" * 64)
    kind, out, _ = _answer(session, bad)
    assert (kind, out["code"]) == ("FAILED", "public-mismatch")
    session, _ = _session(split)
    kind, out, _ = _answer(session, wire.encode("STEP", messages=[]))
    assert (kind, out["code"]) == ("FAILED", "no-session")


RUN = "abcdef12"


def _rounds(session, n, rounds):
    """INIT and ``rounds`` rounds with the same broadcast each time; the released values of each round."""
    out = {}
    for t in range(1, rounds + 1):
        kind, got, _ = _answer(session, wire.encode("STEP", messages=[ConsensusMessage(round=t, zone=0, w=np.zeros(n), rho=100.0)]))
        assert kind == "UPDATES"
        out[t] = got["updates"][0]["released"]
    return out


def _replay(session, n, t, released):
    return _answer(session, wire.encode("REPLAY", messages=[ConsensusMessage(round=t, zone=0, w=np.zeros(n), rho=100.0)],
                                        released=[{"zone": 0, "values": released}]))


def _ledger(session):
    return _answer(session, wire.encode("REPORT"))[1]["reports"][0]["ledger"]


@pytest.fixture
def journaled(tmp_path):
    """A secret-noise zone that journaled rounds 1 and 2 after its round-0 checkpoint, then lost its session (its
    server restarted): the split, the shared size, the releases it sent."""
    dep = tmp_path / "dep"
    assert main(["-q", "partition", "case14", "--zones", "2", "--split", str(dep)]) == 0
    session, _ = _session(dep)
    n = int(_answer(session, _setup(dep))[1]["shared"][0])
    _answer(session, wire.encode("INIT"))
    assert _answer(session, wire.encode("JOURNAL", run=RUN))[0] == "ACK"
    assert _answer(session, wire.encode("SAVE", round=0, run=RUN))[0] == "ACK"
    sent = _rounds(session, n, 2)
    session.close()
    return dep, n, sent


def test_a_restarted_secret_zone_replays_bit_for_bit_and_charges_nothing(journaled):
    """Resume rule over the network (issue 36): restored from its round-0 checkpoint (its secret stream with it), the
    zone repeats rounds 1 and 2 exactly as it journaled them; its ledger is the journal's, nothing is charged again."""
    dep, n, sent = journaled
    session, _ = _session(dep)
    _answer(session, _setup(dep))
    assert _answer(session, wire.encode("RESTORE", round=0, run=RUN))[0] == "ACK"
    for t in (1, 2):
        assert _replay(session, n, t, sent[t])[0] == "ACK"
    ledger = _ledger(session)
    assert ledger["steps"] == 2 and ledger["resume"] == {"replayed": 2, "diverged": 0, "differing_messages": 0, "recharged_steps": 0}
    # a coordinator asking for a new journal of that run (which would drop what the zone released and was charged for)
    other, said = _session(dep)
    _answer(other, _setup(dep))
    _answer(other, wire.encode("INIT"))
    kind, out, end = _answer(other, wire.encode("JOURNAL", run=RUN))
    assert (kind, out["code"], end) == ("FAILED", "invalid-request", True) and "journaled releases already" in said[-1]
    kind, out, _ = _answer(session, wire.encode("STEP", messages=[ConsensusMessage(round=3, zone=0, w=np.zeros(n), rho=100.0)]))
    assert kind == "UPDATES" and _ledger(session)["steps"] == 3  # a new round: charged


def test_a_restarted_zone_whose_replay_diverges_is_charged_again_and_goes_on(journaled):
    """Its checkpoint lost the stream: the repeats draw other noise. Nothing of them crosses (an acknowledgement); the
    journal covers both rounds, so the zone goes on with them charged again (recharged_steps 2) and says so on its own
    side. A zone without a journal (a run without checkpoints) refuses to go on instead."""
    import json

    dep, n, sent = journaled
    [stem] = (dep / "zone_0.private").rglob("round_0.json")
    state = json.loads(stem.read_text())
    state["rng"] = None
    stem.write_text(json.dumps(state))
    session, said = _session(dep)
    _answer(session, _setup(dep))
    _answer(session, wire.encode("RESTORE", round=0, run=RUN))
    for t in (1, 2):
        kind, out, end = _replay(session, n, t, sent[t])
        assert (kind, out, end) == ("ACK", {}, False)
    ledger = _ledger(session)
    assert ledger["steps"] == 4 and ledger["resume"]["recharged_steps"] == 2
    assert ledger["headline"]["epsilon"] == pytest.approx(0.4)  # 4 steps of 0.1: above 2 rounds, and it says so
    assert "replayed round 2 with other values" in said[-1] and "charged the round again" in said[-1]
    assert "replayed round 1 with other values" in (dep / "zone_0.private" / "log.txt").read_text()

    session, said = _session(dep)  # no journal: the difference would be charged nowhere
    _answer(session, _setup(dep))
    _answer(session, wire.encode("INIT"))
    kind, out, end = _replay(session, n, 1, sent[1])
    assert (kind, out["code"], out["status"], end) == ("FAILED", "replay-differs", 1, True)
    assert "no release journal covers that round" in said[-1]
