"""001's Algorithm 1 as a learning run: powerdp learn --algorithm noisy-admm (powerdp/apps/learning/amplified.py)."""

import json

import numpy as np
import pytest

from powerdp.apps.learning import LearnConfig, NoisyADMMConfig, run_noisy_admm
from powerdp.apps.learning.amplified import COORDINATOR_KEYS, auto_eta, ledger_entry, user_order
from powerdp.apps.learning.config import ALGORITHM_NAMES, RUNNERS
from powerdp.apps.learning.noisy_admm import elastic_net_data
from powerdp.cli import main
from powerdp.errors import ConfigError
from powerdp.privacy.amplification import one_step_zcdp, step_midpoint, zcdp_convex, zcdp_strongly_convex, zcdp_to_dp
from powerdp.runs.views import read_summary

SMALL = ["--users", "200", "--dim", "16", "--rounds", "101"]
#: keys every learn summary has, whichever runner (what a sweep or a notebook reads)
COMMON_KEYS = {"application", "dataset", "algorithm", "engine_algorithm", "clients", "train_samples", "test_samples",
               "features", "preprocessing", "rounds", "stopped", "final_objective", "final_test_error",
               "centralized_objective", "relative_gap_to_centralized", "private", "noise_source", "seed", "adjacency",
               "epsilon_total", "wall_s", "round_ms", "setup_s"}


def test_registered_in_the_learning_registry():
    assert "noisy-admm" in RUNNERS and "noisy-admm" in ALGORITHM_NAMES
    with pytest.raises(ConfigError, match="own runner.*NoisyADMMConfig"):
        LearnConfig(algorithm="noisy-admm")


def test_cli_run_json_keys_and_ledger(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["learn", "--algorithm", "noisy-admm", *SMALL, "--seed", "3", "--json", str(out), "--out", str(tmp_path / "run")]) == 0
    printed = capsys.readouterr().out
    assert "only the final (x̃, λ) is released" in printed and "Cor. 6.2, amplified" in printed
    s = json.loads(out.read_text())
    assert COMMON_KEYS <= set(s)
    assert s["application"] == "learning" and s["algorithm"] == "noisy-admm" and s["dataset"] == "elastic-net"
    assert s["rounds"] == s["iterations"] == 101 and s["noise_source"] == "seeded" and s["seed"] == 3
    assert s["released"].startswith("only the final")
    run = tmp_path / "run"  # the two views apart: the release and the ledger; the evaluation (never published)
    assert sorted(p.name for p in (run / "coordinator_view").iterdir()) == ["model.npz", "privacy_receipt.json", "summary.json"]
    assert sorted(p.name for p in (run / "simulation_evaluation").iterdir()) == ["history.csv", "summary.json"]
    assert not {"history.csv", "summary.json", "model.npz", "privacy.json"} & {p.name for p in run.iterdir()}
    assert read_summary(run) == s  # both views joined: the --json record
    # the ledger = Cor. 6.2 computed independently: row 1's split (f_i rank-one: no Cor. 7.3), η = eq. (23)'s midpoint
    p = elastic_net_data(0.25, n=16, users=200)
    nu = p.smoothness()
    eta = step_midpoint(nu, nu, 0.2, 0.9)
    assert s["eta"] == pytest.approx(eta, rel=1e-12) and eta == pytest.approx(1.7530864, rel=1e-6)  # 001 Table 1 row 1
    dgrad = 2.0 * 1.0 * np.sqrt(0.25)  # Δ = 2|shift|·max‖a_i‖, ‖a_i‖ = √μ
    rho = zcdp_convex(101, eta, 0.9, dgrad, 0.1, nu)
    assert rho == pytest.approx(5.1562 / 50 * eta**2 / 0.02, rel=1e-3)  # C/T·η²Δ²/(2σ²), C = 2(1 + βη), T = 50
    f = s["first_user"]  # 001's amplified figure, labelled, beside the headline
    assert f["source"] == "Cor. 6.2" and f["amplified"] is True and "not the dataset's guarantee" in f["scope"]
    assert f["zcdp"] == pytest.approx(rho, rel=1e-12)
    assert f["epsilon"] == pytest.approx(zcdp_to_dp(rho, 1e-6), rel=1e-12)
    # the headline: every user (101 iterations over 200 users, one run: each user at most once)
    assert s["amplified"] is False and s["every_user"]["uses"] == 1
    assert s["zcdp_total"] == s["every_user"]["zcdp"] and s["epsilon_total"] == s["every_user"]["epsilon"]
    assert any("Assumption 7.1" in r for r in s["refused_assumptions"])
    # every user: the last user's step is released after one step, no amplification
    assert s["every_user"]["zcdp"] == pytest.approx(one_step_zcdp(eta, dgrad, 0.1), rel=1e-12)
    assert s["every_user"]["zcdp"] / rho == pytest.approx(50 / 5.1562, rel=1e-3)  # T/C: what amplification buys


