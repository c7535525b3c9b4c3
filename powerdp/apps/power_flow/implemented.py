"""The implemented dispatch: what a zone applies at the end of a run (docs/privacy.md, "The implemented dispatch").

A private run agrees on boundary values that are releases: noisy. The zone's own balance in the run follows loads
that are not its real ones (input perturbation's d̃, objective perturbation's noisy gradient), so its released
dispatch sheds or over-generates against its true loads. What the zone applies is computed inside the zone, from what
the run agreed and its own true data: it re-solves its own problem with its true loads, holding the active power it
injects into each of its tie-lines at the agreed value, and everything else (its generators, its voltages and
reactive powers, its interior flows) free; shedding stays the last resort (the penalty ω of ``cost+shedding``).

* **What is held**: at each tie-line end on one of the zone's own buses, the line's active power at that end
  (``pf`` at its from end, ``pt`` at its to end; an HVDC line's ``p_dc_fr``/``p_dc_to``), at the agreed value: the
  mean of the zones' last releases (the coordinator's next consensus point, post-processing of the releases; the
  coordinator sends it as one more consensus message). Holding a zone's own-end flows only, not the far end's or
  the boundary voltages: measured on case118 at ε = 0.1, holding every boundary W-variable cost 1–3 % and shed up to
  11 MW (the relaxation's losses absorb a wrong boundary), own-end active powers 0.004–0.4 %, nothing shed
  (docs/results/utility.md).
* **How**: the zone's compiled problem (the one its ADMM steps solve, with the true loads in ``f_p``) with one
  equality row per held flow, solved by Clarabel; where Clarabel fails on it (case13659pegase: 6 of 16 zones, a
  NumericalError on the problem with its flows as variables), on the smaller problem its rounds solve, the flows
  eliminated (z = P r: the same minimiser). Should the held values be infeasible together for the zone (they
  come from two zones' releases), or keepable only by shedding (more than :data:`SHED_BEFORE_SOFT_PU`), the rows
  become a penalty κ‖a·z − v‖² (κ = :data:`SOFT_HOLD_WEIGHT` × ω, below the shedding weight: a zone deviates from
  the schedule before it sheds; kept when it sheds less), and the result says so (``held``).
* **Privacy**: the agreed values are a function of the releases; the zone's solve uses its own data and its result
  crosses to no one (a deployment's zone writes its set-points into its own private folder). What the coordinator
  can *meter* once the set-points are applied is docs/privacy.md's "What the boundary shows".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ...grid.network import Network
from ...opf.compiled import CompiledProblem, QuadraticObjective
from ...opf.formulation import branch_flow_coefficients
from ...opf.local_solver import SUCCESS_OUTCOMES
from ...opf.reduction import Reduction

__all__ = ["HeldFlows", "held_flows", "solve_implemented", "ImplementedPoint", "ZoneImplemented", "failed_zones", "with_loads", "SOFT_HOLD_WEIGHT", "SHED_BEFORE_SOFT_PU",
           "HOLDS"]

#: the soft hold's penalty κ as a fraction of the shedding weight ω (per p.u.² of deviation from the schedule)
SOFT_HOLD_WEIGHT = 0.01
#: the shedding (p.u., Σ over the zone's buses) beyond which an exact hold is tried soft as well: above the penalty's own
#: rounding (case118's centralized dispatch sheds ~3e-4 p.u. a zone), below what an operator would call shedding
SHED_BEFORE_SOFT_PU = 1e-3
#: what a zone may hold (:func:`held_flows`): its own end of each tie-line's active power (the product's), both ends,
#: or every shared variable (the boundary's W and flows; benchmarks/implemented_holds.py measures why not)
HOLDS = ("own-end", "both-ends", "shared")


@dataclass(frozen=True)
class HeldFlows:
    """The zone's held tie-line flows: ``A z = A_w w`` (one row per held flow; ``A`` over the zone's variables,
    ``A_w`` over its shared values, in the order of its shared keys)."""

    keys: tuple[tuple[str, int], ...]  # (kind, branch or HVDC line) of each held flow: pf / pt / p_dc_fr / p_dc_to
    A: sp.csr_matrix
    A_w: sp.csr_matrix

    @property
    def n(self) -> int:
        return len(self.keys)

    def values(self, agreed: np.ndarray) -> np.ndarray:
        """The held flows' values (p.u.) from the agreed shared values."""
        return np.asarray(self.A_w @ np.asarray(agreed, dtype=float), dtype=float)


