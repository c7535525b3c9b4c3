"""The cyipopt layer: exact derivatives, re-solves, option profiles, failure reporting."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from powerdp.errors import ConfigError, InfeasibleError, SolverError
from powerdp.opf.centralized import solve_opf
from powerdp.opf.compiled import INF, QuadraticObjective, compile_model
from powerdp.opf.formulation import FLOW_MODES, build_model
from powerdp.opf.solvers import IpoptSolver, _Callbacks, ipopt_profiles, load_ipopt_profile

CASE14_SOC = 8075.12  # PowerModels SOCWR objective of MATPOWER case14 ($/h)


@pytest.fixture(scope="module")
def compiled14(case14):
    return {
        (obj, flows): compile_model(build_model(case14, objective=obj, flows=flows))
        for obj in ("cost", "shedding")
        for flows in FLOW_MODES
    }


def _interior_point(prob, rng) -> np.ndarray:
    lb = np.where(prob.lb > -INF / 10, prob.lb, -1.0)
    ub = np.where(prob.ub < INF / 10, prob.ub, 1.0)
    return lb + (ub - lb) * rng.uniform(0.1, 0.9, prob.n)


def _dense_jacobian(cb, x) -> np.ndarray:
    rows, cols = cb.jacobianstructure()
    J = np.zeros((cb.m, cb.n))
    np.add.at(J, (rows, cols), cb.jacobian(x))
    return J


def _dense_hessian(cb, x, lam, sigma) -> np.ndarray:
    rows, cols = cb.hessianstructure()
    assert np.all(rows >= cols), "Ipopt wants the lower triangle"
    vals = cb.hessian(x, lam, sigma)
    H = np.zeros((cb.n, cb.n))
    np.add.at(H, (rows, cols), vals)
    return H + np.tril(H, -1).T


def _central_difference(fun, x, h):
    cols = []
    for j in range(len(x)):
        e = np.zeros_like(x)
        e[j] = h
        cols.append((np.asarray(fun(x + e)) - np.asarray(fun(x - e))) / (2 * h))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("flows", FLOW_MODES)
@pytest.mark.parametrize("objective", ["cost", "shedding", "prox"])
def test_callbacks_match_finite_differences(compiled14, objective, flows):
    prob = compiled14[("shedding" if objective == "prox" else objective, flows)]
    cb = _Callbacks(prob)
    rng = np.random.default_rng(42)
    if objective == "prox":
        # a linearized-ADMM style objective: linear term plus a separable proximal diagonal
        cb.set_objective(QuadraticObjective(c=rng.normal(size=prob.n), const=0.3, diag=rng.uniform(0.5, 2.0, prob.n)))
    x = _interior_point(prob, rng)
    lam = rng.normal(size=prob.m)
    sigma = 0.7
    h = 1e-5

    # structures: unique entries inside the matrix
    jr, jc = cb.jacobianstructure()
    assert len(set(zip(jr.tolist(), jc.tolist()))) == len(jr) == cb.jac_nnz
    hr, hc = cb.hessianstructure()
    assert len(set(zip(hr.tolist(), hc.tolist()))) == len(hr) == cb.hess_nnz

    # values agree with the compiled problem's own evaluation
    np.testing.assert_allclose(cb.constraints(x), prob.constraint_values(x), rtol=1e-14, atol=1e-14)

    # objective gradient
    g_fd = _central_difference(cb.objective, x, h)
    np.testing.assert_allclose(cb.gradient(x), g_fd, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(g_fd).max()))

    # constraint Jacobian (the dense comparison also checks that every nonzero is in the structure)
    J = _dense_jacobian(cb, x)
    J_fd = _central_difference(cb.constraints, x, h)
    np.testing.assert_allclose(J, J_fd, rtol=1e-6, atol=1e-7 * max(1.0, np.abs(J_fd).max()))

    # Hessian of the Lagrangian sigma*f + lam.g, against differences of its gradient
    def grad_lagrangian(y):
        return sigma * cb.gradient(y) + _dense_jacobian(cb, y).T @ lam

    H = _dense_hessian(cb, x, lam, sigma)
    H_fd = _central_difference(grad_lagrangian, x, h)
    np.testing.assert_allclose(H, H_fd, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(H_fd).max()))
    # and the objective Hessian alone (lam = 0) is the compiled objective's Hessian
    H_obj = _dense_hessian(cb, x, np.zeros(prob.m), 1.0)
    np.testing.assert_allclose(H_obj, cb.obj.hessian_matrix(prob.n).toarray(), rtol=1e-14, atol=1e-14)
    assert cb.callback_s > 0.0


def test_objective_outside_the_hessian_pattern_is_refused(compiled14):
    prob = compiled14[("shedding", "expressions")]
    linear = QuadraticObjective(c=np.zeros(prob.n))
    solver = IpoptSolver(prob, objective_pattern=linear)
    # pg_1·pg_0: a product of two generators, in no constraint and not on the diagonal
    g0, g1 = prob.index_of([("pg", 0), ("pg", 1)])
    cross = QuadraticObjective(c=np.zeros(prob.n), qi=np.array([max(g0, g1)]), qj=np.array([min(g0, g1)]), qv=np.array([1.0]))
    with pytest.raises(ValueError, match="outside the compiled Hessian pattern"):
        solver.solve(cross)
    with pytest.raises(ValueError, match="shape"):
        solver.solve(QuadraticObjective(c=np.zeros(prob.n + 1)))


# -------------------------------------------------------------------- solves


def test_resolve_with_new_linear_objective_matches_fresh_solver(compiled14):
    prob = compiled14[("cost", "variables")]
    solver = IpoptSolver(prob)
    first = solver.solve().check()
    assert first.objective == pytest.approx(CASE14_SOC, abs=0.01)
    assert first.iterations > 0 and first.wall_s > 0 and 0 <= first.callback_s <= first.wall_s

    # a new linear objective: random positive $/h per p.u. on active generation
    rng = np.random.default_rng(3)
    c = np.zeros(prob.n)
    pg = np.array([k[0] == "pg" for k in prob.var_keys])
    c[pg] = rng.uniform(10.0, 50.0, pg.sum()) * 100.0
    linear = QuadraticObjective(c=c, const=5.0)

    reused = solver.solve(linear).check()
    fresh = IpoptSolver(prob).solve(linear).check()
    assert reused.objective == pytest.approx(fresh.objective, rel=1e-8)
    np.testing.assert_allclose(reused.x, fresh.x, rtol=1e-6, atol=1e-6)
    assert reused.objective != pytest.approx(first.objective, rel=1e-3)
    assert reused.objective == pytest.approx(linear.value(reused.x), rel=1e-10)

    # the original objective again: the solver keeps no trace of the linear one
    again = solver.solve().check()
    assert again.objective == pytest.approx(first.objective, rel=1e-9)
    np.testing.assert_allclose(again.x, first.x, rtol=1e-6, atol=1e-6)
    assert again.iterations == first.iterations


def test_solve_result_fields(compiled14):
    prob = compiled14[("shedding", "expressions")]
    res = IpoptSolver(prob).solve()
    assert res.success and res.status == 0 and res.status_name == "Solve_Succeeded"
    assert res.check() is res
    assert res.objective <= 1e-8
    assert res.x.shape == (prob.n,) and res.mult_g.shape == (prob.m,)
    assert res.mult_x_lower.shape == res.mult_x_upper.shape == (prob.n,)
    assert res.ipopt_s == pytest.approx(res.wall_s - res.callback_s)
    assert prob.max_violation(res.x) < 1e-6


# ------------------------------------------------------------------ profiles


def test_bundled_profiles():
    assert {"default", "warm"} <= set(ipopt_profiles())
    default = load_ipopt_profile()
    assert default == load_ipopt_profile("default")
    assert default["tol"] == 1e-8 and isinstance(default["tol"], float)
    assert default["max_iter"] == 3000 and isinstance(default["max_iter"], int)
    assert default["print_level"] == 0
    assert default["linear_solver"] == "mumps"
    warm = load_ipopt_profile("warm")
    assert warm["warm_start_init_point"] == "yes"
    assert isinstance(warm["mu_init"], float) and warm["mu_init"] < 0.1  # below Ipopt's default mu_init
    for name in ipopt_profiles():  # every bundled profile is accepted by Ipopt
        assert name in ("default", "warm") or load_ipopt_profile(name)


def test_profiles_are_accepted_by_ipopt(compiled14):
    prob = compiled14[("cost", "expressions")]
    for name in ipopt_profiles():
        solver = IpoptSolver(prob, profile=name)
        assert solver.options == load_ipopt_profile(name)


def test_profile_from_a_file(tmp_path):
    path = tmp_path / "mine.opt"
    path.write_text("# my options\n\ntol 1e-6   # looser\nmax_iter 50\nmu_strategy adaptive\n")
    assert load_ipopt_profile(path) == {"tol": 1e-6, "max_iter": 50, "mu_strategy": "adaptive"}
    assert load_ipopt_profile(str(path)) == load_ipopt_profile(path)


def test_unknown_profile_raises_config_error():
    with pytest.raises(ConfigError, match=r"no Ipopt profile 'nope'.*default"):
        load_ipopt_profile("nope")


def test_malformed_profile_raises_config_error(tmp_path):
    path = tmp_path / "bad.opt"
    path.write_text("tol 1e-8\nmax_iter\n")
    with pytest.raises(ConfigError, match=r"bad\.opt, line 2: expected 'name value'"):
        load_ipopt_profile(path)


@pytest.mark.parametrize("options", [{"no_such_option": 1}, {"max_iter": -5}, {"tol": "abc"}])
def test_invalid_ipopt_option_raises_config_error(compiled14, options):
    key = next(iter(options))
    with pytest.raises(ConfigError, match=f"invalid Ipopt option {key}"):
        IpoptSolver(compiled14[("cost", "expressions")], options=options)


def test_iteration_limit_is_a_solver_error(compiled14):
    res = IpoptSolver(compiled14[("cost", "variables")], options={"max_iter": 2}).solve()
    assert not res.success and res.status_name == "Maximum_Iterations_Exceeded"
    with pytest.raises(SolverError, match="Maximum_Iterations_Exceeded") as info:
        res.check("zone 1, round 3")
    assert not isinstance(info.value, InfeasibleError)
    assert str(info.value).startswith("zone 1, round 3: ")
    assert info.value.status == -1 and info.value.context == "zone 1, round 3"


# ---------------------------------------------------------------- infeasible


def test_infeasible_model_is_reported(case14):
    # no generator can produce active power: the loads cannot be served
    net = dataclasses.replace(case14, pmax=np.zeros(case14.n_gen))
    prob = compile_model(build_model(net, objective="cost"))
    res = IpoptSolver(prob).solve()
    assert res.status == 2
    assert res.status_name == "Infeasible_Problem_Detected"
    assert not res.success
    with pytest.raises(InfeasibleError, match="infeasible") as info:
        res.check("case14 without generation")
    assert isinstance(info.value, SolverError)
    assert info.value.status == 2
    assert "case14 without generation" in str(info.value)
    # solve_opf returns the failure instead of raising
    opf = solve_opf(net)
    assert not opf.success and opf.status_name == "Infeasible_Problem_Detected"
    # the shedding objective has a data-independent feasible set: still solvable, now > 0
    shed = IpoptSolver(compile_model(build_model(net, objective="shedding"))).solve().check()
    assert shed.objective > 0.1


# ------------------------------------------------------ Pyomo's Ipopt route


def test_matches_pyomo_ipopt_route(case14):
    pyo = pytest.importorskip("pyomo.environ")
    opt = pyo.SolverFactory("ipopt")
    if not opt.available(exception_flag=False):
        pytest.skip("no ipopt executable for Pyomo's SolverFactory('ipopt')")
    model = build_model(case14, objective="cost")
    opt.options["tol"] = 1e-8
    out = opt.solve(model)
    assert str(out.solver.termination_condition) == "optimal"
    ours = solve_opf(case14)
    assert pyo.value(model.obj) == pytest.approx(ours.objective, rel=1e-6)
