"""powerdp.grid.greedy_modularity finds networkx's greedy modularity communities, merge for merge."""

import networkx as nx
import numpy as np
import pytest

from powerdp.grid.greedy_modularity import greedy_modularity_labels
from powerdp.grid.loading import load_case
from powerdp.grid.partition import partition
from powerdp.grid.zoning import _edges, _relabel_by_first_bus

from .shared_data import shared_case


def _networkx_labels(n: int, u: np.ndarray, v: np.ndarray, k: int) -> np.ndarray:
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(u.tolist(), v.tolist()))
    label = np.empty(n, dtype=np.int64)
    for z, c in enumerate(nx.community.greedy_modularity_communities(g, cutoff=k, best_n=k)):
        label[np.fromiter(c, dtype=np.int64)] = z
    return _relabel_by_first_bus(label)


def _same_as_networkx(n, u, v, k) -> bool:
    mine = greedy_modularity_labels(n, u, v, k)
    return mine is not None and np.array_equal(_relabel_by_first_bus(mine), _networkx_labels(n, u, v, k))


@pytest.mark.parametrize("case", ["case14", "case118"])
def test_the_bundled_cases_communities_are_networkxs(case):
    net = load_case(case)
    u, v = _edges(net)
    for k in (2, 3, 4, 8, 13):
        assert _same_as_networkx(net.n_bus, u, v, k), k


@pytest.mark.parametrize("name", ["pglib_opf_case300_ieee.m", "pglib_opf_case2000_goc.m"])
def test_larger_cases_communities_are_networkxs(name):
    net = load_case(shared_case("pglib", name, checks="greedy modularity against networkx on a larger case"))
    u, v = _edges(net)
    for k in (3, 16):
        assert _same_as_networkx(net.n_bus, u, v, k), k


def test_ties_are_broken_as_networkx_breaks_them():
    """A lattice and a ring: every node alike, so most merges choose among equal Δq (networkx takes the smallest
    pair); and random sparse graphs whose node numbers do not follow their shape."""
    lattice = nx.convert_node_labels_to_integers(nx.grid_2d_graph(9, 11))
    graphs = [lattice, nx.cycle_graph(40)]
    rng = np.random.default_rng(7)
    for _ in range(6):
        g = nx.random_labeled_tree(120, seed=int(rng.integers(1 << 30)))
        extra = rng.integers(0, 120, size=(40, 2))
        g.add_edges_from((int(a), int(b)) for a, b in extra if a != b)
        graphs.append(g)
    for g in graphs:
        edges = np.array(sorted(g.edges()), dtype=np.int64)
        for k in (2, 5, 17):
            assert _same_as_networkx(g.number_of_nodes(), edges[:, 0], edges[:, 1], k), (g, k)


def test_what_it_does_not_take_is_left_to_networkx():
    """More components than communities asked for (networkx then merges the largest), a self-loop or a repeated
    edge (networkx's weights differ): None, and the partition goes through networkx as before."""
    u, v = np.array([0, 2, 4]), np.array([1, 3, 5])
    assert greedy_modularity_labels(6, u, v, 2) is None
    assert greedy_modularity_labels(6, u, v, 3) is not None
    assert greedy_modularity_labels(3, np.array([0, 1, 1]), np.array([1, 2, 1]), 2) is None
    assert greedy_modularity_labels(3, np.array([0, 1, 1]), np.array([1, 2, 0]), 2) is None


def test_the_partition_uses_it(case118, monkeypatch):
    """partition(method="modularity") takes its communities from it, and networkx is not called."""
    def no_networkx(*args, **kwargs):
        raise AssertionError("networkx's greedy modularity was called")

    monkeypatch.setattr(nx.community, "greedy_modularity_communities", no_networkx)
    part = partition(case118, zones=4, method="modularity")
    assert part.n_zones == 4
