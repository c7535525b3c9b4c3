"""End-to-end distributed runs: exactness, determinism across backends, results, failures, resume."""

import json
import os
import signal

import numpy as np
import pandas as pd
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.result import HISTORY_COLUMNS, RunResult, read_history
from powerdp.apps.power_flow.runner import RunFailed, run_distributed
from powerdp.errors import ConfigError

from .conftest import fail_local_solve

COMPARE = ["objective", "feasibility", "dual_residual", "noise_magnitude", "max_violation", "epsilon_spent"]


def test_exact_admm_reaches_centralized_optimum_case14():
    # every one of the 120 rounds (tolerance 0): the stopping rule would end it at round 61, where both relative
    # residuals are below 1e-4 but the absolute one is 4e-4 p.u.
    cfg = RunConfig(case="case14", zones=3, algorithm="exact", objective="cost", rho=1e4, rounds=120, tolerance=0.0)
    res = run_distributed(cfg)
    s = res.summary
    assert s["centralized_objective"] == pytest.approx(8075.12, abs=0.01)
    assert abs(s["relative_gap_to_centralized"]) <= 1e-5
    assert s["final_feasibility"] <= 1e-4
    assert s["max_violation"] <= 1e-6


def test_exact_admm_on_case14_stops_at_its_tolerance_near_the_optimum():
    """The default stopping rule: both relative residuals at most 1e-4, well before the cap, the cost within 1e-5 of
    the centralized optimum and the zones' tie-line flows within 0.05 MW of each other."""
    cfg = RunConfig(case="case14", zones=3, algorithm="exact", objective="cost", rho=1e4, rounds=120)
    s = run_distributed(cfg).summary
    assert s["stopped"] == "tolerance" and s["rounds"] < 120
    assert max(s["final_primal_relative"], s["final_dual_relative"]) <= 1e-4
    assert abs(s["relative_gap_to_centralized"]) <= 1e-5
    assert s["consensus_gap_mw"] <= 0.05


def test_nonprivate_shedding_decreases_toward_zero():
    res = run_distributed(RunConfig(case="case14", algorithm="nonprivate", rounds=40), reference=False)
    h = res.history
    assert list(h.columns) == HISTORY_COLUMNS
    assert h["objective"].iloc[-1] < 0.05 * h["objective"].iloc[0]
    assert h["feasibility"].iloc[-1] < h["feasibility"].iloc[0]
    assert (h["epsilon_spent"] == 0).all() and (h["noise_magnitude"] == 0).all()


def test_objective_perturbation_history_and_privacy():
    cfg = RunConfig(case="case14", algorithm="objg", epsilon=0.5, delta=1e-2, rounds=6, local_updates=2)
    res = run_distributed(cfg, reference=False)
    h = res.history
    assert (h["max_violation"] <= 1e-6).all()  # every release feasible
    assert (h["noise_magnitude"] > 0).all()
    assert h["epsilon_spent"].is_monotonic_increasing
    assert set(res.privacy) == {0, 1, 2}
    for report in res.privacy.values():
        assert report["steps"] == 12
    assert set(res.summary["epsilon_total"]) == {0, 1, 2}


def test_serial_and_process_backends_give_identical_histories():
    cfg = RunConfig(case="case14", algorithm="objl", epsilon=0.2, rounds=5, local_updates=2, seed=7)
    a = run_distributed(cfg, reference=False)
    b = run_distributed(cfg.replace(backend="process", workers=2), reference=False)
    pd.testing.assert_frame_equal(a.history[COMPARE], b.history[COMPARE], check_exact=True)
    np.testing.assert_array_equal(a.consensus, b.consensus)
    assert b.summary["hosts"] == 2


def test_same_seed_same_run_other_seed_other_run():
    cfg = RunConfig(case="case14", algorithm="objl", epsilon=0.2, rounds=3, seed=1)
    a = run_distributed(cfg, reference=False).history
    b = run_distributed(cfg, reference=False).history
    c = run_distributed(cfg.replace(seed=2), reference=False).history
    pd.testing.assert_frame_equal(a[COMPARE], b[COMPARE], check_exact=True)
    assert not np.allclose(a["objective"], c["objective"])


