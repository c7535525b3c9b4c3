"""Profiles in (powerdp.grid.profiles) and public costs (powerdp.grid.public_costs): a user's profile table on a
MATPOWER case and on a pandapower net, a SimBench grid's first day, cost files, and every bad input as one line."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys

import numpy as np
import pandapower as pp
import pandapower.networks as pn
import pandas as pd
import pytest

import powerdp
from powerdp import DEFAULT_COSTS, Horizon, load_case, load_horizon, read_costs
from powerdp.errors import CaseDataError

T = 4


@pytest.fixture(scope="module")
def case14():
    return load_case("case14")


def _case14_table(net, path, rows=T, extra=None):
    """A small table: every load's p grows 10 % a period, generator row 2 available 10, 20, 30, 40 MW."""
    loads = net.bus_ids[(net.pd != 0) | (net.qd != 0)]
    S = net.base_mva
    df = pd.DataFrame({f"load.{b}.p_mw": net.pd[net.bus_index(b)] * S * (1 + 0.1 * np.arange(rows)) for b in loads})
    df["load.3.q_mvar"] = np.linspace(10.0, 13.0, rows)
    df["gen.2.p_mw"] = 10.0 * (1 + np.arange(rows))
    df.insert(0, "time", pd.date_range("2016-01-01", periods=rows, freq="30min").astype(str))
    for k, v in (extra or {}).items():
        df[k] = v
    df.to_csv(path, index=False)
    return path


def test_user_csv_on_case14(case14, tmp_path):
    path = _case14_table(case14, tmp_path / "p.csv")
    h = load_horizon("case14", periods=3, start=1, profiles=path)
    S = case14.base_mva
    assert isinstance(h, Horizon) and h.periods == 3 and h.start == 1
    assert h.pd.shape == h.qd.shape == (3, case14.n_bus) and h.gen_pmax.shape == (3, case14.n_gen)
    scale = 1 + 0.1 * np.arange(1, 4)
    np.testing.assert_allclose(h.pd.sum(1), case14.pd.sum() * scale, rtol=1e-12)
    # bus 3's q has its own profile; the others follow their p at a constant power factor
    j3 = h.load_names.index("load.3")
    np.testing.assert_allclose(h.load_q[:, j3] * S, [11.0, 12.0, 13.0])
    j4 = h.load_names.index("load.4")
    np.testing.assert_allclose(h.load_q[:, j4], case14.qd[case14.bus_index(4)] * scale)
    np.testing.assert_allclose(h.qd[:, case14.bus_index(4)], h.load_q[:, j4])
    assert h.load_bus[j4] == case14.bus_index(4)
    # generator row 2 is a renewable capped by its profile; the others keep Pmax
    g2 = h.gen_names.index("gen.2")
    assert list(h.gen_kind) == ["renewable" if g == g2 else "conventional" for g in range(case14.n_gen)]
    np.testing.assert_allclose(h.gen_pmax[:, g2] * S, [20.0, 30.0, 40.0])
    np.testing.assert_allclose(np.delete(h.gen_pmax, g2, axis=1), np.delete(np.tile(case14.pmax, (3, 1)), g2, axis=1))
    assert h.period_minutes == 30.0 and h.labels[0].startswith("2016-01-01 00:30")
    # case14 has costs: they are kept (no curtailment price on them, no offset)
    np.testing.assert_array_equal(h.network.cost_c1, case14.cost_c1)
    assert not h.curtailment_offset.any()
    # the network is period 0's, network_at(t) any period's: more load costs more
    np.testing.assert_allclose(h.network.pd, h.pd[0])
    costs = [powerdp.solve_opf(h.network_at(t), solver="clarabel").objective for t in range(3)]
    assert costs[0] < costs[1] < costs[2]
    assert h.network_at(2).pmax[g2] * S == pytest.approx(40.0)


