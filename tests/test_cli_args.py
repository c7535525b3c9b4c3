"""Every numeric option of every command is checked while the command line is parsed (powerdp.cli.args), with the
option's name in a one-line error and exit status 2; argparse's own errors are one line too (issue 25: items 2, 3, 7,
and sweep --jobs)."""

import argparse
from pathlib import Path

import pytest

from powerdp.cli import build_parser, main
from powerdp.cli.args import integer, real

ROOT = Path(__file__).resolve().parents[1]


def _parsers(parser: argparse.ArgumentParser, seen=None):
    """Every parser of the command line: subcommands, sub-subcommands (privacy amplification) and the vertical
    learning parser that ``learn --vertical`` hands over to."""
    seen = [] if seen is None else seen
    if any(p is parser for p in seen):
        return seen
    seen.append(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _parsers(sub, seen)
    hosted = getattr(parser, "vertical_parser", None)
    if hosted is not None:
        _parsers(hosted, seen)
    return seen


def test_every_numeric_option_has_a_checking_type():
    parsers = _parsers(build_parser())
    assert len(parsers) >= 12  # powerdp, solve, export, partition, cases, run, sweep, plot, audit, learn (+ vertical), privacy...
    bare = [f"{p.prog} {'/'.join(a.option_strings)}" for p in parsers for a in p._actions if a.type in (int, float)]
    assert bare == [], f"numeric options parsed without a range check: {bare}"
    checked = [a for p in parsers for a in p._actions if getattr(a.type, "__name__", "") in ("integer", "number")]
    assert len(checked) >= 80


def test_integer_and_real_refuse_what_is_out_of_range():
    count = integer(1)
    assert count("3") == 3
    for text in ("0", "-1", "2.5", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            count(text)
    prob = real(0, 1, lo_open=True, hi_open=True)
    assert prob("0.5") == 0.5
    for text in ("0", "1", "1.5", "nan", "inf", "-inf", "1e400"):
        with pytest.raises(argparse.ArgumentTypeError):
            prob(text)
    step = real(0, lo_open=True, keywords=("auto",))
    assert step("auto") == "auto" and step("1e-300") == 1e-300
    with pytest.raises(argparse.ArgumentTypeError, match=r"give a number > 0 or auto"):
        step("-1")


def _status(capsys, argv) -> tuple[int, list[str]]:
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's errors
        status = exc.code
    return status, capsys.readouterr().err.strip().splitlines()


AMP = ["privacy", "amplification", "--smooth", "0.18", "--strong", "0.18", "--strong-g", "0.2", "--penalty", "0.5"]
VERTICAL = ["learn", "breast_cancer", "--vertical"]


@pytest.mark.parametrize(
    "argv, named",
    [
        # item 7: type errors were 20-26 lines of usage
        (["run", "case14", "--rounds", "2.5"], "--rounds"),
        (["run", "case14", "--algorithm", "foo"], "--algorithm"),
        (["run", "case14", "--epsilon", "nan"], "--epsilon"),
        (["run", "case14", "--workers", "0"], "--workers"),
        (["run", "case14", "--rank-timeout", "-1"], "--rank-timeout"),
        (["run", "case14", "--eta", "-0.5"], "--eta"),
        (["solve", "case14", "--shedding-weight", "-1"], "--shedding-weight"),
        (["partition", "case14", "--zones", "0"], "--zones"),
        (["learn", "digits", "--evaluate-every", "0"], "--evaluate-every"),
        (["learn", "digits", "--test-fraction", "1"], "--test-fraction"),
        (["learn", "elastic-net", "--algorithm", "noisy-admm", "--users", "1"], "--users"),
        (["audit", "case14", "--jobs", "0"], "--jobs"),
        # sweep --jobs: -1 was a ValueError traceback, 0 silently "one per core"; refused as by audit
        (["sweep", str(ROOT / "examples" / "sweep_small.toml"), "--out", "OUT", "--jobs", "-1"], "--jobs"),
        (["sweep", str(ROOT / "examples" / "sweep_small.toml"), "--out", "OUT", "--jobs", "0"], "--jobs"),
        # item 2: learn --vertical validated nothing
        ([*VERTICAL, "--algorithm", "gaussian", "--delta", "0"], "--delta"),
        ([*VERTICAL, "--algorithm", "gaussian", "--delta", "1.5"], "--delta"),
        ([*VERTICAL, "--algorithm", "gaussian", "--epsilon", "0"], "--epsilon"),
        ([*VERTICAL, "--lam", "-1"], "--lam"),
        ([*VERTICAL, "--clip", "0"], "--clip"),
        ([*VERTICAL, "--margin-clip", "0"], "--margin-clip"),
        ([*VERTICAL, "--margin-clip", "-1"], "--margin-clip"),
        ([*VERTICAL, "--workers", "-1"], "--workers"),
        ([*VERTICAL, "--checkpoint-every", "-3"], "--checkpoint-every"),
        ([*VERTICAL, "--rounds", "x"], "--rounds"),
        ([*VERTICAL, "--algorithm", "gaussian", "--target-epsilon", "1", "--epsilon", "1"], "--epsilon"),
        # item 3: privacy amplification
        (["privacy", "amplification", "--smooth", "0.18", "--penalty", "0.5", "--convex", "--sigma", "1", "--delta-grad", "1",
          "--users", "0", "--alpha", "2"], "--users"),
        ([*AMP, "--sigma", "1", "--delta-grad", "1", "--users", "10", "--alpha", "1"], "--alpha"),
        ([*AMP, "--sigma", "0.01", "--delta-grad", "1", "--users", "10", "--alpha", "2"], "--users 10 --alpha 2"),
        (["privacy", "amplification", "--smooth", "0.18", "--penalty", "0.5", "--convex", "--strong", "0.18"], "--strong"),
        (["privacy", "amplification", *[x for f in ("--smooth", "--strong", "--strong-g", "--penalty", "--norm-A", "--norm-AtB")
                                         for x in (f, "1e308")], "--sigma", "1e308", "--delta-grad", "1e308"], "double precision"),
        (["privacy", "amplification", *[x for f in ("--smooth", "--strong", "--strong-g", "--penalty", "--norm-A", "--norm-AtB")
                                         for x in (f, "1e-300")], "--sigma", "1e-300", "--delta-grad", "1e-300"], "double precision"),
        ([*AMP, "--sigma", "1e-300", "--delta-grad", "1"], "double precision"),
    ],
)
def test_bad_numbers_are_one_line_naming_the_option(capsys, tmp_path, argv, named):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    status, err = _status(capsys, argv)
    assert status == 2, err
    assert len(err) == 1, err
    assert err[0].startswith("powerdp: error: ") and named in err[0], err
    assert "Traceback" not in err[0]


def test_parse_errors_say_where_to_read_more(capsys):
    status, err = _status(capsys, ["run", "case14", "--rounds", "2.5"])
    assert status == 2 and err == ["powerdp: error: argument --rounds: '2.5' is not a whole number >= 1; see 'powerdp run --help'"]
    status, err = _status(capsys, [])
    assert status == 2 and len(err) == 1 and err[0].endswith("see 'powerdp --help'")


def test_privacy_amplification_takes_quiet_after_the_subcommand(capsys):
    assert main([*AMP, "-q"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["-q", *AMP]) == 0
    assert main([*AMP]) == 0
    assert "contraction L" in capsys.readouterr().out
