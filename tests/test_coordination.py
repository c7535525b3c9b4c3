"""A power-flow run's coordination (docs/algorithm.md, "Coordination" and "Stopping"): the defaults, the stopping rule
and its summary, bit-identity of the adaptive paths across backends and resume, and the zone without generators."""

import json

import numpy as np
import pandas as pd
import pytest

from powerdp.apps.power_flow.config import COORDINATION, FIXED_COORDINATION, RunConfig
from powerdp.apps.power_flow.config_file import read_config_json
from powerdp.apps.power_flow.plan import resolve_config
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.errors import ConfigError

COMPARE = ["objective", "feasibility", "dual_residual", "primal_relative", "dual_relative", "max_violation", "rho",
           "noise_magnitude", "epsilon_spent"]


def test_auto_resolves_to_a_runs_defaults_private_or_not_and_to_the_fixed_path_elsewhere():
    for objective in ("cost", "cost+shedding"):
        nonprivate = resolve_config(RunConfig(case="case14", algorithm="nonprivate", objective=objective), run_defaults=True)
        assert {k: getattr(nonprivate, k) for k in COORDINATION[False]} == {"rho_schedule": "balanced", "relaxation": 1.6,
                                                                               "acceleration": "anderson"}
    # the shedding objective has no prices (λ* = 0): its relative dual residual has no scale to balance
    unpriced = resolve_config(RunConfig(case="case14", algorithm="nonprivate", objective="shedding"), run_defaults=True)
    assert {k: getattr(unpriced, k) for k in FIXED_COORDINATION} == FIXED_COORDINATION
    private = resolve_config(RunConfig(case="case14", algorithm="objl"), run_defaults=True)
    assert {k: getattr(private, k) for k in FIXED_COORDINATION} == FIXED_COORDINATION
    # an application built on power flow (dispatch) that does not ask for a run's defaults keeps the fixed path
    other = resolve_config(RunConfig(case="case14", algorithm="nonprivate"))
    assert {k: getattr(other, k) for k in FIXED_COORDINATION} == FIXED_COORDINATION
    # an explicit choice is kept, private or not (every rule is post-processing of released values)
    chosen = resolve_config(RunConfig(case="case14", algorithm="objl", rho_schedule="balanced", acceleration="anderson"),
                            run_defaults=True)
    assert chosen.rho_schedule == "balanced" and chosen.acceleration == "anderson" and chosen.relaxation == 1.0


@pytest.mark.parametrize("field, value", [("rho_schedule", "fast"), ("relaxation", 2.0), ("relaxation", 0.0),
                                          ("acceleration", "nesterov"), ("tolerance", -1.0), ("proximal", -0.5)])
def test_bad_coordination_settings_name_the_field(field, value):
    with pytest.raises(ConfigError, match=field):
        RunConfig(case="case14", **{field: value})


def test_a_run_directory_from_before_the_stopping_rule_resumes_as_it_was_made(tmp_path):
    cfg = RunConfig(case="case14", algorithm="nonprivate").to_dict()
    for key in ("tolerance", "relaxation", "acceleration", "proximal"):
        cfg.pop(key)
    cfg["rho_schedule"] = "constant"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    old = read_config_json(tmp_path / "config.json")
    assert old.tolerance == 0.0 and old.relaxation == 1.0 and old.acceleration == "none" and old.rho_schedule == "constant"


def _run(out=None, resume=False, **kw):
    cfg = RunConfig(**{"case": "case14", "algorithm": "nonprivate", "objective": "cost+shedding", "rounds": 12,
                       "local_solver": "clarabel", "seed": 0, "tolerance": 0.0, "checkpoint_every": 3, **kw})
    return run_distributed(cfg, reference=False, out=out, resume=resume)


@pytest.mark.parametrize("kw", [{}, {"algorithm": "objl", "epsilon": 1.0, "rho_schedule": "balanced",
                                     "relaxation": 1.5, "acceleration": "anderson"}, {"rho_schedule": "spectral"}],
                         ids=["nonprivate defaults", "private, every option", "spectral"])
def test_the_adaptive_paths_are_bit_identical_across_backends_and_resume(tmp_path, kw):
    full = _run(**kw).history
    process = _run(backend="process", workers=2, **kw).history
    pd.testing.assert_frame_equal(full[COMPARE], process[COMPARE], check_exact=True)
    _run(tmp_path / "r", rounds=7, **kw)  # checkpointed at round 6: round 7 is run again on resume
    resumed = _run(tmp_path / "r", resume=True, **kw).history
    pd.testing.assert_frame_equal(full[COMPARE], resumed[COMPARE], check_exact=True)


