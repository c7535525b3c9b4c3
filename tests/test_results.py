"""A run directory's two views (powerdp/apps/power_flow/result.py, docs/privacy.md "What a deployment publishes"):
the coordinator's view holds nothing outside its allow-list, every load-derived value lives only in the
simulation's evaluation, no file mixes them, and run directories of the previous layout still load and resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.result import (
    COORDINATOR_COLUMNS,
    COORDINATOR_KEYS,
    HISTORY_COLUMNS,
    RunResult,
    read_history,
)
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.files.checkpoint import load_state, save_state
from powerdp.runs.views import COORDINATOR_VIEW, EVALUATION_VIEW, read_summary

# every quantity computed from the loads or from ξ (SPEC §7, docs/privacy.md): history columns, summary keys, files
LOAD_DERIVED_COLUMNS = {"objective", "noise_magnitude", "max_violation", "solver_iterations", "solves", "solver_s",
                        "load_mw", "load_mvar", "shed_mw", "shed_mvar", "pd_mw", "qd_mvar", "p_mw", "cost_per_h"}
LOAD_DERIVED_KEYS = {"final_objective", "final_cost", "total_shedding_mw", "centralized_objective", "gap_to_centralized",
                     "relative_gap_to_centralized", "max_violation", "final_max_violation", "solver_s", "ipopt_s", "solves",
                     "solver_iterations", "ac_check", "setup_times", "init_s", "host_peak_rss_mb", "reference_s"}
LOAD_DERIVED_FILES = {"generators.csv", "buses.csv", "branches.csv", "zones.csv", "pandapower.json"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A seeded case14 run with evaluation, the centralized reference and the AC check (every evaluation key)."""
    d = tmp_path_factory.mktemp("views") / "run"
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", objective="cost+shedding", epsilon=1.0, rounds=3, seed=2)
    res = run_distributed(cfg, out=d, ac_check=True)
    return d, res


