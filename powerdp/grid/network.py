"""Network data: a case as per-unit numpy arrays, and the two data conventions.

:func:`load_case` turns a bundled case name, a MATPOWER ``.m`` file or a
pandapower network into a :class:`Network`: every quantity per unit on
``base_mva``, angles in radians, out-of-service elements and isolated buses
dropped (docs/formulation.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import CaseDataError
from .matpower import MatpowerData, read_matpower

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

__all__ = ["Network", "DCLines", "load_case", "bundled_cases", "network_from_matpower", "CONVENTIONS", "missing_costs_message", "pandapower_gen_map"]

Convention = Literal["powermodels", "matpower"]
CONVENTIONS = ("powermodels", "matpower")
PM_ANGLE_PAD = 1.0472  # PowerModels' default_pad for angle limits (rad, ~60 deg)
TAP_RANGE = (1e-3, 1e3)  # a tap ratio outside it makes 1/tap² overflow or vanish (1e-300 crashed Ipopt)
TINY_IMPEDANCE = 1e-6  # p.u.: below it a branch makes the model ill-conditioned (x = 1e-12 solved with violations of 7e-5)
NO_LIMIT_RATING = 1e150  # p.u.: a rateA whose square overflows a float is no limit
TINY_RATING_MVA = 1e-3  # a positive rateA below it leaves a branch (almost) no capacity

BUS_COLUMNS = ["bus_i", "type", "Pd", "Qd", "Gs", "Bs", "area", "Vm", "Va", "baseKV", "zone", "Vmax", "Vmin"]
GEN_COLUMNS = ["bus", "Pg", "Qg", "Qmax", "Qmin", "Vg", "mBase", "status", "Pmax", "Pmin"]
BRANCH_COLUMNS = ["fbus", "tbus", "r", "x", "b", "rateA", "rateB", "rateC", "ratio", "angle", "status", "angmin", "angmax"]
DCLINE_COLUMNS = [
    "F_BUS", "T_BUS", "BR_STATUS", "PF", "PT", "QF", "QT", "VF", "VT",
    "PMIN", "PMAX", "QMINF", "QMAXF", "QMINT", "QMAXT", "LOSS0", "LOSS1",
]


@dataclass(eq=False)
class DCLines:
    """HVDC lines (``mpc.dcline``) as per-unit numpy arrays, as PowerModels models them (docs/formulation.md).

    Line ``l`` runs from bus ``f_bus[l]`` to ``t_bus[l]`` (internal indices); ``ids`` are the
    1-based rows of ``mpc.dcline``. ``p_fr``/``p_to`` (``q_fr``/``q_to``) are the active (reactive)
    powers *entering the line* at each end, withdrawn from the bus balances; they obey
    ``(1 - loss1) p_fr + p_to = loss0`` and the bounds ``pminf <= p_fr <= pmaxf``,
    ``pmint <= p_to <= pmaxt``, ``qminf <= q_fr <= qmaxf``, ``qmint <= q_to <= qmaxt``
    (PowerModels' ``_mp2pm_dcline!`` limits). Costs apply to ``p_fr``: polynomial
    ``c2 p² + c1 p + c0`` ($/h, p in p.u.) or piecewise-linear points (``pwl_line``, ``pwl_mw``, ``pwl_cost``).
    """

    ids: np.ndarray
    f_bus: np.ndarray
    t_bus: np.ndarray
    pminf: np.ndarray
    pmaxf: np.ndarray
    pmint: np.ndarray
    pmaxt: np.ndarray
    qminf: np.ndarray
    qmaxf: np.ndarray
    qmint: np.ndarray
    qmaxt: np.ndarray
    loss0: np.ndarray  # p.u.
    loss1: np.ndarray  # dimensionless
    cost_c2: np.ndarray
    cost_c1: np.ndarray
    cost_c0: np.ndarray
    pwl_line: np.ndarray
    pwl_mw: np.ndarray
    pwl_cost: np.ndarray

    @classmethod
    def empty(cls) -> DCLines:
        i, f = np.zeros(0, np.int64), np.zeros(0)
        return cls(i, i, i, *([f] * 13), i, f, f)

    @property
    def n(self) -> int:
        return len(self.ids)

    def __len__(self) -> int:
        return self.n


@dataclass(eq=False)
class Network:
    """A power network as per-unit numpy arrays (docs/formulation.md).

    Buses, generators and branches are numbered 0..n-1 internally; ``bus_ids``,
    ``gen_ids`` and ``branch_ids`` give the ids a user knows (MATPOWER bus
    numbers, 1-based generator and branch rows of the source file).

    Bus pairs: every pair of buses joined by at least one branch has one entry
    (``pair_f``, ``pair_t``), oriented like the first branch between them;
    ``branch_pair`` maps each branch to its pair and ``branch_pair_sign`` is +1
    when the branch runs like its pair and -1 when it runs the other way (its
    ``wi`` is then ``-wi`` of the pair).
    """

    name: str
    base_mva: float
    convention: str
    # buses
    bus_ids: np.ndarray
    bus_type: np.ndarray
    pd: np.ndarray
    qd: np.ndarray
    gs: np.ndarray
    bs: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    bus_area: np.ndarray
    bus_zone: np.ndarray
    # generators
    gen_ids: np.ndarray
    gen_bus: np.ndarray
    pmin: np.ndarray
    pmax: np.ndarray
    qmin: np.ndarray
    qmax: np.ndarray
    # polynomial costs in $/h with pg in p.u.: c2*pg^2 + c1*pg + c0
    cost_c2: np.ndarray
    cost_c1: np.ndarray
    cost_c0: np.ndarray
    # piecewise-linear costs: flat list of (gen, mw p.u., $/h) points, cleaned as PowerModels' calc_pwl_points
    pwl_gen: np.ndarray
    pwl_mw: np.ndarray
    pwl_cost: np.ndarray
    # branches
    branch_ids: np.ndarray
    f_bus: np.ndarray
    t_bus: np.ndarray
    r: np.ndarray
    x: np.ndarray
    g_fr: np.ndarray
    b_fr: np.ndarray
    g_to: np.ndarray
    b_to: np.ndarray
    tap: np.ndarray
    shift: np.ndarray
    rate_a: np.ndarray  # inf where there is no thermal limit
    angmin: np.ndarray  # -inf where there is no limit
    angmax: np.ndarray  # +inf where there is no limit
    # bus pairs
    pair_f: np.ndarray = field(init=False)
    pair_t: np.ndarray = field(init=False)
    branch_pair: np.ndarray = field(init=False)
    branch_pair_sign: np.ndarray = field(init=False)
    pair_angmin: np.ndarray = field(init=False)
    pair_angmax: np.ndarray = field(init=False)
    has_costs: bool = True
    source: str = ""
    dcline: DCLines = field(default_factory=DCLines.empty)
    base_kv: np.ndarray | None = None  # bus base voltage (kV, MATPOWER baseKV); None: unknown
    # a network read from pandapower: the source net and, per row of its MATPOWER export, the pandapower
    # element each generator came from (powerdp.opf.pandapower_io writes a dispatch back into a copy)
    pandapower_net: Any = field(default=None, repr=False)
    pandapower_gens: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._build_pairs()

    # ------------------------------------------------------------------ sizes
    @property
    def n_bus(self) -> int:
        return len(self.bus_ids)

    @property
    def n_gen(self) -> int:
        return len(self.gen_ids)

    @property
    def n_branch(self) -> int:
        return len(self.branch_ids)

    @property
    def n_pair(self) -> int:
        return len(self.pair_f)

    @property
    def n_dcline(self) -> int:
        return self.dcline.n

    def __repr__(self) -> str:
        return (
            f"Network({self.name!r}, buses={self.n_bus}, generators={self.n_gen}, "
            f"branches={self.n_branch}{f', dclines={self.n_dcline}' if self.n_dcline else ''}, "
            f"convention={self.convention!r})"
        )

    # -------------------------------------------------------------- structure
    def _build_pairs(self) -> None:
        n = self.n_bus
        lo = np.minimum(self.f_bus, self.t_bus)
        hi = np.maximum(self.f_bus, self.t_bus)
        key = lo.astype(np.int64) * n + hi
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        # orient each pair like the first branch (in file order) between its buses
        order = np.argsort(first)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        first_sorted = first[order]
        self.branch_pair = rank[inverse]
        self.pair_f = self.f_bus[first_sorted].copy()
        self.pair_t = self.t_bus[first_sorted].copy()
        self.branch_pair_sign = np.where(self.f_bus == self.pair_f[self.branch_pair], 1.0, -1.0)
        # a branch running against its pair bounds the pair's angle by the negated limits
        amin = np.where(self.branch_pair_sign > 0, self.angmin, -self.angmax)
        amax = np.where(self.branch_pair_sign > 0, self.angmax, -self.angmin)
        self.pair_angmin = np.full(self.n_pair, -np.inf)
        self.pair_angmax = np.full(self.n_pair, np.inf)
        np.maximum.at(self.pair_angmin, self.branch_pair, amin)
        np.minimum.at(self.pair_angmax, self.branch_pair, amax)

    def bus_index(self, bus_id: Any) -> int:
        """Internal index of the bus with external id ``bus_id``."""
        idx = self._bus_lookup().get(int(bus_id))
        if idx is None:
            raise KeyError(f"bus {bus_id} is not in network {self.name!r}")
        return idx

    def _bus_lookup(self) -> dict[int, int]:
        lookup = self.__dict__.get("_bus_lookup_cache")
        if lookup is None:
            lookup = {int(b): i for i, b in enumerate(self.bus_ids)}
            self.__dict__["_bus_lookup_cache"] = lookup
        return lookup

    def graph(self):
        """The bus graph as a ``networkx.Graph`` on internal bus indices (one edge per bus pair)."""
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(range(self.n_bus))
        g.add_edges_from(zip(self.pair_f.tolist(), self.pair_t.tolist()))
        return g

    def with_loads(self, pd: np.ndarray, qd: np.ndarray) -> Network:
        """A copy with other loads (p.u.), e.g. for sensitivity or neighbouring-dataset tests."""
        return replace(self, pd=np.asarray(pd, float).copy(), qd=np.asarray(qd, float).copy())

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "convention": self.convention,
            "base_mva": self.base_mva,
            "n_buses": self.n_bus,
            "n_generators": self.n_gen,
            "n_branches": self.n_branch,
            "n_bus_pairs": self.n_pair,
            "n_dclines": self.n_dcline,
            "total_load_mw": float(self.pd.sum() * self.base_mva),
            "total_load_mvar": float(self.qd.sum() * self.base_mva),
        }


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------


def bundled_cases() -> list[str]:
    """Names of the cases shipped with powerdp (``cases/``)."""
    root = resources.files("powerdp.cases")
    return sorted(p.name[:-2] for p in root.iterdir() if p.name.endswith(".m"))


def bundled_path(name: str) -> Path | None:
    root = resources.files("powerdp.cases")
    candidate = root / f"{name}.m"
    return Path(str(candidate)) if candidate.is_file() else None


def load_case(
    source: Any,
    convention: Convention = "powermodels",
    fill_thermal_limits: bool = False,
) -> Network:
    """Load a network case.

    Parameters
    ----------
    source:
        a bundled case name (``"case14"``, ``"case118"``; see :func:`bundled_cases`),
        a path to a MATPOWER ``.m`` file (format version 2), a pandapower network,
        ``"pandapower:NAME"`` for a network of ``pandapower.networks``, or a
        :class:`Network` (returned as is when its convention matches).
    convention:
        ``"powermodels"`` (default; results match PowerModels.jl) or ``"matpower"``
        (raw data), see docs/formulation.md.
    fill_thermal_limits:
        give branches without a rating PowerModels' ``calc_thermal_limits!`` value
        (off by default, as in PowerModels).
    """
    if convention not in CONVENTIONS:
        raise CaseDataError(f"unknown convention {convention!r}; choose one of {', '.join(CONVENTIONS)}")
    if isinstance(source, Network):
        if source.convention != convention:
            raise CaseDataError(
                f"network {source.name!r} was loaded with convention {source.convention!r}, not {convention!r}; reload it"
            )
        return source
    if isinstance(source, MatpowerData):
        return network_from_matpower(source, convention, fill_thermal_limits)
    if _is_pandapower_net(source):
        return _network_from_pandapower(source, convention, fill_thermal_limits)
    if isinstance(source, (str, Path)):
        text = str(source)
        if text.startswith("pandapower:"):
            name = text.split(":", 1)[1]
            return _network_from_pandapower(_pandapower_builtin(name), convention, fill_thermal_limits, name=name)
        path = Path(text)
        if not path.exists() and path.suffix == "" and bundled_path(text) is not None:
            path = bundled_path(text)
        if not path.exists():
            known = ", ".join(bundled_cases())
            raise CaseDataError(f"no case {text!r}: not a file, and not a bundled case ({known})")
        return network_from_matpower(read_matpower(path), convention, fill_thermal_limits)
    raise CaseDataError(f"cannot load a case from a {type(source).__name__}")


def _is_pandapower_net(obj: Any) -> bool:
    return type(obj).__name__ == "pandapowerNet"


def _pandapower_builtin(name: str):
    import pandapower.networks as pn

    fn = getattr(pn, name, None)
    if fn is None or not callable(fn):
        raise CaseDataError(f"pandapower.networks has no network {name!r}")
    return fn()


def pandapower_gen_map(pp_net) -> pd.DataFrame:
    """Per generator row of pandapower's MATPOWER export (``to_mpc``), the element it came from.

    Call it right after ``to_mpc(pp_net)``: pandapower then holds the order in which it wrote
    ``ext_grid``, ``gen`` and other rows (``net._gen_order``, ``net._is_elements``).
    """
    import pandas as pd

    order = getattr(pp_net, "_gen_order", None) or {}
    is_el = pp_net.get("_is_elements", {}) or {}
    rows = []
    for element, (f, t) in sorted(order.items(), key=lambda kv: kv[1][0]):
        base = element.removesuffix("_controllable")
        mask = np.asarray(is_el.get(element, np.zeros(0, bool)), dtype=bool)
        idx = pp_net[base].index[mask] if base in pp_net and len(mask) == len(pp_net[base]) else []
        if len(idx) != int(t) - int(f):
            idx = [-1] * (int(t) - int(f))
        rows += [(base, int(i)) for i in idx]
    return pd.DataFrame(rows, columns=["element_type", "element"])


def _network_from_pandapower(pp_net, convention: str, fill_thermal_limits: bool, name: str | None = None) -> Network:
    """A :class:`Network` of a pandapower net, keeping the net and its generator map for writing a dispatch back."""
    import copy

    source = copy.deepcopy(pp_net)
    try:
        net = network_from_matpower(_pandapower_to_matpower(pp_net, name=name), convention, fill_thermal_limits)
    except CaseDataError as exc:
        xward = getattr(pp_net, "xward", None)
        if "gencost" not in str(exc) or xward is None or not len(xward) or not bool(xward["in_service"].any()):
            raise
        first = xward.index[xward["in_service"].to_numpy(bool)][0]  # the user's net has no mpc: name its element
        raise CaseDataError(
            f"pandapower network: xward {first} (an extended ward) has no cost: pandapower's MATPOWER export turns its "
            "internal voltage source into a generator with an empty cost while the net's other generators have costs; "
            "model it as a ward, or as a load and an sgen with a cost"
        ) from None
    net.pandapower_net = source
    net.pandapower_gens = pandapower_gen_map(pp_net)
    return net


def _pandapower_to_matpower(net, name: str | None = None) -> MatpowerData:
    """Convert a pandapower network through its MATPOWER export (``pandapower.converter.to_mpc``)."""
    from pandapower.converter.matpower.to_mpc import to_mpc

    try:
        mpc = to_mpc(net, init="flat")
        mpc = mpc.get("mpc", mpc)
    except Exception as exc:  # pandapower raises many exception types here
        raise CaseDataError(f"pandapower could not convert the network to MATPOWER form: {exc}") from exc
    gencost = mpc.get("gencost")
    return MatpowerData(
        name=name or (getattr(net, "name", "") or "pandapower"),
        base_mva=float(mpc["baseMVA"]),
        bus=np.asarray(mpc["bus"], float),
        gen=np.asarray(mpc["gen"], float),
        branch=np.asarray(mpc["branch"], float),
        gencost=None if gencost is None or len(gencost) == 0 else np.asarray(gencost, float),
        source=f"pandapower network {name or ''}".strip(),
    )


def _check_finite(
    table: np.ndarray, table_name: str, columns: list[str], used: list[int], ids: np.ndarray, source: str
) -> None:
    """NaN/inf in a column powerdp uses is an error naming the element and the field."""
    used = [c for c in used if c < table.shape[1]]
    bad = np.zeros(table.shape, dtype=bool)
    bad[:, used] = ~np.isfinite(table[:, used])
    if bad.any():
        row, col = np.argwhere(bad)[0]
        colname = columns[col] if col < len(columns) else f"column {col + 1}"
        raise CaseDataError(
            f"{source}: {table_name} {ids[row]:g} (row {row + 1}) has {table[row, col]} in field {colname}"
        )


@dataclass
class _Tables:
    """The raw tables being turned into a :class:`Network`, and what the passes found so far."""

    data: MatpowerData
    convention: str
    src: str = ""
    S: float = 100.0
    bus_ids: np.ndarray | None = None  # every row's bus number
    btype: np.ndarray | None = None
    lookup: dict[int, int] = field(default_factory=dict)
    f_all: np.ndarray | None = None  # branch ends as bus rows
    t_all: np.ndarray | None = None
    angmin_deg: np.ndarray | None = None
    angmax_deg: np.ndarray | None = None
    gen_bus_all: np.ndarray | None = None
    tap: np.ndarray | None = None  # per active branch, after the correct passes
    rate_a: np.ndarray | None = None
    angmin: np.ndarray | None = None
    angmax: np.ndarray | None = None
    active_bus: np.ndarray | None = None
    active_branch: np.ndarray | None = None
    active_gen: np.ndarray | None = None
    dcline: np.ndarray | None = None  # mpc.dcline (0 rows when the case has none)
    dc_f_all: np.ndarray | None = None  # dcline ends as bus rows
    dc_t_all: np.ndarray | None = None
    active_dcline: np.ndarray | None = None
    dc_limits: dict[str, np.ndarray] = field(default_factory=dict)  # per active dcline, p.u.

    def bus_of(self, ids: np.ndarray, what: str, field_name: str) -> np.ndarray:
        out = np.empty(len(ids), dtype=np.int64)
        for k, b in enumerate(ids):
            idx = self.lookup.get(int(b)) if float(b) == int(b) else None
            if idx is None:
                raise CaseDataError(f"{self.src}: {what} {k + 1} has {field_name} {b:g}, which is not a bus in mpc.bus")
            out[k] = idx
        return out


# ---------------------------------------------------------------------------- check passes (raise)


def check_finite_values(t: _Tables) -> None:
    """No NaN or inf in the fields powerdp reads."""
    d, src = t.data, t.src
    _check_finite(d.bus, "bus", BUS_COLUMNS, [0, 1, 2, 3, 4, 5, 6, 10, 11, 12], d.bus[:, 0], src)
    _check_finite(d.gen, "generator", GEN_COLUMNS, [0, 3, 4, 7, 8, 9], np.arange(1, len(d.gen) + 1), src)
    _check_finite(d.branch, "branch", BRANCH_COLUMNS, [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12], np.arange(1, len(d.branch) + 1), src)


def check_bus_ids(t: _Tables) -> None:
    """Bus numbers are positive integers, each once."""
    ids, src = t.data.bus[:, 0], t.src
    if np.any(ids != np.round(ids)) or np.any(ids <= 0):
        k = int(np.flatnonzero((ids != np.round(ids)) | (ids <= 0))[0])
        raise CaseDataError(f"{src}: bus row {k + 1} has bus_i {ids[k]:g}; bus numbers must be positive integers")
    t.bus_ids = ids.astype(np.int64)
    uniq, counts = np.unique(t.bus_ids, return_counts=True)
    if np.any(counts > 1):
        raise CaseDataError(f"{src}: bus {uniq[counts > 1][0]} appears {counts[counts > 1][0]} times in mpc.bus")
    t.lookup = {int(b): i for i, b in enumerate(t.bus_ids)}


def check_bus_types(t: _Tables) -> None:
    """Bus types are MATPOWER's 1-4 (0 is accepted and corrected to PQ)."""
    bus = t.data.bus
    t.btype = bus[:, 1].astype(int)
    bad = ~np.isin(t.btype, [0, 1, 2, 3, 4])
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise CaseDataError(f"{t.src}: bus {t.bus_ids[k]} has type {bus[k, 1]:g}; MATPOWER bus types are 1-4")


def check_voltage_limits(t: _Tables) -> None:
    """0 <= Vmin <= Vmax at every bus."""
    vmin, vmax = t.data.bus[:, 12], t.data.bus[:, 11]
    bad = (vmin > vmax) | (vmin < 0)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise CaseDataError(f"{t.src}: bus {t.bus_ids[k]} has Vmin {vmin[k]:g} and Vmax {vmax[k]:g}; need 0 <= Vmin <= Vmax")


def check_branches(t: _Tables) -> None:
    """Branch ends are known, distinct buses; impedance is not zero; ratings are not negative;
    angmin <= angmax."""
    branch, src = t.data.branch, t.src
    t.f_all = t.bus_of(branch[:, 0], "branch", "fbus")
    t.t_all = t.bus_of(branch[:, 1], "branch", "tbus")
    loops = t.f_all == t.t_all
    if loops.any():
        k = int(np.flatnonzero(loops)[0])
        raise CaseDataError(f"{src}: branch {k + 1} connects bus {t.bus_ids[t.f_all[k]]} to itself")
    zero_z = (branch[:, 2] == 0) & (branch[:, 3] == 0)
    if zero_z.any():
        k = int(np.flatnonzero(zero_z)[0])
        raise CaseDataError(f"{src}: branch {k + 1} has zero impedance (r = x = 0); its admittance is undefined")
    if np.any(branch[:, 5] < 0):
        k = int(np.flatnonzero(branch[:, 5] < 0)[0])
        raise CaseDataError(f"{src}: branch {k + 1} has a negative rateA ({branch[k, 5]:g})")
    if np.any(branch[:, 8] < 0):
        k = int(np.flatnonzero(branch[:, 8] < 0)[0])
        raise CaseDataError(f"{src}: branch {k + 1} has a negative tap ratio ({branch[k, 8]:g}); it must be positive (0 means 1)")
    odd_tap = (branch[:, 8] != 0) & ((branch[:, 8] < TAP_RANGE[0]) | (branch[:, 8] > TAP_RANGE[1]))
    if odd_tap.any():
        k = int(np.flatnonzero(odd_tap)[0])
        raise CaseDataError(
            f"{src}: branch {k + 1} has a tap ratio of {branch[k, 8]:g}, outside [{TAP_RANGE[0]:g}, {TAP_RANGE[1]:g}]; "
            "its admittance would be meaningless (0 means 1)"
        )
    z = np.hypot(branch[:, 2], branch[:, 3])
    if np.any(z < TINY_IMPEDANCE):
        k = int(np.flatnonzero(z < TINY_IMPEDANCE)[0])
        log.warning(
            "%s: branch %d has an impedance of %.3g p.u. (r = %g, x = %g), below %g: the model is ill-conditioned and "
            "solutions may violate its constraints; merge its buses or give it a realistic impedance",
            src, k + 1, z[k], branch[k, 2], branch[k, 3], TINY_IMPEDANCE,
        )
    ncols = branch.shape[1]
    t.angmin_deg = branch[:, 11] if ncols > 11 else np.full(len(branch), -360.0)
    t.angmax_deg = branch[:, 12] if ncols > 12 else np.full(len(branch), 360.0)
    bad = t.angmin_deg > t.angmax_deg
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise CaseDataError(f"{src}: branch {k + 1} has angmin {t.angmin_deg[k]:g} > angmax {t.angmax_deg[k]:g}")


def check_generators(t: _Tables) -> None:
    """Generators sit at known buses, with Pmin <= Pmax and Qmin <= Qmax."""
    gen = t.data.gen
    t.gen_bus_all = t.bus_of(gen[:, 0], "generator", "bus") if len(gen) else np.zeros(0, np.int64)
    for lo, hi, name in ((gen[:, 9], gen[:, 8], "Pmin/Pmax"), (gen[:, 4], gen[:, 3], "Qmin/Qmax")):
        bad = lo > hi
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise CaseDataError(f"{t.src}: generator {k + 1} has {name} = {lo[k]:g}/{hi[k]:g}; the minimum exceeds the maximum")


def check_dclines(t: _Tables) -> None:
    """HVDC lines: 17 columns, finite used fields, known and distinct end buses, status 0 or 1,
    PMIN <= PMAX, QMINF <= QMAXF, QMINT <= QMAXT."""
    src = t.src
    dc = t.data.extra.get("dcline")
    if dc is None or dc.size == 0:
        t.dcline = np.zeros((0, len(DCLINE_COLUMNS)))
        t.dc_f_all = t.dc_t_all = np.zeros(0, np.int64)
        return
    if dc.shape[1] < len(DCLINE_COLUMNS):
        raise CaseDataError(
            f"{src}: mpc.dcline has {dc.shape[1]} columns; MATPOWER needs at least {len(DCLINE_COLUMNS)} "
            f"({' '.join(DCLINE_COLUMNS)})"
        )
    ids = np.arange(1, len(dc) + 1)
    # PF..VT are solution/set-point fields powerdp does not read
    _check_finite(dc, "dcline", DCLINE_COLUMNS, [0, 1, 2, 9, 10, 11, 12, 13, 14, 15, 16], ids, src)
    t.dcline = dc
    t.dc_f_all = t.bus_of(dc[:, 0], "dcline", "F_BUS")
    t.dc_t_all = t.bus_of(dc[:, 1], "dcline", "T_BUS")
    loops = t.dc_f_all == t.dc_t_all
    if loops.any():
        k = int(np.flatnonzero(loops)[0])
        raise CaseDataError(f"{src}: dcline {k + 1} connects bus {t.bus_ids[t.dc_f_all[k]]} to itself")
    bad = ~np.isin(dc[:, 2], [0, 1])
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise CaseDataError(f"{src}: dcline {k + 1} has BR_STATUS {dc[k, 2]:g}; it must be 1 (in service) or 0 (out)")
    for lo, hi, name in ((9, 10, "PMIN/PMAX"), (11, 12, "QMINF/QMAXF"), (13, 14, "QMINT/QMAXT")):
        bad = dc[:, lo] > dc[:, hi]
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise CaseDataError(
                f"{src}: dcline {k + 1} has {name} = {dc[k, lo]:g}/{dc[k, hi]:g}; the minimum exceeds the maximum"
            )


CHECKS = (
    check_finite_values, check_bus_ids, check_bus_types, check_voltage_limits, check_branches, check_generators,
    check_dclines,
)


# ---------------------------------------------------------------------------- correct passes (note with -v)


def correct_bus_types(t: _Tables) -> None:
    """Type-0 buses become PQ buses."""
    if np.any(t.btype == 0):
        log.info("%s: %d bus(es) of type 0 treated as PQ buses", t.src, int(np.sum(t.btype == 0)))
        t.btype = np.where(t.btype == 0, 1, t.btype)


def correct_out_of_service(t: _Tables) -> None:
    """Isolated buses (type 4), out-of-service branches and generators, and elements at dropped buses go."""
    src, branch, gen = t.src, t.data.branch, t.data.gen
    t.active_bus = t.btype != 4
    if not t.active_bus.any():
        raise CaseDataError(f"{src}: every bus is isolated (bus type 4); there is no network to solve")
    if not t.active_bus.all():
        log.info("%s: dropping %d isolated bus(es) (type 4)", src, int((~t.active_bus).sum()))
    t.active_branch = (branch[:, 10] != 0) & t.active_bus[t.f_all] & t.active_bus[t.t_all]
    if not t.active_branch.all():
        log.info("%s: dropping %d out-of-service branch(es)", src, int((~t.active_branch).sum()))
    t.active_gen = (gen[:, 7] > 0) & t.active_bus[t.gen_bus_all] if len(gen) else np.zeros(0, bool)
    if len(gen) and not t.active_gen.all():
        out = int((gen[:, 7] <= 0).sum())
        at_isolated = int(((gen[:, 7] > 0) & ~t.active_bus[t.gen_bus_all]).sum())
        if out:
            log.info("%s: dropping %d out-of-service generator(s)", src, out)
        if at_isolated:
            log.info("%s: dropping %d in-service generator(s) at isolated (type 4) buses", src, at_isolated)
    t.active_dcline = (t.dcline[:, 2] != 0) & t.active_bus[t.dc_f_all] & t.active_bus[t.dc_t_all]
    if not t.active_dcline.all():
        log.info("%s: dropping %d out-of-service dcline(s)", src, int((~t.active_dcline).sum()))


def correct_taps(t: _Tables) -> None:
    """A tap ratio of 0 means 1 (PowerModels resets non-positive taps too)."""
    raw = t.data.branch[t.active_branch, 8]
    t.tap = np.where(raw <= 0, 1.0, raw)
    if np.any(raw <= 0):
        log.info("%s: %d branch tap ratio(s) of 0 taken as 1", t.src, int(np.sum(raw <= 0)))


def correct_ratings(t: _Tables) -> None:
    """rateA = 0 means no thermal limit; any positive rateA, however small, is a limit."""
    rate = t.data.branch[t.active_branch, 5] / t.S
    # 0 is no limit; so is a rating whose square overflows (rateA 1e308: the thermal constraint squares it)
    t.rate_a = np.where((rate == 0.0) | (rate > NO_LIMIT_RATING), np.inf, rate)
    if np.any(rate > NO_LIMIT_RATING):
        log.info("%s: %d branch(es) with rateA above %g p.u. have no thermal limit", t.src, int(np.sum(rate > NO_LIMIT_RATING)), NO_LIMIT_RATING)
    if np.isinf(t.rate_a).any():
        log.info("%s: %d branch(es) with rateA = 0 have no thermal limit", t.src, int(np.isinf(t.rate_a).sum()))
    tiny = (rate > 0) & (rate * t.S < TINY_RATING_MVA)
    if tiny.any():
        k = int(np.flatnonzero(t.active_branch)[np.flatnonzero(tiny)[0]])
        log.warning(
            "%s: %d branch(es) have rateA below %g MVA (branch %d: %g MVA) and can carry almost no power; "
            "rateA = 0 means no limit", t.src, int(tiny.sum()), TINY_RATING_MVA, k + 1, t.data.branch[k, 5],
        )


def correct_angle_limits(t: _Tables) -> None:
    """PowerModels: limits of 90 degrees or more, or both 0, become ±60 degrees; MATPOWER: 0 or ±360 means none."""
    amin_deg, amax_deg = t.angmin_deg[t.active_branch], t.angmax_deg[t.active_branch]
    if t.convention == "powermodels":
        both_zero = (amin_deg == 0) & (amax_deg == 0)
        amin = np.where(amin_deg <= -90, -PM_ANGLE_PAD, np.deg2rad(amin_deg))
        amax = np.where(amax_deg >= 90, PM_ANGLE_PAD, np.deg2rad(amax_deg))
        amin[both_zero], amax[both_zero] = -PM_ANGLE_PAD, PM_ANGLE_PAD
        padded = both_zero | (amin_deg <= -90) | (amax_deg >= 90)
        if padded.any():
            log.info(
                "%s: %d branch angle-difference limit(s) of 90 degrees or more (or both 0) set to +-60 degrees (PowerModels)",
                t.src, int(padded.sum()),
            )
    else:
        none_min = (amin_deg == 0) | (amin_deg <= -360)
        none_max = (amax_deg == 0) | (amax_deg >= 360)
        amin = np.where(none_min, -np.inf, np.deg2rad(amin_deg))
        amax = np.where(none_max, np.inf, np.deg2rad(amax_deg))
    t.angmin, t.angmax = amin, amax


def dcline_end_limits(pmin, pmax, loss0, loss1):
    """Active-power bounds at both ends from MATPOWER's PMIN/PMAX (PowerModels' ``_mp2pm_dcline!``).

    PMIN/PMAX bound the from-end flow when non-negative; a negative PMIN (PMAX) bounds the
    to-end flow by -PMIN (PMAX), and the other end's bound follows from the loss relation
    (1 - loss1) p_fr + p_to = loss0 (docs/formulation.md). Any consistent unit.
    """
    g = 1.0 - loss1
    with np.errstate(divide="ignore", invalid="ignore"):
        pminf = np.where(pmin >= 0, pmin, (pmin + loss0) / g)  # -pmaxt = pmin
        pmaxt = np.where(pmin >= 0, loss0 - pmin * g, -pmin)
        pmaxf = np.where(pmax >= 0, pmax, (-pmax + loss0) / g)  # pmint = pmax
        pmint = np.where(pmax >= 0, loss0 - pmax * g, pmax)
    return pminf, pmaxf, pmint, pmaxt


def correct_dclines(t: _Tables) -> None:
    """End limits of the active HVDC lines, then PowerModels' ``correct_dcline_limits!`` on the losses."""
    dc = t.dcline[t.active_dcline]
    S = t.S
    loss0, loss1 = dc[:, 15] / S, dc[:, 16].copy()
    # limits from the raw losses, as PowerModels' parser does before it corrects them
    pminf, pmaxf, pmint, pmaxt = dcline_end_limits(dc[:, 9] / S, dc[:, 10] / S, loss0, loss1)
    ids = np.flatnonzero(t.active_dcline) + 1
    undefined = ~np.all(np.isfinite(np.stack([pminf, pmaxf, pmint, pmaxt])), axis=0)
    if undefined.any():
        k = int(np.flatnonzero(undefined)[0])
        raise CaseDataError(
            f"{t.src}: dcline {ids[k]} has LOSS1 {loss1[k]:g} with a negative PMIN or PMAX; its end limits "
            "(PMIN/PMAX through the loss relation) are undefined: LOSS1 must be below 1"
        )

    def fix(mask, what, values, unit):
        for k in np.flatnonzero(mask):
            log.warning("%s: dcline %d: %s; changing it from %g%s to 0 (as PowerModels)", t.src, ids[k], what, values[k], unit)

    neg0 = loss0 < 0
    fix(neg0, "negative LOSS0", loss0 * S, " MW")
    loss0 = np.where(neg0, 0.0, loss0)
    big0 = loss0 >= pmaxf * (1 - loss1) + pmaxt
    fix(big0, "LOSS0 inconsistent with the flow limits", loss0 * S, " MW")
    loss0 = np.where(big0, 0.0, loss0)
    bad1 = (loss1 < 0) | (loss1 >= 1)
    fix(bad1, "LOSS1 outside [0, 1)", loss1, "")
    loss1 = np.where(bad1, 0.0, loss1)
    # PowerModels warns on pmint < 0, which every forward-flowing lossy line has; a line that can run
    # backwards (PMIN < 0) is what makes the losses loss0 + loss1 p_fr negative
    both_ways = (pminf < 0) & (loss1 > 0)
    if both_ways.any():
        log.warning(
            "%s: dcline(s) %s can flow both ways (PMIN < 0) with LOSS1 > 0: the loss model is meant for one "
            "direction, so losses can come out negative; set LOSS1 = 0 to avoid this", t.src, _list_ids(ids[both_ways]),
        )
    t.dc_limits = {
        "pminf": pminf, "pmaxf": pmaxf, "pmint": pmint, "pmaxt": pmaxt,
        "qminf": dc[:, 11] / S, "qmaxf": dc[:, 12] / S, "qmint": dc[:, 13] / S, "qmaxt": dc[:, 14] / S,
        "loss0": loss0, "loss1": loss1,
    }


CORRECTIONS = (
    correct_bus_types, correct_out_of_service, correct_taps, correct_ratings, correct_angle_limits, correct_dclines,
)


def _cost_table(t: _Tables, gc, what: str, table: str, pmin_all, pmax_all, active):
    """Per element row of ``gc`` (MATPOWER gencost layout): (c2, c1, c0) in $/h per p.u., and the
    piecewise-linear points of active elements, cleaned as PowerModels' ``calc_pwl_points``."""
    src, S = t.src, t.S
    n_rows = len(pmin_all)
    c2 = np.zeros(n_rows)
    c1 = np.zeros(n_rows)
    c0 = np.zeros(n_rows)
    pwl_points: list[tuple[int, np.ndarray, np.ndarray]] = []
    if gc is None:
        return c2, c1, c0, pwl_points
    if len(gc) < n_rows:
        raise CaseDataError(f"{src}: mpc.{table} has {len(gc)} rows for {n_rows} {what}s")
    if len(gc) > n_rows:
        log.info("%s: ignoring %d extra mpc.%s row(s) (reactive power costs)", src, len(gc) - n_rows, table)
    if n_rows and gc.shape[1] < 4:
        raise CaseDataError(f"{src}: mpc.{table} has {gc.shape[1]} columns; it needs MODEL STARTUP SHUTDOWN NCOST and the costs")
    for k in range(n_rows):
        row = gc[k]
        if not np.all(np.isfinite(row[:4])):
            raise CaseDataError(f"{src}: {what} {k + 1} has a non-finite value in mpc.{table}")
        model, ncost = int(row[0]), int(round(row[3]))
        if model == 2:
            if ncost < 1:
                raise CaseDataError(
                    f"{src}: {what} {k + 1} has NCOST = {row[3]:g} in mpc.{table}; a polynomial cost needs at least one "
                    "coefficient (NCOST = 1 and a 0 for no cost)"
                )
            coeffs = row[4 : 4 + ncost]
            if len(coeffs) < ncost or not np.all(np.isfinite(coeffs)):
                raise CaseDataError(f"{src}: {what} {k + 1}: mpc.{table} needs {ncost} finite cost coefficients")
            nz = np.flatnonzero(coeffs != 0)
            coeffs = coeffs[nz[0]:] if len(nz) else coeffs[:0]
            if len(coeffs) > 3:
                raise CaseDataError(
                    f"{src}: {what} {k + 1} has a polynomial cost of degree {len(coeffs) - 1}; "
                    "powerdp supports degree 2 at most"
                )
            padded = np.concatenate([np.zeros(3 - len(coeffs)), coeffs])
            if padded[0] < 0 and active[k]:
                raise CaseDataError(
                    f"{src}: {what} {k + 1} has a negative quadratic cost coefficient ({padded[0]:g}) in mpc.{table}; "
                    "the cost is then not convex and the OPF has no meaningful optimum"
                )
            c2[k], c1[k], c0[k] = padded[0] * S**2, padded[1] * S, padded[2]
        elif model == 1:
            vals = row[4 : 4 + 2 * ncost]
            if ncost < 2 or len(vals) < 2 * ncost or not np.all(np.isfinite(vals)):
                raise CaseDataError(
                    f"{src}: {what} {k + 1}: a piecewise-linear cost needs at least 2 finite (MW, $/h) points"
                )
            mw, cost = vals[0::2] / S, vals[1::2]
            if np.any(np.diff(mw) < 0):
                raise CaseDataError(f"{src}: {what} {k + 1}: non-increasing MW values in its piecewise-linear cost")
            if active[k]:
                pmw, pc = _calc_pwl_points(mw, cost, pmin_all[k], pmax_all[k])
                pwl_points.append((k, pmw, pc))
        else:
            raise CaseDataError(f"{src}: {what} {k + 1} has cost model {row[0]:g}; MATPOWER models are 1 or 2")
    return c2, c1, c0, pwl_points


def _costs(t: _Tables):
    """Per generator row: (c2, c1, c0) in $/h per p.u., and the piecewise-linear points of active generators."""
    gen = t.data.gen
    return _cost_table(t, t.data.gencost, "generator", "gencost", gen[:, 9] / t.S, gen[:, 8] / t.S, t.active_gen)


def _pwl_arrays(pwl_points, new_index: np.ndarray):
    """Flat (element, mw, cost) arrays of the piecewise-linear points of kept elements, renumbered."""
    pwl_points = [(int(new_index[k]), m, c) for k, m, c in pwl_points if new_index[k] >= 0]
    if not pwl_points:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    return (
        np.concatenate([np.full(len(m), k) for k, m, _ in pwl_points]).astype(np.int64),
        np.concatenate([m for _, m, _ in pwl_points]),
        np.concatenate([c for _, _, c in pwl_points]),
    )


def _dclines(t: _Tables, new_index: np.ndarray) -> DCLines:
    """The active HVDC lines with their limits and costs (PowerModels adds zero costs when the
    case has generator costs but no mpc.dclinecost)."""
    keep = np.flatnonzero(t.active_dcline)
    if keep.size == 0:
        return DCLines.empty()
    lim = t.dc_limits
    n_rows = len(t.dcline)
    gc = t.data.extra.get("dclinecost")
    if gc is not None and gc.size == 0:
        gc = None
    if gc is None and t.data.gencost is not None:
        log.info("%s: no mpc.dclinecost; the %d dcline(s) cost nothing (as PowerModels)", t.src, keep.size)
    pminf = np.zeros(n_rows)
    pmaxf = np.zeros(n_rows)
    pminf[keep], pmaxf[keep] = lim["pminf"], lim["pmaxf"]
    c2, c1, c0, pwl_points = _cost_table(t, gc, "dcline", "dclinecost", pminf, pmaxf, t.active_dcline)
    dc_new = -np.ones(n_rows, dtype=np.int64)
    dc_new[keep] = np.arange(keep.size)
    pwl_line, pwl_mw, pwl_cost = _pwl_arrays(pwl_points, dc_new)
    return DCLines(
        ids=keep + 1,
        f_bus=new_index[t.dc_f_all[keep]],
        t_bus=new_index[t.dc_t_all[keep]],
        **{k: lim[k] for k in ("pminf", "pmaxf", "pmint", "pmaxt", "qminf", "qmaxf", "qmint", "qmaxt", "loss0", "loss1")},
        cost_c2=c2[keep],
        cost_c1=c1[keep],
        cost_c0=c0[keep],
        pwl_line=pwl_line,
        pwl_mw=pwl_mw,
        pwl_cost=pwl_cost,
    )


def network_from_matpower(
    data: MatpowerData, convention: Convention = "powermodels", fill_thermal_limits: bool = False
) -> Network:
    """Build a per-unit :class:`Network` from raw MATPOWER tables (docs/formulation.md).

    As PowerModels does it: the :data:`CHECKS` passes raise a :class:`CaseDataError` naming the file,
    the element and the field; then the :data:`CORRECTIONS` passes apply the data conventions, each
    noting what it changed (``-v``).
    """
    t = _Tables(data=data, convention=convention, src=data.source, S=data.base_mva)
    for check in CHECKS:
        check(t)
    for correct in CORRECTIONS:
        correct(t)
    src, S, bus, gen, branch = t.src, t.S, data.bus, data.gen, data.branch
    keep_bus = np.flatnonzero(t.active_bus)
    new_index = -np.ones(len(t.bus_ids), dtype=np.int64)
    new_index[keep_bus] = np.arange(len(keep_bus))
    bk = np.flatnonzero(t.active_branch)
    gk = np.flatnonzero(t.active_gen)
    bc = branch[bk, 4]

    c2, c1, c0, pwl_points = _costs(t)
    gen_new = -np.ones(len(gen), dtype=np.int64)
    gen_new[gk] = np.arange(len(gk))
    pwl_gen, pwl_mw, pwl_cost = _pwl_arrays(pwl_points, gen_new)
    dcline = _dclines(t, new_index)

    if "storage" in data.extra and data.extra["storage"].size:
        log.warning("%s: mpc.storage (%d rows) is not modelled by powerdp and is ignored", src, len(data.extra["storage"]))
    net = Network(
        name=data.name,
        base_mva=S,
        convention=convention,
        bus_ids=t.bus_ids[keep_bus],
        bus_type=t.btype[keep_bus],
        pd=bus[keep_bus, 2] / S,
        qd=bus[keep_bus, 3] / S,
        gs=bus[keep_bus, 4] / S,
        bs=bus[keep_bus, 5] / S,
        vmin=bus[keep_bus, 12],
        vmax=bus[keep_bus, 11],
        bus_area=bus[keep_bus, 6].astype(np.int64),
        bus_zone=bus[keep_bus, 10].astype(np.int64),
        gen_ids=gk + 1,
        gen_bus=new_index[t.gen_bus_all[gk]],
        pmin=gen[gk, 9] / S,
        pmax=gen[gk, 8] / S,
        qmin=gen[gk, 4] / S,
        qmax=gen[gk, 3] / S,
        cost_c2=c2[gk],
        cost_c1=c1[gk],
        cost_c0=c0[gk],
        pwl_gen=pwl_gen,
        pwl_mw=pwl_mw,
        pwl_cost=pwl_cost,
        branch_ids=bk + 1,
        f_bus=new_index[t.f_all[bk]],
        t_bus=new_index[t.t_all[bk]],
        r=branch[bk, 2],
        x=branch[bk, 3],
        g_fr=np.zeros(len(bk)),
        b_fr=bc / 2,
        g_to=np.zeros(len(bk)),
        b_to=bc / 2,
        tap=t.tap,
        shift=np.deg2rad(branch[bk, 9]),
        rate_a=t.rate_a,
        angmin=t.angmin,
        angmax=t.angmax,
        has_costs=data.gencost is not None,
        source=src,
        dcline=dcline,
        base_kv=bus[keep_bus, 9].astype(float),
    )
    if fill_thermal_limits:
        _fill_thermal_limits(net)
    _warn_suspicious(net, data, gk)
    if convention == "matpower":
        wide = (np.abs(net.pair_angmin) >= np.pi / 2) & np.isfinite(net.pair_angmin) | (
            (np.abs(net.pair_angmax) >= np.pi / 2) & np.isfinite(net.pair_angmax)
        )
        if wide.any():
            log.warning(
                "%s: %d bus pair(s) have angle-difference limits of 90 degrees or more, which the SOC "
                "relaxation cannot express; they are not enforced",
                src,
                int(wide.sum()),
            )
    return net


def _is_pandapower(source: str) -> bool:
    return str(source).startswith("pandapower")


def missing_costs_message(net: Network) -> str:
    """The error of a cost objective on a network without costs, in the words of where it came from."""
    if _is_pandapower(net.source):
        return (
            f"{net.source} has no cost functions (net.poly_cost or net.pwl_cost); the cost objective needs them: "
            "add them with pandapower.create_poly_cost, or use the shedding objective"
        )
    return f"{net.source or net.name}: no generator costs (mpc.gencost); the cost objective needs them, or use the shedding objective"


def _list_ids(ids, limit: int = 8) -> str:
    ids = [str(int(i)) for i in ids]
    return ", ".join(ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _warn_suspicious(net: Network, data: MatpowerData, gen_rows: np.ndarray) -> None:
    """Warnings for data that loads but is probably not what the user meant (islands, no reference bus, no limits)."""
    src = net.source or net.name
    pp = _is_pandapower(src)
    # islands: a bus cut off from the rest cannot be supplied (an infeasible cost OPF), or is a separate network
    if net.n_bus > 1:
        import scipy.sparse as sp
        from scipy.sparse.csgraph import connected_components

        # HVDC lines carry power between islands too
        u = np.concatenate([net.pair_f, net.dcline.f_bus])
        v = np.concatenate([net.pair_t, net.dcline.t_bus])
        adj = sp.coo_matrix((np.ones(len(u)), (u, v)), shape=(net.n_bus, net.n_bus))
        n_isl, comp = connected_components(adj, directed=False)
        if n_isl > 1:
            main = np.bincount(comp).argmax()
            cut = net.bus_ids[comp != main]
            word = "pandapower bus index" if pp else "bus"
            ids = cut - 1 if pp else cut
            log.warning(
                "%s: the network has %d islands; %s(es) %s are cut off from the largest one (a cost OPF is infeasible "
                "unless every island can supply its own load)", src, n_isl, word, _list_ids(ids),
            )
    if net.n_gen == 0:
        log.warning("%s: no generator in service; nothing can supply the load (a cost OPF is infeasible)", src)
    if net.n_bus and not np.any(net.bus_type == 3):
        log.warning("%s: no reference bus (bus type 3); the case is probably incomplete", src)
    if not pp or not len(gen_rows):
        return
    # pandapower networks made for power flow lack OPF limits; to_mpc fills in defaults that say nothing
    gen = data.gen[gen_rows]
    notes = []
    unbounded = (np.abs(gen[:, 8]) >= 1e9) | (np.abs(gen[:, 9]) >= 1e9)
    if unbounded.any():
        notes.append(f"{int(unbounded.sum())} generator(s) or external grid(s) without max_p_mw/min_p_mw (±1e9 MW)")
    ref = np.isin(net.gen_bus, np.flatnonzero(net.bus_type == 3))
    zero_q = ref & (gen[:, 3] == 0) & (gen[:, 4] == 0)
    if zero_q.any():
        notes.append("the external grid's max_q_mvar = min_q_mvar = 0 (it can supply no reactive power)")
    no_v = (net.vmin <= 0) | (net.vmax >= 2)
    if no_v.any():
        notes.append(f"{int(no_v.sum())} bus(es) without min_vm_pu/max_vm_pu")
    if notes:
        log.warning(
            "%s has no OPF limits: %s; set them in pandapower before an OPF (per unit on sn_mva = %g MVA)",
            src, "; ".join(notes), net.base_mva,
        )


def _fill_thermal_limits(net: Network) -> None:
    """PowerModels' ``calc_thermal_limits!`` for branches without a rating (docs/formulation.md)."""
    missing = ~np.isfinite(net.rate_a)
    if not missing.any():
        return
    y = 1.0 / np.abs(net.r + 1j * net.x)
    vf, vt = net.vmax[net.f_bus], net.vmax[net.t_bus]
    theta = np.maximum(np.abs(net.angmin), np.abs(net.angmax))
    theta = np.where(np.isfinite(theta), theta, np.pi)
    c_max = np.sqrt(np.maximum(vf**2 + vt**2 - 2 * vf * vt * np.cos(theta), 0.0))
    rate = y * np.maximum(vf, vt) * c_max
    net.rate_a = np.where(missing, rate, net.rate_a)


def _calc_pwl_points(mw: np.ndarray, cost: np.ndarray, pmin: float, pmax: float, tol: float = 1e-2):
    """PowerModels' ``calc_pwl_points``: keep the active segments, extend past [pmin, pmax]."""
    n = len(mw)
    first = 0
    for i in range(n - 1):
        first = i
        if pmin <= mw[i + 1]:
            break
    last = n - 1
    for i in range(1, n):
        last = n - i
        if pmax >= mw[n - 1 - i]:
            break
    mw, cost = mw[first : last + 1].copy(), cost[first : last + 1].copy()
    if mw[0] > pmin:
        x0 = pmin - tol
        dx = mw[1] - mw[0]
        cost[0] = cost[1] - (cost[1] - cost[0]) / dx * (mw[1] - x0) if dx != 0 else cost[0]
        mw[0] = x0
    if mw[-1] < pmax:
        x3 = pmax + tol
        dx = mw[-1] - mw[-2]
        cost[-1] = (cost[-1] - cost[-2]) / dx * (x3 - mw[-2]) + cost[-2] if dx != 0 else cost[-1]
        mw[-1] = x3
    return mw, cost


def voltage_product_bounds(net: Network) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bounds on (wr, wi) per bus pair, PowerModels' ``ref_calc_voltage_product_bounds``."""
    f, t = net.pair_f, net.pair_t
    amin, amax = net.pair_angmin, net.pair_angmax
    fmax, tmax, fmin, tmin = net.vmax[f], net.vmax[t], net.vmin[f], net.vmin[t]
    big = fmax * tmax
    wr_min, wr_max = -big.copy(), big.copy()
    wi_min, wi_max = -big.copy(), big.copy()
    with np.errstate(invalid="ignore"):
        pos = amin >= 0
        neg = amax <= 0
        mid = (amin < 0) & (amax > 0)
        fin = np.isfinite(amin) & np.isfinite(amax)
        pos &= fin
        neg &= fin
        mid &= fin
        wr_max = np.where(pos, big * np.cos(amin), wr_max)
        wr_min = np.where(pos, fmin * tmin * np.cos(amax), wr_min)
        wi_max = np.where(pos, big * np.sin(amax), wi_max)
        wi_min = np.where(pos, fmin * tmin * np.sin(amin), wi_min)
        wr_max = np.where(neg, big * np.cos(amax), wr_max)
        wr_min = np.where(neg, fmin * tmin * np.cos(amin), wr_min)
        wi_max = np.where(neg, fmin * tmin * np.sin(amax), wi_max)
        wi_min = np.where(neg, big * np.sin(amin), wi_min)
        wr_max = np.where(mid, big, wr_max)
        wr_min = np.where(mid, fmin * tmin * np.minimum(np.cos(amin), np.cos(amax)), wr_min)
        wi_max = np.where(mid, big * np.sin(amax), wi_max)
        wi_min = np.where(mid, big * np.sin(amin), wi_min)
    return wr_min, wr_max, wi_min, wi_max
