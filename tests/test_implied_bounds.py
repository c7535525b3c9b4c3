"""Implied variable bounds: which ones, that leaving them out changes no solution, and that a change of the
bounds they follow from brings them back."""

import numpy as np
import pyomo.environ as pyo
import pytest

from powerdp.grid.network import voltage_product_bounds
from powerdp.grid.partition import bundled_partition
from powerdp.opf.compiled import compile_model
from powerdp.opf.conic import LOCAL_SETTINGS, ClarabelSolver, conic_form
from powerdp.opf.formulation import build_model
from powerdp.opf.implied_bounds import implied_bounds
from powerdp.opf.reduction import eliminate


def _disk(x_ub=2.0, y_lb=-2.0, y_ub=2.0, w_ub=2.0, half_plane=None, rhs=0.0, linear_term=False):
    """x² + y² ≤ u·v with u, v ∈ [0, w_ub] (ρ = w_ub), and optionally a row ``half_plane(m) ≤ rhs``."""
    m = pyo.ConcreteModel(name="disk")
    m.x = pyo.Var(bounds=(-5.0, x_ub))
    m.y = pyo.Var(bounds=(y_lb, y_ub))
    m.u = pyo.Var(bounds=(0.0, w_ub))
    m.v = pyo.Var(bounds=(0.0, w_ub))
    body = m.x**2 + m.y**2 - m.u * m.v + (0.1 * m.x if linear_term else 0)
    m.cone = pyo.Constraint(expr=body <= 0)
    if half_plane is not None:
        m.h = pyo.Constraint(expr=half_plane(m) <= rhs)
    m.obj = pyo.Objective(expr=(m.x - 3) ** 2 + (m.y - 3) ** 2 - m.u - m.v)
    return compile_model(m, expressions=())


def _masks(prob):
    lo, up = implied_bounds(prob, prob.lb, prob.ub, prob.cl, prob.cu)
    names = [k[0] for k in prob.var_keys]
    return {names[j] for j in np.flatnonzero(lo)}, {names[j] for j in np.flatnonzero(up)}


def test_the_disk_implies_bounds_at_or_beyond_its_radius_only():
    assert _masks(_disk()) == ({"x", "y"}, {"x", "y"})  # |x|, |y| ≤ ρ = 2: x ≥ −5, x ≤ 2 and |y| ≤ 2 all follow
    lo, up = _masks(_disk(x_ub=1.999, y_lb=-1.9))
    assert (lo, up) == ({"x"}, {"y"})
    # rounding of the data: a bound 1e-14 (relative) inside the radius still counts, 1e-9 does not
    assert "x" in _masks(_disk(x_ub=2.0 * (1 - 1e-14)))[1]
    assert "x" not in _masks(_disk(x_ub=2.0 * (1 - 1e-9)))[1]
    assert _masks(_disk(w_ub=2.5)) == ({"x"}, set())  # ρ = 2.5: only x ≥ −5 is still implied


def test_a_half_plane_through_the_centre_tightens_the_bound_it_faces():
    t = np.tan(0.5)  # y ≤ tan(0.5)·x: y ≤ ρ·sin(0.5), and x ≥ −ρ·cos(0.5)
    s = 2.0 * np.sin(0.5)
    lo, up = _masks(_disk(y_ub=s, half_plane=lambda m: m.y - t * m.x))
    assert "y" in up
    lo, up = _masks(_disk(y_ub=s * (1 - 1e-9), half_plane=lambda m: m.y - t * m.x))
    assert "y" not in up
    # not through the centre, or with a linear term in the cone row: nothing from the half-plane or the row
    assert "y" not in _masks(_disk(y_ub=s, half_plane=lambda m: m.y - t * m.x, rhs=0.01))[1]
    assert _masks(_disk(linear_term=True)) == (set(), set())
    # a quadratic row over the same two variables with a homogeneous linear part is no half-plane
    lo, up = _masks(_disk(y_ub=s, half_plane=lambda m: m.y - t * m.x + 0.01 * m.u**2))
    assert "y" not in up


