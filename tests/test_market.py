"""The zonal DC market by ADMM sharing (powerdp.apps.market.dc_market): the centralized optimum and prices, a sound
release sensitivity, resume and backends bit for bit, nothing but the releases crossing."""

import json

import numpy as np
import pandas as pd
import pytest

from powerdp.apps.market.dc_market import MarketZone, default_market_rho, market_problem, market_sensitivity, run_market
from powerdp.apps.power_flow.result import read_history
from powerdp.engine.sharing.coordinator import Contribution, SharingMessage
from powerdp.engine.sharing.hosts import build
from powerdp.grid.loading import load_case
from powerdp.grid.partition import partition
from powerdp.opf.dc import dc_model
from powerdp.runs.sharing_run import COORDINATOR_COLUMNS, COORDINATOR_KEYS, HISTORY_ORDER, SharingSettings
from powerdp.runs.views import read_summary

from .shared_data import shared_case


@pytest.fixture(scope="module")
def case30():
    net = load_case(shared_case("pglib", "pglib_opf_case30_ieee.m", checks="the zonal DC market on PGLib case30"))
    return net, partition(net, zones=3, method="modularity").zone_of_bus


def test_case118_three_areas_reaches_the_centralized_market():
    net = load_case("case118")
    zones = partition(net, "case118_3areas").zone_of_bus
    rho = 0.1 * default_market_rho(dc_model(net))
    res, model, central = run_market(net, zones, SharingSettings(rounds=200, rho=rho))
    ev = res.summary["evaluation"]
    assert abs(ev["cost"] - central.objective) / central.objective < 1e-8
    assert ev["max_price_error"] < 1e-4  # $/MWh
    assert ev["imbalance_mw"] < 1e-4
    assert central.objective == pytest.approx(125947.8814, rel=1e-8)


def test_congested_case30_prices_and_limits(case30):
    net, zones = case30
    res, model, central = run_market(net, zones, SharingSettings(rounds=300, rho=0.3 * default_market_rho(dc_model(net))))
    ev = res.summary["evaluation"]
    assert np.sum(np.abs(central.congestion) > 1e-6) == 1  # one line binds: prices differ by bus
    assert central.lmp.max() - central.lmp.min() > 1.0
    assert abs(ev["cost_gap"]) < 1e-8
    assert ev["max_price_error"] < 1e-6
    assert ev["max_line_violation"] < 1e-8


def test_release_sensitivity_is_sound(case30):
    """Moving one load of a zone by β moves its release by at most β‖[1; H_b]‖, whatever the public message."""
    net, zones = case30
    model = dc_model(net)
    problem, model, _ = market_problem(net, zones, model=model)
    rng = np.random.default_rng(1)
    beta = 0.05
    for spec in problem.specs:
        buses = np.flatnonzero(zones == spec.agent)
        bound = market_sensitivity(model, buses, beta)
        for _ in range(5):
            msg = SharingMessage(round=1, residual=rng.normal(size=model.n_mon + 1), dual=rng.normal(scale=3000, size=model.n_mon + 1),
                                 rho=500.0, tau=1000.0)
            prev = rng.normal(size=model.n_mon + 1)
            worst = 0.0
            for k in range(len(buses)):
                kw = dict(spec.kwargs)
                a, b = MarketZone(spec.agent, **kw), None
                kw["loads"] = kw["loads"] + beta * np.eye(len(buses))[k]
                b = MarketZone(spec.agent, **kw)
                a.released = a.own = b.released = b.own = prev  # the same public history
                ra, rb = a.local_step(msg)[0], b.local_step(msg)[0]
                worst = max(worst, float(np.linalg.norm(ra - rb)))
            assert worst <= bound * (1 + 1e-6)
            assert worst > 0.2 * bound  # the bound is not vacuous


