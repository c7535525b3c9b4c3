"""The SOC formulation (SPEC §3) and its zone restriction (SPEC §4).

A zone's model must be exactly the centralized model restricted to the zone's
elements: the union of the zones' constraints is the centralized constraint
set, every constraint has the same coefficients and bounds wherever it
appears, and the variables that more than one zone holds are the partition's
shared keys. These tests compare compiled problems (``CompiledProblem``)
entry by entry, with coefficients mapped back to variable keys.
"""

from __future__ import annotations

import dataclasses
from importlib import resources

import numpy as np
import pytest

from powerdp.errors import ModelError
from powerdp.grid.loading import load_case
from powerdp.grid.partition import bundled_partition, partition
from powerdp.opf.centralized import solve_opf
from powerdp.opf.compiled import CompiledProblem, compile_model
from powerdp.opf.formulation import FLOW_MODES, build_model

from .conftest import shared_case

BALANCE = ("balance_p", "balance_q")


def _rows(prob: CompiledProblem) -> dict:
    """Every constraint as ``key -> (cl, cu, {var: coef}, {(var, var): coef})``, with variable keys."""
    vk = prob.var_keys
    A = prob.A.tocsr()
    quad: dict[int, dict] = {}
    for r, i, j, v in zip(prob.qrow.tolist(), prob.qi.tolist(), prob.qj.tolist(), prob.qv.tolist()):
        pair = tuple(sorted((vk[i], vk[j]), key=repr))
        d = quad.setdefault(r, {})
        d[pair] = d.get(pair, 0.0) + v
    out = {}
    for r, key in enumerate(prob.con_keys):
        lo, hi = A.indptr[r], A.indptr[r + 1]
        lin = {vk[c]: float(v) for c, v in zip(A.indices[lo:hi].tolist(), A.data[lo:hi].tolist()) if v != 0.0}
        q = {k: v for k, v in quad.get(r, {}).items() if v != 0.0}
        out[key] = (float(prob.cl[r]), float(prob.cu[r]), lin, q)
    return out


def _bounds(prob: CompiledProblem) -> dict:
    return {k: (float(l), float(u)) for k, l, u in zip(prob.var_keys, prob.lb, prob.ub)}


def _same_row(a, b, rtol=1e-12, atol=1e-12) -> bool:
    (cla, cua, la, qa), (clb, cub, lb, qb) = a, b
    if set(la) != set(lb) or set(qa) != set(qb):
        return False
    vals_a = [cla, cua] + [la[k] for k in la] + [qa[k] for k in qa]
    vals_b = [clb, cub] + [lb[k] for k in la] + [qb[k] for k in qa]
    return np.allclose(vals_a, vals_b, rtol=rtol, atol=atol)


def _pglib_case30():
    net = load_case(shared_case("pglib", "pglib_opf_case30_ieee.m", checks="zone models of PGLib case30 in 3 zones against the whole-network model"))
    return net, partition(net, zones=3, seed=0)


def _bundled(name):
    net = load_case(name)
    part = bundled_partition(net, 3)
    assert part is not None, f"no bundled 3-zone partition for {name}"
    return net, part


# case14/case118 as the brief's bundled partitions; PGLib case30 adds thermal limits
# (MATPOWER's case14 and case118 have none), finite angle limits and a zone without generators.
CASES = {
    "case14": lambda: _bundled("case14"),
    "case118": lambda: _bundled("case118"),
    "pglib_case30": _pglib_case30,
}


@pytest.fixture(scope="module", params=list(CASES))
def zoned(request):
    return CASES[request.param]()


