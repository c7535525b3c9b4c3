"""Sweeps: TOML validation before any solve, the grid, resume, tidy tables."""

import pandas as pd
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.errors import ConfigError
from powerdp.studies.sweep import load_sweep, run_sweep

SMALL = """
[sweep]
cases = ["case14"]
partitions = [{ zones = 2 }, { zones = 3 }]
algorithms = ["objl", "outl"]
epsilons = [0.5]
seeds = [0]

[run]
rounds = 3
sensitivity = "paper"
"""


def write(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    spec = load_sweep(write(tmp, SMALL))
    runs = run_sweep(spec, tmp / "out", jobs=2)
    return tmp / "out", spec, runs


def test_grid_runs_and_tables(small_sweep):
    out, spec, runs = small_sweep
    assert len(spec.configs()) == 4 and len(runs) == 4
    rounds = pd.read_csv(out / "rounds.csv")
    assert len(rounds) == 4 * 3
    for col in ("run", "case", "algorithm", "epsilon", "seed", "round", "objective", "feasibility", "noise_magnitude"):
        assert col in rounds.columns
    assert set(runs["n_zones"]) == {2, 3}
    assert (out / "sweep.json").is_file()
    for run in runs["run"]:
        assert (out / "runs" / run / "config.json").is_file()


def test_interrupted_sweep_skips_finished_runs(small_sweep, monkeypatch):
    out, spec, _ = small_sweep
    import powerdp.studies.sweep as sweep_mod

    def boom(*a, **k):
        raise AssertionError("a finished run was run again")

    monkeypatch.setattr(sweep_mod, "_one", boom)
    runs = run_sweep(spec, out, jobs=1)
    assert len(runs) == 4


@pytest.mark.parametrize(
    "text, match",
    [
        (SMALL.replace("seeds = [0]", "seeds = [0]\ncolour = 1"), r"unknown key\(s\) colour in \[sweep\]"),
        (SMALL.replace("rounds = 3", "roundz = 3"), r"unknown key\(s\) roundz in \[run\]"),
        (SMALL.replace("epsilons = [0.5]", "epsilons = [0.5, 0.0]"), "epsilon = 0.0: must be a positive number"),
        (SMALL.replace('cases = ["case14"]', 'cases = ["/nonexistent/case.m"]'), "not a file"),
        (SMALL.replace("{ zones = 3 }", "{ zones = 40 }"), "40"),
        (SMALL.replace("[run]", "[runn]"), r"unknown table\(s\) runn"),
        (SMALL.replace("rounds = 3", "rounds = 3\nalgorithm = 'objg'"), "which the \\[sweep\\] grid sets"),
        (SMALL.replace("epsilons = [0.5]", "epsilons = [0.5]\ntarget_epsilons = [1.0]"), "not both"),
        (SMALL.replace("epsilons = [0.5]", "target_epsilons = [-1.0]"), "target_epsilon = -1.0: must be a positive"),
    ],
)
def test_bad_sweep_config_fails_before_any_solve(tmp_path, monkeypatch, text, match):
    import powerdp.studies.sweep as sweep_mod

    monkeypatch.setattr(sweep_mod, "_one", lambda *a, **k: pytest.fail("a run started"))
    with pytest.raises(ConfigError, match=match):
        spec = load_sweep(write(tmp_path, text))
        run_sweep(spec, tmp_path / "out", jobs=1)


def test_budget_sweep_compares_mechanisms_at_one_total(tmp_path):
    """target_epsilons: every run spends the same total ε; [run] target_delta is the δ of every run that can use one."""
    from powerdp.cli import main

    text = SMALL.replace('algorithms = ["objl", "outl"]', 'algorithms = ["objl", "objg", "outl"]').replace(
        "epsilons = [0.5]", "target_epsilons = [1.0, 4.0]").replace("{ zones = 2 }, ", "").replace('sensitivity = "paper"', "target_delta = 1e-5")
    spec = load_sweep(write(tmp_path, text))
    cfgs = dict(spec.configs())
    assert len(cfgs) == 6 and all(name.split("_")[-3].startswith("total") for name in cfgs)
    assert {c.target_delta for c in cfgs.values() if c.algorithm != "outl"} == {1e-5}
    assert {c.target_delta for c in cfgs.values() if c.algorithm == "outl"} == {None}  # Laplace OutPert: pure ε
    runs = run_sweep(spec, tmp_path / "out", jobs=2)
    for _, r in runs.iterrows():
        assert 0.99 * r["target_epsilon"] <= r["epsilon_total"] <= r["target_epsilon"] * (1 + 1e-9)
    assert main(["plot", str(tmp_path / "out"), "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "privacy_budget_case14.png").is_file()


def test_cli_sweep_and_plot(small_sweep, capsys, tmp_path):
    from powerdp.cli import main

    out, _, _ = small_sweep
    assert main(["plot", str(out), "--out", str(tmp_path / "figs")]) == 0
    names = {p.name for p in (tmp_path / "figs").glob("*.png")}
    assert {"trajectories_case14.png", "partition_sensitivity_case14.png"} <= names
    assert any(n.startswith("network_case14") for n in names)
    assert main(["sweep", str(write(tmp_path, SMALL.replace("rounds = 3", "rounds = 0"))), "--out", str(tmp_path / "x")]) == 2
    assert "rounds" in capsys.readouterr().err


def test_run_config_file(tmp_path, capsys):
    from powerdp.cli import main

    cfg = write(tmp_path, '[run]\ncase = "case14"\nrounds = 2\nalgorithm = "objg"\n', "run.toml")
    assert main(["run", "--config", str(cfg), "--rounds", "3", "--no-reference", "--out", str(tmp_path / "o")]) == 0
    import json

    saved = json.loads((tmp_path / "o" / "config.json").read_text())
    assert saved["algorithm"] == "objg" and saved["rounds"] == 3  # file value, flag override
    bad = write(tmp_path, '[run]\ncase = "case14"\nepsilonn = 1\n', "bad.toml")
    assert main(["run", "--config", str(bad)]) == 2
    assert "unknown key(s) epsilonn" in capsys.readouterr().err


def test_bundled_sweep_config_produces_every_figure(tmp_path):
    """examples/sweep_small.toml (shortened here) + powerdp plot draw all four figure types."""
    from pathlib import Path

    from powerdp.studies.plots import plot_sweep
    from powerdp.studies.sweep import SweepSpec

    spec = load_sweep(Path(__file__).resolve().parents[1] / "examples" / "sweep_small.toml")
    assert len(spec.epsilons) > 1 and len(spec.partitions) > 1
    short = SweepSpec(**{**spec.to_dict(), "seeds": [0], "base": {**spec.base, "rounds": 2}})
    run_sweep(short, tmp_path / "out", jobs=2)
    names = {p.name for p in plot_sweep(tmp_path / "out")}
    for prefix in ("trajectories_", "privacy_utility_", "partition_sensitivity_", "network_"):
        assert any(n.startswith(prefix) for n in names), prefix


def test_an_unfinished_run_of_a_sweep_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """A sweep re-run continues a run that has a checkpoint (state.json/.npz) instead of starting it again."""
    from powerdp.apps.power_flow import runner as runner_mod
    from powerdp.studies import sweep as sweep_mod

    calls = []
    real = runner_mod.run_distributed

    def spy(cfg, **kw):
        calls.append(kw["resume"])
        return real(cfg, **kw)

    monkeypatch.setattr(runner_mod, "run_distributed", spy)
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", epsilon=0.5, rounds=2, checkpoint_every=1, seed=0)
    out = tmp_path / "sw"
    assert sweep_mod._one("r", cfg, str(out)) == ("r", None)
    assert sweep_mod._one("r", cfg.replace(rounds=3), str(out)) == ("r", None)
    assert calls == [False, True]


def test_a_sweep_with_an_automatic_shedding_weight_resumes(tmp_path):
    """A run records the ω it resolved (cost+shedding's automatic weight); the sweep that left ω to it still resumes
    over it instead of calling it a run made with other settings."""
    from powerdp.studies.sweep import SweepSpec, changed_runs, run_sweep

    spec = SweepSpec(cases=["case14"], partitions=[{"zones": 2}], algorithms=["exact"], seeds=[0],
                     base={"objective": "cost+shedding", "rounds": 2, "local_solver": "clarabel"})
    run_sweep(spec, tmp_path / "s", jobs=1)
    assert changed_runs(spec, tmp_path / "s") == {}
    other = SweepSpec(cases=["case14"], partitions=[{"zones": 2}], algorithms=["exact"], seeds=[0],
                      base={"objective": "cost+shedding", "rounds": 2, "local_solver": "clarabel", "shedding_weight": 1e6})
    assert "shedding_weight" in next(iter(changed_runs(other, tmp_path / "s").values()))


def test_the_sweep_says_what_its_runs_epsilon_means(tmp_path, capsys):
    """examples/sweep_small.toml runs outl with sensitivity "paper" (no proven bound) and seeded noise: each single run
    says so, the sweep's output said nothing. Now one warning per kind, with the number of runs."""
    from powerdp.cli import main

    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\ncases = ["case14"]\npartitions = [{ zones = 3 }]\nalgorithms = ["objl", "outl"]\n'
                    'epsilons = [0.1]\nseeds = [0]\n\n[run]\nrounds = 1\nsensitivity = "paper"\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--jobs", "1"]) == 0
    err = capsys.readouterr().err
    assert "sensitivity 'paper' with output perturbation is not a proven bound" in err and "(1 of the sweep's runs)" in err
    assert "seeded noise" not in err  # every sweep is seeded: said nowhere
