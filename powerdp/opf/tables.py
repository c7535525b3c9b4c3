"""A solution in physical units: per-generator, per-bus, per-branch and per-zone tables (docs/operating_point.md).

A solution of the SOC relaxation is a vector over the model's variables, in per unit on the
case's ``base_mva``. :class:`Dispatch` holds the network-wide per-unit arrays (``w``, ``pg``,
``qg`` and the branch flows at both ends); :func:`dispatch_from_solution` reads them from the
variable keys of one whole-network solution and :func:`dispatch_from_zones` assembles them from
the zones' released solutions of a distributed run. :func:`physical_tables` then turns a
:class:`Dispatch` into DataFrames named and signed as pandapower's result tables:

- ``generators``: ``p_mw``, ``q_mvar``, ``cost_per_h`` ($/h, from the case's cost data)
- ``buses``: ``vm_pu`` (√w), ``vm_kv``, ``p_mw``/``q_mvar`` (net demand, pandapower's
  ``res_bus`` sign: consumption positive), load and shedding (``p_shed_mw``, ``q_shed_mvar``:
  load not served, positive; negative when more is delivered than the load)
- ``branches``: ``p_from_mw``, ``q_from_mvar``, ``p_to_mw``, ``q_to_mvar`` (power flowing
  *into* the branch at that end, as pandapower's ``res_line``), ``pl_mw``, ``ql_mvar`` (losses)
  and ``loading_percent`` = 100·max(|S_from|, |S_to|)/rateA (NaN for a branch without a rating)
- ``zones``: per zone, generation, cost, load, shedding, losses inside the zone and the
  export over its tie-lines.

Everything is computed with numpy from the network arrays; shedding is the power-balance
residual of docs/formulation.md, so it is the same for every objective.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ModelError
from ..grid.network import Network
from .formulation import branch_flow_coefficients
from .objectives import generator_costs

__all__ = [
    "Dispatch",
    "ResultTables",
    "dispatch_from_solution",
    "dispatch_from_zones",
    "dispatch_from_tables",
    "physical_tables",
    "TABLE_NAMES",
]

TABLE_NAMES = ("generators", "buses", "branches", "zones")
FLOW_KINDS = ("pf", "qf", "pt", "qt")


@dataclass
class Dispatch:
    """A network-wide operating point of the relaxation, per unit (internal indices).

    ``w`` per bus (squared voltage magnitude), ``pg``/``qg`` per generator, and the branch
    flows ``pf``/``qf`` (into the branch at its f end) and ``pt``/``qt`` (at its t end);
    ``dc`` the HVDC lines' powers entering each line at its ends (``p_dc_fr``, ``p_dc_to``,
    ``q_dc_fr``, ``q_dc_to``; withdrawals at the end buses), empty for a case without lines.
    """

    w: np.ndarray
    pg: np.ndarray
    qg: np.ndarray
    pf: np.ndarray
    qf: np.ndarray
    pt: np.ndarray
    qt: np.ndarray
    dc: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def vm(self) -> np.ndarray:
        """Voltage magnitude √w (p.u.), the set-point of an AC power flow."""
        return np.sqrt(np.maximum(self.w, 0.0))


DC_KINDS = ("p_dc_fr", "p_dc_to", "q_dc_fr", "q_dc_to")


def _arrays(keys: Sequence[Hashable], values: np.ndarray, sizes: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Scatter a solution vector into one array per variable name (NaN where the solution has no entry)."""
    names = np.array([k[0] for k in keys], dtype=object)
    idx = np.array([k[1] for k in keys], dtype=object)
    values = np.asarray(values, dtype=float)
    out = {}
    for name, n in sizes.items():
        arr = np.full(n, np.nan)
        sel = names == name
        if sel.any():
            arr[idx[sel].astype(np.int64)] = values[sel]
        out[name] = arr
    return out