def test_resume_and_process_backend_are_bit_identical(tmp_path, case30):
    net, zones = case30
    rho = 0.3 * default_market_rho(dc_model(net))
    private = dict(noise_multiplier=5.0, delta=1e-5)
    seen = []
    full, _, _ = run_market(net, zones, SharingSettings(rounds=30, rho=rho, **private), seed=7, observe=seen.append)
    assert all(isinstance(u, Contribution) for us in seen for u in us) and len(seen) == 31
    assert all(set(vars(u)) == {"round", "agent", "released"} for u in seen[-1])  # the release only
    part, _, _ = run_market(net, zones, SharingSettings(rounds=12, rho=rho, **private), seed=7, out=tmp_path / "run")
    files = sorted(p.name for p in (tmp_path / "run" / "checkpoint").iterdir())
    assert files and not any(f.endswith((".pkl", ".pickle")) for f in files)
    resumed, _, _ = run_market(net, zones, SharingSettings(rounds=30, rho=rho, backend="process", workers=2, **private), seed=7,
                               out=tmp_path / "run", resume=True)
    cols = ["primal_residual", "dual_residual", "eval_cost", "eval_imbalance_mw"]
    assert (resumed.history[cols].to_numpy() == full.history[cols].to_numpy()).all()
    assert np.array_equal(resumed.y, full.y)
    summary = json.loads((tmp_path / "run" / "coordinator_view" / "summary.json").read_text())["summary"]
    ledger = summary["coordinator_view"]["ledger"]["0"]
    assert ledger["steps"] == 30 and ledger["epsilon"] > 0
    # the files of the resumed run, both views joined, hold the uninterrupted run's rounds bit for bit
    back = read_history(tmp_path / "run", HISTORY_ORDER)
    assert list(back.columns) == list(full.history.columns)
    assert (back[cols].to_numpy() == full.history[cols].to_numpy()).all()



def test_run_of_the_mixed_layout_resumes_into_the_two_views(tmp_path, case30):
    """A sharing run directory of the previous version (one mixed history.csv and summary.json at the top level)
    resumes bit for bit, rewritten in the two views."""
    net, zones = case30
    rho = 0.3 * default_market_rho(dc_model(net))
    settings = SharingSettings(rounds=10, rho=rho, noise_multiplier=5.0)
    full, _, _ = run_market(net, zones, settings, seed=4)
    run_market(net, zones, SharingSettings(rounds=6, rho=rho, noise_multiplier=5.0), seed=4, out=tmp_path / "run")
    d = tmp_path / "run"
    history, summary = read_history(d, HISTORY_ORDER), read_summary(d)  # the old layout, made from the new one
    history.to_csv(d / "history.csv", index=False)
    (d / "summary.json").write_text(json.dumps(summary))
    for view in ("coordinator_view", "simulation_evaluation"):
        for f in (d / view).iterdir():
            f.unlink()
        (d / view).rmdir()
    resumed, _, _ = run_market(net, zones, settings, seed=4, out=d, resume=True)
    cols = ["primal_residual", "dual_residual", "epsilon_spent", "eval_cost", "eval_imbalance_mw"]
    assert (resumed.history[cols].to_numpy() == full.history[cols].to_numpy()).all()
    assert sorted(p.name for p in d.iterdir() if p.is_file()) == ["config.json", "inputs.json"]  # + the case file's record
    assert len(pd.read_csv(d / "coordinator_view" / "history.csv")) == 10
    assert (read_history(d, HISTORY_ORDER)[cols].to_numpy() == full.history[cols].to_numpy()).all()

#: what the market's evaluation computes from the zones' loads and dispatch (history columns, summary keys)
MARKET_EVAL_COLUMNS = {"eval_cost", "eval_imbalance_mw", "eval_max_line_violation", "eval_cost_gap", "eval_max_price_error",
                       "solves", "iterations", "agent_s"}
MARKET_EVAL_KEYS = {"evaluation", "cost", "imbalance_mw", "max_line_violation", "cost_gap", "max_price_error", "pg",
                    "true_release"}


