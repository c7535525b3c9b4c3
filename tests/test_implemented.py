"""The implemented dispatch (powerdp.apps.power_flow.implemented): what a zone holds, what it solves, what a run
reports, and that nothing of it reaches the coordinator."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.implemented import held_flows, solve_implemented
from powerdp.apps.power_flow.plan import resolve_config, resolve_partition
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.opf.ac_evaluation import EVALUATION_FIELDS
from powerdp.opf.centralized import solve_opf
from powerdp.opf.direct import compile_zone


def _setup(net, zones=2, flows="variables"):
    cfg = resolve_config(RunConfig(case="case14", zones=zones, objective="cost+shedding", flows=flows,
                                   algorithm="exact", local_solver="clarabel"), net)
    return cfg, resolve_partition(net, cfg)


def _central(net, cfg):
    return solve_opf(net, objective="cost+shedding", shedding_weight=cfg.shedding_weight, flows=cfg.flows, solver="ipopt")


def test_held_flows_are_each_zones_own_end_of_its_tie_lines(case14):
    cfg, part = _setup(case14)
    by_zone = part.shared_by_zone("variables")
    zone_of = part.zone_of_bus
    for z in range(part.n_zones):
        own = part.own_buses(z)
        prob = compile_zone(case14, own, objective="cost+shedding", shedding_weight=cfg.shedding_weight)
        held = held_flows(case14, prob, own, by_zone[z])
        ties = [b for b in range(case14.n_branch) if zone_of[case14.f_bus[b]] != zone_of[case14.t_bus[b]]]
        expected = sorted(("pf" if zone_of[case14.f_bus[b]] == z else "pt", b) for b in ties)
        assert sorted(held.keys) == expected
        # one unit entry per row, on the flow's own column and its own shared value
        assert np.all(held.A.getnnz(axis=1) == 1) and np.all(held.A_w.getnnz(axis=1) == 1)
        agreed = np.arange(len(by_zone[z]), dtype=float)
        assert held.values(agreed).tolist() == [float(by_zone[z].index(k)) for k in held.keys]


def test_held_flows_in_w_space_are_the_flow_expressions(case14):
    """With flows eliminated the held flow is its linear expression in (w, wr, wi): at the centralized optimum it
    gives the optimum's own-end flows."""
    cfg, part = _setup(case14, flows="expressions")
    central = _central(case14, cfg)
    by_zone = part.shared_by_zone("expressions")
    from powerdp.opf.compiled import compile_model
    from powerdp.opf.formulation import build_model

    whole = compile_model(build_model(case14, objective="cost+shedding", flows="expressions",
                                      shedding_weight=cfg.shedding_weight))
    x = dict(zip(whole.var_keys, central.x))
    for z in range(part.n_zones):
        own = part.own_buses(z)
        prob = compile_zone(case14, own, objective="cost+shedding", flows="expressions", shedding_weight=cfg.shedding_weight)
        held = held_flows(case14, prob, own, by_zone[z])
        assert held.n > 0 and np.all(held.A.getnnz(axis=1) == 3)
        agreed = np.array([x[k] for k in by_zone[z]])
        flows = held.values(agreed)
        for (kind, b), v in zip(held.keys, flows):
            assert v == pytest.approx(float(getattr(central.dispatch, kind)[b]), abs=1e-7)


def test_implemented_at_the_optimums_boundary_is_the_optimum(case14):
    """Held at the centralized optimum's own-end flows, every zone's re-solve with its true loads meets the holds
    exactly and gives back the optimum's cost (a little below it: with only the active powers held, the zones need not
    agree on the boundary's voltages and reactive flows, which the AC evaluation then settles)."""
    cfg, part = _setup(case14)
    central = _central(case14, cfg)
    by_zone = part.shared_by_zone("variables")
    d = central.dispatch
    cost = 0.0
    for z in range(part.n_zones):
        own = part.own_buses(z)
        prob = compile_zone(case14, own, objective="cost+shedding", shedding_weight=cfg.shedding_weight)
        held = held_flows(case14, prob, own, by_zone[z])
        agreed = np.array([float(getattr(d, k)[i]) if k in ("pf", "pt") else 0.0 for k, i in by_zone[z]])
        point = solve_implemented(prob, prob.objective, held, agreed, cfg.shedding_weight)
        assert point.held == "exact"
        np.testing.assert_allclose(held.A @ point.z, held.values(agreed), atol=1e-7)
        cost += prob.objective.value(point.z)
    assert central.objective * (1 - 1e-3) < cost <= central.objective * (1 + 1e-6)


