"""A dispatch as a pandapower network, and the AC check: how far the relaxed solution is from an AC operating point.

The SOC relaxation's optimum is not an AC operating point in general. The check a grid
engineer runs next (docs/operating_point.md): write the dispatch into a pandapower network
(generator active-power set-points, voltage set-points √w at generator buses) and run
pandapower's Newton-Raphson power flow. :func:`ac_check` reports whether it converges, how
much the slack (the ``ext_grid``) has to produce beyond its dispatched output (the power
the relaxation's losses miss, plus any load the dispatch shed), the bus voltages outside
[vmin, vmax] and the branches loaded above 100 % of their rating.

The network: for a case read from MATPOWER (or a :class:`Network` built any other way)
it is built from the network arrays with :func:`pandapower.converter.from_ppc` (pandapower
bus index = MATPOWER bus number; the first generator at the reference bus becomes the
``ext_grid``, the first at each PV bus a ``gen``, every other one an ``sgen`` with fixed P and
Q); for a case read from pandapower it is a copy of that network with the set-points
written into its ``ext_grid``, ``gen`` and ``sgen`` rows. Loads are the case's: a dispatch
that sheds load shows it in the slack mismatch.
"""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ModelError, SolverError
from ..grid.network import Network
from .tables import Dispatch

log = logging.getLogger(__name__)

__all__ = ["ACCheck", "ac_check", "to_pandapower", "PandapowerDispatch", "RUNPP_OPTIONS"]

# pandapower.runpp options of the check: Newton-Raphson started from the dispatch's voltage
# magnitudes (angles from a DC power flow), generator reactive limits not enforced (the
# relaxation already bounds Q; the check shows what the set-points imply), angles and
# transformer shifts considered, a tight mismatch tolerance.
RUNPP_OPTIONS: dict[str, Any] = {
    "algorithm": "nr",
    "init_va_degree": "dc",
    "enforce_q_lims": False,
    "calculate_voltage_angles": True,
    "max_iteration": 30,
    "tolerance_mva": 1e-8,
    "numba": False,
}
MISSING_KV = 100.0  # nominal voltage given to buses of a case without baseKV (the per-unit results do not depend on it)
GEN_ELEMENTS = ("ext_grid", "gen", "sgen")
VOLTAGE_TOL = 1e-6  # p.u.; a voltage this close to its limit is not a violation (the solver's own tolerance)


@dataclass
class PandapowerDispatch:
    """A pandapower network holding a dispatch, and the map from powerdp's elements to its rows.

    ``gens``: per generator (internal order), ``element_type`` (ext_grid, gen, sgen) and
    ``element`` (its index). ``buses``: pandapower bus index per internal bus.
    ``branches``: per branch, ``element_type`` (line, trafo, impedance) and ``element``, or
    None when the network came from pandapower (branches are then reported by element).
    """

    net: Any
    gens: pd.DataFrame
    buses: np.ndarray | None
    branches: pd.DataFrame | None


def _ppc(net: Network, d: Dispatch, unrated_mva: float = 0.0) -> dict[str, Any]:
    """A PYPOWER case of the network arrays with the dispatch as generator set-points; a branch without a rating gets
    ``unrated_mva`` (0: none, as MATPOWER's rate 0)."""
    S = net.base_mva
    vm = d.vm
    kv = net.base_kv if net.base_kv is not None else np.zeros(net.n_bus)
    kv = np.where(np.isfinite(kv) & (kv > 0), kv, MISSING_KV)
    bus = np.column_stack([
        net.bus_ids, net.bus_type, net.pd * S, net.qd * S, net.gs * S, net.bs * S, net.bus_area,
        vm, np.zeros(net.n_bus), kv, net.bus_zone, net.vmax, net.vmin,
    ]).astype(float)
    gen = np.column_stack([
        net.bus_ids[net.gen_bus], d.pg * S, d.qg * S, net.qmax * S, net.qmin * S, vm[net.gen_bus],
        np.full(net.n_gen, S), np.ones(net.n_gen), net.pmax * S, net.pmin * S,
    ]).astype(float)
    # a branch without tap and shift is a line (ratio 0), as in the MATPOWER file
    plain = (net.tap == 1.0) & (net.shift == 0.0)
    rate = np.where(np.isfinite(net.rate_a) & (net.rate_a > 0), net.rate_a * S, float(unrated_mva))
    branch = np.column_stack([
        net.bus_ids[net.f_bus], net.bus_ids[net.t_bus], net.r, net.x, net.b_fr + net.b_to, rate, rate, rate,
        np.where(plain, 0.0, net.tap), np.rad2deg(net.shift), np.ones(net.n_branch),
        np.full(net.n_branch, -360.0), np.full(net.n_branch, 360.0),
    ]).astype(float)
    return {"version": "2", "baseMVA": S, "bus": bus, "gen": gen, "branch": branch}


