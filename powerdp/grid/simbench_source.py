"""SimBench grids and pandapower networks made ready for a dispatch over time (docs/profiles.md).

SimBench (``pip install "powerdp[profiles]"``) is imported here only, and lazily. A pandapower net
made for power flow becomes an OPF case: every in-service static generator (``sgen``: SimBench's
renewables) becomes a curtailable generator (``controllable``, ``min_p_mw = 0``, ``max_p_mw`` its
largest available output over the horizon, reactive limits at power factor 0.95), every external
grid an import generator (export allowed at the same price where its limits are not given), missing
generator limits are filled from the rating, and every element without a cost gets its public cost
as a pandapower ``poly_cost`` row, so that pandapower's MATPOWER export (``to_mpc``) keeps them all.
"""

from __future__ import annotations

import copy
import logging
import math

import numpy as np

from ..errors import CaseDataError
from .public_costs import PublicCosts

log = logging.getLogger(__name__)

__all__ = ["import_simbench", "simbench_grid", "prepare_pandapower", "pandapower_kind", "TAN_PHI"]

PROFILES_EXTRA = 'pip install "powerdp[profiles]"'
#: reactive limits of a renewable: ±tan(acos 0.95)·max_p_mw (power factor 0.95, a common grid-code range)
TAN_PHI = math.tan(math.acos(0.95))
#: elements whose available active power a profile gives (the others' profiles are not availability)
PROFILED_GENERATORS = ("sgen",)


def import_simbench():
    """The ``simbench`` module, or a :class:`CaseDataError` naming the extra that installs it."""
    try:
        import simbench
    except ImportError:
        raise CaseDataError(f"SimBench grids need the profiles extra: {PROFILES_EXTRA}") from None
    return simbench


def simbench_grid(code: str, start: int, periods: int):
    """The SimBench grid ``code`` and rows ``start .. start + periods`` of its year of profiles: (pandapower net,
    {(element, variable): DataFrame} in MW and Mvar, time labels). Only the window is made absolute."""
    sb = import_simbench()
    try:
        net = sb.get_simbench_net(code)
    except Exception:  # simbench raises IndexError ("list index out of range") for an unknown code
        raise CaseDataError(
            f"simbench:{code}: not a SimBench grid code; codes look like 1-HV-mixed--0-sw or 1-EHV-mixed--0-sw "
            "(simbench.collect_all_simbench_codes() lists them)"
        ) from None
    prof = getattr(net, "profiles", None) or {}
    rows = len(prof["load"]) if "load" in prof else 0
    if start + periods > rows:
        raise CaseDataError(f"simbench:{code}: start {start} + periods {periods} = {start + periods} is past the "
                            f"{rows} rows of its profiles (periods at most {max(rows - start, 0)} from start {start})")
    for key, df in prof.items():
        if len(df) == rows:
            prof[key] = df.iloc[start : start + periods].reset_index(drop=True)
    profiles = sb.get_absolute_values(net, profiles_instead_of_study_cases=True)
    labels = prof["load"]["time"].astype(str).to_numpy() if "time" in prof["load"] else None
    return net, dict(profiles), labels


def pandapower_kind(element: str, gen_type: str) -> str:
    """A generator's kind from its pandapower element and type."""
    if element == "ext_grid" or str(gen_type).lower().startswith("imp"):
        return "import"  # SimBench names its interconnectors' gens imp0, imp1
    if element == "sgen":
        return "renewable"
    if element == "gen":
        return "conventional"
    return "other"


def _filled(values, default) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return np.where(np.isfinite(v), v, default)


