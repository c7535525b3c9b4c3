"""Ctrl-C and SIGTERM at any moment of a ``powerdp`` command, imports included: exit status 130 and one line
(issue 25, item 1). The console script is powerdp_entry:main, which installs the handlers before importing powerdp."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists() or not hasattr(signal, "SIGTERM"),
                                reason="needs Linux /proc to see when a process catches a signal")

ROOT = Path(__file__).resolve().parents[1]
# rounds enough to outlast the longest delay: the active set runs case14's 400 rounds in 0.6 s
COMMAND = [sys.executable, "-m", "powerdp_entry", "run", "case14", "--rounds", "20000", "--no-reference"]


def _caught(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler installed for ``signum`` (SigCgt of /proc/PID/status)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except OSError:
        pass
    return False


def _loaded(pid: int, library: str) -> bool:
    """Whether ``library`` (a path fragment of a shared object, e.g. pandas/_libs) is mapped in process ``pid``."""
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _start() -> subprocess.Popen:
    return subprocess.Popen(COMMAND, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def _wait_caught(proc: subprocess.Popen, deadline_s: float = 60.0) -> None:
    t0 = time.monotonic()
    while not _caught(proc.pid, signal.SIGTERM):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < deadline_s, "SIGTERM never handled"
        time.sleep(0.002)


def test_the_handlers_are_installed_before_the_heavy_imports():
    proc = _start()
    try:
        _wait_caught(proc)
        assert not _loaded(proc.pid, "pandas/_libs"), "SIGTERM is handled only once pandas is imported"
        assert not _loaded(proc.pid, "numpy/_core") and not _loaded(proc.pid, "numpy/core")
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
@pytest.mark.parametrize("delay", [0.0, 0.4, 1.5, 6.0], ids=["at-once", "imports", "setup", "rounds"])
def test_a_stop_signal_at_any_moment_exits_130_with_one_line(signum, delay):
    proc = _start()
    try:
        _wait_caught(proc)
        time.sleep(delay)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    said = [line for line in err.splitlines() if "interrupted" in line]
    assert len(said) == 1 and said[0].startswith("powerdp: "), err[-3000:]
