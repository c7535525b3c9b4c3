"""Checkpoints without pickle: npz (allow_pickle=False) + JSON; old pickled run directories are refused unread."""

import json
import os
import pickle

import numpy as np
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.cli import main
from powerdp.errors import ConfigError
from powerdp.files.checkpoint import load_state, refuse_pickles, save_state, zone_checkpoint_path


class _Exploit:
    """Unpickling this runs code: it creates the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_state_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(1)
    rng.standard_normal(3)
    state = {"zone": 2, "round": 7, "lam": np.array([0.1, -2.5e-17]), "warm": (np.ones(2), np.arange(3.0)), "none": None,
             "rng": rng.bit_generator.state, "history": [[{"kind": "laplace", "epsilon": 0.1}, 3]]}
    stem = save_state(zone_checkpoint_path(tmp_path, 2, 7), state)
    assert stem.parent.name == "zone_2.private" and {p.suffix for p in stem.parent.iterdir()} == {".npz", ".json"}
    back = load_state(stem)
    np.testing.assert_array_equal(back["lam"], state["lam"])
    assert all(np.array_equal(a, b) for a, b in zip(back["warm"], state["warm"]))
    assert back["rng"] == state["rng"] and back["none"] is None and back["history"] == state["history"]
    again = np.random.default_rng()
    again.bit_generator.state = back["rng"]
    assert again.standard_normal() == rng.standard_normal()


def test_object_arrays_are_refused(tmp_path):
    with pytest.raises(TypeError):
        save_state(tmp_path / "s", {"x": np.array([{"a": 1}], dtype=object)})
    # a hand-made npz holding a pickled object array is not loaded
    np.save(tmp_path / "raw.npy", np.array([None], dtype=object), allow_pickle=True)
    with open(tmp_path / "t.npz", "wb") as fh:
        np.savez(fh, x=np.array([None], dtype=object))
    (tmp_path / "t.json").write_text(json.dumps({}))
    with pytest.raises(ConfigError, match="not a readable checkpoint"):
        load_state(tmp_path / "t")


@pytest.mark.parametrize("name", ["state.pkl", "zone_1_round_2.pkl"])
def test_crafted_pickle_in_a_run_directory_is_refused_without_being_loaded(tmp_path, capsys, name):
    run = tmp_path / "run"
    run_distributed(RunConfig(case="case14", rounds=2, checkpoint_every=1, seed=0), out=run, reference=False)
    marker = tmp_path / "pwned"
    (run / "checkpoint" / name).write_bytes(pickle.dumps(_Exploit(marker)))
    assert main(["run", "--resume", str(run), "--rounds", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pickled checkpoints" in err[0] and name in err[0] and "Traceback" not in err[0]
    assert not marker.exists()  # never unpickled
    with pytest.raises(ConfigError, match="loading a pickle can run any code"):
        refuse_pickles(run / "checkpoint")


def test_no_pickle_in_the_package():
    import pathlib

    import powerdp

    root = pathlib.Path(powerdp.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if "import pickle" in p.read_text() or "pickle.load" in p.read_text() or "pickle.dump" in p.read_text()]
    assert offenders == []


def test_resume_of_a_secret_noise_run_continues_its_stream_and_keeps_its_input_noise(tmp_path):
    """Without a seed the zone's private checkpoint keeps its secret stream (AES key, counter, position: issue 36, so a
    resumed zone redraws the noise of the rounds it repeats), input perturbation's ξ drawn once, and the run stays
    secret."""
    cfg = RunConfig(case="case14", zones=2, algorithm="inpl", epsilon=1.0, rounds=4, checkpoint_every=2)
    run_distributed(cfg.replace(rounds=2), out=tmp_path / "r", reference=False)
    state = load_state(tmp_path / "r" / "zones.private" / "zone_0" / "checkpoint" / "round_2")
    assert state["noise_source"] == "secret" and "input_noise" in state  # ξ (drawn once) stays in the zone's folder
    assert state["rng"]["stream"] == "aes-256-ctr" and len(bytes.fromhex(state["rng"]["key"])) == 32  # the zone's own
    res = run_distributed(cfg, out=tmp_path / "r", resume=True, reference=False)
    assert res.summary["noise_source"] == "secret" and len(res.history) == 4
    # input perturbation draws d̃ once: the resumed zone kept it (same noise magnitude every round)
    nm = res.history["noise_magnitude"].to_numpy()
    assert np.all(nm == nm[0])


def test_a_stopped_and_resumed_zone_keeps_its_whole_statistics_log(tmp_path):
    """A zone writes its own stats.csv (solver work and Σ|ξ| per round) at the end of a run; a run stopped before its
    end never wrote one, so the resumed run's log used to start where it resumed (a new user's walk-through: 10 rows
    after a run stopped at round 625 and resumed to 635). The log now travels in the zone's checkpoint."""
    import pandas as pd

    cfg = RunConfig(case="case14", zones=2, rounds=12, evaluate=False, seed=1, algorithm="objl")
    whole = tmp_path / "whole"
    run_distributed(cfg, out=whole, reference=False)

    def stop(row):
        if row["round"] == 7:
            raise KeyboardInterrupt

    stopped = tmp_path / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run_distributed(cfg.replace(rounds=50), out=stopped, progress=stop, reference=False)
    run_distributed(cfg, out=stopped, resume=True, reference=False)
    for zone in (0, 1):
        a, b = (pd.read_csv(d / "zones.private" / f"zone_{zone}" / "stats.csv") for d in (whole, stopped))
        assert b["round"].tolist() == a["round"].tolist() == list(range(13))
        assert b["solver_iterations"].tolist() == a["solver_iterations"].tolist()
        np.testing.assert_array_equal(b["noise_magnitude"].to_numpy(), a["noise_magnitude"].to_numpy())
