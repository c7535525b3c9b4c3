"""A case and its time series: load and renewable profiles for a dispatch over time (docs/profiles.md).

:func:`load_horizon` reads a SimBench grid by its code (``simbench:1-HV-mixed--0-sw``, its year of
quarter-hour profiles) or any case :func:`~powerdp.grid.loading.load_case` accepts together with a
user's profile table, applies the public costs (:mod:`powerdp.grid.public_costs`) where the data has
none, and returns a :class:`Horizon`: per period, every bus's load and every generator's available
output, in the :class:`~powerdp.grid.network.Network`'s order.

A profile table (CSV or parquet) has one row per period and one column per element and variable,
named as pandapower's time series name them — the element table, its index, the variable:
``load.<index>.p_mw``, ``load.<index>.q_mvar``, ``sgen.<index>.p_mw``, ``gen.<index>.p_mw``
(pandapower's ``ConstControl(element="load", variable="p_mw", element_index=…)``). For a MATPOWER
case a load is named by its bus (``load.<bus number>.p_mw``) and a generator by its row of
``mpc.gen`` (``gen.<row>.p_mw``, 1-based). An optional ``time`` column labels the periods.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CaseDataError
from ..files.text import NotUTF8, read_csv_utf8
from . import simbench_source as sbs
from .loading import load_case
from .network import Network
from .public_costs import GEN_KINDS, PublicCosts, read_costs

log = logging.getLogger(__name__)

__all__ = ["Horizon", "load_horizon", "read_profile_table", "COLUMN_PATTERN"]

#: a profile column: element.index.variable
COLUMN_PATTERN = re.compile(r"^(load|sgen|gen)\.(-?\d+)\.(p_mw|q_mvar)$")
_SIMBENCH_MINUTES = 15.0
SIMBENCH_BASE_MVA = 100.0  # SimBench's sn_mva is 1 MVA: loads of ~100 p.u., imports of ~2000 p.u. (docs/profiles.md)

# {(element, variable): (element indices, values (rows, k))}
_Profiles = dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, eq=False)
class Horizon:
    """A case and its time series: what a multi-period dispatch needs, per period, in the Network's order.

    ``network`` is the case with the public costs applied, as in period 0 (its bus ``pd``/``qd`` and
    generator ``pmax`` are period 0's; :meth:`network_at` gives any period's). Powers are per unit on
    ``network.base_mva``. ``gen_kind`` is ``'conventional'``, ``'renewable'`` (curtailable: available
    output ``gen_pmax`` from its profile), ``'import'`` (an external grid; negative output is export) or
    ``'other'``. ``curtailment_offset`` ($/h per period) is the constant the curtailment pricing leaves out
    of the network's cost (docs/profiles.md): generation cost + offset = generation cost of the
    non-renewables + the price of the curtailed energy.
    """

    network: Network
    pd: np.ndarray  # (T, n_bus) p.u.
    qd: np.ndarray  # (T, n_bus) p.u.
    gen_pmax: np.ndarray  # (T, n_gen) p.u. available output
    gen_kind: np.ndarray  # (n_gen,) str
    gen_type: np.ndarray  # (n_gen,) str: SimBench's type (lignite, wind onshore, ...) or ''
    load_bus: np.ndarray  # (n_load,) Network bus index
    load_p: np.ndarray  # (T, n_load) p.u.
    load_q: np.ndarray  # (T, n_load) p.u.
    load_names: tuple[str, ...]
    gen_names: tuple[str, ...]
    period_minutes: float
    start: int
    labels: tuple[str, ...]
    costs: PublicCosts
    curtailment_offset: np.ndarray  # (T,) $/h
    source: str
    # (n_load,) p.u.: each load's public rated power (SimBench's sn_mva: a connection's rating, which its profile never
    # exceeds), or None; dispatch's --clip-loads projects the perturbed loads onto [0, rating] (docs/privacy.md)
    load_rating: np.ndarray | None = None

    @property
    def periods(self) -> int:
        return self.pd.shape[0]

    @property
    def n_load(self) -> int:
        return len(self.load_names)

    def network_at(self, t: int) -> Network:
        """The network of period ``t`` (0-based within the horizon): its loads and available outputs."""
        if not 0 <= t < self.periods:
            raise IndexError(f"period {t} is outside the horizon of {self.periods} periods")
        net = self.network.with_loads(self.pd[t], self.qd[t])
        net.pmax = self.gen_pmax[t].copy()
        net.pmin = np.minimum(self.network.pmin, net.pmax)
        return net

    def summary(self) -> dict[str, Any]:
        S = self.network.base_mva
        kinds = {k: int((self.gen_kind == k).sum()) for k in GEN_KINDS if (self.gen_kind == k).any()}
        ren = self.gen_kind == "renewable"
        return {
            "source": self.source,
            "periods": self.periods,
            "start": self.start,
            "period_minutes": self.period_minutes,
            "first": self.labels[0] if self.labels else "",
            "last": self.labels[-1] if self.labels else "",
            "buses": self.network.n_bus,
            "loads": self.n_load,
            "generators": kinds,
            "load_mw": {"min": float(self.pd.sum(1).min() * S), "max": float(self.pd.sum(1).max() * S)},
            "renewable_available_mw": {"min": float(self.gen_pmax[:, ren].sum(1).min() * S),
                                       "max": float(self.gen_pmax[:, ren].sum(1).max() * S)},
        }


def load_horizon(
    source: Any,
    *,
    periods: int,
    start: int = 0,
    profiles: str | Path | None = None,
    costs: str | Path | PublicCosts | None = None,
    convention: str = "powermodels",
    base_mva: float | None = None,
) -> Horizon:
    """A case and ``periods`` rows of its time series from row ``start`` (docs/profiles.md).

    ``source``: ``"simbench:CODE"`` (a SimBench grid and its own profiles; needs ``powerdp[profiles]``), or
    anything :func:`~powerdp.grid.loading.load_case` accepts, with ``profiles`` a CSV or parquet table
    (module docstring). For a SimBench grid, ``profiles`` overrides the columns it names. ``costs``: a
    cost file (CSV or JSON) overriding :data:`~powerdp.grid.public_costs.DEFAULT_COSTS`, or a
    :class:`PublicCosts`. Every bad input raises :class:`~powerdp.errors.CaseDataError` (exit status 2)
    naming the element and the field. ``base_mva``: the per-unit base of a SimBench grid or pandapower net
    (None: 100 MVA for a SimBench grid, whose own ``sn_mva`` of 1 MVA makes its conic zone solves fail, and its
    ``sn_mva`` for another pandapower net); a MATPOWER case keeps its own baseMVA.
    """
    periods, start = _check_window(periods, start)
    if base_mva is not None and (isinstance(base_mva, bool) or not isinstance(base_mva, (int, float))
                                 or not np.isfinite(base_mva) or base_mva <= 0):
        raise CaseDataError(f"base_mva = {base_mva!r}: give a positive number of MVA")
    table = costs if isinstance(costs, PublicCosts) else read_costs(costs)
    user = read_profile_table(profiles) if profiles is not None else None
    text = str(source) if isinstance(source, (str, Path)) else ""
    labels = None
    if text.startswith("simbench:"):
        code = text.split(":", 1)[1].strip()
        pp_net, sb_profiles, labels = sbs.simbench_grid(code, start, periods)
        data = _slice(_from_simbench(sb_profiles), 0, periods, f"SimBench grid {code}", row0=start)
        name = f"simbench:{code}"
        minutes = _SIMBENCH_MINUTES
        if user is not None:
            data = _override(data, _slice(user[0], start, periods, f"profile table {profiles}"), f"profile table {profiles}",
                             f"SimBench grid {code}")
        base = SIMBENCH_BASE_MVA if base_mva is None else base_mva
        return _pandapower_horizon(pp_net, data, table, convention, start, periods, labels, minutes, name, base)
    if user is None:
        raise CaseDataError(f"{text or type(source).__name__}: a horizon needs profiles (a CSV or parquet table, "
                            "profiles=...), or a SimBench grid code simbench:CODE")
    raw, labels, minutes = user
    data = _slice(raw, start, periods, f"profile table {profiles}")
    labels = None if labels is None else labels[start : start + periods]
    pp_net = source if type(source).__name__ == "pandapowerNet" else None
    if text.startswith("pandapower:"):
        from .loading import _pandapower_builtin

        pp_net = _pandapower_builtin(text.split(":", 1)[1])
    if pp_net is not None:
        return _pandapower_horizon(pp_net, data, table, convention, start, periods, labels, minutes,
                                   text or (getattr(pp_net, "name", "") or "pandapower net"), base_mva)
    if base_mva is not None:
        raise CaseDataError(f"base_mva = {base_mva}: a MATPOWER case keeps its own baseMVA (it applies to SimBench grids "
                            "and pandapower nets)")
    return _matpower_horizon(load_case(source, convention), data, table, start, periods, labels, minutes, f"profile table {profiles}")


# ----------------------------------------------------------------------------- the profile table


def read_profile_table(path: str | Path) -> tuple[_Profiles, np.ndarray | None, float]:
    """A profile table file as {(element, variable): (indices, values)}, its time labels and period length (minutes)."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise CaseDataError(f"profile table {p}: no such file")
    suffix = p.suffix.lower()
    try:
        if suffix == ".csv" or p.name.lower().endswith(".csv.gz"):
            df = read_csv_utf8(p)
        elif suffix in (".parquet", ".pq"):
            try:
                df = pd.read_parquet(p)
            except ImportError as exc:
                raise CaseDataError(f"profile table {p}: reading parquet needs pyarrow (pip install pyarrow): {exc}") from None
        else:
            raise CaseDataError(f"profile table {p}: give a .csv or .parquet file")
    except CaseDataError:
        raise
    except NotUTF8 as exc:
        raise CaseDataError(f"profile table {p}: {exc}") from None
    except Exception as exc:  # pandas raises many types on a malformed file
        raise CaseDataError(f"profile table {p}: cannot read it ({type(exc).__name__}: {exc})") from None
    labels = None
    minutes = _SIMBENCH_MINUTES
    if "time" in df.columns:
        labels = df["time"].astype(str).to_numpy()
        minutes = _step_minutes(df["time"], minutes)
        df = df.drop(columns="time")
    if df.shape[1] == 0:
        raise CaseDataError(f"profile table {p}: no profile column; name them load.<index>.p_mw, load.<index>.q_mvar, sgen.<index>.p_mw")
    groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for col in df.columns:
        m = COLUMN_PATTERN.match(str(col).strip())
        if not m:
            twice = re.fullmatch(r"(.+)\.\d+", str(col))  # pandas renames a repeated column X to X.1, X.2, ...
            if twice and twice.group(1) in df.columns:
                raise CaseDataError(f"profile table {p}: column {twice.group(1)!r} appears more than once; keep one")
            raise CaseDataError(
                f"profile table {p}: column {col!r} names no load or generator; name columns "
                "load.<index>.p_mw, load.<index>.q_mvar, sgen.<index>.p_mw or gen.<index>.p_mw (docs/profiles.md)"
            )
        element, idx, var = m.group(1), int(m.group(2)), m.group(3)
        if element != "load" and var != "p_mw":
            raise CaseDataError(f"profile table {p}: column {col!r}: a generator's profile is its available p_mw only")
        groups.setdefault((element, var), []).append((idx, col))
    out: _Profiles = {}
    for key, cols in groups.items():
        values = df[[c for _, c in cols]].apply(pd.to_numeric, errors="coerce").to_numpy(float)
        bad = ~np.isfinite(values)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            v = df[cols[c][1]].iloc[r]
            v = float(v) if isinstance(v, (float, np.floating)) else v
            raise CaseDataError(f"profile table {p}: column {cols[c][1]!r}, row {r}: {v!r} is not a finite number")
        out[key] = (np.array([i for i, _ in cols], dtype=np.int64), values)
    return out, labels, minutes


