"""Every figure in docs/ comes from a command docs/results/README.md names, and that command still draws it.

The table "Every figure in docs/ comes from a command" (docs/results/README.md, linked from the README) maps each
figure to its command. Here
each command runs in a reduced form (2 rounds, one seed, few runs; the benchmark scripts' own flags for
that, into a temporary --out) and must write a figure of the name the table gives; a figure in docs/
that the table does not list fails the first test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = (ROOT / "docs" / "results" / "README.md").read_text(encoding="utf-8")


def _table_rows() -> list[str]:
    start = RESULTS.index("Every figure in `docs/` comes from a command")
    block = RESULTS[start:].split("\n\n", 2)[1]
    return [ln for ln in block.splitlines() if ln.startswith("| `docs/")]


def _pattern(entry: str) -> re.Pattern:
    return re.compile("^" + re.escape(entry).replace(r"<case>", r"\w+").replace(r"<E>", r"\d+").replace(r"\*", r"[^/]+") + "$")


def test_every_figure_in_docs_has_a_command():
    rows = _table_rows()
    entries = [re.match(r"\| `([^`]+)`", r).group(1) for r in rows]
    assert "docs/trajectories_case14.png" in entries
    for png in sorted(ROOT.glob("docs/**/*.png")):
        rel = png.relative_to(ROOT).as_posix()
        assert any(_pattern(e).match(rel) for e in entries), f"{rel} is in docs/ but docs/results/README.md names no command for it"
    for e in entries:
        assert any(_pattern(e).match(p.relative_to(ROOT).as_posix()) for p in ROOT.glob("docs/**/*.png")), f"{e}: no such figure"


def test_sweep_small_still_draws_trajectories(tmp_path):
    """`powerdp sweep examples/sweep_small.toml --out sweep_out && powerdp plot sweep_out`, on 2 runs of 2 rounds."""
    from powerdp.cli import main

    text = (ROOT / "examples" / "sweep_small.toml").read_text()
    assert "powerdp sweep examples/sweep_small.toml --out sweep_out && powerdp plot sweep_out" in text
    text = re.sub(r"rounds = \d+", "rounds = 2", text)
    text = re.sub(r"seeds = \[.*\]", "seeds = [0]", text)
    text = re.sub(r"epsilons = \[.*\]", "epsilons = [0.1]", text)
    text = re.sub(r"partitions = \[.*\]", "partitions = [{ zones = 3 }]", text)
    spec = tmp_path / "sweep_small.toml"
    spec.write_text(text)
    out = tmp_path / "sweep_out"
    assert main(["-q", "sweep", str(spec), "--out", str(out), "--jobs", "1"]) == 0
    assert main(["-q", "plot", str(out)]) == 0
    assert (out / "figures" / "trajectories_case14.png").stat().st_size > 10_000


def test_paper_script_still_draws_its_figure(tmp_path):
    """`python examples/paper_power_flow.py --out paper_out --jobs 2`, on case14, 2 runs of 2 rounds."""
    cmd = [
        sys.executable, str(ROOT / "examples" / "paper_power_flow.py"), "--out", str(tmp_path), "--cases", "case14",
        "--seeds", "1", "--rounds", "2", "--local-updates", "1", "--epsilons", "0.1", "--algorithms", "objl,outl", "--jobs", "1",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "figure_case14_E1_sound.png").stat().st_size > 10_000


def test_budget_benchmark_still_draws_its_figure(tmp_path):
    """`python benchmarks/utility.py budget --out budget_sweep --jobs 2 && powerdp plot budget_sweep/delta`, reduced."""
    from powerdp.cli import main

    cmd = [
        sys.executable, str(ROOT / "benchmarks" / "utility.py"), "budget", "--out", str(tmp_path), "--case", "case14",
        "--seeds", "1", "--rounds", "2", "--algorithms", "objg", "--budgets", "1", "10", "--jobs", "1",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert main(["-q", "plot", str(tmp_path / "delta")]) == 0
    assert (tmp_path / "delta" / "figures" / "privacy_budget_case14.png").stat().st_size > 10_000



def _script(tmp_path: Path, script: str, *args: str, timeout: int = 120) -> None:
    """Run ``python benchmarks/<script> <args>`` as docs/results/README.md says (PYTHONPATH = the checkout); it must exit 0."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True, timeout=timeout,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]


