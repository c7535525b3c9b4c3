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


# ---------------------------------------------------------------- issue 38: one UTF-8 reader for every text input


def _latin1(path, text: str):
    path.write_bytes(text.encode("latin-1"))
    return path


def test_every_csv_input_names_a_byte_that_is_not_utf8(tmp_path, capsys):
    """Learning CSVs, bounds files, profile tables, cost files and zone load files went through the locale's codec (a
    raw codec message, or mojibake); they now go through the one reader of cases, partitions and TOML files."""
    from powerdp.apps.power_flow.zone_data import zone_network
    from powerdp.errors import ConfigError
    from powerdp.grid.profiles import load_horizon
    from powerdp.grid.public_costs import read_costs

    data = _latin1(tmp_path / "data.csv", "x1,x2,label\n0.1,0.2,caf\u00e9\n" + "0.3,0.4,b\n" * 9)
    assert "not UTF-8 text: byte 0xe9 at line 2, column 12" in _one_error(capsys, ["-q", "learn", str(data)])
    good = tmp_path / "good.csv"
    good.write_text("x1,x2,label\n" + "0.1,0.2,a\n0.3,0.4,b\n" * 6)
    bounds = _latin1(tmp_path / "bounds.csv", "column,low,high\nx1,0,1 % \u00e9\nx2,0,1\n")
    assert "not UTF-8 text: byte 0xe9 at line 2" in _one_error(capsys, ["-q", "learn", str(good), "--bounds", str(bounds)])
    prof = _latin1(tmp_path / "day.csv", "load.2.p_mw,note\n20,\u00e9t\u00e9\n")
    with pytest.raises(CaseDataError, match=r"day.csv: not UTF-8 text: byte 0xe9 at line 2, column 4"):
        load_horizon("case14", periods=1, profiles=prof)
    costs = _latin1(tmp_path / "costs.csv", "name,c2,c1,c0\nhydro\u00e9,0,1,0\n")
    with pytest.raises(CaseDataError, match=r"not UTF-8 text: byte 0xe9 at line 2, column 6"):
        read_costs(costs)
    dep = tmp_path / "dep"
    assert main(["-q", "partition", "case14", "--zones", "3", "--split", str(dep)]) == 0
    loads = dep / "zone_0.private" / "loads.csv"
    loads.write_bytes(loads.read_bytes() + b"# \xe9\n")
    with pytest.raises(ConfigError, match=r"zone 0: .*loads.csv: not UTF-8 text: byte 0xe9"):
        zone_network(dep, 0)


def test_a_partition_header_names_its_columns(tmp_path):
    """A partition CSV with header ``zone,bus`` was read by position ("bus 0" error); the header now says which is
    which, and a header naming neither is refused."""
    bundled = partition(CASE14, "case14_3zones")
    rows = [f"{zone},{bus}" for bus, zone in zip(CASE14.bus_ids, bundled.zone_of_bus, strict=True)]
    path = tmp_path / "zb.csv"
    path.write_text("zone,bus\n" + "\n".join(rows) + "\n")
    np.testing.assert_array_equal(partition(CASE14, str(path)).zone_of_bus, bundled.zone_of_bus)
    path.write_text("Bus;Area\n" + "\n".join(r.split(",")[1] + ";" + r.split(",")[0] for r in rows) + "\n")
    np.testing.assert_array_equal(partition(CASE14, str(path)).zone_of_bus, bundled.zone_of_bus)
    from powerdp.errors import PartitionError

    path.write_text("bus,owner\n" + "\n".join(rows) + "\n")
    with pytest.raises(PartitionError, match=r"line 1: header bus,owner: name the columns bus and zone"):
        partition(CASE14, str(path))