def test_csv_names_loads_by_bus_not_position(case14, tmp_path):
    df = pd.DataFrame({"load.9.p_mw": [1.0, 2.0]})
    df.to_csv(tmp_path / "one.csv", index=False)
    h = load_horizon("case14", periods=2, profiles=tmp_path / "one.csv")
    b9 = case14.bus_index(9)
    np.testing.assert_allclose(h.pd[:, b9] * case14.base_mva, [1.0, 2.0])
    np.testing.assert_allclose(np.delete(h.pd, b9, axis=1), np.tile(np.delete(case14.pd, b9), (2, 1)))
    assert h.labels == ("period 0", "period 1") and h.period_minutes == 15.0


def test_parquet_table(case14, tmp_path):
    df = pd.DataFrame({"load.9.p_mw": [1.0, 2.0]})
    engine = importlib.util.find_spec("pyarrow") or importlib.util.find_spec("fastparquet")
    if engine is None:
        (tmp_path / "p.parquet").write_bytes(b"PAR1")
        with pytest.raises(CaseDataError, match="pyarrow"):
            load_horizon("case14", periods=2, profiles=tmp_path / "p.parquet")
        pytest.skip("no parquet engine (pyarrow or fastparquet) installed: checked only that the error names pyarrow")
    df.to_parquet(tmp_path / "p.parquet")
    h = load_horizon("case14", periods=2, profiles=tmp_path / "p.parquet")
    np.testing.assert_allclose(h.pd[:, case14.bus_index(9)] * case14.base_mva, [1.0, 2.0])


# ----------------------------------------------------------------------------- a pandapower net without costs


@pytest.fixture(scope="module")
def _pp_case14():
    net = pn.case14()
    net.poly_cost = net.poly_cost.iloc[0:0]
    pp.create_sgen(net, bus=8, p_mw=30.0, type="wind onshore")
    pp.create_sgen(net, bus=13, p_mw=20.0, type="biomass")
    return net


@pytest.fixture
def pp_net(_pp_case14):
    """pandapower's case14 without its costs, with two static generators (a wind plant and a biomass plant)."""
    return copy.deepcopy(_pp_case14)


def test_pandapower_net_sgens_become_curtailable_generators(pp_net, tmp_path):
    df = pd.DataFrame({"load.0.p_mw": [20.0, 25.0, 30.0], "sgen.0.p_mw": [5.0, 30.0, 12.0], "sgen.1.p_mw": [1.0, 2.0, 3.0]})
    df.to_csv(tmp_path / "p.csv", index=False)
    h = load_horizon(pp_net, periods=3, profiles=tmp_path / "p.csv")
    S = h.network.base_mva
    names = list(h.gen_names)
    assert names[0] == "ext_grid.0" and {"sgen.0", "sgen.1"} <= set(names)
    kinds = dict(zip(names, h.gen_kind))
    assert kinds["ext_grid.0"] == "import" and kinds["sgen.0"] == kinds["sgen.1"] == "renewable"
    assert all(kinds[f"gen.{i}"] == "conventional" for i in pp_net.gen.index)
    s0, s1 = names.index("sgen.0"), names.index("sgen.1")
    np.testing.assert_allclose(h.gen_pmax[:, s0] * S, [5.0, 30.0, 12.0])
    assert h.network.pmin[s0] <= 1e-9
    # public costs by type, the curtailment price off the renewables' linear cost
    c = DEFAULT_COSTS
    net = h.network
    assert net.cost_c1[s0] == pytest.approx((c.by_type["renewable"][1] - c.curtailment_price) * S)
    assert net.cost_c1[s1] == pytest.approx((c.by_type["biomass"][1] - c.curtailment_price) * S)
    assert net.cost_c1[0] == pytest.approx(c.by_type["import"][1] * S)
    assert net.cost_c2[0] == pytest.approx(c.by_type["import"][0] * S**2)
    g0 = names.index("gen.0")
    assert net.cost_c1[g0] == pytest.approx(c.by_type["conventional"][1] * S)
    np.testing.assert_allclose(h.curtailment_offset, c.curtailment_price * np.array([6.0, 32.0, 15.0]))
    # load 0 (pandapower bus 1) follows its profile; the other loads stay at their value
    j0 = h.load_names.index("load.0")
    b = h.load_bus[j0]
    np.testing.assert_allclose(h.pd[:, b] * S, [20.0, 25.0, 30.0])
    np.testing.assert_allclose(h.pd.sum(1) * S - [20.0, 25.0, 30.0], pp_net.load.p_mw.sum() - pp_net.load.p_mw[0])
    # its q follows p at the net's power factor
    np.testing.assert_allclose(h.load_q[:, j0] / h.load_p[:, j0], pp_net.load.q_mvar[0] / pp_net.load.p_mw[0])
    # the cheapest energy is used first: the wind plant runs at its available output
    r = powerdp.solve_opf(h.network_at(1), solver="clarabel")
    assert r.dispatch.pg[s0] * S == pytest.approx(30.0, rel=1e-4)


