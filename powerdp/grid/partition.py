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
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import PartitionError
from .network import Network
from .partition_sources import _MAX_LISTED, _fmt_ids, _fmt_label, _from_bus_map, _from_sequence, _read_csv, bundled_csv
from .zoning import _AUTOMATIC, _edges, _relabel_by_first_bus, _repair_connectivity, _zone_islands

__all__ = ["Partition", "partition", "bundled_partition", "METHODS", "VARIABLE_KINDS", "DCLINE_KINDS"]

log = logging.getLogger(__name__)

METHODS = ("modularity", "kernighan_lin", "spectral")
FLOW_MODES = ("variables", "expressions")
W_KINDS = ("w", "wr", "wi")
FLOW_KINDS = ("pf", "qf", "pt", "qt")
DCLINE_KINDS = ("p_dc_fr", "p_dc_to", "q_dc_fr", "q_dc_to")  # HVDC line powers: variables in both flow modes
VARIABLE_KINDS = W_KINDS + FLOW_KINDS + DCLINE_KINDS


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
        rest = [_fmt_label(self.labels[int(b)]) for b in bad[1:]]
        others = "" if not rest else (f"; zone {rest[0]} is not connected either" if len(rest) == 1
                                      else f"; zones {', '.join(rest)} are not connected either")
        raise PartitionError(
            f"{where}: zone {_fmt_label(self.labels[z])} is not connected: its {own.size} buses form "
            f"{int(per_zone[z])} islands, e.g. buses {_fmt_ids(groups[0])} and {_fmt_ids(groups[1])}{others} "
            "(such zones are accepted with a warning by allow_disconnected=True, the command line's default: drop "
            "--no-allow-disconnected)"
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
        return self.describe()

    def describe(self, loads: bool = True) -> str:
        """The header line and :meth:`summary` as a table; ``loads=False`` leaves out the per-zone load totals
        (``partition --split``: each zone's loads are its own)."""
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
        table = self.summary() if loads else self.summary().drop(columns=["load_mw", "load_mvar"])
        return head + "\n" + table.to_string(index=False, float_format=lambda x: f"{x:.1f}")

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
    from threadpoolctl import threadpool_limits

    # one BLAS thread: the eigensolvers' matrices are small or sparse, and idle pool threads spinning beside
    # them cost more CPU than they save (case2000_goc, 16 spectral zones, load 10: 0.9–2.3 s of CPU → 0.13 s,
    # the same zones; benchmarks/setup_stages.py)
    with threadpool_limits(limits=1):
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
