"""Zone partitions of a network and the elements each zone's model holds (docs/formulation.md).

A partition maps every bus to a zone. Zone ``z`` **owns** its buses; its model
(see :func:`powerdp.opf.formulation.build_model` with ``own_buses``) also holds
copies of the neighbouring buses at the far end of its tie-lines, every branch
with at least one end among its own buses, the bus pairs of those branches and
the generators at its own buses, and the HVDC lines with an end among its own
buses (their active powers at both ends; the reactive power of the ends it owns).
A variable is **shared** iff it appears in more than one zone's model: an HVDC
line between two zones couples them like a tie-line, through its active powers.

Partitions come from (docs/formulation.md):

* the bus ``area`` or ``zone`` column of the case (``partition(net, "area")``);
* a ``bus,zone`` CSV file with external bus ids (``partition(net, "file.csv")``);
* a dict ``{bus_id: zone}`` or a sequence of one zone label per internal bus;
* automatic methods on the bus graph (``partition(net, zones=3, method=...)``):
  ``"modularity"``, ``"kernighan_lin"`` and ``"spectral"``; their zones are
  always connected and the result is deterministic for a given ``seed``.

Zones are numbered ``0..K-1`` in the order of their labels; the original labels
are kept in :attr:`Partition.labels`.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..errors import PartitionError
from .network import Network

__all__ = ["Partition", "partition", "bundled_partition", "METHODS", "VARIABLE_KINDS", "DCLINE_KINDS"]

log = logging.getLogger(__name__)

METHODS = ("modularity", "kernighan_lin", "spectral")
FLOW_MODES = ("variables", "expressions")
W_KINDS = ("w", "wr", "wi")
FLOW_KINDS = ("pf", "qf", "pt", "qt")
DCLINE_KINDS = ("p_dc_fr", "p_dc_to", "q_dc_fr", "q_dc_to")  # HVDC line powers: variables in both flow modes
VARIABLE_KINDS = W_KINDS + FLOW_KINDS + DCLINE_KINDS
_MAX_LISTED = 10
_SWEEP_CHECKS = 200


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _label_key(label: Any) -> tuple[bool, Any]:
    """Sort key for zone labels: integers first (numerically), then strings."""
    return (isinstance(label, str), label)


def _fmt_label(label: Any) -> str:
    return repr(label) if isinstance(label, str) else str(label)


def _fmt_ids(ids: Sequence[Any], limit: int = _MAX_LISTED) -> str:
    ids = list(ids)
    shown = ", ".join(str(i) for i in ids[:limit])
    more = f", ... ({len(ids) - limit} more)" if len(ids) > limit else ""
    return f"[{shown}{more}]"


def _normalize_label(value: Any, where: str) -> int | str:
    """A zone label as a Python int or a stripped string."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if math.isfinite(value) and float(value).is_integer():
            return int(value)
        raise PartitionError(f"{where} has zone label {value}, which is not a zone (zone numbers are whole numbers)")
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise PartitionError(f"{where} has an empty zone label")
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return text  # a zone name
        return _normalize_label(number, where)  # '2.0' is zone 2; '1.5', 'nan', 'inf' are refused
    raise PartitionError(f"{where} has zone label {value!r}; zone labels must be integers or strings")


def _parse_bus_id(text: Any) -> int | None:
    """An external bus id from a CSV field or dict key, or None when it is not an integer."""
    if isinstance(text, (bool, np.bool_)):
        return None
    if isinstance(text, (int, np.integer)):
        return int(text)
    if isinstance(text, (float, np.floating)):
        return int(text) if math.isfinite(text) and float(text).is_integer() else None
    if isinstance(text, str):
        s = text.strip()
        try:
            return int(s)
        except ValueError:
            try:
                f = float(s)
            except ValueError:
                return None
            return int(f) if math.isfinite(f) and f.is_integer() else None
    return None


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