@pytest.mark.parametrize("flows", FLOW_MODES)
def test_zone_models_are_the_restriction_of_the_centralized_model(zoned, flows):
    net, part = zoned
    central = compile_model(build_model(net, objective="shedding", flows=flows))
    c_rows, c_bounds = _rows(central), _bounds(central)
    assert not any(k[0] in BALANCE for k in c_rows), "shedding has no balance constraints"
    if np.isfinite(net.rate_a).any():
        assert any(k[0] == "thermal" for k in c_rows)

    union: set = set()
    holders: dict = {}
    for z in range(part.n_zones):
        zp = compile_model(build_model(net, part.own_buses(z), objective="shedding", flows=flows))
        z_rows, z_bounds = _rows(zp), _bounds(zp)
        assert not any(k[0] in BALANCE for k in z_rows)
        # constraints: a subset of the centralized ones, each one identical
        extra = set(z_rows) - set(c_rows)
        assert not extra, f"zone {z} has constraints the centralized model lacks: {sorted(extra, key=repr)[:5]}"
        for key, row in z_rows.items():
            assert _same_row(row, c_rows[key]), f"zone {z}, constraint {key}: {row} != {c_rows[key]}"
        union |= set(z_rows)
        # variables: all exist centrally with the same bounds
        for key, b in z_bounds.items():
            assert key in c_bounds, f"zone {z} has variable {key} that the centralized model lacks"
            assert b == c_bounds[key], f"zone {z}, variable {key}: bounds {b} != {c_bounds[key]}"
            holders.setdefault(key, []).append(z)
        # the zone holds exactly the partition's elements (SPEC §4)
        kinds = {}
        for kind, idx in z_bounds:
            kinds.setdefault(kind, set()).add(idx)
        assert kinds["w"] == set(part.buses(z).tolist())
        assert kinds["wr"] == kinds["wi"] == set(part.pairs(z).tolist())
        assert kinds.get("pg", set()) == kinds.get("qg", set()) == set(part.gens(z).tolist())
        if flows == "variables":
            for kind in ("pf", "qf", "pt", "qt"):
                assert kinds[kind] == set(part.branches(z).tolist())
        else:
            assert not {"pf", "qf", "pt", "qt"} & set(kinds)

    missing = set(c_rows) - union
    assert not missing, f"centralized constraints in no zone: {sorted(missing, key=repr)[:5]}"
    assert set(holders) == set(c_bounds), "every centralized variable lies in some zone"
    shared = sorted(k for k, zs in holders.items() if len(zs) >= 2)
    assert shared == part.shared_keys(flows)
    for key in shared[:20]:
        assert holders[key] == part.zones_sharing(key)


def test_zone_cost_objective_balances_own_buses_only(case14):
    part = bundled_partition(case14, 3)
    central = compile_model(build_model(case14, objective="cost"))
    c_rows = _rows(central)
    for z in range(part.n_zones):
        own = set(part.own_buses(z).tolist())
        zp = compile_model(build_model(case14, part.own_buses(z), objective="cost"))
        z_rows = _rows(zp)
        for name in BALANCE:
            buses = {idx for kind, idx in zp.con_keys if kind == name}
            assert buses == own, f"zone {z}: {name} at {sorted(buses)}, own buses {sorted(own)}"
            for i in own:
                # a balance row of an own bus sees all its branches and generators: same as centrally
                assert _same_row(z_rows[(name, i)], c_rows[(name, i)])
        assert set(zp.expressions["sp"].keys) == own
        # the objective covers the zone's own generators only
        gen_cols = {zp.var_keys[i] for i in np.flatnonzero(zp.objective.c)} | {
            zp.var_keys[i] for i in zp.objective.qi
        }
        assert gen_cols == {("pg", int(g)) for g in part.gens(z)}


@pytest.mark.parametrize("flows", FLOW_MODES)
@pytest.mark.parametrize("own", ["all", "zone"])
def test_loads_enter_only_the_shedding_objective(case14, flows, own):
    own_buses = None if own == "all" else bundled_partition(case14, 3).own_buses(1)
    rng = np.random.default_rng(7)
    other = case14.with_loads(
        case14.pd * rng.uniform(0.5, 1.5, case14.n_bus) + 0.01, case14.qd * rng.uniform(0.5, 1.5, case14.n_bus) - 0.01
    )
    a = compile_model(build_model(case14, own_buses, objective="shedding", flows=flows))
    b = compile_model(build_model(other, own_buses, objective="shedding", flows=flows))
    # feasible set: identical, entry by entry
    assert a.var_keys == b.var_keys and a.con_keys == b.con_keys
    for name in ("lb", "ub", "cl", "cu", "qrow", "qi", "qj", "qv"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.A != b.A).nnz == 0
    # objective: same quadratic part, the loads move only its linear term and constant
    oa, ob = a.objective, b.objective
    np.testing.assert_array_equal(oa.qi, ob.qi)
    np.testing.assert_array_equal(oa.qj, ob.qj)
    np.testing.assert_allclose(oa.qv, ob.qv, rtol=1e-14)
    assert not np.allclose(oa.c, ob.c)
    assert oa.const != pytest.approx(ob.const)
    # and exactly as sum_i (sp_i^2 + sq_i^2) with sp = M x + load predicts
    for name, loads_a, loads_b in (("sp", case14.pd, other.pd), ("sq", case14.qd, other.qd)):
        keys = a.expressions[name].keys
        np.testing.assert_array_equal(a.expressions[name].M.toarray(), b.expressions[name].M.toarray())
        np.testing.assert_allclose(b.expressions[name].const - a.expressions[name].const, (loads_b - loads_a)[keys])
    x = np.clip(np.random.default_rng(1).normal(1.0, 0.3, a.n), a.lb, a.ub)
    for prob in (a, b):
        expected = sum(float(np.sum(prob.expressions[n](x) ** 2)) for n in ("sp", "sq"))
        assert prob.objective.value(x) == pytest.approx(expected, rel=1e-12)