def test_save_load_round_trip(tmp_path):
    cfg = RunConfig(case="case14", algorithm="objl", rounds=4)
    res = run_distributed(cfg, out=tmp_path / "run")
    for name in ("config.json", "partition.csv", "coordinator_view/history.csv", "coordinator_view/summary.json",
                 "coordinator_view/consensus.csv", "simulation_evaluation/history.csv", "simulation_evaluation/summary.json",
                 "simulation_evaluation/buses.csv"):
        assert (tmp_path / "run" / name).is_file(), name
    for name in ("history.csv", "summary.json", "consensus.csv", "buses.csv", "generators.csv"):  # no mixed file
        assert not (tmp_path / "run" / name).exists(), name
    back = RunResult.load(tmp_path / "run")
    pd.testing.assert_frame_equal(back.history, res.history, check_dtype=False)
    np.testing.assert_allclose(back.consensus, res.consensus)
    assert back.shared_keys == res.shared_keys
    assert back.config == res.config
    assert set(back.zone_solutions) == {0, 1, 2}
    assert back.summary["final_objective"] == pytest.approx(res.summary["final_objective"])


@pytest.mark.parametrize("solver", ["ipopt", "clarabel"])
def test_checkpoint_and_resume_continue_the_same_run(tmp_path, solver):
    """Bit for bit, for each local solver (Clarabel's data are rebuilt on resume, updated in a run)."""
    cfg = RunConfig(case="case14", algorithm="objl", epsilon=0.3, rounds=8, checkpoint_every=2, seed=0, local_solver=solver)
    full = run_distributed(cfg, reference=False)
    run_distributed(cfg.replace(rounds=4), out=tmp_path / "r", reference=False)
    resumed = run_distributed(cfg, out=tmp_path / "r", resume=True, reference=False)
    pd.testing.assert_frame_equal(full.history[COMPARE], resumed.history[COMPARE], check_exact=True)


def test_failed_local_solve_names_zone_and_round_and_keeps_history(tmp_path, monkeypatch):
    fail_local_solve(monkeypatch, zone=1, round=3)
    cfg = RunConfig(case="case14", algorithm="objl", rounds=6, checkpoint_every=1, seed=0)
    with pytest.raises(RunFailed, match=r"round 3.*zone 1, round 3, local step 1.*infeasible") as info:
        run_distributed(cfg, out=tmp_path / "f", reference=False)
    assert len(info.value.result.history) == 2
    assert (tmp_path / "f" / "failure.txt").is_file()
    assert len(read_history(tmp_path / "f")) == 2
    monkeypatch.undo()  # the solves work again
    resumed = run_distributed(cfg, out=tmp_path / "f", resume=True, reference=False)
    full = run_distributed(cfg, reference=False)
    pd.testing.assert_frame_equal(full.history[COMPARE], resumed.history[COMPARE], check_exact=True)


def test_dead_worker_process_is_reported():
    from powerdp.engine.backends import AgentSpec, WorkerError
    from powerdp.engine.backends.process import ProcessBackend
    from powerdp.grid.loading import load_case
    from powerdp.grid.partition import bundled_partition

    net = load_case("case14")
    part = bundled_partition(net, 3)
    by = part.shared_by_zone("variables")
    specs = [AgentSpec(z, part.own_buses(z), tuple(by[z])) for z in range(3)]
    backend = ProcessBackend(net, specs, RunConfig(case="case14"), workers=2)
    try:
        backend.initialize()
        os.kill(backend.procs[0].pid, signal.SIGKILL)
        backend.procs[0].join()
        with pytest.raises(WorkerError, match=r"worker process 0 \(zones \[.*\]\) (died|is gone)"):
            backend.diagnostics()
    finally:
        backend.close()


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no checkpoint"):
        run_distributed(RunConfig(case="case14", rounds=2), out=tmp_path, resume=True, reference=False)


def test_bad_config_values_are_named():
    with pytest.raises(ConfigError, match="epsilon"):
        RunConfig(algorithm="objl", epsilon=0)
    with pytest.raises(ConfigError, match="delta"):
        RunConfig(algorithm="objg", delta=1.5)
    with pytest.raises(ConfigError, match="unknown key"):
        RunConfig.from_dict({"case": "case14", "epsilonn": 1})
    with pytest.raises(ConfigError, match="eta"):
        RunConfig(eta="fastest")


