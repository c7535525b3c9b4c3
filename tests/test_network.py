import numpy as np
import pytest

from powerdp.errors import CaseDataError
from powerdp.grid.loading import bundled_cases, load_case
from powerdp.grid.network import PM_ANGLE_PAD, voltage_product_bounds

from .conftest import shared_case
from .test_matpower import MINI


def write(tmp_path, text, name="case.m"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_bundled_cases_listed():
    assert {"case14", "case118"} <= set(bundled_cases())


def test_case14_per_unit(case14):
    net = case14
    assert (net.n_bus, net.n_gen, net.n_branch) == (14, 5, 20)
    assert net.base_mva == 100
    np.testing.assert_allclose(net.pd.sum(), 2.59)  # 259 MW
    np.testing.assert_allclose(net.bs[net.bus_index(9)], 0.19)
    # MATPOWER's case14 costs: 0.0430293 $/MW^2h on gen 1 -> c2 = 430.293 $/h per p.u.^2
    np.testing.assert_allclose(net.cost_c2[0], 0.0430292599 * 100**2, rtol=1e-9)
    # powermodels convention: +-360 degree limits become +-60 degrees; no rating means no limit
    np.testing.assert_allclose(net.angmin, -PM_ANGLE_PAD)
    np.testing.assert_allclose(net.angmax, PM_ANGLE_PAD)
    assert np.all(np.isinf(net.rate_a))
    # tap 0 means 1; transformer 4-7 has tap 0.978
    assert np.all(net.tap > 0)
    k = np.flatnonzero((net.bus_ids[net.f_bus] == 4) & (net.bus_ids[net.t_bus] == 7))[0]
    assert net.tap[k] == pytest.approx(0.978)


def test_matpower_convention_keeps_raw_limits(case14):
    raw = load_case("case14", convention="matpower")
    assert np.all(np.isinf(raw.angmin)) and np.all(np.isinf(raw.angmax))


def test_parallel_and_reversed_branches_share_one_pair(tmp_path):
    # case5 of PowerModels has branches 3->4 and 4->3: one bus pair, opposite signs
    net = load_case(shared_case("powermodels", "case5.m", checks="parallel and reversed branches share one bus pair, as in PowerModels"))
    assert net.n_branch == 7 and net.n_pair == 6
    k34 = np.flatnonzero((net.bus_ids[net.f_bus] == 3) & (net.bus_ids[net.t_bus] == 4))[0]
    k43 = np.flatnonzero((net.bus_ids[net.f_bus] == 4) & (net.bus_ids[net.t_bus] == 3))[0]
    assert net.branch_pair[k34] == net.branch_pair[k43]
    assert net.branch_pair_sign[k34] == -net.branch_pair_sign[k43]


def test_out_of_service_and_isolated_dropped(tmp_path):
    text = MINI.replace("];\nmpc.gen = [", "\t3\t4\t10\t0\t0\t0\t1\t1\t0\t135\t1\t1.1\t0.9;\n];\nmpc.gen = [")
    text = text.replace(
        "\t1\t2\t0.01\t0.1\t0.02\t250\t250\t250\t0\t0\t1\t-360\t360;",
        "\t1\t2\t0.01\t0.1\t0.02\t250\t250\t250\t0\t0\t1\t-360\t360;\n\t1\t3\t0.01\t0.1\t0.02\t250\t250\t250\t0\t0\t1\t-360\t360;\n\t1\t2\t0.02\t0.2\t0.0\t0\t0\t0\t0\t0\t0\t-30\t30;",
    )
    net = load_case(write(tmp_path, text))
    assert net.n_bus == 2  # bus 3 (type 4) dropped
    assert net.n_branch == 1  # 1-3 touches an isolated bus, the third branch is out of service
    assert list(net.branch_ids) == [1]


def test_voltage_product_bounds_match_powermodels_rule(case14):
    wr_min, wr_max, wi_min, wi_max = voltage_product_bounds(case14)
    # angmin < 0 < angmax: wr in [vmin^2 cos(60), vmax^2], wi in +-vmax^2 sin(60)
    np.testing.assert_allclose(wr_max, 1.06**2)
    np.testing.assert_allclose(wr_min, 0.94**2 * np.cos(PM_ANGLE_PAD))
    np.testing.assert_allclose(wi_max, 1.06**2 * np.sin(PM_ANGLE_PAD))
    np.testing.assert_allclose(wi_min, -(1.06**2) * np.sin(PM_ANGLE_PAD))


@pytest.mark.parametrize(
    "old, new, match",
    [
        ("\t1\t2\t0.01\t0.1", "\t1\t7\t0.01\t0.1", r"branch 1 has tbus 7, which is not a bus"),
        ("\t1\t0\t0\t300", "\t9\t0\t0\t300", r"generator 1 has bus 9, which is not a bus"),
        ("90\t30", "nan\t30", r"bus 2 \(row 2\) has nan in field Pd"),
        ("0.01\t0.1\t0.02", "0.01\tinf\t0.02", r"branch 1 \(row 1\) has inf in field x"),
        ("0.01\t0.1\t0.02", "0\t0\t0.02", "branch 1 has zero impedance"),
        ("1\t1.1\t0.9; % a", "1\t0.9\t1.1; % a", "bus 2 has Vmin 1.1 and Vmax 0.9"),
        ("250\t250\t250\t0\t0\t1", "-5\t250\t250\t0\t0\t1", "branch 1 has a negative rateA"),
        ("1\t2\t0.01", "1\t1\t0.01", "branch 1 connects bus 1 to itself"),
        ("\t2\t1\t90", "\t1\t1\t90", "bus 1 appears 2 times"),
        ("250\t10;", "5\t10;", "generator 1 has Pmin/Pmax = 10/5"),
        ("\t2\t0\t0\t3\t0.11\t5\t150;", "\t2\t0\t0\t5\t1\t1\t0.11\t5\t150;", "polynomial cost of degree 4"),
    ],
)
def test_bad_data_names_element_and_field(tmp_path, old, new, match):
    assert old in MINI
    path = write(tmp_path, MINI.replace(old, new, 1), "broken.m")
    with pytest.raises(CaseDataError, match=match) as info:
        load_case(path)
    assert "broken.m" in str(info.value)


def test_unknown_case_and_convention():
    with pytest.raises(CaseDataError, match="not a bundled case"):
        load_case("case99999")
    with pytest.raises(CaseDataError, match="unknown convention"):
        load_case("case14", convention="psse")


def test_pandapower_network_matches_matpower_file():
    import pandapower.networks as pn

    from_pp = load_case(pn.case14())
    from_m = load_case("case14")
    assert from_pp.n_bus == from_m.n_bus and from_pp.n_branch == from_m.n_branch
    np.testing.assert_allclose(np.sort(from_pp.pd), np.sort(from_m.pd), atol=1e-9)


def test_thermal_limit_fill(case14):
    filled = load_case("case14", fill_thermal_limits=True)
    assert np.all(np.isfinite(filled.rate_a)) and np.all(filled.rate_a > 0)
    # branch 1-2: |y| * vmax * sqrt(2 vmax^2 (1 - cos 60deg)) = |y| * vmax^2
    y = 1 / abs(0.01938 + 0.05917j)
    assert filled.rate_a[0] == pytest.approx(y * 1.06 * 1.06 * np.sqrt(2 - 2 * np.cos(PM_ANGLE_PAD)), rel=1e-9)


def test_named_check_and_correct_passes():
    """The MATPOWER import is a list of named check passes (raise) and correct passes (apply conventions)."""
    from importlib import resources

    from powerdp.grid import checks as nw
    from powerdp.grid.matpower import read_matpower

    assert [f.__name__ for f in nw.CHECKS][:2] == ["check_finite_values", "check_bus_ids"]
    assert all(f.__name__.startswith("check_") for f in nw.CHECKS)
    assert all(f.__name__.startswith("correct_") for f in nw.CORRECTIONS)
    data = read_matpower(resources.files("powerdp.cases") / "case14.m")

    def tables(convention="powermodels"):
        t = nw._Tables(data=data, convention=convention, src="case14.m", S=data.base_mva)
        for check in nw.CHECKS:
            check(t)
        return t

    data.bus[3, 12] = 1.2  # Vmin above Vmax at bus 4
    with pytest.raises(CaseDataError, match="bus 4 has Vmin 1.2"):
        tables()
    data.bus[3, 12] = 0.94
    t = tables()
    data.branch[0, 11:13] = [0, 0]  # both angle limits 0
    for correct in nw.CORRECTIONS:
        correct(t)
    assert t.angmin[0] == -PM_ANGLE_PAD and t.angmax[0] == PM_ANGLE_PAD  # PowerModels' ±1.0472 rad
    t = tables("matpower")
    for correct in nw.CORRECTIONS:
        correct(t)
    assert t.angmin[0] == -np.inf and t.angmax[0] == np.inf


# ---------------------------------------------------------------------------- HVDC lines


def test_dcline_arrays_per_unit(hvdc_case):
    net = load_case(hvdc_case)
    dc = net.dcline
    assert net.n_dcline == dc.n == 1 and "dclines=1" in repr(net) and net.summary()["n_dclines"] == 1
    assert net.bus_ids[dc.f_bus].tolist() == [1] and net.bus_ids[dc.t_bus].tolist() == [4]
    # PMIN = 0, PMAX = 80 MW, LOSS0 = 1 MW, LOSS1 = 0.02: p_fr in [0, 0.8], p_to = loss0 - (1 - loss1) p_fr
    np.testing.assert_allclose([dc.pminf[0], dc.pmaxf[0]], [0.0, 0.8])
    np.testing.assert_allclose([dc.pmint[0], dc.pmaxt[0]], [0.01 - 0.98 * 0.8, 0.01])
    np.testing.assert_allclose([dc.qminf[0], dc.qmaxf[0], dc.qmint[0], dc.qmaxt[0]], [-0.3, 0.3, -0.2, 0.25])
    np.testing.assert_allclose([dc.loss0[0], dc.loss1[0]], [0.01, 0.02])
    # 0.5 $/MWh on p_fr -> 50 $/h per p.u.
    np.testing.assert_allclose([dc.cost_c2[0], dc.cost_c1[0], dc.cost_c0[0]], [0.0, 50.0, 0.0])


def test_dcline_end_limits_follow_powermodels():
    from powerdp.grid.checks import dcline_end_limits

    # PowerModels' _mp2pm_dcline! cases, loss0 = 2, loss1 = 0.1 (g = 0.9)
    pmin = np.array([10.0, 10.0, -30.0, -30.0])
    pmax = np.array([50.0, -5.0, 50.0, -5.0])
    pminf, pmaxf, pmint, pmaxt = dcline_end_limits(pmin, pmax, np.full(4, 2.0), np.full(4, 0.1))
    np.testing.assert_allclose(pminf, [10.0, 10.0, (-30 + 2) / 0.9, (-30 + 2) / 0.9])
    np.testing.assert_allclose(pmaxf, [50.0, (5 + 2) / 0.9, 50.0, (5 + 2) / 0.9])
    np.testing.assert_allclose(pmint, [2 - 50 * 0.9, -5.0, 2 - 50 * 0.9, -5.0])
    np.testing.assert_allclose(pmaxt, [2 - 10 * 0.9, 2 - 10 * 0.9, 30.0, 30.0])


def test_dcline_out_of_service_dropped_and_zero_costs(tmp_path):
    from .conftest import HVDC_CASE

    off = HVDC_CASE.replace("\t1\t4\t1\t0\t0", "\t1\t4\t0\t0\t0")
    assert off != HVDC_CASE
    assert load_case(write(tmp_path, off)).n_dcline == 0
    # no mpc.dclinecost: the line costs nothing (as PowerModels adds zero costs)
    free = HVDC_CASE.split("mpc.dclinecost")[0]
    dc = load_case(write(tmp_path, free, "free.m")).dcline
    assert dc.n == 1 and dc.cost_c1[0] == 0.0 and dc.cost_c2[0] == 0.0 and dc.pwl_line.size == 0


def test_dcline_loss_corrections_as_powermodels(tmp_path, caplog):
    from .conftest import HVDC_CASE

    text = HVDC_CASE.replace("-20\t25\t1\t0.02;", "-20\t25\t-3\t1.5;")
    with caplog.at_level("WARNING", logger="powerdp.grid"):
        dc = load_case(write(tmp_path, text)).dcline
    assert dc.loss0[0] == 0.0 and dc.loss1[0] == 0.0
    assert "dcline 1: negative LOSS0" in caplog.text and "dcline 1: LOSS1 outside [0, 1)" in caplog.text


@pytest.mark.parametrize(
    "old,new,match",
    [
        ("\t1\t4\t1\t0\t0", "\t1\t9\t1\t0\t0", "dcline 1 has T_BUS 9, which is not a bus in mpc.bus"),
        ("\t1\t4\t1\t0\t0", "\t4\t4\t1\t0\t0", "dcline 1 connects bus 4 to itself"),
        ("\t1\t4\t1\t0\t0", "\t1\t4\t2\t0\t0", "dcline 1 has BR_STATUS 2; it must be 1"),
        ("\t0\t80\t-30", "\t0\tnan\t-30", r"dcline 1 \(row 1\) has nan in field PMAX"),
        ("\t0\t80\t-30", "\t90\t80\t-30", "dcline 1 has PMIN/PMAX = 90/80"),
        ("-20\t25\t1", "30\t25\t1", "dcline 1 has QMINT/QMAXT = 30/25"),
        ("\t1\t0.02;", "\t1;", "mpc.dcline has 16 columns; MATPOWER needs at least 17"),
        # LOSS1 = 1 breaks the end limits when PMIN or PMAX is negative
        ("\t0\t80\t-30\t30\t-20\t25\t1\t0.02;", "\t-10\t80\t-30\t30\t-20\t25\t1\t1;", "dcline 1 has LOSS1 1"),
        ("2\t0\t0\t2\t0.5\t0;", "3\t0\t0\t2\t0.5\t0;", "dcline 1 has cost model 3"),
    ],
)
def test_bad_dcline_data_names_line_and_field(tmp_path, old, new, match):
    from .conftest import HVDC_CASE

    assert old in HVDC_CASE
    path = write(tmp_path, HVDC_CASE.replace(old, new, 1), "broken.m")
    with pytest.raises(CaseDataError, match=match) as info:
        load_case(path)
    assert "broken.m" in str(info.value)