def test_solutions_are_the_same_with_and_without_the_implied_rows():
    t = np.tan(0.5)
    prob = _disk(y_ub=2.0 * np.sin(0.5), half_plane=lambda m: m.y - t * m.x)
    with_rows = None
    for drop in (False, True):
        form = conic_form(prob, drop_implied=drop)
        tight = {**LOCAL_SETTINGS, "tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12}
        res = ClarabelSolver(prob, options=tight, drop_implied=drop).solve().check()
        if with_rows is None:
            with_rows = (form.nonneg, res.x)
        else:
            assert form.nonneg < with_rows[0]
            np.testing.assert_allclose(res.x, with_rows[1], atol=1e-7)
            assert prob.max_violation(res.x) < 1e-8  # the left-out bounds hold


@pytest.fixture(scope="module")
def zone118(case118):
    part = bundled_partition(case118, 3)
    return compile_model(build_model(case118, part.own_buses(1), objective="shedding", flows="variables"))


def test_a_zone_leaves_out_exactly_powermodels_implied_voltage_product_bounds(case118, zone118):
    """Every pair of case118 has θ in (−60°, 60°) limits on both sides: wr ≤ vmax_f·vmax_t, and
    wi ≤ vmax_f·vmax_t·sin θmax, wi ≥ vmax_f·vmax_t·sin θmin follow from the cone and the angle rows;
    wr ≥ vmin_f·vmin_t·cos θ does not (the relaxation allows small |W|)."""
    prob = eliminate(zone118).reduced
    lo, up = implied_bounds(prob, prob.lb, prob.ub, prob.cl, prob.cu)
    kinds = np.array([k[0] for k in prob.var_keys])
    pairs = np.array([k[1] for k in prob.var_keys])
    wr, wi = kinds == "wr", kinds == "wi"
    assert up[wr].all() and up[wi].all() and lo[wi].all()
    assert not lo[wr].any() and not (lo | up)[~(wr | wi)].any()
    wr_min, wr_max, wi_min, wi_max = voltage_product_bounds(case118)
    np.testing.assert_allclose(prob.ub[wr], wr_max[pairs[wr]])
    np.testing.assert_allclose(prob.ub[wi], wi_max[pairs[wi]])


def test_a_zone_solve_is_the_same_without_the_implied_rows(zone118):
    red = eliminate(zone118)
    prob = red.reduced
    rng = np.random.default_rng(1)
    n = zone118.n
    diag = rng.uniform(1.0, 5.0, n)
    c = -diag * zone118.x0 + rng.normal(0.0, 1.0, n)
    x, rows = {}, {}
    tight = {**LOCAL_SETTINGS, "tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12}
    for drop in (False, True):
        solver = ClarabelSolver(prob, red.pull(np.zeros(n), np.ones(n)), options=tight, drop_implied=drop)
        rows[drop] = solver._form.nonneg
        res = solver.solve(red.pull(c, diag)).check()
        x[drop] = res.x
        assert prob.max_violation(res.x) < 1e-7
    assert rows[True] == rows[False] - 3 * int(sum(k[0] == "wi" for k in prob.var_keys))
    np.testing.assert_allclose(x[True], x[False], atol=1e-6)


def test_a_looser_w_bound_brings_the_rows_back(zone118):
    """The bounds are implied by the current ones: raising every w's upper bound (set_bounds) makes wr ≤ vmax_f·vmax_t
    a real constraint again, so the form changes (Clarabel's data are rebuilt) and it is there."""
    prob = eliminate(zone118).reduced
    solver = ClarabelSolver(prob)
    before = solver._form.nonneg
    ub = prob.ub.copy()
    ub[[k[0] == "w" for k in prob.var_keys]] *= 1.2
    solver.set_bounds(prob.lb, ub, prob.cl, prob.cu)
    assert solver._form.nonneg > before
    lo, up = implied_bounds(prob, prob.lb, ub, prob.cl, prob.cu)
    kinds = np.array([k[0] for k in prob.var_keys])
    assert not up[kinds == "wr"].any()


def test_a_polished_solver_keeps_the_implied_rows_and_the_working_sets_always_see_them(zone118):
    """Clarabel drops them only when no polish follows (the polish's Newton steps start from Clarabel's point); the
    working sets (polish, active set) always get the form with every bound."""
    prob = eliminate(zone118).reduced
    every = conic_form(prob, drop_implied=False)
    plain, polished = ClarabelSolver(prob), ClarabelSolver(prob, polish=True)
    assert plain._form.nonneg < every.nonneg == polished._form.nonneg
    assert plain.working_form.nonneg == every.nonneg and polished.working_form is polished._form
    np.testing.assert_array_equal(plain.working_form.b, every.b)
