"""A zone's compiled problem straight from the network's arrays, without building its Pyomo model.

:func:`powerdp.opf.formulation.build_model` defines the formulation and
:func:`powerdp.opf.compiled.compile_model` reads it into arrays; on a large case that
takes most of a run's set-up (case13659pegase, 16 zones: 16–19 s of CPU, against 0.3 s here;
``benchmarks/setup_stages.py``). :func:`compile_direct` writes the same
:class:`~powerdp.opf.compiled.CompiledProblem` — the same variables and rows in the same
order, the same coefficients, bounds, start point, objective and balance maps — with
vectorized numpy, for the models it knows: every registered objective (``shedding``,
``cost+shedding``, ``cost``; polynomial and piecewise-linear costs, HVDC lines) with the flows as
variables. ``tests/test_direct.py`` holds the two equal on case14, case118, the HVDC and
piecewise-linear cases and a zone of case13659pegase. Flows as expressions go through Pyomo
(:func:`compile_zone` decides).
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
DIRECT_OBJECTIVES = ("shedding", "cost+shedding", "cost")


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
    with_cost, with_balance_variables = objective != "shedding", z.unit.balance_variables
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

    def col(kind: str, elements: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Columns of ``kind[elements]``; ``index`` the sorted elements the variable is declared over."""
        first = 0
        for name_, index_, *_ in blocks:
            if name_ == kind:
                return first + np.searchsorted(index, elements)
            first += len(index_)
        raise KeyError(kind)

    if with_balance_variables:
        # they start at their definition's value at the start point (build_model: pyo.value)
        yp0, yq0 = _balance_start(net, own, gens, dclines_fr, dclines_to, np.concatenate([b[4] for b in blocks]), col, dclines)
        var("yp", own, np.full(len(own), -np.inf), np.full(len(own), np.inf), yp0)
        var("yq", own, np.full(len(own), -np.inf), np.full(len(own), np.inf), yq0)
    if with_cost:  # PowerModels' lambda form of piecewise-linear costs (objectives._generation_cost)
        pwl = _piecewise_rows(net.pwl_gen, gens)
        var("pwl_lambda", pwl, np.zeros(len(pwl)), np.ones(len(pwl)), 0.0)
        if len(dclines_fr):
            pwl_dc = _piecewise_rows(dc.pwl_line, dclines_fr)
            var("pwl_dc_lambda", pwl_dc, np.zeros(len(pwl_dc)), np.ones(len(pwl_dc)), 0.0)
    n = sum(len(b[1]) for b in blocks)

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

    pd, qd = net.pd[own], net.qd[own]
    injection = _Rows()  # the load-free balance of each own bus: entries only, row 2k its active part, 2k + 1 its reactive
    row_p = np.full(net.n_bus, -1, dtype=np.int64)
    row_p[own] = 2 * np.arange(len(own))
    for kind, at in (("f", fb), ("t", tb)):
        mine = own_mask[at]
        for q in (0, 1):
            injection.linear(row_p[at[mine]] + q, col(("q" if q else "p") + kind, branches[mine], branches), 1.0)
    for q, kinds_dc in ((0, ("p_dc_fr", "p_dc_to")), (1, ("q_dc_fr", "q_dc_to"))):
        for kind, lines, ends in ((kinds_dc[0], dclines_fr, dc.f_bus), (kinds_dc[1], dclines_to, dc.t_bus)):
            declared = dclines if q == 0 else lines
            injection.linear(row_p[ends[lines]] + q, col(kind, lines, declared), 1.0)
    gbus = net.gen_bus[gens]
    injection.linear(row_p[gbus], col("pg", gens, gens), -1.0)
    injection.linear(row_p[gbus] + 1, col("qg", gens, gens), -1.0)
    injection.linear(row_p[own], col("w", own, buses), net.gs[own])
    injection.linear(row_p[own] + 1, col("w", own, buses), -net.bs[own])
    inj_rows, inj_cols, inj_vals = (np.concatenate(x) for x in zip(*injection.lin))
    # per own bus k: (k, column, coefficient) of its active (0) and reactive (1) load-free balance
    by_part = {q: (inj_rows[inj_rows % 2 == q] // 2, inj_cols[inj_rows % 2 == q], inj_vals[inj_rows % 2 == q]) for q in (0, 1)}
    if with_balance_variables:
        # yp_i - (Σ pf + Σ pt + Σ p_dc - Σ pg + gs w_i) = 0 and its reactive twin, per own bus
        r = rows.block("balance_def", [(int(i), k) for i in own for k in ("p", "q")], 0.0, 0.0)
        rows.linear(r + row_p[own], col("yp", own, own), 1.0)
        rows.linear(r + row_p[own] + 1, col("yq", own, own), 1.0)
        rows.linear(r + inj_rows, inj_cols, -inj_vals)
    else:
        # sp_i = Σ pf + Σ pt + Σ p_dc - Σ pg + gs w_i + pd_i = 0, then the reactive rows (objectives._cost_terms)
        for q, loads in ((0, pd), (1, qd)):
            bound = 0.0 - loads
            r = rows.block("balance_q" if q else "balance_p", own.tolist(), bound, bound)
            k, cols, vals = by_part[q]
            rows.linear(r + k, cols, vals)
    if with_cost:
        for prefix, pwl_of, points, lines, var_kind, lambdas in (
                ("pwl", net.pwl_gen, net.pwl_mw, gens, "pg", "pwl_lambda"),
                ("pwl_dc", dc.pwl_line, dc.pwl_mw, dclines_fr, "p_dc_fr", "pwl_dc_lambda")):
            if prefix == "pwl_dc" and not len(dclines_fr):
                continue
            declared = gens if var_kind == "pg" else dclines
            k = _piecewise_rows(pwl_of, lines)
            owners = np.unique(pwl_of[k])
            row_of = np.searchsorted(owners, pwl_of[k])
            lam = col(lambdas, k, k)
            r = rows.block(prefix + "_convex", owners.tolist(), 1.0, 1.0)
            rows.linear(r + row_of, lam, 1.0)
            r = rows.block(prefix + "_mw", owners.tolist(), 0.0, 0.0)
            rows.linear(r + row_of, lam, points[k])
            rows.linear(r + np.arange(len(owners)), col(var_kind, owners, declared), -1.0)

    # ---- assemble
    m = rows.m
    lin = [np.concatenate(x) if rows.lin else np.zeros(0) for x in zip(*rows.lin)]
    A = sp.csr_matrix((lin[2], (lin[0], lin[1])), shape=(m, n))
    A.sum_duplicates()
    quad = [np.concatenate(x) for x in zip(*rows.quad)]
    order = np.argsort(quad[0], kind="stable")  # by row, each row's terms in the order build_model writes them
    qrow, qi, qj, qv = (x[order] for x in quad)
    cl, cu = np.concatenate(rows.cl), np.concatenate(rows.cu)

    lb = np.concatenate([b[2] for b in blocks])
    ub = np.concatenate([b[3] for b in blocks])
    x0 = np.clip(np.concatenate([b[4] for b in blocks]), lb, ub)
    var_keys = [(kind, int(i)) for kind, index, *_ in blocks for i in index]

    if with_balance_variables:
        maps = _balance_maps(n, own, pd, qd, col)
    else:
        maps = {name_: LinearMap(keys=own.tolist(), M=_csr(*by_part[q], (len(own), n)), const=loads.astype(float))
                for q, name_, loads in ((0, "sp", pd), (1, "sq", qd))}
    terms = []
    if with_cost:
        terms.append(_generation_cost(net, n, gens, dclines, dclines_fr, col))
    if with_balance_variables:
        terms.append(_shedding(n, own, pd, qd, col, weight))
    objective_ = terms[0] if len(terms) == 1 else _sum_objectives(*terms)
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


def _csr(rows, cols, vals, shape) -> sp.csr_matrix:
    M = sp.csr_matrix((vals, (rows, cols)), shape=shape)
    M.sum_duplicates()
    return M


def _piecewise_rows(owner_of_row: np.ndarray, owners: np.ndarray) -> np.ndarray:
    """The rows of a piecewise-linear cost table whose generator (HVDC line) is among ``owners``."""
    return np.flatnonzero(np.isin(owner_of_row, owners))


def _balance_maps(n: int, own: np.ndarray, pd: np.ndarray, qd: np.ndarray, col) -> dict[str, LinearMap]:
    """The balance maps sp = yp + pd, sq = yq + qd of a model with balance variables."""
    yp, yq = col("yp", own, own), col("yq", own, own)
    keys = own.tolist()
    rows = np.arange(len(own))
    return {
        "sp": LinearMap(keys=keys, M=sp.csr_matrix((np.ones(len(own)), (rows, yp)), shape=(len(own), n)), const=pd.astype(float)),
        "sq": LinearMap(keys=list(keys), M=sp.csr_matrix((np.ones(len(own)), (rows, yq)), shape=(len(own), n)), const=qd.astype(float)),
    }


def _shedding(n: int, own: np.ndarray, pd: np.ndarray, qd: np.ndarray, col, weight: float | None) -> QuadraticObjective:
    """ω Σ_i (yp_i + pd_i)² + (yq_i + qd_i)² (ω = 1 unweighted) expanded as Pyomo's standard representation reads it."""
    yp, yq = col("yp", own, own), col("yq", own, own)
    w = 1.0 if weight is None else float(weight)
    c = np.zeros(n)
    c[yp] = w * (2.0 * pd)
    c[yq] = w * (2.0 * qd)
    squares = _interleave((w * pd) * pd, (w * qd) * qd)  # as Pyomo's standard repn expands ω (y + d)², summed in order
    const = float(np.cumsum(squares)[-1]) if len(squares) else 0.0
    q = _interleave(yp, yq)
    return QuadraticObjective(c=c, const=const, qi=q.copy(), qj=q.copy(), qv=np.full(len(q), w))


def _generation_cost(net: Network, n: int, gens: np.ndarray, dclines: np.ndarray, dclines_fr: np.ndarray, col) -> QuadraticObjective:
    """Σ_g cost_g(pg_g) of the model's generators, then the HVDC lines' costs on the power entering at their from
    end (objectives._generation_cost): polynomial terms on pg (p_dc_fr), piecewise-linear ones on the lambdas."""
    c = np.zeros(n)
    consts, qcols, qvals = [], [], []
    dc = net.dcline
    for var_kind, owners, declared, pwl_of, table, pwl_kind in (
            ("pg", gens, gens, net.pwl_gen, net, "pwl_lambda"), ("p_dc_fr", dclines_fr, dclines, dc.pwl_line, dc, "pwl_dc_lambda")):
        if var_kind == "p_dc_fr" and not len(dclines_fr):
            continue
        poly = owners[~np.isin(owners, pwl_of)]
        cols = col(var_kind, poly, declared)
        square = table.cost_c2[poly] != 0  # Pyomo drops a term 0 * pg²
        qcols.append(cols[square])
        qvals.append(table.cost_c2[poly][square])
        c[cols] += table.cost_c1[poly]
        consts.append(table.cost_c0[poly])
        k = _piecewise_rows(pwl_of, owners)
        c[col(pwl_kind, k, k)] += table.pwl_cost[k]
    const = np.cumsum(np.concatenate(consts)) if consts else np.zeros(0)
    q = np.concatenate(qcols) if qcols else np.zeros(0, np.int64)
    return QuadraticObjective(c=c, const=float(const[-1]) if len(const) else 0.0, qi=q.copy(), qj=q.copy(),
                              qv=np.concatenate(qvals) if qvals else np.zeros(0))


def _sum_objectives(a: QuadraticObjective, b: QuadraticObjective) -> QuadraticObjective:
    return QuadraticObjective(c=a.c + b.c, const=a.const + b.const, qi=np.concatenate([a.qi, b.qi]),
                              qj=np.concatenate([a.qj, b.qj]), qv=np.concatenate([a.qv, b.qv]))
