"""Automatic zones on the bus graph (docs/formulation.md): modularity, Kernighan-Lin and spectral recursive
bisection, and the graph helpers that keep every zone connected. Each method returns one zone number per bus;
:func:`powerdp.grid.partition.partition` makes the :class:`~powerdp.grid.partition.Partition`."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..errors import PartitionError
from .greedy_modularity import greedy_modularity_labels
from .network import Network

_SWEEP_CHECKS = 200


def _edges(net: Network) -> tuple[np.ndarray, np.ndarray]:
    """Undirected bus-graph edges (one per bus pair), internal indices."""
    return net.pair_f.astype(np.int64), net.pair_t.astype(np.int64)


def _components(n: int, u: np.ndarray, v: np.ndarray) -> tuple[int, np.ndarray]:
    """Connected components of the graph on nodes 0..n-1 with edges (u, v)."""
    adj = sp.coo_matrix((np.ones(len(u), dtype=np.int8), (u, v)), shape=(n, n)).tocsr()
    return connected_components(adj, directed=False)


def _zone_islands(n: int, u: np.ndarray, v: np.ndarray, zone: np.ndarray) -> np.ndarray:
    """Component label of every node in the graph restricted to intra-zone edges."""
    keep = zone[u] == zone[v]
    return _components(n, u[keep], v[keep])[1]


def _relabel_by_first_bus(zone: np.ndarray) -> np.ndarray:
    """Renumber zones 0..K-1 in the order of their lowest bus index (canonical form)."""
    _, first = np.unique(zone, return_index=True)
    order = np.argsort(first, kind="stable")
    old = zone[first[order]]
    remap = np.empty(zone.max() + 1, dtype=np.int64)
    remap[old] = np.arange(len(old))
    return remap[zone]


def _repair_connectivity(n: int, u: np.ndarray, v: np.ndarray, zone: np.ndarray) -> np.ndarray:
    """Make every zone connected: reassign all but its largest island to adjacent zones.

    Each zone keeps its largest island (its *core*, ties: the island with the
    lowest bus index). Other islands join the adjacent core with which they share
    the most edges (ties: the smaller zone, then the lower zone index); islands
    not yet touching a core wait for a later pass. Cores only grow and stay
    connected, so this terminates. Islands of a network component holding no
    core are left as they are.
    """
    zone = zone.copy()
    while True:
        island = _zone_islands(n, u, v, zone)
        n_isl = island.max() + 1 if n else 0
        size = np.bincount(island, minlength=n_isl)
        isl_zone = np.zeros(n_isl, dtype=np.int64)
        isl_zone[island] = zone
        first_bus = np.full(n_isl, n, dtype=np.int64)
        np.minimum.at(first_bus, island, np.arange(n))
        # core of each zone: largest island, ties by lowest first bus
        order = np.lexsort((first_bus, -size, isl_zone))
        z_sorted = isl_zone[order]
        is_first = np.ones(len(order), dtype=bool)
        is_first[1:] = z_sorted[1:] != z_sorted[:-1]
        core = np.zeros(n_isl, dtype=bool)
        core[order[is_first]] = True
        if core.all():
            return zone
        # edges from orphan islands into cores, both directions
        a = np.concatenate([u, v])
        b = np.concatenate([v, u])
        sel = ~core[island[a]] & core[island[b]]
        if not sel.any():
            return zone  # orphans in network components without a core: nothing to do
        oa, zb = island[a[sel]], zone[b[sel]]
        keys, counts = np.unique(np.stack([oa, zb], axis=1), axis=0, return_counts=True)
        zone_size = np.bincount(zone, minlength=zone.max() + 1)
        # best target per orphan island: most edges, then smaller zone, then lower index
        order = np.lexsort((keys[:, 1], zone_size[keys[:, 1]], -counts, keys[:, 0]))
        keys = keys[order]
        is_first = np.ones(len(keys), dtype=bool)
        is_first[1:] = keys[1:, 0] != keys[:-1, 0]
        target = np.full(n_isl, -1, dtype=np.int64)
        target[keys[is_first, 0]] = keys[is_first, 1]
        moved = target[island] >= 0
        zone[moved] = target[island[moved]]


def _initial_islands(net: Network, zones: int) -> np.ndarray:
    """One zone per network island (automatic zones never span islands)."""
    u, v = _edges(net)
    n_isl, comp = _components(net.n_bus, u, v)
    if n_isl > zones:
        raise PartitionError(
            f"network {net.name} has {n_isl} islands; an automatic partition into connected zones "
            f"needs at least {n_isl} zones, not {zones}"
        )
    return _relabel_by_first_bus(comp.astype(np.int64))


def _bisect_kl(net: Network, nodes: np.ndarray, seed: int) -> np.ndarray:
    """Kernighan–Lin bisection of the subgraph on ``nodes``: True for one half."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(nodes.tolist())
    mask = np.zeros(net.n_bus, dtype=bool)
    mask[nodes] = True
    u, v = _edges(net)
    keep = mask[u] & mask[v]
    g.add_edges_from(zip(u[keep].tolist(), v[keep].tolist()))
    a, _ = nx.community.kernighan_lin_bisection(g, seed=seed)
    return np.isin(nodes, np.fromiter(a, dtype=np.int64))


