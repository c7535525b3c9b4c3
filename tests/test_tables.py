"""Physical-unit tables of a solution (powerdp.opf.tables): units, signs, balances, assembly from zones."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powerdp import RunConfig, run_distributed, solve_opf
from powerdp.errors import ModelError
from powerdp.grid.partition import partition
from powerdp.opf.objectives import generation_cost, generator_costs
from powerdp.opf.tables import (
    Dispatch,
    ResultTables,
    dispatch_from_tables,
    dispatch_from_zones,
    physical_tables,
)

from .conftest import shared_case


@pytest.fixture(scope="module")
def case14_cost():
    return solve_opf("case14")


def test_case14_units_are_consistent(case14_cost, case14):
    """Σ p_mw of the generators = Σ load + losses (+ shunts), and each branch's losses = its two end flows."""
    res = case14_cost
    g, b, br, z = res.generators, res.buses, res.branches, res.zones
    S = case14.base_mva
    # generation = load + branch losses + shunt consumption, in MW and in Mvar (nothing shed under `cost`)
    shunt_p = (case14.gs * b["vm_pu"].to_numpy() ** 2).sum() * S
    shunt_q = -(case14.bs * b["vm_pu"].to_numpy() ** 2).sum() * S
    assert g["p_mw"].sum() == pytest.approx(b["load_p_mw"].sum() + br["pl_mw"].sum() + shunt_p, abs=1e-5)
    assert g["q_mvar"].sum() == pytest.approx(b["load_q_mvar"].sum() + br["ql_mvar"].sum() + shunt_q, abs=1e-5)
    assert b["load_p_mw"].sum() == pytest.approx(259.0) and b["load_q_mvar"].sum() == pytest.approx(73.5)
    # losses of each branch are the sum of the flows into it at both ends, and real losses are not negative
    np.testing.assert_allclose(br["pl_mw"], br["p_from_mw"] + br["p_to_mw"], atol=1e-12)
    np.testing.assert_allclose(br["ql_mvar"], br["q_from_mvar"] + br["q_to_mvar"], atol=1e-12)
    assert (br["pl_mw"] > -1e-6).all()
    assert br["pl_mw"].sum() == pytest.approx(9.178, abs=0.01)  # measured; the SOC losses of case14
    # MW = p.u. x baseMVA: the per-unit dispatch and the table agree
    np.testing.assert_allclose(g["p_mw"], res.dispatch.pg * S)
    np.testing.assert_allclose(br["p_from_mw"], res.dispatch.pf * S)
    # the bus balance closes: net demand (pandapower's res_bus sign) = what the branches take out of the bus
    out = np.zeros(case14.n_bus)
    np.add.at(out, case14.f_bus, br["p_from_mw"].to_numpy())
    np.add.at(out, case14.t_bus, br["p_to_mw"].to_numpy())
    np.testing.assert_allclose(-b["p_mw"].to_numpy(), out, atol=1e-5)
    assert np.abs(b["p_shed_mw"]).max() < 1e-5 and np.abs(b["q_shed_mvar"]).max() < 1e-5
    # voltages: p.u. is √w; case14 has no baseKV, so kV is unknown
    np.testing.assert_allclose(b["vm_pu"] ** 2, res.dispatch.w)
    assert b.loc[0, "vm_pu"] == pytest.approx(1.06, abs=1e-6)  # the slack bus sits at its upper limit
    assert b["vm_kv"].isna().all() or (b["vn_kv"] == 0).all()
    # $/h: the generator costs add up to the objective
    assert g["cost_per_h"].sum() == pytest.approx(res.objective, rel=1e-9)
    # one zone (case14's single area) holds every total
    assert len(z) == 1 and z.loc[0, "n_buses"] == 14 and z.loc[0, "n_gens"] == 5
    for col, total in (("p_mw", g["p_mw"].sum()), ("cost_per_h", res.objective), ("pl_mw", br["pl_mw"].sum())):
        assert z.loc[0, col] == pytest.approx(total, rel=1e-9)
    assert z.loc[0, "p_export_mw"] == 0.0