def test_a_zone_whose_full_problem_fails_solves_where_its_rounds_do(case14, monkeypatch):
    """Where Clarabel fails on the zone's problem with its flows as variables (case13659pegase: 6 of 16 zones), the
    zone re-solves on the problem its rounds solve, the flows eliminated: the same minimiser, the holds met exactly.
    Checked by making every solve of the full problem fail (the reduced one's name says what it eliminated)."""
    from powerdp.opf import conic
    from powerdp.opf.reduction import eliminate

    cfg, part = _setup(case14)
    central = _central(case14, cfg)
    by_zone = part.shared_by_zone("variables")
    d = central.dispatch
    own = part.own_buses(0)
    prob = compile_zone(case14, own, objective="cost+shedding", shedding_weight=cfg.shedding_weight)
    held = held_flows(case14, prob, own, by_zone[0])
    agreed = np.array([float(getattr(d, k)[i]) if k in ("pf", "pt") else 0.0 for k, i in by_zone[0]])
    reference = solve_implemented(prob, prob.objective, held, agreed, cfg.shedding_weight)
    reduction = eliminate(prob, ("ohm",))
    assert reduction.reduced.n < prob.n

    real = conic.ClarabelSolver._solve
    tried = []

    def failing_full(self, objective):
        res = real(self, objective)
        tried.append(self.problem.name)
        if "eliminated" not in self.problem.name:
            return replace(res, outcome="numerical_error", status_name="NumericalError", x=np.full_like(res.x, np.nan))
        return res

    monkeypatch.setattr(conic.ClarabelSolver, "_solve", failing_full)
    point = solve_implemented(prob, prob.objective, held, agreed, cfg.shedding_weight, reduction=reduction)
    assert any("eliminated" in name for name in tried) and any("eliminated" not in name for name in tried)
    assert point.held == "exact" and point.outcome in ("solved", "solved_inaccurate")
    assert point.z.shape == (prob.n,) and prob.max_violation(point.z) < 1e-6
    np.testing.assert_allclose(held.A @ point.z, held.values(agreed), atol=1e-7)
    assert prob.objective.value(point.z) == pytest.approx(prob.objective.value(reference.z), rel=1e-6)
    # without the reduction the failure stands (and is reported as one, not as a point)
    failed = solve_implemented(prob, prob.objective, held, agreed, cfg.shedding_weight)
    assert failed.outcome == "numerical_error"


def test_a_zone_whose_implemented_solve_failed_is_named_and_warned_of(caplog):
    """A failed re-solve leaves the solver's last iterate as the zone's point: the figures name the zone
    (``failed_zones``) and the run warns that it is not a dispatch to apply."""
    import logging
    from types import SimpleNamespace

    from powerdp.apps.power_flow.implemented import ZoneImplemented
    from powerdp.apps.power_flow.operator_view import implement_zones, implemented_figures

    def zone(z, outcome):
        return ZoneImplemented(zone=z, solution={}, shed_mw={}, shedding_mw=0.0, objective=1.0, cost=1.0, held="exact",
                               outcome=outcome, solver_s=0.0)

    done = {0: zone(0, "solved"), 1: zone(1, "numerical_error"), 2: zone(2, "solved_inaccurate")}
    assert implemented_figures(done)["failed_zones"] == [1]
    backend = SimpleNamespace(call=lambda name, msgs: done)
    result = SimpleNamespace(summary={}, implemented=None)
    with caplog.at_level(logging.WARNING):
        implement_zones(backend, SimpleNamespace(agreed=lambda: []), result, lambda line: None)
    assert result.summary["implemented"]["failed_zones"] == [1]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "zone 1's implemented dispatch failed" in warned[0]