def _keys(obj) -> set:
    if isinstance(obj, dict):
        return set(map(str, obj)) | set().union(*(_keys(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(_keys(v) for v in obj))
    return set()


def test_market_run_writes_two_views_never_mixed(tmp_path, case30):
    """coordinator_view/ holds only the allow-listed columns and keys (residuals, ρ, ε, its times, the prices, the
    ledger, σ); every value computed from the zones' loads and dispatch is in simulation_evaluation/ only."""
    net, zones = case30
    rho = 0.3 * default_market_rho(dc_model(net))
    res, _, _ = run_market(net, zones, SharingSettings(rounds=8, rho=rho, noise_multiplier=5.0), seed=2, out=tmp_path / "run")
    d = tmp_path / "run"
    assert sorted(p.name for p in d.iterdir() if p.is_file()) == ["config.json", "inputs.json"]  # nothing mixed at the top level (inputs.json: the case file and its hash)
    coord, ev = d / "coordinator_view", d / "simulation_evaluation"
    assert sorted(p.name for p in coord.iterdir()) == ["history.csv", "privacy_receipt.json", "summary.json"]
    hist = pd.read_csv(coord / "history.csv", float_precision="round_trip")
    assert list(hist.columns) == COORDINATOR_COLUMNS and not MARKET_EVAL_COLUMNS & set(hist.columns)
    np.testing.assert_array_equal(hist["primal_residual"].to_numpy(), res.history["primal_residual"].to_numpy())
    data = json.loads((coord / "summary.json").read_text())
    assert set(data) == {"view", "summary"} and set(data["summary"]) <= set(COORDINATOR_KEYS)
    assert not _keys(data) & MARKET_EVAL_KEYS
    assert data["summary"]["coordinator_view"]["noise"]["0"]["sigma"] > 0  # σ: public, saved with the run
    assert MARKET_EVAL_COLUMNS - {"eval_cost_gap", "eval_max_price_error"} <= set(pd.read_csv(ev / "history.csv", nrows=0).columns)
    ev_summary = json.loads((ev / "summary.json").read_text())["summary"]
    assert set(ev_summary) == {"evaluation"} and ev_summary["evaluation"]["cost"] == res.summary["evaluation"]["cost"]
    public = [d / "config.json", coord / "history.csv", coord / "summary.json", coord / "privacy_receipt.json"]
    for value in (res.summary["evaluation"]["cost"], res.history["eval_cost"].iloc[3], res.summary["evaluation"]["imbalance_mw"]):
        assert not any(repr(float(value)) in p.read_text() for p in public), value
    assert read_summary(d) == json.loads(json.dumps(res.summary, default=_plain))  # both views joined: the run's summary


def test_noise_comes_from_os_entropy_unless_seeded(case30):
    net, zones = case30
    problem, _, _ = market_problem(net, zones, noise_multiplier=1.0)
    a, b = build(problem.specs[0]), build(problem.specs[0])
    assert not a.rng.seeded and not np.array_equal(a.rng.raw(4), b.rng.raw(4))
    problem, _, _ = market_problem(net, zones, noise_multiplier=1.0, seed=3)
    a, b = build(problem.specs[0]), build(problem.specs[0])
    assert a.rng.seeded and np.array_equal(a.rng.raw(4), b.rng.raw(4))


def test_cost_sensitivity_is_sound(case30):
    """Moving one generator's linear cost by γ moves the zone's release by at most √(γ·max range/κ)."""
    from powerdp.apps.market.dc_market import cost_sensitivity

    net, zones = case30
    problem, model, _ = market_problem(net, zones, model=dc_model(net))
    rng = np.random.default_rng(5)
    gamma = 50.0
    for spec in problem.specs:
        kw = spec.kwargs
        if len(kw["c1"]) == 0:
            continue
        worst = bound = 0.0
        for _ in range(10):
            rho, tau = 200.0, 400.0
            msg = SharingMessage(round=1, residual=rng.normal(size=model.n_mon + 1), dual=rng.normal(scale=3000, size=model.n_mon + 1), rho=rho, tau=tau)
            prev = rng.normal(size=model.n_mon + 1)
            bound = cost_sensitivity(kw["pmin"], kw["pmax"], gamma, rho + tau)
            for g in range(len(kw["c1"])):
                kw2 = dict(kw, c1=kw["c1"] + gamma * np.eye(len(kw["c1"]))[g])
                a, b = MarketZone(spec.agent, **kw), MarketZone(spec.agent, **kw2)
                a.released = a.own = b.released = b.own = prev
                worst = max(worst, float(np.linalg.norm(a.local_step(msg)[0] - b.local_step(msg)[0])))
        assert worst <= bound * (1 + 1e-6)
        assert worst > 0.05 * bound or bound == 0  # measured 0.13: not vacuous (bound 0: no dispatchable range)


def test_a_failed_round_stops_with_its_history_and_exit_status_1(tmp_path, case30, monkeypatch):
    from powerdp.runs.sharing_run import RunStopped

    net, zones = case30
    original = MarketZone.local_step

    def broken(self, msg):
        value, it = original(self, msg)
        return (value * np.nan if msg.round == 3 and self.agent == 1 else value), it

    monkeypatch.setattr(MarketZone, "local_step", broken)
    with pytest.raises(RunStopped, match="round 3") as info:
        run_market(net, zones, SharingSettings(rounds=10, rho=300.0), out=tmp_path / "run")
    assert info.value.exit_status == 1
    assert "agent 1" in (tmp_path / "run" / "failure.txt").read_text()
    for view in ("coordinator_view", "simulation_evaluation"):  # header + rounds 1, 2, in each view
        assert len((tmp_path / "run" / view / "history.csv").read_text().splitlines()) == 3


def _plain(x):
    return x.tolist() if hasattr(x, "tolist") else x
