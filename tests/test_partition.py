"""Zone partitions (SPEC §4): sources, automatic methods, validation, model elements, shared keys.

The bundled ``cases/case14_3zones.csv`` was made with the automatic modularity method::

    net = load_case("case14")
    partition(net, zones=3, method="modularity").to_csv("cases/case14_3zones.csv")

(greedy modularity communities stopped at 3; zones of 5, 5 and 4 buses, all connected, 5
tie-lines). Kernighan-Lin and spectral bisection gave less balanced zones (4/3/7, 3/4/7).
``test_bundled_case14_3zones`` checks the file still equals what the method gives.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import defaultdict

import networkx as nx
import numpy as np
import pytest

from powerdp.errors import PartitionError
from powerdp.grid.loading import load_case
from powerdp.grid.partition import DCLINE_KINDS, METHODS, VARIABLE_KINDS, Partition, bundled_partition, partition

from .conftest import shared_case

CASE14_2ZONES = {b: ("A" if b <= 5 else "B") for b in range(1, 15)}


def write(tmp_path, text, name="zones.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def csv_of(mapping):
    return "".join(f"{b},{z}\n" for b, z in mapping.items())


def assert_connected_zones(part: Partition):
    g = part.network.graph()
    for z in range(part.n_zones):
        own = part.own_buses(z)
        assert own.size > 0
        assert nx.is_connected(g.subgraph(own.tolist())), f"zone {z} is not connected"


def brute_force_membership(part: Partition, flows: str) -> dict[tuple[str, int], set[int]]:
    """Key -> zones whose models hold it, straight from buses(z), pairs(z), branches(z)."""
    holders: dict[tuple[str, int], set[int]] = defaultdict(set)
    for z in range(part.n_zones):
        for b in part.buses(z).tolist():
            holders[("w", b)].add(z)
        for p in part.pairs(z).tolist():
            holders[("wr", p)].add(z)
            holders[("wi", p)].add(z)
        if flows == "variables":
            for l in part.branches(z).tolist():
                for kind in ("pf", "qf", "pt", "qt"):
                    holders[(kind, l)].add(z)
    return holders


def check_shared_keys(part: Partition):
    for flows in ("variables", "expressions"):
        holders = brute_force_membership(part, flows)
        expected = sorted(k for k, zs in holders.items() if len(zs) >= 2)
        got = part.shared_keys(flows)
        assert got == expected
        assert all(type(i) is int for _, i in got)
        for key in got:
            assert part.zones_sharing(key) == sorted(holders[key])
        by_zone = part.shared_by_zone(flows)
        assert set(by_zone) == set(range(part.n_zones))
        for z, keys in by_zone.items():
            assert keys == sorted(k for k in expected if z in holders[k])
        assert part.n_shared(flows).tolist() == [len(by_zone[z]) for z in range(part.n_zones)]


# ---------------------------------------------------------------------------
# automatic methods
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("n", [2, 3, 5])
def test_automatic_methods_case118(case118, method, n):
    part = partition(case118, zones=n, method=method, seed=3)
    assert part.n_zones == n
    assert part.labels == list(range(1, n + 1))
    assert part.zone_of_bus.shape == (case118.n_bus,)
    assert set(part.zone_of_bus.tolist()) == set(range(n))
    assert part.zone_sizes().sum() == case118.n_bus
    assert_connected_zones(part)
    again = partition(case118, zones=n, method=method, seed=3)
    np.testing.assert_array_equal(part.zone_of_bus, again.zone_of_bus)
    assert part.method == method


@pytest.mark.parametrize("method", METHODS)
def test_automatic_small_and_extreme_counts(case14, method):
    for n in (1, 2, 7, 14):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            part = partition(case14, zones=n, method=method)
        assert part.n_zones == n
        assert_connected_zones(part)
    with pytest.warns(UserWarning, match="single zone"):
        partition(case14, zones=1, method=method)


def test_automatic_errors(case14):
    with pytest.raises(PartitionError, match="14 buses into 15 zones"):
        partition(case14, zones=15)
    with pytest.raises(PartitionError, match="at least 1"):
        partition(case14, zones=0)
    with pytest.raises(PartitionError, match="unknown partition method 'metis'"):
        partition(case14, zones=3, method="metis")
    with pytest.raises(PartitionError, match="source .* or a number of zones"):
        partition(case14)


# ---------------------------------------------------------------------------
# bundled and published partitions
# ---------------------------------------------------------------------------


def test_bundled_case118_3areas(case118):
    part = bundled_partition(case118, 3)
    assert part is not None
    assert part.n_zones == 3
    assert part.labels == [1, 2, 3]
    assert part.zone_sizes().tolist() == [35, 38, 45]
    assert len(part.tie_lines()) == 8
    assert_connected_zones(part)
    assert bundled_partition(case118, 4) is None
    # by name too
    named = partition(case118, "case118_3areas")
    np.testing.assert_array_equal(named.zone_of_bus, part.zone_of_bus)


def test_bundled_case14_3zones(case14):
    part = bundled_partition(case14, 3)
    assert part is not None
    assert part.zone_sizes().tolist() == [5, 5, 4]
    assert_connected_zones(part)
    made = partition(case14, zones=3, method="modularity")
    np.testing.assert_array_equal(part.zone_of_bus, made.zone_of_bus)


def test_published_partitions_in_shared_data(case118):
    path = shared_case("partitions", "case14_2areas.csv", checks="the published PowerModelsADA partitions load and fit their cases")
    net14 = load_case(shared_case("powermodels", "case14.m", checks="the published PowerModelsADA partitions load and fit their cases"))
    part = partition(net14, path)
    assert part.zone_sizes().tolist() == [5, 9]
    pg118 = load_case(shared_case("pglib", "pglib_opf_case118_ieee.m", checks="the published PowerModelsADA partitions load and fit their cases"))
    part = partition(pg118, shared_case("partitions", "case118_3areas.csv", checks="the published PowerModelsADA partitions load and fit their cases"))
    np.testing.assert_array_equal(part.zone_of_bus, bundled_partition(case118, 3).zone_of_bus)
    # PowerModelsADA's case300 partition has a zone in 3 islands: an error unless allowed
    pg300 = load_case(shared_case("pglib", "pglib_opf_case300_ieee.m", checks="PGLib case300 with its published partition and its own area and zone columns"))
    p300 = shared_case("partitions", "case300_3areas.csv", checks="the published PowerModelsADA partitions load and fit their cases")
    with pytest.raises(PartitionError, match=r"case300_3areas.csv: zone 1 is not connected: its 159 buses form 3 islands"):
        partition(pg300, p300)
    part = partition(pg300, p300, allow_disconnected=True)
    assert part.n_zones == 3 and part.zone_sizes().sum() == 300
    check_shared_keys(part)


def test_bus_columns(case14):
    with pytest.warns(UserWarning, match="single zone"):
        part = partition(case14, "area")
    assert part.n_zones == 1 and part.copied_buses(0).size == 0 and part.shared_keys() == []
    pg300 = load_case(shared_case("pglib", "pglib_opf_case300_ieee.m", checks="PGLib case300 with its published partition and its own area and zone columns"))
    part = partition(pg300, "zone")
    assert part.labels == [1, 2, 3, 9]
    np.testing.assert_array_equal(np.asarray(part.labels)[part.zone_of_bus], pg300.bus_zone)


# ---------------------------------------------------------------------------
# CSV, dict and array sources
# ---------------------------------------------------------------------------


def test_csv_round_trip(case118, tmp_path):
    part = partition(case118, zones=5, method="spectral")
    path = part.to_csv(tmp_path / "p.csv")
    assert path.read_text().splitlines()[0] == "bus,zone"
    back = Partition.from_csv(case118, path)
    np.testing.assert_array_equal(back.zone_of_bus, part.zone_of_bus)
    assert back.labels == part.labels
    # string labels survive too
    named = partition(case118, {int(b): f"z{z}" for b, z in zip(case118.bus_ids, part.zone_of_bus)})
    back = Partition.from_csv(case118, named.to_csv(tmp_path / "named.csv"))
    assert back.labels == ["z0", "z1", "z2", "z3", "z4"]
    np.testing.assert_array_equal(back.zone_of_bus, part.zone_of_bus)


def test_csv_formats(case14, tmp_path):
    body = csv_of(CASE14_2ZONES)
    plain = partition(case14, write(tmp_path, body))
    assert plain.labels == ["A", "B"] and plain.zone_sizes().tolist() == [5, 9]
    for text in (
        "bus,zone\n" + body,
        "# made by hand\n\n" + body.replace(",", " , "),
        body.replace(",", "\t"),
        body.replace(",", ";"),
        "bus zone\n" + body.replace(",", " "),
    ):
        other = partition(case14, write(tmp_path, text))
        np.testing.assert_array_equal(other.zone_of_bus, plain.zone_of_bus)
    # labels are sorted: integers first, then strings; zone indices follow them
    mixed = {b: (10 if b <= 5 else (2 if b <= 9 else "x")) for b in range(1, 15)}
    part = partition(case14, write(tmp_path, csv_of(mixed)), allow_disconnected=True)
    assert part.labels == [2, 10, "x"]
    assert part.zone_of_bus[case14.bus_index(1)] == 1


def test_dict_and_array_sources(case14):
    by_dict = partition(case14, CASE14_2ZONES)
    by_list = partition(case14, ["A" if b <= 5 else "B" for b in case14.bus_ids])
    by_array = partition(case14, np.where(case14.bus_ids <= 5, 7, 3))
    np.testing.assert_array_equal(by_dict.zone_of_bus, by_list.zone_of_bus)
    assert by_array.labels == [3, 7]
    np.testing.assert_array_equal(by_array.zone_of_bus, 1 - by_dict.zone_of_bus)
    # a Partition is accepted as a source
    assert partition(case14, by_dict) is by_dict
    with pytest.raises(PartitionError, match="has 3 zones, not the requested 2"):
        partition(case14, "case14_3zones", zones=2)


# ---------------------------------------------------------------------------
# validation errors
# ---------------------------------------------------------------------------


def test_csv_unknown_bus_names_file_and_line(case14, tmp_path):
    lines = [f"{b},1" for b in range(1, 15)]
    lines.insert(6, "999,1")  # line 7
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(PartitionError, match=r"partition file .*zones.csv, line 7: bus 999 is not in network case14"):
        partition(case14, path)


def test_csv_missing_buses_listed(case118, tmp_path):
    path = write(tmp_path, "bus,zone\n1,1\n2,1\n")
    with pytest.raises(PartitionError, match=r"116 buses of network case118 have no zone: \[3, 4, 5, 6, 7, 8, 9, 10, 11, 12, \.\.\. \(106 more\)\]"):
        partition(case118, path)


@pytest.mark.parametrize(
    "line, match",
    [
        ("abc,1", r"line 4: the bus field is not a bus number$"),  # a file's content is never echoed (issue 19)
        ("4:1", r"line 4: expected 2 fields 'bus,zone', got 1$"),
        ("4,1,7", r"line 4: expected 2 fields 'bus,zone', got 3"),
        ("4,", r"line 4: bus 4 has an empty zone label"),
        ("3,2", r"line 4: bus 3 is listed again \(first at line 3\)"),
    ],
)
def test_csv_bad_lines(case14, tmp_path, line, match):
    lines = [f"{b},1" for b in range(1, 15)]
    lines[3] = line  # line 4
    with pytest.raises(PartitionError, match=match):
        partition(case14, write(tmp_path, "\n".join(lines) + "\n"))


def test_other_source_errors(case14, tmp_path):
    with pytest.raises(PartitionError, match="partition dict: bus 999 is not in network case14"):
        partition(case14, {**CASE14_2ZONES, 999: "A"})
    with pytest.raises(PartitionError, match=r"partition dict: 2 buses of network case14 have no zone: \[13, 14\]"):
        partition(case14, {b: 1 for b in range(1, 13)})
    with pytest.raises(PartitionError, match="zone array has 13 entries .* 14 buses"):
        partition(case14, np.ones(13, dtype=int))
    with pytest.raises(PartitionError, match="zone array: bus 3 has zone label nan"):
        partition(case14, np.where(case14.bus_ids == 3, np.nan, 1.0))
    with pytest.raises(PartitionError, match="no partition file 'nowhere.csv'"):
        partition(case14, "nowhere.csv")
    with pytest.raises(PartitionError, match="no 'bus,zone' lines"):
        partition(case14, write(tmp_path, "bus,zone\n"))
    with pytest.raises(PartitionError, match="cannot make a partition from a float"):
        partition(case14, 2.5)


def test_empty_zone(case14):
    with pytest.raises(PartitionError, match="zone 'east' is empty"):
        Partition(case14, np.zeros(14, dtype=int), ["west", "east"])
    with pytest.raises(PartitionError, match="bus 1 has zone index 5, outside 0..1"):
        Partition(case14, np.full(14, 5), [1, 2])


def test_disconnected_zone(case14):
    zones = {b: ("A" if b in (1, 8) else "B") for b in range(1, 15)}
    with pytest.raises(
        PartitionError, match=r"partition dict: zone 'A' is not connected: its 2 buses form 2 islands, e.g. buses \[1\] and \[8\]"
    ):
        partition(case14, zones)
    part = partition(case14, zones, allow_disconnected=True)
    assert part.zone_sizes().tolist() == [2, 12]


def test_disconnected_zone_accepted_with_a_note(case14, caplog):
    # zone 'A' = {1, 8}: two pieces; zone 'B' = {2, 3, 4, 5}: one; zone 'C' = {6, 7, 9..14} minus nothing: one
    zones = {b: ("A" if b in (1, 8) else "B" if b <= 5 else "C") for b in range(1, 15)}
    with caplog.at_level("WARNING", logger="powerdp.grid.partition"):
        part = partition(case14, zones, allow_disconnected=True)
    assert part.pieces().tolist() == [2, 1, 1]
    assert "partition dict: 1 of 3 zones is not connected: zone 'A' (2 pieces)" in caplog.text
    assert part.disconnected_note() in caplog.text
    assert partition(case14, CASE14_2ZONES).disconnected_note() is None
    # the zone's model is built on its own buses, both pieces with their neighbours
    from powerdp.opf.formulation import build_model

    m = build_model(case14, part.own_buses(0), objective="shedding")
    assert sorted(case14.bus_ids[list(m.OWN)].tolist()) == [1, 8]
    assert sorted(case14.bus_ids[list(m.BUS)].tolist()) == [1, 2, 5, 7, 8]


def test_partition_is_read_only(case14):
    part = partition(case14, CASE14_2ZONES)
    with pytest.raises(ValueError):
        part.zone_of_bus[0] = 1
    with pytest.raises(ValueError):
        part.own_buses(0)[0] = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.labels = [1, 2]
    with pytest.raises(PartitionError, match="zone index 2 is out of range 0..1"):
        part.buses(2)


# ---------------------------------------------------------------------------
# zone elements and shared variables
# ---------------------------------------------------------------------------


def test_case14_two_zones_by_hand(case14):
    part = partition(case14, CASE14_2ZONES)
    ids = case14.bus_ids
    # MATPOWER case14: the branches between buses 1-5 and 6-14 are 4-7, 4-9 and 5-6
    tie = part.tie_lines()
    assert sorted((int(ids[case14.f_bus[l]]), int(ids[case14.t_bus[l]])) for l in tie) == [(4, 7), (4, 9), (5, 6)]
    assert len(part.tie_pairs()) == 3
    assert ids[part.copied_buses(0)].tolist() == [6, 7, 9]
    assert ids[part.copied_buses(1)].tolist() == [4, 5]
    assert ids[part.buses(0)].tolist() == [1, 2, 3, 4, 5, 6, 7, 9]
    assert len(part.branches(0)) == 7 + 3 and len(part.branches(1)) == 10 + 3
    assert ids[case14.gen_bus[part.gens(0)]].tolist() == [1, 2, 3]
    # shared: w of buses 4, 5, 6, 7, 9 and wr, wi of the 3 tie pairs; plus 4 flows per tie-line
    assert len(part.shared_keys("expressions")) == 5 + 2 * 3
    assert len(part.shared_keys("variables")) == 5 + 2 * 3 + 4 * 3
    assert ("w", case14.bus_index(4)) in part.shared_keys()
    check_shared_keys(part)


def test_bus_shared_by_three_zones(case14):
    # zone {4} sits between {1, 2, 3, 5} and {6..14}; bus 5 touches all three
    zones = {b: (1 if b in (1, 2, 3, 5) else 2 if b == 4 else 3) for b in range(1, 15)}
    part = partition(case14, zones)
    b5 = case14.bus_index(5)
    assert part.zones_sharing(("w", b5)) == [0, 1, 2]
    assert part.zones_sharing(("w", case14.bus_index(14))) == [2]
    check_shared_keys(part)
    with pytest.raises(PartitionError, match="unknown variable kind 'pg'"):
        part.zones_sharing(("pg", 0))


@pytest.mark.parametrize("method", METHODS)
def test_shared_keys_brute_force_case118(case118, method):
    check_shared_keys(partition(case118, zones=5, method=method))


def test_shared_keys_bundled_case118(case118):
    part = bundled_partition(case118, 3)
    check_shared_keys(part)
    # every shared W-variable belongs to a tie pair or an end bus of one
    tie = part.tie_pairs()
    ends = set(case118.pair_f[tie].tolist()) | set(case118.pair_t[tie].tolist())
    expected = sorted([("w", b) for b in ends] + [(k, int(p)) for p in tie for k in ("wr", "wi")])
    assert part.shared_keys("expressions") == expected


def test_elements_match_formulation(case118):
    formulation = pytest.importorskip("powerdp.opf.formulation")
    part = partition(case118, zones=4, method="kernighan_lin")
    for z in range(part.n_zones):
        buses, branches, pairs, gens = formulation._zone_elements(case118, part.own_buses(z))
        np.testing.assert_array_equal(part.buses(z), buses)
        np.testing.assert_array_equal(part.branches(z), branches)
        np.testing.assert_array_equal(part.pairs(z), pairs)
        np.testing.assert_array_equal(part.gens(z), gens)


@pytest.mark.parametrize("flows", ["variables", "expressions"])
def test_shared_keys_match_pyomo_models(case14, flows):
    formulation = pytest.importorskip("powerdp.opf.formulation")
    import pyomo.environ as pyo

    part = bundled_partition(case14, 3)
    holders = defaultdict(set)
    for z in range(part.n_zones):
        m = formulation.build_model(case14, part.own_buses(z), flows=flows)
        for var in m.component_data_objects(pyo.Var, descend_into=True):
            name = var.parent_component().local_name
            if name in ("w", "wr", "wi", "pf", "qf", "pt", "qt"):
                holders[(name, int(var.index()))].add(z)
    assert part.shared_keys(flows) == sorted(k for k, zs in holders.items() if len(zs) > 1)


# ---------------------------------------------------------------------------
# reporting
# ---------------------------------------------------------------------------


def test_summary(case118):
    part = bundled_partition(case118, 3)
    df = part.summary()
    assert len(df) == part.n_zones
    assert list(df.columns) == [
        "zone", "label", "buses", "copied_buses", "generators", "load_mw", "load_mvar",
        "tie_lines", "shared_vars_expressions", "shared_vars_variables",
    ]
    assert df["buses"].sum() == case118.n_bus
    assert df["generators"].sum() == case118.n_gen
    np.testing.assert_allclose(df["load_mw"].sum(), case118.pd.sum() * case118.base_mva)
    np.testing.assert_allclose(df["load_mvar"].sum(), case118.qd.sum() * case118.base_mva)
    assert df["tie_lines"].sum() == 2 * len(part.tie_lines())
    assert (df["shared_vars_variables"] > df["shared_vars_expressions"]).all()
    assert df["copied_buses"].tolist() == [len(part.copied_buses(z)) for z in range(3)]
    text = str(part)
    assert text.startswith("Partition of case118 (118 buses) into 3 zones (method: file")
    assert "shared_vars_variables" in text and len(text.splitlines()) == 2 + part.n_zones
    assert "sizes=[35, 38, 45]" in repr(part)


# ---------------------------------------------------------------------------
# networks in islands, and the modularity fix-ups
# ---------------------------------------------------------------------------

BRANCH_FIELDS = ["branch_ids", "f_bus", "t_bus", "r", "x", "g_fr", "b_fr", "g_to", "b_to", "tap", "shift",
                 "rate_a", "angmin", "angmax"]


def case14_in_two_islands(net):
    """case14 without its 3 branches between buses 1-5 and 6-14."""
    ids = net.bus_ids
    low_f, low_t = ids[net.f_bus] <= 5, ids[net.t_bus] <= 5
    keep = low_f == low_t
    return dataclasses.replace(net, **{k: getattr(net, k)[keep] for k in BRANCH_FIELDS})


@pytest.mark.parametrize("method", METHODS)
def test_automatic_zones_never_span_islands(case14, method):
    net = case14_in_two_islands(case14)
    with pytest.raises(PartitionError, match="network case14 has 2 islands; .* at least 2 zones, not 1"):
        partition(net, zones=1, method=method)
    for n in (2, 3, 6):
        part = partition(net, zones=n, method=method)
        assert part.n_zones == n
        assert_connected_zones(part)
    part = partition(net, zones=2, method=method)
    assert net.bus_ids[part.own_buses(0)].tolist() == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("n", [2, 4])
def test_modularity_fixes_the_community_count(case118, monkeypatch, n):
    # greedy modularity stops at exactly n communities on a connected network; check the
    # deterministic merge (from singletons) and split (from one community) fix-ups anyway
    import powerdp.grid.zoning as zoning

    for fake in (np.arange(case118.n_bus), np.zeros(case118.n_bus, dtype=np.int64)):
        monkeypatch.setattr(zoning, "greedy_modularity_labels", lambda n_bus, u, v, k, fake=fake: fake.copy())
        part = partition(case118, zones=n, method="modularity")
        assert part.n_zones == n
        assert_connected_zones(part)
        again = partition(case118, zones=n, method="modularity")
        np.testing.assert_array_equal(part.zone_of_bus, again.zone_of_bus)


# ---------------------------------------------------------------------------
# HVDC lines
# ---------------------------------------------------------------------------


def _model_holders(net, part, flows):
    import pyomo.environ as pyo

    from powerdp.opf.formulation import build_model

    holders = defaultdict(set)
    for z in range(part.n_zones):
        m = build_model(net, part.own_buses(z), flows=flows)
        for var in m.component_data_objects(pyo.Var, descend_into=True):
            name = var.parent_component().local_name
            if name in VARIABLE_KINDS:
                holders[(name, int(var.index()))].add(z)
    return holders


@pytest.mark.parametrize("flows", ["variables", "expressions"])
def test_hvdc_line_between_zones_is_shared(hvdc_case, flows):
    net = load_case(hvdc_case)
    part = partition(net, "area")  # {1, 2} and {3, 4}: the line 1 -> 4 crosses
    assert part.tie_dclines().tolist() == [0]
    assert part.dclines(0).tolist() == [0] and part.dclines(1).tolist() == [0]
    assert "1 HVDC tie-lines" in str(part)
    shared = part.shared_keys(flows)
    # active powers are held by both end zones (the loss relation couples them), reactive by their own end
    assert ("p_dc_fr", 0) in shared and ("p_dc_to", 0) in shared
    assert ("q_dc_fr", 0) not in shared and ("q_dc_to", 0) not in shared
    assert part.zones_sharing(("q_dc_fr", 0)) == [0] and part.zones_sharing(("q_dc_to", 0)) == [1]
    holders = _model_holders(net, part, flows)
    assert shared == sorted(k for k, zs in holders.items() if len(zs) > 1)
    assert holders[("q_dc_fr", 0)] == {0} and holders[("q_dc_to", 0)] == {1}


def test_hvdc_line_inside_a_zone_is_not_shared(hvdc_case):
    net = load_case(hvdc_case)
    part = partition(net, {1: "A", 4: "A", 2: "B", 3: "B"}, allow_disconnected=True)
    assert part.tie_dclines().size == 0
    assert part.dclines(0).tolist() == [0] and part.dclines(1).size == 0
    assert not any(k[0] in DCLINE_KINDS for k in part.shared_keys())
    holders = _model_holders(net, part, "variables")
    assert {k: zs for k, zs in holders.items() if k[0] in DCLINE_KINDS} == {(k, 0): {0} for k in DCLINE_KINDS}


def test_automatic_zones_run_on_one_blas_thread(case118, monkeypatch):
    """The eigensolvers of the automatic methods run with one BLAS/OpenMP thread (spinning pool threads cost more
    CPU than they save on these small or sparse problems)."""
    from threadpoolctl import ThreadpoolController, threadpool_limits

    import powerdp.grid.zoning as zoning

    seen = []
    spectral = zoning._AUTOMATIC["spectral"]

    def recording(net, zones, seed):
        seen.extend(p["num_threads"] for p in ThreadpoolController().info())
        return spectral(net, zones, seed)

    monkeypatch.setitem(zoning._AUTOMATIC, "spectral", recording)
    with threadpool_limits(limits=2):  # as on a machine with two cores, whatever this one has
        a = partition(case118, zones=4, method="spectral", seed=0)
    assert seen and set(seen) == {1}
    monkeypatch.setitem(zoning._AUTOMATIC, "spectral", spectral)
    assert np.array_equal(a.zone_of_bus, partition(case118, zones=4, method="spectral", seed=0).zone_of_bus)


def test_disconnected_zones_are_named_in_good_grammar(case14):
    """"zones 1 are not connected either" (one zone) and a hint in config keys only; now "zone 1 is ... either", and the
    command line's flag."""
    zones = {b: ("A" if b in (1, 8) else "B" if b in (2, 14) else "C") for b in range(1, 15)}
    with pytest.raises(PartitionError) as err:
        partition(case14, zones)
    text = str(err.value)
    assert "; zone 'B' is not connected either" in text and "zones 'B' are" not in text
    assert "drop --no-allow-disconnected" in text
