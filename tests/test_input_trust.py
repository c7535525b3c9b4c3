"""Issue 19: inputs and files powerdp did not check, faults of the machine, and the messages they give.

Each test fails on the code before the fix: bad input gets one line naming the file, element and field
(exit 2) or a warning, never a traceback, a raw Python warning, or a silent change of meaning.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from powerdp.cli import main
from powerdp.errors import CaseDataError
from powerdp.grid.loading import bundled_path, load_case
from powerdp.grid.matpower import parse_matpower

CASE14_SOC = 8075.12
ROOT = Path(__file__).resolve().parents[1]


def tree_env() -> dict:
    """The environment of a ``python -m powerdp`` subprocess that runs this tree's powerdp (not another install)."""
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def one_error(capsys, *needles: str) -> str:
    """The command printed exactly one error line (warnings and progress aside), holding every needle."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Warning:" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.endswith("...") and not ln.startswith("powerdp: warning: ")]
    assert len(lines) == 1 and lines[0].startswith("powerdp: error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def case14_text() -> str:
    return Path(bundled_path("case14")).read_text()


def edit_row(text: str, table: str, row: int, col: int, value: str) -> str:
    """case text with mpc.<table>'s row ``row`` (0-based), column ``col`` (0-based) set to ``value``."""
    lines = text.splitlines()
    start = next(k for k, ln in enumerate(lines) if ln.startswith(f"mpc.{table} = ["))
    fields = lines[start + 1 + row].rstrip(";").split()
    fields[col] = value
    lines[start + 1 + row] = "\t".join(fields) + ";"
    return "\n".join(lines) + "\n"


def write_case(tmp_path, text: str, name: str = "mycase.m") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ------------------------------------------------------------------ bug 3: MATLAB statements


def test_matlab_statements_in_a_case_file_are_refused_naming_the_line(tmp_path, capsys):
    text = case14_text().rstrip("\n") + "\nmpc.bus(:, 3) = 2 * mpc.bus(:, 3);\n"
    n = len(text.splitlines())
    with pytest.raises(CaseDataError, match=rf"mycase.m, line {n}: a MATLAB statement") as err:
        parse_matpower(text, "mycase.m")
    assert "2 *" not in str(err.value)  # a file's content is never echoed
    p = write_case(tmp_path, text)
    assert main(["solve", str(p)]) == 2
    one_error(capsys, str(p), f"line {n}", "MATLAB statement")
    # computed scalars and matrices are code too
    for extra in ("mpc.baseMVA = 50 * 2;", "x = 3;", "mpc.extra_table = [1 2] * 3;", "if 1, mpc.baseMVA = 10; end"):
        with pytest.raises(CaseDataError, match="MATLAB statement"):
            parse_matpower(case14_text() + extra + "\n", "mycase.m")
    # what real case files hold still parses: end, return, cell arrays, quoted strings
    data = parse_matpower(case14_text() + "mpc.name = 'x';\nmpc.bus_name = {\n 'a';\n};\nreturn;\nend\n", "mycase.m")
    assert data.bus.shape == (14, 13)


def test_unclosed_bracket_is_named_as_such(tmp_path):
    text = case14_text().replace("mpc.gen = [", "mpc.gen = [", 1)
    lines = text.splitlines()
    start = next(k for k, ln in enumerate(lines) if ln.startswith("mpc.bus = ["))
    end = next(k for k in range(start, len(lines)) if lines[k].startswith("];"))
    del lines[end]
    with pytest.raises(CaseDataError, match=rf"line {start + 1}: mpc.bus opens '\[' but never closes it"):
        parse_matpower("\n".join(lines), "mycase.m")


# ------------------------------------------------------------------ unclear: case data


def test_all_buses_isolated_names_the_file(tmp_path):
    text = case14_text()
    for r in range(14):
        text = edit_row(text, "bus", r, 1, "4")
    with pytest.raises(CaseDataError, match=r"mycase.m: every bus is isolated"):
        load_case(str(write_case(tmp_path, text)))