def test_pandapower_gen_with_a_profile_is_a_renewable(pp_net, tmp_path):
    pp_net.gen.loc[0, "min_p_mw"] = 10.0
    pd.DataFrame({"gen.0.p_mw": [15.0, 25.0]}).to_csv(tmp_path / "p.csv", index=False)
    h = load_horizon(pp_net, periods=2, profiles=tmp_path / "p.csv")
    S, g = h.network.base_mva, list(h.gen_names).index("gen.0")
    assert h.gen_kind[g] == "renewable" and h.network.pmin[g] == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(h.gen_pmax[:, g] * S, [15.0, 25.0])
    assert h.network.cost_c1[g] == pytest.approx(-DEFAULT_COSTS.curtailment_price * S)
    # the two sgens without a profile are available at their rating (30 and 20 MW)
    np.testing.assert_allclose(h.curtailment_offset, DEFAULT_COSTS.curtailment_price * np.array([15.0 + 50, 25.0 + 50]))
    assert h.network_at(1).pmax[g] * S == pytest.approx(25.0)


def test_base_mva_of_a_pandapower_net(pp_net, tmp_path):
    pd.DataFrame({"load.0.p_mw": [20.0, 30.0], "sgen.0.p_mw": [5.0, 6.0]}).to_csv(tmp_path / "p.csv", index=False)
    one = load_horizon(pp_net, periods=2, profiles=tmp_path / "p.csv", base_mva=1.0)
    hundred = load_horizon(pp_net, periods=2, profiles=tmp_path / "p.csv", base_mva=100.0)
    assert one.network.base_mva == 1.0 and hundred.network.base_mva == 100.0
    np.testing.assert_allclose(one.pd, 100 * hundred.pd)  # the same MW
    np.testing.assert_allclose(one.gen_pmax, 100 * hundred.gen_pmax)
    np.testing.assert_allclose(one.network.cost_c1, hundred.network.cost_c1 / 100)  # $/h per p.u.
    np.testing.assert_allclose(one.curtailment_offset, hundred.curtailment_offset)
    r1 = powerdp.solve_opf(one.network_at(1), solver="clarabel")
    r100 = powerdp.solve_opf(hundred.network_at(1), solver="clarabel")
    assert r1.objective == pytest.approx(r100.objective, rel=1e-5)
    with pytest.raises(CaseDataError, match="a MATPOWER case keeps its own baseMVA"):
        load_horizon("case14", periods=2, profiles=_case14_table(load_case("case14"), tmp_path / "c.csv"), base_mva=10)
    with pytest.raises(CaseDataError, match="base_mva = 0: give a positive number"):
        load_horizon(pp_net, periods=2, profiles=tmp_path / "p.csv", base_mva=0)


def test_loads_sit_where_pandapowers_export_puts_them(tmp_path):
    """Each load's profile lands on the bus pandapower's own export gives it, with a bus in the middle dropped."""
    net = pn.case30()
    net.poly_cost = net.poly_cost.iloc[0:0]
    net.bus.loc[int(net.load.bus.iloc[2]), "in_service"] = False  # its load is left out, the buses renumbered
    cut = int(net.load.bus.iloc[5])  # in service but cut off: pandapower's connectivity check drops it too
    net.line.loc[(net.line.from_bus == cut) | (net.line.to_bus == cut), "in_service"] = False
    net.trafo.loc[(net.trafo.hv_bus == cut) | (net.trafo.lv_bus == cut), "in_service"] = False
    factor = {i: 1.5 + 0.1 * k for k, i in enumerate(net.load.index)}
    pd.DataFrame({f"load.{i}.p_mw": [net.load.p_mw[i] * factor[i]] for i in net.load.index}).to_csv(tmp_path / "p.csv", index=False)
    h = load_horizon(net, periods=1, profiles=tmp_path / "p.csv")
    assert h.n_load == len(net.load) - 2
    scaled = copy.deepcopy(h.network.pandapower_net)
    for i in net.load.index:
        scaled.load.loc[i, "p_mw"] = net.load.p_mw[i] * factor[i]
    np.testing.assert_allclose(h.pd[0], load_case(scaled).pd, atol=1e-12)