def test_strongly_convex_split_gets_cor_7_3():
    cfg = NoisyADMMConfig(users=200, dim=16, rounds=41, ridge_in_f=0.05, seed=0)
    run = run_noisy_admm(cfg)
    p = run.problem
    nu, mu, mu_g = p.smoothness(), p.strong_convexity(), p.strong_convexity_g()
    assert (mu, mu_g) == pytest.approx((0.1, 0.1))
    eta = step_midpoint(nu, mu, mu_g, 0.9)
    assert run.summary["eta"] == pytest.approx(eta, rel=1e-12)
    rho = zcdp_strongly_convex(41, eta, nu, mu, mu_g, 0.9, p.gradient_sensitivity(1.0), 0.1)
    assert run.ledger.source == "Cor. 7.3" and run.ledger.zcdp == pytest.approx(rho, rel=1e-12)
    assert any("Lemma 6.5" in r for r in run.ledger.refused)  # η > 1/ν: no Cor. 6.2


def test_fallback_names_the_refused_assumption(tmp_path):
    out = tmp_path / "s.json"
    assert main(["learn", "--algorithm", "noisy-admm", *SMALL, "--eta", "2.5", "--seed", "0", "--json", str(out), "-q"]) == 0
    s = json.loads(out.read_text())
    rho1 = one_step_zcdp(2.5, 1.0, 0.1)  # plain: the user's one Gaussian step of sensitivity ηΔ
    f = s["first_user"]
    assert f["amplified"] is False and f["source"] == "one step" and f["zcdp"] == pytest.approx(rho1, rel=1e-12)
    assert any("Lemma 6.5" in r and "η = 2.5" in r for r in s["refused_assumptions"])
    assert any("Assumption 7.1" in r for r in s["refused_assumptions"])
    # the user of iteration 1 used again (more iterations than users): composition over its uses, refusal named
    p = elastic_net_data(0.25, n=4, users=5)
    order = user_order(5, 3, 12, "permutation", 0)
    g, every = ledger_entry(p, order, eta=1.0, beta=0.9, sigma=0.1, iterations=12, target_shift=1.0, delta=1e-6)
    uses = int(max((row == row[0]).sum() for row in order))
    assert uses >= 2 and g.source == "composition" and g.zcdp == pytest.approx(uses * one_step_zcdp(1.0, 1.0, 0.1))
    assert any("used" in r and "once" in r for r in g.refused) and every["uses"] >= uses


def test_seeded_reproducible_secret_by_default():
    base = dict(users=100, dim=8, rounds=30, runs=2)
    a = run_noisy_admm(NoisyADMMConfig(**base, seed=5))
    b = run_noisy_admm(NoisyADMMConfig(**base, seed=5))
    c = run_noisy_admm(NoisyADMMConfig(**base, seed=6))
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.lam, b.lam)
    assert np.abs(a.x - c.x).max() > 1e-3
    s1, s2 = run_noisy_admm(NoisyADMMConfig(**base)), run_noisy_admm(NoisyADMMConfig(**base))
    assert s1.summary["noise_source"] == "secret" and s1.summary["seed"] is None and a.summary["noise_source"] == "seeded"
    assert np.abs(s1.x - s2.x).max() > 1e-3  # OS entropy: not replayable
    np.testing.assert_array_equal(user_order(100, 2, 30, "permutation", 0), user_order(100, 2, 30, "permutation", 0))