def test_cost_model_loads_enter_balance_bounds_only(case14):
    other = case14.with_loads(case14.pd * 1.1, case14.qd * 0.9)
    a = compile_model(build_model(case14, objective="cost"))
    b = compile_model(build_model(other, objective="cost"))
    assert (a.A != b.A).nnz == 0
    np.testing.assert_array_equal(a.qv, b.qv)
    changed = {a.con_keys[r][0] for r in np.flatnonzero((a.cl != b.cl) | (a.cu != b.cu))}
    assert changed == set(BALANCE)


def test_flow_modes_give_the_same_centralized_optimum():
    by_mode = {flows: solve_opf("case14", flows=flows) for flows in FLOW_MODES}
    for res in by_mode.values():
        assert res.success, res.status_name
    assert by_mode["expressions"].objective == pytest.approx(by_mode["variables"].objective, rel=1e-6)
    # eliminating the flows makes the problem smaller, and shares the W-variables only
    assert by_mode["expressions"].n_variables < by_mode["variables"].n_variables
    # the branch flows reported by both modes agree too
    for kind in ("p_from_mw", "q_from_mvar", "p_to_mw", "q_to_mvar"):
        np.testing.assert_allclose(
            by_mode["expressions"].branches[kind], by_mode["variables"].branches[kind], atol=1e-3
        )


def test_parallel_branches_share_one_w_pair(case118):
    model = compile_model(build_model(case118, objective="shedding"))
    n_wr = sum(1 for k in model.var_keys if k[0] == "wr")
    assert n_wr == case118.n_pair < case118.n_branch  # case118 has parallel lines


# ---------------------------------------------------------------- bad input


def test_unknown_objective_raises_model_error(case14):
    with pytest.raises(ModelError, match="unknown objective 'welfare'"):
        build_model(case14, objective="welfare")


def test_unknown_flow_mode_raises_model_error(case14):
    with pytest.raises(ModelError, match="unknown flow mode"):
        build_model(case14, flows="implicit")


@pytest.mark.parametrize("own", [[], np.array([], dtype=int)])
def test_empty_own_buses_raise_model_error(case14, own):
    with pytest.raises(ModelError, match="at least one bus"):
        build_model(case14, own, objective="shedding")


@pytest.mark.parametrize("own", [[-1], [0, 14]])
def test_out_of_range_own_buses_raise_model_error(case14, own):
    with pytest.raises(ModelError, match="out of range"):
        build_model(case14, own, objective="shedding")


def test_cost_objective_without_gencost_raises_model_error(case14, tmp_path):
    # a MATPOWER file without mpc.gencost
    text = (resources.files("powerdp.cases") / "case14.m").read_text()
    start = text.index("mpc.gencost")
    end = text.index("];", start) + 2
    path = tmp_path / "case14_nocost.m"
    path.write_text(text[:start] + text[end:])
    net = load_case(path)
    assert not net.has_costs
    with pytest.raises(ModelError, match="no generator costs"):
        build_model(net, objective="cost")
    # shedding does not need costs
    build_model(net, objective="shedding")
    # the same through dataclasses.replace
    with pytest.raises(ModelError, match="gencost"):
        build_model(dataclasses.replace(case14, has_costs=False))