def _step_minutes(times, default: float) -> float:
    import pandas as pd

    try:
        t = pd.to_datetime(times.iloc[:2], dayfirst=True)
    except (ValueError, TypeError):
        return default
    if len(t) < 2 or pd.isna(t.iloc[0]) or pd.isna(t.iloc[1]):
        return default
    step = (t.iloc[1] - t.iloc[0]).total_seconds() / 60.0
    return float(step) if step > 0 else default


def _override(base: _Profiles, user: _Profiles, what: str, of: str) -> _Profiles:
    """``base``'s profiles with the columns ``user`` names replaced (and those it adds appended); every other column of
    ``base`` kept. What was replaced is said in one warning line: a user's file never silently overrides a grid's data."""
    out = dict(base)
    replaced: list[str] = []
    for key, (idx, values) in user.items():
        if key not in out:
            out[key] = (idx, values)
            continue
        b_idx, b_values = out[key]
        where = {int(i): j for j, i in enumerate(b_idx)}
        merged = b_values.copy()
        extra = [j for j, i in enumerate(idx) if int(i) not in where]
        for j, i in enumerate(idx):
            if int(i) in where:
                merged[:, where[int(i)]] = values[:, j]
                replaced.append(f"{key[0]}.{int(i)}.{key[1]}")
        out[key] = (np.concatenate([b_idx, idx[extra]]), np.hstack([merged, values[:, extra]]))
    if replaced:
        shown = ", ".join(replaced[:4]) + (f" and {len(replaced) - 4} more" if len(replaced) > 4 else "")
        log.warning("%s replaces %d profile column(s) of %s: %s", what, len(replaced), of, shown)
    return out