def _from_network(net: Network, d: Dispatch, unrated_mva: float = 0.0) -> PandapowerDispatch:
    from pandapower.converter.pypower.from_ppc import from_ppc

    # from_ppc's notes on powerdp's own arrays ("3 branches ... considered as trafos") are not the user's business
    quiet = logging.getLogger("pandapower.converter.pypower.from_ppc")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        pp_net = from_ppc(_ppc(net, d, unrated_mva), f_hz=50, validate_conversion=False, check_costs=False)
    except Exception as exc:  # noqa: BLE001 - pandapower raises many exception types
        raise ModelError(f"pandapower could not build a network of {net.name}: {type(exc).__name__}: {exc}") from None
    finally:
        quiet.setLevel(level)
    lookups = pp_net._from_ppc_lookups
    gens = lookups["gen"].reset_index(drop=True)
    gens["element"] = gens["element"].astype(np.int64)
    branches = lookups["branch"].reset_index(drop=True)
    branches["element"] = branches["element"].astype(np.int64)
    return PandapowerDispatch(net=pp_net, gens=gens, buses=net.bus_ids.copy(), branches=branches)


def _check_gens(pp_net, gens: pd.DataFrame, net: Network, expected_bus: np.ndarray | None) -> None:
    """Every generator of the dispatch has its element in the pandapower net (at its bus); else a ModelError naming it."""
    for k, (et, idx) in enumerate(zip(gens["element_type"], gens["element"])):
        gid, bid = int(net.gen_ids[k]), int(net.bus_ids[net.gen_bus[k]])
        if et not in GEN_ELEMENTS:
            raise ModelError(
                f"generator {gid} (at bus {bid}) is a pandapower {et or 'element of unknown type'}; "
                f"the AC check can set only {', '.join(GEN_ELEMENTS)} rows"
            )
        table = pp_net[et]
        if idx < 0 or idx not in table.index:
            raise ModelError(f"pandapower net has no {et} {idx} for generator {gid} at bus {bid} of the dispatch")
        if expected_bus is not None and int(table.at[idx, "bus"]) != int(expected_bus[k]):
            raise ModelError(
                f"pandapower net has no {et} at bus {int(expected_bus[k])} (generator {gid}): "
                f"{et} {idx} is at bus {int(table.at[idx, 'bus'])}"
            )
        if not bool(table.at[idx, "in_service"]):
            raise ModelError(f"pandapower {et} {idx} (generator {gid} at bus {bid}) is out of service")
    slack_gens = pp_net.gen.index[pp_net.gen["slack"].astype(bool)] if "slack" in pp_net.gen else []
    if not (pp_net.ext_grid["in_service"].astype(bool).any() or len(slack_gens)):
        raise ModelError(
            f"pandapower net of {net.name} has no ext_grid (no generator at a reference bus, type 3); "
            "the AC power flow needs a slack"
        )


