"""Learning on a user's own data (issue 28): non-private defaults that reach the centralized model, per-column
public bounds and the warning when clipping dominates, the process backend, and ``powerdp audit DATASET``."""

import json
import logging

import numpy as np
import pandas as pd
import pytest

from powerdp.apps.learning import LearnConfig
from powerdp.apps.learning.data import load_dataset
from powerdp.apps.learning.runner import run_federated
from powerdp.cli import main
from powerdp.cli.learn import audit_as_learn
from powerdp.errors import ConfigError

SCALES = np.logspace(-3, 4, 8)  # the columns' raw scales: 1e-3 .. 1e4


def _wide_csv(tmp_path, n=600, K=3, seed=0):
    """A CSV whose columns span 1e-3 to 1e4, a bounds file declaring ±5 scales, and the data's own label rule."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, len(SCALES)))
    y = np.argmax(Z @ rng.normal(size=(len(SCALES), K)) + 0.5 * rng.gumbel(size=(n, K)), axis=1)
    frame = pd.DataFrame(Z * SCALES, columns=[f"s{j}" for j in range(len(SCALES))])
    frame["label"] = y
    data = tmp_path / "wide.csv"
    frame.to_csv(data, index=False)
    bounds = tmp_path / "bounds.csv"
    pd.DataFrame({"column": frame.columns[:-1], "low": -5 * SCALES, "high": 5 * SCALES}).to_csv(bounds, index=False)
    return data, bounds


def _wine_csv(tmp_path):
    from sklearn.datasets import load_wine

    d = load_wine()
    cols = [n.replace("/", "_") for n in d.feature_names]
    frame = pd.DataFrame(d.data, columns=cols)
    frame["label"] = d.target
    data = tmp_path / "wine.csv"
    frame.to_csv(data, index=False)
    lo, hi = d.data.min(axis=0), d.data.max(axis=0)  # ranges a user knows in advance (here: padded by 10 %)
    bounds = tmp_path / "wine_bounds.csv"
    pd.DataFrame({"column": cols, "low": lo - 0.1 * (hi - lo), "high": hi + 0.1 * (hi - lo)}).to_csv(bounds, index=False)
    return data, bounds


def _close_to_centralized(s):
    assert abs(s["relative_gap_to_centralized"]) <= 1e-3, s["relative_gap_to_centralized"]
    assert abs(s["final_test_error"] - s["centralized_test_error"]) <= 0.01


@pytest.mark.parametrize("make", [_wide_csv, _wine_csv])
def test_nonprivate_defaults_reach_the_centralized_model_on_user_csvs(tmp_path, make):
    """Default settings, declared bounds: within 1e-3 of the centralized objective and 1 point of its test error
    (the old default η = 300/R² diverged on the wine table: objective 1.78 → 3.87)."""
    data, bounds = make(tmp_path)
    res = run_federated(LearnConfig(dataset=str(data), bounds=str(bounds), clients=4))
    _close_to_centralized(res.summary)
    assert res.summary["eta_rule"] == "backtracking"


@pytest.mark.slow
def test_nonprivate_defaults_reach_the_centralized_model_on_mnist():
    """The ill-conditioned bundled set (box 1, R₂ = 1): converged at round 4900 of the 10000 cap, gap 4.2e-5
    (~90 s on a quiet core; digits is tests/test_learning.py's acceptance test)."""
    res = run_federated(LearnConfig(dataset="mnist", clients=10, evaluate_every=50))
    _close_to_centralized(res.summary)
    assert res.summary["stopped"] == "converged"


def test_stopping_rule_ends_a_converged_run_and_a_capped_run_says_it_stopped_short(tmp_path, caplog):
    data, bounds = _wine_csv(tmp_path)
    done = run_federated(LearnConfig(dataset=str(data), bounds=str(bounds), clients=4, tol=1e-4, rounds=3000))
    assert done.summary["stopped"] == "converged" and done.summary["rounds"] < 3000
    assert max(done.summary["final_relative_residuals"]) <= 1e-4
    with caplog.at_level(logging.WARNING, logger="powerdp"):
        short = run_federated(LearnConfig(dataset=str(data), bounds=str(bounds), clients=4, rounds=5))
    assert short.summary["stopped"] == "rounds"
    assert any("stopped at the round cap (5)" in r.getMessage() for r in caplog.records)


def test_private_runs_keep_their_penalty_schedule_and_public_step():
    cfg = LearnConfig(algorithm="outg", epsilon=0.5)
    assert cfg.coordinator_rho_schedule == "constant" and cfg.stopping_tolerance == 0.0
    assert cfg.rounds == 1000 and LearnConfig().rounds == 10000  # T of a private run; a non-private run's cap
    assert cfg.eta_rule == "public constant"
    res = run_federated(cfg.replace(rounds=3, clients=3, seed=0, evaluate=False), reference=False)
    assert list(res.history["rho"]) == [cfg.penalty(t) for t in (1, 2, 3)]


def test_round_cap_is_resolved_from_the_final_settings():
    """rounds not given: T = 1000 for a private run, the cap 10000 for a non-private one, resolved from the settings as
    they end up (replace, or a changed algorithm), never carried over from the algorithm the config started with."""
    from powerdp.apps.learning.config import DEFAULT_ROUNDS, NONPRIVATE_ROUNDS

    base = LearnConfig()
    assert base.rounds == NONPRIVATE_ROUNDS
    private = base.replace(algorithm="objg")
    assert private.rounds == DEFAULT_ROUNDS and private.private_steps == DEFAULT_ROUNDS
    assert private.replace(algorithm="nonprivate").rounds == NONPRIVATE_ROUNDS
    assert base.replace(algorithm="objg", rounds=7).rounds == 7  # given: kept
    assert LearnConfig(rounds=NONPRIVATE_ROUNDS).replace(algorithm="objg").rounds == NONPRIVATE_ROUNDS
    assert LearnConfig(algorithm="objt", rounds=300).replace(algorithm="nonprivate").rounds == 300
    changed = LearnConfig()
    changed.algorithm = "objl"
    assert changed.validate().rounds == DEFAULT_ROUNDS
    assert LearnConfig.from_dict(private.to_dict()).rounds == DEFAULT_ROUNDS and "_default_rounds" not in private.to_dict()


def test_one_warning_names_the_columns_outside_their_declared_range(tmp_path, caplog):
    data, bounds = _wide_csv(tmp_path)
    tab = pd.read_csv(bounds)
    tab.loc[tab["column"].isin(["s3", "s6"]), "high"] /= 100  # declared far too narrow
    tab.loc[tab["column"].isin(["s3", "s6"]), "low"] /= 100
    tab.to_csv(bounds, index=False)
    with caplog.at_level(logging.WARNING, logger="powerdp"):
        run_federated(LearnConfig(dataset=str(data), bounds=str(bounds), clients=3, rounds=2), reference=False)
    lines = [r.getMessage() for r in caplog.records if "clipping will dominate" in r.getMessage()]
    assert len(lines) == 1
    assert "s3, s6 fall far outside" in lines[0] and "s0" not in lines[0]


def test_no_warning_when_the_declared_bounds_hold(tmp_path, caplog):
    data, bounds = _wide_csv(tmp_path)
    with caplog.at_level(logging.WARNING, logger="powerdp"):
        run_federated(LearnConfig(dataset=str(data), bounds=str(bounds), clients=3, rounds=2), reference=False)
    assert not [r for r in caplog.records if "clipping will dominate" in r.getMessage()]


def test_bounds_file_scales_each_column_and_is_checked(tmp_path):
    data, bounds = _wide_csv(tmp_path)
    d = load_dataset(str(data), bounds=bounds)
    assert np.allclose(d.feature_range[1], 5 * SCALES)
    tab = pd.read_csv(bounds).iloc[:-1]
    tab.to_csv(tmp_path / "short.csv", index=False)
    with pytest.raises(ConfigError, match="no bounds for column.*s7"):
        load_dataset(str(data), bounds=tmp_path / "short.csv")
    with pytest.raises(ConfigError, match="bounds"):
        LearnConfig(dataset=str(data), bounds=str(bounds), feature_range=(0, 1))


def test_process_backend_is_bit_identical_to_serial():
    base = LearnConfig(dataset="digits", clients=4, algorithm="objg", epsilon=0.5, seed=1, rounds=6, evaluate_every=3)
    serial = run_federated(base, reference=False)
    process = run_federated(base.replace(backend="process", workers=2), reference=False)
    assert np.array_equal(serial.model, process.model)
    cols = [c for c in serial.history.columns if c != "wall_s"]
    pd.testing.assert_frame_equal(serial.history[cols], process.history[cols], check_exact=True)
    assert serial.summary["epsilon_total"] == process.summary["epsilon_total"]


def test_process_backend_resumes_a_serial_run_bit_identically(tmp_path):
    base = LearnConfig(dataset="digits", clients=3, seed=2, rounds=8, checkpoint_every=4, evaluate_every=4)
    whole = run_federated(base, reference=False)
    run_federated(base.replace(rounds=4), out=tmp_path / "r", reference=False)
    resumed = run_federated(base.replace(backend="process"), out=tmp_path / "r", resume=True, reference=False)
    assert np.array_equal(whole.model, resumed.model)


def test_audit_routes_a_dataset_to_the_learning_audit(tmp_path):
    from powerdp.cli import main

    out = tmp_path / "audit.json"
    rc = main(["audit", "digits", "--clients", "4", "--algorithm", "objl", "--epsilon", "0.5", "--rounds", "2",
               "--runs", "20", "--seed", "0", "--json", str(out), "-q"])
    res = json.loads(out.read_text())
    assert rc == 0 and res["verdict"] == "passed"
    assert res["settings"]["algorithm"] == "objl" and res["settings"]["dataset"] == "digits" and res["settings"]["runs"] == 20


def test_audit_argv_translation():
    assert audit_as_learn(["audit", "case14", "--runs", "30"]) == ["audit", "case14", "--runs", "30"]
    got = audit_as_learn(["-q", "audit", "data.csv", "--zone", "1", "--zones=3"])
    assert got == ["-q", "learn", "data.csv", "--audit-client", "1", "--clients=3", "--audit", "50", "--rounds", "5"]
    with pytest.raises(ConfigError, match="--bus"):
        audit_as_learn(["audit", "digits", "--bus", "3"])


def _small_csv(path, labels):
    rows = ["x1,x2,label"] + [f"{0.1 * (i % 7):.1f},{0.1 * (i % 5):.1f},{lab}" for i, lab in enumerate(labels)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _one_line(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("powerdp: error: "), err
    return err[0]


def test_a_bounds_row_that_is_not_a_number_is_one_line(tmp_path, capsys):
    """Issue 38, bug 1: a bounds row ``x1,0,abc`` was a ValueError traceback; now one line naming the line and field."""
    data = _small_csv(tmp_path / "my.csv", ["a", "b"] * 6)
    bounds = tmp_path / "b.csv"
    bounds.write_text("column,low,high\nx1,0,abc\nx2,0,1\n")
    err = _one_line(capsys, ["-q", "learn", str(data), "--bounds", str(bounds), "--clients", "2", "--rounds", "1"])
    assert f"{bounds}, line 2: column 'x1': high is not a number" in err and "abc" not in err, err


def test_conflicting_bounds_rows_are_refused_and_equal_ones_accepted(tmp_path):
    data = _small_csv(tmp_path / "my.csv", ["a", "b"] * 6)
    bounds = tmp_path / "b.csv"
    bounds.write_text("column,low,high\nx1,0,1\nx2,0,1\nx1,0,2\n")
    with pytest.raises(ConfigError, match=r"line 4: column 'x1' is listed again with other bounds"):
        load_dataset(str(data), bounds=bounds)
    bounds.write_text("column,low,high\nx1,0,1\nx2,0,1\nx1,0,1\n")
    assert load_dataset(str(data), bounds=bounds).feature_range[1].tolist() == [1.0, 1.0]


def test_an_empty_label_is_refused_not_a_class(tmp_path, capsys):
    """Issue 38, bug 3: an empty label became a third class ("3 classes", exit 0); labels are checked like features."""
    data = _small_csv(tmp_path / "my.csv", ["a", "b", "", "a", "b", "a", "b", "a", "b", "a", "b", "a"])
    err = _one_line(capsys, ["-q", "learn", str(data), "--clients", "2", "--rounds", "1"])
    assert "row 3 (line 4) has no label in column 'label'" in err, err
    data.write_text(data.read_text().replace(",a\n", ",  \n", 1))  # blanks only: no label either
    assert "has no label" in _one_line(capsys, ["-q", "learn", str(data), "--clients", "2", "--rounds", "1"])