def test_a_private_adaptive_run_crashed_before_its_first_periodic_checkpoint_resumes_bit_identically(tmp_path):
    """Issue 36's checkpoint before round 1 holds the adaptive coordinator's state (ρ per kind, Anderson's memory) as it
    stands after the initial projection; a crash in round 4 resumes from it, the zones replay their journaled releases
    and the whole history is that of the uninterrupted run."""
    kw = {"algorithm": "objl", "epsilon": 1.0, "rho_schedule": "balanced", "relaxation": 1.5, "acceleration": "anderson",
          "checkpoint_every": 50}
    full = _run(**kw).history

    def crash_in_round_4(row):
        if row["round"] == 4:
            raise KeyboardInterrupt  # not the stop handler: only the checkpoint of round 0 exists

    cfg = RunConfig(**{"case": "case14", "algorithm": "nonprivate", "objective": "cost+shedding", "rounds": 12,
                       "local_solver": "clarabel", "seed": 0, "tolerance": 0.0, **kw})
    with pytest.raises(KeyboardInterrupt):
        run_distributed(cfg, reference=False, out=tmp_path / "r", progress=crash_in_round_4)
    assert sorted(p.name for p in (tmp_path / "r" / "zones.private" / "zone_0" / "checkpoint").iterdir()) == [
        "releases.journal", "round_0.json", "round_0.npz"]
    resumed = _run(tmp_path / "r", resume=True, **kw)
    assert resumed.summary["resumed_from"] == 0
    # every value is the uninterrupted run's; epsilon_spent of the replayed rounds 1-3 is the ledger's (rounds 1-4
    # were charged when first released, the journal's replay charges nothing again)
    same = [c for c in COMPARE if c != "epsilon_spent"]
    pd.testing.assert_frame_equal(full[same], resumed.history[same], check_exact=True)
    assert (resumed.history["epsilon_spent"].iloc[3:].to_numpy() == full["epsilon_spent"].iloc[3:].to_numpy()).all()


def test_the_stopping_rule_stops_at_the_tolerance_and_says_so():
    res = run_distributed(RunConfig(case="case14", algorithm="exact", objective="cost", rounds=200, tolerance=1e-4,
                                    local_solver="clarabel"), reference=False)
    s, h = res.summary, res.history
    assert s["stopped"] == "tolerance" and s["rounds"] < 200 and s["stopping_tolerance"] == 1e-4
    last = h.iloc[-1]
    assert last["primal_relative"] <= 1e-4 and last["dual_relative"] <= 1e-4
    assert ((h["primal_relative"].iloc[:-1] > 1e-4) | (h["dual_relative"].iloc[:-1] > 1e-4)).all()  # not earlier
    assert s["final_primal_relative"] == last["primal_relative"]
    # the largest disagreement of a zone's copy of a tie-line flow from the consensus, in MW
    w = dict(zip(res.shared_keys, res.consensus))
    worst = max(abs(sol[k] - w[k]) for sol in res.zone_solutions.values() for k in sol if k in w and k[0] in ("pf", "pt"))
    assert s["consensus_gap_mw"] == pytest.approx(worst * 100.0, rel=1e-9)
    assert s["consensus_gap_mw"] < 1.0
    again = run_distributed(RunConfig(case="case14", algorithm="exact", objective="cost", rounds=30, tolerance=0.0,
                                      local_solver="clarabel"), reference=False)
    assert again.summary["stopped"] == "rounds" and again.summary["rounds"] == 30


def test_a_cost_and_shedding_zone_without_generators_reaches_the_optimum(tmp_path):
    """Zone 2 (buses 9, 10, 14) has no generator: it is linearized like the others (only its shedding) and the
    non-private run reaches the centralized optimum, as exact ADMM does."""
    part = tmp_path / "zones.csv"
    zone = {1: 0, 2: 0, 3: 1, 4: 1, 5: 0, 6: 1, 7: 1, 8: 1, 9: 2, 10: 2, 11: 1, 12: 1, 13: 1, 14: 2}
    part.write_text("bus,zone\n" + "".join(f"{b},{z}\n" for b, z in zone.items()))
    runs = {alg: run_distributed(RunConfig(case="case14", partition=str(part), zones=None, algorithm=alg,
                                           objective="cost+shedding", rounds=150, local_solver="clarabel"))
            for alg in ("nonprivate", "exact")}
    for alg, res in runs.items():
        assert abs(res.summary["relative_gap_to_centralized"]) < 2e-4, alg
    assert np.isclose(runs["nonprivate"].summary["final_objective"], runs["exact"].summary["final_objective"], rtol=2e-4)