def _flows_from_w(net: Network, v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Branch flows as the linear functions of (w_f, w_t, wr, wi) of docs/formulation.md."""
    cf = branch_flow_coefficients(net)
    wr = v["wr"][net.branch_pair]
    wi = v["wi"][net.branch_pair] * net.branch_pair_sign  # oriented from the branch's f to its t bus
    out = {}
    for kind in FLOW_KINDS:
        end = net.f_bus if kind[1] == "f" else net.t_bus
        out[kind] = cf[kind + "_w"] * v["w"][end] + cf[kind + "_wr"] * wr + cf[kind + "_wi"] * wi
    return out


def _solution_arrays(net: Network, keys: Sequence[Hashable], values: np.ndarray) -> dict[str, np.ndarray]:
    sizes = {"w": net.n_bus, "wr": net.n_pair, "wi": net.n_pair, "pg": net.n_gen, "qg": net.n_gen}
    sizes.update({k: net.n_branch for k in FLOW_KINDS})
    sizes.update({k: net.dcline.n for k in DC_KINDS} if net.dcline.n else {})
    v = _arrays(keys, values, sizes)
    computed = _flows_from_w(net, v)  # flows eliminated ("expressions" mode): from W
    for kind in FLOW_KINDS:
        v[kind] = np.where(np.isnan(v[kind]), computed[kind], v[kind])
    return v


def dispatch_from_solution(net: Network, keys: Sequence[Hashable], values: np.ndarray) -> Dispatch:
    """The :class:`Dispatch` of a whole-network solution (variable keys as in :func:`build_model`)."""
    v = _solution_arrays(net, keys, values)
    missing = [name for name in ("w", "pg", "qg", "pf") if np.isnan(v[name]).any()]
    if missing:
        name = missing[0]
        k = int(np.flatnonzero(np.isnan(v[name]))[0])
        raise ModelError(f"the solution has no value of {name} for element {k}; it is not a whole-network solution")
    return Dispatch(**{k: v[k] for k in ("w", "pg", "qg", *FLOW_KINDS)}, dc={k: v[k] for k in DC_KINDS if k in v})


def dispatch_from_zones(
    net: Network, zone_of_bus: np.ndarray, solutions: Mapping[int, Mapping[Hashable, float]]
) -> Dispatch:
    """Assemble the network's :class:`Dispatch` from each zone's released solution.

    Every value comes from the zone that *owns* it (docs/formulation.md): a bus's ``w`` from the
    zone of the bus, a generator's output from the zone of its bus, and each end of a branch
    from the zone of the bus at that end (so a tie-line's two ends come from the two zones,
    each consistent with its own power balance). Zones disagree on the shared values until
    the run has converged; the consensus residual measures by how much.
    """
    zone_of_bus = np.asarray(zone_of_bus)
    out = {k: np.full(n, np.nan) for k, n in (("w", net.n_bus), ("pg", net.n_gen), ("qg", net.n_gen))}
    out.update({k: np.full(net.n_branch, np.nan) for k in FLOW_KINDS})
    owner = {
        "w": zone_of_bus, "pg": zone_of_bus[net.gen_bus], "qg": zone_of_bus[net.gen_bus],
        "pf": zone_of_bus[net.f_bus], "qf": zone_of_bus[net.f_bus],
        "pt": zone_of_bus[net.t_bus], "qt": zone_of_bus[net.t_bus],
    }
    dc = {k: np.full(net.dcline.n, np.nan) for k in DC_KINDS} if net.dcline.n else {}
    dc_owner = {k: zone_of_bus[net.dcline.f_bus if k.endswith("fr") else net.dcline.t_bus] for k in dc}
    for zone, sol in solutions.items():  # one pass per zone, vectorized inside
        keys = list(sol)
        v = _solution_arrays(net, keys, np.fromiter((sol[k] for k in keys), float, len(keys)))
        for name, arr in out.items():
            mine = owner[name] == int(zone)
            arr[mine] = v[name][mine]
        for name, arr in dc.items():  # an HVDC line's end from the zone of the bus at that end
            mine = dc_owner[name] == int(zone)
            arr[mine] = v[name][mine]
    for name, arr in out.items():
        if np.isnan(arr).any():
            k = int(np.flatnonzero(np.isnan(arr))[0])
            what = {"w": "bus", "pg": "generator", "qg": "generator"}.get(name, "branch")
            ids = {"bus": net.bus_ids, "generator": net.gen_ids, "branch": net.branch_ids}[what]
            raise ModelError(
                f"no zone solution holds {name} of {what} {ids[k]} (zone {owner[name][k]}); the run's zone solutions are incomplete"
            )
    return Dispatch(**out, dc=dc)


@dataclass
class ResultTables:
    """The four physical-unit tables of a solution (see the module docstring)."""

    generators: pd.DataFrame
    buses: pd.DataFrame
    branches: pd.DataFrame
    zones: pd.DataFrame

    def items(self):
        return ((name, getattr(self, name)) for name in TABLE_NAMES)

    def save(self, directory: str | Path) -> None:
        """``generators.csv``, ``buses.csv``, ``branches.csv`` and ``zones.csv`` in ``directory``."""
        from ..files.atomic import atomic_to_csv

        for name, frame in self.items():
            atomic_to_csv(frame, Path(directory) / f"{name}.csv", index=False)

    @classmethod
    def load(cls, directory: str | Path) -> ResultTables | None:
        """The tables saved in ``directory``, or None when it has none (older runs)."""
        d = Path(directory)
        if not all((d / f"{name}.csv").is_file() for name in TABLE_NAMES):
            return None
        return cls(**{name: pd.read_csv(d / f"{name}.csv", float_precision="round_trip") for name in TABLE_NAMES})


def physical_tables(
    net: Network, d: Dispatch, zone_of_bus: np.ndarray | None = None, zone_labels: Sequence | None = None
) -> ResultTables:
    """Generator, bus, branch and zone tables of ``d`` in MW, Mvar, kV, $/h and % (module docstring).

    ``zone_of_bus``: zone index (0..Z-1) of every bus, e.g. a run's partition (the ``zone`` columns,
    as the run's zone files and privacy report number them); default the case's bus areas.
    ``zone_labels``: the label of each zone index (the zones table's ``label``; default the indices).
    """
    S = net.base_mva
    nb = net.n_bus
    if zone_of_bus is None:
        labels_arr, zone_of_bus = np.unique(net.bus_area, return_inverse=True)
        zone_labels = labels_arr.tolist()
    zone_of_bus = np.asarray(zone_of_bus, dtype=np.int64)
    n_zones = int(zone_of_bus.max()) + 1 if nb else 0
    zone_labels = list(range(n_zones)) if zone_labels is None else list(zone_labels)

    # ---- generators
    cost = generator_costs(net, d.pg)
    generators = pd.DataFrame({
        "gen": net.gen_ids,
        "bus": net.bus_ids[net.gen_bus],
        "zone": zone_of_bus[net.gen_bus],
        "p_mw": d.pg * S,
        "q_mvar": d.qg * S,
        "cost_per_h": cost,
        "min_p_mw": net.pmin * S,
        "max_p_mw": net.pmax * S,
        "min_q_mvar": net.qmin * S,
        "max_q_mvar": net.qmax * S,
    })

    # ---- buses: the power balance of docs/formulation.md, sp = Σ flows out − Σ pg + gs·w + pd
    def at_bus(values: np.ndarray, where: np.ndarray) -> np.ndarray:
        return np.bincount(where, weights=values, minlength=nb)

    out_p = at_bus(d.pf, net.f_bus) + at_bus(d.pt, net.t_bus)
    out_q = at_bus(d.qf, net.f_bus) + at_bus(d.qt, net.t_bus)
    if d.dc:  # HVDC lines withdraw p_dc_fr / q_dc_fr at their from bus and p_dc_to / q_dc_to at their to bus
        dcl = net.dcline
        out_p = out_p + at_bus(d.dc["p_dc_fr"], dcl.f_bus) + at_bus(d.dc["p_dc_to"], dcl.t_bus)
        out_q = out_q + at_bus(d.dc["q_dc_fr"], dcl.f_bus) + at_bus(d.dc["q_dc_to"], dcl.t_bus)
    gen_p, gen_q = at_bus(d.pg, net.gen_bus), at_bus(d.qg, net.gen_bus)
    shunt_p, shunt_q = net.gs * d.w, -net.bs * d.w
    shed_p = out_p - gen_p + shunt_p + net.pd  # load not served (positive)
    shed_q = out_q - gen_q + shunt_q + net.qd
    vm = d.vm
    base_kv = net.base_kv if net.base_kv is not None else np.full(nb, np.nan)
    buses = pd.DataFrame({
        "bus": net.bus_ids,
        "zone": zone_of_bus,
        "vm_pu": vm,
        "vm_kv": vm * base_kv,
        "vn_kv": base_kv,
        "min_vm_pu": net.vmin,
        "max_vm_pu": net.vmax,
        # pandapower's res_bus sign: net demand (served load + shunt − generation), consumption positive
        "p_mw": (net.pd - shed_p + shunt_p - gen_p) * S,
        "q_mvar": (net.qd - shed_q + shunt_q - gen_q) * S,
        "load_p_mw": net.pd * S,
        "load_q_mvar": net.qd * S,
        "p_shed_mw": shed_p * S,
        "q_shed_mvar": shed_q * S,
    })

    # ---- branches
    s_from = np.hypot(d.pf, d.qf)
    s_to = np.hypot(d.pt, d.qt)
    rated = np.isfinite(net.rate_a) & (net.rate_a > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        loading = np.where(rated, 100.0 * np.maximum(s_from, s_to) / net.rate_a, np.nan)
    branches = pd.DataFrame({
        "branch": net.branch_ids,
        "from_bus": net.bus_ids[net.f_bus],
        "to_bus": net.bus_ids[net.t_bus],
        "p_from_mw": d.pf * S,
        "q_from_mvar": d.qf * S,
        "p_to_mw": d.pt * S,
        "q_to_mvar": d.qt * S,
        "pl_mw": (d.pf + d.pt) * S,
        "ql_mvar": (d.qf + d.qt) * S,
        "loading_percent": loading,
        "rate_mva": np.where(rated, net.rate_a * S, np.nan),
    })

    # ---- zones: totals; a branch inside a zone counts as its loss, a tie-line end as its export
    zf, zt = zone_of_bus[net.f_bus], zone_of_bus[net.t_bus]
    inside = zf == zt

    def per_zone(values: np.ndarray, where: np.ndarray) -> np.ndarray:
        return np.bincount(where, weights=values, minlength=n_zones) * S

    zones = pd.DataFrame({
        "zone": np.arange(n_zones),
        "label": zone_labels,
        "n_buses": np.bincount(zone_of_bus, minlength=n_zones),
        "n_gens": np.bincount(zone_of_bus[net.gen_bus], minlength=n_zones),
        "p_mw": per_zone(d.pg, zone_of_bus[net.gen_bus]),
        "q_mvar": per_zone(d.qg, zone_of_bus[net.gen_bus]),
        "cost_per_h": per_zone(cost, zone_of_bus[net.gen_bus]) / S,
        "load_p_mw": per_zone(net.pd, zone_of_bus),
        "load_q_mvar": per_zone(net.qd, zone_of_bus),
        "p_shed_mw": per_zone(shed_p, zone_of_bus),
        "q_shed_mvar": per_zone(shed_q, zone_of_bus),
        "shunt_p_mw": per_zone(shunt_p, zone_of_bus),
        "pl_mw": per_zone((d.pf + d.pt) * inside, zf),
        "ql_mvar": per_zone((d.qf + d.qt) * inside, zf),
        "p_export_mw": per_zone(d.pf * ~inside, zf) + per_zone(d.pt * ~inside, zt),
        "q_export_mvar": per_zone(d.qf * ~inside, zf) + per_zone(d.qt * ~inside, zt),
    })
    return ResultTables(generators=generators, buses=buses, branches=branches, zones=zones)


def dispatch_from_tables(net: Network, tables: ResultTables, where: str = "tables") -> Dispatch:
    """The per-unit :class:`Dispatch` back from saved physical tables (generators by ``gen``, buses by ``bus``,
    branches by ``branch`` id); an element of ``net`` missing from a table is a ModelError naming it."""
    S = net.base_mva

    def column(frame: pd.DataFrame, id_col: str, ids: np.ndarray, col: str, what: str) -> np.ndarray:
        if id_col not in frame or col not in frame:
            raise ModelError(f"{where}: the {what} table has no {id_col if id_col not in frame else col} column")
        series = pd.Series(frame[col].to_numpy(float), index=frame[id_col].to_numpy())
        if series.index.has_duplicates:
            raise ModelError(f"{where}: {what} {series.index[series.index.duplicated()][0]} appears twice")
        missing = ~np.isin(ids, series.index.to_numpy())
        if missing.any():
            raise ModelError(f"{where}: no row for {what} {ids[missing][0]} of {net.name} in the {what} table")
        return series.reindex(ids).to_numpy(float)

    g, b, br = tables.generators, tables.buses, tables.branches
    return Dispatch(
        w=column(b, "bus", net.bus_ids, "vm_pu", "bus") ** 2,
        pg=column(g, "gen", net.gen_ids, "p_mw", "generator") / S,
        qg=column(g, "gen", net.gen_ids, "q_mvar", "generator") / S,
        pf=column(br, "branch", net.branch_ids, "p_from_mw", "branch") / S,
        qf=column(br, "branch", net.branch_ids, "q_from_mvar", "branch") / S,
        pt=column(br, "branch", net.branch_ids, "p_to_mw", "branch") / S,
        qt=column(br, "branch", net.branch_ids, "q_to_mvar", "branch") / S,
    )
