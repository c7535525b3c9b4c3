"""One run directory for every application (powerdp/runs/): inputs with hashes checked on resume (a deployment
zone's private file by the zone itself), `--resume DIR` alone, atomic files that name the file on failure, and
`plot`/`export` on every kind of run (working, or one line saying why not). Each test fails on c7046ae."""

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerdp.apps.learning.config import LearnConfig
from powerdp.apps.learning.data import load_dataset
from powerdp.apps.learning.runner import run_federated
from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.apps.power_flow.zone_data import zone_loads_path
from powerdp.cli import main
from powerdp.errors import ConfigError
from powerdp.runs.views import read_history

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ 1. a deployment zone checks its own file


@pytest.fixture
def split(tmp_path):
    d = tmp_path / "split"
    assert main(["-q", "partition", "case14", "--zones", "3", "--split", str(d)]) == 0
    return d


def test_deployment_resume_refuses_an_edited_private_load_file(split, tmp_path):
    cfg = RunConfig(case="case14", zones=3, algorithm="objl", epsilon=0.3, rounds=4, seed=2, evaluate=False,
                    checkpoint_every=2, deployment=str(split))
    run_distributed(cfg, out=tmp_path / "run", reference=False)
    loads = zone_loads_path(split, 1)
    frame = pd.read_csv(loads)
    frame.loc[0, "pd"] += 0.05  # the zone's secret changed between the run and its resume
    frame.to_csv(loads, index=False)
    with pytest.raises(ConfigError, match=r"cannot resume zone 1: its private load file .*loads.csv has changed"):
        run_distributed(cfg.replace(rounds=6), out=tmp_path / "run", resume=True, reference=False)
    # the coordinator's files do not hold the zone's record: it stays in the zone's own folder
    assert "private load" not in (tmp_path / "run" / "inputs.json").read_text()


def test_deployment_resume_on_the_same_files_continues(split, tmp_path):
    cfg = RunConfig(case="case14", zones=3, algorithm="objl", epsilon=0.3, rounds=4, seed=2, evaluate=False,
                    checkpoint_every=2, deployment=str(split))
    full = run_distributed(cfg.replace(rounds=6), reference=False)
    run_distributed(cfg, out=tmp_path / "run", reference=False)
    resumed = run_distributed(cfg.replace(rounds=6), out=tmp_path / "run", resume=True, reference=False)
    cols = ["feasibility", "dual_residual", "epsilon_spent"]
    pd.testing.assert_frame_equal(resumed.history[cols], full.history[cols], check_exact=True)


# ------------------------------------------------------------------ 2. learn --resume: the data set, checked and resolved


def _digits_csv(path: Path, edited: bool = False) -> Path:
    d = load_dataset("digits")
    X = np.vstack([d.X_train, d.X_test])[:400]
    y = np.concatenate([d.y_train, d.y_test])[:400]
    if edited:  # another data set under the same name: other labels
        y = np.roll(y, 7)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame["label"] = y
    frame.to_csv(path, index=False)
    return path


def _learn_cfg(dataset: str, rounds: int) -> LearnConfig:
    return LearnConfig(dataset=dataset, clients=2, algorithm="nonprivate", rounds=rounds, checkpoint_every=2,
                       evaluate_every=1, feature_range=(0.0, 16.0))


def test_learn_resume_refuses_an_edited_data_set(tmp_path):
    data = _digits_csv(tmp_path / "data.csv")
    run_federated(_learn_cfg(str(data), 4), out=tmp_path / "run", reference=False)
    _digits_csv(data, edited=True)
    with pytest.raises(ConfigError, match=r"its dataset file .*data.csv has changed"):
        run_federated(_learn_cfg(str(data), 6), out=tmp_path / "run", resume=True, reference=False)


def test_learn_resume_from_another_directory_reopens_the_recorded_file(tmp_path, monkeypatch):
    made, elsewhere = tmp_path / "made", tmp_path / "elsewhere"
    made.mkdir()
    elsewhere.mkdir()
    _digits_csv(made / "data.csv")
    _digits_csv(elsewhere / "data.csv", edited=True)  # a different file of the same name where the resume runs
    monkeypatch.chdir(made)
    full = run_federated(_learn_cfg("data.csv", 6), reference=False)
    run_federated(_learn_cfg("data.csv", 4), out=tmp_path / "run", reference=False)
    monkeypatch.chdir(elsewhere)
    resumed = run_federated(_learn_cfg("data.csv", 6), out=tmp_path / "run", resume=True, reference=False)
    cols = ["objective", "feasibility", "dual_residual"]
    pd.testing.assert_frame_equal(resumed.history[cols], full.history[cols], check_exact=True)


