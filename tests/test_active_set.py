"""The active-set local solver (powerdp.opf.active_set): certified solutions equal Clarabel's, the fallback, runs."""

import numpy as np
import pandas as pd
import pytest

from powerdp.apps.power_flow.agent import ZoneAgent
from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.grid.partition import bundled_partition
from powerdp.opf import active_set, working_sets
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


# ------------------------------------------------------ Clarabel's polish (powerdp.opf.working_sets, shared)
def test_clarabel_polishes_its_solution_to_the_certified_minimiser(zones):
    """A run's Clarabel restarts the working sets from its own point: a certified solution, the active-set solver's
    (which started elsewhere) in objective to 1e-8 (in x to 1e-5: P is nearly flat along some directions), as good as
    a tight solve, and nearer the minimiser's objective than Clarabel alone (1e-10 to 3e-8 above it here)."""
    clarabel, ours = zones["clarabel"].solver, zones["active-set"].solver
    assert clarabel.polish and clarabel.working_sets is not None
    plain = ClarabelSolver(clarabel.problem, clarabel._default_objective, options=clarabel.options, column_scale=clarabel.column_scale,
                           drop_implied=False)  # the polished solver's rows
    tight = ClarabelSolver(clarabel.problem, clarabel._default_objective, options=TIGHT)
    before = (clarabel.polished, clarabel.polish_failures)
    off_polished = off_plain = 0.0
    for seed in range(6):
        objective = zones["clarabel"].reduction.pull(*_step_objective(zones["clarabel"], seed), base=zones["clarabel"]._free_r)
        polished, raw, ref = clarabel.solve(objective).check(), plain.solve(objective).check(), tight.solve(objective)
        exact = ours.solve(objective)  # from no warm start: the working sets grow from P⁻¹'s unconstrained minimiser
        f = obj_value(objective, exact.x)
        assert obj_value(objective, polished.x) == pytest.approx(f, rel=1e-8, abs=1e-8)
        assert obj_value(objective, polished.x) <= obj_value(objective, ref.x) + 1e-8 * (1 + abs(obj_value(objective, ref.x)))
        np.testing.assert_allclose(polished.x, exact.x, rtol=0, atol=1e-5)
        assert clarabel.problem.max_violation(polished.x) < 1e-9
        off_polished += abs(obj_value(objective, polished.x) - f)
        off_plain += abs(obj_value(objective, raw.x) - f)
    assert clarabel.polished == before[0] + 6 and clarabel.polish_failures == before[1]
    assert off_polished < 0.1 * off_plain


def test_a_polish_that_cannot_certify_keeps_clarabels_solution(zones, monkeypatch):
    clarabel = zones["clarabel"].solver
    plain = ClarabelSolver(clarabel.problem, clarabel._default_objective, options=clarabel.options, column_scale=clarabel.column_scale,
                           drop_implied=False)  # the polished solver's rows
    objective = zones["clarabel"].reduction.pull(*_step_objective(zones["clarabel"], 9), base=zones["clarabel"]._free_r)
    monkeypatch.setattr(working_sets, "MAX_PASSES", 0)  # no relaxation may be solved: nothing is certified
    failures = clarabel.polish_failures
    res = clarabel.solve(objective).check()
    assert clarabel.polish_failures == failures + 1
    np.testing.assert_array_equal(res.x, plain.solve(objective).x)


def test_runs_polish_zones_up_to_polish_max_n(case14, monkeypatch):
    from powerdp.opf import conic

    part = bundled_partition(case14, 3)
    by_zone = part.shared_by_zone("variables")
    cfg = RunConfig(case="case14", algorithm="objl", local_solver="clarabel")
    small = ZoneAgent(case14, 1, part.own_buses(1), by_zone[1], cfg).solver
    monkeypatch.setattr(conic, "POLISH_MAX_N", small.problem.n - 1)
    large = ZoneAgent(case14, 1, part.own_buses(1), by_zone[1], cfg).solver
    assert small.polish and not large.polish and large.working_sets is None


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


def _refuses(*args):
    raise np.linalg.LinAlgError("Matrix is not positive definite.")


