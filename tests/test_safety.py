"""Safe to stop, safe to re-run, errors instead of tracebacks (issue 14).

Stopping (workers die with their parent, Ctrl-C and SIGTERM stop cleanly), not
losing results (no silent overwrite, locked directories, resume and sweeps
refuse changed settings), one-line errors and the exit statuses 0/1/2/130.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import RunFailed, run_distributed
from powerdp.cli import main
from powerdp.errors import ConfigError

from .conftest import fail_local_solve

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX signals and /proc")
linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

# ----------------------------------------------------------------- helpers


def _powerdp(*args: str, **kw) -> subprocess.Popen:
    """``python -m powerdp ARGS`` in its own session (its own process group), pipes for stdout/stderr."""
    return subprocess.Popen(
        [sys.executable, "-m", "powerdp", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kw,
    )


@pytest.fixture
def spawn():
    """``spawn(*args)`` starts ``python -m powerdp ARGS``; its whole process group is killed at the end of the test."""
    procs = []

    def start(*args: str) -> subprocess.Popen:
        proc = _powerdp(*args)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the group outlives its leader: orphans included
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def _wait_for(pred, timeout: float = 60.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _history_rows(d: Path) -> int:
    try:
        return max(0, len((d / "coordinator_view" / "history.csv").read_text().strip().splitlines()) - 1)
    except FileNotFoundError:
        return 0


def _state(pid: int) -> str | None:
    """The /proc state letter of ``pid`` (None when it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()[0]


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z", "X")


def _children(pid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if int(fields[1]) == pid:
            out.append(int(p.name))
    return out


def _stderr_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture
def finished_run(tmp_path):
    """A finished 3-round case14 run in tmp_path/run (checkpoint every round)."""
    d = tmp_path / "run"
    run_distributed(RunConfig(case="case14", rounds=3, checkpoint_every=1), out=d, reference=False)
    return d


# ------------------------------------------------------- 1, 2: stopping a run


@posix_only
@linux_only
def test_workers_die_when_the_parent_is_killed(tmp_path, spawn):
    """SIGKILL of the coordinating process: no worker survives it for more than a short grace period."""
    d = tmp_path / "run"
    proc = spawn("-q", "run", "case14", "--backend", "process", "--workers", "2", "--rounds", "100000",
                    "--no-reference", "--checkpoint-every", "0", "--out", str(d))
    _wait_for(lambda: _history_rows(d) >= 2, what="two rounds")
    workers = [c for c in _children(proc.pid) if _alive(c)]
    assert len(workers) == 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    _wait_for(lambda: not any(_alive(w) for w in workers), timeout=5, what="the workers to end")


@posix_only
@linux_only
def test_parent_watchdog_without_prctl(tmp_path):
    """The watchdog alone (what other platforms rely on) ends an orphaned worker."""
    script = tmp_path / "orphan.py"
    script.write_text(
        "import multiprocessing as mp, os, sys, time\n"
        "from powerdp.engine.backends.process import die_with_parent\n"
        "def child(pid):\n"
        "    die_with_parent(pid, use_prctl=False, poll_s=0.2)\n"
        "    time.sleep(60)\n"
        "if __name__ == '__main__':\n"
        "    p = mp.get_context('fork').Process(target=child, args=(os.getpid(),))\n"
        "    p.start()\n"
        "    print(p.pid, flush=True)\n"
        "    time.sleep(0.5)\n"
        "    os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True)
    child = int(out.stdout.split()[0])
    try:
        _wait_for(lambda: not _alive(child), timeout=5, what="the orphan to end")
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


@posix_only
def test_sigterm_stops_after_the_round_with_checkpoint_and_one_line(tmp_path, spawn):
    d = tmp_path / "run"
    proc = spawn("run", "case14", "--rounds", "100000", "--no-reference", "--checkpoint-every", "100000", "--out", str(d))
    _wait_for(lambda: _history_rows(d) >= 3, what="three rounds")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    lines = _stderr_lines(err)
    setup = [line for line in lines if line.endswith("...")]  # setup stages
    assert len(lines) - len(setup) == 1 and "Traceback" not in err
    assert lines[-1].startswith("powerdp: interrupted after round ")
    n = _history_rows(d)
    assert f"round {n} of 100000" in lines[-1] and "--resume" in lines[-1]
    # history and checkpoint flushed: the checkpoint is of the last round in the history
    assert json.loads((d / "checkpoint" / "state.json").read_text())["round"] == n
    summary = json.loads((d / "coordinator_view" / "summary.json").read_text())["summary"]
    assert summary["stopped"] == "interrupted" and summary["rounds"] == n
    assert main(["-q", "run", "--resume", str(d), "--rounds", str(n + 2)]) == 0
    assert _history_rows(d) == n + 2


@posix_only
def test_ctrl_c_prints_one_line_and_leaves_a_resumable_run(tmp_path, spawn):
    """Ctrl-C at a terminal signals the whole process group: the parent and every worker."""
    d = tmp_path / "run"
    proc = spawn("run", "case14", "--backend", "process", "--workers", "2", "--rounds", "100000", "--no-reference",
                    "--checkpoint-every", "1", "--out", str(d))
    _wait_for(lambda: _history_rows(d) >= 2, what="two rounds")
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    lines = [line for line in _stderr_lines(err) if not line.endswith("...")]
    assert len(lines) == 1 and lines[0].startswith("powerdp: interrupted"), err
    assert (d / "checkpoint" / "state.json").is_file()
    n = _history_rows(d)
    assert main(["-q", "run", "--resume", str(d), "--rounds", str(n + 1)]) == 0


SLOW_SWEEP = """
[sweep]
cases = ["case14"]
partitions = [{ zones = 2 }, { zones = 3 }]
algorithms = ["objl"]
epsilons = [0.5]
seeds = [0]

[run]
rounds = ROUNDS
checkpoint_every = 1
"""


@posix_only
def test_ctrl_c_stops_a_sweep_with_one_line(tmp_path, spawn):
    spec = tmp_path / "s.toml"
    spec.write_text(SLOW_SWEEP.replace("ROUNDS", "100000"))
    out = tmp_path / "out"
    proc = spawn("sweep", str(spec), "--out", str(out), "--jobs", "2")
    _wait_for(lambda: sum(_history_rows(d) >= 1 for d in (out / "runs").glob("*")) == 2, what="both runs to start")
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert len(_stderr_lines(err)) == 1 and err.startswith("powerdp: interrupted"), err
    assert all((d / "checkpoint" / "state.json").is_file() for d in (out / "runs").glob("*"))


# ------------------------------------------------------ 3: after a failure


def _exit_in_round(monkeypatch, zone: int, rnd: int) -> None:
    """Zone ``zone``'s host dies (os._exit) in round ``rnd`` (fork workers inherit the patch)."""
    from powerdp.apps.power_flow import agent as agent_mod

    real = agent_mod.ZoneAgent.step

    def step(self, msg):
        if self.zone == zone and msg.round == rnd:
            os._exit(3)
        return real(self, msg)

    monkeypatch.setattr(agent_mod.ZoneAgent, "step", step)
    monkeypatch.setenv("POWERDP_START_METHOD", "fork")


@posix_only
def test_dead_worker_records_privacy_spend_and_says_no_checkpoint(tmp_path, monkeypatch):
    _exit_in_round(monkeypatch, zone=0, rnd=3)
    d = tmp_path / "run"
    cfg = RunConfig(case="case14", algorithm="objl", epsilon=0.1, rounds=6, backend="process", workers=2, checkpoint_every=0)
    with pytest.raises(RunFailed) as info:
        run_distributed(cfg, out=d, reference=False)
    msg = str(info.value)
    assert msg.count("round 3") == 1, msg  # "round 3:" once, not twice
    assert "last checkpoint" not in msg and "no checkpoint" in msg
    data = json.loads((d / "coordinator_view" / "summary.json").read_text())  # the ledger is the coordinator's
    # two noisy rounds were released by every zone: the spend is recorded
    assert data["summary"]["epsilon_total"] == {"0": pytest.approx(0.2), "1": pytest.approx(0.2), "2": pytest.approx(0.2)}
    assert set(data["privacy"]) == {"0", "1", "2"} and all(p["steps"] == 2 for p in data["privacy"].values())
    assert data["summary"]["stopped"] == "failed"


def test_successful_resume_removes_the_stale_failure(tmp_path, monkeypatch):
    fail_local_solve(monkeypatch, zone=1, round=3)
    cfg = RunConfig(case="case14", rounds=4, checkpoint_every=1)
    d = tmp_path / "run"
    with pytest.raises(RunFailed, match="last checkpoint kept"):
        run_distributed(cfg, out=d, reference=False)
    assert (d / "failure.txt").is_file()
    monkeypatch.undo()  # the solves work again
    run_distributed(cfg, out=d, resume=True, reference=False)
    assert not (d / "failure.txt").exists()
    assert json.loads((d / "coordinator_view" / "summary.json").read_text())["summary"]["stopped"] == "rounds"


# ------------------------------------------------- 4, 5, 6: not losing results


def test_out_holding_a_run_is_refused_unless_overwrite(finished_run, capsys):
    d = finished_run
    with pytest.raises(ConfigError, match="already holds a run"):
        run_distributed(RunConfig(case="case14", rounds=1), out=d, reference=False)
    assert main(["run", "case14", "--rounds", "1", "--no-reference", "--out", str(d)]) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--overwrite" in err
    assert _history_rows(d) == 3  # untouched
    (d / "notes.txt").write_text("mine")
    assert main(["-q", "run", "case14", "--rounds", "1", "--no-reference", "--overwrite", "--out", str(d)]) == 0
    assert _history_rows(d) == 1 and (d / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in (d / "zones.private").glob("zone_*/checkpoint/*")) == (
        ["releases.journal"] * 3 + ["round_1.json"] * 3 + ["round_1.npz"] * 3)  # the journals: the new run's (empty)


@posix_only
def test_a_directory_in_use_is_refused_and_a_dead_holder_does_not_block(tmp_path, capsys, spawn):
    from powerdp.runs.directory import DirectoryLock

    d = tmp_path / "run"
    d.mkdir()
    with DirectoryLock(d), pytest.raises(ConfigError, match=r"in use by another powerdp run \(pid \d+\)"):
        run_distributed(RunConfig(case="case14", rounds=1), out=d, reference=False)
    # another process writing the directory, then killed: its lock must not block
    proc = spawn("-q", "run", "case14", "--rounds", "100000", "--no-reference", "--out", str(d), "--overwrite")
    _wait_for(lambda: _history_rows(d) >= 1, what="the other run")
    assert main(["run", "case14", "--rounds", "1", "--no-reference", "--overwrite", "--out", str(d)]) == 2
    assert f"in use by another powerdp run (pid {proc.pid})" in capsys.readouterr().err
    proc.kill()
    proc.wait()
    assert main(["-q", "run", "case14", "--rounds", "1", "--no-reference", "--overwrite", "--out", str(d)]) == 0


def test_resume_refuses_flags_that_change_the_run(finished_run, capsys):
    d = finished_run
    assert main(["run", "--resume", str(d), "--algorithm", "objg", "--epsilon", "5"]) == 2
    err = capsys.readouterr().err
    assert "--algorithm (saved: algorithm = 'objl')" in err and "--epsilon (saved: epsilon = 0.1)" in err
    assert len(_stderr_lines(err)) == 1
    with pytest.raises(ConfigError, match="epsilon 5"):
        run_distributed(RunConfig(case="case14", rounds=4, epsilon=5, checkpoint_every=1), out=d, resume=True, reference=False)
    # shortening is refused, a finished run says so, extending (on another backend) works
    assert main(["run", "--resume", str(d), "--rounds", "2"]) == 2
    assert "already has 3 rounds" in capsys.readouterr().err
    assert main(["run", "--resume", str(d), "--no-reference"]) == 0
    assert "nothing to run" in capsys.readouterr().out
    assert main(["-q", "run", "--resume", str(d), "--rounds", "4", "--backend", "process", "--workers", "2", "--epsilon", "0.1"]) == 0
    assert _history_rows(d) == 4


SWEEP = """
[sweep]
cases = ["case14"]
partitions = [{ zones = 3 }]
algorithms = ["objl"]
epsilons = [0.5]
seeds = [0]

[run]
rounds = ROUNDS
"""


def test_sweep_with_changed_run_settings_is_refused_or_rerun(tmp_path, capsys):
    from powerdp.studies.sweep import load_sweep, run_sweep

    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(SWEEP.replace("ROUNDS", "3"))
    b.write_text(SWEEP.replace("ROUNDS", "2"))
    out = tmp_path / "out"
    run_sweep(load_sweep(a), out, jobs=1)
    assert main(["sweep", str(b), "--out", str(out), "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert "other settings" in err and "rounds 3 → 2" in err and "--overwrite" in err
    assert json.loads((out / "sweep.json").read_text())["base"]["rounds"] == 3  # nothing recorded
    assert set(pd.read_csv(out / "rounds.csv").groupby("run").size()) == {3}
    assert main(["-q", "sweep", str(b), "--out", str(out), "--jobs", "1", "--overwrite"]) == 0
    assert json.loads((out / "sweep.json").read_text())["base"]["rounds"] == 2
    assert set(pd.read_csv(out / "rounds.csv").groupby("run").size()) == {2}


# ---------------------------------------------------- 7: errors, not tracebacks


def _one_error(capsys, *needles: str) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert "Traceback" not in err
    lines = [line for line in _stderr_lines(err) if not line.endswith("...") and not line.startswith("powerdp: warning: ")]
    assert len(lines) == 1 and lines[0].startswith("powerdp: error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def test_output_paths_that_cannot_be_written(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["run", "case14", "--rounds", "1", "--out", str(afile)]) == 2
    _one_error(capsys, str(afile), "existing file")
    assert main(["solve", "case14", "--solution", str(afile)]) == 2
    _one_error(capsys, str(afile))
    assert main(["solve", "case14", "--json", str(afile / "r.json")]) == 2
    _one_error(capsys, str(afile))
    assert main(["run", "case14", "--rounds", "1", "--out", str(afile / "sub")]) == 2
    _one_error(capsys, str(afile))
    assert main(["run", "case14", "--rounds", "1", "--json", str(afile / "r.json")]) == 2
    _one_error(capsys, str(afile))
    spec = tmp_path / "s.toml"
    spec.write_text(SWEEP.replace("ROUNDS", "1"))
    assert main(["sweep", str(spec), "--out", str(afile / "sub")]) == 2
    _one_error(capsys, str(afile))
    assert main(["partition", "case14", "--zones", "3", "--out", str(afile / "z.csv")]) == 2
    _one_error(capsys, str(afile))


def test_plot_errors_and_a_single_run(finished_run, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["plot", str(finished_run), "--out", str(afile / "figs")]) == 2
    _one_error(capsys, str(afile))
    # a single run's directory, as the help says
    assert main(["-q", "plot", str(finished_run), "--out", str(tmp_path / "figs")]) == 0
    names = {p.name for p in (tmp_path / "figs").glob("*.png")}
    assert "trajectories_case14.png" in names and any(n.startswith("network_case14") for n in names)
    # one corrupt summary.json
    summary = finished_run / "coordinator_view" / "summary.json"
    summary.write_text('{"summary": {"rounds": 3, "fin')
    assert main(["plot", str(finished_run)]) == 2
    _one_error(capsys, str(summary))


@pytest.mark.parametrize(
    "target, content",
    [
        ("checkpoint/state.json", b"garbage"),
        ("checkpoint/state.npz", None),  # truncated
        ("zones.private/zone_1/checkpoint/round_3.npz", None),
        ("zones.private/zone_1/checkpoint/round_3.json", b"{"),
        ("config.json", b'{"case": "case14", "rounds": '),
    ],
)
def test_resume_from_damaged_files_is_a_one_line_error(finished_run, capsys, target, content):
    path = finished_run / target
    data = path.read_bytes()
    path.write_bytes(content if content is not None else data[: len(data) // 2])
    assert main(["run", "--resume", str(finished_run), "--rounds", "4"]) == 2
    _one_error(capsys, str(path))


@pytest.mark.parametrize(
    "line, field",
    [('rounds = "two"', "rounds"), ('epsilon = "0.5"', "epsilon"), ("rounds = true", "rounds"), ("zones = 2.5", "zones")],
)
def test_run_config_file_with_wrong_types(tmp_path, capsys, line, field):
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'[run]\ncase = "case14"\n{line}\n')
    assert main(["run", "--config", str(cfg)]) == 2
    _one_error(capsys, str(cfg), field)
    spec = tmp_path / "s.toml"
    spec.write_text(SWEEP.replace("rounds = ROUNDS", line))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o")]) == 2
    _one_error(capsys, str(spec), field)


def test_flags_given_explicitly_override_a_config_file_even_at_their_default(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[run]\ncase = "case14"\nepsilon = 0.5\nrounds = 2\n')
    out = tmp_path / "o"
    assert main(["-q", "run", "--config", str(cfg), "--epsilon", "0.1", "--no-reference", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["epsilon"] == 0.1


@posix_only
def test_partition_into_a_closed_pipe_is_quiet():
    proc = subprocess.Popen(
        [sys.executable, "-m", "powerdp", "partition", "case118", "--zones", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader is gone before powerdp writes (as `| head` after its lines)
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 141  # 128 + SIGPIPE, as a Unix tool that the pipe's end stopped


# ------------------------------------------------------------- 8: exit codes


def test_exit_statuses(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as info:  # bad input, refused as the command line is parsed
        main(["run", "case14", "--rounds", "0"])
    assert info.value.code == 2
    fail_local_solve(monkeypatch, zone=1, round=2)
    assert main(["run", "case14", "--rounds", "3", "--no-reference"]) == 1  # a failed local solve
    assert "zone 1, round 2" in capsys.readouterr().err
    monkeypatch.undo()
    if os.name == "posix":
        _exit_in_round(monkeypatch, zone=0, rnd=2)
        assert main(["run", "case14", "--rounds", "3", "--no-reference", "--backend", "process", "--workers", "2"]) == 1
        assert "died" in capsys.readouterr().err


# ----------------------------------------------------------------- 9: logging


def test_verbose_shows_powerdp_notes_and_no_third_party_flood(capfd):
    assert main(["-v", "run", "case14", "--rounds", "2", "--no-reference"]) == 0
    err = capfd.readouterr().err
    assert "jacobian_cb" not in err and "INFO" not in err
    assert "powerdp: note: " in err and "no thermal limit" in err  # data-cleaning notes
    assert len(err.splitlines()) < 40
    assert main(["run", "case14", "--rounds", "1", "--no-reference", "-q"]) == 0  # -q after the subcommand
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    assert main(["solve", "case14", "-v"]) == 0
    assert "taken as 1" in capfd.readouterr().err


# ------------------------------------------------------ 10: which partition


CASE14 = Path(__file__).resolve().parents[1] / "cases" / "case14.m"


def _island_case(tmp_path) -> Path:
    """case14 (its file says `function mpc = case14`) with bus 14 cut off: both its branches removed."""
    text = CASE14.read_text()
    for row in ("\t9\t14\t0.12711", "\t13\t14\t0.17093"):
        assert row in text
        text = text.replace(row, "%" + row)
    path = tmp_path / "island.m"
    path.write_text(text)
    return path


def test_bundled_partition_only_for_the_bundled_case(tmp_path):
    from powerdp.apps.power_flow.plan import resolve_config
    from powerdp.grid.loading import load_case
    from powerdp.grid.partition import partition

    mine = tmp_path / "mine.m"
    mine.write_text(CASE14.read_text())  # says `function mpc = case14`
    out = tmp_path / "o"
    run_distributed(RunConfig(case=str(mine), rounds=1), out=out, reference=False)
    saved = json.loads((out / "config.json").read_text())
    assert saved["partition"] is None and saved["partition_method"] == "modularity"
    partition(load_case(str(mine)), zones=3, method="modularity").to_csv(tmp_path / "auto.csv")
    assert (out / "partition.csv").read_text() == (tmp_path / "auto.csv").read_text()
    # the bundled case gets its bundled partition, recorded by name
    assert resolve_config(RunConfig(case="case14")).partition == "case14_3zones"
    # a user's island file: whatever happens, no blame on a bundled file the user never gave
    try:
        run_distributed(RunConfig(case=str(_island_case(tmp_path)), rounds=1), out=tmp_path / "i", reference=False)
    except Exception as exc:  # noqa: BLE001
        assert "case14_3zones" not in str(exc), exc


def test_method_is_honoured_and_partition_agrees_with_run(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["-q", "run", "case14", "--method", "spectral", "--rounds", "1", "--no-reference", "--out", str(out)]) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["partition"] is None and saved["partition_method"] == "spectral"
    assert main(["-q", "partition", "case14", "--zones", "3", "--method", "spectral", "--out", str(tmp_path / "s.csv")]) == 0
    assert (tmp_path / "s.csv").read_text() == (out / "partition.csv").read_text()
    assert main(["-q", "partition", "case118", "--zones", "3", "--out", str(tmp_path / "p.csv")]) == 0
    out118 = tmp_path / "o118"
    from powerdp.apps.power_flow.plan import resolve_config

    cfg = resolve_config(RunConfig(case="case118", zones=3))
    assert cfg.partition == "case118_3areas"
    from powerdp.apps.power_flow.plan import resolve_partition
    from powerdp.grid.loading import load_case

    resolve_partition(load_case("case118"), cfg).to_csv(out118)
    assert (tmp_path / "p.csv").read_text() == out118.read_text()


# ------------------------------------------- 11: exact ADMM converges by default


def test_exact_cost_converges_at_its_defaults():
    res = run_distributed(RunConfig(case="case14", algorithm="exact", objective="cost", rounds=40))
    s = res.summary
    assert s["centralized_objective"] == pytest.approx(8075.12, abs=0.01)
    assert abs(s["relative_gap_to_centralized"]) <= 1e-3
    assert res.config.rho == pytest.approx(1025.0)  # 0.25 x median marginal cost ($/h per p.u.)


def test_adaptive_rho_recovers_from_a_too_small_penalty():
    """Residual balancing on relative residuals raises ρ = 100 on the $/h scale (it used to lower it to 12.5)."""
    cfg = RunConfig(case="case14", algorithm="exact", objective="cost", rho=100.0, rho_schedule="adaptive", rounds=60)
    res = run_distributed(cfg)
    assert res.history["rho"].iloc[-1] > 100.0
    assert abs(res.summary["relative_gap_to_centralized"]) <= 1e-3


# ------------------------------------------------- 13: inputs that deserve a warning


def test_warnings_for_islands_missing_reference_and_pandapower(tmp_path, caplog, capsys):
    import logging

    from powerdp.grid.loading import load_case

    text = CASE14.read_text()
    island = _island_case(tmp_path)
    caplog.set_level(logging.WARNING, logger="powerdp")
    load_case(str(island))
    assert "2 islands" in caplog.text and "bus(es) 14 are cut off" in caplog.text
    assert main(["solve", str(island)]) == 1
    out = capsys.readouterr().out
    assert "objective   none: no solution" in out
    noref = tmp_path / "noref.m"
    assert "\t1\t3\t0\t0\t0" in text
    noref.write_text(text.replace("\t1\t3\t0\t0\t0", "\t1\t2\t0\t0\t0", 1))
    caplog.clear()
    load_case(str(noref))
    assert "no reference bus" in caplog.text
    pytest.importorskip("pandapower")
    caplog.clear()
    load_case("pandapower:example_simple")
    assert "has no OPF limits" in caplog.text and "max_q_mvar" in caplog.text
    assert main(["solve", "pandapower:example_simple"]) == 2
    err = _one_error(capsys, "poly_cost")
    assert "mpc.gencost" not in err


# ---------------------------------------------------------- 14: readable output


def test_run_output_says_what_each_number_is(capsys):
    assert main(["run", "case14", "--algorithm", "objg", "--epsilon", "0.5", "--rounds", "2"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "shedding" in out and "Σ(p.u.²)" in out
    assert "consensus residual ‖w − Bz‖₂" in out and "dual residual" in out
    assert "total spent per zone" in out and "δ " in out
    assert "centralized reference solve" in captured.err  # setup progress