# ---------------------------------------------------------------------------
# the partition
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class Partition:
    """A map from every bus to a zone, and the elements of each zone's model (docs/formulation.md).

    Attributes
    ----------
    network: the partitioned :class:`~powerdp.grid.network.Network`.
    zone_of_bus: zone index (``0..n_zones-1``) of every internal bus (read-only array).
    labels: the original zone label of every zone index (sorted: integers, then strings).
    method: how the partition was made (``"file"``, ``"dict"``, ``"array"``, ``"area"``,
        ``"zone"``, ``"modularity"``, ``"kernighan_lin"``, ``"spectral"``...).
    source: where it came from (a file path, a description), for messages.

    Every method returning elements returns sorted numpy arrays of internal indices.
    Construction checks that every zone is non-empty and (unless
    ``allow_disconnected=True``) that its own buses are connected in the bus graph.
    """

    network: Network
    zone_of_bus: np.ndarray
    labels: list
    method: str = "given"
    source: str = ""
    allow_disconnected: InitVar[bool] = False
    _own: list = field(init=False, default_factory=list)
    _branches: list = field(init=False, default_factory=list)
    _buses: list = field(init=False, default_factory=list)
    _pairs: list = field(init=False, default_factory=list)
    _gens: list = field(init=False, default_factory=list)
    _dclines: list = field(init=False, default_factory=list)
    _incidence: dict = field(init=False, default_factory=dict)

    def __post_init__(self, allow_disconnected: bool) -> None:
        net = self.network
        where = self.source or "partition"
        zone = np.asarray(self.zone_of_bus)
        labels = list(self.labels)
        if zone.shape != (net.n_bus,):
            raise PartitionError(
                f"{where}: zone_of_bus has shape {zone.shape}; network {net.name} has {net.n_bus} buses"
            )
        if zone.size and not np.issubdtype(zone.dtype, np.integer):
            raise PartitionError(f"{where}: zone_of_bus must hold integer zone indices, not {zone.dtype}")
        k = len(labels)
        if k == 0:
            raise PartitionError(f"{where}: a partition needs at least one zone")
        if len(set(labels)) != k:
            raise PartitionError(f"{where}: duplicate zone labels in {labels}")
        bad = (zone < 0) | (zone >= k)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise PartitionError(
                f"{where}: bus {net.bus_ids[i]} has zone index {zone[i]}, outside 0..{k - 1}"
            )
        zone = zone.astype(np.int64).copy()
        zone.setflags(write=False)
        object.__setattr__(self, "zone_of_bus", zone)
        object.__setattr__(self, "labels", labels)
        counts = np.bincount(zone, minlength=k)
        if (counts == 0).any():
            z = int(np.flatnonzero(counts == 0)[0])
            raise PartitionError(f"{where}: zone {_fmt_label(labels[z])} is empty: no bus belongs to it")
        if not allow_disconnected:
            self._check_connected(where)
        self._build_elements()

    # -------------------------------------------------------------- building
    def _check_connected(self, where: str) -> None:
        net = self.network
        u, v = _edges(net)
        island = _zone_islands(net.n_bus, u, v, self.zone_of_bus)
        n_isl = island.max() + 1
        isl_zone = np.zeros(n_isl, dtype=np.int64)
        isl_zone[island] = self.zone_of_bus
        per_zone = np.bincount(isl_zone, minlength=self.n_zones)
        bad = np.flatnonzero(per_zone > 1)
        if bad.size == 0:
            return
        z = int(bad[0])
        own = np.flatnonzero(self.zone_of_bus == z)
        isl_ids, isl_sizes = np.unique(island[own], return_counts=True)
        order = np.lexsort((isl_ids, -isl_sizes))
        groups = [net.bus_ids[own[island[own] == isl_ids[j]]].tolist() for j in order[:2]]
        others = (
            f"; zones {', '.join(_fmt_label(self.labels[int(b)]) for b in bad[1:])} are not connected either"
            if bad.size > 1
            else ""
        )
        raise PartitionError(
            f"{where}: zone {_fmt_label(self.labels[z])} is not connected: its {own.size} buses form "
            f"{int(per_zone[z])} islands, e.g. buses {_fmt_ids(groups[0])} and {_fmt_ids(groups[1])}{others} "
            "(allow_disconnected=True, the CLI's default, accepts such zones)"
        )

    def _build_elements(self) -> None:
        """Per-zone element sets, as in ``formulation._zone_elements`` (docs/formulation.md)."""
        net = self.network
        zone = self.zone_of_bus
        k = self.n_zones
        zf, zt = zone[net.f_bus], zone[net.t_bus]
        order = np.argsort(zone, kind="stable")
        bounds = np.searchsorted(zone[order], np.arange(k + 1))
        own = [order[bounds[z] : bounds[z + 1]] for z in range(k)]
        branches, buses, pairs = [], [], []
        for z in range(k):
            br = np.flatnonzero((zf == z) | (zt == z))
            branches.append(br)
            buses.append(np.union1d(own[z], np.concatenate([net.f_bus[br], net.t_bus[br]])).astype(np.int64))
            pairs.append(np.unique(net.branch_pair[br]).astype(np.int64))
        gzone = zone[net.gen_bus]
        gorder = np.argsort(gzone, kind="stable")
        gbounds = np.searchsorted(gzone[gorder], np.arange(k + 1))
        gens = [gorder[gbounds[z] : gbounds[z + 1]] for z in range(k)]
        for arrs in (own, branches, buses, pairs, gens):
            for a in arrs:
                a.setflags(write=False)
        object.__setattr__(self, "_own", own)
        object.__setattr__(self, "_branches", branches)
        object.__setattr__(self, "_buses", buses)
        object.__setattr__(self, "_pairs", pairs)
        object.__setattr__(self, "_gens", gens)
        # HVDC lines (formulation.zone_dclines): active powers in both end zones, reactive at their own end
        dc = net.dcline
        dzf, dzt = zone[dc.f_bus], zone[dc.t_bus]
        dc_any = [np.flatnonzero((dzf == z) | (dzt == z)) for z in range(k)]
        dc_fr = [np.flatnonzero(dzf == z) for z in range(k)]
        dc_to = [np.flatnonzero(dzt == z) for z in range(k)]
        for a in dc_any:
            a.setflags(write=False)
        object.__setattr__(self, "_dclines", dc_any)
        # element x zone incidence per variable kind: which zones' models hold each variable
        sizes = {"w": net.n_bus, "wr": net.n_pair, "wi": net.n_pair}
        members = {"w": buses, "wr": pairs, "wi": pairs}
        for kind in FLOW_KINDS:
            sizes[kind] = net.n_branch
            members[kind] = branches
        for kind, arrs in zip(DCLINE_KINDS, (dc_any, dc_any, dc_fr, dc_to)):
            sizes[kind] = dc.n
            members[kind] = arrs
        incidence = {}
        for kind, arrs in members.items():
            rows = np.concatenate(arrs) if arrs else np.zeros(0, np.int64)
            cols = np.repeat(np.arange(k), [len(a) for a in arrs])
            incidence[kind] = sp.csr_matrix(
                (np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(sizes[kind], k)
            )
        object.__setattr__(self, "_incidence", incidence)

    # --------------------------------------------------------------- queries
    @property
    def n_zones(self) -> int:
        """Number of zones K."""
        return len(self.labels)

    def _zone(self, z: Any) -> int:
        if isinstance(z, (bool, np.bool_)) or not isinstance(z, (int, np.integer)):
            raise PartitionError(f"zone index must be an integer 0..{self.n_zones - 1}, not {z!r}")
        if not 0 <= z < self.n_zones:
            raise PartitionError(f"zone index {z} is out of range 0..{self.n_zones - 1}")
        return int(z)

    def own_buses(self, z: int) -> np.ndarray:
        """Buses zone ``z`` owns (N_p): power balance is modelled for these only."""
        return self._own[self._zone(z)]

    def buses(self, z: int) -> np.ndarray:
        """Every bus in zone ``z``'s model: its own buses and its copied neighbours."""
        return self._buses[self._zone(z)]

    def copied_buses(self, z: int) -> np.ndarray:
        """Neighbouring buses (not owned) at the far end of zone ``z``'s tie-lines."""
        z = self._zone(z)
        return np.setdiff1d(self._buses[z], self._own[z], assume_unique=True)

    def branches(self, z: int) -> np.ndarray:
        """Branches with at least one end among zone ``z``'s own buses."""
        return self._branches[self._zone(z)]

    def pairs(self, z: int) -> np.ndarray:
        """Bus pairs of zone ``z``'s branches (indices into ``network.pair_f``)."""
        return self._pairs[self._zone(z)]

    def gens(self, z: int) -> np.ndarray:
        """Generators at zone ``z``'s own buses."""
        return self._gens[self._zone(z)]

    def dclines(self, z: int) -> np.ndarray:
        """HVDC lines with at least one end among zone ``z``'s own buses."""
        return self._dclines[self._zone(z)]

    def tie_dclines(self) -> np.ndarray:
        """HVDC lines whose two ends lie in different zones (they couple those zones)."""
        dc = self.network.dcline
        return np.flatnonzero(self.zone_of_bus[dc.f_bus] != self.zone_of_bus[dc.t_bus])

    def pieces(self) -> np.ndarray:
        """Number of connected pieces of every zone's own buses in the bus graph (1 for a connected zone).

        Native areas of real grids are often not connected; a zone of several pieces still works
        (its model is built on its own buses, as one agent), but its pieces only meet through
        other zones.
        """
        net = self.network
        u, v = _edges(net)
        island = _zone_islands(net.n_bus, u, v, self.zone_of_bus)
        isl_zone = np.zeros(island.max() + 1 if net.n_bus else 0, dtype=np.int64)
        isl_zone[island] = self.zone_of_bus
        return np.bincount(isl_zone, minlength=self.n_zones)

    def disconnected_note(self) -> str | None:
        """A one-line note naming the zones made of several pieces (None when every zone is connected)."""
        pieces = self.pieces()
        bad = np.flatnonzero(pieces > 1)
        if bad.size == 0:
            return None
        shown = ", ".join(f"{_fmt_label(self.labels[z])} ({int(pieces[z])} pieces)" for z in bad[:_MAX_LISTED])
        more = f" and {bad.size - _MAX_LISTED} more" if bad.size > _MAX_LISTED else ""
        return (
            f"{self.source or 'partition'}: {bad.size} of {self.n_zones} zones {'is' if bad.size == 1 else 'are'} "
            f"not connected: zone{'s' if bad.size > 1 else ''} "
            f"{shown}{more}; each still runs as one agent on its own buses"
        )

    def tie_lines(self) -> np.ndarray:
        """Branches whose two ends lie in different zones."""
        net = self.network
        return np.flatnonzero(self.zone_of_bus[net.f_bus] != self.zone_of_bus[net.t_bus])

    def tie_pairs(self) -> np.ndarray:
        """Bus pairs whose two buses lie in different zones (the pairs of the tie-lines)."""
        net = self.network
        return np.flatnonzero(self.zone_of_bus[net.pair_f] != self.zone_of_bus[net.pair_t])

    def zone_sizes(self) -> np.ndarray:
        """Number of own buses of every zone."""
        return np.bincount(self.zone_of_bus, minlength=self.n_zones)

    # ---------------------------------------------------------- shared keys
    @staticmethod
    def _kinds(flows: str) -> tuple[str, ...]:
        if flows not in FLOW_MODES:
            raise PartitionError(f"unknown flow mode {flows!r}; choose one of {', '.join(FLOW_MODES)}")
        return VARIABLE_KINDS if flows == "variables" else W_KINDS + DCLINE_KINDS

    def shared_keys(self, flows: str = "variables") -> list[tuple[str, int]]:
        """Sorted keys of the variables held by more than one zone's model (docs/formulation.md).

        Keys are named as in the Pyomo models: ``("w", bus)``, ``("wr", pair)``,
        ``("wi", pair)``, the HVDC line powers ``("p_dc_fr", dcline)``, ``("p_dc_to", dcline)``
        (``q_dc_fr``/``q_dc_to`` are held by one zone each, so never shared) and, when
        ``flows="variables"``, ``("pf", branch)``, ``("qf", branch)``, ``("pt", branch)``,
        ``("qt", branch)``. With ``flows="expressions"`` the branch flows are not variables.
        """
        keys = []
        for kind in self._kinds(flows):
            counts = np.diff(self._incidence[kind].indptr)
            keys.extend((kind, int(i)) for i in np.flatnonzero(counts > 1))
        return sorted(keys)

    def zones_sharing(self, key: tuple[str, int]) -> list[int]:
        """Zones whose models hold the variable ``key`` (one zone for a variable that is not shared)."""
        try:
            kind, idx = key
        except (TypeError, ValueError):
            raise PartitionError(f"a variable key is a (kind, index) tuple, not {key!r}") from None
        inc = self._incidence.get(kind)
        if inc is None:
            raise PartitionError(f"unknown variable kind {kind!r}; choose one of {', '.join(VARIABLE_KINDS)}")
        if not isinstance(idx, (int, np.integer)) or not 0 <= idx < inc.shape[0]:
            raise PartitionError(f"variable key {key!r}: index out of range 0..{inc.shape[0] - 1}")
        return sorted(inc.indices[inc.indptr[idx] : inc.indptr[idx + 1]].tolist())

    def shared_by_zone(self, flows: str = "variables") -> dict[int, list[tuple[str, int]]]:
        """For every zone, the sorted shared keys its model holds."""
        out: dict[int, list[tuple[str, int]]] = {z: [] for z in range(self.n_zones)}
        for kind in self._kinds(flows):
            inc = self._incidence[kind]
            counts = np.diff(inc.indptr)
            shared = np.flatnonzero(counts > 1)
            sub = inc[shared].tocoo()
            for i, z in zip(shared[sub.row].tolist(), sub.col.tolist()):
                out[z].append((kind, i))
        return {z: sorted(keys) for z, keys in out.items()}

    def n_shared(self, flows: str = "variables") -> np.ndarray:
        """Number of shared variables in every zone's model."""
        total = np.zeros(self.n_zones, dtype=np.int64)
        for kind in self._kinds(flows):
            inc = self._incidence[kind]
            shared = np.flatnonzero(np.diff(inc.indptr) > 1)
            total += np.asarray(inc[shared].sum(axis=0)).ravel().astype(np.int64)
        return total

    # ------------------------------------------------------------- reporting
    def summary(self):
        """One row per zone (docs/formulation.md report): a pandas DataFrame.

        Columns: ``zone`` (index), ``label``, ``buses`` (own), ``copied_buses``,
        ``generators``, ``load_mw`` and ``load_mvar`` (own buses), ``tie_lines``,
        ``shared_vars_expressions`` (shared variables when flows are eliminated)
        and ``shared_vars_variables`` (when flows are variables).
        """
        import pandas as pd

        net = self.network
        zone = self.zone_of_bus
        k = self.n_zones
        tie = self.tie_lines()
        tie_count = np.bincount(zone[net.f_bus[tie]], minlength=k) + np.bincount(zone[net.t_bus[tie]], minlength=k)
        return pd.DataFrame(
            {
                "zone": np.arange(k),
                "label": self.labels,
                "buses": self.zone_sizes(),
                "copied_buses": [len(self._buses[z]) - len(self._own[z]) for z in range(k)],
                "generators": np.bincount(zone[net.gen_bus], minlength=k),
                "load_mw": np.bincount(zone, weights=net.pd, minlength=k) * net.base_mva,
                "load_mvar": np.bincount(zone, weights=net.qd, minlength=k) * net.base_mva,
                "tie_lines": tie_count,
                "shared_vars_expressions": self.n_shared("expressions"),
                "shared_vars_variables": self.n_shared("variables"),
            }
        )

    def __str__(self) -> str:
        net = self.network
        src = f", from {self.source}" if self.source and self.method not in METHODS else ""
        head = (
            f"Partition of {net.name} ({net.n_bus} buses) into {self.n_zones} zone"
            f"{'s' if self.n_zones != 1 else ''} (method: {self.method}{src}); "
            f"{len(self.tie_lines())} tie-lines, "
            + (f"{len(self.tie_dclines())} HVDC tie-lines, " if self.network.n_dcline else "")
            + f"{len(self.shared_keys('expressions'))} shared W-{'and HVDC ' if self.network.n_dcline else ''}variables, "
            f"{len(self.shared_keys('variables'))} with flow variables"
        )
        return head + "\n" + self.summary().to_string(index=False, float_format=lambda x: f"{x:.1f}")

    def __repr__(self) -> str:
        return (
            f"Partition({self.network.name!r}, zones={self.n_zones}, sizes={self.zone_sizes().tolist()}, "
            f"method={self.method!r})"
        )

    # ------------------------------------------------------------------- I/O
    def to_csv(self, path: str | Path) -> Path:
        """Write ``bus,zone`` lines (header ``bus,zone``, external bus ids, original labels)."""
        path = Path(path)
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["bus", "zone"])
        labels = self.labels
        for b, z in zip(self.network.bus_ids.tolist(), self.zone_of_bus.tolist()):
            writer.writerow([b, labels[z]])
        from ..files.atomic import atomic_write_text

        return atomic_write_text(path, buf.getvalue())

    @classmethod
    def from_csv(cls, network: Network, path: str | Path, **kwargs: Any) -> Partition:
        """Read a ``bus,zone`` CSV file; same as ``partition(network, path)``."""
        return partition(network, Path(path), **kwargs)

    def with_network(self, network: Network) -> Partition:
        """The same zones on another network with the same bus ids (e.g. another convention)."""
        if network.n_bus != self.network.n_bus or not np.array_equal(network.bus_ids, self.network.bus_ids):
            raise PartitionError(
                f"partition of {self.network.name} does not fit network {network.name}: the bus ids differ"
            )
        return Partition(network, self.zone_of_bus.copy(), list(self.labels), self.method, self.source,
                         allow_disconnected=True)


