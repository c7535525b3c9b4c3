"""How the network tests start zone servers and coordinators as processes of their own, on 127.0.0.1 only.

* Ports: a block of free ports on 127.0.0.1 (each bound once to check), so that two runs of the suite do not collide.
* Every process started through :class:`Processes` is ended when the test ends, whatever happened (kill, then wait):
  no test leaves a server behind. Every wait is bounded.
* Each process gets one BLAS/OpenMP thread (a zone server on a 2-core machine beside two others).
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}


def need_grpc() -> None:
    pytest.importorskip("grpc", reason="the net extra (grpcio) is not installed: pip install -e '.[net]'")


def free_ports(n: int, tries: int = 200) -> int:
    """The first of ``n`` consecutive ports free on 127.0.0.1."""
    for _ in range(tries):
        base = random.randrange(20000, 60000 - n)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no block of free ports on 127.0.0.1")


def wait_listening(port: int, timeout: float = 120, proc: subprocess.Popen | None = None) -> None:
    """Wait until something listens at 127.0.0.1:port (a zone server has imported powerdp and bound its port)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the server on port {port} ended with status {proc.returncode}: {_tail(proc)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listens at 127.0.0.1:{port} after {timeout} s")


def _tail(proc) -> str:
    path = getattr(proc, "log_path", None)
    return Path(path).read_text()[-2000:] if path and Path(path).exists() else ""


class Processes:
    """Processes of one test: started with their output in a file, all ended at the test's end."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.procs: list[subprocess.Popen] = []
        self.env = {**os.environ, **ONE_THREAD}

    def start(self, args: list[str], name: str, script: list[str] | None = None, env: dict | None = None) -> subprocess.Popen:
        """``python -m powerdp ARGS`` (or ``python SCRIPT ARGS``: a script's own arguments first) in the background, its
        output in ``tmp/NAME.log``."""
        log = self.tmp / f"{name}.log"
        fh = open(log, "a")
        cmd = [sys.executable, *script] if script else [sys.executable, "-m", "powerdp"]
        proc = subprocess.Popen([*cmd, *args], stdout=fh, stderr=subprocess.STDOUT, env={**self.env, **(env or {})}, cwd=self.tmp)
        fh.close()
        proc.log_path = str(log)
        self.procs.append(proc)
        return proc

    def zone(self, dep: Path, zone: int, certs: Path, port: int, *extra: str, script: list[str] | None = None, env: dict | None = None,
             wait: bool = True) -> subprocess.Popen:
        proc = self.start(["zone", "serve", "--deployment", str(dep), "--zone", str(zone), "--certs", str(certs), *extra],
                          f"zone{zone}", script=script, env=env)
        if wait:
            wait_listening(port, proc=proc)
        return proc

    def run(self, args: list[str], timeout: float = 300, script: list[str] | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        """``python -m powerdp ARGS`` (or ``python SCRIPT ARGS``) in the foreground (bounded), its output captured."""
        cmd = [sys.executable, *script] if script else [sys.executable, "-m", "powerdp"]
        return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env={**self.env, **(env or {})},
                              cwd=self.tmp)

    def log(self, name: str) -> str:
        p = self.tmp / f"{name}.log"
        return p.read_text() if p.exists() else ""

    def end_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