def test_cli_run_writes_json(tmp_path, capsys):
    from powerdp.cli import main

    path = tmp_path / "run.json"
    code = main(["run", "case14", "--zones", "3", "--algorithm", "objl", "--rounds", "3", "--json", str(path), "--out", str(tmp_path / "o")])
    assert code == 0
    data = json.loads(path.read_text())
    for key in ("case", "algorithm", "rounds", "final_objective", "final_feasibility", "max_violation", "wall_s", "solver_s", "ipopt_s", "local_solver", "solves", "epsilon_total", "gap_to_centralized"):
        assert key in data
    assert data["rounds"] == 3 and data["solves"] == 9
    out = capsys.readouterr().out
    assert "total spent per zone" in out and "δ 0" in out
    slow = data["straggler_zone"]
    assert f"straggler     zone {slow}: {data['zone_solver_s'][str(slow)]:.2f} s in the zones' solvers (auto)" in out  # the slowest zone, named
    assert main(["run", "case14", "--algorithm", "objl", "--objective", "cost"]) == 2
    assert "no DP guarantee" in capsys.readouterr().err


def test_ipopt_options_reach_local_solves(capfd):
    from powerdp.cli import main

    assert main(["run", "case14", "--rounds", "1", "--no-reference", "--ipopt-option", "bogus_option=3"]) == 2
    assert "invalid Ipopt option bogus_option" in capfd.readouterr().err
    assert main(["-q", "run", "case14", "--rounds", "1", "--no-reference"]) == 0
    assert "Number of Iterations" not in capfd.readouterr().out  # Ipopt is silent by default
    assert main(["-q", "run", "case14", "--rounds", "1", "--no-reference", "--ipopt-option", "print_level=3"]) == 0
    assert "Number of Iterations" in capfd.readouterr().out  # and speaks when asked


@pytest.fixture
def coordinator_inbox(monkeypatch):
    """Every (command, payload) the coordinator's side receives from process-backend workers."""
    from powerdp.engine.backends.process import ProcessBackend

    received = []
    real = ProcessBackend._recv_raw

    def spy(self, h, what):
        status, payload = real(self, h, what)
        received.append((what, payload))
        return status, payload

    monkeypatch.setattr(ProcessBackend, "_recv_raw", spy)
    return received


def test_zone_checkpoints_are_written_on_the_zones_hosts(tmp_path, coordinator_inbox):
    """The coordinator's side receives no zone state: each worker writes its zones' files itself."""
    received = coordinator_inbox
    cfg = RunConfig(case="case14", algorithm="objl", epsilon=0.3, rounds=4, checkpoint_every=2, backend="process", workers=2, seed=0)
    run_distributed(cfg, out=tmp_path / "p", reference=False)
    assert {what for what, _ in received} >= {"save", "prune", "step"}
    assert all(payload is None for what, payload in received if what in ("save", "prune"))

    def holds_state(obj) -> bool:
        if isinstance(obj, dict):
            return bool({"z_last", "lam", "rng", "warm"} & set(map(str, obj))) or any(holds_state(v) for v in obj.values())
        if isinstance(obj, (list, tuple)):
            return any(holds_state(v) for v in obj)
        return False

    assert not any(holds_state(payload) for _, payload in received)
    private = tmp_path / "p" / "zones.private"
    names = sorted(str(p.relative_to(private)) for p in private.glob("zone_*/checkpoint/*.npz"))
    assert names == [f"zone_{z}/checkpoint/round_4.npz" for z in range(3)]
    assert not list((tmp_path / "p" / "checkpoint").glob("zone_*"))
    # a process-backend checkpoint resumes on the serial backend, bit for bit
    full = run_distributed(cfg.replace(rounds=6, backend="serial"), reference=False)
    run_distributed(cfg.replace(rounds=6, backend="serial"), out=tmp_path / "p", resume=True, reference=False)
    resumed = read_history(tmp_path / "p")
    pd.testing.assert_frame_equal(full.history[COMPARE], resumed[COMPARE], check_exact=True)