def test_cost_file_json_overrides(pp_net, tmp_path):
    pd.DataFrame({"sgen.0.p_mw": [5.0, 6.0]}).to_csv(tmp_path / "p.csv", index=False)
    (tmp_path / "c.json").write_text(json.dumps({
        "types": {"import": {"c1": 70}, "conventional": [0.0, 33.0, 1.0]},
        "curtailment_price": 10,
        "elements": {"sgen.1": {"c1": 4}},
        "shedding_weight": 5e5,
    }))
    h = load_horizon(pp_net, periods=2, profiles=tmp_path / "p.csv", costs=tmp_path / "c.json")
    net, S, names = h.network, h.network.base_mva, list(h.gen_names)
    assert net.cost_c1[names.index("ext_grid.0")] == pytest.approx(70 * S)
    assert net.cost_c2[names.index("ext_grid.0")] == pytest.approx(DEFAULT_COSTS.by_type["import"][0] * S**2)
    g0 = names.index("gen.0")
    assert (net.cost_c2[g0], net.cost_c1[g0], net.cost_c0[g0]) == pytest.approx((0.0, 33.0 * S, 1.0))
    assert net.cost_c1[names.index("sgen.0")] == pytest.approx(-10 * S)
    assert net.cost_c1[names.index("sgen.1")] == pytest.approx(4 * S)  # an element override: no curtailment price
    np.testing.assert_allclose(h.curtailment_offset, [50.0, 60.0])  # sgen.0 only
    assert h.costs.shedding_weight == 5e5 and h.costs.source.endswith("c.json")
    assert json.loads(json.dumps(h.costs.to_dict()))["types"]["import"]["c1"] == 70
    assert "curtailment of renewables: 10 $/MWh" in h.costs.table()


def test_cost_file_csv_overrides_a_matpower_case(case14, tmp_path):
    (tmp_path / "c.csv").write_text("name,c2,c1,c0\nconventional,0,20,0\nrenewable,0,1,0\ngen.1,0.01,5,0\n"
                                    "curtailment,,30,\nshedding,,auto,\n")
    pd.DataFrame({"gen.2.p_mw": [10.0, 20.0]}).to_csv(tmp_path / "p.csv", index=False)
    c = read_costs(tmp_path / "c.csv")
    assert c.curtailment_price == 30 and c.shedding_weight == "auto" and c.elements == {"gen.1": (0.01, 5.0, 0.0)}
    # case14 has costs: kept unless the file says keep_case_costs false (JSON) or names the element
    h = load_horizon("case14", periods=2, profiles=tmp_path / "p.csv", costs=tmp_path / "c.csv")
    S = case14.base_mva
    np.testing.assert_allclose(h.network.cost_c1[1:], case14.cost_c1[1:])
    assert h.network.cost_c1[0] == pytest.approx(5 * S) and h.network.cost_c2[0] == pytest.approx(0.01 * S**2)
    (tmp_path / "c.json").write_text(json.dumps({"keep_case_costs": False, "types": {"conventional": {"c1": 20}}}))
    h = load_horizon("case14", periods=2, profiles=tmp_path / "p.csv", costs=tmp_path / "c.json")
    g2 = list(h.gen_names).index("gen.2")
    assert h.network.cost_c1[g2] == pytest.approx((0.0 - DEFAULT_COSTS.curtailment_price) * S)
    assert h.network.cost_c1[list(h.gen_names).index("gen.3")] == pytest.approx(20 * S)
    np.testing.assert_allclose(h.curtailment_offset, DEFAULT_COSTS.curtailment_price * np.array([10.0, 20.0]))


