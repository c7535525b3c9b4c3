"""A seeded private sharing run (the DC market with noisy releases) gives the same history bit for bit on the
serial, process and MPI backends (`mpiexec -n 3`). Needs the mpi extra; run with `pytest -m mpi`."""

import sys

import pandas as pd
import pytest

from .mpi_jobs import mpiexec, run_job
from .shared_data import SHARED_DATA, shared_case

pytestmark = pytest.mark.mpi

ARGS = ["run", str(SHARED_DATA / "pglib" / "pglib_opf_case30_ieee.m"), "--zones", "3", "--model", "dc", "--algorithm", "outg",
        "--epsilon", "1", "--delta", "1e-5", "--rounds", "25", "--seed", "11"]
COLS = ["primal_residual", "dual_residual", "eval_cost", "eval_imbalance_mw", "eval_max_line_violation", "epsilon_spent"]


def test_sharing_history_identical_on_serial_process_mpi(tmp_path):
    pytest.importorskip("mpi4py")
    shared_case("pglib", "pglib_opf_case30_ieee.m", checks="a seeded DC market run bit-identical on serial, process and MPI")
    exe = mpiexec()
    py = [sys.executable, "-m", "powerdp"]
    serial = _run_backend(py, tmp_path, "serial", [])
    process = _run_backend(py, tmp_path, "process", ["--backend", "process", "--workers", "2"])
    mpi = _run_backend([exe, "-n", "3", *py], tmp_path, "mpi", ["--backend", "mpi"])
    assert serial["eval_imbalance_mw"].iloc[-1] > 0  # noisy releases: the market is not balanced exactly
    pd.testing.assert_frame_equal(process[COLS], serial[COLS], check_exact=True)
    pd.testing.assert_frame_equal(mpi[COLS], serial[COLS], check_exact=True)


def _run_backend(prefix, tmp_path, name, extra):
    out = tmp_path / name
    run_job([*prefix, *ARGS, *extra, "--out", str(out)], out=out, timeout=300)
    from powerdp.apps.power_flow.result import read_history
    from powerdp.runs.sharing_run import HISTORY_ORDER

    return read_history(out, HISTORY_ORDER)  # both views joined
