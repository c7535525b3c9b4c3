"""Federated learning on the engine (powerdp.apps.learning): reference points, identities, sensitivities, runs."""

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest

from powerdp.apps.learning import LearnConfig, run_federated
from powerdp.apps.learning.client import ClientAgent
from powerdp.apps.learning.config import penalty
from powerdp.apps.learning.data import Dataset, clip_rows, load_dataset, preprocess, split_clients
from powerdp.apps.learning.model import SoftmaxLoss, centralized_fit, error_rate
from powerdp.apps.learning.runner import COORDINATOR_COLUMNS as LEARN_COORDINATOR_COLUMNS
from powerdp.apps.learning.runner import COORDINATOR_KEYS as LEARN_COORDINATOR_KEYS
from powerdp.apps.learning.runner import prepare_data
from powerdp.apps.learning.sensitivity import gradient_sensitivity
from powerdp.engine.consensus.messages import ConsensusMessage
from powerdp.errors import ConfigError
from powerdp.opf.box import BoxProblem, BoxProjection, LinearDiagonal


@pytest.fixture(scope="module")
def digits():
    return prepare_data(LearnConfig(dataset="digits")).data


def _tiny(seed=0, n=120, J=6, K=3):
    rng = np.random.default_rng(seed)
    X = clip_rows(rng.normal(size=(n, J)), 1.0)
    y = rng.integers(0, K, size=n)
    return X, y


# ---------------------------------------------------------------- reference points (SPEC 9.5)
def test_zero_model_loss_is_ln_k(digits):
    loss = SoftmaxLoss(digits.X_train, digits.y_train, 10, len(digits.y_train), reg=1e-6)
    assert loss.value(np.zeros(loss.n)) == pytest.approx(2.302585, abs=1e-6)
    assert loss.value(np.zeros(loss.n)) == pytest.approx(math.log(10), rel=1e-14)


def test_first_round_of_a_run_is_at_the_zero_model(digits):
    r = run_federated(LearnConfig(dataset="digits", algorithm="objt", epsilon=0.05, rounds=1, evaluate_every=1), data=digits, reference=False)
    assert r.summary["rho_first"] == pytest.approx(102.0)
    # one Laplace-perturbed step from z = 0 with ρ = 102 barely moves the model: the loss is still ≈ ln 10
    assert r.summary["final_objective"] == pytest.approx(math.log(10), abs=2e-3)


def test_penalty_schedule_reference_values():
    assert penalty(1, 0.05) == pytest.approx(102.0)  # c1 + c2/ε̄ = 2 + 5/0.05
    assert penalty(10_000, 0.05) == pytest.approx(2 * 1.2 + 100)
    assert penalty(10**7, 0.05) == 1e9
    assert LearnConfig(algorithm="objg", epsilon=0.05).penalty(1) == pytest.approx(102.0)
    assert LearnConfig(algorithm="objg", epsilon=1.0, rho_schedule="constant", rho=3.0).penalty(50) == 3.0


def _client(algorithm, box=None, seed=0, E=1, **kw):
    X, y = _tiny()
    cfg = LearnConfig(dataset="digits", algorithm=algorithm, box=box, local_updates=E, seed=seed, eta=0.7,
                      rho_schedule="constant", rho=1.5, delta=1e-5, **kw)
    return ClientAgent(0, X, y, 3, 4 * len(y), cfg, R2=1.0, R1=math.sqrt(6))


def _one_round(agent, w, lam=None):
    agent.initialize()
    agent.z_last = np.linspace(-0.3, 0.3, agent.n)
    if lam is not None:
        agent.lam = lam.copy()
    return agent.step(ConsensusMessage(round=1, zone=0, w=w, rho=1.5)).released


def test_remark_3_1_outpert_is_objpert_with_scaled_noise():
    """W = Rⁿ: OutPert's output noise ξ equals ObjPert's objective noise −(1/η + ρ)ξ (000 Remark 3.1): with the same
    Gaussian draws, the two releases sit exactly symmetric around the noise-free one. A statement about real-valued
    noise: the continuous (old numpy) sampler shows it draw for draw; the product's grid sampler draws integers whose
    law, not each draw, scales with σ (tests/test_sampler.py)."""
    from powerdp.privacy.faults import InjectedFaults

    continuous = InjectedFaults(sampler="numpy")
    w = np.linspace(0.2, -0.1, 18)
    lam = np.linspace(-0.05, 0.05, 18)
    base = _one_round(_client("nonprivate"), w, lam)
    obj = _one_round(_client("objg", epsilon=0.5, faults=continuous), w, lam)
    out = _one_round(_client("outg", epsilon=0.5, faults=continuous), w, lam)
    assert np.abs(out - base).max() > 1e-4  # the noise is there
    np.testing.assert_allclose(obj - base, -(out - base), rtol=0, atol=1e-13)


