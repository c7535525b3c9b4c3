"""The MPI backend: `mpiexec -n 4` on case14 gives the serial history bit for bit.

Needs the mpi extra (`pip install -e ".[mpi]"`: mpi4py and the mpich wheel); CI installs it and
runs `pytest -m mpi`. Identical floating-point results are expected, not just close ones: every zone
does the same arithmetic on the same inputs wherever it runs, and the coordinator's sums run in
the same order.
"""

import subprocess
import sys
import time

import pandas as pd
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.result import read_history
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.studies.file_audit import compiled_code_cache

from .mpi_jobs import mpiexec, run_job

pytestmark = pytest.mark.mpi


_mpiexec = mpiexec


@pytest.mark.parametrize("algorithm, solver", [("objg", "ipopt"), ("objt", "ipopt"), ("objl", "clarabel"), ("objl", "active-set")])
def test_mpi_history_equals_serial(tmp_path, algorithm, solver):
    exe = _mpiexec()
    args = ["case14", "--zones", "3", "--algorithm", algorithm, "--epsilon", "0.3", "--rounds", "6", "--local-updates", "2", "--seed", "5", "--no-reference"]
    args += ["--local-solver", solver]
    run_job([exe, "-n", "4", sys.executable, "-m", "powerdp", "run", *args, "--backend", "mpi", "--out", str(tmp_path / "mpi")],
            out=tmp_path / "mpi")
    mpi = read_history(tmp_path / "mpi")
    cfg = RunConfig(case="case14", zones=3, algorithm=algorithm, epsilon=0.3, rounds=6, local_updates=2, seed=5, local_solver=solver)
    serial = run_distributed(cfg, reference=False).history
    cols = ["objective", "feasibility", "dual_residual", "noise_magnitude", "max_violation", "epsilon_spent"]
    pd.testing.assert_frame_equal(mpi[cols], serial[cols], check_exact=True)
    assert '"backend": "mpi"' in (tmp_path / "mpi" / "coordinator_view" / "summary.json").read_text()


def test_mpi_backend_needs_two_ranks():
    pytest.importorskip("mpi4py")
    from powerdp.errors import ConfigError

    with pytest.raises(ConfigError, match="at least 2 ranks"):
        run_distributed(RunConfig(case="case14", rounds=1, backend="mpi"), reference=False)


# A rank that dies without a word in round 3 (os._exit, as a crash or a lost node would).
DYING_RANK = """
import os, sys
from mpi4py import MPI
from powerdp.apps.power_flow import agent
from powerdp.cli import main

real = agent.ZoneAgent.step

def dying(self, msg):
    if msg.round == 3:
        os._exit(9)
    return real(self, msg)

if MPI.COMM_WORLD.Get_rank() == 2:
    agent.ZoneAgent.step = dying
sys.exit(main(sys.argv[1:]))
"""