def test_generator_at_isolated_bus_is_not_called_out_of_service(tmp_path, caplog):
    text = edit_row(case14_text(), "bus", 7, 1, "4")  # bus 8 holds generator 5 (in service)
    text = edit_row(text, "branch", 13, 10, "0")  # branch 7-8, the only one at bus 8
    with caplog.at_level(logging.INFO, logger="powerdp"):
        net = load_case(str(write_case(tmp_path, text)))
    assert net.n_gen == 4
    msgs = " | ".join(r.getMessage() for r in caplog.records)
    assert "1 in-service generator(s) at isolated (type 4) buses" in msgs
    assert "out-of-service generator" not in msgs


@pytest.mark.parametrize(
    "table, row, col, value, needle",
    [
        ("gencost", 0, 3, "0", "generator 1 has NCOST = 0"),
        ("gencost", 1, 4, "-0.5", "generator 2 has a negative quadratic cost coefficient (-0.5)"),
        ("branch", 7, 8, "-0.97", "branch 8 has a negative tap ratio (-0.97)"),
        ("branch", 1, 8, "1e-300", "branch 2 has a tap ratio of 1e-300, outside [0.001, 1000]"),  # crashed Ipopt (SIGSEGV)
    ],
)
def test_case_data_that_changes_the_model_is_refused(tmp_path, capsys, table, row, col, value, needle):
    p = write_case(tmp_path, edit_row(case14_text(), table, row, col, value))
    assert main(["solve", str(p)]) == 2
    one_error(capsys, str(p), needle)


def test_doubtful_case_data_is_warned_about(tmp_path, caplog):
    text = edit_row(case14_text(), "branch", 0, 3, "1e-12")
    text = edit_row(text, "branch", 0, 2, "0")
    text = edit_row(text, "branch", 2, 5, "1e-9")
    with caplog.at_level(logging.WARNING, logger="powerdp"):
        net = load_case(str(write_case(tmp_path, text)))
    msgs = " | ".join(r.getMessage() for r in caplog.records)
    assert "branch 1 has an impedance of 1e-12 p.u." in msgs
    assert "rateA below 0.001 MVA (branch 3: 1e-09 MVA)" in msgs
    # a tiny rating is a (tight) limit, not "no limit"
    assert net.rate_a[2] == pytest.approx(1e-11)
    # no generator in service
    text = case14_text()
    for r in range(5):
        text = edit_row(text, "gen", r, 7, "0")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="powerdp"):
        load_case(str(write_case(tmp_path, text, "nogen.m")))
    assert any("no generator in service" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------ bug 6: raw Python warnings


def test_huge_rating_is_no_limit_without_a_raw_overflow_warning(tmp_path, capfd):
    p = write_case(tmp_path, edit_row(case14_text(), "branch", 0, 5, "1e308"))
    assert main(["solve", str(p)]) == 0
    out, err = capfd.readouterr()
    assert "RuntimeWarning" not in err and "overflow" not in err, err
    assert f"cost = {CASE14_SOC}" in out
    assert np.isinf(load_case(str(p)).rate_a[0])


@pytest.mark.parametrize("how", [["--zones", "1"], ["--partition", "area"], ["--partition", "ONE"]])
def test_a_single_zone_is_one_clean_error(tmp_path, capfd, how):
    if how[-1] == "ONE":
        one = tmp_path / "one.csv"
        one.write_text("bus,zone\n" + "".join(f"{b},1\n" for b in range(1, 15)))
        how = ["--partition", str(one)]
    assert main(["run", "case14", "--rounds", "1", *how]) == 2
    err = capfd.readouterr().err
    assert "UserWarning" not in err and ".py:" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("powerdp: error: ")]
    assert len(lines) == 1 and "has a single zone; a distributed run needs at least 2" in lines[0]


def test_python_warnings_are_one_line_without_source(capfd):
    import warnings

    from powerdp.cli import setup_logging

    setup_logging(False, False)
    warnings.warn("something odd", UserWarning)
    warnings.warn("old API", DeprecationWarning)
    err = capfd.readouterr().err
    assert err.strip() == "powerdp: warning: something odd", err


# ------------------------------------------------------------------ bug 2: resume and export check their inputs