def test_remark_3_1_local_steps_are_gradient_steps():
    """W = Rⁿ: E local steps are E steps z ← z − s(∇f_p(z) + ρ(z − w) − λ), s = η/(ηρ + 1); the release is their mean."""
    w = np.linspace(0.2, -0.1, 18)
    lam = np.linspace(-0.05, 0.05, 18)
    agent = _client("nonprivate", E=4)
    released = _one_round(agent, w, lam)
    eta, rho = 0.7, 1.5
    s = eta / (eta * rho + 1)
    z = np.linspace(-0.3, 0.3, 18)
    its = []
    for _ in range(4):
        z = z - s * (agent.gradient(z) + rho * (z - w) - lam)
        its.append(z)
    np.testing.assert_allclose(agent.z_last, its[-1], rtol=0, atol=1e-14)
    np.testing.assert_allclose(released, np.mean(its, axis=0), rtol=0, atol=1e-14)


# ---------------------------------------------------------------- sensitivities (SPEC 9.3)
@pytest.mark.parametrize("adjacency", ["replace-one", "add-remove"])
def test_gradient_sensitivity_holds_numerically(adjacency):
    rng = np.random.default_rng(3)
    J, K, n, I, R = 5, 4, 30, 200, 1.0
    sens = gradient_sensitivity(R, math.sqrt(J) * R, I, adjacency)
    worst2 = worst1 = 0.0
    for trial in range(400):
        X = clip_rows(rng.normal(size=(n, J)) * 3, R)
        y = rng.integers(0, K, size=n)
        z = rng.normal(size=J * K) * (5 if trial % 2 else 0.3)
        g = SoftmaxLoss(X, y, K, I).gradient(z)
        if adjacency == "replace-one":
            X2, y2 = X.copy(), y.copy()
            X2[0] = clip_rows(rng.normal(size=(1, J)) * 3, R)[0]
            y2[0] = rng.integers(0, K)
        else:
            X2, y2 = X[1:], y[1:]
        d = g - SoftmaxLoss(X2, y2, K, I).gradient(z)
        worst2, worst1 = max(worst2, np.linalg.norm(d)), max(worst1, np.abs(d).sum())
    assert worst2 <= sens.l2 * (1 + 1e-12) and worst1 <= sens.l1 * (1 + 1e-12)
    assert worst2 >= 0.6 * sens.l2  # the bound is not vacuous: random neighbours come close to it


def test_paper_sensitivity_is_labelled_not_private(digits):
    r = run_federated(LearnConfig(dataset="digits", algorithm="objl", sensitivity="paper", rounds=2), data=digits, reference=False)
    assert "NOT" in r.summary["sensitivity_note"]


# ---------------------------------------------------------------- solver, data, splits
def test_box_projection_is_the_qp_minimiser():
    from scipy.optimize import minimize

    rng = np.random.default_rng(1)
    n = 12
    lb, ub = -np.full(n, 0.3), np.full(n, 0.4)
    c, d = rng.normal(size=n), rng.uniform(0.5, 3, size=n)
    res = BoxProjection(BoxProblem(lb, ub)).solve(LinearDiagonal(c, d))
    ref = minimize(lambda x: c @ x + 0.5 * d @ (x * x), np.zeros(n), jac=lambda x: c + d * x, bounds=list(zip(lb, ub, strict=True)),
                   method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12})
    np.testing.assert_allclose(res.x, ref.x, atol=1e-7)
    assert res.outcome == "solved"


def test_box_solver_refuses_power_flow_runs():
    from powerdp.apps.power_flow.config import RunConfig

    with pytest.raises(ConfigError, match="box"):
        RunConfig(case="case14", local_solver="box")


