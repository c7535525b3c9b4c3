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
from powerdp.grid.matpower import parse_matpower
from powerdp.grid.network import bundled_path, load_case

CASE14_SOC = 8075.12


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
    with pytest.raises(CaseDataError, match=rf"line {n}: 'mpc.bus\(:, 3\) = 2 \* mpc.bus\(:, 3\);' is MATLAB code"):
        parse_matpower(text, "mycase.m")
    p = write_case(tmp_path, text)
    assert main(["solve", str(p)]) == 2
    one_error(capsys, str(p), f"line {n}", "MATLAB code")
    # computed scalars and matrices are code too
    for extra in ("mpc.baseMVA = 50 * 2;", "x = 3;", "mpc.extra_table = [1 2] * 3;", "if 1, mpc.baseMVA = 10; end"):
        with pytest.raises(CaseDataError, match="MATLAB code"):
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