def test_a_days_period_names_the_zones_whose_implemented_solve_failed(caplog):
    """A day's period row (powerdp.apps.dispatch.operator_view) names its failed zones and warns, as a run does."""
    import logging

    from powerdp.apps.dispatch.operator_view import implemented_row
    from powerdp.apps.power_flow.implemented import ZoneImplemented

    def zone(z, outcome):
        return ZoneImplemented(zone=z, solution={}, shed_mw={}, shedding_mw=1.0, objective=1.0, cost=2.0, held="exact",
                               outcome=outcome, solver_s=0.0)

    with caplog.at_level(logging.WARNING):
        ok = implemented_row(3, None, {0: zone(0, "solved"), 1: zone(1, "solved_inaccurate")}, {}, None)
        bad = implemented_row(4, None, {0: zone(0, "iteration_limit"), 1: zone(1, "solved"), 2: zone(2, "failed")}, {}, None)
    assert ok["implemented_failed_zones"] == "" and bad["implemented_failed_zones"] == "0,2"
    assert bad["implemented_shedding_mw"] == 3.0 and bad["implemented_generation_cost"] == 6.0
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and warned[0].startswith("period 4: the implemented dispatch of zone(s) 0,2 failed")


def test_an_impossible_hold_becomes_a_penalty_not_a_failure(case14):
    """Held flows no zone can meet (50 p.u. into a tie-line) turn into a penalty: the zone still returns a point."""
    cfg, part = _setup(case14)
    by_zone = part.shared_by_zone("variables")
    own = part.own_buses(0)
    prob = compile_zone(case14, own, objective="cost+shedding", shedding_weight=cfg.shedding_weight)
    held = held_flows(case14, prob, own, by_zone[0])
    agreed = np.full(len(by_zone[0]), 50.0)
    point = solve_implemented(prob, prob.objective, held, agreed, cfg.shedding_weight)
    assert point.held == "soft"
    assert np.all(np.isfinite(point.z)) and prob.max_violation(point.z) < 1e-5


def test_a_hold_kept_only_by_shedding_is_left_before_the_zone_sheds(case14):
    """A schedule the zone can keep only by shedding (the centralized tie-line flows of the zone with the least
    generation, each own-end flow moved out of the zone by 1 p.u.: 100 MW more per tie-line; it sheds 112 MW to keep
    it) is tried soft: the zone leaves the schedule and sheds a few % of what the exact hold shed (3 %)."""
    from powerdp.apps.power_flow.implemented import SHED_BEFORE_SOFT_PU, _shed_pu, _with_rows

    cfg, part = _setup(case14)
    central = _central(case14, cfg)
    by_zone = part.shared_by_zone("variables")
    d = central.dispatch
    z = int(np.argmin([case14.pmax[np.isin(case14.gen_bus, part.own_buses(k))].sum() for k in range(part.n_zones)]))
    own = part.own_buses(z)
    prob = compile_zone(case14, own, objective="cost+shedding", shedding_weight=cfg.shedding_weight)
    held = held_flows(case14, prob, own, by_zone[z])
    agreed = np.array([float(getattr(d, k)[i]) + 1.0 if k in ("pf", "pt") else 0.0 for k, i in by_zone[z]])
    from powerdp.opf.conic import LOCAL_SETTINGS, ClarabelSolver, column_scaling

    exact = _with_rows(prob, held.A, held.values(agreed))
    hard = ClarabelSolver(exact, options=LOCAL_SETTINGS, objective_scale=1e4 / (2 * cfg.shedding_weight),
                          column_scale=column_scaling(exact, prob.objective)).solve(prob.objective)
    assert _shed_pu(prob, hard.x) > 10 * SHED_BEFORE_SOFT_PU  # the exact hold sheds
    point = solve_implemented(prob, prob.objective, held, agreed, cfg.shedding_weight)
    assert point.held == "soft"
    assert _shed_pu(prob, point.z) < 0.05 * _shed_pu(prob, hard.x)
    assert prob.max_violation(point.z) < 1e-5


@pytest.fixture(scope="module")
def private_run():
    cfg = RunConfig(case="case14", zones=2, objective="cost+shedding", algorithm="inpl", target_epsilon=0.1, rounds=40,
                    seed=0, local_solver="clarabel")
    return run_distributed(cfg)


