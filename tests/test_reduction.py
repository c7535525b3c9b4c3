"""Elimination of the defined variables (flows, balance variables): z = P r, exactly."""

import numpy as np
import pytest

from powerdp.errors import ModelError
from powerdp.grid.loading import network_from_matpower
from powerdp.grid.matpower import parse_matpower
from powerdp.grid.partition import bundled_partition
from powerdp.opf.compiled import compile_model
from powerdp.opf.conic import LOCAL_SETTINGS, ClarabelSolver
from powerdp.opf.formulation import build_model
from powerdp.opf.reduction import FILL_RATIO, eliminate, kkt_fill, sparse_elimination


@pytest.fixture(scope="module")
def zone_problem(case14):
    part = bundled_partition(case14, 3)
    return compile_model(build_model(case14, part.own_buses(1), objective="shedding", flows="variables"))


def test_lift_satisfies_every_defining_row(zone_problem):
    prob = zone_problem
    red = eliminate(prob)
    names = {k[0] for k in red.reduced.var_keys}
    assert not names & {"pf", "qf", "pt", "qt", "yp", "yq"}
    assert {"w", "wr", "wi", "pg", "qg"} <= names
    defining = np.array([k[0] in ("ohm", "balance_def") for k in prob.con_keys])
    r = np.random.default_rng(0).normal(size=red.reduced.n)
    z = red.lift(r)
    g = prob.constraint_values(z)
    np.testing.assert_allclose(g[defining], 0.0, atol=1e-12)
    np.testing.assert_array_equal(red.restrict(z), r)
    # every remaining row has the same value in z and in r
    np.testing.assert_allclose(red.reduced.constraint_values(r)[: (~defining).sum()], g[~defining], atol=1e-10)


def test_pull_gives_the_same_objective_in_both_coordinates(zone_problem):
    prob = zone_problem
    red = eliminate(prob)
    rng = np.random.default_rng(1)
    c, d = rng.normal(size=prob.n), rng.uniform(0.5, 2.0, size=prob.n)
    pulled = red.pull(c, d, const=0.25, base=red.reduced.objective)
    r = rng.normal(size=red.reduced.n)
    z = red.lift(r)
    direct = 0.25 + c @ z + 0.5 * np.sum(d * z * z) + prob.objective.value(z)
    assert pulled.value(r) == pytest.approx(direct, rel=1e-12)
    # the gradient in r is Pᵀ times the gradient in z
    gz = c + d * z + prob.objective.gradient(z)
    np.testing.assert_allclose(pulled.gradient(r), red.P.T @ gz, rtol=1e-10, atol=1e-10)


def test_stages_can_be_chosen(zone_problem):
    only_flows = eliminate(zone_problem, ("ohm",))
    names = {k[0] for k in only_flows.reduced.var_keys}
    assert "yp" in names and "pf" not in names
    both = eliminate(zone_problem)
    assert both.reduced.n == only_flows.reduced.n - sum(k[0] in ("yp", "yq") for k in zone_problem.var_keys)
    with pytest.raises(ModelError, match="unknown defining constraints"):
        eliminate(zone_problem, ("kirchhoff",))


def test_problem_without_defining_rows_is_left_alone(case14):
    prob = compile_model(build_model(case14, objective="cost", flows="expressions"))
    red = eliminate(prob)
    assert red.reduced is prob
    assert red.P.shape == (prob.n, prob.n)


def test_pull_keeps_a_diagonals_values_only_while_it_is_the_same(zone_problem):
    """The pulled Hessian of the last diagonal is reused; a new (or changed in place) diagonal is recomputed."""
    red = eliminate(zone_problem)
    rng = np.random.default_rng(3)
    c, d = rng.normal(size=zone_problem.n), rng.uniform(0.5, 2.0, size=zone_problem.n)
    first = red.pull(c, d)
    assert red.pull(-c, d.copy()).qv is first.qv  # the same values, not recomputed
    d[:5] *= 3.0  # the caller changes its array in place: not the cached diagonal any more
    changed = red.pull(c, d)
    fresh = eliminate(zone_problem).pull(c, d)
    np.testing.assert_array_equal(changed.qv, fresh.qv)
    assert not np.array_equal(changed.qv, first.qv)


def _star_case(leaves: int) -> str:
    """A hub bus with ``leaves`` branches to buses in a ring: the hub's balance row holds every branch."""
    buses = ["1\t3\t0\t0\t0\t0\t1\t1\t0\t135\t1\t1.1\t0.9;"]
    buses += [f"{k}\t1\t20\t5\t0\t0\t1\t1\t0\t135\t1\t1.1\t0.9;" for k in range(2, leaves + 2)]
    branches = [f"1\t{k}\t0.01\t0.1\t0.02\t250\t250\t250\t0\t0\t1\t-60\t60;" for k in range(2, leaves + 2)]
    branches += [f"{k}\t{k + 1}\t0.02\t0.2\t0.02\t250\t250\t250\t0\t0\t1\t-60\t60;" for k in range(2, leaves + 1)]
    return "\n".join([
        "function mpc = star", "mpc.version = '2';", "mpc.baseMVA = 100;",
        "mpc.bus = [", *buses, "];",
        "mpc.gen = [", "1\t0\t0\t300\t-300\t1\t100\t1\t2500\t0;", "];",
        "mpc.branch = [", *branches, "];",
        "mpc.gencost = [", "2\t0\t0\t3\t0.11\t5\t150;", "];",
    ])


def test_balance_variables_stay_when_eliminating_them_fills_the_factor_in():
    """A hub bus's balance variable, eliminated, makes (y + d)² a dense block over all its branches' W: the
    KKT factor fills in, so only the flows are eliminated; the local solutions are the same either way."""
    net = network_from_matpower(parse_matpower(_star_case(120)))
    prob = compile_model(build_model(net, np.arange(net.n_bus), objective="shedding", flows="variables"))
    full, flows = eliminate(prob), eliminate(prob, ("ohm",))
    assert kkt_fill(full) > FILL_RATIO * kkt_fill(flows)
    chosen = sparse_elimination(prob)
    names = {k[0] for k in chosen.reduced.var_keys}
    assert {"yp", "yq"} <= names and not names & {"pf", "qf", "pt", "qt"}
    rng = np.random.default_rng(0)
    c, d = rng.normal(size=prob.n), rng.uniform(1.0, 2.0, size=prob.n)
    z = {}
    for name, red in (("chosen", chosen), ("full", full)):
        res = ClarabelSolver(red.reduced, red.pattern, options=LOCAL_SETTINGS).solve(red.pull(c, d)).check()
        z[name] = red.lift(res.x)
    np.testing.assert_allclose(z["chosen"], z["full"], atol=1e-6)


def test_a_sparse_zone_has_its_balance_variables_eliminated_too(zone_problem):
    chosen = sparse_elimination(zone_problem)
    full = eliminate(zone_problem)
    assert chosen.reduced.var_keys == full.reduced.var_keys
    assert (chosen.P != full.P).nnz == 0


def test_a_large_zone_keeps_its_balance_variables(zone_problem):
    """Past SMALL_ZONE_N variables a factor's flops, not the system's size, set an interior-point iteration's cost,
    and eliminating the balance variables multiplies them: such a zone has only its flows eliminated."""
    flows = eliminate(zone_problem, ("ohm",))
    full = eliminate(zone_problem)
    chosen = sparse_elimination(zone_problem, small_n=full.reduced.n - 1)
    assert chosen.reduced.var_keys == flows.reduced.var_keys
    assert sparse_elimination(zone_problem, small_n=full.reduced.n).reduced.var_keys == full.reduced.var_keys
