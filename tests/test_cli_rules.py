"""The rules every command keeps (issue 25): one overwrite rule (item 10), a closed standard output is an error
(item 6), flags a command would ignore are refused (item 9), --help and docs/cli.md agree (item 11)."""

import re
import sys
from pathlib import Path

import pytest

from powerdp.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")  # the command line's rules, linked from the README
AMP = ["privacy", "amplification", "--smooth", "0.18", "--strong", "0.18", "--strong-g", "0.2", "--penalty", "0.5"]


def _status(capsys, argv) -> tuple[int, list[str]]:
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code
    return status, capsys.readouterr().err.strip().splitlines()


# ---------------------------------------------------------------- item 10: one overwrite rule, --force


@pytest.mark.parametrize("argv, flag", [
    (["partition", "case14", "--zones", "3", "--out", "F"], "--out"),
    (["solve", "case14", "--json", "F"], "--json"),
    (["solve", "case14", "--model", "dc", "--json", "F"], "--json"),
    (["run", "case14", "--rounds", "1", "--no-reference", "--json", "F"], "--json"),
    (["learn", "digits", "--rounds", "1", "--clients", "2", "--no-reference", "--json", "F"], "--json"),
    (["learn", "breast_cancer", "--vertical", "--rounds", "2", "--json", "F"], "--json"),
    ([*AMP, "--json", "F"], "--json"),
], ids=["partition", "solve", "solve-dc", "run", "learn", "vertical", "privacy"])
def test_an_existing_output_file_is_kept_unless_force(capsys, tmp_path, argv, flag):
    target = tmp_path / "result.out"
    target.write_text("the user's earlier result\n")
    argv = [str(target) if a == "F" else a for a in argv]
    status, err = _status(capsys, ["-q", *argv])
    assert status == 2 and err == [f"powerdp: error: {flag} {target} exists; give --force to replace it"], err
    assert target.read_text() == "the user's earlier result\n"
    assert _status(capsys, ["-q", *argv, "--force"])[0] == 0
    assert target.read_text() != "the user's earlier result\n"


def test_every_command_writing_a_file_documents_force():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name in ("solve", "export", "partition", "run", "sweep", "audit", "learn", "dispatch"):
        options = {o for a in sub[name]._actions for o in a.option_strings}
        assert {"--force", "--overwrite"} <= options, name
    assert "--force" in CLI_DOC and "never replaced unless" in CLI_DOC and "dispatch" in CLI_DOC
    assert "(docs/cli.md)" in README and "the overwrite rule (`--force`)" in README


# ---------------------------------------------------------------- item 6: closed standard output


def test_a_closed_standard_output_is_an_error(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", None)  # what Python gives a process started with `>&-`
    status, err = _status(capsys, ["solve", "case14"])
    assert status == 2 and err == ["powerdp: error: standard output is closed; redirect it (e.g. > FILE or > /dev/null)"]


def test_a_closed_standard_output_in_a_new_process(tmp_path):
    import os
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "powerdp_entry", "solve", "case14", "--json", "-"], stderr=subprocess.PIPE,
                          text=True, timeout=300, preexec_fn=lambda: os.close(1))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "powerdp: error: standard output is closed; redirect it (e.g. > FILE or > /dev/null)"
    assert "{" not in proc.stderr  # the JSON did not go to standard error instead


# ---------------------------------------------------------------- item 9: flags a command would ignore


@pytest.mark.parametrize("argv, named", [
    (["solve", "case14", "--model", "dc", "--ac-check"], "--ac-check"),
    (["solve", "case14", "--model", "dc", "--objective", "shedding"], "--objective"),
    (["solve", "case14", "--model", "dc", "--solver", "clarabel"], "--solver"),
    (["run", "case14", "--model", "dc", "--local-solver", "clarabel"], "--local-solver"),
    (["run", "case14", "--model", "dc", "--local-updates", "2"], "--local-updates"),
    (["run", "case14", "--model", "dc", "--eta", "sqrt"], "--eta"),
    (["run", "case14", "--model", "dc", "--ac-check", "--objective", "cost"], "--ac-check, --objective"),
    (["run", "case14", "--line-scale", "2"], "--line-scale"),
    (["learn", "digits", "--label", "y"], "--label"),
    (["learn", "elastic-net", "--algorithm", "noisy-admm", "--label", "y"], "--label"),
], ids=lambda v: "-".join(v) if isinstance(v, list) else v)
def test_a_flag_the_command_would_ignore_is_refused(capsys, argv, named):
    status, err = _status(capsys, argv)
    assert status == 2 and len(err) == 1 and named in err[0], err