def held_flows(net: Network, problem: CompiledProblem, own_buses: np.ndarray, shared_keys: Sequence[Hashable],
               hold: str = "own-end") -> HeldFlows:
    """The active power at each tie-line end on one of the zone's own buses (module docstring), as rows over the
    zone's variables and over its shared values: the flow variable itself when flows are variables, else its linear
    expression in (w, wr, wi) (docs/formulation.md). ``hold`` (:data:`HOLDS`): ``"both-ends"`` holds both ends of
    each tie-line, ``"shared"`` every shared variable as it is (for the comparison of benchmarks/implemented_holds.py)."""
    if hold not in HOLDS:
        raise ValueError(f"hold = {hold!r}: choose one of {', '.join(HOLDS)}")
    own = np.zeros(net.n_bus, dtype=bool)
    own[np.asarray(own_buses, dtype=np.int64)] = True
    shared = {k: i for i, k in enumerate(shared_keys)}
    col = {k: j for j, k in enumerate(problem.var_keys)}
    if hold == "shared":
        keys = [k for k in shared_keys if k in col]
        rows = [([col[k]], [1.0]) for k in keys]
        rows_w = [([shared[k]], [1.0]) for k in keys]
        return HeldFlows(keys=tuple(keys), A=_matrix(rows, problem.n), A_w=_matrix(rows_w, len(shared)))
    tie = own[net.f_bus] != own[net.t_bus]
    cf = branch_flow_coefficients(net)
    keys: list[tuple[str, int]] = []
    rows: list[tuple[list[int], list[float]]] = []
    rows_w: list[tuple[list[int], list[float]]] = []
    ends = [("pf" if own[net.f_bus[br]] else "pt", int(br)) for br in np.flatnonzero(tie)]
    if hold == "both-ends":
        ends = [(kind, br) for br in np.flatnonzero(tie) for kind in ("pf", "pt")]
    for kind, br in ends:
        key = (kind, int(br))
        if key in col and key in shared:
            keys.append(key)
            rows.append(([col[key]], [1.0]))
            rows_w.append(([shared[key]], [1.0]))
            continue
        end = int(net.f_bus[br] if kind == "pf" else net.t_bus[br])
        pair = int(net.branch_pair[br])
        terms = [(("w", end), cf[kind + "_w"][br]), (("wr", pair), cf[kind + "_wr"][br]),
                 (("wi", pair), cf[kind + "_wi"][br] * net.branch_pair_sign[br])]
        if all(k in col and k in shared for k, _ in terms):
            keys.append(key)
            rows.append(([col[k] for k, _ in terms], [float(a) for _, a in terms]))
            rows_w.append(([shared[k] for k, _ in terms], [float(a) for _, a in terms]))
    dc = net.dcline
    for line in range(dc.n):
        f, t = int(dc.f_bus[line]), int(dc.t_bus[line])
        if own[f] == own[t]:
            continue
        kinds = ("p_dc_fr", "p_dc_to") if hold == "both-ends" else ("p_dc_fr" if own[f] else "p_dc_to",)
        for kind in kinds:
            key = (kind, int(line))
            if key in col and key in shared:
                keys.append(key)
                rows.append(([col[key]], [1.0]))
                rows_w.append(([shared[key]], [1.0]))
    return HeldFlows(keys=tuple(keys), A=_matrix(rows, problem.n), A_w=_matrix(rows_w, len(shared)))


def _matrix(rows: list[tuple[list[int], list[float]]], n: int) -> sp.csr_matrix:
    r = np.repeat(np.arange(len(rows)), [len(c) for c, _ in rows]).astype(np.int64)
    c = np.array([j for cols, _ in rows for j in cols], dtype=np.int64)
    v = np.array([a for _, coefs in rows for a in coefs], dtype=float)
    return sp.csr_matrix((v, (r, c)), shape=(len(rows), n))


