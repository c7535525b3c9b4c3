"""opf.direct writes the compiled problem build_model defines, bit for bit, without Pyomo."""

from dataclasses import replace

import numpy as np
import pytest

from powerdp.errors import ModelError
from powerdp.grid.loading import load_case
from powerdp.grid.partition import bundled_partition, partition
from powerdp.opf.compiled import CompiledProblem, compile_model
from powerdp.opf.direct import compile_direct, compile_zone
from powerdp.opf.formulation import build_model

from .shared_data import shared_case


def _differences(a: CompiledProblem, b: CompiledProblem) -> list[str]:
    """The fields in which two compiled problems differ (exact comparison, sparsity patterns included)."""
    out = []
    if a.name != b.name:
        out.append("name")
    if a.var_keys != b.var_keys:
        out.append("var_keys")
    if a.con_keys != b.con_keys:
        out.append("con_keys")
    for f in ("lb", "ub", "x0", "cl", "cu", "qrow", "qi", "qj", "qv"):
        x, y = getattr(a, f), getattr(b, f)
        if x.dtype != y.dtype or not np.array_equal(x, y):
            out.append(f)
    for what, x, y in [("A", a.A, b.A)] + [(f"expression {k}", a.expressions[k].M, b.expressions[k].M) for k in b.expressions]:
        if x.shape != y.shape or not all(np.array_equal(getattr(x, f), getattr(y, f)) for f in ("indptr", "indices", "data")):
            out.append(what)
    if sorted(a.expressions) != sorted(b.expressions):
        out.append("expressions")
    for k in b.expressions:
        if a.expressions[k].keys != b.expressions[k].keys or not np.array_equal(a.expressions[k].const, b.expressions[k].const):
            out.append(f"expression {k} keys/const")
    for f in ("c", "qi", "qj", "qv"):
        if not np.array_equal(getattr(a.objective, f), getattr(b.objective, f)):
            out.append(f"objective.{f}")
    if a.objective.const != b.objective.const or a.objective.diag is not None or b.objective.diag is not None:
        out.append("objective.const/diag")
    if sorted(a.meta) != sorted(b.meta):
        out.append("meta keys")
    for k, v in b.meta.items():
        if not (np.array_equal(a.meta[k], v) if isinstance(v, np.ndarray) else a.meta[k] == v):
            out.append(f"meta {k}")
    return out


OBJECTIVES = ("shedding", "cost+shedding", "cost")


def _both(net, own, name="zone", objective="shedding", shedding_weight=None):
    pyomo = compile_model(build_model(net, own, objective=objective, flows="variables", name=name, shedding_weight=shedding_weight))
    return compile_direct(net, own, objective=objective, flows="variables", name=name, shedding_weight=shedding_weight), pyomo


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("convention", ["powermodels", "matpower"])
def test_case14_and_case118_zones_and_whole_networks_are_identical(convention, objective):
    for case, zones in (("case14", 3), ("case118", 3)):
        net = load_case(case, convention=convention)
        part = bundled_partition(net, zones)
        for own in [part.own_buses(z) for z in range(part.n_zones)] + [None]:
            direct, pyomo = _both(net, own, objective=objective)
            assert _differences(direct, pyomo) == [], (case, convention, own is None)
            assert direct.A.nnz > 0 and len(direct.qv) > 0 and len(direct.objective.qv) > 0
            # the cost objective keeps the balance as rows; the others define the balance variables
            assert any(k[0] == "balance_p" for k in direct.con_keys) == (objective == "cost")
            assert any(k[0] == "yp" for k in direct.var_keys) == (objective != "cost")


@pytest.mark.parametrize("objective", ["cost+shedding", "cost"])
def test_an_hvdc_lines_piecewise_linear_cost_is_identical(objective):
    """An HVDC line's cost in the lambda form (counted by the zone of its from end)."""
    net = load_case(shared_case("powermodels", "case5_db.m", checks="opf.direct with an HVDC line's piecewise-linear cost"))
    dc = replace(net.dcline, pwl_line=np.array([0, 0, 0]), pwl_mw=np.array([0.0, 0.5, 1.0]), pwl_cost=np.array([0.0, 3.0, 9.0]))
    net = replace(net, dcline=dc)
    part = partition(net, zones=2, method="spectral", seed=0)
    holders = 0
    for own in [part.own_buses(z) for z in range(part.n_zones)] + [None]:
        direct, pyomo = _both(net, own, objective=objective)
        assert _differences(direct, pyomo) == []
        holders += any(k[0] == "pwl_dc_lambda" for k in direct.var_keys)
    assert holders == 2  # the from end's zone and the whole network


@pytest.mark.parametrize("objective", ["cost+shedding", "cost"])
def test_piecewise_linear_costs_are_identical(objective):
    net = load_case(shared_case("powermodels", "case5_pwlc.m", checks="opf.direct with piecewise-linear costs against Pyomo"))
    assert len(net.pwl_gen) > 0
    part = partition(net, zones=2, method="spectral", seed=0)
    for own in [part.own_buses(z) for z in range(part.n_zones)] + [None]:
        direct, pyomo = _both(net, own, objective=objective)
        assert _differences(direct, pyomo) == []
    assert any(k[0] == "pwl_lambda" for k in direct.var_keys) and any(k[0] == "pwl_mw" for k in direct.con_keys)