def _mycase(tmp_path, name="work", scale=1.0) -> Path:
    """A copy of case14 as DIR/mycase.m, with bus 2's load scaled by ``scale``."""
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    text = case14_text()
    if scale != 1.0:
        text = edit_row(text, "bus", 1, 2, f"{21.7 * scale:g}")
    return write_case(d, text)


def test_resume_reopens_the_recorded_case_and_refuses_a_changed_or_missing_one(tmp_path, monkeypatch, capsys):
    import json

    case = _mycase(tmp_path)
    other = _mycase(tmp_path, "other", scale=1.5)
    monkeypatch.chdir(case.parent)
    # seeded: the resumed run is compared with an uninterrupted one below (secret noise would differ)
    assert main(["-q", "run", "mycase.m", "--zones", "2", "--rounds", "2", "--out", "r", "--no-reference", "--seed", "0"]) == 0
    rec = json.loads((case.parent / "r" / "inputs.json").read_text())
    assert rec["case"]["path"] == str(case.resolve()) and len(rec["case"]["sha256"]) == 64
    assert rec["partition.csv"]["path"] == str((case.parent / "r" / "partition.csv").resolve())
    # from a directory holding another mycase.m: the recorded file is used, not ./mycase.m
    monkeypatch.chdir(other.parent)
    assert main(["-q", "run", "--resume", "../work/r", "--rounds", "3", "--no-reference"]) == 0
    capsys.readouterr()
    # the same run without the stop, for comparison: the resumed history equals an uninterrupted one
    monkeypatch.chdir(case.parent)
    assert main(["-q", "run", "mycase.m", "--zones", "2", "--rounds", "3", "--out", "full", "--no-reference", "--seed", "0"]) == 0
    import pandas as pd

    a = pd.read_csv(case.parent / "r" / "simulation_evaluation" / "history.csv")["objective"].to_numpy()
    b = pd.read_csv(case.parent / "full" / "simulation_evaluation" / "history.csv")["objective"].to_numpy()
    np.testing.assert_array_equal(a, b)
    # changed: refused, naming the file and what to do
    case.write_text(other.read_text())
    assert main(["-q", "run", "--resume", "r", "--rounds", "4"]) == 2
    one_error(capsys, str(case.resolve()), "has changed since the run was made", "restore the original")
    assert main(["export", "r", "--pandapower", str(tmp_path / "x.json")]) == 2
    one_error(capsys, "cannot export", "has changed")
    # missing
    case.unlink()
    assert main(["-q", "run", "--resume", "r", "--rounds", "4"]) == 2
    one_error(capsys, str(case.resolve()), "is missing")


def test_export_of_a_solve_reopens_the_recorded_case(tmp_path, monkeypatch, capsys):
    case = _mycase(tmp_path)
    monkeypatch.chdir(case.parent)
    assert main(["-q", "solve", "mycase.m", "--out", "s"]) == 0
    monkeypatch.chdir(tmp_path)
    assert main(["-q", "export", "work/s", "--pandapower", "x.json"]) == 0
    case.write_text(edit_row(case.read_text(), "bus", 1, 2, "30"))
    assert main(["-q", "export", "work/s", "--pandapower", "y.json"]) == 2
    one_error(capsys, "cannot export work/s", "has changed")


# ------------------------------------------------------------------ bug 10: an edited partition.csv


@pytest.mark.parametrize("edit", ["zone", "truncate", "garbage"])
def test_edited_partition_csv_is_one_line(tmp_path, capsys, edit):
    d = tmp_path / "r"
    assert main(["-q", "run", "case14", "--rounds", "2", "--out", str(d), "--no-reference", "--checkpoint-every", "1"]) == 0
    path = d / "partition.csv"
    lines = path.read_text().splitlines()
    if edit == "zone":
        lines[1] = lines[1].split(",")[0] + ",5"
    elif edit == "truncate":
        lines = lines[:5]
    else:
        lines = ["bus,zone", "1,2,3", "x"]
    path.write_text("\n".join(lines) + "\n")
    assert main(["-q", "run", "--resume", str(d), "--rounds", "3"]) == 2
    one_error(capsys, str(path.resolve()), "has changed")
    # a run made before inputs.json: partition.csv itself is checked, in one line
    (d / "inputs.json").unlink()
    assert main(["-q", "run", "--resume", str(d), "--rounds", "3"]) == 2
    one_error(capsys, *([] if edit == "zone" else [str(path)]))  # a moved bus: its zone's checkpoint is missing


