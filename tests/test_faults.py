"""Test switches never act in a real run: the old POWERDP_TEST_* variables are read nowhere, and the test-only
InjectedFaults reach a run only as a Python argument (never from a file, a flag or the environment)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from powerdp.apps.learning import LearnConfig
from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.errors import ConfigError
from powerdp.privacy.faults import InjectedFaults

ROOT = Path(__file__).resolve().parents[1]
ENV = {"POWERDP_TEST_DISABLE_NOISE": "1", "POWERDP_TEST_LEAK": "noise_magnitude"}


def _releases(cfg: RunConfig) -> tuple[np.ndarray, list]:
    got: list = []
    run_distributed(cfg, reference=False, observe=got.extend)
    return np.concatenate([u.released for u in got]), got


def test_a_real_run_with_the_old_variables_set_adds_noise_as_usual(monkeypatch):
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", target_epsilon=0.5, rounds=2, seed=3, checkpoint_every=0, evaluate=False)
    clean, _ = _releases(cfg)
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    with_env, updates = _releases(cfg)
    assert np.array_equal(with_env, clean)  # the variables change nothing: the same seeded noise
    assert all(type(u).__name__ == "ZoneUpdate" for u in updates)  # no leaky message either
    noise_off, _ = _releases(cfg.replace(faults=InjectedFaults(disable_noise=True)))
    assert not np.array_equal(noise_off, clean)  # the switch works only as the explicit test argument


def test_the_command_line_with_the_old_variables_set_adds_noise(tmp_path):
    """`powerdp run` in a child process whose environment carries the variables (as a CI job or mpiexec would)."""
    args = ["run", "case14", "--zones", "2", "--algorithm", "objl", "--target-epsilon", "0.5", "--rounds", "2", "--seed", "3",
            "--no-reference", "-q"]
    env = {**os.environ, **ENV, "PYTHONPATH": str(ROOT)}
    for name, e in (("with", env), ("without", {k: v for k, v in env.items() if k not in ENV})):
        subprocess.run([sys.executable, "-m", "powerdp", *args, "--out", str(tmp_path / name)], env=e, check=True,
                       capture_output=True, timeout=600)
    import pandas as pd

    hist = [pd.read_csv(tmp_path / n / "coordinator_view" / "history.csv").drop(columns="wall_s") for n in ("with", "without")]
    assert hist[0].equals(hist[1])  # the same seeded noise: the residuals agree to the bit


def test_faults_cannot_come_from_a_file_or_a_table():
    with pytest.raises(ConfigError, match="faults"):
        RunConfig.from_dict({"faults": {"disable_noise": True}})
    with pytest.raises(ConfigError, match="faults"):
        LearnConfig.from_dict({"faults": {"disable_noise": True}})
    with pytest.raises(ConfigError, match="test-only"):
        RunConfig(faults={"disable_noise": True})
    cfg = RunConfig(faults=InjectedFaults(disable_noise=True))
    assert "faults" not in cfg.to_dict()  # never written into config.json, so never read back
    assert cfg.replace(rounds=3).faults == InjectedFaults(disable_noise=True)


def test_no_module_reads_a_test_variable():
    src = "\n".join(p.read_text() for p in (ROOT / "powerdp").rglob("*.py"))
    assert "environ.get(_TEST" not in src and 'environ.get("POWERDP_TEST' not in src