# ------------------------------------------------------------------ 3. DC market and vertical: --resume DIR alone


def test_dc_market_resumes_with_the_directory_alone(tmp_path):
    out = tmp_path / "dc"
    assert main(["-q", "run", "case14", "--model", "dc", "--zones", "2", "--rounds", "30", "--checkpoint-every", "10",
                 "--out", str(out), "--json", str(tmp_path / "a.json")]) == 0
    assert main(["-q", "run", "--resume", str(out), "--rounds", "50", "--json", str(tmp_path / "b.json")]) == 0
    full = tmp_path / "full"
    assert main(["-q", "run", "case14", "--model", "dc", "--zones", "2", "--rounds", "50", "--out", str(full)]) == 0
    cols = ["primal_residual", "dual_residual", "eval_cost"]
    np.testing.assert_array_equal(read_history(out)[cols].to_numpy(), read_history(full)[cols].to_numpy())


def test_dc_market_resume_refuses_an_edited_case(tmp_path, capsys):
    case = tmp_path / "mycase.m"
    shutil.copy(ROOT / "cases" / "case14.m", case)
    out = tmp_path / "dc"
    assert main(["-q", "run", str(case), "--model", "dc", "--zones", "2", "--rounds", "20", "--checkpoint-every", "10",
                 "--out", str(out)]) == 0
    case.write_text(case.read_text().replace("\t2\t21.7\t12.7", "\t2\t41.7\t12.7"))  # bus 2's load
    capsys.readouterr()
    assert main(["-q", "run", "--resume", str(out), "--rounds", "30"]) == 2
    err = capsys.readouterr().err
    assert "mycase.m has changed since the run was made" in err and len(err.strip().splitlines()) == 1


def test_vertical_learning_resumes_with_the_directory_alone(tmp_path):
    out = tmp_path / "v"
    assert main(["-q", "learn", "breast_cancer", "--vertical", "--rounds", "20", "--checkpoint-every", "10",
                 "--out", str(out)]) == 0
    assert main(["-q", "learn", "--resume", str(out), "--rounds", "30"]) == 0
    full = tmp_path / "full"
    assert main(["-q", "learn", "breast_cancer", "--vertical", "--rounds", "30", "--out", str(full)]) == 0
    cols = ["primal_residual", "dual_residual", "eval_test_logloss"]
    np.testing.assert_array_equal(read_history(out)[cols].to_numpy(), read_history(full)[cols].to_numpy())


# ------------------------------------------------------------------ 4. learning writes atomically, naming the file


def test_learning_under_a_file_size_limit_names_the_file_and_leaves_no_truncated_file(tmp_path):
    limit = 16 * 1024  # bytes: a client's checkpoint (3 arrays of 64 × 10 floats) does not fit

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "powerdp", "learn", "digits", "--clients", "2", "--rounds", "6",
                        "--checkpoint-every", "2", "--out", str(out), "-q"], capture_output=True, text=True,
                       preexec_fn=small_files, cwd=tmp_path, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert "File too large" in line and str(out) in line and ".npz" in line, line
    for f in out.rglob("*.npz"):  # every file under its final name is whole
        with np.load(f, allow_pickle=False) as npz:
            [npz[k] for k in npz.files]
    assert not list(out.rglob("*.tmp"))


# ------------------------------------------------------------------ 5. plot and export on every kind of run


def test_plot_and_export_on_noisy_admm_dc_vertical_and_deployment_runs(tmp_path, split, capsys):
    runs = {
        "noisy": ["learn", "elastic-net", "--algorithm", "noisy-admm", "--rounds", "50", "--users", "200", "--dim", "8"],
        "dc": ["run", "case14", "--model", "dc", "--zones", "2", "--rounds", "20"],
        "vertical": ["learn", "breast_cancer", "--vertical", "--rounds", "10"],
        "deployment": ["run", "--deployment", str(split), "--algorithm", "objl", "--epsilon", "0.3", "--rounds", "3",
                       "--no-evaluation"],
    }
    for name, argv in runs.items():
        assert main(["-q", *argv, "--out", str(tmp_path / name)]) == 0, name
        capsys.readouterr()
        assert main(["-q", "plot", str(tmp_path / name)]) == 0, (name, capsys.readouterr().err)
        assert list((tmp_path / name / "figures").glob("*.png")), name
    for name in ("dc", "deployment", "noisy", "vertical"):
        capsys.readouterr()
        status = main(["-q", "export", str(tmp_path / name), "--pandapower", str(tmp_path / f"{name}.json")])
        err = capsys.readouterr().err.strip()
        assert status == 2 and len(err.splitlines()) == 1 and f"cannot export {tmp_path / name}: it is a" in err, (name, err)


