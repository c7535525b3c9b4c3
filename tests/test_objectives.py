"""Objectives as registered units: model terms, where the loads enter, sensitivity rule."""

import pytest

from powerdp.admm.config import RunConfig
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
