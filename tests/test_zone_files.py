"""Zone-private files (issue 26, items 2-4 and 6 (b)): what a zone writes stays in a 0700 folder of its own with
0600 files, never under the coordinator's --out in a deployment; only "zone P failed" crosses on a failure;
the file audit catches the layout of earlier versions."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.plan import resolve_config, resolve_partition
from powerdp.apps.power_flow.runner import RunFailed, run_distributed
from powerdp.apps.power_flow.zone_data import split_case
from powerdp.engine.sharing.hosts import load_state as load_agent_state
from powerdp.errors import ConfigError
from powerdp.files.checkpoint import load_state
from powerdp.files.private import private_tree_problems, write_private
from powerdp.files.zone_folders import LEGACY_TEST_ONLY, ZONES_PRIVATE
from powerdp.grid.loading import load_case
from powerdp.runs.views import COORDINATOR_VIEW

from .conftest import fail_local_solve


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


@pytest.fixture
def open_umask():
    """A permissive umask (0000): private files must be 0700/0600 all the same."""
    old = os.umask(0)
    yield
    os.umask(old)


def _split(tmp_path: Path, zones: int = 2) -> tuple[Path, RunConfig]:
    net = load_case("case14")
    cfg = resolve_config(RunConfig(case="case14", zones=zones, algorithm="objl", epsilon=0.5, rounds=3,
                                   evaluate=False, checkpoint_every=1), net)
    dep = tmp_path / "dep"
    split_case(net, resolve_partition(net, cfg), dep)
    return dep, cfg.replace(deployment=str(dep))


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_write_private_creates_the_file_0600_before_writing_into_it(tmp_path, open_umask):
    seen = {}

    def write(fh):  # the temporary as it is being written: already 0600, in a 0700 folder
        tmp = next((tmp_path / "a" / "b").glob("*.tmp"))
        seen["tmp"], seen["dir"] = _mode(tmp), _mode(tmp.parent)
        fh.write("secret")

    path = write_private(tmp_path / "a" / "b" / "f.txt", write)
    assert seen == {"tmp": 0o600, "dir": 0o700}
    assert _mode(path) == 0o600 and _mode(tmp_path / "a") == 0o700 and path.read_text() == "secret"
    assert private_tree_problems(tmp_path / "a") == []
    os.chmod(path, 0o644)
    assert private_tree_problems(tmp_path / "a") == [f"{path} has mode 0644 (must be 0600)"]


def test_split_writes_private_folders_0700_and_prints_no_zone_load(tmp_path, open_umask, capsys):
    from powerdp.cli import main

    assert main(["partition", "case14", "--zones", "2", "--split", str(tmp_path / "dep")]) == 0
    out = capsys.readouterr().out
    assert "load_mw" not in out and "load_mvar" not in out  # per-zone load totals are each zone's own
    for z in (0, 1):
        folder = tmp_path / "dep" / f"zone_{z}.private"
        assert _mode(folder) == 0o700 and _mode(folder / "loads.csv") == 0o600
    assert main(["partition", "case14", "--zones", "2"]) == 0  # without --split the summary keeps its loads
    assert "load_mw" in capsys.readouterr().out


def test_simulation_keeps_zone_files_in_zones_private(tmp_path, open_umask):
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", target_epsilon=0.5, rounds=2, checkpoint_every=1)
    res = run_distributed(cfg, out=tmp_path / "r", reference=False)
    d = tmp_path / "r"
    assert private_tree_problems(d / ZONES_PRIVATE) == []
    assert {"zones.private/zone_0/solution.csv", "zones.private/zone_1/checkpoint/round_2.npz"} <= _files(d)
    assert not (d / "zones").exists() and not list((d / "checkpoint").glob("zone_*"))
    assert not any("zone" in name for name in _files(d / COORDINATOR_VIEW))
    # a secret-noise run keeps its stream (key, counter, position) in the zone's own 0600 file only (issue 36)
    assert load_state(d / ZONES_PRIVATE / "zone_0" / "checkpoint" / "round_2")["rng"]["stream"] == "aes-256-ctr"
    from powerdp.apps.power_flow.result import RunResult

    assert RunResult.load(d).zone_solutions == res.zone_solutions


def test_deployment_zone_files_stay_with_the_zone_and_the_run_resumes(tmp_path, open_umask):
    """Serial and process backends alike: nothing of a zone under --out; the zones' folders in their own
    zone_P.private/runs/RUN, 0700/0600; a seeded run resumes to the same history as one without a stop."""
    dep, cfg = _split(tmp_path)
    cfg = cfg.replace(seed=3)
    full = run_distributed(cfg, out=tmp_path / "full", reference=False)
    for backend in ("serial", "process"):
        out = tmp_path / f"o_{backend}"
        run_distributed(cfg.replace(rounds=2, backend=backend), out=out, reference=False)
        assert not any("zone" in name for name in _files(out) - {"partition.csv"})
        run = json.loads((out / COORDINATOR_VIEW / "summary.json").read_text())["summary"]["zone_run"]
        for z in (0, 1):
            mine = dep / f"zone_{z}.private" / "runs" / run
            assert {"solution.csv", "stats.csv", "checkpoint"} <= set(os.listdir(mine))
            assert "rng" in load_state(mine / "checkpoint" / "round_2")  # seeded: the generator resumes exactly
        assert private_tree_problems(dep / "zone_0.private") == [] and private_tree_problems(dep / "zone_1.private") == []
        resumed = run_distributed(cfg.replace(backend=backend), out=out, resume=True, reference=False)
        np.testing.assert_array_equal(resumed.history["feasibility"], full.history["feasibility"])
        np.testing.assert_array_equal(resumed.consensus, full.consensus)
    os.chmod(dep / "zone_0.private", 0o755)  # a split made by an older version: closed before the zone writes into it
    run_distributed(cfg.replace(rounds=1), out=tmp_path / "again", reference=False)
    assert _mode(dep / "zone_0.private") == 0o700


def test_deployment_failure_crosses_as_zone_failed_only(tmp_path, monkeypatch):
    dep, cfg = _split(tmp_path)
    fail_local_solve(monkeypatch, zone=1, round=2)
    monkeypatch.setenv("POWERDP_START_METHOD", "fork")  # the worker inherits the failing solve
    for backend in ("serial", "process"):
        out = tmp_path / f"f_{backend}"
        with pytest.raises(RunFailed) as info:
            run_distributed(cfg.replace(backend=backend), out=out, reference=False)
        failure = (out / "failure.txt").read_text()
        assert "zone 1 failed" in failure and "round 2" in failure
        for detail in ("infeasible", "Ipopt", "local step", "Traceback"):
            assert detail not in failure and detail not in str(info.value)
    log = dep / "zone_1.private" / "log.txt"
    assert _mode(log) == 0o600 and "locally infeasible" in log.read_text()


def test_old_run_directories_resume_or_refuse_in_one_line(tmp_path):
    """An earlier version's simulation (zone states in checkpoint/zone_P.private) resumes, its zone states moved into
    zones.private; an earlier deployment (zone states under the coordinator's --out) is refused, naming why."""
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", epsilon=0.5, rounds=3, checkpoint_every=1, seed=1)
    full = run_distributed(cfg, reference=False)
    old = tmp_path / "old"
    run_distributed(cfg.replace(rounds=2), out=old, reference=False, _zone_layout=LEGACY_TEST_ONLY)
    assert (old / "checkpoint" / "zone_0.private" / "round_2.npz").is_file()
    resumed = run_distributed(cfg, out=old, resume=True, reference=False)
    np.testing.assert_array_equal(resumed.consensus, full.consensus)
    assert not list((old / "checkpoint").glob("zone_*")) and private_tree_problems(old / ZONES_PRIVATE) == []

    dep, dcfg = _split(tmp_path)
    out = tmp_path / "old_dep"
    run_distributed(dcfg.replace(rounds=2), out=out, reference=False, _zone_layout=LEGACY_TEST_ONLY)
    with pytest.raises(ConfigError, match=r"earlier powerdp whose zone processes kept their state in the coordinator"):
        run_distributed(dcfg, out=out, resume=True, reference=False)


def test_file_audit_passes_the_zone_layout_and_catches_the_old_one(tmp_path):
    from powerdp.studies.file_audit import audit_deployment_files

    net = load_case("case14")
    cfg = resolve_config(RunConfig(case="case14", zones=2, algorithm="objl", target_epsilon=0.5, rounds=2, evaluate=False), net)
    part = resolve_partition(net, cfg)
    good = audit_deployment_files(cfg, net, part)
    assert not good.failed and good.zone_processes == 2 and good.problems == []
    assert any(w.endswith("checkpoint/round_2.npz") for w in good.zone_writes)
    bad = audit_deployment_files(cfg, net, part, _zone_layout=LEGACY_TEST_ONLY)
    assert bad.failed
    assert any("out/zones/zone_0.csv under the coordinator's --out" in p for p in bad.problems)
    assert any("out/checkpoint/zone_1.private/round_2.npz under the coordinator's --out" in p for p in bad.problems)


def test_audit_cli_fails_with_exit_3_on_the_old_layout(tmp_path, monkeypatch, capsys):
    import functools

    from powerdp.cli import main
    from powerdp.studies import file_audit

    argv = ["audit", "case14", "--algorithm", "objl", "--target-epsilon", "0.5", "--rounds", "1", "--runs", "20",
            "--jobs", "1", "--bus", "4", "--deployment", "-q"]
    assert main(argv) == 0
    monkeypatch.setattr(file_audit, "audit_deployment_files",
                        functools.partial(file_audit.audit_deployment_files, _zone_layout=LEGACY_TEST_ONLY))
    assert main(argv) == 3
    assert "deployment files: a zone process wrote out/" in capsys.readouterr().err



def _to_old_layout(out: Path, kind: str) -> None:
    """Move every agent's checkpoint files where earlier versions kept them: checkpoint/{kind}_M_round_T.*"""
    for f in (out / f"{kind}s.private").glob(f"{kind}_*/checkpoint/round_*"):
        agent = f.parent.parent.name
        f.rename(out / "checkpoint" / f"{agent}_{f.name}")
    import shutil

    shutil.rmtree(out / f"{kind}s.private")


def test_market_agents_keep_their_state_in_agent_private_files(tmp_path, open_umask):
    from powerdp.apps.market.dc_market import default_market_rho, run_market
    from powerdp.grid.partition import partition
    from powerdp.opf.dc import dc_model
    from powerdp.runs.sharing_run import SharingSettings

    net = load_case("case118")
    zones = partition(net, "case118_3areas").zone_of_bus
    rho = 0.3 * default_market_rho(dc_model(net))
    settings = dict(rho=rho, noise_multiplier=5.0, delta=1e-5)
    full, _, _ = run_market(net, zones, SharingSettings(rounds=8, **settings), seed=7)
    out = tmp_path / "m"
    run_market(net, zones, SharingSettings(rounds=4, checkpoint_every=2, **settings), seed=7, out=out)
    assert sorted(p.name for p in (out / "checkpoint").iterdir()) == ["evaluation.json", "evaluation.npz", "state.json", "state.npz"]  # the coordinator's only (state and the evaluation's history columns)
    assert {f"agent_{m}" for m in range(3)} <= {p.name for p in (out / "agents.private").iterdir()}
    assert (out / "agents.private" / "agent_0" / "checkpoint" / "round_4.npz").is_file()
    assert private_tree_problems(out / "agents.private") == []
    resumed, _, _ = run_market(net, zones, SharingSettings(rounds=8, **settings), seed=7, out=out, resume=True)
    assert np.array_equal(resumed.y, full.y)
    # an earlier version's run directory (agent files beside the coordinator's state) still resumes
    old = tmp_path / "old"
    run_market(net, zones, SharingSettings(rounds=4, **settings), seed=7, out=old)
    _to_old_layout(old, "agent")
    resumed, _, _ = run_market(net, zones, SharingSettings(rounds=8, **settings), seed=7, out=old, resume=True)
    assert np.array_equal(resumed.y, full.y)
    assert not [p for p in (old / "checkpoint").iterdir() if p.name.startswith("agent_")]


def test_learning_clients_keep_their_state_in_client_private_files(tmp_path, open_umask):
    from powerdp.apps.learning import LearnConfig, run_federated

    cfg = LearnConfig(dataset="digits", clients=3, algorithm="objg", epsilon=0.5, rounds=6, checkpoint_every=3, seed=2)
    full = run_federated(cfg, reference=False)
    out = tmp_path / "l"
    run_federated(cfg.replace(rounds=3), out=out, reference=False)
    assert not [p for p in (out / "checkpoint").iterdir() if p.name.startswith("client_")]
    assert (out / "clients.private" / "client_2" / "checkpoint" / "round_3.npz").is_file()
    assert private_tree_problems(out / "clients.private") == []
    assert load_agent_state(out / "clients.private" / "client_0" / "checkpoint" / "round_3")["meta"]["rng"] is not None  # seeded
    resumed = run_federated(cfg, out=out, resume=True, reference=False)
    np.testing.assert_array_equal(resumed.model, full.model)
    old = tmp_path / "old"
    run_federated(cfg.replace(rounds=3), out=old, reference=False)
    _to_old_layout(old, "client")
    resumed = run_federated(cfg, out=old, resume=True, reference=False)
    np.testing.assert_array_equal(resumed.model, full.model)
    # a secret-noise client keeps its stream in its own private folder (a resumed client redraws what it repeats)
    run_federated(cfg.replace(seed=None, rounds=3), out=tmp_path / "s", reference=False)
    state = load_agent_state(tmp_path / "s" / "clients.private" / "client_0" / "checkpoint" / "round_3")
    assert state["meta"]["rng"]["stream"] == "aes-256-ctr" and private_tree_problems(tmp_path / "s" / "clients.private") == []


def test_only_the_packages_compiled_code_cache_is_not_counted(tmp_path, monkeypatch):
    """The file audit skips the powerdp package's __pycache__ folders (bytecode) and the folder of numba's cache of
    powerdp's kernels (numba probes it when a process loads them), and nothing else: not a __pycache__ elsewhere,
    not the package's other files, not a file beside the kernel cache."""
    from pathlib import Path

    import powerdp
    from powerdp.studies.file_audit import compiled_code_cache

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    kernels = tmp_path / "cache" / "powerdp" / "numba"
    assert compiled_code_cache(str(kernels / "work" / "powerdp" / "opf" / "_active_set_kernel.cone_qp-1.py311.nbi"))
    assert not compiled_code_cache(str(tmp_path / "cache" / "powerdp" / "zone_0.csv"))
    pkg = Path(powerdp.__file__).resolve().parent
    assert compiled_code_cache(str(pkg / "privacy" / "__pycache__"))
    assert compiled_code_cache(str(pkg / "privacy" / "__pycache__" / "discrete_kernels.fill_laplace-1.py311.nbi"))
    assert not compiled_code_cache(str(pkg / "privacy" / "sampler.py"))
    assert not compiled_code_cache("/tmp/out/__pycache__/zone_0.csv")
    assert not compiled_code_cache(str(pkg.parent / "__pycache__"))
    assert not compiled_code_cache(str(pkg / "privacy" / "__pycache__" / ".." / ".." / ".." / "out.csv"))  # resolved first


def test_a_deployments_hosts_keep_their_setup_times_and_memory(tmp_path):
    """Issue 36: a zone's set-up times and its host's peak memory cross only to a simulation's evaluation. A deployment's
    hosts answer the coordinator's questions with nothing (and the runner does not ask), on the process backend as
    under MPI (the same host loop)."""
    from powerdp.engine.backends.base import _serve

    dep, cfg = _split(tmp_path)
    res = run_distributed(cfg.replace(rounds=1, backend="process"), out=tmp_path / "o", reference=False)
    assert res.summary["setup_times"] == {} and res.summary["host_peak_rss_mb"] == []
    sim = run_distributed(RunConfig(case="case14", zones=2, algorithm="objl", epsilon=1.0, rounds=1, backend="process"),
                          reference=False)
    assert set(sim.summary["setup_times"]) == {0, 1} and len(sim.summary["host_peak_rss_mb"]) >= 1  # a simulation's
    answers = []
    commands = iter([("setup", None), ("memory", None), ("close", None)])
    from powerdp.apps.power_flow.plan import resolve_config, resolve_partition
    from powerdp.engine.backends import AgentSpec
    from powerdp.grid.loading import load_case

    net = load_case("case14")
    plain = resolve_config(RunConfig(case="case14", zones=2, algorithm="objl", epsilon=1.0), net)
    part = resolve_partition(net, plain)
    keys = part.shared_by_zone(plain.flows)
    specs = [AgentSpec(zone=0, own_buses=part.own_buses(0), shared_keys=tuple(keys[0]))]
    _serve(lambda: next(commands), answers.append, net, specs, plain.replace(evaluate=False))
    assert answers[1:] == [("ok", {}), ("ok", answers[2][1])] and answers[2][1] != answers[2][1]  # {} and NaN
