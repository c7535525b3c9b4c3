"""Issue 36, R1: a resumed run never releases a counted round again with fresh noise.

Each test stops a run with secret noise through the command line's own stop handler (SIGINT: the round in progress
ends, the checkpoint is written) or a crash (SIGKILL between checkpoints), resumes it, and counts what the coordinator
received (powerdp.studies.resume_audit): the releases that crossed, composed with the ledger's own per-step mechanism,
must not exceed the ledger's total, and the ledger's total must not exceed the claim. The old resume (the test-only
fault InjectedFaults(resume="fresh")) fails the same count.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.cli import main
from powerdp.files.private import private_tree_problems
from powerdp.privacy.faults import InjectedFaults
from powerdp.privacy.journal import JOURNAL_FILE, read_journal
from powerdp.privacy.verify import load_receipt, verify_receipt
from powerdp.studies.resume_audit import count_releases, interrupted_run, resume_channel, steps_crossed, stop_plan

pytestmark = pytest.mark.filterwarnings("ignore")


def _channel(start, plan, out, tmp_path, claim, draw_of=None):
    records = tmp_path / "records.txt"
    statuses = interrupted_run(start, plan, records)
    assert statuses[-1] == 0, statuses
    return resume_channel(records, load_receipt(out), claim, draw_of), statuses


def _power_flow(tmp_path, faults=None, algorithm="objl", rounds=20, **kw):
    out = tmp_path / "run"
    cfg = RunConfig(case="case14", zones=2, algorithm=algorithm, target_epsilon=0.5, rounds=rounds, checkpoint_every=rounds + 1,
                    faults=faults, **kw)

    def start(resume, observe):
        run_distributed(cfg, out=out, resume=resume, observe=observe, reference=False)

    return cfg, out, start


@pytest.mark.parametrize("algorithm, extra", [("objl", {}), ("objl", {"target_delta": 1e-5}), ("objg", {"target_delta": 1e-5}),
                                              ("outl", {}),
                                              ("totl", {"objective": "cost+shedding"}),
                                              ("totg", {"objective": "cost+shedding", "target_delta": 1e-5}),
                                              ("hrcl", {"objective": "cost+shedding"}), ("inps", {})])
def test_power_flow_interrupted_and_crashed_releases_no_round_twice(tmp_path, algorithm, extra):
    """Ctrl-C, a crash between checkpoints, Ctrl-C, a crash: every round crossed once; composed ≤ ledger ≤ claim."""
    cfg, out, start = _power_flow(tmp_path, algorithm=algorithm, **extra)
    res, statuses = _channel(start, stop_plan(4), out, tmp_path, cfg.target_epsilon)
    assert statuses[:4] == [130, -9, 130, -9]
    assert not res["failed"], res
    for z in res["zones"].values():
        assert z["rounds"] == cfg.rounds and z["repeated"] == 0 and z["recharged_steps"] == 0
        assert z["epsilon_crossed"] <= z["epsilon_ledger"] * (1 + 1e-9) <= cfg.target_epsilon * (1 + 1e-9)
        assert z["epsilon_crossed"] == pytest.approx(z["epsilon_ledger"], rel=1e-9)  # composed as the ledger composes
    # the zones' journals and streams stayed in their 0700/0600 folders; the receipt is re-accounted as the ledger
    assert private_tree_problems(out / "zones.private") == []
    assert all(r["supported"] and r["agrees"] for r in verify_receipt(load_receipt(out)))


def test_checkpoints_by_time_journal_and_checkpoint_before_round_1_too(tmp_path):
    """The default checkpoints come by time (checkpoint_every None, issue 38): the zones still journal every release
    and a checkpoint comes before round 1, so a crash before the first timed checkpoint, Ctrl-C and another crash
    resume with no round released twice."""
    out = tmp_path / "run"
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", target_epsilon=0.5, rounds=12)
    assert cfg.checkpoint_every is None

    def start(resume, observe):
        run_distributed(cfg, out=out, resume=resume, observe=observe, reference=False)

    res, statuses = _channel(start, [("kill", 2), *stop_plan(2)], out, tmp_path, cfg.target_epsilon)
    assert statuses[:3] == [-9, 130, -9]  # the crash comes before any timed checkpoint
    assert not res["failed"], res
    for z in res["zones"].values():
        assert z["rounds"] == cfg.rounds and z["repeated"] == 0 and z["recharged_steps"] == 0
        assert z["epsilon_crossed"] <= z["epsilon_ledger"] * (1 + 1e-9) <= cfg.target_epsilon * (1 + 1e-9)
    assert sorted(p.parent.parent.name for p in (out / "zones.private").glob(f"zone_*/checkpoint/{JOURNAL_FILE}")) == [
        "zone_0", "zone_1"]


@pytest.mark.parametrize("extra", [{}, {"target_delta": 1e-5}])
def test_the_old_resume_sends_fresh_copies_the_ledger_does_not_count(tmp_path, extra):
    """InjectedFaults(resume="fresh"): the crash's repeated rounds go out with fresh noise, uncounted: the channel fails
    (Laplace at δ = 0, its pure ε summed, and at δ > 0, composed with the ledger's PLD)."""
    cfg, out, start = _power_flow(tmp_path, faults=InjectedFaults(resume="fresh"), **extra)
    res, _ = _channel(start, stop_plan(2), out, tmp_path, cfg.target_epsilon)
    assert res["failed"]
    assert all(z["repeated"] >= 1 and z["epsilon_crossed"] > z["epsilon_ledger"] for z in res["zones"].values())


def test_a_replay_that_diverges_is_charged_again_and_says_so(tmp_path):
    """A resumed zone whose replay cannot be bit-identical (here: its checkpoint lost its stream) re-keys, releases the
    repeated rounds with fresh noise and charges them again: the ledger covers what crossed (above the claim, and the
    receipt says how many steps were charged twice); never a fresh copy counted once."""
    cfg, out, start = _power_flow(tmp_path, rounds=8)
    cfg = cfg.replace(checkpoint_every=3)
    records = tmp_path / "records.txt"

    def crash_after_round_5(row):
        if row["round"] == 5:
            raise KeyboardInterrupt  # not the stop handler: a crash, the checkpoint of round 3 is the last

    def observe(updates):
        with open(records, "a") as fh:
            for u in updates:
                fh.write(f"{u.zone} {u.round} {np.asarray(u.released).tobytes().hex()[:64]}\n")

    with pytest.raises(KeyboardInterrupt):
        run_distributed(cfg, out=out, progress=crash_after_round_5, observe=observe, reference=False)
    journal = out / "zones.private" / "zone_0" / "checkpoint" / JOURNAL_FILE
    assert [e["round"] for e in read_journal(journal)] == [4, 5]  # released after the checkpoint, fsynced before
    for z in (0, 1):
        stem = out / "zones.private" / f"zone_{z}" / "checkpoint" / "round_3.json"
        state = json.loads(stem.read_text())
        state["rng"] = None  # the stream lost: the replay cannot repeat the noise
        stem.write_text(json.dumps(state))
    res = run_distributed(cfg, out=out, resume=True, observe=observe, reference=False)
    receipt = load_receipt(out)
    channel = resume_channel(records, receipt, None)
    assert not channel["failed"]
    for unit in receipt["units"]:
        assert unit["recharged_steps"] == 2 and unit["ledger"]["steps"] == 10
        assert unit["ledger"]["epsilon"] == pytest.approx(0.5 * 10 / 8)
    assert all(z["repeated"] == 2 for z in channel["zones"].values())
    assert res.summary["epsilon_total"][0] == pytest.approx(0.625)
    assert all(r["supported"] for r in verify_receipt(receipt))


def test_learning_interrupted_and_crashed_releases_no_round_twice(tmp_path):
    from powerdp.apps.learning import LearnConfig, run_federated

    out = tmp_path / "run"
    cfg = LearnConfig(dataset="digits", clients=3, algorithm="objl", target_epsilon=1.0, rounds=16, checkpoint_every=17)

    def start(resume, observe):
        warnings.filterwarnings("ignore")
        run_federated(cfg, out=out, resume=resume, observe=observe, reference=False)

    res, statuses = _channel(start, stop_plan(4), out, tmp_path, 1.0)
    assert statuses[:4] == [130, -9, 130, -9] and not res["failed"], res
    assert all(z["rounds"] == 16 and z["repeated"] == 0 for z in res["zones"].values())
    fault = tmp_path / "fault"
    fault.mkdir()
    old = cfg.replace(faults=InjectedFaults(resume="fresh"))
    out2 = fault / "run"

    def start_old(resume, observe):
        warnings.filterwarnings("ignore")
        run_federated(old, out=out2, resume=resume, observe=observe, reference=False)

    res, _ = _channel(start_old, stop_plan(2), out2, fault, 1.0)
    assert res["failed"]


def _day(tmp_path, periods=4):
    from powerdp.grid.profiles import load_horizon

    from .test_dispatch import day_profile

    return load_horizon("case14", periods=periods, profiles=day_profile(tmp_path / "day.csv", periods))


def _dispatch(tmp_path, horizon, algorithm="objl", faults=None, max_rounds=5, **kw):
    from powerdp.apps.dispatch.config import DispatchConfig
    from powerdp.apps.dispatch.runner import run_dispatch

    out = tmp_path / f"day_{algorithm}"
    cfg = DispatchConfig(source="case14", periods=horizon.pd.shape[0], zones=3, algorithm=algorithm, target_epsilon=1.0,
                         max_rounds=max_rounds, tolerance=0.0, **kw)

    def start(resume, observe):
        warnings.filterwarnings("ignore")
        run_dispatch(cfg if faults is None else cfg, horizon, out=out, resume=resume, observe=observe, reference=False)

    return cfg, out, start


@pytest.mark.parametrize("algorithm, extra", [("objl", {}), ("inpl", {}), ("inpg", {"target_delta": 1e-5}), ("totl", {}),
                                              ("totg", {"target_delta": 1e-5}), ("inps", {}), ("tots", {"target_delta": 1e-5})])
def test_dispatch_stopped_in_its_periods_releases_no_round_twice(tmp_path, algorithm, extra):
    """Ctrl-C (the documented way to stop a day) three times, each in the middle of a period: the zones replay the
    period's rounds bit for bit from their per-period checkpoints, so nothing crossed twice (the issue measured 92
    releases for 80 charged with one Ctrl-C, and 7 draws for 4 with three)."""
    horizon = _day(tmp_path)
    cfg, out, start = _dispatch(tmp_path, horizon, algorithm, **extra)
    by_period = lambda r: (r - 1) // cfg.max_rounds  # noqa: E731 - every period runs its max_rounds (tolerance 0)
    res, statuses = _channel(start, [("int", 3)] * 3, out, tmp_path, 1.0, by_period)
    assert statuses == [130, 130, 130, 0] and not res["failed"], res
    assert all(z["rounds"] == 20 and z["repeated"] == 0 for z in res["zones"].values())
    assert all(z["epsilon_crossed"] == pytest.approx(z["epsilon_ledger"], rel=1e-9) for z in res["zones"].values())
    assert all(r["supported"] and r["agrees"] for r in verify_receipt(load_receipt(out)))


@pytest.mark.slow
def test_a_day_stopped_ten_times(tmp_path):
    horizon = _day(tmp_path)
    cfg, out, start = _dispatch(tmp_path, horizon, "objl")
    res, statuses = _channel(start, [("int", 2)] * 10, out, tmp_path, 1.0)
    assert statuses.count(130) == 10 and not res["failed"], res
    assert all(z["repeated"] == 0 and z["epsilon_ledger"] <= 1.0 + 1e-9 for z in res["zones"].values())


def test_the_old_resume_of_a_day_sends_fresh_copies(tmp_path):
    from powerdp.apps.dispatch.config import DispatchConfig  # noqa: F401 - the fault reaches the zones via run_config

    horizon = _day(tmp_path)
    # 40 rounds a period: the Ctrl-C asked after round 3 lands a few fast rounds later, mid-period (with 5 a period
    # it could land on the period's end, and the resume would then repeat nothing for the fault to show)
    cfg, out, _ = _dispatch(tmp_path, horizon, "objl", max_rounds=40)
    from powerdp.apps.dispatch import runner

    real = runner.resolve_config

    def with_fault(c, net):  # the day's zones get the test-only old resume
        return real(c, net).replace(faults=InjectedFaults(resume="fresh"))

    def start(resume, observe):
        warnings.filterwarnings("ignore")
        runner.resolve_config = with_fault
        runner.run_dispatch(cfg, horizon, out=out, resume=resume, observe=observe, reference=False)

    res, statuses = _channel(start, [("int", 3)] * 2, out, tmp_path, 1.0)
    assert res["failed"] and all(z["repeated"] > 0 for z in res["zones"].values()), (statuses, res)


def test_a_fresh_copy_of_any_round_of_a_period_is_its_whole_draw_again(tmp_path):
    """Input and totals perturbation draw once a period; the period's rounds post-process that draw. A fresh-noise copy
    of a round is then the whole draw again, not the round's share of the steps. Here 4 periods of 4 rounds, one
    draw each at ε 0.25; period 0's last two rounds crossed twice more, each time with a fresh draw: 6 draws crossed.
    A ledger that charged 5 of them fails the channel, one that charged all 6 passes. (Found by this stop's red team:
    with every round an equal share, 4 × 20/16 = 5 steps, the first ledger passed.)"""
    records = tmp_path / "records.txt"
    lines = [f"0 {r} a{r}" for r in range(1, 17)] + [f"0 {r} {c}{r}" for r in (3, 4) for c in "bc"]
    records.write_text("\n".join(lines) + "\n")

    def receipt(steps, recharged):
        return {"units": [{"id": 0, "recharged_steps": recharged, "ledger": {"steps": steps, "delta": 0.0, "epsilon": 0.25 * steps},
                           "releases": [{"mechanism": "discrete_laplace", "epsilon": 0.25, "coordinates": 1, "count": steps}]}]}

    by_period = lambda r: (r - 1) // 4  # noqa: E731
    assert steps_crossed(count_releases(records)[0], 4.0, by_period) == 6.0
    assert resume_channel(records, receipt(5, 1), None, by_period)["failed"]
    assert not resume_channel(records, receipt(6, 2), None, by_period)["failed"]
    # without the periods: one draw for every round, 3 draws of it crossed at most: pessimistic, 12 steps
    assert steps_crossed(count_releases(records)[0], 4.0) == 12.0
    # a round its own draw (objective perturbation: a step a round), as before: each release its round's share
    assert steps_crossed(count_releases(records)[0], 16.0) == 20.0


def test_powerdp_audit_has_a_resume_channel_that_the_old_resume_fails(capsys):
    # 30 rounds: with the active set a case14 round takes ~6 ms, and a 5-round run could end before its crash landed
    argv = ["audit", "case14", "--algorithm", "objl", "--target-epsilon", "1", "--runs", "20", "--interrupts", "2", "--rounds", "30"]
    assert main(argv) == 0
    assert "channel       resume, zone 0" in capsys.readouterr().out
    assert main(argv, faults=InjectedFaults(resume="fresh")) == 3
    assert "resume channel" in capsys.readouterr().err


def test_the_stops_land_on_their_round_however_fast_the_run(tmp_path):
    """The audit's default run is 5 rounds of case14 (a few ms each): each attempt stops itself on its planned round,
    so the Ctrl-C and the crash both land before the run ends and the crash's rounds are replayed (it raced the run's
    end when the parent polled the records: statuses [0, 1, 1] or [130, 0, 1], and the channel saw no resume)."""
    for i in range(3):
        (tmp_path / str(i)).mkdir()
        cfg, out, start = _power_flow(tmp_path / str(i), rounds=5)
        records = tmp_path / str(i) / "records.txt"
        assert interrupted_run(start, stop_plan(2), records) == [130, -9, 0]
        lines = [line.split() for line in records.read_text().splitlines()]
        # round 1 (then Ctrl-C), rounds 2-3 (then the crash), rounds 2-5 replayed from the checkpoint of round 1
        assert [int(r) for z, r, _ in lines if z == "0" and int(r) > 0] == [1, 2, 3, 2, 3, 4, 5]
        res = resume_channel(records, load_receipt(out), cfg.target_epsilon)
        assert not res["failed"] and all(z["repeated"] == 0 for z in res["zones"].values()), res


def test_a_finished_run_without_its_evaluation_resumes(tmp_path):
    """A run without the evaluation writes NaN objectives, which its checkpoint keeps as JSON null: resuming it once
    it is done read them back as None and failed (float(None)); they are NaN again."""
    out = tmp_path / "run"
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", target_epsilon=0.5, rounds=3, checkpoint_every=1,
                    evaluate=False)
    first = run_distributed(cfg, out=out, reference=False)
    again = run_distributed(cfg, out=out, resume=True, reference=False)
    assert len(again.history) == len(first.history) == 3
    assert np.isnan(again.history["objective"]).all()


def test_the_resume_channel_says_when_an_attempt_did_not_stop_as_planned(monkeypatch):
    """An attempt that failed (or ended before its stop) leaves the channel without a verdict: the audit fails and
    names the exit statuses, never a pass on a run that was not resumed."""
    import powerdp.studies.resume_audit as resume_audit

    monkeypatch.setattr(resume_audit, "interrupted_run", lambda start, plan, records: [130, 0, 1])
    res = resume_audit.audit_resume(RunConfig(case="case14", zones=2, algorithm="objl", target_epsilon=1.0, rounds=5), 2)
    assert res["failed"] and "[130, 0, 1], not the planned [130, -9, 0]" in res["problem"]
