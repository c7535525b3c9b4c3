"""Vertical learning by ADMM sharing (powerdp.apps.learning.vertical) and its privacy analysis."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from powerdp.apps.learning.vertical import load_dataset, release_sensitivity, run_vertical_learning
from powerdp.engine.sharing.coordinator import LogisticZStep
from powerdp.runs.sharing_run import SharingSettings


def test_logistic_prox_is_exact():
    rng = np.random.default_rng(0)
    b = rng.choice([-1.0, 1.0], size=40)
    v = rng.normal(scale=5, size=40)
    step = LogisticZStep(b)
    for rho in (1e-4, 1e-2, 10.0):
        z = step.prox(v, rho)
        for i in range(0, 40, 7):
            bi, vi, r = b[i], v[i], rho
            ref = minimize_scalar(lambda t, bi=bi, vi=vi, r=r: np.logaddexp(0, -bi * t) / 40 + r / 2 * (t - vi) ** 2,
                                  bracket=(vi - 1, vi + 1), tol=1e-14).x
            assert z[i] == pytest.approx(ref, abs=1e-7)


def test_breast_cancer_two_parties_reaches_the_centralized_model():
    data = load_dataset("breast_cancer", 2)
    n = len(data.y_train)
    res, base = run_vertical_learning(data, 1e-3, SharingSettings(rounds=200, rho=0.5 / n))
    ev = res.summary["evaluation"]
    assert abs(ev["test_logloss"] - base["centralized_test_logloss"]) < 1e-3
    assert ev["test_logloss"] < base["party_alone_test_logloss"][0] - 0.05
    assert ev["train_objective"] == pytest.approx(base["centralized_train_objective"], rel=1e-4)
    # 002's plain Jacobi step (τ = 0) converges here too (two parties, ρ on the scale of 1/N), in fewer rounds
    res0, _ = run_vertical_learning(data, 1e-3, SharingSettings(rounds=60, rho=0.5 / n, tau=0.0))
    assert abs(res0.summary["evaluation"]["test_logloss"] - base["centralized_test_logloss"]) < 1e-3
    # ρ far above 1/N stalls (the prototype's ρ = 1 gave 0.551)
    res1, _ = run_vertical_learning(data, 1e-3, SharingSettings(rounds=200, rho=1.0, tau=0.0))
    assert res1.summary["evaluation"]["test_logloss"] > base["centralized_test_logloss"] + 0.05


def _ridge_release(D, w, lam, kappa):
    x = np.linalg.solve(lam * np.eye(D.shape[1]) + kappa * D.T @ D, kappa * D.T @ w)
    return D @ x


@pytest.mark.parametrize("neighbours", ["column", "row"])
def test_release_sensitivity_bounds_hold(neighbours):
    rng = np.random.default_rng(2)
    n, d, lam, kappa, clip = 60, 6, 1e-2, 0.05, 1.0
    worst_ratio = 0.0
    for _ in range(200):
        D = rng.normal(size=(n, d))
        w = rng.normal(scale=3, size=n)
        D2 = D.copy()
        if neighbours == "column":
            D /= np.maximum(1.0, np.linalg.norm(D, axis=0) / clip)
            j = rng.integers(d)
            D2 = D.copy()
            c = rng.normal(size=n)
            D2[:, j] = c / max(1.0, np.linalg.norm(c) / clip)
        else:
            D /= np.maximum(1.0, np.linalg.norm(D, axis=1, keepdims=True))
            i = rng.integers(n)
            D2 = D.copy()
            a = rng.normal(size=d)
            D2[i] = a / max(1.0, np.linalg.norm(a))
        delta = np.linalg.norm(_ridge_release(D, w, lam, kappa) - _ridge_release(D2, w, lam, kappa))
        bound = release_sensitivity(w, neighbours, lam, kappa, clip)
        assert delta <= bound * (1 + 1e-9)
        worst_ratio = max(worst_ratio, delta / bound)
    assert worst_ratio > 0.01  # not vacuous


def test_002_mechanism_release_reveals_the_column_space():
    """002's noise N(0, σ²(DᵀD)⁻¹) on x keeps D x̃ in col(D): a neighbour's release is told apart with certainty."""
    rng = np.random.default_rng(3)
    n, d = 50, 5
    D = rng.normal(size=(n, d))
    D2 = D.copy()
    D2[:, 0] = rng.normal(size=n)
    cov = 100.0 * np.linalg.inv(D.T @ D)  # a huge σ
    x_tilde = rng.multivariate_normal(np.zeros(d), cov)
    release = D @ x_tilde
    q2, _ = np.linalg.qr(D2)
    off = np.linalg.norm(release - q2 @ (q2.T @ release)) / np.linalg.norm(release)
    q1, _ = np.linalg.qr(D)
    on = np.linalg.norm(release - q1 @ (q1.T @ release)) / np.linalg.norm(release)
    assert on < 1e-12 and off > 1e-2  # in col(D), not in col(D'): probability 0 under D'


def test_private_run_spends_the_target_budget():
    from powerdp.privacy.calibration import gaussian_noise_multiplier

    data = load_dataset("breast_cancer", 2)
    z = gaussian_noise_multiplier(1.0, 1e-5, 10)
    res, _ = run_vertical_learning(data, 1e-3, SharingSettings(rounds=10, rho=0.5 / len(data.y_train), noise_multiplier=z, delta=1e-5),
                                   clip=0.03, seed=1)
    led = res.summary["coordinator_view"]["ledger"][0]
    assert led["epsilon"] == pytest.approx(1.0, rel=1e-3)
    assert res.summary["evaluation"]["test_logloss"] < 0.45


def test_run_writes_two_views_never_mixed(tmp_path):
    """coordinator_view/ holds the residuals, ρ, ε, its times and the ledger; the test/train log-loss and error
    (computed from every party's features) and the parties' solver work are in simulation_evaluation/ only."""
    import json

    import pandas as pd

    from powerdp.apps.power_flow.result import read_history
    from powerdp.runs.sharing_run import COORDINATOR_COLUMNS, COORDINATOR_KEYS, HISTORY_ORDER

    data = load_dataset("breast_cancer", 2)
    settings = SharingSettings(rounds=6, rho=0.5 / len(data.y_train), noise_multiplier=3.0, delta=1e-5)
    res, _ = run_vertical_learning(data, 1e-3, settings, clip=0.03, seed=1, out=tmp_path / "v")
    d = tmp_path / "v"
    coord, ev = d / "coordinator_view", d / "simulation_evaluation"
    assert sorted(p.name for p in d.iterdir() if p.is_file()) == ["config.json", "inputs.json"]  # inputs: config.json's hash
    hist = pd.read_csv(coord / "history.csv", nrows=0)
    assert list(hist.columns) == COORDINATOR_COLUMNS
    ev_cols = set(pd.read_csv(ev / "history.csv", nrows=0).columns)
    assert {"eval_test_logloss", "eval_test_error", "eval_train_objective", "solves", "agent_s"} <= ev_cols
    data_coord = json.loads((coord / "summary.json").read_text())
    assert set(data_coord["summary"]) <= set(COORDINATOR_KEYS) and "evaluation" not in (coord / "summary.json").read_text()
    assert data_coord["summary"]["coordinator_view"]["ledger"]["0"]["epsilon"] == res.summary["coordinator_view"]["ledger"][0]["epsilon"]
    for value in (res.summary["evaluation"]["test_logloss"], res.history["eval_test_logloss"].iloc[2]):
        assert repr(float(value)) not in (coord / "history.csv").read_text() + (coord / "summary.json").read_text()
        assert repr(float(value)) in (ev / "history.csv").read_text() + (ev / "summary.json").read_text()
    pd.testing.assert_frame_equal(read_history(d, HISTORY_ORDER), res.history, check_exact=True)


def test_attack_nonprivate_releases_reveal_the_column_space():
    """What crosses without noise: after d_m rounds the coordinator knows col(D_m) of a party (the releases span it)."""
    from powerdp.apps.learning.vertical import vertical_problem
    from powerdp.runs.sharing_run import run_sharing

    data = load_dataset("breast_cancer", 2)
    seen = []
    problem = vertical_problem(data, 1e-3)
    run_sharing(problem, SharingSettings(rounds=20, rho=0.5 / len(data.y_train)), observe=seen.append)
    R = np.array([[u.released for u in us if u.agent == 0][0] for us in seen[1:]]).T  # N × 20
    q, _ = np.linalg.qr(data.X_train[:, data.blocks[0]])
    u, s, _ = np.linalg.svd(R, full_matrices=False)
    span = u[:, s > 1e-12 * s[0]]  # 15 singular values above 1e-11 relative, the rest at rounding level
    assert span.shape[1] == 15  # the 15 features' column space, from the releases alone
    assert np.linalg.norm(span - q @ (q.T @ span)) < 1e-4  # a random 15-dimensional subspace: about 3.8


@pytest.mark.slow
def test_gisette_like_three_parties_reaches_the_centralized_model():
    data = load_dataset("gisette_like", 3)
    assert data.X_train.shape == (2250, 5000)
    res, base = run_vertical_learning(data, 1e-4, SharingSettings(rounds=60, rho=0.5 / len(data.y_train), backend="process", workers=2))
    ev = res.summary["evaluation"]
    assert abs(ev["test_logloss"] - base["centralized_test_logloss"]) < 1e-3
    assert ev["test_logloss"] < base["party_alone_test_logloss"][0] - 0.05
