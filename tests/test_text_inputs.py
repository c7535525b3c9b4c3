"""Input files get messages that name what is wrong (issue 25, item 8): a UTF-8 byte-order mark is read, a byte that is
not UTF-8 is named with its line (case, partition CSV, TOML), a JSON file given as a case is called one, and a
pandapower element powerdp cannot model is named; vertical learning counts a zero margin once (item 2)."""

import codecs

import numpy as np
import pytest

from powerdp.cli import main
from powerdp.errors import CaseDataError
from powerdp.files.text import NotUTF8, read_utf8
from powerdp.grid.loading import load_case
from powerdp.grid.partition import partition

CASE14 = load_case("case14")


def _case_text() -> str:
    from importlib import resources

    return (resources.files("powerdp.cases") / "case14.m").read_text(encoding="utf-8")


def _one_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("powerdp: error: "), err
    return err[0]


def test_read_utf8_drops_a_bom_and_names_a_bad_byte(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(codecs.BOM_UTF8 + "a\nΣ\n".encode())
    assert read_utf8(p) == "a\nΣ\n"
    p.write_bytes(b"abc\nd\xe9f\n")
    with pytest.raises(NotUTF8, match=r"byte 0xe9 at line 2, column 2"):
        read_utf8(p)


def test_a_case_file_with_a_bom_is_read(tmp_path):
    p = tmp_path / "case14.m"
    p.write_bytes(codecs.BOM_UTF8 + _case_text().encode())
    net = load_case(p)
    assert net.n_bus == 14
    np.testing.assert_array_equal(net.pd, CASE14.pd)


def test_a_latin1_byte_is_named_with_its_line(tmp_path, capsys):
    text = _case_text().replace("function mpc = case14", "function mpc = case14 % r\u00e9seau", 1).encode("latin-1")
    case = tmp_path / "latin.m"
    case.write_bytes(text)
    line = text[: text.index(b"\xe9")].count(b"\n") + 1
    err = _one_error(capsys, ["solve", str(case)])
    assert f"not UTF-8 text: byte 0xe9 at line {line}" in err and "MATLAB" not in err, err
    csv = tmp_path / "zones.csv"
    csv.write_bytes(b"bus,zone\n1,z\xe9ro\n")
    assert "not UTF-8 text: byte 0xe9 at line 2, column 4" in _one_error(capsys, ["partition", "case14", "--from", str(csv)])
    toml = tmp_path / "run.toml"
    toml.write_bytes(b"[run]\ncase = \"case14\" # r\xe9seau\n")
    assert "not UTF-8 text: byte 0xe9 at line 2" in _one_error(capsys, ["run", "--config", str(toml)])


def test_a_partition_csv_with_a_bom_is_read(tmp_path):
    csv = tmp_path / "zones.csv"
    rows = "\n".join(f"{b},{int(b) % 2}" for b in CASE14.bus_ids)
    csv.write_bytes(codecs.BOM_UTF8 + f"bus,zone\n{rows}\n".encode())
    assert partition(CASE14, str(csv), allow_disconnected=True).n_zones == 2


def test_a_pandapower_json_file_given_as_a_case(tmp_path, capsys):
    import pandapower as pp
    import pandapower.networks as pn

    path = tmp_path / "net.json"
    pp.to_json(pn.case9(), str(path))
    err = _one_error(capsys, ["solve", str(path)])
    assert "a JSON file (a pandapower network?), not a MATPOWER .m case file" in err and "MATLAB" not in err, err


def test_a_pandapower_xward_is_named():
    import pandapower as pp
    import pandapower.networks as pn

    net = pn.case9()
    pp.create_xward(net, bus=4, ps_mw=1, qs_mvar=0.5, pz_mw=0, qz_mvar=0, r_ohm=0.1, x_ohm=1.0, vm_pu=1.0)
    with pytest.raises(CaseDataError, match=r"xward 0 \(an extended ward\) has no cost") as info:
        load_case(net)
    assert "NCOST" not in str(info.value) and "mpc" not in str(info.value)


def test_vertical_error_counts_a_zero_margin_once():
    from powerdp.apps.learning.vertical import error_rate

    y = np.array([1.0, -1.0, 1.0, -1.0])
    assert error_rate(y, np.zeros(4)) == 0.5  # one class right, one wrong: not 100 %
    assert error_rate(y, np.array([2.0, -1.0, -0.5, 0.5])) == 0.5
