"""Every command prints on a terminal that cannot encode its signs (PYTHONIOENCODING=ascii, latin-1, a C locale):
a sign the stream cannot encode is spelled in ASCII (powerdp.cli.streams), never a UnicodeEncodeError (issue 25)."""

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from powerdp.cli import main
from powerdp.cli.streams import spell_ascii

ROOT = Path(__file__).resolve().parents[1]


def test_ascii_spellings():
    assert spell_ascii("Σ_p f_p ‖w − Bz‖₂ ≤ ε², ρ·x → y … ×") == "sum_p f_p ||w - Bz||_2 <= eps^2, rho*x -> y ... x"
    assert spell_ascii("δ ξ ≥ ω λ μ ν σ η β ∞ é") == "delta xi >= omega lambda mu nu sigma eta beta inf e"
    assert spell_ascii("\u2603").isascii()  # anything else: its decomposition or "?"


SWEEP = """[sweep]
cases = ["case14"]
partitions = [{ zones = 3 }]
algorithms = ["objl"]
epsilons = [0.1]
seeds = [0]

[run]
rounds = 2
"""
AMP = ["privacy", "amplification", "--smooth", "0.18", "--strong", "0.18", "--strong-g", "0.2", "--penalty", "0.5",
       "--sigma", "1", "--delta-grad", "1"]

# the commands of the README (and their --help), each with what it prints that the encoding cannot hold
COMMANDS = {
    "cases": (["cases"], None),
    "solve-shedding": (["solve", "case14", "--objective", "shedding"], None),
    "solve-ac-check": (["solve", "case14", "--ac-check"], "-"),
    "solve-dc": (["solve", "case14", "--model", "dc"], "..."),
    "partition": (["partition", "case14", "--zones", "3", "--out", "T/zones.csv"], None),
    "run": (["run", "case14", "--rounds", "2", "--no-reference", "--out", "T/run"], "sum_p f_p"),
    "run-json-stdout": (["run", "case14", "--rounds", "2", "--no-reference", "--json", "-"], "sum_p f_p"),
    "run-dc": (["run", "case14", "--model", "dc", "--rounds", "20"], None),
    "learn": (["learn", "digits", "--rounds", "2", "--clients", "2", "--no-reference"], "sum_p f_p"),
    "learn-noisy-admm": (["learn", "elastic-net", "--algorithm", "noisy-admm", "--rounds", "5", "--users", "50", "--dim", "4"], None),
    "learn-vertical": (["learn", "breast_cancer", "--vertical", "--rounds", "3"], None),
    "privacy": (AMP, None),
    "sweep-plot": (["sweep", "T/sweep.toml", "--out", "T/sweep", "--plot"], None),
    "run-help": (["run", "--help"], None),
    "solve-help": (["solve", "--help"], None),
    "learn-help": (["learn", "--help"], None),
    "privacy-help": (["privacy", "amplification", "--help"], None),
}


def _in_encoding(monkeypatch, encoding: str, argv: list[str]) -> tuple[int, str, str]:
    """Run ``powerdp argv`` in this process with standard output and error that encode ``encoding`` strictly."""
    out = io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="strict", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="strict", write_through=True)
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    try:
        status = main(argv)
    except SystemExit as exc:  # --help
        status = exc.code
    return status, out.buffer.getvalue().decode(encoding), err.buffer.getvalue().decode(encoding)


# every command in ASCII; in Latin-1 (which has ², ·, ×, but not Σ, ‖, −, ε) the ones printing the most signs
CASES = [(name, "ascii") for name in COMMANDS] + [(name, "latin-1") for name in ("run", "solve-ac-check", "learn", "privacy", "run-help")]


@pytest.mark.parametrize("name, encoding", CASES)
def test_every_command_prints_in_any_encoding(monkeypatch, tmp_path, encoding, name):
    argv, spelled = COMMANDS[name]
    (tmp_path / "sweep.toml").write_text(SWEEP)
    argv = [str(tmp_path / a[2:]) if a.startswith("T/") else a for a in argv]
    status, out, err = _in_encoding(monkeypatch, encoding, argv)
    assert status == 0, err[-2000:]
    assert "Traceback" not in out + err and "UnicodeEncodeError" not in out + err
    assert out.strip() or name == "run-json-stdout"
    if spelled is not None and encoding == "ascii":
        assert spelled in out + err  # the sign was there, spelled in ASCII


def test_an_error_message_prints_in_ascii(monkeypatch, tmp_path):
    bad = tmp_path / "Σ.csv"
    bad.write_bytes(b"bus,zone\n1,\xe9\n")
    status, out, err = _in_encoding(monkeypatch, "ascii", ["partition", "case14", "--from", str(bad)])
    assert status == 2 and "sum.csv" in err and "not UTF-8 text: byte 0xe9 at line 2" in err, err


def _entry(*args: str) -> list[str]:
    return [sys.executable, "-m", "powerdp_entry", *args]


@pytest.mark.parametrize("env", [
    {"PYTHONIOENCODING": "ascii"},
    {"PYTHONIOENCODING": "latin-1"},
    {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""},
], ids=["ascii", "latin-1", "C-locale"])
def test_a_run_on_a_non_utf8_terminal_prints_and_writes_its_files(tmp_path, env):
    """The real streams of a new process (the C locale also makes the default file encoding ASCII)."""
    env = {**os.environ, **env}
    if not env.get("PYTHONIOENCODING"):
        env.pop("PYTHONIOENCODING")
    proc = subprocess.run(_entry("run", "case14", "--rounds", "2", "--no-reference", "--out", str(tmp_path / "r")),
                          capture_output=True, env=env, timeout=300, cwd=tmp_path)
    out, err = proc.stdout.decode("latin-1"), proc.stderr.decode("latin-1")
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "objective sum_p f_p" in out
    assert (tmp_path / "r" / "coordinator_view" / "summary.json").is_file()


def test_a_repeated_warning_is_shown_once(caplog):
    """A command that builds the same mechanism for each of many runs (the audit: 40 of them) says it once."""
    import warnings

    from powerdp.cli.output import route_python_warnings
    from powerdp.privacy import GaussianMechanism

    saved = warnings.showwarning
    try:
        route_python_warnings()
        with warnings.catch_warnings(), caplog.at_level("WARNING", logger="powerdp.warnings"):
            warnings.simplefilter("always")
            for _ in range(5):
                GaussianMechanism(1.0, 1.0, 1e-5)
            warnings.warn("another warning")
    finally:
        warnings.showwarning = saved
    lines = [r.getMessage() for r in caplog.records if r.name == "powerdp.warnings"]
    assert len(lines) == 2 and "epsilon=1 >= 1" in lines[0] and lines[1] == "another warning"


def test_every_sign_powerdp_prints_has_an_ascii_spelling():
    """The ASCII fallback turned § (and ⌊, µ, € ...) into ?: every non-ASCII character in powerdp's source now has a
    spelling."""
    chars = {ch for p in (ROOT / "powerdp").rglob("*.py") for ch in p.read_text(encoding="utf-8") if ord(ch) > 127}
    assert not [ch for ch in chars if "?" in spell_ascii(ch)], sorted(ch for ch in chars if "?" in spell_ascii(ch))
    assert spell_ascii("001 §10, ⌊x⌋") == "001 section 10, floor(x)"