# ---------------------------------------------------------------------------
# reading partitions
# ---------------------------------------------------------------------------


def _from_bus_map(
    net: Network, entries: Iterable[tuple[Any, Any, str]], where: str
) -> tuple[np.ndarray, list]:
    """Zone labels per internal bus from (bus id, label, location) entries."""
    lookup = net._bus_lookup()
    labels_of_bus: list[Any] = [None] * net.n_bus
    seen_at: dict[int, str] = {}
    for bus_raw, label_raw, loc in entries:
        bus_id = _parse_bus_id(bus_raw)
        if bus_id is None:
            raise PartitionError(f"{loc}: bus {bus_raw!r} is not a bus number")
        idx = lookup.get(bus_id)
        if idx is None:
            raise PartitionError(f"{loc}: bus {bus_id} is not in network {net.name}")
        label = _normalize_label(label_raw, f"{loc}: bus {bus_id}")
        if idx in seen_at:
            raise PartitionError(f"{loc}: bus {bus_id} is listed again (first at {seen_at[idx]})")
        seen_at[idx] = loc.rsplit(", ", 1)[-1] if ", " in loc else loc
        labels_of_bus[idx] = label
    _warn_mixed_labels(labels_of_bus, seen_at, where, net)
    missing = [i for i, lab in enumerate(labels_of_bus) if lab is None]
    if missing:
        ids = net.bus_ids[missing].tolist()
        raise PartitionError(
            f"{where}: {len(ids)} bus{'es' if len(ids) != 1 else ''} of network {net.name} "
            f"{'have' if len(ids) != 1 else 'has'} no zone: {_fmt_ids(ids)}"
        )
    return _index_labels(labels_of_bus)