def _from_simbench(profiles: dict) -> _Profiles:
    out: _Profiles = {}
    for (element, var), df in profiles.items():
        if element not in ("load", "sgen") or df.shape[1] == 0:
            continue  # gen: the power plants' market schedule, not their availability; storage: not modelled
        out[(element, var)] = (np.asarray(df.columns, dtype=np.int64), df.to_numpy(float))
    return out


def _check_window(periods: Any, start: Any) -> tuple[int, int]:
    for name, v in (("periods", periods), ("start", start)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise CaseDataError(f"{name} = {v!r}: give a whole number")
    if periods <= 0:
        raise CaseDataError(f"periods = {periods}: a horizon needs at least one period")
    if start < 0:
        raise CaseDataError(f"start = {start}: the first period is a row of the profiles, 0 or more")
    return int(periods), int(start)


def _slice(data: _Profiles, start: int, periods: int, what: str, row0: int = 0) -> _Profiles:
    """Rows ``start .. start + periods`` of every profile, checked; ``row0`` is the first row's number in messages."""
    out: _Profiles = {}
    for key, (idx, values) in data.items():
        n = values.shape[0]
        if start + periods > n:
            raise CaseDataError(f"{what}: start {start} + periods {periods} = {start + periods} is past the "
                                f"{n} rows of its profiles (periods at most {max(n - start, 0)} from start {start})")
        window = values[start : start + periods]
        bad = ~np.isfinite(window)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise CaseDataError(f"{what}: {key[0]} {idx[c]} field {key[1]} is not a number in row {row0 + start + r}")
        out[key] = (idx, window)
    return out


# ----------------------------------------------------------------------------- pandapower (SimBench)


def _pandapower_horizon(pp_net, data: _Profiles, costs: PublicCosts, convention: str, start: int, periods: int,
                        labels, minutes: float, name: str, base_mva: float | None = None) -> Horizon:
    for (element, var), (idx, _) in data.items():
        tbl = pp_net[element]
        missing = [int(i) for i in idx if i not in tbl.index]
        if missing:
            raise CaseDataError(f"{name}: profile column {element}.{missing[0]}.{var} names no {element} "
                                f"(the net's {element} indices are {_span(tbl.index)})")
    sgen_idx, sgen_vals = data.get(("sgen", "p_mw"), (np.zeros(0, np.int64), np.zeros((periods, 0))))
    gen_idx, gen_vals = data.get(("gen", "p_mw"), (np.zeros(0, np.int64), np.zeros((periods, 0))))
    for el, idx, vals in (("sgen", sgen_idx, sgen_vals), ("gen", gen_idx, gen_vals)):
        if (vals < 0).any():
            r, c = np.argwhere(vals < 0)[0]
            raise CaseDataError(f"{name}: {el} {idx[c]} field p_mw is negative in row {start + r}; a profile of "
                                "a generator is its available output")
    sgen_max = {int(i): float(v) for i, v in zip(sgen_idx, sgen_vals.max(0))}
    gen_max = {int(i): float(v) for i, v in zip(gen_idx, gen_vals.max(0))}
    prepared, public = sbs.prepare_pandapower(pp_net, sgen_max, costs, gen_max, base_mva)
    net = load_case(prepared, convention)
    net.name = name
    buses = sbs.bus_map(prepared, net)
    S = net.base_mva
    # loads: in-service loads at a bus the export kept
    ld = prepared.load
    on = ld["in_service"].to_numpy(bool)
    keep = [int(i) for i, o, b in zip(ld.index, on, ld["bus"]) if o and int(b) in buses]
    if on.sum() > len(keep):
        log.warning("%s: %d load(s) sit on buses cut off from the grid and are left out", name, int(on.sum()) - len(keep))
    scaling = ld["scaling"].to_numpy(float) if "scaling" in ld else np.ones(len(ld))
    base_p = dict(zip(ld.index, ld["p_mw"].to_numpy(float) * scaling))
    base_q = dict(zip(ld.index, ld["q_mvar"].to_numpy(float) * scaling))
    load_bus = np.array([buses[int(ld.at[i, "bus"])] for i in keep], dtype=np.int64)
    load_p = _series(data.get(("load", "p_mw")), keep, base_p, periods) / S
    load_q = _series(data.get(("load", "q_mvar")), keep, base_q, periods, scale_with=data.get(("load", "p_mw")),
                     base_scale=base_p) / S
    p0 = np.array([base_p[i] for i in keep]) / S
    q0 = np.array([base_q[i] for i in keep]) / S
    # other elements that the export put into the bus loads (wards, ...) stay as they are
    pd = net.pd[None, :] + _to_bus(load_p - p0, load_bus, net.n_bus)
    qd = net.qd[None, :] + _to_bus(load_q - q0, load_bus, net.n_bus)
    # generators
    gens = sbs.gen_table(net)
    kinds = np.array([sbs.pandapower_kind(e, sbs.element_types(prepared, e, i)) for e, i in gens], dtype=object)
    types = np.array([sbs.element_types(prepared, e, i) for e, i in gens], dtype=object)
    gen_pmax = np.repeat(net.pmax[None, :], periods, axis=0)
    avail = {("sgen", int(i)): sgen_vals[:, c] for c, i in enumerate(sgen_idx)}
    avail.update({("gen", int(i)): gen_vals[:, c] for c, i in enumerate(gen_idx)})
    for g, key in enumerate(gens):
        if key in avail:
            gen_pmax[:, g] = np.maximum(avail[key] / S, net.pmin[g])
            if key[0] == "gen":
                kinds[g] = "renewable"
    gen_names = tuple(f"{e}.{i}" for e, i in gens)
    load_names = tuple(f"load.{i}" for i in keep)
    priced = np.array([public.get(n) == "renewable" and n not in costs.elements for n in gen_names], dtype=bool)
    rating = ld["sn_mva"].to_numpy(float)[[ld.index.get_loc(i) for i in keep]] / S if "sn_mva" in ld else None
    if rating is not None and not np.all(np.isfinite(rating)):
        rating = None
    return _finish(net, pd, qd, gen_pmax, kinds, types, load_bus, load_p, load_q, load_names, gen_names,
                   minutes, start, labels, costs, priced, name, rating)


def _series(block, keep: list[int], base: dict, periods: int, scale_with=None, base_scale=None) -> np.ndarray:
    """(T, len(keep)) MW of the loads ``keep``: their profile where given, else their base value; reactive
    power without a profile follows its active profile at a constant power factor."""
    out = np.array([[base[i] for i in keep]] * periods, dtype=float).reshape(periods, len(keep))
    given = {}
    if block is not None:
        idx, vals = block
        given = {int(i): vals[:, c] for c, i in enumerate(idx)}
    scale = {}
    if scale_with is not None:
        sidx, svals = scale_with
        scale = {int(i): svals[:, c] for c, i in enumerate(sidx)}
    for j, i in enumerate(keep):
        if i in given:
            out[:, j] = given[i]
        elif i in scale and base_scale is not None and base_scale[i] != 0:
            out[:, j] = base[i] * scale[i] / base_scale[i]
    return out


def _to_bus(values: np.ndarray, bus: np.ndarray, n_bus: int) -> np.ndarray:
    """(T, n_load) → (T, n_bus), summing the loads of a bus."""
    out = np.zeros((values.shape[0], n_bus))
    np.add.at(out, (slice(None), bus), values)
    return out


def _span(index) -> str:
    idx = list(index)
    if not idx:
        return "none"
    return f"{min(idx)}..{max(idx)}" if len(idx) > 3 else ", ".join(map(str, idx))


# ----------------------------------------------------------------------------- MATPOWER cases


def _matpower_horizon(net: Network, data: _Profiles, costs: PublicCosts, start: int, periods: int, labels,
                      minutes: float, what: str) -> Horizon:
    S = net.base_mva
    has_load = (net.pd != 0) | (net.qd != 0)
    load_bus = np.flatnonzero(has_load)
    where = {int(net.bus_ids[b]): j for j, b in enumerate(load_bus)}
    load_p = np.repeat(net.pd[load_bus][None, :], periods, axis=0)
    load_q = np.repeat(net.qd[load_bus][None, :], periods, axis=0)
    for (element, var), (idx, vals) in data.items():
        if element == "sgen":
            raise CaseDataError(f"{what}: column sgen.{idx[0]}.{var}: {net.name} is a MATPOWER case, which has no sgen table; "
                                "give a generator's available output as gen.<row of mpc.gen>.p_mw")
        if element != "load":
            continue
        for c, bus in enumerate(idx):
            j = where.get(int(bus))
            if j is None:
                known = int(bus) in net._bus_lookup()
                raise CaseDataError(f"{what}: column load.{bus}.{var} names no load: {net.name} "
                                    + (f"bus {bus} has Pd = Qd = 0" if known else f"has no bus {bus}")
                                    + f" (loads at buses {_span(net.bus_ids[load_bus])})")
            (load_p if var == "p_mw" else load_q)[:, j] = vals[:, c] / S
    # reactive power without a profile follows its active profile at a constant power factor
    if ("load", "p_mw") in data:
        given_q = set(int(b) for b in data.get(("load", "q_mvar"), (np.zeros(0, np.int64), None))[0])
        for bus in data[("load", "p_mw")][0]:
            j = where[int(bus)]
            if int(bus) not in given_q and net.pd[load_bus[j]] != 0:
                load_q[:, j] = net.qd[load_bus[j]] * load_p[:, j] / net.pd[load_bus[j]]
    pd = _to_bus(load_p, load_bus, net.n_bus)
    qd = _to_bus(load_q, load_bus, net.n_bus)
    kinds = np.array(["conventional"] * net.n_gen, dtype=object)
    gen_pmax = np.repeat(net.pmax[None, :], periods, axis=0)
    pmin = net.pmin.copy()
    if ("gen", "p_mw") in data:
        gidx, gvals = data[("gen", "p_mw")]
        row = {int(r): g for g, r in enumerate(net.gen_ids)}
        for c, r in enumerate(gidx):
            g = row.get(int(r))
            if g is None:
                raise CaseDataError(f"{what}: column gen.{r}.p_mw names no generator in service of {net.name} "
                                    f"(rows of mpc.gen {_span(net.gen_ids)})")
            if (gvals[:, c] < 0).any():
                raise CaseDataError(f"{what}: gen {r} field p_mw is negative in row {start + int(np.argmax(gvals[:, c] < 0))}; "
                                    "a generator's profile is its available output")
            kinds[g] = "renewable"
            gen_pmax[:, g] = gvals[:, c] / S
            pmin[g] = 0.0  # a renewable can be curtailed to nothing
    names = tuple(f"gen.{int(r)}" for r in net.gen_ids)
    keep_case = net.has_costs and costs.keep_case_costs
    c2, c1, c0 = net.cost_c2.copy(), net.cost_c1.copy(), net.cost_c0.copy()
    pwl_keep = np.ones(len(net.pwl_gen), dtype=bool)
    priced = np.zeros(net.n_gen, dtype=bool)
    for g, name in enumerate(names):
        if keep_case and name not in costs.elements:
            continue
        priced[g] = kinds[g] == "renewable" and name not in costs.elements
        a2, a1, a0 = costs.cost_of(name, str(kinds[g]))
        c2[g], c1[g], c0[g] = a2 * S**2, a1 * S, a0
        pwl_keep &= net.pwl_gen != g
    net = replace(net, pmin=pmin, cost_c2=c2, cost_c1=c1, cost_c0=c0, pwl_gen=net.pwl_gen[pwl_keep],
                  pwl_mw=net.pwl_mw[pwl_keep], pwl_cost=net.pwl_cost[pwl_keep], has_costs=True)
    load_names = tuple(f"load.{int(net.bus_ids[b])}" for b in load_bus)
    return _finish(net, pd, qd, gen_pmax, kinds, np.array([""] * net.n_gen, dtype=object), load_bus, load_p, load_q,
                   load_names, names, minutes, start, labels, costs, priced, net.name)


def _finish(net, pd, qd, gen_pmax, kinds, types, load_bus, load_p, load_q, load_names, gen_names, minutes, start,
            labels, costs, priced, source, load_rating=None) -> Horizon:
    """The :class:`Horizon`; ``priced`` marks the renewables whose cost holds the curtailment price."""
    periods = pd.shape[0]
    if labels is None:
        labels = [f"period {start + t}" for t in range(periods)]
    # the network's static limits hold every period's: pmax the largest available output (period 0's in network)
    net = net.with_loads(pd[0], qd[0])
    net.pmax = gen_pmax[0].copy()
    net.pmin = np.minimum(net.pmin, gen_pmax.min(0))
    offset = costs.curtailment_price * gen_pmax[:, priced].sum(1) * net.base_mva
    return Horizon(
        network=net, pd=pd, qd=qd, gen_pmax=gen_pmax, gen_kind=np.asarray(kinds, dtype=str),
        gen_type=np.asarray(types, dtype=str), load_bus=np.asarray(load_bus, dtype=np.int64),
        load_p=load_p, load_q=load_q, load_names=tuple(load_names), gen_names=tuple(gen_names),
        period_minutes=float(minutes), start=int(start), labels=tuple(str(x) for x in labels), costs=costs,
        curtailment_offset=offset, source=str(source), load_rating=load_rating,
    )