def test_a_private_run_reports_its_implemented_dispatch_as_an_operator_would(private_run):
    """At a total ε = 0.1 the run's own dispatch sheds tens of MW; the implemented one sheds nothing beyond the
    centralized dispatch's rounding and its AC cost is within 1 % of the centralized dispatch evaluated the same way."""
    s = private_run.summary
    imp, ref = s["implemented"], s["implemented_reference"]
    for obj in (imp, ref):
        assert set(EVALUATION_FIELDS) <= set(obj)
        assert obj["ac_converged"] is True
    assert ref["relative_cost_gap"] == 0.0
    assert s["total_shedding_mw"] > 10.0  # the run's own released point follows the perturbed loads
    assert imp["shedding_mw"] <= ref["shedding_mw"] + 0.01  # the penalty's rounding: about 0.1 MW in both
    assert abs(imp["relative_cost_gap"]) < 0.01
    assert imp["max_voltage_violation_pu"] <= ref["max_voltage_violation_pu"] + 1e-3
    assert imp["max_q_violation_mvar"] <= ref["max_q_violation_mvar"] + 1.0
    assert set(imp["held"].values()) == {"exact"}
    assert imp["direct"]["converged"] is True
    # what a meter at the boundary reads differs from the held schedule: per tie-line (the loop flows physics makes)
    # more than per zone (its net export, off by the relaxation's losses)
    assert 0.0 <= imp["exchange_deviation_mw"] <= imp["tie_deviation_mw"] + 1e-9
    assert imp["exchange_deviation_mw"] < 5.0


def test_the_implemented_dispatch_stays_in_the_simulations_evaluation(tmp_path):
    """Its figures are the evaluation's; each zone's set-points are in its own private folder; the coordinator's
    view holds none of it."""
    cfg = RunConfig(case="case14", zones=2, objective="cost+shedding", algorithm="inpl", target_epsilon=1.0, rounds=10,
                    seed=0, local_solver="clarabel")
    run_distributed(cfg, out=tmp_path / "run", reference=False, ac_evaluation=False)
    coord = json.loads((tmp_path / "run" / "coordinator_view" / "summary.json").read_text())
    assert not any("implemented" in k for k in coord["summary"])
    ev = json.loads((tmp_path / "run" / "simulation_evaluation" / "summary.json").read_text())["summary"]
    assert ev["implemented_s"] >= 0.0
    for z in (0, 1):
        f = tmp_path / "run" / "zones.private" / f"zone_{z}" / "implemented.csv"
        assert f.is_file() and (f.stat().st_mode & 0o777) == 0o600


def test_without_evaluation_nothing_of_it_returns_to_the_coordinator(tmp_path, monkeypatch):
    """evaluate=False (a deployment's view), process backend: the zones compute their implemented dispatch and keep
    it (their private folders); what crosses back for it is None."""
    from powerdp.engine.backends.process import ProcessBackend

    received = []
    real = ProcessBackend._recv_raw

    def spy(self, h, what):
        status, payload = real(self, h, what)
        received.append((what, payload))
        return status, payload

    monkeypatch.setattr(ProcessBackend, "_recv_raw", spy)
    cfg = RunConfig(case="case14", zones=2, objective="cost+shedding", algorithm="totl", target_epsilon=1.0, rounds=5,
                    seed=0, local_solver="clarabel", evaluate=False, backend="process", workers=2)
    res = run_distributed(cfg, out=tmp_path / "run", reference=False)
    assert res.implemented == {} and "implemented" not in res.summary
    calls = [payload for what, payload in received if what == "call"]
    assert calls and all(v is None for payload in calls for v in (payload.values() if isinstance(payload, dict) else payload))
    written = sorted((tmp_path / "run" / "zones.private").glob("zone_*/implemented.csv"))
    assert len(written) == 2


def test_a_dispatch_evaluates_every_periods_implemented_dispatch(tmp_path):
    """Each period: the zones' implemented dispatch on the period's loads, evaluated as an operator would beside the
    period's centralized dispatch; --json nests the figures as each run's summary names them."""
    from powerdp.apps.dispatch.config import DispatchConfig
    from powerdp.apps.dispatch.runner import run_dispatch
    from powerdp.grid.profiles import load_horizon

    from .test_dispatch import day_profile

    profile = day_profile(tmp_path / "day.csv", 2)
    horizon = load_horizon("case14", periods=2, profiles=profile)
    cfg = DispatchConfig(source="case14", profiles=str(profile), periods=2, zones=2, algorithm="totl", target_epsilon=1.0,
                         relation="event", max_rounds=30, seed=0)
    res = run_dispatch(cfg, horizon)
    periods = res.views()["simulation_evaluation"]["periods"]
    for p in periods:
        imp, ref = p["implemented"], p["implemented_reference"]
        assert set(EVALUATION_FIELDS) <= set(imp) and set(EVALUATION_FIELDS) <= set(ref)
        assert imp["ac_converged"] and ref["relative_cost_gap"] == 0.0
        assert abs(imp["relative_cost_gap"]) < 0.01 and imp["shedding_mw"] < 0.01 * p["load_mw"]
        assert p["shedding_mw"] > 10 * imp["shedding_mw"]  # the run's own dispatch follows the totals' equal shares
    s = res.summary
    assert s["implemented_ac_converged_periods"] == 2 and s["implemented_max_shedding_fraction"] < 0.01
    coordinator = res.views()["coordinator_view"]
    assert not any("implemented" in k for k in coordinator) and not any("implemented" in k for p in coordinator["periods"] for k in p)


