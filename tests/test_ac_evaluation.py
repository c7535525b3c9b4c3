"""The operator's evaluation of a dispatch (powerdp.opf.ac_evaluation): the direct power flow, the restoration, the
figures, on the bundled case14 and PGLib's case118 (rated lines)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from powerdp.grid.loading import load_case
from powerdp.opf.ac_evaluation import EVALUATION_FIELDS, HOLD_WINDOW_MW, evaluate_ac, served_network
from powerdp.opf.centralized import solve_opf

from .shared_data import shared_case


@pytest.fixture(scope="module")
def case14_opf(case14):
    return solve_opf(case14, objective="cost", solver="ipopt")


def test_the_socs_reactive_excess_is_restored_with_p_held(case14, case14_opf):
    """case14's SOC optimum asks 1.6 MVAr beyond a generator's limit in the direct power flow; the restoration
    holds every P (within the window), re-sets voltages and reactive powers, and meets every limit."""
    ev = evaluate_ac(case14, case14_opf.dispatch)
    assert ev.direct["converged"] and 1.0 < ev.direct["max_q_violation_mvar"] < 3.0
    assert ev.ac_converged and ev.restoration == "voltage"
    assert ev.max_p_shift_mw <= HOLD_WINDOW_MW * 1.01
    assert ev.max_q_violation_mvar == 0.0 and ev.max_voltage_violation_pu == 0.0
    assert ev.max_line_loading_percent is None  # case14 has no ratings: no loading figure, not 0
    # the slack takes the AC losses the relaxation under-estimates: its cost moves, not much
    assert ev.cost == pytest.approx(case14_opf.generation_cost, rel=2e-3)
    assert 0.0 < ev.slack_mismatch_mw < 1.0
    out = ev.to_dict(shedding_mw=0.0, reference_cost=ev.cost)
    assert set(EVALUATION_FIELDS) <= set(out) and out["relative_cost_gap"] == 0.0
    assert out["restoration"] == "voltage" and out["direct"]["converged"]


def test_above_the_size_limit_the_figures_are_the_direct_power_flows(case14, case14_opf, monkeypatch):
    """Above RESTORATION_MAX_BUSES the restoration (an AC OPF: 86 s a dispatch on case1354_pegase, no end on
    case13659pegase) is not tried: ``skipped``, the direct power flow's figures; explicit ``restore`` overrides."""
    from powerdp.opf import ac_evaluation

    assert ac_evaluation.restores(case14) and ac_evaluation.RESTORATION_MAX_BUSES >= 1000  # SimBench's grids ≤ 571
    ev = evaluate_ac(case14, case14_opf.dispatch, restore=False)
    assert ev.restoration == "skipped" and ev.max_p_shift_mw is None and ev.ac_converged
    for field in ("cost", "max_voltage_violation_pu", "max_q_violation_mvar", "slack_mismatch_mw"):
        assert getattr(ev, field) == ev.direct[field]
    assert 1.0 < ev.max_q_violation_mvar < 3.0  # the direct point's reactive excess, not restored
    monkeypatch.setattr(ac_evaluation, "RESTORATION_MAX_BUSES", case14.n_bus - 1)
    assert evaluate_ac(case14, case14_opf.dispatch).restoration == "skipped"
    assert evaluate_ac(case14, case14_opf.dispatch, restore=True).restoration == "voltage"


def test_shed_load_is_disconnected(case14):
    shed = np.zeros(case14.n_bus)
    shed[3] = 10.0  # MW
    shed[4] = -5.0  # a surplus is not load: nothing is added
    served = served_network(case14, shed)
    assert served.pd[3] == pytest.approx(case14.pd[3] - 0.1)
    assert served.pd[4] == case14.pd[4]
    assert served_network(case14, None) is case14


def test_a_dispatch_no_restoration_can_hold_reports_the_direct_power_flow(case14, case14_opf):
    """Loads far beyond the generation: neither restoration converges; the figures are the direct power flow's, with
    its violations, and the evaluation says so."""
    heavy = dataclasses.replace(case14, pd=case14.pd * 4)
    ev = evaluate_ac(heavy, case14_opf.dispatch)
    assert ev.restoration == "failed" and ev.max_p_shift_mw is None
    assert ev.max_voltage_violation_pu == ev.direct["max_voltage_violation_pu"] > 0.05
    assert ev.slack_mismatch_mw > 500.0


@pytest.mark.slow
def test_an_overloaded_line_is_redispatched():
    """PGLib's case118: the SOC optimum loads a line to 111 % in AC; the restoration must move P (about 11 MW) to
    bring every rated branch within 100 %."""
    net = load_case(str(shared_case("pglib", "pglib_opf_case118_ieee.m", checks="the redispatch of an overloaded line")))
    opf = solve_opf(net, objective="cost", solver="ipopt")
    ev = evaluate_ac(net, opf.dispatch)
    assert ev.direct["max_line_loading_percent"] > 105.0
    assert ev.ac_converged and ev.restoration == "redispatch"
    assert ev.max_line_loading_percent <= 100.0 + 1e-6
    assert 1.0 < ev.max_p_shift_mw < 50.0
    assert ev.max_voltage_violation_pu == 0.0 and ev.max_q_violation_mvar == 0.0
