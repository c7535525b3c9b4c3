"""Objectives as registered units: model terms, where the loads enter, sensitivity rule."""

import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.errors import ConfigError, ModelError
from powerdp.opf.compiled import compile_model
from powerdp.opf.formulation import build_model
from powerdp.opf.objectives import OBJECTIVES, objective_unit


def test_registry_holds_cost_and_shedding():
    assert {"cost", "shedding"} <= set(OBJECTIVES)
    assert not OBJECTIVES["cost"].dp_eligible and OBJECTIVES["cost"].sensitivity is None
    assert OBJECTIVES["shedding"].dp_eligible
    s = OBJECTIVES["shedding"].gradient_sensitivity(0.01, "sound", "value")
    assert s.l1 == pytest.approx(0.02)
    with pytest.raises(ModelError, match="no gradient-sensitivity rule"):
        OBJECTIVES["cost"].gradient_sensitivity(0.01, "sound", "value")
    with pytest.raises(ModelError, match="unknown objective 'profit'"):
        objective_unit("profit")


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_units_build_models_with_their_terms(case14, name):
    unit = OBJECTIVES[name]
    prob = compile_model(build_model(case14, objective=name))
    kinds = {k[0] for k in prob.var_keys}
    cons = {k[0] for k in prob.con_keys}
    # the loads enter only the objective exactly when the model has the balance variables
    assert ("yp" in kinds) == unit.balance_variables == unit.dp_eligible
    assert ("balance_p" in cons) == (not unit.dp_eligible)


def test_dp_refusal_comes_from_the_unit_and_names_the_alternative():
    with pytest.raises(ConfigError, match="power-balance constraints.*use objective 'shedding'"):
        RunConfig(case="case14", algorithm="objl", objective="cost")
    with pytest.raises(ConfigError, match="objective = 'profit': choose one of cost, shedding"):
        RunConfig(case="case14", algorithm="exact", objective="profit")


def test_cli_choices_come_from_the_registry(capsys):
    from powerdp.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert "{" + ",".join(OBJECTIVES) + "}" in out.replace(" ", "")


# ----------------------------------------------------------------------------- cost+shedding (issue 12)


def test_cost_shedding_is_private_weighted_and_keeps_the_cost_data_free():
    unit = OBJECTIVES["cost+shedding"]
    assert unit.dp_eligible and unit.weighted and unit.data_free_terms and unit.unit == "$/h"
    assert not OBJECTIVES["shedding"].weighted and not OBJECTIVES["cost"].weighted


@pytest.mark.parametrize(
    ("adjacency", "l1", "l2"), [("value", 2.0, 2.0), ("bus", 4.0, 2.0 * 2.0**0.5)]
)
def test_cost_shedding_sensitivity_is_omega_times_the_shedding_rule(adjacency, l1, l2):
    unit = OBJECTIVES["cost+shedding"]
    for omega in (1.0, 3.5e6):
        s = unit.gradient_sensitivity(0.01, "sound", adjacency, weight=omega)
        assert s.l1 == pytest.approx(l1 * omega * 0.01, rel=1e-12)
        assert s.l2 == pytest.approx(l2 * omega * 0.01, rel=1e-12)
    with pytest.raises(ModelError, match="positive, finite ω"):
        unit.gradient_sensitivity(0.01, "sound", "value", weight=0.0)


def test_auto_weight_is_scaled_to_the_median_marginal_cost(case14):
    from powerdp.opf.objectives import SHEDDING_TOLERANCE, auto_shedding_weight, median_marginal_cost

    mc = median_marginal_cost(case14)
    # case14: c1 + 2 c2 (pmin + pmax)/2 = 3430.3, 5500, 4100, 4100, 4100 $/h per p.u.; the median is 4100
    assert mc == pytest.approx(4100.0)
    assert auto_shedding_weight(case14) == pytest.approx(case14.n_bus * mc / (2 * SHEDDING_TOLERANCE))


def test_centralized_cost_shedding_matches_the_cost_opf(case14):
    from powerdp.opf.centralized import solve_opf

    ref = solve_opf(case14, objective="cost")
    res = solve_opf(case14, objective="cost+shedding")
    assert res.success and res.shedding_weight == pytest.approx(14 * 4100.0 / 2e-3)
    # a soft balance can only be cheaper; with auto ω it is within 1e-3 (measured 4.8e-4) and sheds under 1e-3 p.u.
    assert res.generation_cost <= ref.objective + 1e-6
    assert res.generation_cost == pytest.approx(ref.objective, rel=1e-3)
    assert 0 < res.total_shedding_mw <= 1e-3 * case14.base_mva
    assert res.objective >= res.generation_cost
    # a small ω buys shedding instead of generation: the penalty must exceed the marginal costs
    cheap = solve_opf(case14, objective="cost+shedding", shedding_weight=1e3)
    assert cheap.total_shedding_mw > 50 and cheap.generation_cost < 0.8 * ref.objective
    # the generation cost of the cost OPF's own dispatch is its objective
    assert ref.generation_cost == pytest.approx(ref.objective, rel=1e-9) and ref.total_shedding_mw < 1e-5


def test_weight_errors_are_clear(case14):
    with pytest.raises(ConfigError, match=r"algorithm 'objl' is differentially private.*'cost\+shedding'"):
        RunConfig(case="case14", algorithm="objl", objective="cost")
    for bad in (0.0, -5.0, float("nan"), "heavy"):
        with pytest.raises(ConfigError, match="shedding_weight = .*positive number"):
            RunConfig(case="case14", algorithm="objl", objective="cost+shedding", shedding_weight=bad)
    for objective in ("cost", "shedding"):
        with pytest.raises(ConfigError, match=f"objective '{objective}' has no shedding penalty"):
            RunConfig(case="case14", algorithm="exact", objective=objective, shedding_weight=1e6)
        with pytest.raises(ModelError, match=f"the '{objective}' objective has no shedding penalty"):
            build_model(case14, objective=objective, shedding_weight=1e6)
    with pytest.raises(ModelError, match="positive, finite ω"):
        build_model(case14, objective="cost+shedding", shedding_weight=-1.0)
    with pytest.raises(ConfigError, match="linearize = 'private': output perturbation.*use linearize 'all'"):
        RunConfig(case="case14", algorithm="outl", objective="cost+shedding")
    with pytest.raises(ConfigError, match="linearize = 'some'"):
        RunConfig(case="case14", objective="cost+shedding", linearize="some")


def test_cli_shedding_weight_errors(capsys):
    from powerdp.cli import main

    assert main(["solve", "case14", "--shedding-weight", "1e6"]) == 2
    assert "--objective cost+shedding" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # refused at parse time, one line naming the option (issue 25)
        main(["run", "case14", "--algorithm", "exact", "--objective", "cost+shedding", "--shedding-weight", "-1"])
    assert exit_.value.code == 2
    assert "--shedding-weight: -1 is out of range: give a number > 0" in capsys.readouterr().err
    assert main(["run", "case14", "--objective", "cost", "--algorithm", "objl"]) == 2
    assert "cost+shedding" in capsys.readouterr().err


def test_cli_solve_reports_the_dispatch(capsys):
    from powerdp.cli import main

    assert main(["solve", "case14", "--objective", "cost+shedding", "--shedding-weight", "1e7"]) == 0
    out = capsys.readouterr().out
    assert "dispatch    generation cost 8063.9" in out and "shedding 0.279" in out and "ω 1e+07" in out
