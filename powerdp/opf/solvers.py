"""Solve a :class:`~powerdp.opf.compiled.CompiledProblem` with Ipopt through cyipopt.

The callbacks are vectorized numpy kernels with exact first and second
derivatives. An :class:`IpoptSolver` keeps one ``cyipopt.Problem`` for its
compiled problem and re-solves it with a new :class:`QuadraticObjective`
(only the objective's values change between solves; its sparsity pattern must
lie inside the Hessian pattern fixed at construction: the constraint
Hessians, the problem's own objective and the full diagonal).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..errors import ConfigError, ModelError
from .compiled import CompiledProblem, QuadraticObjective
from .local_solver import SolveResult

log = logging.getLogger(__name__)

__all__ = ["IpoptSolver", "SolveResult", "load_ipopt_profile", "ipopt_profiles"]

# Ipopt ApplicationReturnStatus codes
#: Ipopt's statuses as powerdp's (local_solver.OUTCOMES); the others are "failed"
OUTCOMES = {
    0: "solved",
    1: "solved_inaccurate",
    2: "infeasible",
    -1: "iteration_limit",
    -4: "time_limit",
    -5: "time_limit",
    3: "numerical_error",
    -3: "numerical_error",
    -13: "numerical_error",
}
STATUS_NAMES = {
    0: "Solve_Succeeded",
    1: "Solved_To_Acceptable_Level",
    2: "Infeasible_Problem_Detected",
    3: "Search_Direction_Becomes_Too_Small",
    4: "Diverging_Iterates",
    5: "User_Requested_Stop",
    6: "Feasible_Point_Found",
    -1: "Maximum_Iterations_Exceeded",
    -2: "Restoration_Failed",
    -3: "Error_In_Step_Computation",
    -4: "Maximum_CpuTime_Exceeded",
    -5: "Maximum_WallTime_Exceeded",
    -10: "Not_Enough_Degrees_Of_Freedom",
    -11: "Invalid_Problem_Definition",
    -12: "Invalid_Option",
    -13: "Invalid_Number_Detected",
    -100: "Unrecoverable_Exception",
    -101: "NonIpopt_Exception_Thrown",
    -102: "Insufficient_Memory",
    -199: "Internal_Error",
}


def ipopt_profiles() -> list[str]:
    """Names of the Ipopt option profiles shipped in ``solvers/``."""
    root = resources.files("powerdp.solvers")
    return sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".opt"))


def load_ipopt_profile(name_or_path: str | Path = "default") -> dict[str, Any]:
    """Read an Ipopt option profile: a bundled name (``default``, ``warm``) or a path to a ``.opt`` file."""
    path = Path(str(name_or_path))
    if not path.is_file():
        candidate = resources.files("powerdp.solvers") / f"{name_or_path}.opt"
        if not candidate.is_file():
            raise ConfigError(f"no Ipopt profile {name_or_path!r}; bundled profiles: {', '.join(ipopt_profiles())}")
        text = candidate.read_text()
        path = Path(str(candidate))
    else:
        from ..files.text import NotUTF8, read_utf8

        try:
            text = read_utf8(path)
        except NotUTF8 as exc:
            raise ConfigError(f"{path}: {exc}; an Ipopt option profile is expected") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    options: dict[str, Any] = {}
    for k, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ConfigError(f"{path}, line {k}: expected 'name value' (an Ipopt option and its value); is it an Ipopt profile?")
        name, value = parts
        options[name] = option_value(value)
    check_ipopt_options(options, str(path))
    return options


#: Ipopt options that make it write or read files, or load libraries: refused wherever options come from
#: (--ipopt-option, profiles, config and sweep files), so a run writes only into its --out directory
FILE_OPTIONS = ("output_file", "option_file_name", "hsllib", "pardisolib", "file_print_level", "file_append", "print_options_documentation")


def check_ipopt_options(options: dict[str, Any], where: str = "Ipopt options") -> None:
    """Refuse the options of :data:`FILE_OPTIONS` (names only in the message, never values)."""
    for name, value in options.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigError(f"{where}: Ipopt option {str(name)!r} must be a number or a string")
        if str(name).strip() in FILE_OPTIONS:
            raise ConfigError(
                f"{where}: Ipopt option {str(name).strip()!r} makes Ipopt write or read files outside the run's directory; "
                "powerdp refuses it (Ipopt's output: print_level, on the terminal)"
            )


def _bad_option(key: str, value: Any) -> ConfigError:
    return ConfigError(
        f"invalid Ipopt option {key} = {value!r}: not an Ipopt option, or a value of the wrong type "
        "(https://coin-or.github.io/Ipopt/OPTIONS.html)"
    )


@contextlib.contextmanager
def _ipopt_quiet():
    """Ipopt prints its complaint about an option on the C-level standard output; powerdp's one-line error says it."""
    try:
        sys.stdout.flush()
        fd = sys.stdout.fileno()
        saved = os.dup(fd)
    except (AttributeError, OSError, ValueError):  # no real stdout (a notebook, a captured stream)
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
        yield
    finally:
        _c_flush()  # C's buffered stdout (not a terminal) goes to /dev/null, not after the restore
        os.dup2(saved, fd)
        os.close(saved)
        os.close(devnull)