@dataclass(frozen=True)
class ImplementedPoint:
    """A zone's implemented point: its variables ``z`` (the zone's own order), whether the held flows were met
    exactly (``held``: "exact", or "soft" when they had to become a penalty), the solver's outcome."""

    z: np.ndarray
    held: str
    outcome: str
    solver_s: float


def solve_implemented(problem: CompiledProblem, objective: QuadraticObjective, held: HeldFlows, agreed: np.ndarray,
                      shedding_weight: float | None, objective_scale: float | None = None,
                      reduction: Reduction | None = None) -> ImplementedPoint:
    """min ``objective`` (the zone's f_p with its true loads) over W_p with the held flows at their agreed values
    (module docstring); Clarabel on the zone's full problem, and, where Clarabel fails on it, on the smaller problem
    the zone's rounds solve (``reduction``: z = P r, the flows eliminated; the same minimiser). Never raises for a
    failed solve: a hold that cannot be met becomes a penalty, and a failed soft solve is reported (``outcome``)."""
    if objective_scale is None and shedding_weight:  # the zone's own scaling of a weighted objective (zone_terms.objective_scaling)
        objective_scale = min(1.0, 1e4 / (2.0 * float(shedding_weight)))
    values = held.values(agreed)
    forms = [(problem, objective, held.A, None)]
    if reduction is not None and reduction.reduced.n < problem.n:
        forms.append((reduction.reduced, reduction.pull_objective(objective), (held.A @ reduction.P).tocsr(), reduction))
    res, spent = _solve_in_forms(forms, values, None, objective_scale)
    exact_ok = res.outcome in SUCCESS_OUTCOMES
    if held.n == 0 or (exact_ok and _shed_pu(problem, res.x) <= SHED_BEFORE_SOFT_PU):
        return ImplementedPoint(z=res.x, held="exact", outcome=res.outcome, solver_s=spent)
    # the schedule cannot be kept without shedding (or at all): the holds become a penalty below the shedding weight,
    # so the zone leaves the schedule before it sheds; kept when it sheds less than the exact hold
    kappa = SOFT_HOLD_WEIGHT * float(shedding_weight or 1.0)
    res2, spent2 = _solve_in_forms(forms, values, kappa, objective_scale)
    if exact_ok and not (res2.outcome in SUCCESS_OUTCOMES and _shed_pu(problem, res2.x) < _shed_pu(problem, res.x)):
        return ImplementedPoint(z=res.x, held="exact", outcome=res.outcome, solver_s=spent + spent2)
    return ImplementedPoint(z=res2.x, held="soft", outcome=res2.outcome, solver_s=spent + spent2)


def _solve_in_forms(forms, values: np.ndarray, kappa: float | None, objective_scale: float | None):
    """The held problem (exact rows, or with ``kappa`` the penalty κ‖A z − values‖²) solved in the first of ``forms``
    (problem, objective, A, reduction or None) where Clarabel succeeds, else the last one's failure; the solution in
    the zone's own variables z, and the solver seconds of every attempt."""
    from ...opf.conic import LOCAL_SETTINGS, ClarabelSolver, column_scaling

    spent = 0.0
    for prob, obj, A, reduction in forms:
        if kappa is None:
            prob = _with_rows(prob, A, values)
        else:
            obj = _plus_penalty(obj, A, values, kappa)
        pattern = None if kappa is None and reduction is None else obj  # the full exact form: its own objective's
        solver = ClarabelSolver(prob, objective_pattern=pattern, options=LOCAL_SETTINGS,
                                objective_scale=objective_scale, column_scale=column_scaling(prob, obj))
        res = solver.solve(obj)
        spent += res.solver_s
        if reduction is not None:
            res = dataclasses.replace(res, x=reduction.lift(res.x))
        if res.outcome in SUCCESS_OUTCOMES:
            break
    return res, spent


def _shed_pu(problem: CompiledProblem, z: np.ndarray) -> float:
    """The active power the point sheds (Σ|yp + pd| over the zone's own buses, p.u.; 0 without shedding variables)."""
    sp_expr = problem.expressions.get("sp")
    return float(np.sum(np.abs(sp_expr(z)))) if sp_expr is not None else 0.0