def test_splits():
    y = np.repeat(np.arange(10), 50)
    iid = split_clients(y, 10, "iid")
    assert sorted(np.concatenate(iid).tolist()) == list(range(500)) and {len(p) for p in iid} == {50}
    skew = split_clients(y, 10, "label-skew")
    assert sorted(np.concatenate(skew).tolist()) == list(range(500))
    assert max(len(np.unique(y[p])) for p in skew) <= 4
    dirich = split_clients(y, 10, "dirichlet:0.3", seed=2)
    sizes = [len(p) for p in dirich]
    assert sum(sizes) == 500 and min(sizes) > 0 and max(sizes) > 2 * min(sizes)
    with pytest.raises(ConfigError, match="split"):
        split_clients(y, 10, "dirichlet:-1")


def test_preprocessing_clips_rows_with_public_bounds():
    d = load_dataset("digits")
    pre = preprocess(d, clip=0.5)
    assert np.linalg.norm(pre.X_train, axis=1).max() <= 0.5 + 1e-12
    assert pre.preprocessing["R2"] == 0.5 and "public bounds" in pre.preprocessing["feature_scaling"]


def test_user_csv_and_npz(tmp_path):
    X, y = _tiny(n=60)
    import pandas as pd

    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    frame["kind"] = np.array(["a", "b", "c"])[y]
    frame.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ConfigError, match="label column 'label'"):
        load_dataset(str(tmp_path / "d.csv"))
    d = load_dataset(str(tmp_path / "d.csv"), label="kind")
    assert d.n_classes == 3 and d.n_features == 6 and list(d.classes) == ["a", "b", "c"]
    np.savez(tmp_path / "d.npz", X=X, y=y)
    assert load_dataset(str(tmp_path / "d.npz")).n_features == 6
    np.savez(tmp_path / "bad.npz", X=X)
    with pytest.raises(ConfigError, match="no array 'y'"):
        load_dataset(str(tmp_path / "bad.npz"))


def test_mnist_subset_is_bundled():
    d = load_dataset("mnist")
    assert d.n_features == 784 and d.n_classes == 10
    assert len(d.y_train) == 4000 and len(d.y_test) == 1000
    assert np.bincount(d.y_train).tolist() == [400] * 10


# ---------------------------------------------------------------- runs
def test_nonprivate_reaches_the_centralized_optimum(digits):
    """Acceptance: the non-private run within 1e-3 relative of the centralized optimum, same test error ±1 point."""
    r = run_federated(LearnConfig(dataset="digits"), data=digits)
    s = r.summary
    assert 0 <= s["relative_gap_to_centralized"] < 1e-3
    assert abs(s["final_test_error"] - s["centralized_test_error"]) <= 0.01
    assert 0.05 < s["final_test_error"] < 0.2


def test_centralized_fit_respects_the_box():
    X, y = _tiny()
    z, f = centralized_fit(SoftmaxLoss(X, y, 3, len(y)), box=0.05)
    assert np.abs(z).max() <= 0.05 + 1e-12 and f < math.log(3)


def test_budget_run_spends_its_budget(digits):
    r = run_federated(LearnConfig(dataset="digits", algorithm="objg", target_epsilon=1.0, target_delta=1e-6, rounds=40), data=digits, reference=False)
    eps = max(r.summary["epsilon_total"].values())
    assert 0.98 <= eps <= 1.0 + 1e-9


def test_objt_steps_stay_in_trust_region_and_box():
    agent = _client("objt", box=0.5, trust_radius=0.01, epsilon=0.5)
    agent.initialize()
    z0 = agent.z_last.copy()
    agent.step(ConsensusMessage(round=1, zone=0, w=np.full(agent.n, 0.4), rho=1.5))
    assert np.abs(agent.z_last - z0).max() <= 0.01 + 1e-15
    assert np.abs(agent.z_last).max() <= 0.5


def test_outp_noise_shrinks_with_rounds(digits):
    """Huang et al.: 1/η_t grows as √t, so the output noise Δ₂/(1/η_t + ρ) shrinks (visible when ρ is small)."""
    cfg = LearnConfig(dataset="digits", algorithm="outp", epsilon=0.5, rounds=60, evaluate_every=60, rho_schedule="constant", rho=0.01)
    noise = run_federated(cfg, data=digits, reference=False).history["noise_magnitude"].to_numpy()
    assert noise[-10:].mean() < 0.7 * noise[:10].mean()


