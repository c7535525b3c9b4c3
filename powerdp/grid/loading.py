"""Loading a case: a bundled name, a MATPOWER file or a pandapower network becomes a :class:`~powerdp.grid.network.Network`
(per unit, out-of-service elements and isolated buses dropped, the checks and corrections of :mod:`powerdp.grid.checks`)."""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CaseDataError
from .checks import CHECKS, CORRECTIONS, _list_ids, _Tables
from .matpower import MatpowerData, read_matpower
from .network import CONVENTIONS, Convention, DCLines, Network, _is_pandapower

log = logging.getLogger(__name__)

__all__ = ["load_case", "bundled_cases", "bundled_path", "network_from_matpower", "pandapower_gen_map"]

if TYPE_CHECKING:
    import pandas as pd


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
