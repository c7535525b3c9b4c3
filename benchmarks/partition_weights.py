"""A zone partition that cuts electrically weak lines: greedy modularity on edges weighted by the branch admittance.

The product's automatic partition (``powerdp run --zones K``) counts every branch alike. This writes a ``bus,zone``
file from networkx's greedy modularity with each branch weighted by its admittance |1/z| (``y``), 1 + log(1 + |y|)
(``logy``), √|y| (``sqrty``) or min(|y|, 100) (``capy``), parallel branches summed, and prints how many lines it cuts
and their impedances beside the automatic partition's. An experiment for issue 39 (do ADMM's rounds converge faster
when the zones are coupled through weak lines?); docs/results/performance.md has the result.

    python benchmarks/partition_weights.py --case ../shared/data/matpower/case13659pegase.m --zones 16 \\
        --weight logy --out /tmp/p13659_logy.csv
    python benchmarks/convergence.py --case ../shared/data/matpower/case13659pegase.m --partition /tmp/p13659_logy.csv ...
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from powerdp.grid.loading import load_case
from powerdp.grid.partition import partition

WEIGHTS = {
    "y": lambda y: y,
    "logy": lambda y: 1.0 + np.log1p(y),
    "sqrty": np.sqrt,
    "capy": lambda y: np.minimum(y, 100.0),
}


def cut_stats(net, zone: np.ndarray) -> dict:
    """The lines between zones and their impedances |z| (p.u.)."""
    cut = zone[net.f_bus] != zone[net.t_bus]
    z = np.abs(net.r + 1j * net.x)[cut]
    return {"cut_lines": int(cut.sum()), "median_z": float(np.median(z)), "min_z": float(z.min()),
            "below_1e-3": int((z < 1e-3).sum()), "sizes": sorted(np.bincount(zone).tolist())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", required=True)
    ap.add_argument("--zones", type=int, default=16)
    ap.add_argument("--weight", choices=sorted(WEIGHTS), default="logy")
    ap.add_argument("--out", type=Path, required=True, help="the bus,zone file to write")
    args = ap.parse_args()
    import networkx as nx

    net = load_case(args.case)
    y = 1.0 / np.maximum(np.abs(net.r + 1j * net.x), 1e-6)
    w = WEIGHTS[args.weight](y)
    graph = nx.Graph()
    graph.add_nodes_from(range(net.n_bus))
    for a, b, ww in zip(net.f_bus.tolist(), net.t_bus.tolist(), w.tolist()):
        if a != b:
            graph.add_edge(a, b, weight=graph[a][b]["weight"] + ww if graph.has_edge(a, b) else ww)
    t0 = time.perf_counter()
    comms = nx.community.greedy_modularity_communities(graph, weight="weight", cutoff=args.zones, best_n=args.zones)
    elapsed = time.perf_counter() - t0
    zone = np.empty(net.n_bus, dtype=np.int64)
    for z, c in enumerate(comms):
        zone[np.fromiter(c, dtype=np.int64)] = z
    args.out.write_text("bus,zone\n" + "".join(f"{b},{z + 1}\n" for b, z in zip(net.bus_ids.tolist(), zone.tolist())))
    weighted = partition(net, args.out)  # checked as a run reads it (connected zones)
    automatic = partition(net, zones=args.zones)
    print(json.dumps({"case": net.name, "weight": args.weight, "seconds": round(elapsed, 1),
                      "weighted": cut_stats(net, weighted.zone_of_bus), "automatic": cut_stats(net, automatic.zone_of_bus)}))


if __name__ == "__main__":
    main()