def test_case118_kv_and_zone_totals(case118):
    res = solve_opf(case118)
    assert list(res.zones["label"]) == [1]  # the centralized solve's zones are the case's bus areas (one here)
    part = partition(case118, "case118_3areas")
    tables = physical_tables(case118, res.dispatch, part.zone_of_bus, part.labels)
    b, z, br = tables.buses, tables.zones, tables.branches
    np.testing.assert_allclose(b["vm_kv"], b["vm_pu"] * case118.base_kv)
    assert set(b["vn_kv"]) == {138.0, 161.0, 345.0}
    # every zone of the 3-area partition balances (generation = served load + shunts + losses inside + export)
    assert len(z) == 3
    lhs = z["p_mw"]
    rhs = z["load_p_mw"] - z["p_shed_mw"] + z["shunt_p_mw"] + z["pl_mw"] + z["p_export_mw"]
    np.testing.assert_allclose(lhs, rhs, atol=1e-5)
    # exports over tie-lines sum to the tie-lines' losses
    tie = (b.set_index("bus").loc[br["from_bus"], "zone"].to_numpy() != b.set_index("bus").loc[br["to_bus"], "zone"].to_numpy())
    assert z["p_export_mw"].sum() == pytest.approx(br.loc[tie, "pl_mw"].sum(), abs=1e-6)
    assert z["n_buses"].sum() == 118
    # case118 as bundled has no branch ratings: loading is NaN (unlimited), not 0
    assert br["loading_percent"].isna().all() and br["rate_mva"].isna().all()


def test_loading_percent_against_the_rating(case14):
    """loading = 100·max(|S_from|, |S_to|)/rateA, in MVA."""
    res = solve_opf(case14)
    rated = replace(case14, rate_a=np.full(case14.n_branch, 0.5))  # 50 MVA on a 100 MVA base
    br = physical_tables(rated, res.dispatch).branches
    s = np.maximum(np.hypot(br["p_from_mw"], br["q_from_mvar"]), np.hypot(br["p_to_mw"], br["q_to_mvar"]))
    np.testing.assert_allclose(br["loading_percent"], 100 * s / 50.0)
    assert (br["rate_mva"] == 50.0).all()
    assert br["loading_percent"].max() > 100  # branch 1-2 carries ~150 MVA


def test_shedding_is_load_not_served(case14):
    """A dispatch that serves less than the load shows the difference as shedding (positive), in MW."""
    res = solve_opf(case14)
    more = case14.with_loads(case14.pd.copy(), case14.qd.copy())
    more.pd[3] += 0.2  # 20 MW more load at bus 4 that the dispatch does not serve
    b = physical_tables(more, res.dispatch).buses
    assert b.loc[3, "p_shed_mw"] == pytest.approx(20.0, abs=1e-5)
    assert np.abs(b.drop(index=3)["p_shed_mw"]).max() < 1e-5
    assert b.loc[3, "load_p_mw"] == pytest.approx(47.8 + 20.0)
    # served load (load − shed) is what the bus's net demand holds
    assert b.loc[3, "p_mw"] == pytest.approx(res.buses.loc[3, "p_mw"], abs=1e-6)


def test_piecewise_linear_cost(case14):
    """A PWL cost is interpolated between its points (convex: the largest segment line)."""
    net = replace(
        case14,
        pwl_gen=np.array([0, 0, 0]), pwl_mw=np.array([0.0, 1.0, 3.0]), pwl_cost=np.array([0.0, 10.0, 50.0]),
    )
    pg = np.array([0.5, 0.2, 0.2, 0.0, 0.0])
    cost = generator_costs(net, pg)
    assert generation_cost(net, pg) == pytest.approx(cost.sum())
    assert cost[0] == pytest.approx(5.0)
    pg[0] = 2.0
    assert generator_costs(net, pg)[0] == pytest.approx(30.0)
    # the other generators keep their polynomial costs
    np.testing.assert_allclose(cost[1:], (case14.cost_c2 * pg**2 + case14.cost_c1 * pg + case14.cost_c0)[1:])


def test_pwl_case_costs_add_up_to_the_objective():
    res = solve_opf(shared_case("powermodels", "case5_pwlc.m", checks="piecewise-linear generator costs add up to the objective"))
    assert res.generators["cost_per_h"].sum() == pytest.approx(res.objective, rel=1e-6)