# ------------------------------------------------------------------ bug 4: optional steps never lose a run


def test_a_pandapower_net_the_dispatch_cannot_be_written_into_keeps_its_results(tmp_path, capsys):
    d = tmp_path / "d"
    assert main(["run", "pandapower:example_multivoltage", "--zones", "2", "--rounds", "2", "--out", str(d), "--no-reference"]) == 0
    err = capsys.readouterr().err
    assert "powerdp: warning: no " in err and "pandapower.json" in err and "xward" in err
    ev = d / "simulation_evaluation"
    assert (d / "coordinator_view" / "summary.json").is_file() and (ev / "summary.json").is_file() and (ev / "generators.csv").is_file()
    assert not (ev / "pandapower.json").exists()
    assert main(["-q", "run", "--resume", str(d), "--rounds", "3"]) == 0


def test_export_of_a_pandapower_solve(tmp_path, capsys):
    assert main(["-q", "solve", "pandapower:case9", "--out", str(tmp_path / "s")]) == 0
    assert main(["export", str(tmp_path / "s"), "--pandapower", str(tmp_path / "x.json")]) == 0
    assert "wrote" in capsys.readouterr().out


# ------------------------------------------------------------------ bug 5 and sweeps


def test_sweep_ids_of_two_cases_with_the_same_name_differ(tmp_path):
    from powerdp.studies.sweep import SweepSpec

    other = tmp_path / "other"
    other.mkdir()
    (other / "case14.m").write_text(case14_text())
    spec = SweepSpec(cases=["case14", str(other / "case14.m")], partitions=[2], algorithms=["nonprivate"], source="s.toml")
    ids = [rid for rid, _ in spec.configs()]
    assert len(set(ids)) == 2 and ids[0] == "case14_z2-modularity_nonprivate_eps0.1_E1_s0"
    assert ids[1].startswith(ids[0] + "-")


@pytest.mark.parametrize(
    "text, needle",
    [
        ("", "no [sweep] grid"),
        ("[run]\nrounds = 2\n", "no [sweep] grid"),
        ("sweep = 3\n", "sweep must be a table"),
        ('[sweep]\ncases = ["case14"]\nepsilons = [0.1, 0.1]\n', "holds run case14_case14_3zones_objl_eps0.1_E1_s0 twice"),
        ('[sweep]\ncases = ["case14"]\n[run]\nextra = {trust_raduis = 2}\n', "extra.trust_raduis: not an option of update rule"),
        ('[sweep]\ncases = ["case14"]\nseeds = [-1]\n', "seed = -1: must be a non-negative integer"),
        ('[sweep]\ncases = ["case14"]\n[run]\nipopt_options = {max_iter = [1]}\n', "Ipopt option 'max_iter' must be a number or a string"),
    ],
)
def test_sweep_files_that_would_mislead(tmp_path, capsys, text, needle):
    spec = tmp_path / "s.toml"
    spec.write_text(text)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 2
    one_error(capsys, needle)


def test_runs_and_sweeps_keep_their_own_directories(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["-q", "run", "case14", "--rounds", "1", "--out", str(run), "--no-reference"]) == 0
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\ncases = ["case14"]\nalgorithms = ["nonprivate"]\n[run]\nrounds = 1\n')
    assert main(["sweep", str(spec), "--out", str(run)]) == 2
    one_error(capsys, "holds a single run")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text("{}")
    assert main(["run", "case14", "--rounds", "1", "--out", str(sweep)]) == 2
    one_error(capsys, "holds a sweep")
    assert main(["solve", "case14", "--out", str(run)]) == 2
    one_error(capsys, "holds a run or a sweep")