def test_a_sweep_with_the_operators_evaluation_draws_the_implemented_figure(tmp_path):
    """`powerdp plot` of a budget sweep with operator_evaluation draws implemented_CASE.png from its runs table."""
    from powerdp.studies.plots import plot_sweep
    from powerdp.studies.sweep import SweepSpec, run_sweep

    spec = SweepSpec(cases=["case14"], partitions=[{"zones": 2}], algorithms=["totl"], target_epsilons=[0.5, 5.0],
                     seeds=[0], base={"objective": "cost+shedding", "rounds": 3, "local_solver": "clarabel"},
                     operator_evaluation=True)
    runs = run_sweep(spec, tmp_path / "s", jobs=1)
    assert runs["implemented_relative_cost_gap"].notna().all() and runs["implemented_ac_converged"].all()
    assert (runs["reference_relative_cost_gap"] == 0.0).all()
    paths = plot_sweep(tmp_path / "s")
    assert tmp_path / "s" / "figures" / "implemented_case14.png" in paths


def test_the_summary_of_a_shedding_run_claims_no_ac_result(capsys):
    """The shedding objective's run has no operator's AC evaluation (no costs to compare): its summary gives the
    implemented dispatch's shed and no AC line (it printed "AC power flow did not converge" for an evaluation that
    never ran); a priced run's summary gives the AC line."""
    from powerdp.cli.run_report import _print_implemented

    _print_implemented({"implemented": {"shedding_mw": 0.0, "objective": 1e-9}})
    out = capsys.readouterr().out
    assert "shed 0.00 MW" in out and "AC power flow" not in out
    _print_implemented({"implemented": {"shedding_mw": 0.1, "ac_converged": False}})
    assert "AC power flow did not converge" in capsys.readouterr().out


def test_a_summary_whose_reference_has_no_ac_point_prints(capsys):
    """Neither dispatch's AC power flow converged (case13659pegase after 20 rounds): the summary printed a traceback
    at the reference's missing cost (and the --json file, written after it, was lost); now it says so in words."""
    from powerdp.cli.run_report import _print_implemented

    failed = {"shedding_mw": 0.17, "ac_converged": False, "cost": None, "restoration": "skipped"}
    _print_implemented({"implemented": dict(failed), "implemented_reference": dict(failed, shedding_mw=0.09)})
    out = capsys.readouterr().out
    assert out.count("AC power flow did not converge") == 2 and "shed 0.09 MW" in out and "AC cost" not in out


def test_a_private_runs_summary_says_its_objective_is_the_released_points(private_run, capsys):
    """The released points' objective (their noisy shedding penalty) and its gap read as the answer unless labelled:
    a private run with an implemented dispatch says the dispatch to apply is that one; a non-private run says nothing."""
    from powerdp.cli.run_report import _print_summary

    _print_summary(private_run.summary, private_run.config, None, private_run.privacy)
    lines = capsys.readouterr().out.splitlines()
    objective = next(ln for ln in lines if ln.startswith("objective"))
    centralized = next(ln for ln in lines if ln.startswith("centralized"))
    assert "at the released (noisy) points; the dispatch to apply is the implemented one below" in objective
    assert "gap of the released points" in centralized
    assert lines.index(objective) < next(i for i, ln in enumerate(lines) if ln.startswith("implemented"))
    plain = replace(private_run.config, algorithm="nonprivate", target_epsilon=None)
    _print_summary(private_run.summary, plain, None, {})
    out = capsys.readouterr().out
    assert "noisy" not in out and "gap of the released" not in out and "gap +" in out