def _bisect_spectral(net: Network, nodes: np.ndarray, seed: int) -> np.ndarray:
    """Fiedler-vector bisection at the median of the subgraph on ``nodes``: True for one half."""
    n = len(nodes)
    local = -np.ones(net.n_bus, dtype=np.int64)
    local[nodes] = np.arange(n)
    u, v = _edges(net)
    keep = (local[u] >= 0) & (local[v] >= 0)
    lu, lv = local[u[keep]], local[v[keep]]
    adj = sp.coo_matrix((np.ones(len(lu)), (lu, lv)), shape=(n, n)).tocsr()
    adj = ((adj + adj.T) > 0).astype(float)
    lap = sp.diags(np.asarray(adj.sum(axis=1)).ravel()) - adj
    if n <= 300:
        from scipy.linalg import eigh

        _, vecs = eigh(lap.toarray(), subset_by_index=[1, 1])
        fiedler = vecs[:, 0]
    elif _components(n, lu, lv)[0] == 1:
        # sparse shift-invert around a small negative shift: the two smallest eigenpairs
        from scipy.sparse.linalg import eigsh

        v0 = np.random.default_rng(seed).random(n)
        vals, vecs = eigsh(lap.tocsc(), k=2, sigma=-1e-3, which="LM", v0=v0, tol=1e-10)
        fiedler = vecs[:, int(np.argsort(vals)[1])]
    else:  # disconnected subgraph: networkx's solver handles it
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(range(n))
        g.add_edges_from(zip(lu.tolist(), lv.tolist()))
        fiedler = nx.fiedler_vector(g, method="tracemin_lu", seed=seed)
    # sign-independent: orient so that the first node has a non-positive value
    fiedler = np.round(fiedler, 12)
    if fiedler[0] > 0:
        fiedler = -fiedler
    order = np.lexsort((np.arange(n), fiedler))
    # sweep cut: the split point nearest the median whose two sides are both connected
    # (checking at most _SWEEP_CHECKS points between n/4 and 3n/4); else the median,
    # whose disconnected pieces the caller reassigns
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    mid = n // 2
    candidates = sorted(range(max(1, n // 4), max(2, n - n // 4 + 1)), key=lambda k: (abs(k - mid), k))
    for k in candidates[:_SWEEP_CHECKS]:
        if not 0 < k < n:
            continue
        side = rank < k
        same = side[lu] == side[lv]
        if _components(n, lu[same], lv[same])[0] == 2:
            return side
    return rank < mid


def _recursive_bisection(net: Network, zones: int, seed: int, bisect) -> np.ndarray:
    """Split the largest zone in two until there are ``zones`` zones; each split keeps zones connected."""
    zone = _initial_islands(net, zones)
    u, v = _edges(net)
    step = 0
    while zone.max() + 1 < zones:
        sizes = np.bincount(zone)
        z = int(np.argmax(sizes))  # the largest zone; ties: the lowest zone index (lowest first bus)
        nodes = np.flatnonzero(zone == z)
        half = bisect(net, nodes, seed + step)
        step += 1
        if half.all() or not half.any():  # degenerate split: peel off the last node
            half = np.zeros(len(nodes), dtype=bool)
            half[-1] = True
        # repair within the parent zone so both halves are connected
        zone = _split_zone(net, zone, nodes, half, u, v)
    return zone


def _split_zone(net: Network, zone: np.ndarray, nodes: np.ndarray, half: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Move ``nodes[half]`` into a new zone, repairing connectivity within the parent zone."""
    local = -np.ones(net.n_bus, dtype=np.int64)
    local[nodes] = np.arange(len(nodes))
    keep = (local[u] >= 0) & (local[v] >= 0)
    sub = _repair_connectivity(len(nodes), local[u[keep]], local[v[keep]], half.astype(np.int64))
    zone = zone.copy()
    zone[nodes[sub == 1]] = zone.max() + 1
    return _relabel_by_first_bus(zone)


def _modularity(net: Network, zones: int, seed: int) -> np.ndarray:
    """Greedy modularity communities stopped at exactly ``zones`` communities (networkx's
    ``greedy_modularity_communities``; :mod:`powerdp.grid.greedy_modularity` computes the same ones faster)."""
    _initial_islands(net, zones)  # error when the network has too many islands
    u, v = _edges(net)
    zone = greedy_modularity_labels(net.n_bus, u, v, zones)
    if zone is None:  # more components than zones, or a graph it does not take: networkx's own
        import networkx as nx

        comms = nx.community.greedy_modularity_communities(net.graph(), cutoff=zones, best_n=zones)
        zone = np.empty(net.n_bus, dtype=np.int64)
        for z, c in enumerate(comms):
            zone[np.fromiter(c, dtype=np.int64)] = z
    zone = _relabel_by_first_bus(zone)
    # too many communities (only possible across islands): merge the smallest into its best neighbour
    while zone.max() + 1 > zones:
        sizes = np.bincount(zone)
        a = np.concatenate([u, v])
        b = np.concatenate([v, u])
        cross = zone[a] != zone[b]
        keys, counts = np.unique(np.stack([zone[a[cross]], zone[b[cross]]], axis=1), axis=0, return_counts=True)
        # smallest community with a neighbour; its neighbour with most edges, then smallest, then lowest
        order = np.lexsort((keys[:, 1], sizes[keys[:, 1]], -counts, keys[:, 0], sizes[keys[:, 0]]))
        src, dst = keys[order[0]]
        zone = _relabel_by_first_bus(np.where(zone == src, dst, zone))
    # too few: split the largest by spectral bisection
    step = 0
    while zone.max() + 1 < zones:
        z = int(np.argmax(np.bincount(zone)))
        nodes = np.flatnonzero(zone == z)
        half = _bisect_spectral(net, nodes, seed + step)
        step += 1
        zone = _split_zone(net, zone, nodes, half, u, v)
    return zone


_AUTOMATIC = {
    "modularity": _modularity,
    "kernighan_lin": lambda net, zones, seed: _recursive_bisection(net, zones, seed, _bisect_kl),
    "spectral": lambda net, zones, seed: _recursive_bisection(net, zones, seed, _bisect_spectral),
}