def test_noise_study_gap_matches_the_benchmark():
    """001 §10's noise study through the learning run: mean gap at iteration 100 over the runs (uniform order);
    benchmarks/amplification.py measured 0.334 (σ = 0.05) and 6.26 (σ = 0.5) over 100 runs."""
    gaps, loss = {}, {}
    for sigma in (0.05, 0.5):
        r = run_noisy_admm(NoisyADMMConfig(order="uniform", runs=40, rounds=100, sigma=sigma, seed=0))
        s = r.summary
        assert s["final_objective"] == pytest.approx(float(r.problem.objective(r.x).mean()), rel=1e-12)
        gaps[sigma] = s["final_objective"] - s["centralized_objective"]
        loss[sigma] = s["final_test_loss"]
    assert 0.2 < gaps[0.05] < 0.45 and 4.5 < gaps[0.5] < 8.0
    # test loss: mean squared error of the released x̃_K on the held-out draw of the same recipe;
    # measured 1.682 (σ = 0.05), 1.861 (σ = 0.5) against 1.591 at the optimum x* and 2.225 at x = 0
    test = elastic_net_data(0.25, users=250, seed=1_000_003)
    x_star, _ = r.problem.minimize()
    at_opt, at_zero = np.mean((test.features @ x_star - test.targets) ** 2), np.mean(test.targets**2)
    assert at_opt < loss[0.05] < at_opt + 0.25 * (at_zero - at_opt) and loss[0.05] < loss[0.5] < at_zero
    assert loss[0.5] == pytest.approx(float(np.mean((r.x @ test.features.T - test.targets) ** 2)), rel=1e-12)


