"""The sharing commands: solve/run --model dc and learn --vertical (JSON keys the checks use, exit statuses)."""

import json

import pytest

from powerdp.cli import main


def test_solve_dc_json(tmp_path):
    assert main(["solve", "case118", "--model", "dc", "--json", str(tmp_path / "s.json")]) == 0
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["objective"] == pytest.approx(125947.8814, rel=1e-8)
    assert len(doc["lmp_per_mwh"]) == 118


def test_run_dc_market_json_and_tables(tmp_path):
    out = tmp_path / "run"
    args = ["run", "case118", "--zones", "3", "--model", "dc", "--algorithm", "nonprivate", "--rounds", "150",
            "--json", str(tmp_path / "r.json"), "--out", str(out)]
    assert main(args) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert abs(doc["final_cost"] - doc["centralized_objective"]) / doc["centralized_objective"] < 1e-6
    assert doc["max_line_violation"] <= 1e-4 and doc["max_price_error"] < 1e-2
    import pandas as pd

    buses = pd.read_csv(out / "simulation_evaluation" / "buses.csv")  # the dispatch: the simulation's evaluation
    assert not (out / "buses.csv").exists() and sorted(p.name for p in (out / "coordinator_view").iterdir()) == [
        "history.csv", "summary.json"]
    assert {"lmp_per_mwh", "centralized_lmp_per_mwh"} <= set(buses.columns)
    assert buses["lmp_error_per_mwh"].abs().max() < 1e-2


def test_run_dc_refuses_an_unavailable_algorithm(capsys):
    assert main(["run", "case118", "--zones", "3", "--model", "dc", "--algorithm", "objl"]) == 2
    assert "outg" in capsys.readouterr().err


def test_learn_vertical_json(tmp_path):
    assert main(["learn", "breast_cancer", "--vertical", "--parties", "2", "--algorithm", "nonprivate",
                 "--json", str(tmp_path / "v.json")]) == 0
    doc = json.loads((tmp_path / "v.json").read_text())
    assert abs(doc["final_test_logloss"] - doc["centralized_test_logloss"]) < 1e-3
    assert doc["final_test_logloss"] < doc["party_alone_test_logloss"][0]


def test_learn_bad_blocks_exit_2(capsys):
    assert main(["learn", "breast_cancer", "--vertical", "--parties", "2", "--blocks", "10,10"]) == 2
    assert "--blocks" in capsys.readouterr().err


def test_run_dc_stops_at_tol(tmp_path):
    assert main(["run", "case118", "--zones", "3", "--model", "dc", "--tol", "1e-9", "--json", str(tmp_path / "r.json")]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["stopped"] == "converged" and doc["rounds"] < 200
    assert doc["max_price_error"] < 1e-6 and doc["imbalance_mw"] < 1e-5


@pytest.mark.parametrize("argv, named", [
    (["run", "case14", "--model", "dc", "--epsilon", "1"], "--epsilon"),
    (["run", "case14", "--model", "dc", "--target-epsilon", "1"], "--target-epsilon"),
    (["run", "case14", "--model", "dc", "--private-costs", "5"], "--private-costs"),
    (["learn", "breast_cancer", "--vertical", "--epsilon", "1"], "--epsilon"),
    (["learn", "breast_cancer", "--vertical", "--neighbours", "row", "--clip", "5"], "--clip, --neighbours"),
    (["learn", "breast_cancer", "--vertical", "--algorithm", "gaussian", "--neighbours", "row", "--clip", "5"], "--clip"),
    (["learn", "digits", "--epsilon", "1", "--clients", "2"], "--epsilon"),
], ids=["dc-epsilon", "dc-target", "dc-costs", "vertical-epsilon", "vertical-row-clip", "vertical-gaussian-row-clip",
        "learn-epsilon"])
def test_privacy_flags_of_a_non_private_run_are_refused(capsys, argv, named):
    """Issue 38, bug 8: a privacy flag with the default non-private algorithm ran "not private", exit 0, as if the
    flag had been read; the power-flow run refused the same. Now one line naming the flags, exit 2, no run."""
    status = main(["-q", *argv, "--rounds", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and err[0].startswith(f"powerdp: error: {named}: not used:"), err


def test_one_party_is_not_vertical_learning(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["learn", "breast_cancer", "--vertical", "--parties", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --parties: 1 is out of range: give a whole number >= 2" in err


def test_delta_is_per_step_and_target_delta_the_total(capsys, tmp_path):
    """``--delta`` meant δ per step in run and learn, the run's total δ in vertical learning and noisy-admm; ``--beta``
    a load's move in run and dispatch, the ADMM penalty in noisy-admm. One meaning each now: --delta per step,
    --target-delta total, --beta the neighbouring load's move (noisy-admm's penalty is --penalty, as in
    powerdp privacy amplification)."""
    base = ["learn", "breast_cancer", "--vertical", "--algorithm", "gaussian", "--rounds", "2"]
    assert main(["-q", *base, "--target-epsilon", "1", "--delta", "1e-6"]) == 2
    assert "--delta: not used: --delta is the δ per round of --epsilon" in capsys.readouterr().err
    assert main(["-q", *base, "--epsilon", "1", "--target-delta", "1e-6"]) == 2
    assert "--target-delta: not used" in capsys.readouterr().err
    out = tmp_path / "v.json"
    assert main(["-q", *base, "--target-epsilon", "1", "--target-delta", "1e-6", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["delta"] == 1e-6
    noisy = ["learn", "elastic-net", "--algorithm", "noisy-admm", "--users", "50", "--dim", "4", "--rounds", "5"]
    assert main(["-q", *noisy, "--delta", "1e-5"]) == 2
    capsys.readouterr()
    out = tmp_path / "n.json"
    assert main(["-q", *noisy, "--penalty", "0.7", "--target-delta", "1e-5", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["beta"] == 0.7 and doc["delta_total"] == 1e-5
    with pytest.raises(SystemExit):
        main(["-q", *noisy, "--beta", "0.7"])