def prepare_pandapower(pp_net, sgen_max_mw: dict[int, float], costs: PublicCosts,
                       gen_max_mw: dict[int, float] | None = None, base_mva: float | None = None):
    """A copy of ``pp_net`` ready for the OPF export, and {element name: kind} of the elements that got a public cost.

    ``sgen_max_mw``: per sgen index, its largest available output over the horizon (MW); ``gen_max_mw``: the
    same for the power plants (``gen``) a profile gives an available output: they become renewables
    (``min_p_mw = 0``). ``base_mva``: the per-unit base (pandapower's ``sn_mva``; None keeps the net's).
    """
    import pandapower as pp

    gen_max_mw = gen_max_mw or {}
    net = copy.deepcopy(pp_net)
    if base_mva is not None:
        net.sn_mva = float(base_mva)
    for table in ("sgen", "gen", "ext_grid", "storage"):
        if table in net and len(net[table]) and "controllable" not in net[table]:
            net[table]["controllable"] = np.nan
    sg = net.sgen
    if len(sg):
        on = sg["in_service"].to_numpy(bool)
        rated = _filled(sg["p_mw"] * sg.get("scaling", 1.0), 0.0)
        top = np.array([sgen_max_mw.get(int(i), r) for i, r in zip(sg.index, rated)])
        pmax = np.maximum(np.maximum(rated, top), 0.0)
        sg["controllable"] = on
        sg["max_p_mw"] = pmax
        sg["min_p_mw"] = 0.0
        sg["max_q_mvar"] = _filled(sg.get("max_q_mvar", np.nan), TAN_PHI * pmax)
        sg["min_q_mvar"] = _filled(sg.get("min_q_mvar", np.nan), -TAN_PHI * pmax)
    eg = net.ext_grid
    if len(eg):
        # without given limits an external grid imports or exports up to all the load and generation of the net
        bound = float(np.nansum(np.abs(net.load["p_mw"]))) + float(np.nansum(np.abs(net.sgen.get("max_p_mw", 0.0))))
        bound += float(np.nansum(np.abs(net.gen["max_p_mw"]))) if "max_p_mw" in net.gen else 0.0
        bound = max(bound, 1.0)
        eg["controllable"] = True
        eg["max_p_mw"] = _filled(eg.get("max_p_mw", np.nan), bound)
        eg["min_p_mw"] = _filled(eg.get("min_p_mw", np.nan), -bound)
        eg["max_q_mvar"] = _filled(eg.get("max_q_mvar", np.nan), bound)
        eg["min_q_mvar"] = _filled(eg.get("min_q_mvar", np.nan), -bound)
    g = net.gen
    if len(g):
        rated = _filled(g.get("sn_mva", np.nan), _filled(g["p_mw"], 0.0))
        g["controllable"] = _filled(g["controllable"].astype(float), 1.0).astype(bool) if "controllable" in g else True
        g["max_p_mw"] = _filled(g.get("max_p_mw", np.nan), np.maximum(rated, _filled(g["p_mw"], 0.0)))
        g["min_p_mw"] = _filled(g.get("min_p_mw", np.nan), 0.0)
        g["max_q_mvar"] = _filled(g.get("max_q_mvar", np.nan), TAN_PHI * g["max_p_mw"].to_numpy(float))
        g["min_q_mvar"] = _filled(g.get("min_q_mvar", np.nan), -TAN_PHI * g["max_p_mw"].to_numpy(float))
        for i, top in gen_max_mw.items():
            g.loc[i, "max_p_mw"] = max(float(g.at[i, "max_p_mw"]), top)
            g.loc[i, "min_p_mw"] = 0.0
    for table in ("storage",):
        if table in net and len(net[table]) and bool(net[table]["in_service"].any()):
            log.warning("%s: %d storage unit(s) are not modelled by the dispatch and are set out of service",
                        getattr(net, "name", "") or "pandapower net", int(net[table]["in_service"].sum()))
            net[table]["in_service"] = False
    have = set()
    for tbl in ("poly_cost", "pwl_cost"):
        if tbl in net and len(net[tbl]):
            have |= {(str(et), int(e)) for et, e in zip(net[tbl]["et"], net[tbl]["element"])}
    if not costs.keep_case_costs:
        for tbl in ("poly_cost", "pwl_cost"):
            if tbl in net:
                net[tbl] = net[tbl].iloc[0:0]
        have = set()
    public: dict[str, str] = {}
    for et in ("ext_grid", "gen", "sgen"):
        tbl = net[et]
        if not len(tbl):
            continue
        types = tbl["type"].astype(str).to_numpy() if "type" in tbl else np.array([""] * len(tbl))
        for i, t, on in zip(tbl.index, types, tbl["in_service"].to_numpy(bool)):
            name = f"{et}.{int(i)}"
            if not on or ((et, int(i)) in have and name not in costs.elements):
                continue
            if (et, int(i)) in have:  # an element override replaces the case's cost
                for ctbl in ("poly_cost", "pwl_cost"):
                    c = net[ctbl]
                    net[ctbl] = c[~((c["et"] == et) & (c["element"] == int(i)))]
            kind = "renewable" if et == "gen" and int(i) in gen_max_mw else pandapower_kind(et, t)
            c2, c1, c0 = costs.cost_of(name, kind, "" if t == "nan" else t)
            pp.create_poly_cost(net, int(i), et, cp1_eur_per_mw=c1, cp2_eur_per_mw2=c2, cp0_eur=c0)
            public[name] = kind
    return net, public


def bus_map(prepared_net, network) -> dict[int, int]:
    """pandapower bus index → the Network's bus index, after ``load_case(prepared_net)`` (buses that closed
    bus-bus switches fuse share one; buses the export dropped are missing). pandapower's bus lookup holds
    the exported (internal) bus of every pandapower bus, whose MATPOWER number is one more."""
    lookup = np.asarray(prepared_net._pd2ppc_lookups["bus"])
    where = network._bus_lookup()
    out: dict[int, int] = {}
    for b in prepared_net.bus.index:
        k = int(lookup[b]) if 0 <= b < len(lookup) else -1
        i = where.get(k + 1) if k >= 0 else None
        if i is not None:
            out[int(b)] = i
    return out


def gen_table(network) -> list[tuple[str, int]]:
    """Per Network generator, the pandapower (element, index) it came from."""
    gens = network.pandapower_gens.iloc[np.asarray(network.gen_ids) - 1]
    return [(str(e), int(i)) for e, i in zip(gens["element_type"], gens["element"])]


def element_types(pp_net, element: str, idx: int) -> str:
    """The pandapower element's ``type`` (SimBench: ``lignite``, ``wind onshore``, ``imp0``, ...), or ''."""
    tbl = pp_net[element]
    if "type" in tbl and idx in tbl.index:
        t = tbl.at[idx, "type"]
        return "" if t is None or (isinstance(t, float) and math.isnan(t)) else str(t)
    return ""