def _with_rows(problem: CompiledProblem, A: sp.csr_matrix, values: np.ndarray) -> CompiledProblem:
    """``problem`` with the equality rows ``A z = values`` appended (the quadratic rows keep their indices)."""
    if A.shape[0] == 0:
        return problem
    keys = [("held", k) for k in range(A.shape[0])]
    return dataclasses.replace(
        problem, A=sp.vstack([problem.A, A]).tocsr(), cl=np.concatenate([problem.cl, values]),
        cu=np.concatenate([problem.cu, values]), con_keys=list(problem.con_keys) + keys,
    )


def _plus_penalty(objective: QuadraticObjective, A: sp.csr_matrix, values: np.ndarray, kappa: float) -> QuadraticObjective:
    """``objective`` + κ‖A z − values‖² (its quadratic terms as lower-triangle triplets)."""
    H = (A.T @ A).tocoo()
    low = H.row >= H.col
    qi, qj = H.row[low].astype(np.int64), H.col[low].astype(np.int64)
    qv = kappa * np.where(qi == qj, H.data[low], 2.0 * H.data[low])
    c = objective.c - 2.0 * kappa * np.asarray(A.T @ values).ravel()
    return dataclasses.replace(
        objective, c=c, const=objective.const + kappa * float(values @ values),
        qi=np.concatenate([objective.qi, qi]), qj=np.concatenate([objective.qj, qj]), qv=np.concatenate([objective.qv, qv]),
    )


@dataclass(frozen=True)
class ZoneImplemented:
    """A zone's implemented dispatch as the simulation's evaluation reads it (never sent in a deployment)."""

    zone: int
    solution: dict[Hashable, float]  # the zone's implemented point, by variable key
    shed_mw: dict[int, float]  # per own bus, the active power not served (yp + pd, MW; negative: surplus)
    shedding_mw: float  # Σ |yp + pd| over own buses, MW
    objective: float  # f_p at the implemented point, with the true loads
    cost: float  # generation cost of the zone's generators ($/h; NaN without costs)
    held: str  # "exact" or "soft" (powerdp.apps.power_flow.implemented)
    outcome: str
    solver_s: float
    held_mw: dict[tuple[str, int], float] = dataclasses.field(default_factory=dict)  # the held tie-line flows, MW


def failed_zones(zones: dict[int, ZoneImplemented]) -> list[int]:
    """The zones whose implemented solve did not succeed (their point is the solver's last iterate, not set-points),
    in order."""
    return [z for z, imp in sorted(zones.items()) if imp.outcome not in SUCCESS_OUTCOMES]


def with_loads(f: QuadraticObjective, y_own: tuple[np.ndarray, np.ndarray], true_loads: tuple[np.ndarray, np.ndarray],
               pd: np.ndarray, qd: np.ndarray, omega: float, what: str) -> QuadraticObjective:
    """The zone's f_p (``f``, its balance variables ``y_own`` = (yp, yq) columns in own-bus order, its loads
    ``true_loads``) with the loads ``pd``, ``qd`` (p.u.) instead: the loads enter f_p only as the linear term 2ω·d on y
    (and a constant), which is written, not shifted (a shift would carry the true loads' low bits); the constant is
    dropped (it moves no minimiser). The rounds of the totals perturbation solve with it."""
    from ...errors import ConfigError

    yp, yq = y_own
    w2 = 2.0 * omega
    c = f.c.copy()
    held = np.concatenate([c[yp], c[yq]])
    expected = w2 * np.concatenate([true_loads[0], true_loads[1]])
    if not np.allclose(held, expected, rtol=1e-9, atol=1e-9 * max(w2, 1.0)):
        raise ConfigError(f"{what} holds more than 2ω·d on its balance variables; the totals perturbation cannot "
                          "replace its loads")
    c[yp] = w2 * np.asarray(pd, dtype=float)
    c[yq] = w2 * np.asarray(qd, dtype=float)
    return dataclasses.replace(f, c=c, const=0.0)