def test_seeded_runs_repeat_and_resume_is_exact(tmp_path, digits):
    cfg = LearnConfig(dataset="digits", algorithm="objg", epsilon=0.5, rounds=30, evaluate_every=1, checkpoint_every=10, seed=0)
    full = run_federated(cfg, data=digits, reference=False)
    assert full.summary["noise_source"] == "seeded"
    again = run_federated(cfg, data=digits, reference=False)
    np.testing.assert_array_equal(full.model, again.model)
    run_federated(cfg.replace(rounds=20), data=digits, out=tmp_path / "r", reference=False)
    resumed = run_federated(cfg, data=digits, out=tmp_path / "r", resume=True, reference=False)
    np.testing.assert_array_equal(full.model, resumed.model)
    assert resumed.summary["epsilon_total"] == full.summary["epsilon_total"]
    assert not list((tmp_path / "r").rglob("*.pkl"))  # npz + JSON, no pickle
    # the resumed run's files, both views joined, are the uninterrupted run's history (its round times aside)
    from powerdp.apps.learning.runner import HISTORY_COLUMNS
    from powerdp.apps.power_flow.result import read_history

    back = read_history(tmp_path / "r", HISTORY_COLUMNS).drop(columns="wall_s")
    pd.testing.assert_frame_equal(back, full.history.drop(columns="wall_s").astype(back.dtypes.to_dict()), check_exact=True)
    ckpt = tmp_path / "r" / "checkpoint"  # the checkpoint keeps the views apart too
    assert set(json.loads((ckpt / "state.json").read_text())["history"][0]) <= set(LEARN_COORDINATOR_COLUMNS)
    assert "objective" in json.loads((ckpt / "evaluation.json").read_text())["history"][0]


# ---------------------------------------------------------------- the two views of a run (docs/privacy.md)
#: everything computed from the clients' data or their noise: history columns, summary keys
DATA_DERIVED_COLUMNS = {"objective", "test_error", "train_error", "noise_magnitude", "max_violation"}
DATA_DERIVED_KEYS = {"final_objective", "final_test_error", "final_train_error", "final_max_violation",
                     "centralized_objective", "centralized_test_error", "relative_gap_to_centralized", "client_samples",
                     "train_samples", "test_samples", "preprocessing", "R1", "R2"}


