"""The ``powerdp`` command line, run in-process through :func:`powerdp.cli.main`."""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from powerdp.apps.power_flow.result import read_history
from powerdp.cli import build_parser, main
from powerdp.runs.views import read_summary

CASE14_SOC = 8075.12


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("powerdp has no subcommands")


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"]


# --------------------------------------------------------------------- solve


def test_solve_writes_json(tmp_path, capsys):
    out = tmp_path / "sub" / "case14.json"
    assert main(["solve", "case14", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    for key in ("case", "objective", "status", "iterations", "solve_time_s", "n_buses", "n_branches", "n_gens"):
        assert key in data, key
    assert data["case"] == "case14"
    assert data["objective"] == pytest.approx(CASE14_SOC, abs=0.01)
    assert data["status"] == 0
    assert data["iterations"] > 0 and data["solve_time_s"] > 0
    assert (data["n_buses"], data["n_branches"], data["n_gens"]) == (14, 20, 5)
    stdout = capsys.readouterr().out
    assert "8075.12" in stdout
    assert "Solve_Succeeded" in stdout


def test_solve_shedding_and_solution_tables(tmp_path, capsys):
    assert main(["solve", "case14", "--objective", "shedding", "--flows", "expressions", "--solution", str(tmp_path)]) == 0
    assert "shedding" in capsys.readouterr().out
    for name in ("buses.csv", "generators.csv", "branches.csv"):
        with open(tmp_path / name, newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert rows, name
    with open(tmp_path / "branches.csv", newline="") as fh:
        assert {"p_from_mw", "q_from_mvar", "p_to_mw", "q_to_mvar", "loading_percent"} <= set(next(csv.DictReader(fh)))


def test_solve_case_with_hvdc_line_writes_its_table(hvdc_case, tmp_path, capsys):
    out = tmp_path / "sol"
    assert main(["solve", str(hvdc_case), "--solution", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "1 HVDC lines" in stdout and "objective   cost = 5928.84" in stdout
    with open(out / "dclines.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 1 and (rows[0]["f_bus"], rows[0]["t_bus"]) == ("1", "4")
    assert float(rows[0]["p_dc_fr"]) == pytest.approx(0.8, abs=1e-6)
    # a case without HVDC lines writes no dclines.csv
    assert main(["solve", "case14", "-q", "--solution", str(tmp_path / "c14")]) == 0
    assert not (tmp_path / "c14" / "dclines.csv").exists()


def test_solve_quiet_prints_nothing(capsys):
    assert main(["-q", "solve", "case14"]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("case", ["no_such_case", "missing/dir/case.m"])
def test_solve_unknown_case_is_a_clear_error(case, capsys):
    assert main(["solve", case]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("powerdp: error: ")
    assert case in captured.err
    assert "Traceback" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_solve_bad_profile_is_a_clear_error(capsys):
    assert main(["solve", "case14", "--profile", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no Ipopt profile 'nope'" in err and "Traceback" not in err


def test_solve_bad_option_value_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["solve", "case14", "--objective", "welfare"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


# ----------------------------------------------------------------- partition


def test_partition_writes_csv_and_prints_summary(tmp_path, capsys):
    out = tmp_path / "zones.csv"
    assert main(["partition", "case14", "--zones", "3", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "3 zones" in stdout
    for column in ("zone", "buses", "generators", "load_mw", "tie_lines", "shared_vars_expressions"):
        assert column in stdout
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["bus", "zone"]
    assert len(rows) == 1 + 14
    assert {int(r[0]) for r in rows[1:]} == set(range(1, 15))
    assert len({r[1] for r in rows[1:]}) == 3
    assert str(out) in stdout
    # the file reads back as the same partition
    assert main(["partition", "case14", "--from", str(out)]) == 0
    assert "3 zones" in capsys.readouterr().out


def test_partition_from_bundled_file(capsys):
    assert main(["partition", "case118", "--from", "case118_3areas"]) == 0
    out = capsys.readouterr().out
    assert "3 zones" in out and "8 tie-lines" in out


def _disconnected_case14_partition(tmp_path) -> Path:
    path = tmp_path / "native.csv"  # zone A = buses 1 and 8, which no branch joins
    path.write_text("bus,zone\n" + "".join(f"{b},{'A' if b in (1, 8) else 'B' if b <= 5 else 'C'}\n" for b in range(1, 15)))
    return path


def test_disconnected_given_zones_accepted_with_a_note(tmp_path, capsys):
    path = _disconnected_case14_partition(tmp_path)
    assert main(["partition", "case14", "--from", str(path)]) == 0
    captured = capsys.readouterr()
    assert "1 of 3 zones is not connected: zone 'A' (2 pieces)" in captured.err
    assert "3 zones" in captured.out
    assert main(["partition", "case14", "--from", str(path), "--no-allow-disconnected"]) == 2
    assert "zone 'A' is not connected" in capsys.readouterr().err
    out = tmp_path / "run"
    args = ["run", "case14", "--partition", str(path), "--algorithm", "nonprivate", "--rounds", "3", "--no-reference"]
    assert main([*args, "--out", str(out), "-q"]) == 0
    assert json.loads((out / "config.json").read_text())["allow_disconnected"] is True
    assert main([*args, "--no-allow-disconnected"]) == 2
    assert "zone 'A' is not connected" in capsys.readouterr().err


def test_partition_bad_file_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("bus,zone\n1,1\n999,2\n")
    assert main(["partition", "case14", "--from", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("powerdp: error: ") and "Traceback" not in err


def test_cases_lists_bundled_files(capsys):
    assert main(["cases"]) == 0
    listed = capsys.readouterr().out.split()
    assert {"case14.m", "case118.m", "case14_3zones.csv", "case118_3areas.csv"} <= set(listed)


# ---------------------------------------------------------------------- help


def test_top_level_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for word in ("usage: powerdp", "--version", "--quiet", "--verbose", *_subcommands()):
        assert word in out, word


def test_version(capsys):
    from powerdp import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert __version__ in capsys.readouterr().out


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_subcommand_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: powerdp {command}" in out
    for option in _option_strings(_subcommands()[command]):
        assert option in out, f"powerdp {command} --help does not mention {option}"


def test_expected_options_exist():
    subs = _subcommands()
    assert {"solve", "partition", "cases"} <= set(subs)
    assert {"--objective", "--flows", "--profile", "--json", "--solution", "--convention"} <= set(
        _option_strings(subs["solve"])
    )
    assert {"--zones", "--from", "--method", "--seed", "--out", "--convention"} <= set(
        _option_strings(subs["partition"])
    )


def test_missing_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["powerdp: error: the following arguments are required: COMMAND; see 'powerdp --help'"]


# ------------------------------------------------------------ console script


def _console_script() -> str | None:
    found = shutil.which("powerdp")
    if found:
        return found
    sibling = Path(sys.executable).with_name("powerdp")  # the venv's bin/ when it is not on PATH
    return str(sibling) if sibling.is_file() else None


def test_console_script():
    exe = _console_script()
    if exe is None:
        pytest.skip("the powerdp console script is not on PATH (package not installed?)")
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage: powerdp" in proc.stdout
    assert "solve" in proc.stdout and "partition" in proc.stdout


def test_a_shedding_run_imports_neither_other_commands_nor_ipopt(tmp_path):
    """The README main job's start-up (docs/results/performance.md): `powerdp run` builds only its own parser, so it
    does not import learning, dispatch or grpc, and the shedding objective's centralized reference is
    solved by Clarabel, so cyipopt (and the scipy.optimize it imports) is not imported either."""
    code = ("import sys; from powerdp.cli import main; "
            "status = main(['-q', 'run', 'case14', '--zones', '2', '--algorithm', 'objl', '--epsilon', '0.1', '--rounds', '3', "
            "'--json', sys.argv[1]]); "
            "print(status, sorted(m for m in ('cyipopt', 'scipy.optimize', 'powerdp.apps.learning', 'powerdp.cli.learn', "
            "'powerdp.cli.dispatch', 'grpc', 'powerdp.apps.dispatch') if m in sys.modules))")
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "0" and proc.stdout.strip().endswith("[]"), proc.stdout
    summary = json.loads(out.read_text())
    assert summary["centralized_objective"] == pytest.approx(0.0, abs=1e-8)  # case14 is feasible: nothing to shed


def test_run_without_evaluation_from_a_config_file(tmp_path, capsys):
    """--no-evaluation also applies over a --config file; the zones' own solution files are written."""

    cfg = tmp_path / "run.toml"
    cfg.write_text('[run]\ncase = "case14"\nzones = 3\nalgorithm = "objl"\nepsilon = 0.5\nrounds = 2\n')
    out = tmp_path / "out"
    assert main(["-q", "run", "--config", str(cfg), "--no-evaluation", "--no-warm-start", "--out", str(out)]) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["evaluate"] is False and saved["warm_start"] is False
    history = read_history(out)
    assert history["objective"].isna().all() and history["feasibility"].notna().all()
    assert sorted(str(p.relative_to(out)) for p in (out / "zones.private").glob("zone_*/solution.csv")) == [
        f"zones.private/zone_{z}/solution.csv" for z in range(3)]


# ------------------------------------------------------- AC check and export


def test_solve_ac_check_and_out(tmp_path, capsys):
    out, js = tmp_path / "solve", tmp_path / "solve.json"
    assert main(["solve", "case14", "--ac-check", "--out", str(out), "--json", str(js)]) == 0
    stdout = capsys.readouterr().out
    assert "AC check    pandapower.runpp converged" in stdout and "mismatch +0.17" in stdout
    ac = json.loads(js.read_text())["ac_check"]
    assert ac["converged"] is True
    assert ac["slack_mismatch_mw"] == pytest.approx(0.172, abs=0.02)
    assert ac["max_voltage_violation_pu"] == 0.0 and ac["max_loading_percent"] is None
    assert sorted(p.name for p in out.iterdir()) == ["branches.csv", "buses.csv", "generators.csv", "inputs.json", "result.json", "zones.csv"]
    result = json.loads((out / "result.json").read_text())
    assert result["source"].endswith("case14.m") and result["ac_check"]["converged"] is True
    with open(out / "generators.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sum(float(r["p_mw"]) for r in rows) == pytest.approx(259.0 + 9.178, abs=0.01)
    assert sum(float(r["cost_per_h"]) for r in rows) == pytest.approx(CASE14_SOC, abs=0.01)


def test_export_a_solve_directory(tmp_path, capsys):
    import pandapower as pp

    out = tmp_path / "solve"
    assert main(["-q", "solve", "case14", "--out", str(out)]) == 0
    target = tmp_path / "net.json"
    assert main(["export", str(out), "--pandapower", str(target), "--ac-check"]) == 0
    stdout = capsys.readouterr().out
    assert "wrote" in stdout and "1 ext_grid, 4 gen" in stdout and "converged" in stdout
    net = pp.from_json(str(target))
    assert len(net.bus) == 14 and len(net.gen) == 4 and len(net.res_bus) == 14  # with the power flow's results
    with open(out / "generators.csv", newline="") as fh:
        p = {int(r["bus"]): float(r["p_mw"]) for r in csv.DictReader(fh)}
    for bus, pg in zip(net.gen["bus"], net.gen["p_mw"]):
        assert pg == pytest.approx(p[int(bus)], abs=1e-9)
    # an existing file is kept unless --force
    assert main(["export", str(out), "--pandapower", str(target)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["-q", "export", str(out), "--pandapower", str(target), "--force"]) == 0


@pytest.mark.parametrize("setup, message", [
    ("missing", "is not a directory"),
    ("empty", "neither a run directory"),
    ("no_tables", "not all of generators.csv"),
])
def test_export_bad_directory_is_a_clear_error(tmp_path, capsys, setup, message):
    d = tmp_path / "d"
    if setup != "missing":
        d.mkdir()
    if setup == "no_tables":
        (d / "result.json").write_text(json.dumps({"source": "case14", "convention": "powermodels"}))
    assert main(["export", str(d), "--pandapower", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("powerdp: error: ") and message in err and len(err.strip().splitlines()) == 1


def test_run_ac_check_and_export(tmp_path, capsys):
    out, js = tmp_path / "run", tmp_path / "run.json"
    assert main(["-q", "run", "case14", "--rounds", "3", "--epsilon", "1", "--no-reference", "--ac-check", "--out", str(out), "--json", str(js)]) == 0
    ac = json.loads(js.read_text())["ac_check"]
    assert ac["converged"] is True and set(ac) >= {"slack_mismatch_mw", "max_voltage_violation_pu", "max_loading_percent"}
    saved = json.loads((out / "simulation_evaluation" / "summary.json").read_text())["summary"]
    assert saved["ac_check"] == ac  # computed at the true loads: the simulation's evaluation
    for name in ("generators.csv", "buses.csv", "branches.csv", "zones.csv"):
        assert (out / "simulation_evaluation" / name).is_file() and not (out / name).exists(), name
    assert main(["-q", "export", str(out), "--pandapower", str(tmp_path / "run_net.json")]) == 0
    # without evaluation there is no final point to check
    assert main(["-q", "run", "case14", "--rounds", "2", "--no-evaluation", "--ac-check"]) == 2
    assert "--no-evaluation" in capsys.readouterr().err


def test_run_on_a_pandapower_case_writes_its_dispatch_back(tmp_path):
    import pandapower as pp

    out = tmp_path / "run"
    assert main(["-q", "run", "pandapower:case14", "--rounds", "2", "--epsilon", "1", "--no-reference", "--out", str(out)]) == 0
    net = pp.from_json(str(out / "simulation_evaluation" / "pandapower.json"))
    with open(out / "simulation_evaluation" / "generators.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    gen_p = sorted(float(r["p_mw"]) for r in rows if int(r["bus"]) in {2, 3, 6, 8})
    assert sorted(net.gen["p_mw"]) == pytest.approx(gen_p, abs=1e-9)


def test_export_of_a_solve_with_an_hvdc_line(hvdc_case, tmp_path):
    """solve --out keeps the HVDC lines' powers (dclines.csv); export writes them as a pandapower dcline."""
    import pandapower as pp

    from powerdp.cli import main

    out = tmp_path / "solve"
    assert main(["-q", "solve", str(hvdc_case), "--out", str(out)]) == 0
    assert (out / "dclines.csv").is_file()
    assert main(["-q", "export", str(out), "--pandapower", str(tmp_path / "net.json"), "--ac-check"]) == 0
    net = pp.from_json(str(tmp_path / "net.json"))
    assert len(net.dcline) == 1 and net.dcline["p_mw"].iloc[0] == pytest.approx(80.0, abs=1e-3)


@pytest.mark.parametrize("extra", [["--algorithm", "objl"], ["--algorithm", "objg", "--target-delta", "1e-5"]])
def test_round_legend_shows_the_calibrated_per_step_epsilon(extra, tmp_path, capsys):
    """A budget-first run prints the per-step ε it calibrated (the ledger's figure), not the default --epsilon."""
    js, out = tmp_path / "run.json", tmp_path / "run"
    args = ["run", "case14", "--zones", "2", "--target-epsilon", "1", "--rounds", "5", "--json", str(js), "--out", str(out)]
    assert main([*args, *extra]) == 0
    legend = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("columns:"))
    record = json.loads(js.read_text())  # --json: the simulation's record, both views, with the keys scripts rely on
    assert {"final_objective", "final_cost", "total_shedding_mw", "epsilon_total", "noise_source", "private",
            "centralized_objective", "final_feasibility"} <= set(record)
    assert record == json.loads(json.dumps(read_summary(out)))  # = the two view files joined
    assert record["final_objective"] > 0 and record["noise_source"] == "secret"
    per_step = record["epsilon_per_step"]
    eps = next(iter(per_step.values()))
    assert f"(ε {eps:.4g} per local step" in legend and "calibrated to the budget ε 1" in legend
    if extra[1] == "objl":  # Laplace: 5 rounds × 1 local step share ε 1 equally (basic composition is exact here)
        assert eps == pytest.approx(0.2, rel=1e-12) and "δ 0," in legend
    else:
        assert 0.1 < eps < 10 and "ε 0.1 per local step" not in legend


def test_json_dash_keeps_standard_output_for_the_json_alone(capsys):
    """--json - without -q: the progress and the summary go to standard error, so stdout parses as JSON."""
    import json

    from powerdp.cli import main

    assert main(["run", "case14", "--zones", "2", "--rounds", "2", "--no-reference", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["rounds"] == 2
    assert "round     1" in err and "the coordinator's view" in err
    assert main(["privacy", "amplification", "--smooth", "0.18", "--strong", "0.18", "--strong-g", "0.2", "--penalty", "0.5",
                 "--json", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["eta"] == pytest.approx(4.8113, abs=1e-4) and "eq. (23)" in err


def test_no_evaluation_prints_no_nan_objective(capsys):
    """``objective nan`` in every progress line of a --no-evaluation run (and of learn's): the zones keep their
    objectives, so the lines leave it out, and so does the legend."""
    assert main(["run", "case14", "--rounds", "2", "--no-evaluation", "-v"]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out and "objective Σ_p" not in out and "round     2  feasibility" in out, out
    assert main(["learn", "digits", "--rounds", "2", "--clients", "2", "--no-evaluation", "-v"]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out and "not evaluated" in out, out


def test_learn_prints_its_legend_only_after_reading_its_input(capsys, tmp_path):
    """``columns: ...`` came before the input was checked, so an error arrived after it."""
    bad = tmp_path / "bad.csv"
    bad.write_text("x1,label\n1,a\n")
    assert main(["learn", str(bad), "--label", "y"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "no label column 'y'" in err


def test_a_one_release_run_says_its_epsilon_is_for_that_release(capsys):
    """A new user's report: totl (the default at a budget) printed "ε 1 per local step" for the zone's one release."""
    assert main(["run", "case14", "--zones", "2", "--target-epsilon", "1", "--rounds", "3"]) == 0
    out = capsys.readouterr().out
    privacy = next(line for line in out.splitlines() if line.startswith("privacy"))
    assert "ε 1 for the zone's one release" in privacy and "per local step" not in privacy