# ------------------------------------------------------------------ bug 7 and other numbers


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--tol", "nan"], "argument --tol: 'nan' is not finite"),
        (["--tol", "inf"], "argument --tol: 'inf' is not finite"),
        (["--eta", "inf"], "argument --eta: 'inf' is not finite"),
    ],
)
def test_non_finite_numbers_are_refused(capsys, args, needle):
    with pytest.raises(SystemExit) as info:  # refused as the command line is parsed (powerdp.cli.args)
        main(["run", "case14", "--rounds", "1", *args])
    assert info.value.code == 2
    one_error(capsys, needle)


def test_nan_tolerance_in_a_config_file(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[run]\ncase = "case14"\nzones = 3\ntol_primal = nan\n')
    assert main(["run", "--config", str(cfg), "--rounds", "1"]) == 2
    one_error(capsys, "tol_primal = nan")


def test_a_huge_constant_step_is_warned_about(capsys):
    assert main(["run", "case14", "--rounds", "1", "--eta", "1e308", "--algorithm", "nonprivate", "--no-reference"]) in (0, 1)
    err = capsys.readouterr().err
    assert "powerdp: warning: constant step eta = 1e+308 is above 1.9/L_p" in err and "Traceback" not in err


def test_unknown_update_rule_option_is_refused(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[run]\ncase = "case14"\nzones = 3\nalgorithm = "objt"\n[run.extra]\ntrust_raduis = 2\n')
    assert main(["run", "--config", str(cfg), "--rounds", "1"]) == 2
    one_error(capsys, "extra.trust_raduis", "trust_radius")


# ------------------------------------------------------------------ bug 9: options and files


@pytest.mark.parametrize("option", ["output_file", "option_file_name", "hsllib"])
def test_options_that_make_ipopt_touch_files_are_refused(tmp_path, capsys, option):
    target = tmp_path / "ipopt.out"
    assert main(["run", "case14", "--rounds", "1", "--ipopt-option", f"{option}={target}"]) == 2
    line = one_error(capsys, f"Ipopt option {option!r}", "refuses it")
    assert str(target) not in line
    assert not target.exists()
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'[run]\ncase = "case14"\nzones = 3\nrounds = 1\nipopt_options = {{{option} = "{target}"}}\n')
    assert main(["run", "--config", str(cfg)]) == 2
    one_error(capsys, option)
    spec = tmp_path / "s.toml"
    spec.write_text(f'[sweep]\ncases = ["case14"]\n[run]\nrounds = 1\nipopt_options = {{{option} = "{target}"}}\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "sw")]) == 2
    one_error(capsys, option)
    prof = tmp_path / "p.opt"
    prof.write_text(f"tol 1e-8\n{option} {target}\n")
    assert main(["solve", "case14", "--profile", str(prof)]) == 2
    one_error(capsys, option)
    assert not target.exists()


def test_a_profile_that_is_not_one_is_not_echoed(tmp_path, capsys):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret_token = hunter2\n")
    assert main(["solve", "case14", "--profile", str(secret)]) == 2
    line = one_error(capsys, str(secret), "line 1")
    assert "hunter2" not in line and "secret_token" not in line
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'[run]\ncase = "case14"\nzones = 3\nrounds = 1\nipopt_profile = "{secret}"\n')
    assert main(["run", "--config", str(cfg)]) == 2
    assert "hunter2" not in one_error(capsys, str(secret))


def test_ipopt_opt_in_the_working_directory_is_not_read(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ipopt.opt").write_text("max_iter 1\n")
    assert main(["solve", "case14"]) == 0
    assert "Solve_Succeeded" in capsys.readouterr().out


def test_a_bogus_ipopt_option_is_one_line_and_nothing_on_stdout(tmp_path):
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "powerdp", "run", "case14", "--rounds", "1", "--no-reference", "--ipopt-option", "foo=1"],
        capture_output=True, text=True, cwd=tmp_path, env=tree_env(),
    )
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert r.stderr.strip().splitlines()[-1].startswith("powerdp: error: invalid Ipopt option foo = 1")