@pytest.mark.parametrize("cause", ["no-relaxation", "cholesky-refused"])
def test_an_uncertified_solve_falls_back_to_clarabel(zones, monkeypatch, cause):
    """A solve the kernel cannot certify goes to Clarabel: no relaxation allowed, or numba's Cholesky refusing a
    working set it finds indefinite (LinAlgError, seen on case13659pegase zones) instead of ending the run."""
    from powerdp.opf import _active_set_kernel

    agent = zones["active-set"]
    c, diag = _step_objective(agent, 3)
    objective = agent.reduction.pull(c, diag, base=agent._free_r)
    if cause == "no-relaxation":
        monkeypatch.setattr(working_sets, "MAX_PASSES", 0)  # no relaxation may be solved: nothing is certified
    else:
        monkeypatch.setattr(_active_set_kernel, "working_set_solve", _refuses)
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
    # the three local solvers' histories agree pairwise to 1.1e-5 (active set vs Clarabel), 1.3e-5 (Clarabel vs
    # Ipopt) and 2.0e-5 (active set vs Ipopt) at this noise (eps 0.3 on case14): solver tolerances grown by 12 steps
    np.testing.assert_allclose(ours["objective"], clarabel["objective"], rtol=2.5e-5)
    assert (ours["max_violation"] < 1e-7).all()
    process = _run(backend="process", workers=2).history
    pd.testing.assert_frame_equal(ours[COMPARE], process[COMPARE], check_exact=True)


def test_a_resumed_run_is_bit_identical(tmp_path):
    """The working set comes from x0, which the zone checkpoints: a resume continues the same run."""
    full = _run(rounds=8, checkpoint_every=2).history
    _run(tmp_path / "r", rounds=4, checkpoint_every=2)
    resumed = _run(tmp_path / "r", resume=True, rounds=8, checkpoint_every=2)
    pd.testing.assert_frame_equal(full[COMPARE], resumed.history[COMPARE], check_exact=True)


# ---------------------------------------------------------------- the Newton relaxation (powerdp.opf._active_set_newton)
def _cone_instance(seed, n=12, rows=10, cones=4):
    """A random relaxation in the dual form of the kernels: M = G P⁻¹ Gᵀ, h = b + G P⁻¹ q, blocks of 1 and 4 rows."""
    rng = np.random.default_rng(seed)
    dims = np.array([1] * rows + [4] * cones, dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum(dims)[:-1]]).astype(np.int64)
    m = int(dims.sum())
    G = rng.normal(size=(m, n))
    R = rng.normal(size=(n, n))
    P = R @ R.T + n * np.eye(n)
    q = rng.normal(scale=20.0, size=n)
    b = rng.uniform(0.5, 2.0, size=m)
    b[offs[rows:]] += 3.0  # the cones' s₀ rows: the zero point is strictly inside
    Pinv = np.linalg.inv(P)
    return G @ Pinv @ G.T, b + G @ Pinv @ q, offs, dims, Pinv, q, G, b


def _margin(s, off, d):
    return s[off] - np.linalg.norm(s[off + 1:off + d]) if d > 1 else s[off]


@pytest.mark.parametrize("seed", range(6))
def test_newton_relaxation_matches_the_interior_point_method(seed):
    """From the unconstrained point (ζ = 0, s = h) Newton's method revises its guessed active set and certifies the
    the same solution as the interior-point method, as good or better (G has more rows than columns, so the
    multipliers ζ need not be unique; on these instances Newton's x is within 2e-8 of Clarabel's at gap 1e-14,
    the interior point's within 3e-5)."""
    from powerdp.opf._active_set_kernel import cone_qp
    from powerdp.opf._active_set_newton import newton_qp

    M, h, offs, dims, Pinv, q, G, b = _cone_instance(seed)
    z_ipm, s_ipm, z_nt, s_nt = (np.zeros(h.size) for _ in range(4))
    assert cone_qp(M, h, offs, dims, 1e-11, 1e-9, 60, z_ipm, s_ipm) >= 0
    steps = newton_qp(M, h, offs, dims, h.copy(), 1e-11, 30, z_nt, s_nt)
    assert 0 < steps <= 30
    scale = max(1.0, np.abs(h).max())
    x_nt, x_ipm = -Pinv @ (q + G.T @ z_nt), -Pinv @ (q + G.T @ z_ipm)
    P = np.linalg.inv(Pinv)
    f_nt, f_ipm = (0.5 * x @ P @ x + q @ x for x in (x_nt, x_ipm))
    assert f_nt <= f_ipm + 1e-10 * abs(f_ipm)
    assert f_nt == pytest.approx(f_ipm, rel=1e-9)
    np.testing.assert_allclose(x_nt, x_ipm, atol=1e-4)
    np.testing.assert_allclose(s_nt, b - G @ x_nt, atol=1e-10 * scale)  # s is x's slack (exact stationarity)
    assert min(_margin(s_nt, o, d) for o, d in zip(offs, dims)) >= -1e-11 * scale  # feasible
    assert min(abs(_margin(s_nt, o, d)) for o, d in zip(offs, dims)) < 1e-9 * scale  # active blocks: the guess was revised
    np.testing.assert_allclose(M @ z_nt + h, s_nt, atol=1e-12 * scale)  # s is the dual's slack by construction