def _json_keys(obj) -> set[str]:
    if isinstance(obj, dict):
        return set(map(str, obj)) | set().union(*(_json_keys(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(_json_keys(v) for v in obj))
    return set()


def _load_derived_names_in(path: Path) -> set[str]:
    """The load-derived column names of a CSV file, or keys (at any depth) of a JSON file (where ``objective`` is
    the setting's name, not a value)."""
    if path.suffix == ".csv":
        return set(pd.read_csv(path, nrows=0).columns) & LOAD_DERIVED_COLUMNS
    if path.suffix == ".json":
        return _json_keys(json.loads(path.read_text())) & LOAD_DERIVED_KEYS
    return set()


def test_coordinator_view_holds_only_its_allow_list(finished):
    d, res = finished
    coord = d / COORDINATOR_VIEW
    assert sorted(p.name for p in coord.iterdir()) == ["consensus.csv", "history.csv", "privacy_receipt.json", "summary.json"]
    hist = pd.read_csv(coord / "history.csv", float_precision="round_trip")
    assert list(hist.columns) == COORDINATOR_COLUMNS
    np.testing.assert_array_equal(hist["feasibility"].to_numpy(), res.history["feasibility"].to_numpy())
    data = json.loads((coord / "summary.json").read_text())
    assert set(data) == {"view", "summary", "privacy"}
    assert set(data["summary"]) <= set(COORDINATOR_KEYS)
    assert set(data["summary"]) == set(res.summary) & set(COORDINATOR_KEYS)  # nothing of the allow-list lost
    report_keys = {"zone", "mechanism", "noise_source", "private", "steps", "target_delta",
                                                 "per_step", "basic", "theorem_4_9", "exact", "tight", "headline", "history",
                   "recharged_steps", "releases", "resume"}
    for zone, report in data["privacy"].items():  # the ledger: data-independent
        assert set(report) <= report_keys, zone
    assert list(pd.read_csv(coord / "consensus.csv", nrows=0).columns) == ["variable", "index", "value"]


def test_every_load_derived_value_lives_only_in_the_simulation_evaluation(finished):
    d, res = finished
    s = res.summary
    assert s["final_objective"] is not None and s["centralized_objective"] is not None and s["ac_check"]
    evaluation = d / EVALUATION_VIEW
    assert {"history.csv", "summary.json", *LOAD_DERIVED_FILES - {"pandapower.json"}} <= {p.name for p in evaluation.iterdir()}
    ev_keys = set(json.loads((evaluation / "summary.json").read_text())["summary"])
    assert LOAD_DERIVED_KEYS <= ev_keys and not (ev_keys & set(COORDINATOR_KEYS))
    assert LOAD_DERIVED_COLUMNS & set(pd.read_csv(evaluation / "history.csv", nrows=0).columns) == {
        "objective", "noise_magnitude", "max_violation", "solver_iterations", "solves", "solver_s"}
    # outside simulation_evaluation/ (and the zones' and checkpoint's private folders) no file holds any of them
    public = [p for p in d.rglob("*") if p.is_file() and p.parts[len(d.parts)] not in (EVALUATION_VIEW, "zones.private", "checkpoint")]
    assert {str(p.relative_to(d)) for p in public} >= {"config.json", "partition.csv", "inputs.json"}
    for p in public:
        assert p.name not in LOAD_DERIVED_FILES, p
        assert not _load_derived_names_in(p), p
    # and no value either: the final objective's and the centralized reference's digits are in no public file
    for value in (s["final_objective"], s["centralized_objective"], s["total_shedding_mw"]):
        text = repr(float(value))
        assert not any(text in p.read_text() for p in public), text
        assert text in (evaluation / "summary.json").read_text()


def test_json_summary_is_the_simulation_record_with_both_views(finished, tmp_path):
    """read_summary joins the two views into the summary a run returns (and --json writes)."""
    d, res = finished
    back = read_summary(d)
    assert set(back) == set(res.summary)
    assert back["final_objective"] == res.summary["final_objective"] and back["noise_source"] == "seeded"


def _write_previous_layout(d: Path, res: RunResult) -> None:
    """The run directory as the previous version wrote it: mixed top-level history, summary, consensus and tables
    beside the two view folders (which held only history.csv and summary.json)."""
    res.history.to_csv(d / "history.csv", index=False)
    (d / "summary.json").write_text(json.dumps({"summary": json.loads(json.dumps(res.summary, default=float)),
                                                "privacy": {str(k): v for k, v in res.privacy.items()}}, default=float))
    shutil.move(d / COORDINATOR_VIEW / "consensus.csv", d / "consensus.csv")
    for name in ("generators.csv", "buses.csv", "branches.csv", "zones.csv"):
        if (d / EVALUATION_VIEW / name).exists():
            shutil.move(d / EVALUATION_VIEW / name, d / name)


def test_a_run_directory_of_the_previous_layout_still_loads(finished, tmp_path):
    d0, res = finished
    d = tmp_path / "old"
    shutil.copytree(d0, d)
    _write_previous_layout(d, res)
    back = RunResult.load(d)
    pd.testing.assert_frame_equal(back.history, res.history, check_dtype=False, check_exact=True)
    np.testing.assert_array_equal(back.consensus, res.consensus)
    assert back.summary["final_objective"] == res.summary["final_objective"]
    pd.testing.assert_frame_equal(back.buses, res.buses, check_dtype=False)
    # saving it again writes the two views and drops the mixed files
    back.save(d)
    for name in ("history.csv", "summary.json", "consensus.csv", "buses.csv", "generators.csv"):
        assert not (d / name).exists(), name
    again = RunResult.load(d)
    pd.testing.assert_frame_equal(again.history, res.history, check_dtype=False, check_exact=True)
    pd.testing.assert_frame_equal(again.buses, res.buses, check_dtype=False)


def test_what_a_deployment_publishes_loads_on_its_own(finished, tmp_path):
    """config.json + coordinator_view/ alone: the coordinator's columns and keys, NaN evaluation, no tables."""
    d0, res = finished
    d = tmp_path / "published"
    d.mkdir()
    shutil.copy(d0 / "config.json", d / "config.json")
    shutil.copytree(d0 / COORDINATOR_VIEW, d / COORDINATOR_VIEW)
    back = RunResult.load(d)
    assert list(back.history.columns) == HISTORY_COLUMNS
    np.testing.assert_array_equal(back.history["dual_residual"].to_numpy(), res.history["dual_residual"].to_numpy())
    assert back.history["objective"].isna().all() and back.tables is None
    assert set(back.summary) <= set(COORDINATOR_KEYS) and "final_objective" not in back.summary


def test_resuming_a_previous_layout_run_is_bit_identical_and_rewrites_it(tmp_path):
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", epsilon=0.5, rounds=6, checkpoint_every=2, seed=0)
    full = run_distributed(cfg, reference=False)
    d = tmp_path / "r"
    part = run_distributed(cfg.replace(rounds=4), out=d, reference=False)
    # the checkpoint keeps the views apart: the coordinator's state holds only its own history columns
    state = load_state(d / "checkpoint" / "state")
    assert {k for row in state["history"] for k in row} == set(COORDINATOR_COLUMNS)
    assert {k for row in load_state(d / "checkpoint" / "evaluation")["history"] for k in row} == (
        {"round"} | set(HISTORY_COLUMNS) - set(COORDINATOR_COLUMNS))
    # as the previous version wrote it: whole rows in the state, no evaluation file
    state["history"] = [{k: float(v) for k, v in row.items()} for row in part.history.iloc[:4].to_dict("records")]
    save_state(d / "checkpoint" / "state", state)
    for f in (d / "checkpoint").glob("evaluation.*"):
        f.unlink()
    _write_previous_layout(d, part)
    run_distributed(cfg, out=d, resume=True, reference=False)
    assert not (d / "history.csv").exists() and not (d / "summary.json").exists() and not (d / "buses.csv").exists()
    cols = [c for c in HISTORY_COLUMNS if c not in ("wall_s", "solver_s")]
    pd.testing.assert_frame_equal(read_history(d)[cols], full.history[cols], check_dtype=False, check_exact=True)
    assert RunResult.load(d).summary["rounds"] == 6


def test_history_of_a_run_killed_between_its_two_appends(finished, tmp_path):
    """The coordinator's line of the last round is written, the evaluation's not: that round reads with NaN."""
    d = tmp_path / "killed"
    shutil.copytree(finished[0], d)
    ev = d / EVALUATION_VIEW / "history.csv"
    ev.write_text("".join(ev.read_text().splitlines(keepends=True)[:-1]))
    h = read_history(d)
    assert h["round"].tolist() == [1, 2, 3] and h["objective"].isna().tolist() == [False, False, True]
    assert h["feasibility"].notna().all()


def test_overwrite_removes_a_previous_layout_run_but_not_a_users_file_of_the_same_name(tmp_path):
    from powerdp.runs.directory import prepare_run_dir

    old, new = tmp_path / "old", tmp_path / "new"
    for d, names in ((old, ["config.json", "history.csv", "summary.json", "buses.csv", "zones.csv", "pandapower.json"]),
                     (new, ["config.json", "zones.csv", "pandapower.json", "coordinator_view/history.csv"])):
        for name in names:
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_text("x\n")
    prepare_run_dir(old, overwrite=True)
    assert sorted(p.name for p in old.iterdir()) == []  # every file was the old run's
    prepare_run_dir(new, overwrite=True)
    assert sorted(p.name for p in new.iterdir()) == ["pandapower.json", "zones.csv"]  # a partition file, say: kept