def _keys(obj) -> set:
    if isinstance(obj, dict):
        return set(map(str, obj)) | set().union(*(_keys(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(_keys(v) for v in obj))
    return set()


def test_learning_run_writes_two_views_never_mixed(tmp_path, digits):
    cfg = LearnConfig(dataset="digits", clients=3, algorithm="objg", epsilon=0.5, rounds=6, evaluate_every=2, seed=1)
    res = run_federated(cfg, data=digits, out=tmp_path / "r")
    d, s = tmp_path / "r", res.summary
    assert s["final_objective"] is not None and s["centralized_objective"] is not None
    # nothing mixed at the top level (inputs.json: config.json's hash, checked on resume)
    assert sorted(p.name for p in d.iterdir() if p.is_file()) == ["config.json", "inputs.json"]
    coord, ev = d / "coordinator_view", d / "simulation_evaluation"
    assert sorted(p.name for p in coord.iterdir()) == ["history.csv", "model.npz", "privacy_receipt.json", "summary.json"]
    assert not _keys(json.loads((coord / "privacy_receipt.json").read_text())) & DATA_DERIVED_KEYS
    assert sorted(p.name for p in ev.iterdir()) == ["history.csv", "summary.json"]
    hist = pd.read_csv(coord / "history.csv", float_precision="round_trip")
    assert list(hist.columns) == LEARN_COORDINATOR_COLUMNS and not DATA_DERIVED_COLUMNS & set(hist.columns)
    np.testing.assert_array_equal(hist["feasibility"].to_numpy(), res.history["feasibility"].to_numpy())
    data = json.loads((coord / "summary.json").read_text())
    assert set(data) == {"view", "summary", "privacy"} and set(data["summary"]) <= set(LEARN_COORDINATOR_KEYS)
    assert not _keys(data) & DATA_DERIVED_KEYS
    with np.load(coord / "model.npz", allow_pickle=False) as z:  # the consensus of the released models
        np.testing.assert_array_equal(z["w"], res.model)
    # every data-derived column and key is in the evaluation, and its values are in no public file
    assert DATA_DERIVED_COLUMNS <= set(pd.read_csv(ev / "history.csv", nrows=0).columns)
    ev_summary = json.loads((ev / "summary.json").read_text())["summary"]
    assert DATA_DERIVED_KEYS - {"R1", "R2"} <= set(ev_summary) and not set(ev_summary) & set(LEARN_COORDINATOR_KEYS)
    public = [d / "config.json", coord / "history.csv", coord / "summary.json"]
    for value in (s["final_objective"], s["centralized_objective"], s["final_test_error"], res.history["objective"].iloc[1]):
        assert not any(repr(float(value)) in p.read_text() for p in public), value
        assert repr(float(value)) in (ev / "summary.json").read_text() + (ev / "history.csv").read_text()
    # the files read back as the run: both views joined
    from powerdp.apps.learning.runner import HISTORY_COLUMNS
    from powerdp.apps.power_flow.result import read_history
    from powerdp.runs.views import read_summary

    back = read_history(d, HISTORY_COLUMNS)
    pd.testing.assert_frame_equal(back, res.history.astype(back.dtypes.to_dict()), check_exact=True)
    assert read_summary(d)["final_test_error"] == s["final_test_error"]


def test_learning_run_of_the_mixed_layout_still_reads_and_resumes_into_the_two_views(tmp_path, digits):
    """A run directory of the previous version (one mixed history.csv, a flat summary.json, model.npz and
    privacy.json at the top level, whole rows in checkpoint/state.json): the sweep tables read it, and a resume
    continues it bit for bit and rewrites it in the two views."""
    from powerdp.apps.learning.runner import HISTORY_COLUMNS
    from powerdp.studies.learning_sweep import is_learning_dir, learning_tables

    cfg = LearnConfig(dataset="digits", clients=3, algorithm="objg", epsilon=0.5, rounds=8, checkpoint_every=4, seed=3)
    full = run_federated(cfg, data=digits, reference=False)
    part = run_federated(cfg.replace(rounds=4), data=digits, out=tmp_path / "old", reference=False)
    d = tmp_path / "old"
    part.history.to_csv(d / "history.csv", index=False)  # the old layout, made from the new one
    (d / "summary.json").write_text(json.dumps(part.summary, default=float))
    (d / "privacy.json").write_text("{}")
    (d / "coordinator_view" / "model.npz").rename(d / "model.npz")
    state = json.loads((d / "checkpoint" / "state.json").read_text())
    state["history"] = json.loads(pd.DataFrame(part.history, columns=HISTORY_COLUMNS).to_json(orient="records"))
    (d / "checkpoint" / "state.json").write_text(json.dumps(state))
    for name in ("coordinator_view", "simulation_evaluation"):
        shutil.rmtree(d / name)
    (d / "checkpoint" / "evaluation.json").unlink()
    assert is_learning_dir(d)
    rounds, runs = learning_tables(d)
    assert len(rounds) == 4 and runs["final_objective"].iloc[0] == part.summary["final_objective"]
    resumed = run_federated(cfg, data=digits, out=d, resume=True, reference=False)
    np.testing.assert_array_equal(resumed.model, full.model)
    assert not {"history.csv", "summary.json", "model.npz", "privacy.json"} & {p.name for p in d.iterdir()}
    assert len(pd.read_csv(d / "coordinator_view" / "history.csv")) == 8
    assert learning_tables(d)[1]["rounds"].iloc[0] == 8


# ---------------------------------------------------------------- command line
def test_cli_learn_writes_the_summary(tmp_path):
    from powerdp.cli import main

    out, js = tmp_path / "run", tmp_path / "s.json"
    assert main(["learn", "digits", "--clients", "4", "--algorithm", "objg", "--epsilon", "0.5", "--rounds", "20",
                 "--out", str(out), "--json", str(js), "-q"]) == 0
    s = json.loads(js.read_text())
    for key in ("final_objective", "final_test_error", "centralized_test_error", "epsilon_total"):
        assert s[key] is not None
    assert set(s["epsilon_total"]) == {"0", "1", "2", "3"}
    assert main(["learn", "digits", "--rounds", "20", "--out", str(out), "-q"]) == 2  # holds a run
    assert main(["learn", "--resume", str(out), "--rounds", "30", "-q"]) == 0
    from powerdp.runs.views import read_summary

    assert read_summary(out)["rounds"] == 30


def test_cli_learn_bad_input_is_exit_2(tmp_path, capsys):
    from powerdp.cli import main

    assert main(["learn", str(tmp_path / "missing.csv"), "-q"]) == 2
    assert "missing.csv" in capsys.readouterr().err
    assert main(["learn", "digits", "--split", "dirichlet:x", "-q"]) == 2


def test_dataset_object_can_be_passed(digits):
    d = Dataset("tiny", *(_tiny(n=80)), *(_tiny(seed=1, n=40)), classes=np.arange(3))
    r = run_federated(LearnConfig(dataset="tiny", clients=3, rounds=5), data=d, reference=False)
    assert r.model.shape == (6, 3) and 0 <= error_rate(r.model.ravel(), d.X_test, d.y_test, 3) <= 1


# ---------------------------------------------------------------- the audit (one sample moved)
def test_audit_passes_an_honest_run_and_fails_a_broken_one(tmp_path, capsys):
    from powerdp.cli import main
    from powerdp.privacy.faults import InjectedFaults
    from powerdp.studies.learning_audit import run_learning_audit

    cfg = LearnConfig(dataset="digits", algorithm="objg", epsilon=0.5, rounds=2, clients=3)
    honest = run_learning_audit(cfg, runs=20)
    assert honest["verdict"] == "passed" and honest["epsilon_lower_bound"] <= honest["epsilon_total"]
    argv = ["learn", "digits", "--clients", "3", "--algorithm", "objg", "--epsilon", "0.5", "--rounds", "2", "--audit", "20",
            "--json", str(tmp_path / "a.json")]
    assert main(argv, faults=InjectedFaults(disable_noise=True)) == 3  # noise off behind the ledger's back
    res = json.loads((tmp_path / "a.json").read_text())
    assert res["verdict"] == "failed" and res["epsilon_lower_bound"] > res["epsilon_total"] == pytest.approx(honest["epsilon_total"])
    assert "audit FAILED" in capsys.readouterr().err


def test_learning_sweep_and_plot(tmp_path):
    from powerdp.cli import main

    toml = tmp_path / "s.toml"
    toml.write_text('[sweep]\nalgorithms = ["objg", "outg"]\nepsilons = [0.5]\nseeds = [0, 1]\n\n'
                    '[learn]\ndataset = "digits"\nrounds = 10\nclients = 3\nevaluate_every = 5\n')
    assert main(["sweep", str(toml), "--out", str(tmp_path / "sw"), "-q"]) == 0
    import pandas as pd

    runs = pd.read_csv(tmp_path / "sw" / "runs.csv")
    assert sorted(runs["algorithm"]) == ["objg", "objg", "outg", "outg"] and runs["final_test_error"].between(0, 1).all()
    assert main(["plot", str(tmp_path / "sw"), "-q"]) == 0
    assert (tmp_path / "sw" / "figures" / "learning_digits.png").stat().st_size > 10_000


def test_per_step_epsilon_totals_match_the_spec_reference():
    """SPEC 9.5: exact Gaussian totals at δ = 1e-6 of T = 5000 steps (E = 1) and 25000 (E = 5) of per-step (ε̄, 1e-6)."""
    import warnings

    from powerdp.privacy import GaussianMechanism
    from powerdp.privacy.accounting import _exact_gaussian_epsilon

    want = {1: [3.1, 6.8, 53.2, 151.6], 5: [7.8, 18.0, 181.4, 586.1]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for E, totals in want.items():
            got = [_exact_gaussian_epsilon(GaussianMechanism(1.0, e, 1e-6).noise_multiplier, 5000 * E, 1e-6) for e in (0.05, 0.1, 0.5, 1.0)]
            assert got == pytest.approx(totals, abs=0.051)


def test_unseeded_noise_is_secret(digits):
    """No seed: each client draws from OS entropy (the engine's rule), so two runs differ and the summary says so."""
    cfg = LearnConfig(dataset="digits", algorithm="objg", epsilon=0.5, rounds=3)
    a, b = (run_federated(cfg, data=digits, reference=False) for _ in range(2))
    assert a.summary["noise_source"] == "secret" and not np.array_equal(a.model, b.model)