def test_a_given_shedding_weight_and_zero_quadratic_costs_are_identical(case14):
    """ω enters every shedding term (Pyomo expands ω (y + d)² term by term); a generator with c2 = 0 has no
    quadratic cost term (Pyomo drops 0 · pg²)."""
    c2 = case14.cost_c2.copy()
    c2[[0, 2]] = 0.0
    net = replace(case14, cost_c2=c2)
    for own in [bundled_partition(net, 3).own_buses(z) for z in range(3)] + [None]:
        for objective, weight in (("cost+shedding", 123.456789), ("cost+shedding", None), ("cost", None)):
            direct, pyomo = _both(net, own, objective=objective, shedding_weight=weight)
            assert _differences(direct, pyomo) == [], (objective, weight)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_hvdc_lines_are_identical(objective):
    net = load_case(shared_case("powermodels", "case5_db.m", checks="opf.direct with HVDC lines against Pyomo"))
    assert net.n_dcline > 0
    part = partition(net, zones=2, method="spectral", seed=0)
    for own in [part.own_buses(z) for z in range(part.n_zones)] + [None]:
        assert _differences(*_both(net, own, objective=objective)) == []


def test_zero_angle_limits_and_unrated_branches_are_identical(case14):
    """A zero angle limit makes Pyomo read wi >= 0 as a row on wi alone; an unrated branch has free flows."""
    angmin, angmax, rate = case14.angmin.copy(), case14.angmax.copy(), case14.rate_a.copy()
    angmin[0], angmax[3], rate[5] = 0.0, 0.0, np.inf
    net = replace(case14, angmin=angmin, angmax=angmax, rate_a=rate)
    direct, pyomo = _both(net, bundled_partition(net, 3).own_buses(0))
    assert _differences(direct, pyomo) == []
    assert any(k[0] == "angle_lo" for k in direct.con_keys) and np.isinf(net.rate_a).any()


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_a_zone_of_case13659pegase_is_identical(objective):
    path = shared_case("matpower", "case13659pegase.m", checks="opf.direct against Pyomo on a zone of the 13659-bus case")
    net = load_case(path)
    part = partition(net, zones=16, method="spectral", seed=0)
    z = int(np.argmax([len(part.own_buses(z)) for z in range(part.n_zones)]))
    direct, pyomo = _both(net, part.own_buses(z), name="z", objective=objective)
    assert _differences(direct, pyomo) == []
    assert direct.n > 8_000


def test_the_differences_are_seen(case14):
    """The comparison itself catches a changed coefficient, bound or row order."""
    direct, pyomo = _both(case14, bundled_partition(case14, 3).own_buses(0))
    direct.A.data[3] *= 1 + 1e-15
    direct.x0[0] += 1e-12
    direct.con_keys[0], direct.con_keys[1] = direct.con_keys[1], direct.con_keys[0]
    direct.objective.const = np.nextafter(direct.objective.const, np.inf)
    assert {"A", "x0", "con_keys", "objective.const/diag"} <= set(_differences(direct, pyomo))


def test_compile_zone_falls_back_to_pyomo_for_other_models(case14):
    own = bundled_partition(case14, 3).own_buses(0)
    for objective, flows in (("cost", "expressions"), ("shedding", "expressions"), ("cost+shedding", "expressions")):
        zone = compile_zone(case14, own, objective=objective, flows=flows, name="z")
        reference = compile_model(build_model(case14, own, objective=objective, flows=flows, name="z"))
        assert _differences(zone, reference) == []
        with pytest.raises(ModelError, match="compile_direct writes"):
            compile_direct(case14, own, objective=objective, flows=flows)


@pytest.mark.parametrize("objective, algorithm", [("shedding", "objl"), ("cost+shedding", "objl"), ("cost", "nonprivate")])
def test_a_zone_agent_builds_no_pyomo_model(case118, monkeypatch, objective, algorithm):
    """The set-up path of every run with flows as variables (every private run, and the non-private cost
    objective) compiles its zones without Pyomo."""
    import pyomo.environ as pyo

    from powerdp.apps.power_flow.agent import ZoneAgent
    from powerdp.apps.power_flow.config import RunConfig

    def no_pyomo(*args, **kwargs):
        raise AssertionError("a Pyomo model was built")

    part = bundled_partition(case118, 3)
    by_zone = part.shared_by_zone("variables")
    private = dict(epsilon=0.1, sensitivity="paper") if algorithm != "nonprivate" else {}
    config = RunConfig(case="case118", algorithm=algorithm, objective=objective, local_solver="clarabel", **private)
    reference = compile_model(build_model(case118, part.own_buses(2), objective=objective, name="case118/zone2"))
    monkeypatch.setattr(pyo, "ConcreteModel", no_pyomo)
    agent = ZoneAgent(case118, 2, part.own_buses(2), by_zone[2], config)
    assert _differences(agent.problem, reference) == []