def test_tables_round_trip_to_dispatch(case14_cost, case14, tmp_path):
    res = case14_cost
    res.tables().save(tmp_path)
    back = ResultTables.load(tmp_path)
    d = dispatch_from_tables(case14, back)
    for name in ("w", "pg", "qg", "pf", "qf", "pt", "qt"):
        np.testing.assert_allclose(getattr(d, name), getattr(res.dispatch, name), rtol=1e-12, atol=1e-14)
    # an element missing from a table is named
    back.generators = back.generators[back.generators["gen"] != 3]
    with pytest.raises(ModelError, match="no row for generator 3"):
        dispatch_from_tables(case14, back)
    assert ResultTables.load(tmp_path / "nothing") is None


def test_dispatch_from_zones_takes_each_value_from_its_owner(case14):
    part = partition(case14, "case14_3zones")
    res = solve_opf(case14)
    keys = []
    sols = {}
    d = res.dispatch
    # zone p's "solution": the centralized point, shifted by p on everything (so the owner is visible)
    for p in range(part.n_zones):
        sol = {("w", int(i)): d.w[i] + p for i in part.buses(p)}
        sol.update({(k, int(l)): getattr(d, k)[l] + p for l in part.branches(p) for k in ("pf", "qf", "pt", "qt")})
        sol.update({(k, int(g)): getattr(d, k)[g] + p for g in part.gens(p) for k in ("pg", "qg")})
        sols[p] = sol
        keys += list(sol)
    out = dispatch_from_zones(case14, part.zone_of_bus, sols)
    z = part.zone_of_bus
    np.testing.assert_allclose(out.w, d.w + z)
    np.testing.assert_allclose(out.pg, d.pg + z[case14.gen_bus])
    np.testing.assert_allclose(out.pf, d.pf + z[case14.f_bus])  # a tie-line's f end from the f bus's zone
    np.testing.assert_allclose(out.qt, d.qt + z[case14.t_bus])  # and its t end from the t bus's zone
    del sols[1][("pg", int(part.gens(1)[0]))]
    with pytest.raises(ModelError, match="no zone solution holds pg of generator"):
        dispatch_from_zones(case14, part.zone_of_bus, sols)


def test_run_tables_match_the_centralized_point_when_converged(tmp_path):
    """The exact (non-private) run converges to the centralized optimum: its tables agree with the solve's."""
    cfg = RunConfig(case="case14", zones=3, algorithm="exact", objective="cost", rounds=60, seed=0)
    result = run_distributed(cfg, out=tmp_path / "run", reference=False)
    central = solve_opf("case14")
    g, z = result.generators, result.zones
    assert g["p_mw"].sum() == pytest.approx(central.generators["p_mw"].sum(), abs=0.5)
    assert g["cost_per_h"].sum() == pytest.approx(central.objective, rel=2e-3)
    assert list(z["zone"]) == [0, 1, 2] and list(z["label"]) == [1, 2, 3] and z["n_buses"].sum() == 14
    assert list(z["n_buses"]) == [np.sum(result.buses["zone"] == k) for k in range(3)]
    # saved and read back
    from powerdp import RunResult

    loaded = RunResult.load(tmp_path / "run")
    for name in ("generators", "buses", "branches", "zones"):
        pd.testing.assert_frame_equal(getattr(loaded, name), getattr(result, name), check_dtype=False)
    # the tables hold the loads: the simulation's evaluation; a run directory without them still loads
    for name in ("generators", "buses", "branches", "zones"):
        (tmp_path / "run" / "simulation_evaluation" / f"{name}.csv").unlink()
    old = RunResult.load(tmp_path / "run")
    assert old.tables is None and old.zone_solutions


def test_dispatch_vm():
    d = Dispatch(w=np.array([1.21, 0.81]), pg=np.zeros(1), qg=np.zeros(1), pf=np.zeros(1), qf=np.zeros(1), pt=np.zeros(1), qt=np.zeros(1))
    np.testing.assert_allclose(d.vm, [1.1, 0.9])