def test_lost_rank_is_named_and_the_run_resumes(tmp_path):
    exe = _mpiexec()
    script = tmp_path / "dying_rank.py"
    script.write_text(DYING_RANK)
    out = tmp_path / "run"
    args = ["case14", "--zones", "3", "--algorithm", "objl", "--epsilon", "0.3", "--rounds", "6", "--seed", "2", "--no-reference"]
    proc = subprocess.run(
        [exe, "-disable-auto-cleanup", "-n", "3", sys.executable, str(script), "--quiet", "run", *args,
         "--backend", "mpi", "--checkpoint-every", "1", "--rank-timeout", "3", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    failure = (out / "failure.txt").read_text()  # rank 0's own record of the failure, on disk
    assert "round 3" in failure and "MPI rank 2 (zones [" in failure and "no heartbeat" in failure, failure
    # rank 0's one-line error, as mpiexec forwards it; hydra now and then drops the output of a job one of whose
    # ranks died (stdout and stderr both empty, about one run in ten here), so it is checked when it arrived
    if proc.stderr.strip():
        assert "round 3" in proc.stderr and "MPI rank 2 (zones [" in proc.stderr and "no heartbeat" in proc.stderr, proc.stderr[-2000:]
        assert "history and last checkpoint kept in" in proc.stderr
    assert len(read_history(out)) == 2
    assert sorted(p.parent.parent.name for p in (out / "zones.private").glob("zone_*/checkpoint/round_2.npz")) == [
        f"zone_{z}" for z in range(3)]

    run_job([exe, "-n", "3", sys.executable, "-m", "powerdp", "--quiet", "run", "--resume", str(out)], timeout=300)
    history = read_history(out)
    serial = run_distributed(RunConfig(case="case14", zones=3, algorithm="objl", epsilon=0.3, rounds=6, seed=2), reference=False).history
    cols = ["objective", "feasibility", "dual_residual", "noise_magnitude"]
    pd.testing.assert_frame_equal(history[cols], serial[cols], check_exact=True)


def test_setup_error_on_rank_zero_releases_the_agent_ranks(tmp_path):
    exe = _mpiexec()
    bad = tmp_path / "zones.csv"
    bad.write_text("bus,zone\n" + "".join(f"{b},{b % 2}\n" for b in range(1, 14)) + "999,1\n")
    t0 = time.monotonic()
    proc = subprocess.run(
        [exe, "-n", "3", sys.executable, "-m", "powerdp", "--quiet", "run", "case14", "--partition", str(bad),
         "--algorithm", "objl", "--rounds", "2", "--backend", "mpi", "--no-reference"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "999" in proc.stderr, proc.stderr[-2000:]
    # the agent ranks are told at once, not left to notice rank 0's silence after --rank-timeout (60 s)
    assert time.monotonic() - t0 < 45


# Every rank records which load files it opens (powerdp.apps.power_flow.zone_data), then runs the deployment.
DEPLOYMENT_RANK = """
import json, sys
import numpy as np
from mpi4py import MPI
from powerdp.apps.power_flow import zone_data
from powerdp.cli import main

rank = MPI.COMM_WORLD.Get_rank()
seen = {"public": 0, "zones": [], "public_loads_nan": None}
real_public, real_zone = zone_data.load_public_network, zone_data.zone_network

def public(directory):
    net = real_public(directory)
    seen["public"] += 1
    seen["public_loads_nan"] = bool(np.isnan(net.pd).all() and np.isnan(net.qd).all())
    return net

def zone(directory, z, *rest):
    seen["zones"].append(int(z))
    return real_zone(directory, z, *rest)

zone_data.load_public_network, zone_data.zone_network = public, zone
status = main(sys.argv[2:])
with open(f"{sys.argv[1]}/rank_{rank}.json", "w") as fh:
    json.dump(seen, fh)
sys.exit(status)
"""


def test_deployment_rank_zero_has_no_loads_and_the_run_equals_the_simulation(tmp_path):
    """powerdp partition --split: rank 0 reads only the public network (its loads are NaN), each zone's rank only its
    own zone's file, and the run is bit for bit the seeded simulation on the whole case."""
    import json

    from powerdp.cli import main

    exe = _mpiexec()
    split = tmp_path / "split"
    assert main(["-q", "partition", "case14", "--zones", "2", "--split", str(split)]) == 0
    script = tmp_path / "deployment_rank.py"
    script.write_text(DEPLOYMENT_RANK)
    out = tmp_path / "deployed"
    run_job([exe, "-n", "3", sys.executable, str(script), str(tmp_path), "--quiet", "run", "--deployment", str(split),
             "--no-evaluation", "--algorithm", "objl", "--epsilon", "0.3", "--rounds", "5", "--seed", "4", "--backend", "mpi",
             "--out", str(out)], out=out, timeout=300)
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(3)]
    assert ranks[0]["public"] >= 1 and ranks[0]["public_loads_nan"] is True and ranks[0]["zones"] == []
    assert sorted(ranks[1]["zones"] + ranks[2]["zones"]) == [0, 1]
    assert len(ranks[1]["zones"]) == len(ranks[2]["zones"]) == 1  # each zone rank read one zone's file: its own
    sim = run_distributed(RunConfig(case="case14", zones=2, algorithm="objl", epsilon=0.3, rounds=5, seed=4, evaluate=False),
                          out=tmp_path / "simulated", reference=False)
    assert sim.summary["noise_source"] == "seeded"
    for name in ("history.csv", "consensus.csv"):
        got = pd.read_csv(out / "coordinator_view" / name, float_precision="round_trip")
        want = pd.read_csv(tmp_path / "simulated" / "coordinator_view" / name, float_precision="round_trip")
        cols = [c for c in got.columns if c != "wall_s"]
        pd.testing.assert_frame_equal(got[cols], want[cols], check_exact=True)


# Every rank traces its own file operations (powerdp.studies.file_audit) while it runs the deployment.
TRACED_RANK = """
import sys
from mpi4py import MPI
from powerdp.cli import main
from powerdp.studies.file_audit import trace_file_writes

rank = MPI.COMM_WORLD.Get_rank()
with trace_file_writes(f"{sys.argv[1]}/trace_{rank}.log") as trace:
    status = main(sys.argv[2:])
sys.exit(status)
"""

#: every file the coordinator (rank 0) writes under its --out in a deployment; nothing else may be there
COORDINATOR_FILES = {
    "config.json", "inputs.json", "partition.csv", "coordinator_view/history.csv", "coordinator_view/consensus.csv",
    "coordinator_view/summary.json", "coordinator_view/privacy_receipt.json", "simulation_evaluation/history.csv",
    "simulation_evaluation/summary.json", "checkpoint/state.json", "checkpoint/state.npz", "checkpoint/evaluation.json",
    "checkpoint/evaluation.npz",
}


def _tree(root):
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_deployment_zone_ranks_write_nothing_under_out_and_resume_bit_identically(tmp_path):
    """mpiexec -n 3, a deployment (issue 26): no file under the coordinator's --out written by a zone rank (each
    rank's file operations traced, the files listed before and after, and their content searched for the zones'
    values); every zone-private folder 0700 and file 0600, under a permissive umask; the run resumes under MPI, and
    the seeded deployment equals the seeded simulation bit for bit."""
    import os

    import numpy as np

    from powerdp.cli import main
    from powerdp.files.private import private_tree_problems

    exe = _mpiexec()
    split = tmp_path / "split"
    old_umask = os.umask(0)
    try:
        assert main(["-q", "partition", "case14", "--zones", "2", "--split", str(split)]) == 0
        script = tmp_path / "traced_rank.py"
        script.write_text(TRACED_RANK)
        out = tmp_path / "deployed"
        before = _tree(tmp_path)
        common = ["--no-evaluation", "--algorithm", "objl", "--epsilon", "0.3", "--seed", "4", "--backend", "mpi",
                  "--checkpoint-every", "1"]
        run_job([exe, "-n", "3", sys.executable, str(script), str(tmp_path), "--quiet", "run", "--deployment", str(split),
                 *common, "--rounds", "3", "--out", str(out)], out=out, timeout=300)
        run_job([exe, "-n", "3", sys.executable, str(script), str(tmp_path), "--quiet", "run", "--resume", str(out),
                 "--rounds", "5"], timeout=300)  # the traces of the resumed run
    finally:
        os.umask(old_umask)
    after = _tree(tmp_path)
    new_or_changed = {f for f in after if before.get(f) != after[f]}
    # listing: under --out only the coordinator's files, nothing of a zone
    assert {f.removeprefix("deployed/") for f in new_or_changed if f.startswith("deployed/")} <= COORDINATOR_FILES
    # the trace: what each zone rank wrote lies in its own zone_P.private, and nothing under --out
    for r in (1, 2):
        writes = {line.split("\t")[3] for line in (tmp_path / f"trace_{r}.log").read_text().splitlines()
                  if line.split("\t")[1] == "write" and not line.split("\t")[3].startswith("/dev/")
                  and not compiled_code_cache(line.split("\t")[3])}  # bytecode, numba's kernel cache: code, not data
        assert writes, f"rank {r} wrote nothing: no trace"
        assert not [w for w in writes if w.startswith(str(out))], r
        roots = {w.removeprefix(str(split) + "/").split("/")[0] for w in writes}
        assert len(roots) == 1 and roots <= {"zone_0.private", "zone_1.private"}, roots
    # permissions: every zone-private folder 0700, every file 0600 (the umask was 0000)
    for z in (0, 1):
        assert private_tree_problems(split / f"zone_{z}.private") == []
    # the zones' release journals (issue 36) are on their own hosts, in their own folders
    journals = sorted(p.relative_to(split).parts[0] for p in split.rglob("releases.journal"))
    assert journals == ["zone_0.private", "zone_1.private"] and not list(out.rglob("releases.journal"))
    # content: the zones' own numbers (solution of non-shared variables, noise magnitudes) appear in no file of --out
    runs = list((split / "zone_0.private" / "runs").iterdir())
    assert len(runs) == 1
    secrets_ = set()
    for z in (0, 1):
        mine = split / f"zone_{z}.private" / "runs" / runs[0].name
        sol = pd.read_csv(mine / "solution.csv", float_precision="round_trip")
        stats = pd.read_csv(mine / "stats.csv", float_precision="round_trip")
        assert stats["round"].tolist() == [0, 1, 2, 3, 4, 5]  # the resumed zone kept its earlier rounds in its own log
        shared = {v for v in ("pf", "qf", "pt", "qt", "w", "wr", "wi", "vm", "va")}
        values = [v for n, v in zip(sol["variable"], sol["value"]) if n not in shared and abs(v) > 1e-6]
        secrets_ |= {repr(float(v)) for v in [*values, *stats["noise_magnitude"]] if len(repr(float(v))) >= 8}  # not 0.0, 1.0
    assert len(secrets_) > 20
    for f in out.rglob("*"):
        if f.is_file() and f.suffix in (".csv", ".json"):
            text = f.read_text()
            assert not [v for v in secrets_ if v in text], f
    # the seeded deployment, stopped after 3 rounds and resumed to 5, equals the seeded simulation bit for bit
    sim = run_distributed(RunConfig(case="case14", zones=2, algorithm="objl", epsilon=0.3, rounds=5, seed=4, evaluate=False),
                          out=tmp_path / "simulated", reference=False)
    for name in ("history.csv", "consensus.csv"):
        got = pd.read_csv(out / "coordinator_view" / name, float_precision="round_trip")
        want = pd.read_csv(tmp_path / "simulated" / "coordinator_view" / name, float_precision="round_trip")
        cols = [c for c in got.columns if c != "wall_s"]
        pd.testing.assert_frame_equal(got[cols], want[cols], check_exact=True)
    assert np.isfinite(sim.history["feasibility"]).all()


class _FailingComm:
    """A communicator whose sends to ``dead`` fail, as MPI reports a peer that died on some transports."""

    def __init__(self, dead: int):
        self.dead, self.sent = dead, []

    def isend(self, obj, dest, tag):
        if dest == self.dead:
            raise RuntimeError(f"MPI error: rank {dest} is gone")
        self.sent.append(dest)
        return _Done()


class _Done:
    def Test(self):
        return True


def test_heartbeats_go_on_when_a_send_to_a_dead_rank_fails():
    """Issue 25 item 5: the heartbeat thread died with the first failed send to a lost rank; the other ranks then
    heard nothing from rank 0, aborted the job and killed rank 0 before it wrote failure.txt or said a word."""
    from powerdp.engine.backends.mpi import Liveness

    comm = _FailingComm(dead=2)
    live = Liveness(comm, [1, 2], timeout=0.5)  # a beacon every 0.05 s
    try:
        time.sleep(0.4)
        assert live._thread.is_alive()
        assert 2 in live.lost  # noticed at once, not after the timeout
        before = comm.sent.count(1)
        time.sleep(0.3)
        assert comm.sent.count(1) > before  # rank 1 still hears rank 0
    finally:
        live.stop()


# Rank 2 dies in round 3; from then on rank 0's beacons to it fail (as on transports that notice a dead peer).
FAILING_BEACONS = DYING_RANK.replace("sys.exit(main(sys.argv[1:]))", """
if MPI.COMM_WORLD.Get_rank() == 0:
    import pathlib
    from powerdp.engine.backends import mpi as backend

    marker = pathlib.Path(os.environ["DEAD_MARKER"])
    real_init = backend.Liveness.__init__

    class Comm:
        def __init__(self, comm):
            self.comm = comm

        def isend(self, obj, dest, tag):
            if dest == 2 and marker.exists():
                raise MPI.Exception(MPI.ERR_OTHER)
            return self.comm.isend(obj, dest=dest, tag=tag)

        def __getattr__(self, name):
            return getattr(self.comm, name)

    def init(self, comm, peers, timeout):
        real_init(self, Comm(comm), peers, timeout)

    backend.Liveness.__init__ = init
sys.exit(main(sys.argv[1:]))
""").replace("        os._exit(9)", "        open(os.environ['DEAD_MARKER'], 'w').close()\n        os._exit(9)")


def test_a_lost_rank_whose_beacons_fail_is_recorded_by_rank_zero(tmp_path):
    exe = _mpiexec()
    script = tmp_path / "failing_beacons.py"
    script.write_text(FAILING_BEACONS)
    out = tmp_path / "run"
    args = ["case14", "--zones", "3", "--algorithm", "objl", "--epsilon", "0.3", "--rounds", "6", "--seed", "2", "--no-reference"]
    env = {**__import__("os").environ, "DEAD_MARKER": str(tmp_path / "rank2_died")}
    proc = subprocess.run(
        [exe, "-disable-auto-cleanup", "-n", "3", sys.executable, str(script), "--quiet", "run", *args,
         "--backend", "mpi", "--checkpoint-every", "1", "--rank-timeout", "10", "--out", str(out)],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert (tmp_path / "rank2_died").exists()
    assert proc.returncode == 1, proc.stderr[-2000:]  # rank 0's own status, not a job killed by signal 9
    failure = (out / "failure.txt").read_text()
    assert "round 3" in failure and "MPI rank 2 (zones [" in failure, failure
    assert "lost the coordinator" not in proc.stderr and "Exception in thread" not in proc.stderr, proc.stderr[-2000:]
