"""Elimination of the defined variables (flows, balance variables): z = P r, exactly."""

import numpy as np
import pytest

from powerdp.errors import ModelError
from powerdp.grid.partition import bundled_partition
from powerdp.opf.compiled import compile_model
from powerdp.opf.formulation import build_model
from powerdp.opf.reduction import eliminate


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