def test_a_deployment_refuses_a_case_and_zones(capsys, tmp_path):
    d = tmp_path / "split"
    assert main(["-q", "partition", "case14", "--zones", "3", "--split", str(d)]) == 0
    base = ["run", "--deployment", str(d), "--no-evaluation", "--rounds", "1"]
    for extra, named in ((["case14"], "CASE case14"), (["--zones", "2"], "--zones"), (["--partition", "area"], "--partition")):
        status, err = _status(capsys, [*base, *extra])
        assert status == 2 and len(err) == 1 and named in err[0] and "not read" in err[0], err


# ---------------------------------------------------------------- item 11: --help and docs/cli.md agree


def test_help_and_readme_agree_on_json_to_standard_output():
    assert "`--json -` writes the JSON to standard output, alone" in CLI_DOC
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name in ("solve", "run"):
        text = " ".join(sub[name].format_help().split())
        assert "- : to standard output, alone" in text, name
        assert "after the report" not in text, name


def test_readme_lists_every_notebook():
    listed = set(re.findall(r"^- `(\w+\.ipynb)`", README, flags=re.M))
    assert listed == {p.name for p in (ROOT / "examples").glob("*.ipynb")}


# ---------------------------------------------------------------- issue 38, bug 9: a closed standard error


@pytest.mark.parametrize("argv", [
    ["run", "case14", "--rounds", "2", "--no-reference", "--out", "D"],
    ["learn", "digits", "--rounds", "2", "--clients", "2", "--no-reference", "--out", "D"],
], ids=["run", "learn"])
def test_a_closed_standard_error_runs_as_with_dev_null(tmp_path, argv):
    """``2>&-`` gave ``sys.stderr = None``, on which the progress printer called ``isatty()``: exit 1, nothing written.
    Now the run goes on (its messages go nowhere, as with 2>/dev/null) and its directory is written."""
    import os
    import subprocess

    argv = [str(tmp_path / "D") if a == "D" else a for a in argv]
    proc = subprocess.run([sys.executable, "-m", "powerdp_entry", *argv], stdout=subprocess.PIPE, text=True, timeout=300,
                          preexec_fn=lambda: os.close(2), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert (tmp_path / "D" / "coordinator_view" / "summary.json").is_file()


# ---------------------------------------------------------------- issue 38, bug 4: solve's output directories


def _no_solve(monkeypatch):
    """Make the solve itself fail the test: every check must come before it."""
    import powerdp.opf.centralized as centralized

    def refuse(*a, **k):
        raise AssertionError("the solve ran before the output directory was checked")

    monkeypatch.setattr(centralized, "solve_opf", refuse)


@pytest.mark.parametrize("flag, name", [("--solution", "generators.csv"), ("--out", "buses.csv"), ("--out", "inputs.json")])
def test_solve_keeps_a_users_files_in_its_output_directory(capsys, tmp_path, monkeypatch, flag, name):
    """``solve --solution DIR`` replaced a user's generators.csv, ``solve --out DIR`` a buses.csv when DIR held no
    result.json, without --force; now refused before the solve, the file untouched, and replaced with --force."""
    d = tmp_path / "tables"
    d.mkdir()
    (d / name).write_text("the user's own file\n")
    with monkeypatch.context() as m:
        _no_solve(m)
        status, err = _status(capsys, ["-q", "solve", "case14", flag, str(d)])
    assert status == 2 and err == [f"powerdp: error: {flag} {d} already holds {name}; give --force to replace them, "
                                   f"or another {flag}"], err
    assert (d / name).read_text() == "the user's own file\n"
    assert _status(capsys, ["-q", "solve", "case14", flag, str(d), "--force"])[0] == 0
    assert (d / name).read_text() != "the user's own file\n"


@pytest.mark.parametrize("flag", ["--solution", "--out"])
def test_solve_checks_its_output_directory_before_solving(capsys, tmp_path, monkeypatch, flag):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _no_solve(monkeypatch)
    status, err = _status(capsys, ["-q", "solve", "case14", flag, str(blocker / "sub")])
    assert status == 2 and len(err) == 1 and str(blocker / "sub") in err[0], err


def test_solve_dc_keeps_a_users_tables(capsys, tmp_path):
    d = tmp_path / "dc"
    d.mkdir()
    (d / "lines.csv").write_text("mine\n")
    status, err = _status(capsys, ["-q", "solve", "case14", "--model", "dc", "--solution", str(d)])
    assert status == 2 and "already holds lines.csv" in err[0], err
    assert (d / "lines.csv").read_text() == "mine\n"


# ---------------------------------------------------------------- issue 38, bug 10: flags of another backend


@pytest.mark.parametrize("argv, flag", [
    (["run", "case14", "--workers", "2"], "--workers"),
    (["run", "case14", "--rank-timeout", "5"], "--rank-timeout"),
    (["run", "case14", "--backend", "process", "--rank-timeout", "5"], "--rank-timeout"),
    (["dispatch", "case14", "--periods", "2", "--workers", "2"], "--workers"),
    (["learn", "digits", "--workers", "2"], "--workers"),
    (["run", "case14", "--model", "dc", "--workers", "2"], "--workers"),
    (["learn", "breast_cancer", "--vertical", "--workers", "2"], "--workers"),
    (["run", "case14", "--round-timeout", "5"], "--round-timeout"),
    (["run", "case14", "--backend", "process", "--certs", "certs"], "--certs"),
], ids=["run-workers", "run-rank-timeout", "run-process-rank-timeout", "dispatch-workers", "learn-workers", "dc-workers",
        "vertical-workers", "run-round-timeout", "run-process-certs"])
def test_a_flag_of_another_backend_is_refused(capsys, tmp_path, argv, flag):
    """--workers with the serial backend and --rank-timeout without MPI were accepted and did nothing."""
    if argv[0] == "dispatch":
        import numpy as np
        import pandas as pd

        prof = tmp_path / "day.csv"
        pd.DataFrame({"load.2.p_mw": np.array([20.0, 21.0])}).to_csv(prof, index=False)
        argv = [*argv, "--profiles", str(prof)]
    status, err = _status(capsys, ["-q", *argv])
    assert status == 2 and len(err) == 1 and err[0].startswith(f"powerdp: error: {flag}: not used:"), err


# ---------------------------------------------------------------- issue 38: errors in the words of the command line


@pytest.mark.parametrize("argv, line", [
    (["run", "case14", "--bogus"], "unrecognized arguments: --bogus; see 'powerdp run --help'"),
    (["learn", "breast_cancer", "--vertical", "--bogus"], "unrecognized arguments: --bogus; see 'powerdp learn --help'"),
    (["dispatch", "case14", "--periods", "2", "--algorithm", "objg", "--target-epsilon", "1"],
     "--target-delta: objg (Gaussian) needs a total delta in (0, 1) over the horizon, e.g. 1e-5"),
    (["dispatch", "case14", "--periods", "2", "--clip-loads"], "--clip-loads: clips the perturbed loads of a private algorithm"),
    (["dispatch", "case14", "--periods", "2", "--algorithm", "nonprivate", "--target-epsilon", "1"],
     "--target-epsilon 1: nonprivate is not private; a budget needs one of objl, inpl, outl, exact/input/laplace, totl, "
     "hrcl, inps, tots, objg, inpg, exact/input/gaussian, totg, hrcg"),
    (["run", "case14", "--local-solver", "clarabel", "--ipopt-option", "print_level=5"], "--ipopt-option: Ipopt options need"),
    (["learn", "digits", "--split", "dirichlet:x"], "--split dirichlet:x: the Dirichlet concentration"),
], ids=["run-unknown", "vertical-unknown", "dispatch-target-delta", "dispatch-clip-loads", "dispatch-budget",
        "run-ipopt-option", "learn-split"])
def test_errors_name_the_flags_the_user_typed(capsys, tmp_path, argv, line):
    """Errors said ``target_delta = None:`` or ``clip_loads = True:`` (config keys) where the user typed flags, left
    the Gaussian algorithms out of a list, and sent unknown arguments to ``powerdp --help``."""
    if argv[0] == "dispatch":
        import pandas as pd

        prof = tmp_path / "day.csv"
        pd.DataFrame({"load.2.p_mw": [20.0, 21.0]}).to_csv(prof, index=False)
        argv = [*argv, "--profiles", str(prof)]
    status, err = _status(capsys, ["-q", *argv])
    assert status == 2 and len(err) == 1 and err[0].startswith(f"powerdp: error: {line}"), err


def test_a_config_file_keeps_its_keys_in_errors(capsys, tmp_path):
    """In a config file the user typed keys: an error there names the key and the file, not a flag."""
    toml = tmp_path / "run.toml"
    toml.write_text('[run]\ncase = "case14"\nadjacency = "bus"\nsensitivity = "paper"\n')
    status, err = _status(capsys, ["-q", "run", "--config", str(toml)])
    assert status == 2 and err[0].startswith(f"powerdp: error: {toml}: adjacency = 'bus':"), err


def test_a_config_file_without_a_case_is_refused(capsys, tmp_path):
    """A config file without ``case`` silently ran case14."""
    toml = tmp_path / "run.toml"
    toml.write_text("[run]\nrounds = 2\n")
    status, err = _status(capsys, ["-q", "run", "--config", str(toml)])
    assert status == 2 and err == [f"powerdp: error: {toml}: no case; give case = \"...\" in its [run] table, or CASE "
                                   "on the command line"], err
    assert _status(capsys, ["-q", "run", "case14", "--config", str(toml), "--no-reference"])[0] == 0


def test_run_help_names_the_zones_private_folder():
    text = " ".join(build_parser()._subparsers._group_actions[0].choices["run"].format_help().split())
    assert "DIR/zones/" not in text and "DIR/zones.private/" in text
    assert "implies --no-evaluation" in text


def test_dispatch_force_and_overwrite_are_one_flag():
    sub = build_parser()._subparsers._group_actions[0].choices["dispatch"]
    actions = {o: a for a in sub._actions for o in a.option_strings}
    assert actions["--force"] is actions["--overwrite"]


def test_help_names_papers_in_full_not_by_shorthand():
    """``--help`` said "000", "001's Algorithm 1", "Cor. 7.3": the project's shorthand for the papers. Every help page
    now names them in full (and says Corollary, equation)."""
    import argparse

    def pages(parser, name):
        yield name, parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from pages(sub, f"{name} {sub_name}")
        if getattr(parser, "vertical_parser", None) is not None:
            yield f"{name} --vertical", parser.vertical_parser.format_help()

    shorthand = re.compile(r"\b00[0-4]\b|\bCor\. |§|\beq\. ")
    found = [(name, m.group()) for name, text in pages(build_parser(), "powerdp") for m in shorthand.finditer(text)]
    assert not found, found
    learn = " ".join(dict(pages(build_parser(), "powerdp"))["powerdp learn"].split())
    assert '"Differentially Private Distributed Convex Optimization"' in learn
    assert "Privacy Amplification by Iteration for ADMM with (Strongly) Convex Objective Functions" in learn


@pytest.mark.parametrize("argv, flags", [
    (["run", "case14", "--algorithm", "nonprivate", "--adjacency", "bus", "--beta", "0.05"], "--adjacency, --beta"),
    (["run", "case14", "--algorithm", "exact", "--sensitivity", "paper"], "--sensitivity"),
    (["run", "case14", "--algorithm", "nonprivate", "--noise-on", "all"], "--noise-on"),
    (["dispatch", "case14", "--periods", "2", "--adjacency", "bus", "--relation", "event"], "--adjacency, --relation"),
    (["dispatch", "case14", "--periods", "2", "--algorithm", "exact", "--beta", "0.1"], "--beta"),
], ids=["run-adjacency-beta", "run-sensitivity", "run-noise-on", "dispatch-default", "dispatch-exact"])
def test_a_privacy_flag_of_a_non_private_run_is_refused(capsys, tmp_path, argv, flags):
    """docs/cli.md: a flag the command would ignore is refused rather than dropped, a privacy flag of a non-private run
    first (a new user's walk-through found --adjacency, --beta, --sensitivity, --noise-on and --relation accepted and
    recorded in config.json by runs that add no noise)."""
    if argv[0] == "dispatch":
        import pandas as pd

        prof = tmp_path / "day.csv"
        pd.DataFrame({"load.2.p_mw": [20.0, 21.0]}).to_csv(prof, index=False)
        argv = [*argv, "--profiles", str(prof)]
    status, err = _status(capsys, ["-q", *argv])
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith(f"powerdp: error: {flags}: not used: algorithm "), err
    assert err[0].endswith("is not private (it adds no noise)"), err