@pytest.mark.parametrize(("text", "suffix", "match"), [
    ('{"types": {"gas": {"c3": 1}}}', ".json", r"type 'gas' has unknown field\(s\) c3"),
    ('{"types": {"gas": {"c2": -1}}}', ".json", "type 'gas' field c2 is negative"),
    ('{"curtailment_price": "cheap"}', ".json", "curtailment_price = 'cheap' is not a number"),
    ('{"prices": {}}', ".json", r"unknown key\(s\) prices"),
    ("name,c2,c1\ngas,0,x\n", ".csv", "type 'gas' field c1 = 'x' is not a number"),
    ("name,c2,c1,c9\ngas,0,1,2\n", ".csv", r"unknown column\(s\) c9"),
])
def test_bad_cost_file_is_one_line(tmp_path, text, suffix, match):
    path = tmp_path / f"c{suffix}"
    path.write_text(text)
    with pytest.raises(CaseDataError, match=match) as err:
        read_costs(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


# ----------------------------------------------------------------------------- bad profiles: one line, exit status 2


@pytest.mark.parametrize(("columns", "kwargs", "match"), [
    ({"load.7.p_mw": [1.0, 2.0]}, {}, r"column load\.7\.p_mw names no load: case14 bus 7 has Pd = Qd = 0"),
    ({"load.99.p_mw": [1.0, 2.0]}, {}, r"column load\.99\.p_mw names no load: case14 has no bus 99"),
    ({"bus.2.p_mw": [1.0, 2.0]}, {}, r"column 'bus\.2\.p_mw' names no load or generator"),
    ({"gen.9.p_mw": [1.0, 2.0]}, {}, r"column gen\.9\.p_mw names no generator"),
    ({"gen.2.q_mvar": [1.0, 2.0]}, {}, "a generator's profile is its available p_mw only"),
    ({"sgen.0.p_mw": [1.0, 2.0]}, {}, "MATPOWER case, which has no sgen table"),
    ({"load.9.p_mw": [1.0, np.nan]}, {}, r"column 'load\.9\.p_mw', row 1: nan is not a finite number"),
    ({"load.9.p_mw": [1.0, "x"]}, {}, r"column 'load\.9\.p_mw', row 1: 'x' is not a finite number"),
    ({"gen.2.p_mw": [1.0, -2.0]}, {}, "gen 2 field p_mw is negative in row 1"),
    ({"load.9.p_mw": [1.0, 2.0]}, {"periods": 2, "start": 1}, r"start 1 \+ periods 2 = 3 is past the 2 rows"),
    ({"load.9.p_mw": [1.0, 2.0]}, {"periods": 0}, "periods = 0: a horizon needs at least one period"),
    ({"load.9.p_mw": [1.0, 2.0]}, {"periods": -3}, "periods = -3"),
    ({"load.9.p_mw": [1.0, 2.0]}, {"periods": 1, "start": -1}, "start = -1"),
    ({"load.9.p_mw": [1.0, 2.0]}, {"periods": 1.5}, "periods = 1.5: give a whole number"),
])
def test_bad_profiles_are_one_line(tmp_path, columns, kwargs, match):
    pd.DataFrame(columns).to_csv(tmp_path / "p.csv", index=False)
    kwargs = {"periods": 2, **kwargs}
    with pytest.raises(CaseDataError, match=match) as err:
        load_horizon("case14", profiles=tmp_path / "p.csv", **kwargs)
    assert "\n" not in str(err.value) and err.value.exit_status == 2


def test_bad_pandapower_profile_names_the_element(pp_net, tmp_path):
    pd.DataFrame({"sgen.5.p_mw": [1.0]}).to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(CaseDataError, match=r"profile column sgen\.5\.p_mw names no sgen \(the net's sgen indices are 0, 1\)"):
        load_horizon(pp_net, periods=1, profiles=tmp_path / "p.csv")
    pd.DataFrame({"load.99.q_mvar": [1.0]}).to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(CaseDataError, match=r"load\.99\.q_mvar names no load"):
        load_horizon(pp_net, periods=1, profiles=tmp_path / "p.csv")


def test_missing_inputs_are_one_line(tmp_path):
    with pytest.raises(CaseDataError, match="a horizon needs profiles"):
        load_horizon("case14", periods=2)
    with pytest.raises(CaseDataError, match="no such file"):
        load_horizon("case14", periods=2, profiles=tmp_path / "none.csv")
    (tmp_path / "p.txt").write_text("load.9.p_mw\n1\n")
    with pytest.raises(CaseDataError, match=r"give a \.csv or \.parquet file"):
        load_horizon("case14", periods=1, profiles=tmp_path / "p.txt")


def test_without_the_profiles_extra_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "simbench", None)  # `import simbench` now raises ImportError
    with pytest.raises(CaseDataError, match=r'SimBench grids need the profiles extra: pip install "powerdp\[profiles\]"') as err:
        load_horizon("simbench:1-HV-mixed--0-sw", periods=4)
    assert "\n" not in str(err.value) and err.value.exit_status == 2