def test_newton_gives_up_at_a_cones_apex_and_the_interior_point_method_takes_the_relaxation():
    """‖x‖ ≤ 0 (a 3-row cone whose s₀ row is 0): the solution is the apex, where the cone is not smooth."""
    from powerdp.opf._active_set_kernel import CERTIFIED, working_set_solve
    from powerdp.opf._active_set_newton import newton_qp

    indptr = np.array([0, 0, 1, 2], dtype=np.int64)  # s = (0, −x₀, −x₁)
    indices = np.array([0, 1], dtype=np.int64)
    data = np.array([1.0, 1.0])
    b = np.zeros(3)
    boff, bdim = np.array([0], dtype=np.int64), np.array([3], dtype=np.int64)
    q = np.array([3.0, -1.0])
    M, h = np.array([[0.0, 0, 0], [0, 1, 0], [0, 0, 1]]), np.array([0.0, 3.0, -1.0])
    assert newton_qp(M, h, boff, bdim, np.zeros(3), 1e-11, 30, np.zeros(3), np.zeros(3)) < 0
    x = np.full(2, np.nan)
    status, passes, _, ipm = working_set_solve(np.eye(2), q, indptr, indices, data, b, boff, bdim, np.ones(1, dtype=np.bool_),
                                               np.zeros(2), 1e-9, 1e-11, 1e-9, 8, 60, 30, x)
    assert status == CERTIFIED and passes == 1 and ipm == 1
    np.testing.assert_allclose(x, 0.0, atol=1e-9)


def test_zone_solves_with_and_without_newton_agree(zones, monkeypatch):
    """The Newton path and the interior-point path certify the same zone solutions, Newton's as good or better
    (objective to 1e-10; x to 1e-6: the interior point stops ~1e-7 off along flat directions); Newton's method takes
    most relaxations."""
    solver = zones["active-set"].solver
    agent = zones["active-set"]
    objectives = [agent.reduction.pull(*_step_objective(agent, seed), base=agent._free_r) for seed in (21, 22, 23)]
    x_prev = None
    newton_passes = all_passes = 0
    for objective in objectives:
        passes, ipm_passes = solver.passes, solver.ipm_passes
        ours = solver.solve(objective, x0=x_prev)
        all_passes += solver.passes - passes
        newton_passes += (solver.passes - passes) - (solver.ipm_passes - ipm_passes)
        before = (solver.ipm_passes, solver.fallbacks)
        monkeypatch.setattr(working_sets, "NEWTON_ITER", 0)
        ipm = solver.solve(objective, x0=x_prev)
        monkeypatch.setattr(working_sets, "NEWTON_ITER", 30)
        assert solver.ipm_passes > before[0] and solver.fallbacks == before[1]
        f_ours, f_ipm = obj_value(objective, ours.x), obj_value(objective, ipm.x)
        assert f_ours <= f_ipm + 1e-10 * (1 + abs(f_ipm))
        assert f_ours == pytest.approx(f_ipm, rel=1e-10, abs=1e-10)
        np.testing.assert_allclose(ours.x, ipm.x, atol=1e-6)
        assert ours.solver == ipm.solver == "active set"
        x_prev = ours.x
    assert newton_passes > all_passes / 2  # (it gives up when the cold first guess makes its Schur system singular)
