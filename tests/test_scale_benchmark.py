"""benchmarks/scale.py: its JSON carries the set-up and round figures in CPU seconds beside the wall times."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="CPU times of the hosts are read from /proc (Linux)")
def test_scale_reports_cpu_of_the_coordinator_and_of_each_host():
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--case", "case118", "--zones", "3", "--rounds", "4",
         "--backends", "serial,process", "--local-solvers", "clarabel"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {row["backend"]: row for row in map(json.loads, r.stdout.strip().splitlines())}
    serial, process = rows["serial"], rows["process"]
    for row in (serial, process):
        assert 0 < row["setup_cpu_s"] < 120 and row["setup_s"] > 0
        assert 0 < row["round_cpu_s"] < 60 and row["coordinator_round_cpu_s"] >= 0
    # serial: the coordinator does every zone's work; process: two hosts, the coordinator only relays
    assert serial["round_cpu_s"] == pytest.approx(serial["coordinator_round_cpu_s"], abs=2e-3)
    assert "host_round_cpu_s" not in serial
    assert len(process["host_round_cpu_s"]) == 2 and min(process["host_round_cpu_s"]) >= 0 and sum(process["host_round_cpu_s"]) > 0  # /proc counts 10 ms ticks
    assert process["coordinator_round_cpu_s"] < max(process["host_round_cpu_s"])
    assert process["setup_cpu_s"] > process["setup_cpu_coordinator_s"]  # the hosts built the zones
