"""The deployment path: a public network without loads, one private load file per zone (powerdp partition --split)."""

import shutil

import numpy as np
import pandas as pd
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.apps.power_flow.zone_data import load_public_network, split_case, zone_loads_path, zone_network
from powerdp.cli import main
from powerdp.errors import ConfigError
from powerdp.grid.loading import load_case
from powerdp.grid.partition import bundled_partition


@pytest.fixture
def split(tmp_path):
    d = tmp_path / "split"
    assert main(["-q", "partition", "case14", "--zones", "3", "--split", str(d)]) == 0
    return d


def test_public_network_has_no_loads_and_each_zone_file_only_its_own(split):
    net, pub = load_case("case14"), load_public_network(split)
    assert np.isnan(pub.pd).all() and np.isnan(pub.qd).all()
    np.testing.assert_array_equal(pub.pmax, net.pmax)
    np.testing.assert_array_equal(pub.r, net.r)
    part = bundled_partition(net, 3)
    for z in range(3):
        frame = pd.read_csv(zone_loads_path(split, z), float_precision="round_trip")
        own = part.own_buses(z)
        assert sorted(frame["bus"]) == sorted(net.bus_ids[own].tolist())
        np.testing.assert_array_equal(frame["pd"].to_numpy(), net.pd[own])
    assert not (split / "public" / "loads.csv").exists()


def test_a_zone_needs_only_the_public_part_and_its_own_file(split, tmp_path):
    only = tmp_path / "zone1_host"
    shutil.copytree(split / "public", only / "public")
    shutil.copytree(split / "zone_1.private", only / "zone_1.private")
    net = load_case("case14")
    view = zone_network(only, 1)
    own = bundled_partition(net, 3).own_buses(1)
    np.testing.assert_array_equal(view.pd[own], net.pd[own])
    assert (np.delete(view.pd, own) == 0).all()
    with pytest.raises(ConfigError, match="zone 0: its load file .* is missing"):
        zone_network(only, 0)


def test_deployment_run_equals_the_simulation_bit_for_bit(split):
    cfg = RunConfig(case="case14", zones=3, algorithm="objl", epsilon=0.3, rounds=4, seed=2, evaluate=False, checkpoint_every=0)
    sim = run_distributed(cfg, reference=False)
    dep = run_distributed(cfg.replace(deployment=str(split)), reference=False)
    np.testing.assert_array_equal(dep.consensus, sim.consensus)
    cols = ["feasibility", "dual_residual", "epsilon_spent"]
    pd.testing.assert_frame_equal(dep.history[cols], sim.history[cols], check_exact=True)
    with pytest.raises(ConfigError, match="deployment"):
        cfg.replace(deployment=str(split), evaluate=True)


def test_split_keeps_hvdc_lines(hvdc_case, tmp_path):
    net = load_case(str(hvdc_case))
    from powerdp.grid.partition import partition

    part = partition(net, "area")
    split_case(net, part, tmp_path / "s")
    pub = load_public_network(tmp_path / "s")
    assert pub.n_dcline == net.n_dcline and np.array_equal(pub.dcline.pmaxf, net.dcline.pmaxf)


def test_a_deployment_refuses_a_message_outside_the_allow_list(split):
    from powerdp.privacy.faults import InjectedFaults

    cfg = RunConfig(case="case14", zones=3, algorithm="objl", epsilon=0.3, rounds=2, evaluate=False, checkpoint_every=0,
                    deployment=str(split), faults=InjectedFaults(leak="noise_magnitude"))
    from powerdp.apps.power_flow.runner import RunFailed

    with pytest.raises(RunFailed, match="zone 0 broke the protocol: .* outside the allow-list: noise_magnitude"):
        run_distributed(cfg, reference=False)


def test_a_split_does_not_replace_a_deployment_without_force(tmp_path, capsys):
    """Issue 38, bug 5: ``partition --split DIR`` over an existing deployment rewrote its zones' load files (exit 0) and
    left the old zones' run folders beside the new ones. Now refused without --force; with it, the old deployment's
    folders go first, so no old zone is left."""
    from powerdp.cli import main

    d = tmp_path / "dep"
    assert main(["-q", "partition", "case14", "--zones", "3", "--split", str(d)]) == 0
    loads = (d / "zone_0.private" / "loads.csv").read_bytes()
    (d / "zone_2.private" / "runs").mkdir()
    assert main(["-q", "partition", "case118", "--zones", "2", "--split", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already holds a deployment" in err[0] and "--force" in err[0], err
    assert (d / "zone_0.private" / "loads.csv").read_bytes() == loads
    assert main(["-q", "partition", "case118", "--zones", "2", "--split", str(d), "--force"]) == 0
    assert sorted(p.name for p in d.iterdir()) == ["public", "zone_0.private", "zone_1.private"]
    assert (d / "zone_0.private" / "loads.csv").read_bytes() != loads


def test_a_deployment_implies_no_evaluation(tmp_path):
    """``run --deployment DIR`` needed ``--no-evaluation`` too, and said so in config keys ("set evaluate false");
    a deployment has nothing to evaluate, so --deployment implies it."""
    d = tmp_path / "dep"
    assert main(["-q", "partition", "case14", "--zones", "3", "--split", str(d)]) == 0
    out = tmp_path / "run"
    assert main(["-q", "run", "--deployment", str(d), "--rounds", "1", "--out", str(out)]) == 0
    import json

    assert json.loads((out / "config.json").read_text())["evaluate"] is False


@pytest.mark.parametrize("force", [False, True])
def test_a_split_is_never_written_into_a_run(tmp_path, capsys, force):
    """``partition --split`` into a run's directory wrote public/ and zone_P.private/ beside the run's files (a new
    user's walk-through); ``solve --out`` and ``sweep --out`` refuse such a directory, and so does the split now."""
    from powerdp.cli import main

    run = tmp_path / "run"
    assert main(["-q", "run", "case14", "--zones", "2", "--rounds", "2", "--no-reference", "--out", str(run)]) == 0
    before = sorted(p.name for p in run.iterdir())
    assert main(["-q", "partition", "case14", "--zones", "2", "--split", str(run), *(["--force"] if force else [])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds a run or a sweep" in err[0], err
    assert sorted(p.name for p in run.iterdir()) == before