def _edit_json(path, edit):
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc, indent=2) + "\n")


@pytest.mark.parametrize("kind", ["run", "learn", "dispatch", "market", "vertical"])
def test_resume_refuses_an_edited_config_json(tmp_path, capsys, kind):
    """Issue 38, bug 11: ε changed to 5 in config.json and ``--resume`` continued the run at ε 5 (exit 0, a summary of
    "0.1 per step, total 15.8"). config.json's SHA-256 is recorded with the run's inputs, and every command that
    resumes refuses an edited one, before any round."""
    d = tmp_path / "D"
    if kind == "dispatch":
        prof = tmp_path / "day.csv"
        pd.DataFrame({"load.2.p_mw": [20.0, 21.0, 22.0]}).to_csv(prof, index=False)
        make = None  # made below, stopped after its first period
        resume = ["dispatch", "--resume", str(d)]

        def edit(doc):
            doc["target_epsilon"] = 5.0
    elif kind == "run":
        make = ["run", "case14", "--rounds", "2", "--no-reference", "--checkpoint-every", "1", "--out", str(d)]
        resume = ["run", "--resume", str(d), "--rounds", "3"]

        def edit(doc):
            doc["epsilon"] = 5.0
    elif kind == "learn":
        make = ["learn", "digits", "--algorithm", "objl", "--rounds", "2", "--clients", "2", "--no-reference",
                "--checkpoint-every", "1", "--out", str(d)]
        resume = ["learn", "--resume", str(d), "--rounds", "3"]

        def edit(doc):
            doc["epsilon"] = 5.0
    elif kind == "market":
        make = ["run", "case14", "--model", "dc", "--algorithm", "outg", "--epsilon", "1", "--rounds", "4",
                "--checkpoint-every", "2", "--out", str(d)]
        resume = ["run", "--resume", str(d)]

        def edit(doc):
            doc["settings"]["rho"] *= 2.0
    else:
        make = ["learn", "breast_cancer", "--vertical", "--rounds", "4", "--checkpoint-every", "2", "--out", str(d)]
        resume = ["learn", "--resume", str(d), "--rounds", "6"]

        def edit(doc):
            doc["config"]["lam"] *= 5.0
    if make is not None:
        assert main(["-q", *make]) == 0
    else:
        import signal

        from powerdp.apps.dispatch.config import DispatchConfig
        from powerdp.apps.dispatch.runner import run_dispatch
        from powerdp.errors import Interrupted
        from powerdp.grid.profiles import load_horizon
        from powerdp.runs.stopping import stop_signals

        cfg = DispatchConfig(source="case14", periods=3, zones=3, algorithm="objl", target_epsilon=1.0, max_rounds=2,
                             profiles=str(prof))

        def stop(row):
            if row.get("period_done") == 0:
                os.kill(os.getpid(), signal.SIGINT)

        with stop_signals(), pytest.raises(Interrupted):
            run_dispatch(cfg, load_horizon("case14", periods=3, profiles=prof), out=d, progress=stop, reference=False)
    _edit_json(d / "config.json", edit)
    capsys.readouterr()
    assert main(["-q", *resume]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "config.json was edited after the run wrote it" in err[0], err


def test_resume_names_the_missing_checkpoint_file_and_a_damaged_config(tmp_path, capsys):
    """"state.json is missing" was said when state.npz was; a damaged config.json was "not a powerdp run"."""
    d = tmp_path / "D"
    assert main(["-q", "run", "case14", "--rounds", "2", "--no-reference", "--out", str(d)]) == 0
    (d / "checkpoint" / "state.npz").unlink()
    assert main(["-q", "run", "--resume", str(d), "--rounds", "3"]) == 2
    err = capsys.readouterr().err
    assert "state.npz is missing" in err and "state.json" not in err, err
    (d / "config.json").write_text('{"case": "case14", "algorithm": ')
    for argv in (["plot", str(d)], ["export", str(d), "--pandapower", str(tmp_path / "n.json")], ["learn", "--resume", str(d)]):
        assert main(["-q", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{d / 'config.json'} is damaged" in err[0] and "not a powerdp run" not in err[0], (argv, err)