def test_deployment_mode_sends_nothing_data_dependent_but_releases(tmp_path, coordinator_inbox):
    """evaluate=False: no objective, violation or solution reaches the coordinator; zones write their own solutions."""
    import math

    from powerdp.apps.power_flow.result import RunResult

    received = coordinator_inbox
    cfg = RunConfig(case="case14", algorithm="objl", epsilon=0.3, rounds=3, backend="process", workers=2, evaluate=False, seed=0)
    res = run_distributed(cfg, out=tmp_path / "deploy", reference=True)
    diags = [d for what, payload in received if what == "diag" for d in payload]
    assert diags and all(math.isnan(d.objective) and math.isnan(d.max_violation) and d.solution is None for d in diags)
    assert all(d.stats is None for d in diags)  # solver statistics and Σ|ξ| stay with the zones
    assert res.history["noise_magnitude"].isna().all()
    assert all(d.epsilon_spent > 0 for d in diags)  # the privacy spend is data-independent and still reported
    assert res.history["objective"].isna().all() and res.history["feasibility"].notna().all()
    assert res.summary["centralized_objective"] is None and res.zone_solutions == {}
    assert res.summary["zone_solver_s"] == {} and res.summary["straggler_zone"] is None  # per-zone times stay too
    # the zones' own files hold the same solutions an evaluation run reports
    evaluated = run_distributed(cfg.replace(evaluate=True, backend="serial"), out=tmp_path / "eval", reference=False)
    own = RunResult.load(tmp_path / "deploy").zone_solutions
    assert set(own) == {0, 1, 2}
    for z in own:
        assert own[z] == evaluated.zone_solutions[z]


# ---------------------------------------------------------------------------- HVDC lines


def test_exact_admm_with_hvdc_line_between_zones(hvdc_case):
    # the area partition cuts the AC tie 2-3 and the HVDC line 1 -> 4
    cfg = RunConfig(case=str(hvdc_case), partition="area", zones=None, algorithm="exact", objective="cost", rounds=300,
                    tolerance=1e-7)
    res = run_distributed(cfg)
    s = res.summary
    assert s["stopped"] == "tolerance"
    assert ("p_dc_fr", 0) in res.shared_keys and ("p_dc_to", 0) in res.shared_keys
    assert s["centralized_objective"] == pytest.approx(5928.848, abs=0.01)
    assert abs(s["relative_gap_to_centralized"]) <= 1e-6
    assert s["final_feasibility"] <= 1e-6
    # both zones agree on the line's flows, which obey the loss relation
    p_fr = [res.zone_solutions[z][("p_dc_fr", 0)] for z in (0, 1)]
    p_to = [res.zone_solutions[z][("p_dc_to", 0)] for z in (0, 1)]
    assert p_fr[0] == pytest.approx(p_fr[1], abs=1e-6) == pytest.approx(0.8, abs=1e-5)
    assert 0.98 * p_fr[1] + p_to[1] == pytest.approx(0.01, abs=1e-8)


@pytest.mark.parametrize("algorithm,rounds", [("nonprivate", 30), ("objg", 4)])
def test_shedding_runs_with_hvdc_line(hvdc_case, algorithm, rounds):
    cfg = RunConfig(case=str(hvdc_case), partition="area", zones=None, algorithm=algorithm, rounds=rounds)
    res = run_distributed(cfg, reference=False)
    h = res.history
    assert (h["max_violation"] <= 1e-6).all()
    if algorithm == "nonprivate":
        assert h["objective"].iloc[-1] < 1e-3 * h["objective"].iloc[0]
        assert h["feasibility"].iloc[-1] < 1e-3 * h["feasibility"].iloc[0]
    else:
        assert (h["noise_magnitude"] > 0).all() and h["epsilon_spent"].iloc[-1] > 0


def test_exact_cost_shedding_converges_and_reports_the_dispatch(case14):
    """Issue 12: exact ADMM on cost+shedding approaches the centralized optimum of the same objective;
    final_cost and total_shedding_mw are the released dispatch's (checked against the zone solutions)."""
    from powerdp.opf.objectives import generation_cost

    cfg = RunConfig(case="case14", zones=3, algorithm="exact", objective="cost+shedding", rounds=40, checkpoint_every=0)
    res = run_distributed(cfg, network=case14)
    s = res.summary
    assert s["shedding_weight"] == pytest.approx(14 * 4100.0 / 2e-3) and res.config.rho == pytest.approx(1025.0)
    assert abs(s["relative_gap_to_centralized"]) < 1e-3 and s["final_feasibility"] < 1e-2
    sol = {k: v for z in res.zone_solutions.values() for k, v in z.items()}
    pg = np.array([sol[("pg", g)] for g in range(case14.n_gen)])
    assert s["final_cost"] == pytest.approx(generation_cost(case14, pg), rel=1e-12)
    shed = sum(abs(sol[("yp", i)] + case14.pd[i]) for i in range(case14.n_bus)) * case14.base_mva
    assert s["total_shedding_mw"] == pytest.approx(shed, rel=1e-9)
    assert s["final_cost"] == pytest.approx(8075.12, rel=2e-3) and s["total_shedding_mw"] < 1.0