def _apply(pd_: PandapowerDispatch, net: Network, d: Dispatch) -> None:
    """Write the dispatch into the net: P set-points, |V| set-points √w at generator buses, sgen P and Q."""
    S, vm = net.base_mva, d.vm
    p, q, v = d.pg * S, d.qg * S, vm[net.gen_bus]
    pp_net = pd_.net
    for et in GEN_ELEMENTS:
        sel = (pd_.gens["element_type"] == et).to_numpy()
        if not sel.any():
            continue
        idx = pd_.gens["element"].to_numpy()[sel]
        if et == "ext_grid":
            pp_net.ext_grid.loc[idx, "vm_pu"] = v[sel]
        elif et == "gen":
            pp_net.gen.loc[idx, "p_mw"] = p[sel]
            pp_net.gen.loc[idx, "vm_pu"] = v[sel]
        else:
            pp_net.sgen.loc[idx, "p_mw"] = p[sel]
            pp_net.sgen.loc[idx, "q_mvar"] = q[sel]


def to_pandapower(net: Network, d: Dispatch, unrated_mva: float = 0.0) -> PandapowerDispatch:
    """A pandapower network holding dispatch ``d`` of ``net`` (module docstring), with the element maps.

    A network read from pandapower gives a copy of its source net with the set-points written
    in; any other network is converted with ``from_ppc``, a branch without a rating getting ``unrated_mva``
    (0: none; pandapower's OPF needs a finite rating on every branch).
    """
    if net.pandapower_net is not None:
        pp_net = copy.deepcopy(net.pandapower_net)
        gens = net.pandapower_gens.iloc[np.asarray(net.gen_ids) - 1].reset_index(drop=True)
        out = PandapowerDispatch(net=pp_net, gens=gens, buses=None, branches=None)
        _check_gens(pp_net, gens, net, None)
    else:
        out = _from_network(net, d, unrated_mva)
        _check_gens(out.net, out.gens, net, net.bus_ids[net.gen_bus])
        _add_dclines(out.net, net, d)
    _apply(out, net, d)
    return out


def _add_dclines(pp_net, net: Network, d: Dispatch) -> None:
    """HVDC lines as pandapower ``dcline`` elements (from_ppc does not convert them): the power entering
    at the from end p_dc_fr, the loss model (1 − loss1)·p_fr + p_to = loss0 as loss_percent = 100·loss1
    and loss_mw = loss0, and voltage set-points √w at both ends (docs/operating_point.md)."""
    dcl = net.dcline
    if not dcl.n:
        return
    import pandapower as pp

    if not d.dc:
        raise ModelError(f"the dispatch of {net.name} holds no HVDC line powers, but the case has {dcl.n} line(s)")
    S, vm = net.base_mva, d.vm
    for k in range(dcl.n):  # one element per line: pandapower's API creates them one at a time
        f, t = int(dcl.f_bus[k]), int(dcl.t_bus[k])
        pp.create_dcline(
            pp_net, from_bus=int(net.bus_ids[f]), to_bus=int(net.bus_ids[t]), p_mw=float(d.dc["p_dc_fr"][k] * S),
            loss_percent=float(dcl.loss1[k] * 100.0), loss_mw=float(dcl.loss0[k] * S),
            vm_from_pu=float(vm[f]), vm_to_pu=float(vm[t]), name=f"dcline {dcl.ids[k]}",
        )