def test_symlinks_inside_a_run_directory_are_refused(tmp_path, capsys):
    d, elsewhere = tmp_path / "r", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("x")
    assert main(["-q", "run", "case14", "--rounds", "1", "--out", str(d), "--no-reference"]) == 0
    import shutil

    shutil.rmtree(d / "checkpoint")
    (d / "checkpoint").symlink_to(elsewhere)
    assert main(["-q", "run", "case14", "--rounds", "1", "--out", str(d), "--overwrite"]) == 2
    one_error(capsys, str(d / "checkpoint"), "symbolic link")
    assert main(["-q", "run", "--resume", str(d), "--rounds", "2"]) == 2
    one_error(capsys, "symbolic link")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]


# ------------------------------------------------------------------ bug 8: write failures


def test_atomic_write_keeps_the_last_good_file_and_names_it(tmp_path):
    import errno

    from powerdp.files.atomic import OutputError, atomic_write

    path = tmp_path / "summary.json"
    path.write_text("good\n")

    def full(fh):
        fh.write("partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OutputError, match=rf"cannot write {path}: No space left on device"):
        atomic_write(path, full)
    assert path.read_text() == "good\n" and not (tmp_path / "summary.json.tmp").exists()


def test_a_full_disk_at_the_summary_names_the_file_and_keeps_the_run(tmp_path, monkeypatch, capsys):
    import errno

    from powerdp.apps.power_flow import result as results
    from powerdp.files.atomic import atomic_write, atomic_write_text

    d = tmp_path / "r"

    def no_room(path, text):
        if Path(path).name == "summary.json":  # the disk fills up half-way through the file
            def write(fh):
                fh.write(text[:100])
                raise OSError(errno.ENOSPC, "No space left on device")
            return atomic_write(path, write)
        return atomic_write_text(path, text)

    monkeypatch.setattr(results, "atomic_write_text", no_room)
    assert main(["-q", "run", "case14", "--rounds", "3", "--out", str(d), "--no-reference"]) == 2
    summary = d / "coordinator_view" / "summary.json"  # the first summary written
    one_error(capsys, f"cannot write {summary}: No space left on device")
    assert not summary.exists() and not summary.with_name("summary.json.tmp").exists()
    monkeypatch.undo()
    assert main(["-q", "run", "--resume", str(d), "--rounds", "3"]) == 0  # the computed rounds were kept
    import json

    assert json.loads(summary.read_text())["summary"]["rounds"] == 3


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs POSIX resource limits")
@pytest.mark.parametrize("backend", ["serial", "process"])
def test_a_file_size_limit_keeps_the_last_checkpoint_resumable(tmp_path, backend):
    """ulimit -f: the checkpoint that does not fit is named; the previous one is complete and resumes."""
    import resource
    import subprocess
    import sys

    def limit():  # above every fixed-size file (a zone's .npz: 4.5 kB), below the checkpoint's history after ~30 rounds
        resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))

    d = tmp_path / "f"
    cmd = [sys.executable, "-m", "powerdp", "run", "case14", "--rounds", "40", "--out", str(d), "--no-reference", "--checkpoint-every", "1",
           "--backend", backend]
    r = subprocess.run(cmd, preexec_fn=limit, capture_output=True, text=True, env=tree_env())
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert last.startswith("powerdp: error: cannot write the checkpoint of round ") and str(d / "checkpoint") in last
    assert "--resume" in last
    assert not list((d / "checkpoint").rglob("*.tmp"))
    r = subprocess.run([sys.executable, "-m", "powerdp", "-q", "run", "--resume", str(d), "--rounds", "40"], capture_output=True, text=True, env=tree_env())
    assert r.returncode == 0, r.stderr
    import pandas as pd

    for view in ("coordinator_view", "simulation_evaluation"):
        assert pd.read_csv(d / view / "history.csv")["round"].tolist() == list(range(1, 41))


# ------------------------------------------------------------------ unclear: outputs that read wrongly


def test_check_ac_prints_nothing_of_pandapower():
    """From a script (no logging set up, as a user's): pandapower's notes on powerdp's own conversion stay silent."""
    import subprocess
    import sys

    code = "import powerdp; res = powerdp.solve_opf('case14'); print('SOLVED'); res.check_ac()"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=tree_env())
    assert r.returncode == 0 and r.stdout == "SOLVED\n" and "trafos" not in r.stderr, (r.stdout, r.stderr)


