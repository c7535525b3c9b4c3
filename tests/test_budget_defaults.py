"""What a run uses when it names no algorithm: with a total budget, the mechanism that measured best at a total
budget (docs/results/utility.md, docs/results/dispatch.md); without one, as before."""

from __future__ import annotations

import json

import pytest

from powerdp.apps.dispatch.config import default_algorithm as dispatch_default
from powerdp.apps.power_flow.config import BUDGET_ALGORITHM, default_algorithm
from powerdp.cli import main


def test_run_defaults():
    assert default_algorithm(None) == "objl"
    assert default_algorithm(1.0) == BUDGET_ALGORITHM == "totl"


def test_dispatch_defaults():
    assert dispatch_default(None, None, "user") == "nonprivate"
    assert dispatch_default(1.0, 1e-5, "event") == "totl"  # one release a period: Laplace's std 1.4 β against 3.7 β
    assert dispatch_default(1.0, 1e-5, "user") == "totg"  # 96 releases composed: Gaussian 36.6 β against 50.8 β
    assert dispatch_default(1.0, None, "user") == "totl"


def test_a_budget_run_without_an_algorithm_is_the_measured_best(tmp_path, capsys):
    js = tmp_path / "r.json"
    assert main(["-q", "run", "case14", "--zones", "2", "--objective", "cost+shedding", "--target-epsilon", "1",
                 "--rounds", "3", "--local-solver", "clarabel", "--no-ac-evaluation", "--json", str(js)]) == 0
    record = json.loads(js.read_text())
    assert record["algorithm"] == "totl" and record["epsilon_total"] == {"0": 1.0, "1": 1.0}
    assert main(["-q", "run", "case14", "--zones", "2", "--rounds", "2", "--no-reference", "--json", str(js), "--force"]) == 0
    assert json.loads(js.read_text())["algorithm"] == "objl"


def test_a_config_file_without_an_algorithm_follows_the_same_rule(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[run]\ncase = "case14"\nzones = 2\nobjective = "cost+shedding"\ntarget_epsilon = 1.0\nrounds = 2\n'
                   'local_solver = "clarabel"\n')
    js = tmp_path / "r.json"
    assert main(["-q", "run", "--config", str(cfg), "--no-reference", "--no-ac-evaluation", "--json", str(js)]) == 0
    assert json.loads(js.read_text())["algorithm"] == "totl"


def test_help_says_so(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "with --target-epsilon, totl, the mechanism that measured best at a total budget" in text
    assert "--no-ac-evaluation" in text
    with pytest.raises(SystemExit):
        main(["dispatch", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "with it the mechanism that measured best" in text
