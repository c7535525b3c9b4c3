"""The MPI backend: `mpiexec -n 4` on case14 gives the serial history bit for bit.

Needs the mpi extra (`pip install -e ".[mpi]"`: mpi4py and the mpich wheel); CI installs it and
runs `pytest -m mpi`. Identical floating-point results are expected, not just close ones: every zone
does the same arithmetic on the same inputs wherever it runs, and the coordinator's sums run in
the same order.
"""

import shutil
import subprocess
import sys

import pandas as pd
import pytest

from powerdp.config import RunConfig
from powerdp.runner import run_distributed

pytestmark = pytest.mark.mpi


def _mpiexec():
    pytest.importorskip("mpi4py")
    exe = shutil.which("mpiexec") or shutil.which("mpirun")
    if exe is None:
        pytest.skip("mpiexec not found")
    return exe


def test_mpi_history_equals_serial(tmp_path):
    exe = _mpiexec()
    args = ["case14", "--zones", "3", "--algorithm", "objg", "--epsilon", "0.3", "--rounds", "6", "--local-updates", "2", "--seed", "5", "--no-reference"]
    proc = subprocess.run(
        [exe, "-n", "4", sys.executable, "-m", "powerdp", "run", *args, "--backend", "mpi", "--out", str(tmp_path / "mpi")],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    mpi = pd.read_csv(tmp_path / "mpi" / "history.csv", float_precision="round_trip")
    cfg = RunConfig(case="case14", zones=3, algorithm="objg", epsilon=0.3, rounds=6, local_updates=2, seed=5)
    serial = run_distributed(cfg, reference=False).history
    cols = ["objective", "feasibility", "dual_residual", "noise_magnitude", "max_violation", "epsilon_spent"]
    pd.testing.assert_frame_equal(mpi[cols], serial[cols], check_exact=True)
    assert '"backend": "mpi"' in (tmp_path / "mpi" / "summary.json").read_text()


def test_mpi_backend_needs_two_ranks():
    pytest.importorskip("mpi4py")
    from powerdp.errors import ConfigError

    with pytest.raises(ConfigError, match="at least 2 ranks"):
        run_distributed(RunConfig(case="case14", rounds=1, backend="mpi"), reference=False)