def test_summary_labels_the_gap_and_how_the_run_stopped(capsys):
    assert main(["run", "case14", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    assert "rounds 2 (all rounds run)" in out and "(rounds)" not in out
    line = next(ln for ln in out.splitlines() if ln.startswith("centralized"))
    assert "Σ(p.u.²) (absolute)" in line.split("gap", 1)[1]


def test_json_dash_writes_to_standard_output(tmp_path, monkeypatch, capsys):
    import json

    monkeypatch.chdir(tmp_path)
    assert main(["-q", "solve", "case14", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["objective"] == pytest.approx(CASE14_SOC, abs=0.01)
    assert main(["-q", "run", "case14", "--rounds", "1", "--no-reference", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["rounds"] == 1
    assert not (tmp_path / "-").exists()


def test_solve_out_never_replaces_a_solve_silently(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["-q", "solve", "case14", "--out", str(out)]) == 0
    assert main(["-q", "solve", "case14", "--objective", "shedding", "--out", str(out)]) == 2
    one_error(capsys, str(out), "already holds result.json", "--force")
    assert main(["-q", "solve", "case14", "--objective", "shedding", "--out", str(out), "--overwrite"]) == 0
    import json

    assert json.loads((out / "result.json").read_text())["objective_name"] == "shedding"


# ------------------------------------------------------------------ newcomer: skips say what is missing


def test_a_skip_for_missing_data_names_the_file_and_what_it_would_check():
    from tests.conftest import shared_case

    with pytest.raises(pytest.skip.Exception, match=r"reference data pglib/nope\.m not found .*would have checked: the answer"):
        shared_case("pglib", "nope.m", checks="the answer")


# ------------------------------------------------------------------ more found while working: binary inputs


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "case14", "--rounds", "1", "--partition", "BIN"], "not UTF-8 text: byte 0xff at line 1, column 1"),
        (["partition", "case14", "--from", "BIN"], "not UTF-8 text: byte 0xff at line 1, column 1"),
        (["run", "--config", "BIN"], "not UTF-8 text: byte 0xff at line 1, column 1"),
        (["sweep", "BIN", "--out", "OUT"], "not UTF-8 text: byte 0xff at line 1, column 1"),
        (["solve", "case14", "--profile", "BIN"], "not UTF-8 text: byte 0xff at line 1, column 1"),
        (["run", "case14", "--rounds", "1", "--ipopt-option", "=3"], "expected NAME=VALUE"),
    ],
)
def test_binary_files_and_empty_option_names_are_one_line(tmp_path, capsys, args, needle):
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    args = [str(binary) if a == "BIN" else str(tmp_path / "out") if a == "OUT" else a for a in args]
    assert main(args) == 2
    one_error(capsys, needle)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs POSIX resource limits")
def test_a_zone_checkpoint_that_cannot_be_written_on_a_worker_is_named(tmp_path):
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2300, 2300))  # below a case14 zone checkpoint

    d = tmp_path / "z"
    cmd = [sys.executable, "-m", "powerdp", "run", "case14", "--rounds", "3", "--out", str(d), "--no-reference", "--backend", "process",
           "--checkpoint-every", "1"]
    r = subprocess.run(cmd, preexec_fn=limit, capture_output=True, text=True, env=tree_env())
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    # the zone's own file is named (its private folder: zones.private/zone_0/checkpoint); a private run's first
    # checkpoint is before round 1 (issue 36: every release can be replayed from a checkpoint)
    assert "cannot write the checkpoint of round 0, " in last and "zone_0/checkpoint/round_0.npz" in last and "File too large" in last
    assert not list((d / "checkpoint").glob("*.tmp")) and not list(d.rglob("*.tmp"))


# ------------------------------------------------------------------ unclear: partition labels