def _warn_mixed_labels(labels_of_bus: Sequence[Any], seen_at: dict, where: str, net: Network) -> None:
    """Numbered zones beside a named one ('a' among 1, 2, 3) are often a typo that makes a zone of its own: said."""
    ints = sum(isinstance(lab, int) for lab in labels_of_bus)
    named = [i for i, lab in enumerate(labels_of_bus) if isinstance(lab, str)]
    if ints and named:
        i = named[0]
        log.warning(
            "%s: %d bus(es) have a named zone (first: bus %d, %s) beside %d in numbered zones; each name is a zone of its "
            "own (a typo?)", where, len(named), net.bus_ids[i], seen_at.get(i, "?"), ints,
        )


def _index_labels(labels_of_bus: Sequence[Any]) -> tuple[np.ndarray, list]:
    """Zone indices 0..K-1 (in label order) and the sorted labels."""
    labels = sorted(set(labels_of_bus), key=_label_key)
    index = {lab: z for z, lab in enumerate(labels)}
    return np.fromiter((index[lab] for lab in labels_of_bus), dtype=np.int64, count=len(labels_of_bus)), labels


def _read_csv(net: Network, path: Path) -> tuple[np.ndarray, list]:
    where = f"partition file {path}"
    try:
        text = path.read_text()
    except OSError as exc:
        raise PartitionError(f"{where}: cannot read it ({exc.strerror or exc})") from exc
    except UnicodeDecodeError:
        raise PartitionError(f"{where}: not a text file (a bus,zone CSV is expected)") from None
    entries = []
    first = True
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        sep = "," if "," in line else ";" if ";" in line else None
        fields = [f.strip() for f in line.split(sep)]
        loc = f"{where}, line {lineno}"
        if first:
            first = False
            # optional header row: the first line when none of its fields is a number
            if all(_parse_bus_id(f) is None for f in fields):
                continue
        if len(fields) != 2:
            raise PartitionError(f"{loc}: expected 2 fields 'bus,zone', got {len(fields)}")
        if _parse_bus_id(fields[0]) is None:
            raise PartitionError(f"{loc}: the bus field is not a bus number")
        entries.append((fields[0], fields[1], loc))
    if not entries:
        raise PartitionError(f"{where}: no 'bus,zone' lines")
    return _from_bus_map(net, entries, where)


