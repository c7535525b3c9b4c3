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
