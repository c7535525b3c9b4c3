"""Compile a Pyomo model once into sparse numpy/scipy arrays.

Every model powerdp builds is a quadratically constrained quadratic program:
constraints and objective are at most quadratic. :func:`compile_model` reads
each constraint once with Pyomo's ``generate_standard_repn`` and stores

* the linear part of all constraints as one CSR matrix ``A``;
* the quadratic part as triplets ``(row, i, j, v)`` meaning ``v * x_i * x_j``;
* the objective as a :class:`QuadraticObjective` (linear vector, constant,
  quadratic triplets, optional diagonal);
* named linear expressions (e.g. the power-balance terms ``sp``/``sq``) as
  :class:`LinearMap` ``M x + const``.

After that nothing touches Pyomo: :mod:`powerdp.opf.solvers` evaluates values,
Jacobians and Hessians with vectorized numpy kernels, and a new objective is a
new :class:`QuadraticObjective` (CVXPY-style: compile once, re-solve with new
parameters).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError
from .pyomo_lazy import generate_standard_repn, pyo

__all__ = ["CompiledProblem", "QuadraticObjective", "LinearMap", "compile_model", "INF"]

INF = 1e20  # Ipopt treats |bound| >= 1e19 as infinite

VarKey = tuple[str, Hashable]


@dataclass
class QuadraticObjective:
    """``const + c·x + Σ_k v_k x_{i_k} x_{j_k} + ½ Σ_i d_i x_i²``.

    Quadratic triplets use ``i >= j``; a term with ``i == j`` is ``v x_i²``.
    ``diag`` (``d``) is a convenience for separable proximal/penalty terms.
    """

    c: np.ndarray
    const: float = 0.0
    qi: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    qj: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    qv: np.ndarray = field(default_factory=lambda: np.zeros(0))
    diag: np.ndarray | None = None

    def value(self, x: np.ndarray) -> float:
        val = self.const + float(self.c @ x) + float(np.dot(self.qv, x[self.qi] * x[self.qj]))
        if self.diag is not None:
            val += 0.5 * float(np.dot(self.diag, x * x))
        return val

    def gradient(self, x: np.ndarray) -> np.ndarray:
        n = len(x)
        g = self.c + np.bincount(self.qi, self.qv * x[self.qj], minlength=n) + np.bincount(
            self.qj, self.qv * x[self.qi], minlength=n
        )
        if self.diag is not None:
            g = g + self.diag * x
        return g

    def split(self, cols: np.ndarray) -> tuple[QuadraticObjective, QuadraticObjective]:
        """(the terms that touch a column in ``cols``, the rest): their sum is this objective.

        The constant goes with the first part. Used to keep the data-free part of a private
        objective (the terms on no balance variable, docs/algorithm.md) exact.
        """
        mask = np.zeros(len(self.c), dtype=bool)
        mask[np.asarray(cols, dtype=np.int64)] = True
        on_q = mask[self.qi] | mask[self.qj]
        on_c = np.where(mask, self.c, 0.0)
        diag = self.diag
        on = QuadraticObjective(
            c=on_c, const=self.const, qi=self.qi[on_q], qj=self.qj[on_q], qv=self.qv[on_q],
            diag=None if diag is None else np.where(mask, diag, 0.0),
        )
        rest = QuadraticObjective(
            c=self.c - on_c, qi=self.qi[~on_q], qj=self.qj[~on_q], qv=self.qv[~on_q],
            diag=None if diag is None else np.where(mask, 0.0, diag),
        )
        return on, rest

    @property
    def is_zero(self) -> bool:
        """No term depends on x (a constant at most)."""
        return not np.any(self.c) and not np.any(self.qv) and (self.diag is None or not np.any(self.diag))

    def support(self) -> np.ndarray:
        """The columns some term of the objective depends on."""
        cols = [np.flatnonzero(self.c), self.qi[self.qv != 0], self.qj[self.qv != 0]]
        if self.diag is not None:
            cols.append(np.flatnonzero(self.diag))
        return np.unique(np.concatenate(cols)).astype(np.int64)

    def hessian_matrix(self, n: int) -> sp.csr_matrix:
        """The full symmetric Hessian as a sparse matrix."""
        off = self.qi != self.qj
        rows = np.concatenate([self.qi, self.qj[off]])
        cols = np.concatenate([self.qj, self.qi[off]])
        vals = np.concatenate([np.where(off, self.qv, 2 * self.qv), self.qv[off]])
        h = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
        if self.diag is not None:
            h = h + sp.diags(self.diag)
        return h.tocsr()


@dataclass
class LinearMap:
    """Named linear expressions ``M x + const``, one row per index in ``keys``."""

    keys: list[Hashable]
    M: sp.csr_matrix
    const: np.ndarray

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.M @ x + self.const


@dataclass
class CompiledProblem:
    """A QCQP ``min f(x) s.t. cl <= A x + quad(x) <= cu, lb <= x <= ub`` in arrays."""

    name: str
    var_keys: list[VarKey]
    lb: np.ndarray
    ub: np.ndarray
    x0: np.ndarray
    con_keys: list[VarKey]
    cl: np.ndarray
    cu: np.ndarray
    A: sp.csr_matrix
    qrow: np.ndarray
    qi: np.ndarray
    qj: np.ndarray
    qv: np.ndarray
    objective: QuadraticObjective
    expressions: dict[str, LinearMap]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.var_keys)

    @property
    def m(self) -> int:
        return len(self.con_keys)

    def index_of(self, keys: Sequence[VarKey]) -> np.ndarray:
        """Column indices of the given variable keys (KeyError names a missing key)."""
        lookup = self._lookup()
        try:
            return np.fromiter((lookup[k] for k in keys), dtype=np.int64, count=len(keys))
        except KeyError as exc:
            raise KeyError(f"variable {exc.args[0]} is not in problem {self.name!r}") from None

    def _lookup(self) -> dict[VarKey, int]:
        lookup = self.__dict__.get("_key_lookup")
        if lookup is None:
            lookup = {k: i for i, k in enumerate(self.var_keys)}
            self.__dict__["_key_lookup"] = lookup
        return lookup

    def constraint_values(self, x: np.ndarray) -> np.ndarray:
        return self.A @ x + np.bincount(self.qrow, self.qv * x[self.qi] * x[self.qj], minlength=self.m)

    def violation(self, x: np.ndarray) -> np.ndarray:
        """Per-constraint violation (>= 0) of ``x``; bounds are checked by :meth:`bound_violation`."""
        g = self.constraint_values(x)
        return np.maximum(np.maximum(self.cl - g, g - self.cu), 0.0)

    def bound_violation(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(np.maximum(self.lb - x, x - self.ub), 0.0)

    def max_violation(self, x: np.ndarray) -> float:
        """Largest violation of any constraint or variable bound by ``x`` (0 when feasible)."""
        v = 0.0
        if self.m:
            v = float(self.violation(x).max())
        if self.n:
            v = max(v, float(self.bound_violation(x).max()))
        return v

    def worst_violation(self, x: np.ndarray) -> tuple[float, VarKey | None]:
        """The largest violation and the key of the constraint or variable that has it."""
        best, key = 0.0, None
        if self.m:
            viol = self.violation(x)
            k = int(np.argmax(viol))
            best, key = float(viol[k]), self.con_keys[k]
        if self.n:
            bv = self.bound_violation(x)
            k = int(np.argmax(bv))
            if bv[k] > best:
                best, key = float(bv[k]), ("bounds of " + str(self.var_keys[k][0]), self.var_keys[k][1])
        return best, key


def _key(obj) -> VarKey:
    return (obj.parent_component().local_name, obj.index())


def _check_finite_model(name, con_keys, A, qrow, qv, objective, cl, cu) -> None:
    """A coefficient that overflowed (a tap ratio of 1e-300 gives 1/tap² = inf) must never reach a solver:
    Ipopt crashes the process on it. One line naming the constraint instead."""
    bad_rows = np.zeros(len(con_keys), dtype=bool)
    if A.nnz:
        bad = ~np.isfinite(A.data)
        if bad.any():
            bad_rows[np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))[bad]] = True
    if len(qv):
        bad_rows[qrow[~np.isfinite(qv)]] = True
    bad_rows |= np.isnan(np.asarray(cl, dtype=float)) | np.isnan(np.asarray(cu, dtype=float))
    if bad_rows.any():
        k = int(np.flatnonzero(bad_rows)[0])
        raise ModelError(
            f"model {name}: constraint {con_keys[k]} has a non-finite coefficient (the case holds a value far out of range, "
            "e.g. a tap ratio near 0 or an impedance near 0)"
        )
    if not (np.all(np.isfinite(objective.c)) and np.all(np.isfinite(objective.qv)) and np.isfinite(objective.const)):
        raise ModelError(f"model {name}: the objective has a non-finite coefficient (a cost far out of range?)")


def compile_model(model: pyo.ConcreteModel, expressions: Sequence[str] = ("sp", "sq")) -> CompiledProblem:
    """Compile a Pyomo model with at most quadratic constraints and objective (see module doc).

    ``expressions`` names indexed ``Expression`` components to compile as
    :class:`LinearMap` (those that are missing are skipped).
    """
    variables = [v for v in model.component_data_objects(pyo.Var, active=True, descend_into=True) if not v.fixed]
    col = {id(v): k for k, v in enumerate(variables)}
    n = len(variables)
    var_keys = [_key(v) for v in variables]
    lb = np.array([-INF if v.lb is None else v.lb for v in variables], dtype=float)
    ub = np.array([INF if v.ub is None else v.ub for v in variables], dtype=float)
    x0 = np.array([0.0 if v.value is None else v.value for v in variables], dtype=float)
    x0 = np.clip(x0, lb, ub)

    a_rows: list[int] = []
    a_cols: list[int] = []
    a_vals: list[float] = []
    q_rows: list[int] = []
    q_i: list[int] = []
    q_j: list[int] = []
    q_v: list[float] = []
    cl: list[float] = []
    cu: list[float] = []
    con_keys: list[VarKey] = []
    for r, con in enumerate(model.component_data_objects(pyo.Constraint, active=True, descend_into=True)):
        repn = generate_standard_repn(con.body, quadratic=True, compute_values=True)
        if repn.nonlinear_expr is not None:
            raise ModelError(f"constraint {con.name} is not quadratic; powerdp compiles QCQPs only")
        for v, c in zip(repn.linear_vars, repn.linear_coefs):
            a_rows.append(r)
            a_cols.append(col[id(v)])
            a_vals.append(c)
        for (v1, v2), c in zip(repn.quadratic_vars, repn.quadratic_coefs):
            i, j = col[id(v1)], col[id(v2)]
            q_rows.append(r)
            q_i.append(max(i, j))
            q_j.append(min(i, j))
            q_v.append(c)
        const = float(repn.constant)
        lo, hi = con.lower, con.upper
        cl.append(-INF if lo is None else float(pyo.value(lo)) - const)
        cu.append(INF if hi is None else float(pyo.value(hi)) - const)
        con_keys.append(_key(con))
    m = len(con_keys)
    A = sp.csr_matrix((a_vals, (a_rows, a_cols)), shape=(m, n))
    A.sum_duplicates()

    objs = list(model.component_data_objects(pyo.Objective, active=True, descend_into=True))
    if len(objs) != 1:
        raise ModelError(f"model {model.name} has {len(objs)} active objectives; exactly one is needed")
    obj = objs[0]
    sign = 1.0 if obj.sense == pyo.minimize else -1.0
    objective = _quadratic_objective(obj.expr, col, n, sign, f"objective of {model.name}")

    maps: dict[str, LinearMap] = {}
    for name in expressions:
        comp = model.component(name)
        if comp is None:
            continue
        keys, rows, cols, vals, consts = [], [], [], [], []
        for r, idx in enumerate(comp):
            repn = generate_standard_repn(comp[idx].expr, quadratic=False, compute_values=True)
            if repn.nonlinear_expr is not None:
                raise ModelError(f"expression {name}[{idx}] is not linear")
            keys.append(idx)
            for v, c in zip(repn.linear_vars, repn.linear_coefs):
                rows.append(r)
                cols.append(col[id(v)])
                vals.append(c)
            consts.append(float(repn.constant))
        M = sp.csr_matrix((vals, (rows, cols)), shape=(len(keys), n))
        M.sum_duplicates()
        maps[name] = LinearMap(keys=keys, M=M, const=np.array(consts, dtype=float))

    _check_finite_model(model.name, con_keys, A, np.array(q_rows, dtype=np.int64), np.array(q_v, dtype=float), objective, cl, cu)
    return CompiledProblem(
        name=model.name,
        var_keys=var_keys,
        lb=lb,
        ub=ub,
        x0=x0,
        con_keys=con_keys,
        cl=np.array(cl, dtype=float),
        cu=np.array(cu, dtype=float),
        A=A,
        qrow=np.array(q_rows, dtype=np.int64),
        qi=np.array(q_i, dtype=np.int64),
        qj=np.array(q_j, dtype=np.int64),
        qv=np.array(q_v, dtype=float),
        objective=objective,
        expressions=maps,
        meta=dict(getattr(model, "_powerdp_meta", {})),
    )


def _quadratic_objective(expr, col: dict[int, int], n: int, sign: float, what: str) -> QuadraticObjective:
    repn = generate_standard_repn(expr, quadratic=True, compute_values=True)
    if repn.nonlinear_expr is not None:
        raise ModelError(f"{what} is not quadratic")
    c = np.zeros(n)
    for v, coef in zip(repn.linear_vars, repn.linear_coefs):
        c[col[id(v)]] += sign * coef
    qi, qj, qv = [], [], []
    for (v1, v2), coef in zip(repn.quadratic_vars, repn.quadratic_coefs):
        i, j = col[id(v1)], col[id(v2)]
        qi.append(max(i, j))
        qj.append(min(i, j))
        qv.append(sign * coef)
    return QuadraticObjective(
        c=c,
        const=sign * float(repn.constant),
        qi=np.array(qi, dtype=np.int64),
        qj=np.array(qj, dtype=np.int64),
        qv=np.array(qv, dtype=float),
    )
