"""DC-OPF (powerdp.opf.dc): prices are the derivatives of the optimal cost; the optimum agrees with HiGHS."""

import numpy as np
import pytest
from scipy.optimize import linprog

from powerdp.grid.loading import load_case
from powerdp.opf.dc import dc_model, ptdf, solve_dc_opf

from .shared_data import shared_case


@pytest.fixture(scope="module")
def m118():
    return dc_model(load_case(shared_case("pglib", "pglib_opf_case118_ieee.m", checks="DC-OPF prices on PGLib case118")))


def test_lmp_is_the_derivative_of_the_optimal_cost(m118):
    res = solve_dc_opf(m118)
    assert res.success
    assert np.sum(np.abs(res.congestion) > 1e-6) >= 1  # a congested case: prices differ by bus
    assert res.lmp.max() - res.lmp.min() > 1.0
    h = 1e-4
    for b in (0, 10, 50, 75, 117):
        d = m118.load.copy()
        d[b] += h
        fd = (solve_dc_opf(m118, d).objective - res.objective) / h / m118.base_mva
        assert res.lmp[b] == pytest.approx(fd, abs=1e-4)


def test_dc_opf_matches_highs_on_case300():
    m = dc_model(load_case(shared_case("pglib", "pglib_opf_case300_ieee.m", checks="the DC-OPF of PGLib case300 against HiGHS")))
    res = solve_dc_opf(m)
    hg, hd = m.H[:, m.gen_bus], m.H @ m.load
    lp = linprog(m.c1, A_ub=np.vstack([hg, -hg]), b_ub=np.concatenate([m.flow_hi + hd, -(m.flow_lo + hd)]),
                 A_eq=np.ones((1, m.n_gen)), b_eq=[m.load.sum()], bounds=list(zip(m.pmin, m.pmax)), method="highs")
    assert lp.status == 0
    assert res.objective == pytest.approx(lp.fun + m.c0.sum(), rel=1e-9)
    L = m.n_mon
    lmp_highs = (lp.eqlin.marginals[0] + m.H.T @ (lp.ineqlin.marginals[:L] - lp.ineqlin.marginals[L:])) / m.base_mva
    assert np.max(np.abs(lmp_highs - res.lmp)) < 1e-6
    assert np.max(np.abs(res.flows) - m.rate) < 1e-7


def test_ptdf_flows_solve_the_dc_power_flow():
    net = load_case("case14")
    H = ptdf(net)
    rng = np.random.default_rng(0)
    p = rng.normal(size=net.n_bus)
    p -= p.mean()  # balanced injections
    b = 1.0 / (net.x * net.tap)
    Cf = np.zeros((net.n_branch, net.n_bus))
    Cf[np.arange(net.n_branch), net.f_bus] = 1
    Cf[np.arange(net.n_branch), net.t_bus] -= 1
    B = Cf.T @ (b[:, None] * Cf)
    ref = int(np.flatnonzero(net.bus_type == 3)[0])
    keep = np.arange(net.n_bus) != ref
    theta = np.zeros(net.n_bus)
    theta[keep] = np.linalg.solve(B[np.ix_(keep, keep)], p[keep])
    np.testing.assert_allclose(H @ p, b * (Cf @ theta), atol=1e-10)