def _from_sequence(net: Network, values: Any, where: str) -> tuple[np.ndarray, list]:
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.ndim != 1 or len(arr) != net.n_bus:
        raise PartitionError(
            f"{where} has {arr.shape[0] if arr.ndim else 0} entries (shape {arr.shape}); "
            f"network {net.name} has {net.n_bus} buses"
        )
    if arr.dtype.kind in "iu":
        labels_arr, inverse = np.unique(arr, return_inverse=True)
        return inverse.astype(np.int64).ravel(), [int(x) for x in labels_arr]
    ids = net.bus_ids
    labels_of_bus = [_normalize_label(v, f"{where}: bus {ids[i]}") for i, v in enumerate(arr.tolist())]
    return _index_labels(labels_of_bus)


def bundled_csv(name: str) -> Path | None:
    root = resources.files("powerdp.cases")
    candidate = root / f"{name}.csv"
    return Path(str(candidate)) if candidate.is_file() else None


# ---------------------------------------------------------------------------
# automatic partitions
# ---------------------------------------------------------------------------


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
    """Greedy modularity communities stopped at exactly ``zones`` communities."""
    import networkx as nx

    _initial_islands(net, zones)  # error when the network has too many islands
    g = net.graph()
    comms = nx.community.greedy_modularity_communities(g, cutoff=zones, best_n=zones)
    zone = np.empty(net.n_bus, dtype=np.int64)
    for z, c in enumerate(comms):
        zone[np.fromiter(c, dtype=np.int64)] = z
    zone = _relabel_by_first_bus(zone)
    u, v = _edges(net)
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