@pytest.mark.parametrize("label", ["1.5", "nan", "inf"])
def test_a_zone_label_that_is_not_a_whole_number_is_refused(tmp_path, capsys, label):
    p = tmp_path / "zones.csv"
    p.write_text("bus,zone\n" + "".join(f"{b},{1 if b <= 7 else 2}\n" for b in range(1, 14)) + f"14,{label}\n")
    assert main(["run", "case14", "--rounds", "1", "--partition", str(p)]) == 2
    one_error(capsys, str(p), "line 15", "bus 14", "not a zone")


def test_a_named_zone_among_numbered_ones_is_warned_about(tmp_path, caplog):
    from powerdp.grid.partition import partition

    p = tmp_path / "zones.csv"
    p.write_text("bus,zone\n" + "".join(f"{b},{1 if b <= 7 else 2}\n" for b in range(1, 14)) + "14,a\n")
    with caplog.at_level(logging.WARNING, logger="powerdp"):
        part = partition(load_case("case14"), str(p), allow_disconnected=True)
    assert part.n_zones == 3
    assert any("1 bus(es) have a named zone (first: bus 14, line 15) beside 13 in numbered zones" in r.getMessage() for r in caplog.records)
    # a '2.0' is zone 2
    p.write_text("bus,zone\n" + "".join(f"{b},{1 if b <= 7 else 2}\n" for b in range(1, 14)) + "14,2.0\n")
    assert partition(load_case("case14"), str(p), allow_disconnected=True).n_zones == 2


# ------------------------------------------------------------------ streams: closed or full standard output


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["cases"], ["solve", "case14"], ["-q", "solve", "case14", "--json", "-"]])
def test_a_full_standard_output_is_named_in_one_line(args):
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "powerdp", *args], stdout=full, stderr=subprocess.PIPE, text=True, env=tree_env())
    assert r.returncode == 2 and r.stderr.strip() == "powerdp: error: standard output: No space left on device", r.stderr


def test_a_closed_standard_output_is_an_error_not_a_traceback():
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", "import os, sys; os.close(1); sys.stdout = None; from powerdp.cli import main; sys.exit(main(['cases']))"],
        stderr=subprocess.PIPE, text=True, env=tree_env(),
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr  # what it printed would vanish: say so
    assert r.stderr.strip().splitlines() == ["powerdp: error: standard output is closed; redirect it (e.g. > FILE or > /dev/null)"]


def test_a_config_file_is_recorded_but_not_required(tmp_path, monkeypatch, capsys, caplog):
    import json

    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "run.toml"
    cfg.write_text('[run]\ncase = "case14"\nzones = 3\nrounds = 1\n')
    assert main(["-q", "run", "--config", "run.toml", "--out", "r", "--no-reference"]) == 0
    rec = json.loads((tmp_path / "r" / "inputs.json").read_text())
    assert rec["config"]["path"] == str(cfg.resolve()) and rec["config"]["required"] is False
    cfg.write_text(cfg.read_text() + "# edited later\n")  # config.json holds the settings: resuming does not need it
    assert main(["-q", "run", "--resume", "r", "--rounds", "2"]) == 0
    # the next run without --config records no config
    assert main(["-q", "run", "case14", "--rounds", "1", "--out", "r2", "--no-reference"]) == 0
    assert "config" not in json.loads((tmp_path / "r2" / "inputs.json").read_text())
    # a run made before inputs.json resumes with a warning that nothing was checked
    (tmp_path / "r2" / "inputs.json").unlink()
    assert main(["run", "--resume", "r2", "--rounds", "2"]) == 0
    assert "made before powerdp recorded its input files" in capsys.readouterr().err


def test_a_non_finite_coefficient_never_reaches_the_solver():
    """The safety net behind the case checks: an overflowed coefficient is a ModelError, not a crashed process."""
    import pyomo.environ as pyo

    from powerdp.errors import ModelError
    from powerdp.opf.compiled import compile_model

    m = pyo.ConcreteModel(name="tiny")
    m.x = pyo.Var(bounds=(0, 1))
    m.c = pyo.Constraint(expr=float("inf") * m.x <= 1)
    m.obj = pyo.Objective(expr=m.x)
    with pytest.raises(ModelError, match="non-finite coefficient"):
        compile_model(m, expressions=())
