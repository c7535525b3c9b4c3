"""The protocol's messages are an allow-list: every field of every message type is checked against it."""

import dataclasses
import inspect

import numpy as np
import pytest

import powerdp.engine.consensus.messages as messages
from powerdp.engine.consensus.messages import MESSAGE_FIELDS, ConsensusMessage, SolverStats, ZoneUpdate, check_message

#: what each field may carry, and why it is safe to cross (docs/privacy.md, "What crosses")
ALLOW_LIST = {
    ConsensusMessage: {"round": "public counter", "zone": "public zone id", "w": "the coordinator's own broadcast",
                       "rho": "public penalty",
                       "lam": "the coordinator's own duals for this zone, computed from w and the zone's releases"},
    ZoneUpdate: {"round": "public counter", "zone": "public zone id", "released": "the DP release B_p z_p"},
}


def _message_types():
    """Every dataclass the messages module defines as a message (everything but the zone-private SolverStats)."""
    return [obj for _, obj in inspect.getmembers(messages, inspect.isclass)
            if dataclasses.is_dataclass(obj) and obj.__module__ == messages.__name__ and obj is not SolverStats]


def test_every_field_of_every_message_type_is_on_the_allow_list():
    types = _message_types()
    assert set(types) == set(ALLOW_LIST) == set(MESSAGE_FIELDS)
    for t in types:
        fields = [f.name for f in dataclasses.fields(t)]
        not_allowed = [f for f in fields if f not in ALLOW_LIST[t]]
        assert not not_allowed, f"{t.__name__} carries {not_allowed}, which are not on the allow-list"
        assert tuple(fields) == MESSAGE_FIELDS[t]


def test_no_noise_or_solver_statistics_in_a_zone_update():
    names = {f.name for f in dataclasses.fields(ZoneUpdate)}
    assert not names & {"stats", "noise_magnitude", "iterations", "solver_s", "statuses", "wall_s"}


def test_check_message_refuses_extra_fields_and_foreign_types():
    check_message(ZoneUpdate(1, 0, np.zeros(2)))
    check_message(ConsensusMessage(1, 0, np.zeros(2), 1.0))
    from powerdp.apps.power_flow.zone_terms import LeakyZoneUpdate as _LeakyZoneUpdate

    with pytest.raises(ValueError, match="noise_magnitude"):
        check_message(_LeakyZoneUpdate(1, 0, np.zeros(2), 3.0))
    with pytest.raises(ValueError, match="not a protocol message"):
        check_message(SolverStats(1, 1, 0.0, 0.0, ("ok",), 1.0))


def test_agents_send_only_allowed_messages():
    """A real run: every update the coordinator receives passes the allow-list; with the test-only leak it does not."""
    from powerdp.apps.power_flow.config import RunConfig
    from powerdp.apps.power_flow.runner import run_distributed
    from powerdp.privacy.faults import InjectedFaults

    got = []
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", epsilon=1.0, rounds=2, checkpoint_every=0)
    run_distributed(cfg, reference=False, observe=got.extend)
    assert len(got) == 2 * 3
    for u in got:
        check_message(u)
    leaky = []
    run_distributed(cfg.replace(faults=InjectedFaults(leak="noise_magnitude")), reference=False, observe=leaky.extend)
    with pytest.raises(ValueError, match="outside the allow-list"):
        check_message(leaky[-1])


def test_sharing_messages_carry_only_the_release_and_public_values():
    """ADMM sharing (docs/sharing.md): an agent's Contribution is its release and public counters; what its
    local step cost (iterations, time: data-dependent) stays with the agent, and the broadcast is public."""
    from powerdp.engine.sharing.coordinator import Contribution, SharingMessage

    assert [f.name for f in dataclasses.fields(Contribution)] == ["round", "agent", "released"]
    assert {f.name for f in dataclasses.fields(SharingMessage)} == {
        "round", "residual", "dual", "rho", "tau", "active", "relaxation"}  # the coordinator's own quantities


def test_a_market_run_sends_only_contributions(tmp_path):
    from powerdp.apps.market.dc_market import run_market
    from powerdp.engine.sharing.coordinator import Contribution
    from powerdp.grid.loading import load_case
    from powerdp.grid.partition import partition
    from powerdp.runs.sharing_run import SharingSettings

    net = load_case("case14")
    got = []
    run_market(net, partition(net, zones=2).zone_of_bus, SharingSettings(rounds=3), observe=got.extend)
    assert got and all(type(u) is Contribution for u in got)
    assert all(set(vars(u)) == {"round", "agent", "released"} for u in got)
