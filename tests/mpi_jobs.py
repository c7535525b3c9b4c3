"""How the MPI tests start an ``mpiexec`` job that must succeed, and what they report when it does not.

* Each rank gets one BLAS/OpenMP thread (``OMP_NUM_THREADS=1`` and friends), as an MPI deployment should:
  three ranks that each start a BLAS pool as wide as a CI host oversubscribe its cores and its memory.
* A failed job's message holds the tail of both streams: MPICH's ``mpiexec`` prints a rank's abnormal end
  ("EXIT STRING: Killed (signal 9)") on stdout, and the rank's own words, if any, on stderr.
* A job one of whose ranks was killed from outside (SIGKILL: hydra reports exit code 9 and "Killed (signal 9)";
  powerdp never sends it, a memory-pressed host's OOM killer does) is run once more from a clean output
  directory, with a warning naming the first attempt. Any other failure, or a second kill, fails the test.
  Tests that make a rank die on purpose (tests/test_mpi.py's lost-rank tests) call ``subprocess.run`` directly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest

ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}


def mpiexec() -> str:
    """The ``mpiexec`` (or ``mpirun``) on PATH; skips the test when mpi4py or the launcher is missing."""
    pytest.importorskip("mpi4py")
    exe = shutil.which("mpiexec") or shutil.which("mpirun")
    if exe is None:
        pytest.skip("mpiexec not found")
    return exe


def killed_from_outside(proc: subprocess.CompletedProcess) -> bool:
    """Did hydra end this job because a rank was killed by SIGKILL?"""
    return proc.returncode in (9, -9) and "Killed (signal 9)" in (proc.stdout or "")


def failure_message(proc: subprocess.CompletedProcess) -> str:
    """Exit status and the tail of both streams of a failed job."""
    return f"exit status {proc.returncode}\n--- stderr ---\n{(proc.stderr or '')[-2000:]}\n--- stdout ---\n{(proc.stdout or '')[-1500:]}"


def run_job(cmd: Sequence[str], *, out: Path | None = None, timeout: float = 600, env: dict | None = None,
            retry_kill: bool = True) -> subprocess.CompletedProcess:
    """Run ``cmd`` (an ``mpiexec`` or a serial ``python -m powerdp`` command) and assert that it succeeded.

    ``out``: the job's output directory, removed before the one re-run that follows a rank killed from outside.
    """
    env = {**(os.environ if env is None else env), **ONE_THREAD}
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=env)
    if retry_kill and killed_from_outside(proc):
        warnings.warn(f"an MPI rank was killed by SIGKILL from outside; running the job once more: {failure_message(proc)}",
                      stacklevel=2)
        if out is not None and Path(out).exists():
            shutil.rmtree(out)
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, failure_message(proc)
    return proc