def test_user_regression_file(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.random((120, 5))
    y = X @ np.array([1.0, -2.0, 0.0, 0.5, 0.0]) + 0.01 * rng.standard_normal(120)
    path = tmp_path / "reg.npz"
    np.savez(path, X=X, y=y)
    out = tmp_path / "s.json"
    assert main(["learn", str(path), "--algorithm", "noisy-admm", "--feature-range", "0,1", "--clip", "1.5",
                 "--rounds", "400", "--sigma", "0.01", "--l1", "0.001", "--l2", "0.01", "--seed", "0", "--json", str(out), "-q"]) == 0
    s = json.loads(out.read_text())
    assert s["train_samples"] == 96 and s["test_samples"] == 24 and s["features"] == 5
    assert s["final_test_loss"] < 0.5 * float(np.var(y))  # it learned something
    assert s["relative_gap_to_centralized"] < 1.0


@pytest.mark.parametrize("args, message", [
    (["learn", "digits", "--algorithm", "noisy-admm"], "classification set"),
    (["learn", "--algorithm", "noisy-admm", "--box", "1"], "--box: not read by --algorithm noisy-admm"),
    (["learn", "--algorithm", "noisy-admm", "--users", "5", "--clients", "6"], "more clients than the 5 users"),
    (["learn", "digits", "--algorithm", "objl", "--sigma", "0.1"], "--sigma: not read by --algorithm objl"),
    (["learn", "--algorithm", "noisy-admm", "--ridge-in-f", "0.1"], "eq. (23) needs g strongly convex"),
])
def test_bad_input_one_line_exit_2(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_auto_eta_rules():
    p = elastic_net_data(0.09, n=8, users=50)
    eta, rule = auto_eta(p, 0.5)
    assert eta == pytest.approx(4.811, abs=5e-4) and "μ_f = ν" in rule  # Table 1 row 2
    assert eta <= 1.0 / p.smoothness()  # so Cor. 6.2's η ≤ 1/ν holds


def test_unknown_order_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["learn", "--algorithm", "noisy-admm", "--order", "cyclic"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_resume_of_a_noisy_admm_run_is_a_clear_error(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["learn", "--algorithm", "noisy-admm", "--users", "50", "--dim", "4", "--rounds", "10", "--out", str(out), "-q"]) == 0
    assert main(["learn", "--resume", str(out)]) == 2
    assert "keeps no checkpoint" in capsys.readouterr().err
    assert main(["learn", "--algorithm", "noisy-admm", "--users", "50", "--dim", "4", "--rounds", "10", "--out", str(out), "-q"]) == 2


def test_common_keys_are_those_of_a_federated_run():
    from powerdp.apps.learning import run_federated

    s = run_federated(LearnConfig(dataset="digits", rounds=2, clients=2), reference=False).summary
    assert COMMON_KEYS <= set(s)


def test_coordinator_view_is_the_release_and_the_ledger(tmp_path):
    """Nothing per iteration crosses: coordinator_view/ holds the released (x̃, λ), the public settings and the
    ledger, and no value computed from the users' data (objective, test loss, reference, the run's times)."""
    cfg = NoisyADMMConfig(users=200, dim=16, rounds=41, seed=1)
    run = run_noisy_admm(cfg, out=tmp_path / "r")
    coord = tmp_path / "r" / "coordinator_view"
    with np.load(coord / "model.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z["x"], run.x)
        np.testing.assert_array_equal(z["lam"], run.lam)
    data = json.loads((coord / "summary.json").read_text())
    assert set(data) == {"view", "summary", "privacy"} and set(data["summary"]) <= set(COORDINATOR_KEYS)
    assert data["privacy"]["zcdp"] == pytest.approx(run.summary["zcdp_total"], rel=1e-15)
    data_derived = {"final_objective", "final_objective_std", "final_test_loss", "centralized_objective",
                    "relative_gap_to_centralized", "reference_x_norm", "preprocessing", "wall_s", "setup_s", "round_ms"}
    assert not data_derived & set(data["summary"])
    text = (coord / "summary.json").read_text()
    for key in ("final_objective", "centralized_objective", "final_test_loss"):
        assert repr(float(run.summary[key])) not in text, key
    ev = json.loads((tmp_path / "r" / "simulation_evaluation" / "summary.json").read_text())["summary"]
    assert data_derived <= set(ev) and ev["final_objective"] == run.summary["final_objective"]


def test_the_headline_composes_over_the_published_runs(tmp_path):
    """Issue 26 item 5: every one of the R runs is published, so the headline ε is the dataset-level guarantee over
    them: ρ = max_i Σ_r u_{r,i} · η²Δ²/(2σ²) (docs/amplification.md, "What a run publishes"). --runs 100 reports
    exactly that, larger than --runs 1 by the ratio of the most-used user's uses; the first user's figure is
    the same per-run number in both."""
    common = ["learn", "--algorithm", "noisy-admm", "--users", "200", "--dim", "8", "--rounds", "50", "--seed", "1", "-q"]
    got = {}
    for runs in (1, 100):
        out = tmp_path / f"r{runs}.json"
        assert main([*common, "--runs", str(runs), "--json", str(out)]) == 0
        got[runs] = json.loads(out.read_text())
    one, many = got[1], got[100]
    local = one_step_zcdp(one["eta"], one["gradient_sensitivity"], one["sigma"])
    for runs, s in got.items():  # the published order is public (split seed 0): recount every user's uses
        order = user_order(200, runs, 50, "permutation", 0)
        m = int(np.bincount(order.ravel(), minlength=200).max())
        assert s["every_user"]["uses"] == m and s["every_user"]["runs"] == runs
        assert s["zcdp_total"] == pytest.approx(m * local, rel=1e-12)
        assert s["epsilon_total"] == pytest.approx(zcdp_to_dp(m * local, s["delta_total"]), rel=1e-12)
    assert got[1]["every_user"]["uses"] == 1 and many["every_user"]["uses"] > 10
    assert many["zcdp_total"] / one["zcdp_total"] == pytest.approx(many["every_user"]["uses"], rel=1e-12)
    assert many["epsilon_total"] > 5 * one["epsilon_total"]
    assert many["first_user"] == one["first_user"]  # per run, labelled: not the headline


def _noisy_run(tmp_path, name, *extra):
    """A seeded noisy-admm run (3 batched runs, 4 clients) into tmp_path/name: its release, history and summary."""
    import pandas as pd

    out = tmp_path / name
    assert main(["learn", "--algorithm", "noisy-admm", "--users", "120", "--dim", "8", "--rounds", "150", "--runs", "3",
                 "--clients", "4", "--seed", "2", "--out", str(out), "-q", *extra]) == 0
    with np.load(out / "coordinator_view" / "model.npz", allow_pickle=False) as z:
        release = (z["x"], z["lam"])
    return out, release, pd.read_csv(out / "simulation_evaluation" / "history.csv"), read_summary(out)


def test_process_backend_bit_identical_to_serial_and_clients_write_nothing(tmp_path):
    """Issue 28 item 3: the users on 4 clients in worker processes; a seeded run equals the serial one bit for bit
    (each client draws its own stream for its own rows). The clients keep no file: the run directory holds the
    coordinator's files only (noisy-admm keeps no checkpoint, so there is no clients.private/)."""
    import pandas as pd

    _, serial, h_serial, s_serial = _noisy_run(tmp_path, "serial")
    out, process, h_process, s_process = _noisy_run(tmp_path, "process", "--backend", "process", "--workers", "2")
    for a, b in zip(serial, process):
        np.testing.assert_array_equal(a, b)
    pd.testing.assert_frame_equal(h_serial, h_process, check_exact=True)
    timing = {"backend", "wall_s", "round_ms", "setup_s"}
    assert {k: v for k, v in s_serial.items() if k not in timing} == {k: v for k, v in s_process.items() if k not in timing}
    assert s_process["backend"] == "process" and s_process["clients"] == 4
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "config.json", "coordinator_view/model.npz", "coordinator_view/privacy_receipt.json", "coordinator_view/summary.json",
        "simulation_evaluation/history.csv", "simulation_evaluation/summary.json"]


def test_clients_hold_their_block_and_draw_their_own_noise():
    """Each client's spec holds its own contiguous block of users only; the coordinator's loop over the hosts is
    Algorithm 1 (σ = 0: equal to the in-process maths to rounding), and with noise every client's draws are its
    own stream (a secret run differs from the next)."""
    from powerdp.apps.learning.amplified import iterate
    from powerdp.apps.learning.noisy_admm import noisy_admm
    from powerdp.apps.learning.noisy_hosts import user_blocks, user_specs
    from powerdp.engine.sharing.hosts import make_sharing_backend

    prob = elastic_net_data(0.25, n=6, users=50)
    specs = user_specs(prob.features, prob.targets, 3, eta=0.5, beta=0.9, ridge_in_f=0.0, sigma=0.0, seed=None)
    edges = user_blocks(50, 3)
    assert list(edges) == [0, 17, 33, 50]
    for s, lo, hi in zip(specs, edges[:-1], edges[1:]):
        np.testing.assert_array_equal(s.kwargs["features"], prob.features[lo:hi])
        assert s.weight == hi - lo and not np.shares_memory(s.kwargs["features"], prob.features)
    order = user_order(50, 2, 80, "uniform", 0)
    backend = make_sharing_backend("serial", specs)
    x, lam, obj = iterate(prob, order, 80, 0.9, edges, backend)
    ref = noisy_admm(prob, eta=0.5, beta=0.9, sigma=0.0, iterations=80, order=order, evaluate=True)
    np.testing.assert_allclose(x, ref.x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(lam, ref.lam, rtol=0, atol=1e-12)
    np.testing.assert_allclose(obj, ref.objective, rtol=1e-12)
    noisy = [iterate(prob, order, 80, 0.9, edges, make_sharing_backend(
        "serial", user_specs(prob.features, prob.targets, 3, eta=0.5, beta=0.9, ridge_in_f=0.0, sigma=0.1, seed=None)))[0]
        for _ in range(2)]
    assert np.abs(noisy[0] - noisy[1]).max() > 1e-3 and np.abs(noisy[0] - x).max() > 1e-3


def test_a_vanishing_sigma_is_one_line_not_a_zero_division(capsys):
    """Issue 38, bug 2: ``--sigma 1e-300`` divided by σ² = 0 in the accountant (a ZeroDivisionError traceback through
    the learning command; only ``privacy amplification`` caught it). The accountant itself now refuses the constants."""
    from powerdp.cli import main

    status = main(["-q", "learn", "elastic-net", "--algorithm", "noisy-admm", "--sigma", "1e-300", "--users", "50",
                   "--dim", "4", "--rounds", "5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "σ (--sigma) = 1e-300" in err[0] and "double precision" in err[0], err