@dataclass
class ACCheck:
    """The outcome of pandapower's AC power flow at a dispatch (see :func:`ac_check`).

    ``slack_mismatch_mw``: what the slack produces minus what the dispatch gave it (MW; >0 means the
    relaxation under-estimated losses or shed load). ``max_voltage_violation_pu``: the largest
    distance of a bus voltage outside [vmin, vmax] (0 when all are inside).
    ``max_loading_percent``: the most loaded rated branch (None when no branch has a rating).
    """

    converged: bool
    slack_mismatch_mw: float | None
    max_voltage_violation_pu: float | None
    max_loading_percent: float | None
    slack_p_mw: float | None = None
    slack_dispatch_mw: float | None = None
    slack_q_mvar: float | None = None
    losses_mw: float | None = None
    dispatch_losses_mw: float | None = None
    max_vm_deviation_pu: float | None = None  # max over buses of |V_ac| − √w
    voltage_violations: list[dict[str, Any]] = field(default_factory=list)
    overloaded: list[dict[str, Any]] = field(default_factory=list)
    n_rated_branches: int = 0
    message: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    pandapower: PandapowerDispatch | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (no pandapower net)."""
        out = {k: v for k, v in self.__dict__.items() if k != "pandapower"}
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}

    def lines(self) -> list[str]:
        """A short human-readable report."""
        if not self.converged:
            return [f"AC check    pandapower.runpp did not converge ({self.message})"]
        load = (
            f"worst loading {self.max_loading_percent:.1f} % of rating, {len(self.overloaded)} branch(es) above 100 %"
            if self.max_loading_percent is not None else "no branch has a rating"
        )
        dev = f"; |V| − √w up to {self.max_vm_deviation_pu:.4f} p.u." if self.max_vm_deviation_pu is not None else ""
        return [
            f"AC check    pandapower.runpp converged; slack {self.slack_p_mw:.3f} MW vs dispatch "
            f"{self.slack_dispatch_mw:.3f} MW: mismatch {self.slack_mismatch_mw:+.3f} MW",
            f"            voltages: {len(self.voltage_violations)} bus(es) outside [vmin, vmax], worst by "
            f"{self.max_voltage_violation_pu:.4f} p.u.{dev}",
            f"            {load}; losses {self.losses_mw:.3f} MW (relaxation {self.dispatch_losses_mw:.3f} MW)",
        ]


def _branch_results(pdd: PandapowerDispatch, net: Network) -> pd.DataFrame:
    """Loading of every branch with a rating: element, branch id (when known), loading %."""
    pp_net = pdd.net
    frames = []
    for et in ("line", "trafo"):
        res = pp_net.get(f"res_{et}")
        if res is None or not len(res):
            continue
        frames.append(pd.DataFrame({"element_type": et, "element": res.index.to_numpy(), "loading_percent": res["loading_percent"].to_numpy()}))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["element_type", "element", "loading_percent"])
    out["branch"] = None
    if pdd.branches is not None:  # keep branches with a rating; name them by their MATPOWER row
        rated = np.isfinite(net.rate_a) & (net.rate_a > 0)
        key = pd.MultiIndex.from_arrays([pdd.branches["element_type"], pdd.branches["element"]])
        ids = pd.Series(net.branch_ids, index=key)
        rated_s = pd.Series(rated, index=key)
        k = pd.MultiIndex.from_arrays([out["element_type"], out["element"]])
        out["branch"] = ids.reindex(k).to_numpy()
        out = out[rated_s.reindex(k).fillna(False).to_numpy(dtype=bool)]
    return out


def ac_check(net: Network, d: Dispatch, unrated_mva: float = 0.0, **options: Any) -> ACCheck:
    """Run ``pandapower.runpp`` at dispatch ``d`` (module docstring) and report how far it is from an AC operating point.

    ``options`` override :data:`RUNPP_OPTIONS`. A power flow that does not converge is
    reported (``converged`` False), not raised; a network pandapower cannot hold, or one
    without a slack, is a :class:`ModelError` naming the element. ``unrated_mva`` is the rating the pandapower
    network gives a branch without one (:func:`to_pandapower`; the report's loading figures still skip such branches).
    """
    import pandapower as pp

    pdd = to_pandapower(net, d, unrated_mva=unrated_mva)
    pp_net = pdd.net
    opts = dict(RUNPP_OPTIONS, **options)
    if "init_vm_pu" not in options:  # start from the dispatch's voltage magnitudes
        init = pd.Series(1.0, index=pp_net.bus.index)
        if pdd.buses is not None:
            init.loc[pdd.buses] = d.vm
        opts["init_vm_pu"] = init.loc[pp_net.bus.index].to_numpy()
    shown = {k: v for k, v in opts.items() if k != "init_vm_pu"}
    shown["init_vm_pu"] = "dispatch" if "init_vm_pu" not in options else "given"
    S = net.base_mva
    slack_rows = (pdd.gens["element_type"] == "ext_grid").to_numpy()
    slack_dispatch = float(d.pg[slack_rows].sum() * S)
    dispatch_losses = float((d.pf + d.pt).sum() * S)
    try:
        pp.runpp(pp_net, **opts)
    except pp.powerflow.LoadflowNotConverged as exc:
        return ACCheck(
            converged=False, slack_mismatch_mw=None, max_voltage_violation_pu=None, max_loading_percent=None,
            slack_dispatch_mw=slack_dispatch, dispatch_losses_mw=dispatch_losses,
            message=str(exc) or "power flow did not converge", options=shown, pandapower=pdd,
        )
    except (KeyError, ValueError, IndexError, TypeError, UserWarning) as exc:
        raise ModelError(f"pandapower.runpp could not run on the network of {net.name}: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - anything else pandapower raises is a failed power flow
        raise SolverError(f"pandapower.runpp failed on {net.name}: {type(exc).__name__}: {exc}") from None

    eg = pdd.gens["element"].to_numpy()[slack_rows]
    slack_p = float(pp_net.res_ext_grid.loc[eg, "p_mw"].sum())
    slack_q = float(pp_net.res_ext_grid.loc[eg, "q_mvar"].sum())
    rb = pp_net.res_bus
    vm_ac = rb["vm_pu"]
    bus = pp_net.bus
    lo = bus["min_vm_pu"] if "min_vm_pu" in bus else pd.Series(np.nan, index=bus.index)
    hi = bus["max_vm_pu"] if "max_vm_pu" in bus else pd.Series(np.nan, index=bus.index)
    if pdd.buses is not None:  # limits of the powerdp network (as the relaxation saw them)
        lo = pd.Series(net.vmin, index=pdd.buses).reindex(bus.index)
        hi = pd.Series(net.vmax, index=pdd.buses).reindex(bus.index)
    viol = np.fmax(np.fmax(lo - vm_ac, vm_ac - hi).to_numpy(dtype=float), 0.0)
    viol = np.where(bus["in_service"].to_numpy(bool) & np.isfinite(vm_ac.to_numpy(float)), viol, 0.0)
    viol = np.where(viol > VOLTAGE_TOL, viol, 0.0)
    bad = np.flatnonzero(viol)
    violations = [
        {"bus": int(bus.index[i]), "vm_pu": float(vm_ac.iloc[i]), "min_vm_pu": float(lo.iloc[i]), "max_vm_pu": float(hi.iloc[i])}
        for i in bad[np.argsort(-viol[bad])]
    ]
    dev = None
    if pdd.buses is not None:
        dev = float(np.max(np.abs(vm_ac.reindex(pdd.buses).to_numpy(float) - d.vm))) if net.n_bus else 0.0
    br = _branch_results(pdd, net)
    loading = br["loading_percent"].to_numpy(dtype=float)
    over = br[loading > 100.0].sort_values("loading_percent", ascending=False)
    overloaded = [
        {"element_type": r.element_type, "element": int(r.element), "branch": None if r.branch is None or r.branch != r.branch else int(r.branch),
         "loading_percent": float(r.loading_percent)}
        for r in over.itertuples()
    ]
    losses = float(pp_net.res_line["pl_mw"].sum() if len(pp_net.res_line) else 0.0)
    for et in ("trafo", "impedance"):
        res = pp_net.get(f"res_{et}")
        if res is not None and len(res):
            losses += float(res["pl_mw"].sum())
    return ACCheck(
        converged=True,
        slack_mismatch_mw=slack_p - slack_dispatch,
        max_voltage_violation_pu=float(viol.max()) if len(viol) else 0.0,
        max_loading_percent=float(np.nanmax(loading)) if np.isfinite(loading).any() else None,
        slack_p_mw=slack_p,
        slack_dispatch_mw=slack_dispatch,
        slack_q_mvar=slack_q,
        losses_mw=losses,
        dispatch_losses_mw=dispatch_losses,
        max_vm_deviation_pu=dev,
        voltage_violations=violations,
        overloaded=overloaded,
        n_rated_branches=int(np.isfinite(loading).sum()),
        message="converged",
        options=shown,
        pandapower=pdd,
    )
