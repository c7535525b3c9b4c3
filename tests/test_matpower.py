import numpy as np
import pytest

from powerdp.errors import CaseDataError
from powerdp.grid.matpower import parse_matpower, read_matpower

MINI = """function mpc = mini
mpc.version = '2';
mpc.baseMVA = 100;
%% bus data
mpc.bus = [
	1	3	0	0	0	0	1	1	0	135	1	1.1	0.9;
	2	1	90	30	0	0	1	1	0	135	1	1.1	0.9; % a comment
];
mpc.gen = [
	1	0	0	300	-300	1	100	1	250	10;
];
mpc.branch = [
	1	2	0.01	0.1	0.02	250	250	250	0	0	1	-360	360;
];
mpc.gencost = [
	2	0	0	3	0.11	5	150;
];
mpc.bus_name = {
	'one';
	'two';
};
"""


def test_parse_minimal_case():
    data = parse_matpower(MINI)
    assert data.name == "mini"
    assert data.base_mva == 100
    assert data.bus.shape == (2, 13)
    assert data.gen.shape == (1, 10)
    assert data.branch.shape == (1, 13)
    np.testing.assert_allclose(data.gencost[0], [2, 0, 0, 3, 0.11, 5, 150])
    assert data.bus[1, 2] == 90


def test_bundled_case118_tables(tmp_path):
    from importlib import resources

    path = resources.files("powerdp.cases") / "case118.m"
    data = read_matpower(str(path))
    assert data.bus.shape[0] == 118
    assert data.gen.shape[0] == 54
    assert data.branch.shape[0] == 186
    assert data.gencost.shape[0] == 54


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda t: t.replace("mpc.baseMVA = 100;", ""), "missing field mpc.baseMVA"),
        (lambda t: t.replace("mpc.branch = [", "mpc.branchX = ["), "missing field mpc.branch"),
        (lambda t: t.replace("0.01\t0.1", "0.01\tabc"), r"line \d+: mpc.branch has a non-numeric entry in column 4"),
        (lambda t: t.replace("1\t1.1\t0.9; % a comment", "1\t1.1; % a comment"), "mpc.bus row 2 has 12 columns"),
        (lambda t: t.replace("\t1\t0\t0\t300\t-300\t1\t100\t1\t250\t10;", "\t1\t0\t0\t300;"), "mpc.gen has 4 columns"),
        (lambda t: t.replace("mpc.version = '2';", "mpc.version = '1';"), "only MATPOWER format version 2"),
        (lambda t: t.replace("150;\n];", "150;"), "mpc.gencost opens '\\[' but never closes it"),
    ],
)
def test_malformed_files_name_the_field(tmp_path, mutate, match):
    path = tmp_path / "bad.m"
    path.write_text(mutate(MINI))
    with pytest.raises(CaseDataError, match=match) as info:
        read_matpower(path)
    assert "bad.m" in str(info.value)


def test_missing_file():
    with pytest.raises(CaseDataError, match="case file not found"):
        read_matpower("/nonexistent/case.m")


def test_a_large_one_line_case_is_parsed_in_bounded_memory(tmp_path):
    """Issue 38, bug 12: a 68 MB one-line case took 1.4-2.3 GB (a Python float and list per entry, 17-20 times the
    text). The matrices now go through numpy's C reader one row at a time: the parse's peak of Python and numpy
    allocations (tracemalloc: independent of the machine's other load) stays under 8 times the file (5 times measured;
    17 times before)."""
    import tracemalloc

    n = 200_000
    path = tmp_path / "one_line.m"
    with open(path, "w") as fh:
        fh.write("function mpc = one_line\nmpc.version = '2';\nmpc.baseMVA = 100;\nmpc.bus = [")
        fh.write(";".join(f"{i} 1 97.6 44.2 0 0 1 1.0536 -13.1 230 1 1.1 0.9" for i in range(1, n + 1)))
        fh.write("];\nmpc.gen = [1 100 0 100 -100 1 100 1 200 0];\nmpc.branch = [1 2 0.01 0.1 0 0 0 0 0 0 1 -360 360];\n")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        data = read_matpower(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data.bus.shape == (n, 13) and data.bus[-1, 0] == n
    assert peak < 8 * size, f"parsing a {size / 1e6:.0f} MB case took {peak / 1e6:.0f} MB"


def test_a_case_without_a_required_field_fails_before_parsing_its_matrices(tmp_path, monkeypatch):
    import powerdp.grid.matpower as matpower

    path = tmp_path / "no_base.m"
    path.write_text("mpc.bus = [1 3 0 0 0 0 1 1 0 230 1 1.1 0.9];\n")
    monkeypatch.setattr(matpower, "_parse_matrix", lambda *a: pytest.fail("a matrix was parsed"))
    with pytest.raises(CaseDataError, match=r"missing field mpc.baseMVA"):
        matpower.read_matpower(path)
    monkeypatch.setattr(matpower, "MAX_CASE_BYTES", 10)
    with pytest.raises(CaseDataError, match=r"larger than any power-flow case"):
        matpower.read_matpower(path)