def test_unknown_simbench_code_is_one_line():
    pytest.importorskip("simbench", reason="SimBench is the profiles extra: pip install 'powerdp[profiles]'")
    with pytest.raises(CaseDataError, match=r"simbench:1-XX-nothing--0-sw: not a SimBench grid code") as err:
        load_horizon("simbench:1-XX-nothing--0-sw", periods=4)
    assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------- SimBench


@pytest.fixture(scope="module")
def simbench_hv():
    """SimBench's 1-HV-mixed--0-sw read once: ``simbench.get_simbench_net`` then hands out copies of it."""
    sb = pytest.importorskip("simbench", reason="SimBench is the profiles extra: pip install 'powerdp[profiles]'")
    raw = sb.get_simbench_net("1-HV-mixed--0-sw")
    prof = sb.get_absolute_values(copy.deepcopy(raw), profiles_instead_of_study_cases=True)
    with pytest.MonkeyPatch.context() as mp:
        real = sb.get_simbench_net
        mp.setattr(sb, "get_simbench_net", lambda code: copy.deepcopy(raw) if code == "1-HV-mixed--0-sw" else real(code))
        yield prof


@pytest.fixture(scope="module")
def hv_day(simbench_hv):
    return load_horizon("simbench:1-HV-mixed--0-sw", periods=96)


def test_simbench_hv_first_day(hv_day, simbench_hv):
    """1-HV-mixed--0-sw (306 buses, 58 loads, 103 sgens, 3 external grids; sn_mva 1): its first day."""
    h, prof = hv_day, simbench_hv
    net = h.network
    S = net.base_mva
    assert S == 100.0  # not SimBench's 1 MVA, on which the zones' conic solves fail (docs/profiles.md)
    assert h.periods == 96 and h.period_minutes == 15.0
    assert h.labels[0] == "01.01.2016 00:00" and h.labels[-1] == "01.01.2016 23:45"
    assert net.n_bus == 64  # 306 pandapower buses, fused by their closed bus-bus switches
    assert h.pd.shape == h.qd.shape == (96, net.n_bus) and h.load_p.shape == (96, 58) and h.gen_pmax.shape == (96, 106)
    kinds = dict(zip(*np.unique(h.gen_kind, return_counts=True)))
    assert kinds == {"import": 3, "renewable": 103}
    assert h.gen_names[:3] == ("ext_grid.0", "ext_grid.1", "ext_grid.2")
    # the loads and available outputs are SimBench's absolute profiles (MW), summed per bus
    np.testing.assert_allclose(h.pd.sum(1) * S, prof[("load", "p_mw")].iloc[:96].sum(1), rtol=1e-10)
    np.testing.assert_allclose(h.qd.sum(1) * S, prof[("load", "q_mvar")].iloc[:96].sum(1), rtol=1e-10, atol=1e-9)
    j = h.load_names.index("load.5")
    np.testing.assert_allclose(h.load_p[:, j] * S, prof[("load", "p_mw")][5].iloc[:96])
    g = h.gen_names.index("sgen.10")
    np.testing.assert_allclose(h.gen_pmax[:, g] * S, prof[("sgen", "p_mw")][10].iloc[:96])
    ren = h.gen_kind == "renewable"
    assert (h.gen_pmax[:, ren] >= 0).all() and (net.pmin[ren] <= 1e-9).all()
    # the external grids import or export; the network is period 0's
    imp = h.gen_kind == "import"
    assert (net.pmin[imp] < 0).all() and (net.pmax[imp] > 0).all()
    np.testing.assert_allclose(net.pd, h.pd[0])
    np.testing.assert_allclose(net.cost_c1[ren] / S, -DEFAULT_COSTS.curtailment_price)
    assert 50 < h.pd.sum(1).min() * S < h.pd.sum(1).max() * S < 250  # MW: measured 56.6 and 205.4