def _automatic(net: Network, zones: Any, method: str, seed: int) -> Partition:
    if method not in _AUTOMATIC:
        raise PartitionError(f"unknown partition method {method!r}; choose one of {', '.join(METHODS)}")
    if isinstance(zones, (bool, np.bool_)) or not isinstance(zones, (int, np.integer)):
        raise PartitionError(f"zones must be a positive integer, not {zones!r}")
    zones = int(zones)
    if zones < 1:
        raise PartitionError(f"zones must be at least 1, not {zones}")
    if zones > net.n_bus:
        raise PartitionError(f"cannot split network {net.name} with {net.n_bus} buses into {zones} zones")
    zone = _AUTOMATIC[method](net, zones, int(seed))
    u, v = _edges(net)
    zone = _relabel_by_first_bus(_repair_connectivity(net.n_bus, u, v, zone))  # safety net
    if zone.max() + 1 != zones:  # cannot happen: repairs never empty a zone
        raise PartitionError(f"{method} gave {zone.max() + 1} zones instead of {zones} on network {net.name}")
    return Partition(net, zone, list(range(1, zones + 1)), method, f"{method} (seed {seed})")


# ---------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------


def partition(
    network: Network,
    source: Any = None,
    *,
    zones: int | None = None,
    method: str = "modularity",
    seed: int = 0,
    allow_disconnected: bool = False,
) -> Partition:
    """Partition ``network`` into zones (docs/formulation.md).

    Parameters
    ----------
    network: the network.
    source:
        ``"area"`` or ``"zone"`` (the bus area / zone column of the case); a path to a
        ``bus,zone`` CSV file (external bus ids, integer or string labels, optional header
        row, ``#`` comments; fields split at commas, else semicolons, else whitespace); the name of a bundled partition such as ``"case118_3areas"``;
        a dict ``{bus_id: zone}``; a sequence or array of one zone label per internal bus;
        a :class:`Partition` (rebound to ``network``); or ``None`` for an automatic
        partition into ``zones`` zones.
    zones: number of zones; required when ``source`` is None, checked otherwise.
    method: automatic method, ``"modularity"`` (greedy modularity communities stopped at
        ``zones``), ``"kernighan_lin"`` (recursive Kernighan–Lin bisection of the largest
        zone) or ``"spectral"`` (recursive Fiedler-vector bisection at the median).
    seed: seed of the randomized methods; the result is deterministic for a given seed.
    allow_disconnected: accept given zones whose own buses are not connected, with a
        logged warning naming them and their number of pieces (an error by default; the
        CLI accepts them). Automatic zones are always connected.

    A single zone is allowed (a centralized run) but warns.
    """
    if source is None:
        if zones is None:
            raise PartitionError("give a partition source (column, file, dict, array) or a number of zones")
        part = _automatic(network, zones, method, seed)
    else:
        part = _given(network, source, allow_disconnected)
        if zones is not None and part.n_zones != zones:
            raise PartitionError(f"{part.source}: has {part.n_zones} zones, not the requested {zones}")
        if allow_disconnected:
            note = part.disconnected_note()
            if note:
                log.warning("%s", note)
    if part.n_zones == 1:
        warnings.warn(
            f"partition of network {network.name} has a single zone: the distributed run is centralized",
            UserWarning,
            stacklevel=2,
        )
    return part


