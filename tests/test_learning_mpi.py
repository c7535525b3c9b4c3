"""A seeded federated-learning run (objg, 10 clients on digits) is bit-identical on the serial and MPI backends
(`mpiexec -n 3`: rank 0 coordinates, ranks 1-2 host five clients each). Needs the mpi extra; `pytest -m mpi`."""

import sys

import numpy as np
import pandas as pd
import pytest

from .mpi_jobs import mpiexec, run_job

pytestmark = pytest.mark.mpi

ARGS = ["learn", "digits", "--clients", "10", "--algorithm", "objg", "--seed", "1", "--rounds", "20", "--evaluate-every", "5", "-q"]


def test_learning_identical_on_serial_and_mpi(tmp_path):
    exe = mpiexec()
    py = [sys.executable, "-m", "powerdp"]
    serial = _run(py, tmp_path / "serial", [])
    mpi = _run([exe, "-n", "3", *py], tmp_path / "mpi", ["--backend", "mpi"])
    assert np.array_equal(serial[0], mpi[0])
    cols = [c for c in serial[1].columns if c != "wall_s"]
    assert serial[1]["noise_magnitude"].iloc[-1] > 0
    pd.testing.assert_frame_equal(serial[1][cols], mpi[1][cols], check_exact=True)


def _run(prefix, out, extra):
    run_job([*prefix, *ARGS, *extra, "--out", str(out)], out=out)
    from powerdp.apps.learning.runner import HISTORY_COLUMNS
    from powerdp.apps.power_flow.result import read_history

    with np.load(out / "coordinator_view" / "model.npz") as npz:
        return npz["w"], read_history(out, HISTORY_COLUMNS)


NOISY = ["learn", "--algorithm", "noisy-admm", "--users", "120", "--dim", "8", "--rounds", "150", "--runs", "3", "--clients", "4",
         "--seed", "2", "-q"]


def test_noisy_admm_identical_on_serial_and_mpi(tmp_path):
    """noisy-admm's users on 4 clients, two per rank under `mpiexec -n 3`: the release and the evaluation's history
    equal the serial run's bit for bit."""
    exe = mpiexec()
    py = [sys.executable, "-m", "powerdp"]
    runs = {}
    for name, prefix, extra in (("serial", py, []), ("mpi", [exe, "-n", "3", *py], ["--backend", "mpi"])):
        out = tmp_path / name
        run_job([*prefix, *NOISY, *extra, "--out", str(out)], out=out)
        with np.load(out / "coordinator_view" / "model.npz") as npz:
            runs[name] = (npz["x"], npz["lam"], pd.read_csv(out / "simulation_evaluation" / "history.csv"))
    assert np.array_equal(runs["serial"][0], runs["mpi"][0]) and np.array_equal(runs["serial"][1], runs["mpi"][1])
    assert np.abs(runs["serial"][0]).max() > 0
    pd.testing.assert_frame_equal(runs["serial"][2], runs["mpi"][2], check_exact=True)