def test_simbench_hv_period_solves(hv_day):
    """A period's centralized SOC OPF solves: no shedding, every MW of wind used (the grid exports), the cost
    the price of its net import."""
    h = hv_day
    t = 48
    # Ipopt, as the dispatch's centralized reference: centralized Clarabel stops at NumericalError on the 100 MVA
    # base (objective within 1e-5 of Ipopt's) and at AlmostSolved on SimBench's 1 MVA one
    r = powerdp.solve_opf(h.network_at(t), solver="ipopt")
    S = h.network.base_mva
    pg = r.dispatch.pg
    imp, ren = h.gen_kind == "import", h.gen_kind == "renewable"
    assert r.success
    curtailed = (h.gen_pmax[t, ren] - pg[ren]).sum() * S
    assert curtailed < 0.1  # MW (of 1068 available)
    net_import = pg[imp].sum() * S
    assert net_import < 0  # measured: −945.7 MW
    price = DEFAULT_COSTS.by_type["import"]
    expected = (price[1] * pg[imp] * S + price[0] * (pg[imp] * S) ** 2).sum()
    assert r.generation_cost + h.curtailment_offset[t] == pytest.approx(expected, rel=1e-4)


def test_simbench_horizon_past_the_year(simbench_hv):
    with pytest.raises(CaseDataError, match=r"simbench:1-HV-mixed--0-sw: start 35100 \+ periods 96 = 35196 is past the 35136 rows"):
        load_horizon("simbench:1-HV-mixed--0-sw", periods=96, start=35100)


def test_a_users_table_over_a_grids_profiles_replaces_only_its_columns(caplog):
    """``--profiles`` on a SimBench grid replaced the grid's whole group of columns (load p: every load's) silently;
    now only the columns the table names, and one warning says which."""
    import logging

    from powerdp.grid.profiles import _override

    base = {("load", "p_mw"): (np.array([0, 1, 2]), np.arange(6.0).reshape(2, 3)),
            ("sgen", "p_mw"): (np.array([5]), np.ones((2, 1)))}
    user = {("load", "p_mw"): (np.array([1, 7]), np.array([[10.0, 70.0], [11.0, 71.0]]))}
    with caplog.at_level(logging.WARNING, logger="powerdp"):
        out = _override(base, user, "profile table day.csv", "SimBench grid X")
    idx, values = out[("load", "p_mw")]
    assert idx.tolist() == [0, 1, 2, 7]
    np.testing.assert_array_equal(values, [[0.0, 10.0, 2.0, 70.0], [3.0, 11.0, 5.0, 71.0]])
    assert out[("sgen", "p_mw")] is base[("sgen", "p_mw")]
    assert "profile table day.csv replaces 1 profile column(s) of SimBench grid X: load.1.p_mw" in caplog.text


def test_a_repeated_column_is_named_as_repeated(tmp_path):
    """pandas reads a repeated header X as X and X.1; the error named 'load.2.p_mw.1', a column the file does not have."""
    (tmp_path / "p.csv").write_text("time,load.2.p_mw,load.2.p_mw\n0,20,21\n1,22,23\n")
    with pytest.raises(CaseDataError, match=r"column 'load\.2\.p_mw' appears more than once") as err:
        load_horizon("case14", profiles=tmp_path / "p.csv", periods=2)
    assert "\n" not in str(err.value) and err.value.exit_status == 2