def _c_flush() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # pragma: no cover - no C library to flush
        pass


def option_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


class _Callbacks:
    """The cyipopt problem object: vectorized evaluation of a compiled QCQP."""

    def __init__(self, prob: CompiledProblem, pattern: QuadraticObjective | None = None):
        self.prob = prob
        n, m = prob.n, prob.m
        self.n, self.m = n, m
        # ---- Jacobian pattern: linear part ∪ quadratic parts
        A = prob.A.tocoo()
        jr = np.concatenate([A.row, prob.qrow, prob.qrow]).astype(np.int64)
        jc = np.concatenate([A.col, prob.qi, prob.qj]).astype(np.int64)
        jkey = jr * n + jc
        ukey, inv = np.unique(jkey, return_inverse=True)
        self.jac_rows, self.jac_cols = ukey // max(n, 1), ukey % max(n, 1)
        self.jac_nnz = len(ukey)
        na, nq = A.nnz, len(prob.qv)
        self.jac_base = np.bincount(inv[:na], A.data, minlength=self.jac_nnz)
        self.jpos_i = inv[na : na + nq]  # position of (row, qi): gets v * x[qj]
        self.jpos_j = inv[na + nq :]  # position of (row, qj): gets v * x[qi]
        # ---- Hessian pattern (lower triangle): constraints ∪ base objective ∪ diagonal
        obj = prob.objective
        pattern = obj if pattern is None else pattern
        diag = np.arange(n, dtype=np.int64)
        hr = np.concatenate([prob.qi, pattern.qi, diag])
        hc = np.concatenate([prob.qj, pattern.qj, diag])
        hkey = hr * n + hc
        self.hess_keys = np.unique(hkey)
        self.hess_rows, self.hess_cols = self.hess_keys // max(n, 1), self.hess_keys % max(n, 1)
        self.hess_nnz = len(self.hess_keys)
        self.hpos_con = np.searchsorted(self.hess_keys, prob.qi * n + prob.qj)
        self.hcon_vals = np.where(prob.qi == prob.qj, 2.0 * prob.qv, prob.qv)
        self.hpos_diag = np.searchsorted(self.hess_keys, diag * n + diag)
        self.callback_s = 0.0
        self.iterations = 0
        self.set_objective(pattern)

    def set_objective(self, obj: QuadraticObjective) -> None:
        n = self.n
        if obj.c.shape != (n,):
            raise ModelError(f"objective vector has shape {obj.c.shape}, expected ({n},)")
        keys = obj.qi * n + obj.qj
        pos = np.searchsorted(self.hess_keys, keys)
        if len(keys) and (np.any(pos >= self.hess_nnz) or np.any(self.hess_keys[np.minimum(pos, self.hess_nnz - 1)] != keys)):
            raise ModelError("objective Hessian has entries outside the compiled Hessian pattern")
        hobj = np.bincount(pos, np.where(obj.qi == obj.qj, 2.0 * obj.qv, obj.qv), minlength=self.hess_nnz)
        if obj.diag is not None:
            hobj = hobj + np.bincount(self.hpos_diag, obj.diag, minlength=self.hess_nnz)
        self.obj = obj
        self.hobj = hobj

    # ---- cyipopt interface
    def objective(self, x):
        t = time.perf_counter()
        val = self.obj.value(x)
        self.callback_s += time.perf_counter() - t
        return val

    def gradient(self, x):
        t = time.perf_counter()
        g = self.obj.gradient(x)
        self.callback_s += time.perf_counter() - t
        return g

    def constraints(self, x):
        t = time.perf_counter()
        p = self.prob
        g = p.A @ x + np.bincount(p.qrow, p.qv * x[p.qi] * x[p.qj], minlength=self.m)
        self.callback_s += time.perf_counter() - t
        return g

    def jacobianstructure(self):
        return self.jac_rows, self.jac_cols

    def jacobian(self, x):
        t = time.perf_counter()
        p = self.prob
        vals = (
            self.jac_base
            + np.bincount(self.jpos_i, p.qv * x[p.qj], minlength=self.jac_nnz)
            + np.bincount(self.jpos_j, p.qv * x[p.qi], minlength=self.jac_nnz)
        )
        self.callback_s += time.perf_counter() - t
        return vals

    def hessianstructure(self):
        return self.hess_rows, self.hess_cols

    def hessian(self, x, lagrange, obj_factor):
        t = time.perf_counter()
        vals = obj_factor * self.hobj
        if self.m:
            vals = vals + np.bincount(self.hpos_con, lagrange[self.prob.qrow] * self.hcon_vals, minlength=self.hess_nnz)
        self.callback_s += time.perf_counter() - t
        return vals

    def intermediate(self, alg_mod, iter_count, *args):
        self.iterations = iter_count
        return True