def test_private_dispatch_keeps_the_cost_exact(case14):
    """objl on cost+shedding: only the penalty is linearized (L = 2ω, proximal term on y), noise 2ωβ/ε."""
    from powerdp.apps.power_flow.agent import ZoneAgent
    from powerdp.grid.partition import partition

    cfg = RunConfig(case="case14", zones=3, algorithm="objl", objective="cost+shedding", epsilon=1.0, shedding_weight=1e7)
    part = partition(case14, zones=3)
    p = 0
    agent = ZoneAgent(case14, p, part.own_buses(p), part.shared_by_zone(cfg.flows)[p], cfg)
    y = np.array([k[0] in ("yp", "yq") for k in agent.problem.var_keys])
    assert agent.lipschitz == pytest.approx(2e7) and np.array_equal(agent.prox_mask.astype(bool), y)
    assert agent.grad_sensitivity.l1 == pytest.approx(2 * 1e7 * 0.01)
    all_cfg = cfg.replace(linearize="all")
    whole = ZoneAgent(case14, p, part.own_buses(p), part.shared_by_zone(cfg.flows)[p], all_cfg)
    assert whole.prox_mask.all() and whole.lipschitz == pytest.approx(2e7)  # max(2ω, 2 c2) with 2ω larger
    agent.initialize()
    z = agent.z_released
    # the linearized part's gradient is the penalty's alone; the full one adds the cost gradient on pg
    pg = np.array([k[0] == "pg" for k in agent.problem.var_keys])
    assert np.all(agent.gradient(z)[pg] == 0) and np.any(whole.gradient(z)[pg] != 0)
    np.testing.assert_allclose(agent.gradient(z)[y], whole.gradient(z)[y])
    res = run_distributed(cfg.replace(rounds=10, checkpoint_every=0), network=case14, reference=False)
    assert np.isfinite(res.summary["final_cost"]) and res.summary["total_shedding_mw"] >= 0


def test_observe_sees_every_round_of_releases_as_the_coordinator_receives_them():
    """The observe hook (powerdp audit records through it): round 0 included, every zone, and the very values
    whose residual the history reports."""
    seen = []
    cfg = RunConfig(case="case14", algorithm="objl", epsilon=0.2, rounds=3, evaluate=False)
    res = run_distributed(cfg, reference=False, observe=lambda updates: seen.append(list(updates)))
    assert [[u.round for u in batch] for batch in seen] == [[t] * 3 for t in range(4)]
    assert [[u.zone for u in batch] for batch in seen] == [[0, 1, 2]] * 4
    # the last releases are what the final consensus residual ‖w − Bz‖ measures
    keys = {k: i for i, k in enumerate(res.shared_keys)}
    from powerdp.apps.power_flow.plan import resolve_partition
    from powerdp.grid.loading import load_case

    part = resolve_partition(load_case("case14"), cfg)
    by_zone = part.shared_by_zone(cfg.flows)
    gap = np.concatenate([res.consensus[[keys[k] for k in by_zone[u.zone]]] - u.released for u in seen[-1]])
    assert np.linalg.norm(gap) == pytest.approx(res.history["feasibility"].iloc[-1], rel=1e-12)


# ---------------------------------------------------------------------------- privacy labels (the review)


def test_noise_is_secret_unless_seeded():
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", target_epsilon=1.0, rounds=2, checkpoint_every=0)
    a, b = (run_distributed(cfg, reference=False) for _ in range(2))
    assert a.summary["noise_source"] == b.summary["noise_source"] == "secret" and a.summary["privacy_warnings"] == []
    assert not np.array_equal(a.consensus, b.consensus)  # OS entropy: another draw every run
    assert a.privacy[0]["noise_source"] == "secret"  # the ledger records it
    s1, s2 = (run_distributed(cfg.replace(seed=3), reference=False) for _ in range(2))
    np.testing.assert_array_equal(s1.consensus, s2.consensus)
    assert s1.summary["noise_source"] == "seeded" and s1.privacy[1]["noise_source"] == "seeded"
    assert any("do not know the seed" in w for w in s1.summary["privacy_warnings"])


