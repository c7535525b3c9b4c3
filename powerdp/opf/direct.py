"""A zone's compiled problem straight from the network's arrays, without building its Pyomo model.

:func:`powerdp.opf.formulation.build_model` defines the formulation and
:func:`powerdp.opf.compiled.compile_model` reads it into arrays; on a large case that
takes most of a run's set-up (case13659pegase, 16 zones: 19 s of CPU, against 0.3 s here;
``benchmarks/setup_stages.py``). :func:`compile_direct` writes the same
:class:`~powerdp.opf.compiled.CompiledProblem` — the same variables and rows in the same
order, the same coefficients, bounds, start point, objective and balance maps — with
vectorized numpy, for the models it knows: the ``shedding`` objective with the flows as
variables (the paper's zone problem, which every private run of the power-flow application
solves). ``tests/test_direct.py`` holds the two equal on case14, case118 and a zone of
case13659pegase. Any other model goes through Pyomo (:func:`compile_zone` decides).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError
from ..grid.network import Network, voltage_product_bounds
from .compiled import INF, CompiledProblem, LinearMap, QuadraticObjective, _check_finite_model, compile_model
from .formulation import branch_flow_coefficients, build_model, zone_model_elements

__all__ = ["compile_zone", "compile_direct", "DIRECT_OBJECTIVES"]

#: the objectives (with flows as variables) whose models :func:`compile_direct` writes without Pyomo
DIRECT_OBJECTIVES = ("shedding",)


def compile_zone(
    net: Network,
    own_buses: Iterable[int] | None = None,
    objective: str = "cost",
    flows: str = "variables",
    name: str | None = None,
    shedding_weight: float | str | None = None,
) -> CompiledProblem:
    """``compile_model(build_model(...))`` with the same arguments: directly from arrays where
    :func:`compile_direct` knows the model, else through Pyomo."""
    if objective in DIRECT_OBJECTIVES and flows == "variables":
        return compile_direct(net, own_buses, objective=objective, flows=flows, name=name, shedding_weight=shedding_weight)
    return compile_model(build_model(net, own_buses, objective=objective, flows=flows, name=name, shedding_weight=shedding_weight))


class _Rows:
    """Constraint rows written block by block: keys, bounds, linear and quadratic entries."""

    def __init__(self):
        self.keys: list = []
        self.cl: list[np.ndarray] = []
        self.cu: list[np.ndarray] = []
        self.lin: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.quad: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    @property
    def m(self) -> int:
        return len(self.keys)

    def block(self, name: str, index: list, cl, cu) -> int:
        """Rows ``(name, index[k])``; returns the first row's number."""
        first = self.m
        self.keys.extend((name, k) for k in index)
        n = len(index)
        self.cl.append(np.broadcast_to(np.asarray(cl, dtype=float), (n,)))
        self.cu.append(np.broadcast_to(np.asarray(cu, dtype=float), (n,)))
        return first

    def linear(self, rows, cols, vals) -> None:
        """Entries ``vals * x[cols]`` of rows ``rows``; a zero coefficient is no entry (Pyomo drops ``0 * x``)."""
        rows, cols = np.broadcast_arrays(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))
        vals = np.broadcast_to(np.asarray(vals, dtype=float), rows.shape)
        keep = vals != 0
        self.lin.append((rows[keep], cols[keep], vals[keep]))

    def quadratic(self, rows, i, j, vals) -> None:
        rows, i, j = np.broadcast_arrays(np.asarray(rows, dtype=np.int64), np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64))
        self.quad.append((rows, np.maximum(i, j), np.minimum(i, j), np.broadcast_to(np.asarray(vals, dtype=float), rows.shape)))


def _interleave(*arrays: np.ndarray) -> np.ndarray:
    """``a0[0], a1[0], ..., a0[1], a1[1], ...``: the order of a constraint indexed by (element, kind)."""
    return np.stack(arrays, axis=1).ravel()


