"""The README is a five-minute tour whose commands work: every shell block marked as an example runs as written.

A block is marked by an HTML comment on the line before its fence: ``<!-- example -->`` (run in the default suite),
``<!-- example: slow -->`` (run with ``pytest -m slow``), ``<!-- example: setup -->`` (the first set-up command:
``pip install .`` into a temporary folder, then its command with that installation first on the path; slow) and
``<!-- example: ci -->`` (the development command, which ``.ci/run`` runs: checked to be the same commands). Each
example block runs in one bash (``set -e``: every line must succeed) in a fresh folder holding a link to the
repository's ``examples/``, with this interpreter's ``powerdp`` first on ``PATH``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MARKED = re.compile(r"<!-- example(?:: (\w+))? -->\n```(?:sh|bash)\n(.*?)```", re.S)
KINDS = {None, "slow", "setup", "ci"}


def _blocks(kind: str | None) -> list[str]:
    return [body.strip() for k, body in MARKED.findall(README) if (k or None) == kind]


def _run(script: str, cwd: Path, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    (cwd / "examples").symlink_to(ROOT / "examples")
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PATH": path, **(env or {})})


def test_the_readme_is_a_short_tour():
    """At most 2 000 words (``wc -w``), every marker known, every local link pointing at a file that exists."""
    assert len(README.split()) <= 2000, len(README.split())
    kinds = set(re.findall(r"<!-- example(?:: (\w+))? -->", README))
    assert {k or None for k in kinds} <= KINDS, kinds
    assert len(MARKED.findall(README)) == README.count("<!-- example"), "a marker not followed by a shell block"
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


@pytest.mark.parametrize("block", [
    *_blocks(None), *(pytest.param(b, marks=pytest.mark.slow) for b in _blocks("slow")),
], ids=lambda b: b.splitlines()[0][:60])
def test_every_example_runs_as_written(tmp_path, block):
    proc = _run(block, tmp_path)
    assert proc.returncode == 0, f"{block}\nexit {proc.returncode}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.slow
def test_the_first_set_up_command_installs_and_runs_the_main_job(tmp_path):
    """``pip install . && powerdp run case118 ...``: the wheel built from this tree (into a temporary folder, the
    dependencies being this environment's) runs the main job, and its summary reports the total ε the README states."""
    (line,) = _blocks("setup")
    install, command = (part.strip() for part in line.split("&&", 1))
    assert install == "pip install ." and command.startswith("powerdp run case118")
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(ROOT)]
    subprocess.run(pip, check=True, capture_output=True, timeout=900)
    work = tmp_path / "work"
    work.mkdir()
    proc = _run(command, work, env={"PYTHONPATH": str(site), "PATH": f"{site / 'bin'}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "zone 0: ε 10," in proc.stdout, proc.stdout[-2000:]  # 100 rounds of 0.1 per step: the README's total


def test_the_development_command_is_what_ci_runs():
    (line,) = _blocks("ci")
    assert line == 'pip install -e ".[dev]" && pytest'
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install -e ".[dev]"' in ci and "run_pytest\n" in ci
