"""The floating-point attack (powerdp/studies/fp_attack.py) finds the old sampler's leak and nothing on the product's:
learn objl (Laplace, objective perturbation) and outg (Gaussian, output perturbation), one round, ε 1
(benchmarks/fp_attack.py is the full form: objl, objt, outl, objg, outg and power flow's outl, outg)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from powerdp.apps.learning import LearnConfig
from powerdp.privacy.faults import InjectedFaults
from powerdp.studies.fp_attack import reachable_grid, reachable_numpy_laplace
from powerdp.studies.fp_attack_targets import attack, learning_target

TRIALS = 40  # 20 + 20 perfect guesses prove ε ≥ 1.6 at 95 %


def test_reachability_is_exact_on_numpy_draws():
    rng = np.random.default_rng(1)
    v1 = rng.normal(size=640) * 0.01
    v0 = v1.copy()
    v0[:300] += 1e-4
    r = v1 + rng.laplace(0, 0.0032, 640)
    assert reachable_numpy_laplace(r, v1, 0.0032).all()  # every true draw is found
    assert not reachable_numpy_laplace(r, v0, 0.0032).all()  # the other hypothesis is ruled out
    assert reachable_grid(np.array([3 * 2.0**-40]), 2.0**-40).all() and not reachable_grid(np.array([0.1]), 2.0**-40).any()


def test_the_replay_of_numpys_laplace_matches_it_whatever_simd_log_numpy_dispatches(monkeypatch):
    """Why this guards the AVX-512 failure of issue 36. numpy.random's Laplace is C code that calls the C library's
    scalar log; numpy's vectorized np.log dispatches on the CPU (``numpy.lib.introspect.opt_func_info("^log$")``: here
    X86_V3, where it loops over the C library's log; on AVX512F/SKX/SPR machines X86_V4, numpy's own SIMD log, whose
    last bits differ). The replay once used np.log: it matched numpy.random on this machine and missed 12 of 19 draws
    there, so the audit's floating-point channel went blind. This machine has no AVX-512, so the test makes np.log
    wrong in its last bit instead: the replay (fp_attack.numpy_laplace) still gives numpy.random's draws bit for bit,
    because it never calls np.log, while the vectorized formula then misses them."""
    from powerdp.studies.fp_attack import numpy_laplace

    scale, n = 0.0032, 4000
    draws = np.random.Generator(np.random.PCG64(7)).laplace(0.0, scale, n)
    k = (np.random.PCG64(7).random_raw(n) >> np.uint64(11)).astype(np.int64)  # numpy's U = k·2⁻⁵³, one word a draw
    assert np.array_equal(numpy_laplace(k, scale), draws)
    true_log = np.log
    monkeypatch.setattr(np, "log", lambda x, *a, **kw: np.nextafter(true_log(x, *a, **kw), np.inf))  # one ulp off
    assert np.array_equal(numpy_laplace(k, scale), draws)  # the replay does not depend on numpy's log
    u = k * (1.0 / 2.0**53)
    vectorized = np.where(u >= 0.5, 0.0 - scale * np.log(2.0 - u - u), 0.0 + scale * np.log(u + u))
    assert not np.array_equal(vectorized, draws)  # the np.log formula would have missed them


CONFIGS = {
    "objl": dict(algorithm="objl"),
    "outg": dict(algorithm="outg", target_delta=1e-5),
}


def _cfg(name: str) -> LearnConfig:
    warnings.filterwarnings("ignore")
    return LearnConfig(dataset="digits", target_epsilon=1.0, clients=3, **CONFIGS[name])


NAMES = ["objl", pytest.param("outg", marks=pytest.mark.slow)]  # the Gaussian checks 256 ziggurat rows: slow


@pytest.mark.parametrize("name", NAMES)
def test_the_attack_breaks_the_old_sampler(name):
    release, replay = learning_target(_cfg(name).replace(faults=InjectedFaults(sampler="numpy")))
    res = attack(release, replay, TRIALS, "numpy")
    assert res["fp"] == 0 and res["tp"] == res["positives"]
    assert res["epsilon_lower_bound"] > 1.0  # above the claim


@pytest.mark.parametrize("name", NAMES)
def test_the_attack_finds_nothing_on_the_product_sampler(name):
    release, replay = learning_target(_cfg(name))
    for model in ("grid", "numpy"):
        res = attack(release, replay, TRIALS // 2, model)
        assert res["tp"] == 0 and res["fp"] == 0 and res["epsilon_lower_bound"] <= 1.0


# ----------------------------------------------------------------------------- the audits' floating-point channel


def test_power_flow_audit_catches_the_old_sampler_and_passes_the_product(tmp_path, capsys):
    from powerdp.cli import main

    args = ["audit", "case14", "--zones", "2", "--algorithm", "outl", "--target-epsilon", "1", "--rounds", "1", "--runs", "20",
            "--bus", "4", "--jobs", "1", "-q", "--json"]
    assert main(args + [str(tmp_path / "old.json")], faults=InjectedFaults(sampler="numpy")) == 3
    assert "audit FAILED" in capsys.readouterr().err
    import json

    old = json.loads((tmp_path / "old.json").read_text())
    fp = old["channels"]["floating_point"]
    assert fp["tp"] == fp["positives"] and fp["fp"] == 0 and fp["epsilon_lower_bound"] > 1.0
    assert main(args + [str(tmp_path / "new.json")]) == 0
    new = json.loads((tmp_path / "new.json").read_text())["channels"]["floating_point"]
    assert new["tp"] == new["fp"] == new["unreachable_runs"] == 0 and new["sampler"] == "grid"


def test_learning_audit_catches_the_old_sampler(tmp_path, capsys):
    from powerdp.cli import main

    argv = ["learn", "digits", "--clients", "3", "--algorithm", "objl", "--target-epsilon", "1", "--rounds", "1", "--audit", "20",
            "--json", str(tmp_path / "a.json")]
    assert main(argv, faults=InjectedFaults(sampler="numpy")) == 3
    assert "audit FAILED" in capsys.readouterr().err
    import json

    res = json.loads((tmp_path / "a.json").read_text())
    assert res["channels"]["floating_point"]["epsilon_lower_bound"] > 1.0
    assert main(argv[:-1] + [str(tmp_path / "b.json")]) == 0