def _bounds(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Variable bounds as compile_model reads them from Pyomo: an infinite (or missing) bound is ±INF."""
    lo = np.where(np.isfinite(lo), lo, -INF)
    hi = np.where(np.isfinite(hi), hi, INF)
    return lo.astype(float), hi.astype(float)


def compile_direct(
    net: Network,
    own_buses: Iterable[int] | None = None,
    objective: str = "shedding",
    flows: str = "variables",
    name: str | None = None,
    shedding_weight: float | str | None = None,
) -> CompiledProblem:
    """The :class:`CompiledProblem` of ``build_model(net, own_buses, objective, flows, name, shedding_weight)``
    written directly (module doc); ``objective`` one of :data:`DIRECT_OBJECTIVES`, ``flows="variables"``."""
    if objective not in DIRECT_OBJECTIVES or flows != "variables":
        raise ModelError(f"compile_direct writes the {', '.join(DIRECT_OBJECTIVES)} objective with flows as variables only "
                         f"(not {objective!r} with flows {flows!r}): use compile_model(build_model(...))")
    z = zone_model_elements(net, own_buses, objective, flows, shedding_weight)
    weight, own, own_mask, buses, branches, pairs, gens = z.weight, z.own, z.own_mask, z.buses, z.branches, z.pairs, z.gens
    dclines, dclines_fr, dclines_to = z.dclines, z.dclines_fr, z.dclines_to
    pm = net.convention == "powermodels"
    dc = net.dcline

    # ---- variables, in build_model's order of declaration
    blocks: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # (name, index, lb, ub, x0)

    def var(kind, index, lo, hi, start):
        lo, hi = _bounds(np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
        blocks.append((kind, index, lo, hi, np.broadcast_to(np.asarray(start, dtype=float), index.shape)))

    var("w", buses, net.vmin[buses] ** 2, net.vmax[buses] ** 2, 1.0)
    if pm:
        wr_min, wr_max, wi_min, wi_max = voltage_product_bounds(net)
        var("wr", pairs, wr_min[pairs], wr_max[pairs], np.clip(1.0, wr_min[pairs], wr_max[pairs]))
        var("wi", pairs, wi_min[pairs], wi_max[pairs], np.clip(0.0, wi_min[pairs], wi_max[pairs]))
    else:
        var("wr", pairs, np.full(len(pairs), -np.inf), np.full(len(pairs), np.inf), 1.0)
        var("wi", pairs, np.full(len(pairs), -np.inf), np.full(len(pairs), np.inf), 0.0)
    var("pg", gens, net.pmin[gens], net.pmax[gens], 0.5 * (net.pmin[gens] + net.pmax[gens]))
    var("qg", gens, net.qmin[gens], net.qmax[gens], 0.5 * (net.qmin[gens] + net.qmax[gens]))
    for kind, index, lo, hi in (("p_dc_fr", dclines, dc.pminf, dc.pmaxf), ("p_dc_to", dclines, dc.pmint, dc.pmaxt),
                                ("q_dc_fr", dclines_fr, dc.qminf, dc.qmaxf), ("q_dc_to", dclines_to, dc.qmint, dc.qmaxt)):
        var(kind, index, lo[index], hi[index], np.clip(0.0, lo[index], hi[index]))
    rate = net.rate_a[branches]
    for kind in ("pf", "qf", "pt", "qt"):
        var(kind, branches, np.where(np.isfinite(rate), -rate, -np.inf), np.where(np.isfinite(rate), rate, np.inf), 0.0)
    offset: dict[str, int] = {}
    n = 0
    for kind, index, *_ in blocks:
        offset[kind] = n
        n += len(index)
    n += 2 * len(own)  # yp, yq
    offset["yp"], offset["yq"] = n - 2 * len(own), n - len(own)

    def col(kind: str, elements: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Columns of ``kind[elements]``; ``index`` the sorted elements the variable is declared over."""
        return offset[kind] + np.searchsorted(index, elements)

    # the balance variables start at their definition's value at the start point (build_model: pyo.value)
    start = np.concatenate([b[4] for b in blocks])
    yp0, yq0 = _balance_start(net, own, gens, dclines_fr, dclines_to, start, col, dclines)

    # ---- constraints, in build_model's order of declaration
    rows = _Rows()
    r = rows.block("dcline_loss", dclines.tolist(), dc.loss0[dclines], dc.loss0[dclines])
    k = np.arange(len(dclines))
    rows.linear(r + k, col("p_dc_fr", dclines, dclines), 1.0 - dc.loss1[dclines])
    rows.linear(r + k, col("p_dc_to", dclines, dclines), 1.0)

    cf = branch_flow_coefficients(net)
    fb, tb, bp, sg = net.f_bus[branches], net.t_bus[branches], net.branch_pair[branches], net.branch_pair_sign[branches]
    kinds = ("pf", "qf", "pt", "qt")
    r = rows.block("ohm", [(int(b), kind) for b in branches for kind in kinds], 0.0, 0.0)
    nb = len(branches)
    for j, kind in enumerate(kinds):
        rk = r + 4 * np.arange(nb) + j
        end = fb if kind[1] == "f" else tb
        rows.linear(rk, col(kind, branches, branches), 1.0)
        rows.linear(rk, col("w", end, buses), -cf[kind + "_w"][branches])
        rows.linear(rk, col("wr", bp, pairs), -cf[kind + "_wr"][branches])
        rows.linear(rk, col("wi", bp, pairs), -(cf[kind + "_wi"][branches] * sg))

    pf_, pt_ = net.pair_f, net.pair_t
    r = rows.block("soc", pairs.tolist(), -INF, 0.0)
    rp = r + np.arange(len(pairs))
    wr_c, wi_c = col("wr", pairs, pairs), col("wi", pairs, pairs)
    rows.quadratic(rp, wr_c, wr_c, 1.0)
    rows.quadratic(rp, wi_c, wi_c, 1.0)
    rows.quadratic(rp, col("w", pf_[pairs], buses), col("w", pt_[pairs], buses), -1.0)

    amin, amax = net.pair_angmin, net.pair_angmax
    half_pi = np.pi / 2
    with np.errstate(invalid="ignore"):
        lo_ok = np.isfinite(amin) & (np.abs(amin) < half_pi)
        hi_ok = np.isfinite(amax) & (np.abs(amax) < half_pi)
    for which, ok, angle in (("angle_lo", lo_ok, amin), ("angle_hi", hi_ok, amax)):
        sel = pairs[ok[pairs]]
        tan = np.tan(angle[sel])
        lower = which == "angle_lo"
        # wi >= tan·wr is the row tan·wr - wi <= 0 (a zero tan too), wi <= tan·wr the row wi - tan·wr <= 0
        r = rows.block(which, sel.tolist(), -INF, 0.0)
        rs = r + np.arange(len(sel))
        rows.linear(rs, col("wr", sel, pairs), tan if lower else -tan)
        rows.linear(rs, col("wi", sel, pairs), -1.0 if lower else 1.0)
    if pm:
        both = lo_ok & hi_ok & (amin < amax)
        sel = pairs[both[pairs]]
        f, t = pf_[sel], pt_[sel]
        vf_lb, vf_ub, vt_lb, vt_ub = net.vmin[f], net.vmax[f], net.vmin[t], net.vmax[t]
        phi, d = (amax[sel] + amin[sel]) / 2, (amax[sel] - amin[sel]) / 2
        sf, st = vf_lb + vf_ub, vt_lb + vt_ub
        cos_d = np.cos(d)
        rhs1 = vf_ub * vt_ub * cos_d * (vf_lb * vt_lb - vf_ub * vt_ub)
        rhs2 = -vf_lb * vt_lb * cos_d * (vf_lb * vt_lb - vf_ub * vt_ub)
        r = rows.block("lnc", [(int(p), k) for p in sel for k in (1, 2)], _interleave(rhs1, rhs2), INF)
        r1 = r + 2 * np.arange(len(sel))
        for rk, vt_, vf_ in ((r1, vt_ub, vf_ub), (r1 + 1, vt_lb, vf_lb)):
            rows.linear(rk, col("wr", sel, pairs), sf * st * np.cos(phi))
            rows.linear(rk, col("wi", sel, pairs), sf * st * np.sin(phi))
            rows.linear(rk, col("w", f, buses), -(vt_ * cos_d * st))
            rows.linear(rk, col("w", t, buses), -(vf_ * cos_d * sf))

    rated = branches[np.isfinite(rate)]
    r = rows.block("thermal", [(int(b), e) for b in rated for e in ("f", "t")], -INF, _interleave(*(net.rate_a[rated] ** 2,) * 2))
    for e, rk in (("f", r + 2 * np.arange(len(rated))), ("t", r + 2 * np.arange(len(rated)) + 1)):
        p_c, q_c = col("p" + e, rated, branches), col("q" + e, rated, branches)
        rows.quadratic(rk, p_c, p_c, 1.0)
        rows.quadratic(rk, q_c, q_c, 1.0)

    # yp_i - (Σ pf + Σ pt + Σ p_dc - Σ pg + gs w_i) = 0 and its reactive twin, per own bus
    r = rows.block("balance_def", [(int(i), k) for i in own for k in ("p", "q")], 0.0, 0.0)
    row_p = np.full(net.n_bus, -1, dtype=np.int64)
    row_p[own] = r + 2 * np.arange(len(own))
    rows.linear(row_p[own], col("yp", own, own), 1.0)
    rows.linear(row_p[own] + 1, col("yq", own, own), 1.0)
    for kind, at in (("f", fb), ("t", tb)):
        mine = own_mask[at]
        for q in (0, 1):
            rows.linear(row_p[at[mine]] + q, col(("q" if q else "p") + kind, branches[mine], branches), -1.0)
    for q, kinds_dc in ((0, ("p_dc_fr", "p_dc_to")), (1, ("q_dc_fr", "q_dc_to"))):
        for kind, lines, ends in ((kinds_dc[0], dclines_fr, dc.f_bus), (kinds_dc[1], dclines_to, dc.t_bus)):
            declared = dclines if q == 0 else lines
            rows.linear(row_p[ends[lines]] + q, col(kind, lines, declared), -1.0)
    gbus = net.gen_bus[gens]
    rows.linear(row_p[gbus], col("pg", gens, gens), 1.0)
    rows.linear(row_p[gbus] + 1, col("qg", gens, gens), 1.0)
    rows.linear(row_p[own], col("w", own, buses), -net.gs[own])
    rows.linear(row_p[own] + 1, col("w", own, buses), net.bs[own])

    # ---- assemble
    m = rows.m
    lin = [np.concatenate(x) if rows.lin else np.zeros(0) for x in zip(*rows.lin)]
    A = sp.csr_matrix((lin[2], (lin[0], lin[1])), shape=(m, n))
    A.sum_duplicates()
    quad = [np.concatenate(x) for x in zip(*rows.quad)]
    order = np.argsort(quad[0], kind="stable")  # by row, each row's terms in the order build_model writes them
    qrow, qi, qj, qv = (x[order] for x in quad)
    cl, cu = np.concatenate(rows.cl), np.concatenate(rows.cu)

    lb = np.concatenate([b[2] for b in blocks] + [np.full(2 * len(own), -INF)])
    ub = np.concatenate([b[3] for b in blocks] + [np.full(2 * len(own), INF)])
    x0 = np.clip(np.concatenate([start, yp0, yq0]), lb, ub)
    var_keys = [(kind, int(i)) for kind, index, *_ in blocks for i in index] + [("yp", int(i)) for i in own] + [
        ("yq", int(i)) for i in own]

    pd, qd = net.pd[own], net.qd[own]
    objective_, maps = _shedding(n, own, pd, qd, col)
    _check_finite_model(name or net.name, rows.keys, A, qrow, qv, objective_, cl, cu)
    return CompiledProblem(
        name=name or net.name, var_keys=var_keys, lb=lb, ub=ub, x0=x0, con_keys=rows.keys, cl=cl, cu=cu, A=A,
        qrow=qrow.astype(np.int64), qi=qi.astype(np.int64), qj=qj.astype(np.int64), qv=qv.astype(float),
        objective=objective_, expressions=maps,
        meta={"network": net.name, "objective": objective, "shedding_weight": weight, "flows": flows, "own": own,
              "buses": buses, "branches": branches, "pairs": pairs, "gens": gens, "dclines": dclines},
    )


def _balance_start(net, own, gens, dclines_fr, dclines_to, start, col, dclines):
    """yp and yq at the start point: Σ of the HVDC ends' starts − Σ pg (qg) + gs w (− bs w), w = 1, the flows 0
    (build_model evaluates its balance expressions there; the sums' order keeps them bit-identical)."""
    dc = net.dcline
    yp, yq = np.zeros(net.n_bus), np.zeros(net.n_bus)
    np.add.at(yp, dc.f_bus[dclines_fr], start[col("p_dc_fr", dclines_fr, dclines)])
    np.add.at(yp, dc.t_bus[dclines_to], start[col("p_dc_to", dclines_to, dclines)])
    np.add.at(yq, dc.f_bus[dclines_fr], start[col("q_dc_fr", dclines_fr, dclines_fr)])
    np.add.at(yq, dc.t_bus[dclines_to], start[col("q_dc_to", dclines_to, dclines_to)])
    pg_sum, qg_sum = np.zeros(net.n_bus), np.zeros(net.n_bus)
    np.add.at(pg_sum, net.gen_bus[gens], start[col("pg", gens, gens)])
    np.add.at(qg_sum, net.gen_bus[gens], start[col("qg", gens, gens)])
    w = 1.0  # w's start value (compile_model moves it inside its bounds only afterwards)
    yp = yp - pg_sum + net.gs * w
    yq = yq - qg_sum - net.bs * w
    return yp[own], yq[own]


def _shedding(n: int, own: np.ndarray, pd: np.ndarray, qd: np.ndarray, col):
    """Σ_i (yp_i + pd_i)² + (yq_i + qd_i)² expanded as Pyomo's standard representation reads it, and the
    balance maps sp = yp + pd, sq = yq + qd."""
    yp, yq = col("yp", own, own), col("yq", own, own)
    c = np.zeros(n)
    c[yp] = 2.0 * pd
    c[yq] = 2.0 * qd
    squares = _interleave(pd * pd, qd * qd)
    const = float(np.cumsum(squares)[-1]) if len(squares) else 0.0
    q = _interleave(yp, yq)
    objective = QuadraticObjective(c=c, const=const, qi=q.copy(), qj=q.copy(), qv=np.ones(len(q)))
    keys = own.tolist()
    rows = np.arange(len(own))
    maps = {
        "sp": LinearMap(keys=keys, M=sp.csr_matrix((np.ones(len(own)), (rows, yp)), shape=(len(own), n)), const=pd.astype(float)),
        "sq": LinearMap(keys=list(keys), M=sp.csr_matrix((np.ones(len(own)), (rows, yq)), shape=(len(own), n)), const=qd.astype(float)),
    }
    return objective, maps