def _given(net: Network, source: Any, allow_disconnected: bool) -> Partition:
    if isinstance(source, Partition):
        return source if source.network is net else source.with_network(net)
    if isinstance(source, str) and source in ("area", "zone"):
        where = f"bus {source} column of network {net.name}"
        col = net.bus_area if source == "area" else net.bus_zone
        zone, labels = _from_sequence(net, col, where)
        return Partition(net, zone, labels, source, where, allow_disconnected=allow_disconnected)
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            bundled = bundled_csv(str(source)) if isinstance(source, str) and path.suffix == "" else None
            if bundled is None:
                raise PartitionError(
                    f"no partition file {str(source)!r}: not a file, not 'area' or 'zone', and not a bundled partition"
                )
            path = bundled
        zone, labels = _read_csv(net, path)
        return Partition(net, zone, labels, "file", f"partition file {path}", allow_disconnected=allow_disconnected)
    if isinstance(source, Mapping):
        where = "partition dict"
        zone, labels = _from_bus_map(net, ((b, lab, where) for b, lab in source.items()), where)
        return Partition(net, zone, labels, "dict", where, allow_disconnected=allow_disconnected)
    if isinstance(source, (np.ndarray, Sequence)) and not isinstance(source, (str, bytes)):
        where = "zone array"
        zone, labels = _from_sequence(net, source, where)
        return Partition(net, zone, labels, "array", where, allow_disconnected=allow_disconnected)
    raise PartitionError(f"cannot make a partition from a {type(source).__name__}")


def bundled_partition(network: Network, n_zones: int) -> Partition | None:
    """The bundled partition ``<name>_<n>zones.csv`` or ``<name>_<n>areas.csv`` of ``powerdp.cases``, or None."""
    for suffix in ("zones", "areas"):
        path = bundled_csv(f"{network.name}_{int(n_zones)}{suffix}")
        if path is not None:
            part = partition(network, path)
            if part.n_zones != n_zones:
                raise PartitionError(f"{part.source}: has {part.n_zones} zones, not {n_zones} as its name says")
            return part
    return None