class IpoptSolver:
    """Ipopt (via cyipopt) on one compiled problem, re-solvable with new objectives.

    Parameters
    ----------
    problem: the compiled problem; its constraints and bounds are fixed for the solver's life.
    profile: an Ipopt option profile name or path (see :func:`load_ipopt_profile`).
    options: extra Ipopt options, overriding the profile.
    objective_pattern: the objective whose Hessian pattern the solver reserves (with the
        constraints' and the diagonal); default the problem's own objective. Pass a purely
        linear objective when every solve has a diagonal Hessian (linearized ADMM steps):
        Ipopt then factors a sparser KKT system.
    warm_options: options switched on by :meth:`enable_warm_start` (the ``warm`` profile in runs).

    One implementation of :class:`~powerdp.opf.local_solver.LocalSolver`.
    """

    name: ClassVar[str] = "ipopt"
    label: ClassVar[str] = "Ipopt"
    wants_reduced: ClassVar[bool] = True  # a smaller NLP is cheaper for Ipopt (docs/formulation.md)
    supports_warm_start: ClassVar[bool] = True

    def __init__(
        self,
        problem: CompiledProblem,
        profile: str | Path = "default",
        options: dict[str, Any] | None = None,
        objective_pattern: QuadraticObjective | None = None,
        warm_options: dict[str, Any] | None = None,
    ):
        self.problem = problem
        self._warm_options = dict(warm_options or {})
        self._default_objective = problem.objective if objective_pattern is None else objective_pattern
        self._cb = _Callbacks(problem, objective_pattern)
        self.bounds = (problem.lb, problem.ub, problem.cl, problem.cu)
        self._nlp = self._make_nlp()
        self.options: dict[str, Any] = {}
        self.set_options(load_ipopt_profile(profile))
        if options:
            self.set_options(options)

    @classmethod
    def from_config(
        cls, problem: CompiledProblem, objective_pattern: QuadraticObjective | None, config: Any, objective_scale: float | None = None
    ) -> IpoptSolver:
        """A zone's solver in a run: ``config.ipopt_profile`` and ``ipopt_options``; the warm profile
        (``ipopt_warm_profile``) once solves are warm-started. ``objective_scale`` becomes Ipopt's
        ``obj_scaling_factor`` unless the user's options set one."""
        options = {**({"obj_scaling_factor": objective_scale} if objective_scale else {}), **config.ipopt_options}
        warm = {**load_ipopt_profile(config.ipopt_warm_profile), **options} if config.warm_start else {}
        return cls(problem, profile=config.ipopt_profile, options=options, objective_pattern=objective_pattern, warm_options=warm)

    @classmethod
    def check_config(cls, config: Any) -> None:
        check_ipopt_options(dict(config.ipopt_options or {}), "ipopt_options")
        for field_name in ("ipopt_profile", "ipopt_warm_profile"):  # read (and checked) before anything is computed
            if getattr(config, field_name, None) is not None:
                load_ipopt_profile(getattr(config, field_name))

    def enable_warm_start(self) -> None:
        """Apply the warm-start options (from now on every solve is warm-started)."""
        if self._warm_options:
            self.set_options(self._warm_options)

    def _make_nlp(self):
        import cyipopt

        lb, ub, cl, cu = self.bounds
        nlp = cyipopt.Problem(n=self.problem.n, m=self.problem.m, problem_obj=self._cb, lb=lb, ub=ub, cl=cl, cu=cu)
        # Ipopt would read ./ipopt.opt from whatever directory powerdp runs in: options come only from powerdp
        nlp.add_option("option_file_name", "")
        return nlp

    def set_bounds(self, lb: np.ndarray, ub: np.ndarray, cl: np.ndarray, cu: np.ndarray) -> None:
        """Replace the variable bounds and the row bounds for the next solves (same structure).

        cyipopt fixes bounds when its problem object is made, so a change makes a new one from the
        same compiled arrays and callbacks (about a millisecond; nothing is recompiled) and re-applies
        the options.
        """
        new = tuple(np.asarray(b, dtype=float) for b in (lb, ub, cl, cu))
        shapes = (self.problem.n, self.problem.n, self.problem.m, self.problem.m)
        for b, k, name in zip(new, shapes, ("lb", "ub", "cl", "cu")):
            if b.shape != (k,):
                raise ModelError(f"bound {name} has shape {b.shape}, expected ({k},)")
        if all(np.array_equal(a, b) for a, b in zip(new, self.bounds)):
            return
        self.bounds = new
        self._nlp = self._make_nlp()
        options, self.options = self.options, {}
        self.set_options(options)

    def set_options(self, options: dict[str, Any]) -> None:
        check_ipopt_options(options)  # the last gate, for options given through the API
        for key, value in options.items():
            try:
                with _ipopt_quiet():
                    self._nlp.add_option(key, value)
            except (TypeError, ValueError):
                # "0" parses as an int, but a numeric Ipopt option wants a float
                if isinstance(value, int) and not isinstance(value, bool):
                    try:
                        with _ipopt_quiet():
                            self._nlp.add_option(key, float(value))
                        value = float(value)
                    except (TypeError, ValueError):
                        raise _bad_option(key, value) from None
                else:
                    raise _bad_option(key, value) from None
            self.options[key] = value

    def solve(
        self,
        objective: QuadraticObjective | None = None,
        x0: np.ndarray | None = None,
        mult_g: np.ndarray | None = None,
        mult_x_lower: np.ndarray | None = None,
        mult_x_upper: np.ndarray | None = None,
    ) -> SolveResult:
        """Solve with ``objective`` (default: the compiled problem's own) from ``x0``.

        Multipliers are passed to Ipopt for a warm start (used when the
        ``warm_start_init_point`` option is ``yes``). Never raises on a failed
        solve: inspect the result or call :meth:`SolveResult.check`.
        """
        cb = self._cb
        cb.set_objective(objective if objective is not None else self._default_objective)
        x0 = self.problem.x0 if x0 is None else np.asarray(x0, dtype=float)
        lb, ub = self.bounds[0], self.bounds[1]
        if lb is not self.problem.lb or ub is not self.problem.ub:
            x0 = np.clip(x0, lb, ub)  # a moved box may exclude the warm-start point
        cb.callback_s = 0.0
        cb.iterations = 0
        t = time.perf_counter()
        kwargs = {}
        if mult_g is not None:
            kwargs["lagrange"] = mult_g
        if mult_x_lower is not None:
            kwargs["zl"] = mult_x_lower
        if mult_x_upper is not None:
            kwargs["zu"] = mult_x_upper
        gc_enabled = gc.isenabled()
        gc.disable()  # callbacks create no reference cycles; a collection mid-solve only costs time
        try:
            x, info = self._nlp.solve(x0, **kwargs)
        finally:
            if gc_enabled:
                gc.enable()
        wall = time.perf_counter() - t
        msg = info["status_msg"]
        if isinstance(msg, bytes):
            msg = msg.decode(errors="replace")
        status = int(info["status"])
        return SolveResult(
            x=np.asarray(x, dtype=float),
            objective=float(info["obj_val"]),
            status=status,
            message=str(msg),
            iterations=int(cb.iterations),
            wall_s=wall,
            callback_s=cb.callback_s,
            mult_g=np.asarray(info["mult_g"], dtype=float),
            mult_x_lower=np.asarray(info["mult_x_L"], dtype=float),
            mult_x_upper=np.asarray(info["mult_x_U"], dtype=float),
            status_name=STATUS_NAMES.get(status, f"status {status}"),
            outcome=OUTCOMES.get(status, "failed"),
            solver=self.label,
        )