def test_paper_sensitivity_with_output_perturbation_is_labelled_not_private(capsys):
    from powerdp.cli import main

    cfg = RunConfig(case="case14", zones=2, algorithm="outl", sensitivity="paper", linearize="all", rounds=1, seed=0)
    res = run_distributed(cfg, reference=False)
    assert res.summary["private"] is False and res.privacy[0]["private"] is False
    assert any("not a proven bound" in w for w in res.summary["privacy_warnings"])
    for ok in (cfg.replace(sensitivity="sound"), cfg.replace(algorithm="objl", linearize="private"),
               cfg.replace(algorithm="inpl", linearize="private")):
        assert ok.claim_holds  # objective and input perturbation: the paper's 2β is the sound bound
    assert main(["run", "case14", "--zones", "2", "--algorithm", "outl", "--sensitivity", "paper", "--linearize", "all",
                 "--rounds", "1", "--no-reference", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "[NOT A GUARANTEE]" in out and "WARNING       sensitivity 'paper'" in out
    assert "the guarantee holds only against observers who do not know the seed" in out
    assert "the coordinator's view" in out and "the simulation's evaluation" in out


def test_run_directory_keeps_the_two_views_apart(tmp_path):
    import json

    from powerdp.apps.power_flow.result import COORDINATOR_COLUMNS

    cfg = RunConfig(case="case14", zones=2, algorithm="objl", epsilon=1.0, rounds=2, seed=0)
    run_distributed(cfg, out=tmp_path / "r")
    coord = pd.read_csv(tmp_path / "r" / "coordinator_view" / "history.csv")
    assert list(coord.columns) == COORDINATOR_COLUMNS
    ev = pd.read_csv(tmp_path / "r" / "simulation_evaluation" / "history.csv")
    assert {"objective", "noise_magnitude", "max_violation", "solver_s"} <= set(ev.columns)
    assert not ({"objective", "noise_magnitude", "solver_iterations", "solver_s", "max_violation"} & set(coord.columns))
    cs = json.loads((tmp_path / "r" / "coordinator_view" / "summary.json").read_text())["summary"]
    es = json.loads((tmp_path / "r" / "simulation_evaluation" / "summary.json").read_text())["summary"]
    assert cs["noise_source"] == "seeded" and "final_feasibility" in cs
    for key in ("final_objective", "centralized_objective", "gap_to_centralized", "total_shedding_mw", "solver_s"):
        assert key in es and key not in cs
    assert es["centralized_objective"] is not None


def test_per_zone_solve_times_name_the_straggler_in_the_evaluation_only(tmp_path):
    """Each zone's time inside its solver, summed over the rounds, and the slowest zone: the simulation's
    evaluation shows them (they are data-dependent), the coordinator's view does not."""
    import json

    res = run_distributed(RunConfig(case="case14", zones=3, algorithm="objl", epsilon=1.0, rounds=3, seed=0), out=tmp_path / "r")
    s = res.summary
    times = s["zone_solver_s"]
    assert sorted(times) == [0, 1, 2] and all(t > 0 for t in times.values())
    assert sum(times.values()) == pytest.approx(res.history["solver_s"].sum(), rel=1e-9)
    assert s["straggler_zone"] == max(times, key=times.get)
    assert all(s["zone_round_s"][z] >= times[z] for z in times)
    cs = json.loads((tmp_path / "r" / "coordinator_view" / "summary.json").read_text())["summary"]
    es = json.loads((tmp_path / "r" / "simulation_evaluation" / "summary.json").read_text())["summary"]
    for key in ("zone_solver_s", "zone_round_s", "straggler_zone"):
        assert key in es and key not in cs


def test_a_ctrl_c_after_the_last_round_says_the_run_resumes(tmp_path, monkeypatch):
    """A new user's report: Ctrl-C during the implemented dispatch (after the last round, before the run's final files)
    printed only "interrupted". It says what the directory holds and how to continue, and the resume completes."""
    from powerdp.apps.power_flow import runner
    from powerdp.errors import Interrupted

    cfg = RunConfig(case="case14", zones=2, algorithm="nonprivate", rounds=3, checkpoint_every=1)

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "implement_zones", ctrl_c)
    with pytest.raises(Interrupted, match=r"after the last round, before the run.s final files.*--resume .* continues"):
        run_distributed(cfg, out=tmp_path / "r")
    monkeypatch.undo()
    done = run_distributed(cfg, out=tmp_path / "r", resume=True)
    assert done.summary["rounds"] == 3 and "implemented" in done.summary
