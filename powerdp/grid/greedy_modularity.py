"""Clauset–Newman–Moore greedy modularity communities, stopped at a given number of communities: the same
communities as ``networkx.community.greedy_modularity_communities(g, cutoff=k, best_n=k)`` on a simple undirected
graph, 6–10× faster (docs/results/performance.md).

networkx keeps one heap per community and a heap of their maxima, with Python objects that compare by priority and
then by element; merging the pair of largest Δq, ties broken by the smaller pair (u, v), u < v, is what it computes.
Here one heap of plain tuples ``(-Δq, u, v)``, u < v, holds every pair's values as they were pushed; a popped entry
counts only while u is a community, v its neighbour and Δq its current value (lazy deletion). Every Δq is computed
with the same floating-point operations in the same order as networkx's ``_greedy_modularity_communities_generator``
(resolution 1, unit weights), so the merges, and the communities, are the same: ``tests/test_greedy_modularity.py``
holds them equal on the bundled and shared cases, a lattice, a ring and random graphs.
"""

from __future__ import annotations

import heapq

import numpy as np

__all__ = ["greedy_modularity_labels"]


def greedy_modularity_labels(n: int, u: np.ndarray, v: np.ndarray, k: int) -> np.ndarray | None:
    """A community number per node of the graph on 0..n-1 with edges (u, v) after merging down to ``k``
    communities; None when the graph runs out of pairs first (more than ``k`` components: the caller asks networkx,
    which then merges the largest) or has a self-loop or repeated edge (networkx's weights differ then)."""
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    if np.any(u == v) or len(np.unique(np.minimum(u, v) * n + np.maximum(u, v))) != len(u) or not len(u):
        return None
    m = len(u)
    q0 = 1 / m
    degree = np.bincount(np.concatenate([u, v]), minlength=n).tolist()
    a = [d * q0 * 0.5 for d in degree]  # networkx: deg * q0 * 0.5, the fraction of edge ends at each node
    nbrs: list[dict[int, float]] = [{} for _ in range(n)]
    heap = []
    for x, y in zip(u.tolist(), v.tolist()):
        dq = q0 * 1.0 - (a[x] * a[y] + a[x] * a[y])  # q0·w − γ (a_x b_y + b_x a_y), w = 1.0, γ = 1, b = a
        nbrs[x][y] = dq
        nbrs[y][x] = dq
        heap.append((-dq, min(x, y), max(x, y)))
    heapq.heapify(heap)
    label = np.arange(n)
    members = [[i] for i in range(n)]
    communities = n
    while communities > k:
        while heap:
            negdq, x, y = heapq.heappop(heap)
            if nbrs[x].get(y) == -negdq:
                break
        else:
            return None
        # merge x into y (networkx: u the pair's row, v its column, u < v)
        nx_, ny = nbrs[x], nbrs[y]
        ax, ay = a[x], a[y]
        for w in (nx_.keys() | ny.keys()) - {x, y}:
            if w in nx_ and w in ny:
                dq = ny[w] + nx_[w]
            elif w in ny:
                dq = ny[w] - (ax * a[w] + a[w] * ax)
            else:
                dq = nx_[w] - (ay * a[w] + a[w] * ay)
            ny[w] = dq
            nbrs[w][y] = dq
            heapq.heappush(heap, (-dq, min(y, w), max(y, w)))
        for w in nx_:
            del nbrs[w][x]
        nbrs[x] = {}
        a[y] += a[x]
        a[x] = 0
        members[y].extend(members[x])
        members[x] = []
        communities -= 1
    for c, group in enumerate(g for g in members if g):
        label[group] = c
    return label
