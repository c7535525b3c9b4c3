"""The empirical privacy audit (powerdp.studies.audit, ``powerdp audit``): its statistics against known values and
real mechanisms, and end to end on case14: a non-private run is detected, a private one stays within its
claim, and a run whose noise is switched off behind the ledger's back fails."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.cli import main
from powerdp.errors import ConfigError
from powerdp.privacy.faults import InjectedFaults
from powerdp.privacy.mechanisms import LaplaceMechanism
from powerdp.studies.audit import (
    AuditRunFailed,
    attack,
    best_threshold,
    clopper_pearson,
    epsilon_lower_bound,
    linear_distinguisher,
    neighbouring_network,
    run_audit,
)

# ----------------------------------------------------------------------------- statistics


def test_clopper_pearson_known_values():
    # k = 0 and k = n have closed forms: (0, 1 − (α/2)^(1/n)) and ((α/2)^(1/n), 1)
    lo, hi = clopper_pearson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-12)
    lo, hi = clopper_pearson(10, 10)
    assert lo == pytest.approx(0.025 ** (1 / 10), rel=1e-12) and hi == 1.0
    # tabulated exact intervals (e.g. R binom.test): 5/10 → [0.1871, 0.8129], 1/10 → [0.00253, 0.4450]
    assert np.allclose(clopper_pearson(5, 10), (0.187086, 0.812914), atol=1e-6)
    assert np.allclose(clopper_pearson(1, 10), (0.002529, 0.445016), atol=1e-6)
    # 99 %: wider
    lo99, hi99 = clopper_pearson(5, 10, confidence=0.99)
    assert lo99 < 0.187 and hi99 > 0.813
    # vectorized
    lo, hi = clopper_pearson(np.array([0, 5, 10]), 10)
    assert lo.shape == (3,) and lo[0] == 0.0 and hi[2] == 1.0


def test_epsilon_lower_bound_on_constructed_rates():
    assert epsilon_lower_bound(0.1, 0.2) == pytest.approx(math.log(8.0))  # max(ln(0.8/0.1), ln(0.9/0.2))
    assert epsilon_lower_bound(0.2, 0.1) == pytest.approx(math.log(8.0))  # symmetric in the two errors
    assert epsilon_lower_bound(0.1, 0.2, delta=0.05) == pytest.approx(math.log(0.75 / 0.1))
    assert epsilon_lower_bound(0.5, 0.5) == 0.0  # a coin flip proves nothing
    assert epsilon_lower_bound(0.7, 0.6) == 0.0  # worse than chance: clamped to 0
    assert epsilon_lower_bound(0.0, 1.0) == 0.0  # never says "positive": no evidence
    assert epsilon_lower_bound(0.3, 0.0) == math.inf  # a test that never errs on one side and sometimes right
    np.testing.assert_allclose(epsilon_lower_bound([0.1, 0.5], [0.2, 0.5]), [math.log(8.0), 0.0])


def test_attack_on_a_laplace_mechanism_is_sound_and_nearly_tight():
    """Samples of a real ε = 1 Laplace release on two neighbouring inputs: the bound is ≤ 1 and close to it."""
    mech = LaplaceMechanism(2.0, 1.0)
    rng = np.random.default_rng(7)
    n = 40_000
    x0 = mech.sample(rng, n)[:, None]
    x1 = 2.0 + mech.sample(rng, n)[:, None]  # the input moved by the full sensitivity
    res = attack(x0, x1)
    assert res["epsilon_lower_bound"] <= 1.0
    assert res["epsilon_lower_bound"] > 0.9  # 0.963: every threshold past the shift has likelihood ratio e
    assert res["tpr_interval"][0] <= res["tpr"] <= res["tpr_interval"][1]
    # a weaker mechanism (ε = 0.25) cannot be shown to be ε = 1
    weak = LaplaceMechanism(2.0, 0.25)
    res = attack(weak.sample(rng, n)[:, None], 2.0 + weak.sample(rng, n)[:, None])
    assert 0.14 < res["epsilon_lower_bound"] <= 0.25  # seeds 0-7 of this test on the sampler's draws: 0.156-0.232


def test_linear_distinguisher_whitens_and_ignores_constant_coordinates():
    rng = np.random.default_rng(0)
    n = 500
    # coordinate 0: constant (as round 0), 1: small shift under small noise, 2: larger shift under huge noise
    x0 = np.column_stack([np.ones(n), rng.normal(0, 0.01, n), rng.normal(0, 10.0, n)])
    x1 = np.column_stack([np.ones(n), rng.normal(0.01, 0.01, n), rng.normal(1.0, 10.0, n)])
    w = linear_distinguisher(x0, x1)
    assert w[0] == 0.0
    assert abs(w[1]) == 1.0 and abs(w[2]) < 1e-3  # scaled to max |w| = 1; the informative coordinate dominates
    # deterministic classes (no variance at all): the plain mean difference, and a perfect threshold
    d0, d1 = np.tile([1.0, 2.0], (10, 1)), np.tile([1.0, 2.5], (10, 1))
    w = linear_distinguisher(d0, d1)
    np.testing.assert_array_equal(w, [0.0, 1.0])
    tau = best_threshold(d0 @ w, d1 @ w)
    assert 2.0 < tau < 2.5


def test_neighbouring_network_moves_one_load(case14):
    b = case14.bus_index(4)
    n1 = neighbouring_network(case14, b, 0.01)
    diff_p, diff_q = n1.pd - case14.pd, n1.qd - case14.qd
    assert diff_p[b] == pytest.approx(0.01) and np.count_nonzero(diff_p) == 1 and not diff_q.any()
    n2 = neighbouring_network(case14, b, 0.01, adjacency="bus")
    assert np.count_nonzero(n2.pd - case14.pd) == 1 and (n2.qd - case14.qd)[b] == pytest.approx(0.01)
    assert case14.pd[b] == pytest.approx(0.478)  # the original is untouched


# ----------------------------------------------------------------------------- end to end (case14)

RUNS = 30  # per dataset: 15 test runs per side, so a perfect attack proves ε ≥ ln(0.727/0.273) ≈ 0.98 at most
# one Bonferroni family of 3 tests (the release, the coordinator's view, its timings): each interval end at 1 − 0.05/6
PERFECT = math.log((1 - (1 - (0.05 / 6) ** (1 / 15))) / (1 - (0.05 / 6) ** (1 / 15)))


def _cfg(**kw) -> RunConfig:
    base = dict(case="case14", zones=2, rounds=1, local_updates=1, evaluate=False, checkpoint_every=0)
    return RunConfig(**{**base, **kw})


def test_nonprivate_is_detected(case14):
    res = run_audit(_cfg(algorithm="nonprivate"), runs=RUNS, bus=4, jobs=1, network=case14)
    assert res.verdict == "not private" and res.epsilon_total is None and not res.failed
    # deterministic releases that differ: a perfect attack, the largest bound 15 + 15 test runs can give
    assert (res.attack["tpr"], res.attack["fpr"]) == (1.0, 0.0)
    assert res.epsilon_lower_bound == pytest.approx(PERFECT, rel=1e-9)
    assert res.epsilon_lower_bound > 0.95
    assert res.settings["bus"] == 4 and res.settings["zone"] == 0
    assert res.settings["released_values_per_run"] == 2 * 23  # rounds 0 and 1 × zone 0's 23 shared values


@pytest.mark.parametrize("algorithm", ["objl", "inpl", "inps"])
def test_private_run_stays_within_its_budget_and_broken_noise_fails(case14, algorithm):
    cfg = _cfg(algorithm=algorithm, target_epsilon=0.5)  # below PERFECT: a leak would show
    res = run_audit(cfg, runs=RUNS, bus=4, jobs=1, network=case14)
    assert res.epsilon_total == pytest.approx(0.5) and res.epsilon_per_step == pytest.approx(0.5)
    assert res.epsilon_lower_bound <= res.epsilon_total
    assert res.verdict == "passed" and not res.failed
    # the same run with the noise switched off behind the ledger's back, on a process pool (the test-only
    # faults travel with the configuration to the workers): same claim, caught
    broken = run_audit(cfg.replace(faults=InjectedFaults(disable_noise=True)), runs=RUNS, bus=4, jobs=2, network=case14)
    assert broken.epsilon_total == pytest.approx(0.5)  # the ledger still records the spend
    assert (broken.attack["tpr"], broken.attack["fpr"]) == (1.0, 0.0)
    assert broken.epsilon_lower_bound == pytest.approx(PERFECT, rel=1e-9)
    assert broken.verdict == "failed" and broken.failed


def test_result_does_not_depend_on_jobs(case14):
    cfg = _cfg(algorithm="objl", epsilon=2.0, seed=0)
    one = run_audit(cfg, runs=20, bus=4, jobs=1, network=case14)
    two = run_audit(cfg, runs=20, bus=4, jobs=2, network=case14)
    assert one.attack == two.attack
    assert one.epsilon_lower_bound == two.epsilon_lower_bound


def test_probe_picks_the_most_influential_load(case14):
    res = run_audit(_cfg(algorithm="nonprivate"), runs=20, jobs=2, network=case14)
    influence = res.probe["influence"]
    assert len(influence) == 11  # every loaded bus of case14
    top = max(influence, key=influence.get)
    assert res.settings["bus"] == int(top) and influence[top] > 0
    assert list(influence.values()) == sorted(influence.values(), reverse=True)


def test_a_failed_run_is_reported(case14, monkeypatch):
    from .conftest import fail_local_solve

    fail_local_solve(monkeypatch, zone=0, round=1)
    with pytest.raises(AuditRunFailed, match="dataset D with seed 0 failed: run stopped in round 1: zone 0") as exc:
        run_audit(_cfg(algorithm="objl", seed=0), runs=20, bus=4, jobs=1, network=case14)
    assert exc.value.exit_status == 1


def test_run_audit_refuses_bad_input(case14):
    cfg = _cfg(algorithm="objl")
    with pytest.raises(ConfigError, match="at least 20"):
        run_audit(cfg, runs=19, network=case14)
    with pytest.raises(ConfigError, match="jobs"):
        run_audit(cfg, runs=20, jobs=0, network=case14)
    with pytest.raises(ConfigError, match="bus 99: no such bus"):
        run_audit(cfg, runs=20, bus=99, network=case14)
    with pytest.raises(ConfigError, match="bus 1: the bus has no load"):
        run_audit(cfg, runs=20, bus=1, network=case14)
    with pytest.raises(ConfigError, match="lies in zone 0, not in --zone 1"):
        run_audit(cfg, runs=20, bus=4, zone=1, network=case14)
    with pytest.raises(ConfigError, match="zones 0..1"):
        run_audit(cfg, runs=20, zone=2, network=case14)
    with pytest.raises(ConfigError, match="serial backend"):
        run_audit(cfg.replace(backend="process"), runs=20, network=case14)


# ----------------------------------------------------------------------------- command line


def test_cli_audit_fails_with_its_own_exit_status_and_writes_json(tmp_path, capsys):
    out = tmp_path / "audit.json"
    args = ["audit", "case14", "--algorithm", "objl", "--target-epsilon", "0.5", "--rounds", "1", "--runs", "30",
            "--bus", "4", "--jobs", "1", "--json", str(out)]
    # a broken run (the test-only faults argument): a perfect attack on 15 + 15 test runs, ε ≥ 0.98 (family of 3)
    assert main(args, faults=InjectedFaults(disable_noise=True)) == 3
    captured = capsys.readouterr()
    assert "audit FAILED" in captured.err and "noise switched off" in captured.err
    assert "lower bound" in captured.out and "claimed" in captured.out and "FAILED" in captured.out
    data = json.loads(out.read_text())
    for key in ("epsilon_lower_bound", "epsilon_total", "tpr", "fpr", "tpr_interval", "fpr_interval", "settings", "verdict", "wall_s"):
        assert key in data, key
    assert data["epsilon_total"] == pytest.approx(0.5) and data["epsilon_lower_bound"] == pytest.approx(PERFECT, rel=1e-9)
    assert (data["tpr"], data["fpr"]) == (1.0, 0.0) and data["verdict"] == "failed"
    assert data["settings"]["target_epsilon"] == 0.5 and data["settings"]["runs"] == 30 and data["settings"]["bus"] == 4
    assert main(args) == 2  # the file exists: refused without --force, before any run
    assert "--force" in capsys.readouterr().err


def test_cli_min_runs_matches_the_audit():
    from powerdp import cli
    from powerdp.studies import audit

    assert cli.MIN_RUNS == audit.MIN_RUNS


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--runs", "19"], "argument --runs: 19 is out of range: give a whole number >= 20"),
        (["--jobs", "0"], "argument --jobs: 0 is out of range: give a whole number >= 1"),
        (["--zones", "0"], "argument --zones: 0 is out of range: give a whole number >= 1"),
        (["--zone", "2"], "--zone 2: must be a zone index 0..1"),
        (["--seed", "-1"], "argument --seed: -1 is out of range: give a whole number >= 0"),
        (["--beta", "0"], "argument --beta: 0 is out of range: give a number > 0"),
        (["--beta", "nan"], "argument --beta: 'nan' is not finite"),
        (["--algorithm", "foo"], "--algorithm 'foo': unknown algorithm"),
        (["--epsilon", "-1"], "argument --epsilon: -1 is out of range: give a number > 0"),
        (["--rounds", "0"], "argument --rounds: 0 is out of range: give a whole number >= 1"),
        (["--local-updates", "0"], "argument --local-updates: 0 is out of range: give a whole number >= 1"),
        (["--algorithm", "objg", "--target-epsilon", "1"], "--target-delta None: the Gaussian mechanism needs"),
        (["--target-epsilon", "0"], "argument --target-epsilon: 0 is out of range: give a number > 0"),
        (["--algorithm", "nonprivate", "--target-epsilon", "1"], "is not private"),
        (["--algorithm", "nonprivate", "--epsilon", "1"], "--epsilon / --delta given, but algorithm 'nonprivate' is not private"),
        (["--delta", "0.1"], "--delta 0.1 is not used: 'objl' uses no Gaussian noise"),
        (["--bus", "99"], "--bus 99: no such bus in case14"),
        (["--bus", "1"], "--bus 1: the bus has no load"),
        (["--bus", "4", "--zone", "1"], "--bus 4 lies in zone 0, not in --zone 1"),
    ],
)
def test_cli_audit_bad_input(extra, message, capsys):
    try:  # a repeated --runs: the last one counts
        status = main(["audit", "case14", "--runs", "20", *extra])
    except SystemExit as exc:  # a number out of range is refused as the command line is parsed (powerdp.cli.args)
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err
    assert len([ln for ln in err.splitlines() if "error" in ln]) == 1, err  # one error line (setup stages aside)
    assert message in err, err
    assert "Traceback" not in err


def test_cli_audit_epsilon_and_target_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["audit", "case14", "--epsilon", "1", "--target-epsilon", "1"])
    assert exc.value.code == 2
    assert "not allowed with argument --epsilon" in capsys.readouterr().err


def test_cli_audit_json_path_checked_before_any_work(tmp_path, capsys):
    assert main(["audit", "case14", "--runs", "20", "--json", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


# ----------------------------------------------------------------------------- every channel (privacy review)

PRIVATE = {"objl": {}, "objg": {"delta": 1e-5, "epsilon": 0.5}, "outl": {"linearize": "all"}, "outg": {"linearize": "all", "delta": 1e-5, "epsilon": 0.5},
           "objt": {}, "inpl": {}, "inpg": {"delta": 1e-5, "epsilon": 0.5}, "inps": {}}


@pytest.mark.slow  # 8 audits of 40 runs: ~1 min
@pytest.mark.parametrize("algorithm", sorted(PRIVATE))
def test_honest_runs_of_every_private_algorithm_pass_on_every_channel(case14, algorithm):
    """Seeded (deterministic) audits: every channel the coordinator holds, the release and its view files, stays
    within the claim; the replay adversary, who knows the seed, is reported on its own and wins outright."""
    kw = {"epsilon": 1.0, **PRIVATE[algorithm]}
    res = run_audit(_cfg(algorithm=algorithm, seed=11, **kw), runs=20, bus=4, jobs=1, network=case14)
    assert res.verdict == "passed", (res.epsilon_lower_bound, res.channels)
    from powerdp.studies.fp_attack import FloatingPointCheck

    fp = {"floating_point"} if FloatingPointCheck.applies(res_config := _cfg(algorithm=algorithm, seed=11, **kw)) else set()
    assert set(res.channels) == {"coordinator_view", "coordinator_timing", "replay"} | fp
    assert bool(fp) == (res_config.spec.perturbation == "output")  # output perturbation: the release's doubles are checked too
    assert all(c["epsilon_lower_bound"] <= res.epsilon_total for n, c in res.channels.items() if n != "replay")
    assert (res.channels["replay"]["tpr"], res.channels["replay"]["fpr"]) == (1.0, 0.0)
    assert res.channels["replay"]["epsilon_lower_bound"] > 0.5  # 10 + 10 test runs: the most they can show
    assert res.settings["fields_outside_allow_list"] == [] and res.settings["noise_source"] == "seeded"


def test_secret_noise_audit_has_no_replay_channel(case14):
    res = run_audit(_cfg(algorithm="objl", target_epsilon=0.5), runs=20, bus=4, jobs=1, network=case14)
    assert res.settings["noise_source"] == "secret" and res.settings["seeds"] is None
    assert "replay" not in res.channels and res.verdict == "passed"
    # one family-wise error of 5 % over the release and every other channel (Bonferroni), release included
    family = 1 + len(res.channels)
    assert res.attack["confidence"] == pytest.approx(1 - 0.05 / family)
    assert all(c["confidence"] == pytest.approx(1 - 0.05 / family) for c in res.channels.values())


def test_leak_switch_fails_the_audit_with_exit_status_3(capsys, tmp_path):
    out = tmp_path / "leak.json"
    args = ["audit", "case14", "--zones", "2", "--algorithm", "inpl", "--target-epsilon", "0.5", "--rounds", "2",
            "--runs", "20", "--bus", "4", "--jobs", "1", "--json", str(out)]
    # Σ|ξ| back in every ZoneUpdate, as before the review (the test-only faults argument)
    assert main(args, faults=InjectedFaults(leak="noise_magnitude")) == 3
    err = capsys.readouterr().err
    assert "audit FAILED" in err and "noise_magnitude" in err and "allow-list" in err
    data = json.loads(out.read_text())
    assert data["verdict"] == "failed" and data["settings"]["fields_outside_allow_list"] == ["noise_magnitude"]
    assert "field:noise_magnitude" in data["channels"]


def test_paper_sensitivity_with_output_perturbation_is_never_called_passed(case14):
    cfg = _cfg(algorithm="outl", sensitivity="paper", linearize="all", epsilon=1.0, seed=3)
    res = run_audit(cfg, runs=20, bus=4, jobs=1, network=case14)
    assert res.verdict in ("no guarantee", "failed") and res.verdict != "passed"


def test_cli_audit_of_an_unsound_claim_exits_3(capsys):
    args = ["audit", "case14", "--zones", "2", "--algorithm", "outl", "--epsilon", "1", "--sensitivity", "paper",
            "--rounds", "1", "--runs", "20", "--bus", "4", "--jobs", "1", "--seed", "0"]
    assert main(args) == 3
    captured = capsys.readouterr()
    assert "NO GUARANTEE" in captured.out and "not a proven bound" in captured.err
