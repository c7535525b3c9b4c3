"""Network data: a case as per-unit numpy arrays, and the two data conventions.

:func:`~powerdp.grid.loading.load_case` turns a bundled case name, a MATPOWER ``.m`` file or a
pandapower network into a :class:`Network`: every quantity per unit on
``base_mva``, angles in radians, out-of-service elements and isolated buses
dropped (docs/formulation.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["Network", "DCLines", "CONVENTIONS", "missing_costs_message", "voltage_product_bounds"]

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






















# ---------------------------------------------------------------------------- check passes (raise)


















# ---------------------------------------------------------------------------- correct passes (note with -v)






























def missing_costs_message(net: Network) -> str:
    """The error of a cost objective on a network without costs, in the words of where it came from."""
    if _is_pandapower(net.source):
        return (
            f"{net.source} has no cost functions (net.poly_cost or net.pwl_cost); the cost objective needs them: "
            "add them with pandapower.create_poly_cost, or use the shedding objective"
        )
    return f"{net.source or net.name}: no generator costs (mpc.gencost); the cost objective needs them, or use the shedding objective"










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


def _is_pandapower(source: str) -> bool:
    return str(source).startswith("pandapower")