def test_amplification_benchmark_still_draws_its_figure(tmp_path):
    """`python benchmarks/amplification.py --out amplification_out`, on 5 runs of 20 iterations, no audit."""
    _script(tmp_path, "amplification.py", "--out", str(tmp_path), "--runs", "5", "--iterations", "20", "--skip-audit")
    assert (tmp_path / "amplification_convergence.png").stat().st_size > 10_000
    table = (tmp_path / "amplification_table1.csv").read_text().splitlines()
    assert len(table) == 1 + 4  # the header and Table 1's four (μ, β) rows
    assert not (tmp_path / "amplification_audit.json").exists()


@pytest.mark.parametrize("dataset", ["digits", "mnist"])
def test_learning_paper000_still_draws_its_figure(tmp_path, dataset):
    """`python benchmarks/learning_claims.py paper000 --dataset D ... --out learning_out && ... figures --out learning_out`,
    on one seed, two ε̄ and 2 rounds."""
    import pandas as pd

    _script(tmp_path, "learning_claims.py", "paper000", "--dataset", dataset, "--out", str(tmp_path), "--rounds", "2", "--seeds", "1",
            "--epsilons", "0.1", "1", "--evaluate-every", "1")
    _script(tmp_path, "learning_claims.py", "figures", "--out", str(tmp_path))
    assert (tmp_path / f"learning_paper000_{dataset}.png").stat().st_size > 10_000
    df = pd.read_csv(tmp_path / "learning_paper000.csv")
    assert len(df) == 2 * 2 * 2  # ε̄ × E ∈ {1, 5} × {objg, outg}
    assert set(df.dataset) == {dataset} and set(df.rounds) == {2} and set(df.seed) == {0}


def test_learning_budget_still_draws_its_figure(tmp_path):
    """`python benchmarks/learning_claims.py budget --rounds 200 --out learning_out && ... figures --out learning_out`,
    on one seed, 2 rounds and 2 DP-GD steps."""
    import pandas as pd

    _script(tmp_path, "learning_claims.py", "budget", "--out", str(tmp_path), "--rounds", "2", "--seeds", "1", "--targets", "1", "10",
            "--dpgd-steps", "2", "--evaluate-every", "1")
    _script(tmp_path, "learning_claims.py", "figures", "--out", str(tmp_path))
    assert (tmp_path / "learning_budget.png").stat().st_size > 10_000
    df = pd.read_csv(tmp_path / "learning_budget.csv")
    assert len(df) == 2 * (5 + 1)  # total ε × (five algorithms + centralized DP-GD)
    private = df[~df.algorithm.str.startswith("centralized")]
    assert ((private.epsilon_total - private.target_epsilon).abs() <= 1e-6 * private.target_epsilon).all()  # the budget is spent, not exceeded


def test_market_benchmark_still_draws_its_figure(tmp_path):
    """`python benchmarks/market_dp.py --out market_out`, on case118 only, 2 rounds, one seed, one ε."""
    import pandas as pd

    _script(tmp_path, "market_dp.py", "--out", str(tmp_path), "--cases", "case118", "--rounds", "2", "--seeds", "1", "--epsilons", "1")
    assert (tmp_path / "market_dp.png").stat().st_size > 10_000
    df = pd.read_csv(tmp_path / "market_dp.csv")
    assert list(df.epsilon) == [float("inf"), 1.0] and set(df["rounds"]) == {2}
    assert (tmp_path / "market_dp_summary.csv").exists()


def test_vertical_benchmark_still_draws_its_figure(tmp_path):
    """`python benchmarks/vertical_dp.py --out vertical_out`, on the first configuration, two seeds, one ε."""
    import pandas as pd

    _script(tmp_path, "vertical_dp.py", "--out", str(tmp_path), "--configs", "1", "--seeds", "2", "--epsilons", "1")
    assert (tmp_path / "vertical_dp.png").stat().st_size > 10_000
    df = pd.read_csv(tmp_path / "vertical_dp.csv")
    assert len(df) == 2 and set(df.seed) == {1, 2}
    assert (df.epsilon_spent - 1.0).abs().max() < 1e-6  # the accountant spends the total asked for
