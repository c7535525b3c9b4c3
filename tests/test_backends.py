"""Backends with a solver-free fake agent: same messages on every backend, agents on their hosts,
checkpoints on the zones' side, the registry. (End-to-end runs with real agents: test_runner.py.)"""

import os

import numpy as np
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.engine.backends import BACKENDS, AgentSpec, backend_class, make_backend
from powerdp.engine.backends.serial import SerialBackend
from powerdp.engine.consensus.coordinator import Coordinator
from powerdp.errors import ConfigError
from powerdp.files.zone_folders import simulation_folders
from powerdp.grid.partition import bundled_partition

FAKE = "tests.fakes:FakeAgent"


@pytest.fixture(scope="module")
def setup(case14):
    part = bundled_partition(case14, 3)
    by_zone = part.shared_by_zone("variables")
    specs = [AgentSpec(z, part.own_buses(z), tuple(by_zone[z]), agent=FAKE) for z in range(part.n_zones)]
    keys = part.shared_keys("variables")
    index = {k: i for i, k in enumerate(keys)}
    maps = [np.array([index[k] for k in by_zone[z]]) for z in range(part.n_zones)]
    return case14, specs, len(keys), maps


def _run(backend, n, maps, rounds=5):
    coord = Coordinator(n, maps, rho=10.0)
    coord.start(backend.initialize())
    for _ in range(rounds):
        coord.receive(backend.step(coord.broadcast()))
    return coord.w.copy(), backend.diagnostics()


def test_registry_and_unknown_backend():
    assert set(BACKENDS) == {"serial", "process", "mpi", "net"}
    assert backend_class("serial") is SerialBackend
    with pytest.raises(ConfigError, match="unknown backend 'cloud'"):
        backend_class("cloud")


def test_serial_and_process_backends_relay_the_same_messages(setup):
    net, specs, n, maps = setup
    cfg = RunConfig(case="case14", seed=7)
    serial = make_backend("serial", net, specs, cfg)
    w_serial, diag_serial = _run(serial, n, maps)
    serial.close()
    process = make_backend("process", net, specs, cfg.replace(workers=2))
    try:
        w_process, diag_process = _run(process, n, maps)
    finally:
        process.close()
    np.testing.assert_array_equal(w_serial, w_process)
    assert [d.objective for d in diag_serial] == [d.objective for d in diag_process]
    # the agents lived on the workers, not here
    assert all(d.privacy["pid"] != os.getpid() for d in diag_process)
    assert all(d.privacy["pid"] == os.getpid() for d in diag_serial)


def test_hosts_see_only_their_zones_loads(setup):
    net, specs, n, maps = setup
    process = make_backend("process", net, specs, RunConfig(case="case14", workers=3))
    try:
        process.initialize()
        diag = process.diagnostics()
    finally:
        process.close()
    # a worker receives its zones' loads only (private_view); the serial host holds the whole network
    for d, spec in zip(diag, specs):
        assert d.privacy["seen_load"] == pytest.approx(net.pd[spec.own_buses].sum())
    serial = make_backend("serial", net, specs, RunConfig(case="case14"))
    assert all(d.privacy["seen_load"] == pytest.approx(net.pd.sum()) for d in serial.diagnostics())


def test_zone_checkpoints_resume_bit_for_bit(setup, tmp_path):
    net, specs, n, maps = setup
    cfg = RunConfig(case="case14", seed=3)
    a = make_backend("serial", net, specs, cfg)
    coord = Coordinator(n, maps, rho=10.0)
    coord.start(a.initialize())
    for _ in range(3):
        coord.receive(a.step(coord.broadcast()))
    folders = simulation_folders(tmp_path)
    a.save_checkpoint(folders)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("zones.private/zone_*/checkpoint/round_3.npz")) == [
        f"zones.private/zone_{z}/checkpoint/round_3.npz" for z in range(3)
    ]
    msgs = coord.broadcast()
    expected = [u.released for u in a.step(msgs)]
    b = make_backend("process", net, specs, cfg.replace(workers=2))
    try:
        b.initialize()
        b.load_checkpoint(folders, 3)
        got = [u.released for u in b.step(msgs)]
    finally:
        b.close()
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(e, g)


class _SlowComm:
    """A communicator whose one awaited message arrives ``after`` seconds from now; counts the probes."""

    def __init__(self, after: float):
        import time

        self.arrives = time.monotonic() + after
        self.probes = 0

    def iprobe(self, source=None, tag=None, status=None):
        import time

        self.probes += 1
        return time.monotonic() >= self.arrives

    def recv(self, source=None, tag=None):
        return "message"

    def isend(self, obj, dest=None, tag=None):
        class Done:
            def Test(self):
                return True

        return Done()


def test_mpi_waits_sleep_in_proportion_to_the_wait_instead_of_spinning(monkeypatch):
    """A rank waiting 1 s for a message probes a few dozen times (not every 2 ms) and picks it up promptly."""
    import time

    from powerdp.engine.backends import mpi

    monkeypatch.setattr(mpi.Liveness, "drain", lambda self: None)
    comm = _SlowComm(after=1.0)
    live = mpi.Liveness(comm, peers=[1], timeout=60.0)
    try:
        assert live.recv(1) == "message"
        late = time.monotonic() - comm.arrives
    finally:
        live.stop()
    assert comm.probes < 150  # spinning at ≤ 2 ms a probe took ≥ 470
    assert late < 0.05 + 0.25  # at most WAIT_MAX_S late (plus a loaded machine's scheduling)
    for waited in (0.0, 0.01, 0.1, 1.0, 100.0):
        delay = mpi.wait_delay(1.0, waited)
        assert mpi.WAIT_MIN_S <= delay <= mpi.WAIT_MAX_S and delay <= max(mpi.WAIT_SHARE * waited, mpi.WAIT_MIN_S)
