"""The active-set local solver (powerdp.opf.active_set): certified solutions equal Clarabel's, the fallback, runs."""

import numpy as np
import pandas as pd
import pytest

from powerdp.apps.power_flow.agent import ZoneAgent
from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.grid.partition import bundled_partition
from powerdp.opf import active_set
from powerdp.opf.conic import ClarabelSolver
from powerdp.opf.local_solver import SOLVERS

# a reference: Clarabel to gaps of 1e-12 with refinement on (a run's settings stop at 1e-10, refinement off)
TIGHT = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "equilibrate_enable": False, "max_iter": 400}
COMPARE = ["objective", "feasibility", "dual_residual", "noise_magnitude", "max_violation", "epsilon_spent", "solver_iterations"]


@pytest.fixture(scope="module")
def zones(case14):
    """Zone 1 of case14 (bundled 3 zones) with each solver, as a run builds it."""
    part = bundled_partition(case14, 3)
    by_zone = part.shared_by_zone("variables")
    return {
        s: ZoneAgent(case14, 1, part.own_buses(1), by_zone[1], RunConfig(case="case14", algorithm="objl", local_solver=s))
        for s in ("clarabel", "active-set")
    }


def obj_value(objective, x):
    return float(objective.value(x))


def _step_objective(agent, seed, rho=100.0, eta=0.5):
    """A linearized ADMM step's objective (gradient, prox and ADMM terms) around a perturbed flat start."""
    rng = np.random.default_rng(seed)
    z = agent.problem.x0 + 0.05 * rng.normal(size=agent.n)
    admm = np.zeros(agent.n)
    admm[agent.shared_cols] = rho * rng.uniform(0.5, 1.5, agent.n_shared)
    return agent.gradient(z) - z / eta - admm + rng.normal(scale=5.0, size=agent.n), 1 / eta + rho * agent.shared_mask


def test_registered_and_certified_solutions_are_optimal(zones):
    """Certified solutions are as good as a tight Clarabel solve's, feasible to 1e-8, and near a run's Clarabel."""
    assert "active-set" in SOLVERS and SOLVERS["active-set"] is active_set.ActiveSetSolver
    ours, clarabel = zones["active-set"], zones["clarabel"]
    solver = ours.solver
    tight = ClarabelSolver(solver.problem, solver._clarabel._default_objective, options=TIGHT)
    start = (solver.solves, solver.certified, solver.fallbacks)
    x_prev = None
    for seed in range(6):
        c, diag = _step_objective(ours, seed)
        objective = ours.reduction.pull(c, diag, base=ours._free_r)
        ref = tight.solve(objective)
        assert ref.success
        res = solver.solve(objective, x0=x_prev)
        assert res.success and res.solver == "active set"
        # as good as the reference (the objective decides: on flat directions the minimiser is known to ~1e-6 only)
        assert obj_value(objective, res.x) <= obj_value(objective, ref.x) + 1e-8 * (1 + abs(obj_value(objective, ref.x)))
        np.testing.assert_allclose(res.x, ref.x, atol=1e-5)
        z_run, _ = clarabel._solve(c, diag, 1)  # Clarabel with a run's settings
        np.testing.assert_allclose(ours.reduction.lift(res.x), z_run, atol=1e-4)
        assert ours.problem.max_violation(ours.reduction.lift(res.x)) < 1e-8
        x_prev = res.x
    solves, certified, fallbacks = (solver.solves - start[0], solver.certified - start[1], solver.fallbacks - start[2])
    assert solves == 6 and certified == 6 and fallbacks == 0


def test_the_answer_does_not_depend_on_the_warm_start(zones):
    """The working set guessed from x0 only changes how many relaxations a solve takes."""
    agent = zones["active-set"]
    c, diag = _step_objective(agent, 11)
    objective = agent.reduction.pull(c, diag, base=agent._free_r)
    cold = agent.solver.solve(objective)
    warm = agent.solver.solve(objective, x0=cold.x)
    far = agent.solver.solve(objective, x0=np.full(agent.reduction.reduced.n, 3.0))
    for other in (warm, far):  # the same minimiser up to the tolerances (flat directions are known to ~1e-6)
        assert obj_value(objective, other.x) == pytest.approx(obj_value(objective, cold.x), rel=1e-10, abs=1e-10)
        np.testing.assert_allclose(other.x, cold.x, atol=1e-6)
    again = agent.solver.solve(objective, x0=cold.x)
    np.testing.assert_array_equal(again.x, warm.x)  # deterministic: the same inputs, the same bits


def test_an_uncertified_solve_falls_back_to_clarabel(zones, monkeypatch):
    agent = zones["active-set"]
    c, diag = _step_objective(agent, 3)
    objective = agent.reduction.pull(c, diag, base=agent._free_r)
    monkeypatch.setattr(active_set, "MAX_PASSES", 0)  # no relaxation may be solved: nothing is certified
    before = agent.solver.fallbacks
    res = agent.solver.solve(objective)
    assert agent.solver.fallbacks == before + 1
    assert res.success and res.solver == "Clarabel"
    z_ref, _ = zones["clarabel"]._solve(c, diag, 1)
    np.testing.assert_allclose(agent.reduction.lift(res.x), z_ref, atol=1e-6)


def _run(tmp_path=None, resume=False, **kw):
    cfg = RunConfig(**{"case": "case14", "algorithm": "objl", "epsilon": 0.3, "rounds": 6, "local_updates": 2, "seed": 0,
                       "local_solver": "active-set", **kw})
    return run_distributed(cfg, reference=False, out=tmp_path, resume=resume)


def test_runs_agree_with_clarabel_and_are_bit_identical_on_serial_and_process_backends():
    ours = _run().history
    clarabel = _run(local_solver="clarabel").history
    np.testing.assert_allclose(ours["objective"], clarabel["objective"], rtol=1e-5)
    assert (ours["max_violation"] < 1e-7).all()
    process = _run(backend="process", workers=2).history
    pd.testing.assert_frame_equal(ours[COMPARE], process[COMPARE], check_exact=True)


def test_a_resumed_run_is_bit_identical(tmp_path):
    """The working set comes from x0, which the zone checkpoints: a resume continues the same run."""
    full = _run(rounds=8, checkpoint_every=2).history
    _run(tmp_path / "r", rounds=4, checkpoint_every=2)
    resumed = _run(tmp_path / "r", resume=True, rounds=8, checkpoint_every=2)
    pd.testing.assert_frame_equal(full[COMPARE], resumed.history[COMPARE], check_exact=True)
