"""``powerdp learn --algorithm noisy-admm``: 001's Algorithm 1 as a learning run (docs/learning.md, docs/amplification.md).

Why its own runner: :func:`~powerdp.apps.learning.runner.run_federated` is a per-round consensus of P clients,
each releasing its local model every round. 001's Algorithm 1 is a different protocol: iteration t uses one
gradient of ONE user's function f_t, adds N(0, σ²I) to the primal x, and only the final (x̃, λ) is released.
This module is the small runner that does that: the coordinator's loop (:func:`iterate`; the maths in
:mod:`powerdp.apps.learning.noisy_admm`) with the users on P clients on the engine's sharing hosts
(:mod:`powerdp.apps.learning.noisy_hosts`: serial, worker processes or MPI ranks; per iteration only the noisy
x̃_t and what the coordinator computes from it cross), and it fills the learning summary's keys; the ``learn``
command dispatches here through :data:`powerdp.apps.learning.config.RUNNERS`.

Model: the elastic net (1/N)Σ(⟨a_i, x⟩ − b_i)² + c₁‖x‖₁ + c₂‖x‖² of 001 §10 (a regression: every user is one
sample (a_i, b_i)). Data: ``elastic-net`` (SPEC §11's synthetic recipe, public seed ``split_seed``) or a
user's .csv/.npz with a numeric target, features scaled with public bounds and rows clipped to ‖a‖₂ ≤ R.

Ledger: every one of the R runs is published (``coordinator_view/model.npz`` holds all R models), so the
headline ``epsilon_total`` is the dataset-level guarantee over the R published runs: every user, no
amplification, zCDP composed over every use of the user's function in every run,
ρ = max_i (Σ_r u_{r,i})·η²Δ²/(2σ²) (u_{r,i}: the uses of user i in run r; docs/amplification.md,
"What a run publishes"). Beside it, labelled ``first_user``: 001's amplified figure for the user of
iteration 1 of one run, in that run alone (:func:`~powerdp.privacy.amplification.first_user_guarantee`:
Cor. 7.3 / Cor. 6.2 when their assumptions hold and that user's function is used once; otherwise the
plain composition over its m uses, the refused assumptions named) — a figure for that one user, not a
guarantee for the dataset.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ConfigError
from ...privacy.amplification import AmplifiedGuarantee, first_user_guarantee, one_step_zcdp, step_midpoint, zcdp_to_dp
from .config import check_placement
from .data import BUNDLED, clip_rows
from .noisy_admm import ElasticNet, dual_step, elastic_net_data, uniform_order
from .noisy_hosts import IterateMessage, user_blocks, user_specs

__all__ = ["NoisyADMMConfig", "NoisyADMMRun", "run_noisy_admm", "load_regression", "auto_eta", "user_order",
           "ledger_entry", "ORDERS", "SYNTHETIC", "COORDINATOR_KEYS"]

SYNTHETIC = "elastic-net"  # 001 §10's data (SPEC §11), generated from the public seed split_seed
ORDERS = ("permutation", "uniform")
#: summary keys of the coordinator's view (an allow-list): the public settings, what is released and the ledger.
#: The coordinator records nothing per iteration, so it has no history and no timing; every other key (the objective,
#: the test loss, the centralized reference, the test set's size, the preprocessing, the run's times) is evaluation
COORDINATOR_KEYS = (
    "application", "dataset", "algorithm", "engine_algorithm", "model", "clients", "backend", "train_samples", "features",
    "rounds", "iterations", "runs", "order", "eta", "eta_rule", "beta", "sigma", "l1", "l2", "ridge_in_f", "stopped",
    "released", "private", "noise_source", "seed", "adjacency", "gradient_sensitivity", "epsilon_total",
    "delta_total", "zcdp_total", "ledger_source", "amplified", "refused_assumptions", "ledger", "every_user", "first_user",
)

RELEASE_NOTE = ("only the final (x̃, λ) is released (001's Algorithm 1); per iteration only the noisy x̃_t and what the "
                "coordinator computes from it cross between the coordinator and that iteration's client")


@dataclass
class NoisyADMMConfig:
    """A run of 001's Algorithm 1 on an elastic net (docs/learning.md, "noisy-admm")."""

    dataset: str = SYNTHETIC  # elastic-net, or a .csv (numeric label column) / .npz (X, y) regression set
    label: str = "label"
    test_fraction: float = 0.2  # of a user's file; elastic-net draws a separate test set of this share
    split_seed: int = 0  # public: the synthetic data, the test split and the user order
    feature_range: tuple[float, float] | None = None  # public bounds of a user's features
    clip: float = 1.0  # R: rows of a user's file clipped to ‖a‖₂ ≤ R (elastic-net rows have ‖a‖ = √mu already)
    mu: float = 0.25  # elastic-net: ‖a_i‖² (001 Table 1's μ; row 1 by default)
    users: int = 1000  # elastic-net: N
    dim: int = 64  # elastic-net: n
    l1: float = 0.01  # c₁
    l2: float = 0.1  # c₂
    ridge_in_f: float = 0.0  # r: part of the ridge moved into every f_i (r > 0 makes Assumption 7.1 hold)
    beta: float = 0.9  # the ADMM penalty β
    sigma: float = 0.1  # standard deviation of the noise on x
    eta: str | float = "auto"  # auto: eq. (23)'s midpoint (auto_eta)
    rounds: int = 1000  # iterations K (one user's gradient each)
    runs: int = 1  # independent runs, batched
    order: str = "permutation"  # permutation: each user at most once per pass (001's model); uniform: 001 §10
    target_shift: float = 1.0  # neighbours: one user's target b moves by at most this (features public)
    delta: float = 1e-6  # δ of the (ε, δ) conversion
    seed: int | None = None  # None: secret noise from OS entropy; an integer: a reproducible (not secret) run
    clients: int = 10  # P: the users' samples are dealt to P clients in contiguous public blocks (noisy_hosts.py)
    backend: str = "serial"  # where the clients run: serial, process (worker processes) or mpi (ranks)
    workers: int | None = None  # process backend: worker processes (default: one per core, at most one per client)
    rank_timeout: float = 60.0  # mpi backend: a rank silent this long (no heartbeat) is reported lost
    extra: dict[str, Any] = field(default_factory=dict)

    algorithm = "noisy-admm"  # the registry name (a class attribute)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> NoisyADMMConfig:
        def bad(name: str, msg: str) -> ConfigError:
            return ConfigError.for_setting(name, getattr(self, name), msg)

        for name in ("clip", "mu", "beta", "target_shift"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise bad(name, "must be a positive number")
        for name in ("l1", "l2", "ridge_in_f", "sigma"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise bad(name, "must be a non-negative number")
        if self.ridge_in_f > self.l2:
            raise bad("ridge_in_f", f"at most the ridge c₂ = {self.l2:g} can move into f")
        for name, low in (("rounds", 1), ("runs", 1), ("users", 2), ("dim", 1), ("clients", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < low:
                raise bad(name, f"must be an integer ≥ {low}")
            setattr(self, name, int(v))
        if self.dataset == SYNTHETIC and self.clients > self.users:
            raise bad("clients", f"more clients than the {self.users} users")
        check_placement(self, bad)
        if self.order not in ORDERS:
            raise bad("order", f"choose one of {', '.join(ORDERS)}")
        if not 0 < self.test_fraction < 1:
            raise bad("test_fraction", "must lie in (0, 1)")
        if not 0 < self.delta < 1:
            raise bad("delta", "must lie in (0, 1)")
        if self.eta != "auto":
            try:
                self.eta = float(self.eta)
            except (TypeError, ValueError):
                raise bad("eta", "auto (eq. (23)'s midpoint) or a positive number") from None
            if not (math.isfinite(self.eta) and self.eta > 0):
                raise bad("eta", "a constant step must be positive")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise bad("seed", "must be a non-negative integer, or unset for secret noise")
        if self.dataset in BUNDLED:
            raise bad("dataset", f"noisy-admm fits an elastic-net regression (a real target per user); {self.dataset} is a "
                      f"classification set: use {SYNTHETIC}, or a .csv/.npz with a numeric target")
        return self

    @property
    def noise_source(self) -> str:
        return "secret" if self.seed is None else "seeded"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["feature_range"] is not None:
            d["feature_range"] = list(d["feature_range"])
        return {"algorithm": self.algorithm, **d}


@dataclass
class NoisyADMMRun:
    """A run: its configuration, problem, release (final x̃, λ of every run), history and summary."""

    config: NoisyADMMConfig
    problem: ElasticNet
    x: np.ndarray  # (runs, n): released
    lam: np.ndarray  # (runs, n): released
    history: pd.DataFrame
    ledger: AmplifiedGuarantee
    summary: dict[str, Any]

    def views(self) -> dict[str, dict[str, Any]]:
        """The summary split into the coordinator's view and the simulation's evaluation (:data:`COORDINATOR_KEYS`)."""
        from ...runs.views import split_views

        return split_views(self.summary, COORDINATOR_KEYS)

    def save(self, out: str | Path) -> None:
        """The run's two views apart (module docstring): the release and the ledger in ``coordinator_view/``,
        the per-iteration objective and the final figures in ``simulation_evaluation/``."""
        import json

        from ...files.atomic import atomic_to_csv, atomic_write_text
        from ...files.jsonable import jsonable
        from ...runs.views import COORDINATOR_VIEW, EVALUATION_VIEW, save_summary_views

        out = Path(out)
        atomic_write_text(out / "config.json", json.dumps(jsonable(self.config.to_dict()), indent=2) + "\n")
        for view in (COORDINATOR_VIEW, EVALUATION_VIEW):
            (out / view).mkdir(parents=True, exist_ok=True)
        np.savez(out / COORDINATOR_VIEW / "model.npz", x=self.x, lam=self.lam)  # the release
        atomic_to_csv(self.history, out / EVALUATION_VIEW / "history.csv", index=False)  # the coordinator records no history
        s = self.summary  # the headline (every user, over the published runs), the first user's figure beside it
        privacy = {"epsilon": s["epsilon_total"], "zcdp": s["zcdp_total"], "delta": s["delta_total"],
                   "scope": s["ledger_source"], "first_user": self.ledger.to_dict()}
        save_summary_views(out, s, COORDINATOR_KEYS, privacy=privacy)
        if s["private"]:
            self.save_receipt(out)

    def save_receipt(self, out: str | Path) -> Path:
        """``coordinator_view/privacy_receipt.json``: the headline's unit is every user, whose releases are the Gaussian
        steps of its most-used function (m of them, each of L2 sensitivity ηΔ, noise σ on every entry of x), composed
        by zCDP (docs/privacy.md, "The privacy receipt")."""
        from ...privacy import GaussianMechanism
        from ...runs.receipt import write_receipt

        c, s = self.config, self.summary
        step = float(s["eta"]) * float(s["gradient_sensitivity"])
        mech = GaussianMechanism.from_noise_multiplier(step, c.sigma / step, c.delta, sigma=c.sigma)
        mech.entries = int(self.problem.dim)  # every release is the whole x̃ of one run
        unit = {"unit": "user", "id": 0, "ledger": {"epsilon": s["epsilon_total"], "delta": c.delta, "source": "zcdp",
                                                    "steps": int(s["every_user"]["uses"])},
                "releases": [{**mech.receipt(), "count": int(s["every_user"]["uses"])}], "recharged_steps": 0,
                "scope": "every user: the most-used user's Gaussian steps over the published runs (no amplification)"}
        return write_receipt(out, "noisy-admm", run={
            "algorithm": c.algorithm, "noise_source": c.noise_source, "private": True, "runs": c.runs, "rounds": c.rounds,
            "sigma": c.sigma, "eta": s["eta"], "target_delta": c.delta}, relation={"name": "target", "text": s["adjacency"]},
            units=[unit])


# ------------------------------------------------------------------ data


def load_regression(config: NoisyADMMConfig) -> tuple[ElasticNet, tuple[np.ndarray, np.ndarray], dict[str, Any]]:
    """The training problem, the test set (A, b) and the preprocessing note."""
    c = config
    if c.dataset == SYNTHETIC:
        prob = elastic_net_data(c.mu, n=c.dim, users=c.users, c1=c.l1, c2=c.l2, seed=c.split_seed, ridge_in_f=c.ridge_in_f)
        n_test = max(1, round(c.users * c.test_fraction / (1.0 - c.test_fraction)))
        # same recipe (same x′), other public draws
        test = elastic_net_data(c.mu, n=c.dim, users=n_test, c1=c.l1, c2=c.l2, seed=c.split_seed + 1_000_003)
        pre = {"recipe": f"001 §10 / SPEC §11: n = {c.dim}, N = {c.users}, ‖a_i‖² = μ = {c.mu:g}, σ_b = 0.01, seed {c.split_seed}",
               "R2": math.sqrt(c.mu)}
        return prob, (test.features, test.targets), pre
    from sklearn.model_selection import train_test_split

    from .data import _read_csv, _read_npz

    path = Path(c.dataset)
    if not path.is_file():
        raise ConfigError(f"data set {c.dataset!r}: neither {SYNTHETIC} nor an existing .csv/.npz file")
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".npz"):
        raise ConfigError(f"{path}: unknown data format {path.suffix!r}; give a .csv (header row, label column) or an .npz (X, y)")
    X, y = _read_csv(path, c.label)[:2] if suffix == ".csv" else _read_npz(path)
    try:
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{path}: the target {c.label!r} must be numeric for an elastic-net regression") from None
    if not np.all(np.isfinite(y)):
        raise ConfigError(f"{path}: the target has non-finite values")
    if c.feature_range is not None:
        lo, hi = c.feature_range
        X = np.clip((X - lo) / (hi - lo), 0.0, 1.0)
    X = clip_rows(X, c.clip)
    try:
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=c.test_fraction, random_state=c.split_seed)
    except ValueError as exc:
        raise ConfigError(f"data set {c.dataset!r}: cannot split off a test set ({exc})") from None
    prob = ElasticNet(np.ascontiguousarray(X_tr), y_tr, c.l1, c.l2, c.ridge_in_f)
    scaling = (f"(x - {c.feature_range[0]:g}) / {c.feature_range[1] - c.feature_range[0]:g}, clipped to [0, 1] (public bounds)"
               if c.feature_range is not None else "none (no public bounds given)")
    return prob, (X_te, y_te), {"feature_scaling": scaling, "row_clip_l2": c.clip, "R2": c.clip}


# ------------------------------------------------------------------ step, order, ledger


def auto_eta(problem: ElasticNet, beta: float) -> tuple[float, str]:
    """η of eq. (23)'s midpoint (001 §10) and how it was taken.

    With r > 0 (Assumption 7.1 holds: μ = 2r, μ_g = 2(c₂ − r)) the problem's own constants. With r = 0 the
    f_i are rank-one, not strongly convex; 001 §10 then sets μ_f = ν, whose midpoint lies below
    2/(ν+μ_f) = 1/ν, so Cor. 6.2's η ≤ 1/ν holds (docs/amplification.md, "Findings").
    """
    nu, mu, mu_g = problem.smoothness(), problem.strong_convexity(), problem.strong_convexity_g()
    if not mu_g > 0:
        raise ConfigError("eta = 'auto': eq. (23) needs g strongly convex (μ_g = 2(c₂ − r) > 0); give --eta, or lower --ridge-in-f")
    if mu > 0:
        return step_midpoint(nu, mu, mu_g, beta), f"midpoint of eq. (23) at ν = {nu:.4g}, μ = {mu:.4g}, μ_g = {mu_g:.4g}"
    return step_midpoint(nu, nu, mu_g, beta), f"midpoint of eq. (23) with μ_f = ν = {nu:.4g} as 001 §10 (f_i not strongly convex)"


def user_order(users: int, runs: int, iterations: int, kind: str, seed: int) -> np.ndarray:
    """Public user sequence (runs, K): ``permutation`` deals a fresh random permutation per pass of N users
    (each user at most once while K ≤ N: 001's model); ``uniform`` draws f_t uniformly (001 §10)."""
    rng = np.random.default_rng([seed, 1])
    if kind == "uniform":
        return uniform_order(users, runs, iterations, rng)
    passes = -(-iterations // users)
    return np.concatenate([rng.permuted(np.tile(np.arange(users), (runs, 1)), axis=1) for _ in range(passes)], axis=1)[:, :iterations]


def ledger_entry(problem: ElasticNet, order: np.ndarray, *, eta: float, beta: float, sigma: float, iterations: int,
                 target_shift: float, delta: float) -> tuple[AmplifiedGuarantee, dict[str, Any]]:
    """The first user's amplified entry (the user of iteration 1, one run) and the every-user bound over all runs.

    The amplified bound of 001 is for a function used once; if the user of iteration 1 is used again in some
    run (m > 1 uses), it is refused (assumption ``neighbouring``: one use) and the entry is the plain zCDP
    composition m·η²Δ²/(2σ²) of its m Gaussian steps. Every user, over the R runs of ``order`` (all
    published): m·η²Δ²/(2σ²), m = max_i Σ_r u_{r,i} the most uses of any one user summed over the runs (zCDP
    composes additively over independent runs on the same data; no amplification: the last user's step
    reaches the release after one step). This is the dataset-level guarantee, the run's headline.
    """
    dgrad = problem.gradient_sensitivity(target_shift)
    local = one_step_zcdp(eta, dgrad, sigma)
    first = order[:, :iterations][:, :1]
    uses = int(np.max(np.sum(order[:, :iterations] == first, axis=1)))
    g = first_user_guarantee(iterations=iterations, eta=eta, beta=beta, delta_grad=dgrad, sigma=sigma, nu=problem.smoothness(),
                             mu=problem.strong_convexity(), mu_g=problem.strong_convexity_g(), norm_A=1.0, norm_AtB=1.0, delta=delta)
    if problem.ridge_in_f == 0 and problem.dim > 1:  # say why μ = 0 and what would change it
        g.refused = [r + " (every f_i is rank-one; --ridge-in-f R > 0 moves R‖x‖² into f_i)" if r.startswith("Cor. 7.3") else r
                     for r in g.refused]
    if uses > 1:
        rho = uses * local
        refused = list(g.refused)
        refused.append(f"Cor. 6.2 / 7.3: neighbouring: the user of iteration 1 is used {uses} times in {iterations} iterations; "
                       "001's bound is for a function used once")
        g = AmplifiedGuarantee(zcdp=rho, source="composition", iterations=iterations, one_step_zcdp=local, delta=delta,
                               epsilon=zcdp_to_dp(rho, delta), refused=refused,
                               assumptions=[f"zCDP composition of {uses} Gaussian steps of sensitivity ηΔ (Fact 4.3)"])
    uses_total = np.bincount(order[:, :iterations].ravel(), minlength=problem.users)  # Σ_r u_{r,i} per user i
    m_max = int(uses_total.max())
    runs = int(order.shape[0])
    every = {"zcdp": m_max * local, "epsilon": zcdp_to_dp(m_max * local, delta), "uses": m_max, "runs": runs,
             "one_step_zcdp": local,
             "note": f"every user, over the {runs} published run(s): zCDP composition of the most-used user's "
                     f"{m_max} Gaussian step(s) of sensitivity ηΔ; no amplification (the last user's step reaches the "
                     "release after one step)"}
    return g, every


# ------------------------------------------------------------------ the run


def run_noisy_admm(config: NoisyADMMConfig, problem: ElasticNet | None = None,
                   test: tuple[np.ndarray, np.ndarray] | None = None, out: str | Path | None = None,
                   overwrite: bool = False) -> NoisyADMMRun | None:
    """Run 001's Algorithm 1 as configured; ``problem``/``test`` replace ``config.dataset`` when given.
    ``out``: write config.json, coordinator_view/ (model.npz: the released (x, λ); summary.json: the settings
    and the ledger) and simulation_evaluation/ (history.csv: the objective per iteration; summary.json) there.

    The users live on ``config.clients`` clients on ``config.backend``'s hosts (:mod:`.noisy_hosts`); under
    ``backend="mpi"`` call it on every rank: rank 0 returns the run, the others host clients and return None."""
    from ...engine.sharing.hosts import launch_sharing

    c = config.validate()
    return launch_sharing(c, lambda: _run(c, problem, test, out, overwrite))


def iterate(problem: ElasticNet, order: np.ndarray, iterations: int, beta: float, edges: np.ndarray, backend,
            x0: float = 3.0, lam0: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The coordinator's loop of Algorithm 1 over the clients on ``backend`` (users of client p: ``edges[p]`` to
    ``edges[p + 1]``): final x̃ and λ of every run, and the objective at every x̃_t (the simulation's evaluation)."""
    runs, n = order.shape[0], problem.dim
    x, lam = np.full((runs, n), float(x0)), np.full((runs, n), float(lam0))
    owner = np.searchsorted(edges, order[:, :iterations], side="right") - 1  # the client of each (run, iteration)
    local = order[:, :iterations] - edges[owner]
    objective = np.empty((runs, iterations + 1))
    objective[:, 0] = problem.objective(x)
    clients = len(edges) - 1
    for t in range(iterations):
        y, lam = dual_step(x, lam, beta=beta, c1=problem.c1, c2_g=problem.c2 - problem.ridge_in_f)
        msgs = {}
        for p in range(clients):
            rows = np.flatnonzero(owner[:, t] == p)
            msgs[p] = IterateMessage(t + 1, p, rows, local[rows, t], x[rows], y[rows], lam[rows])
        for update in backend.call("step_each", msgs):  # x̃_{t+1} of each client's runs, noise drawn on its host
            x[msgs[update.zone].runs] = update.released
        objective[:, t + 1] = problem.objective(x)
    return x, lam, objective


def _run(c: NoisyADMMConfig, problem: ElasticNet | None, test, out, overwrite) -> NoisyADMMRun:
    """The coordinator's side of :func:`run_noisy_admm` (the only side of a serial or process run)."""
    from ...engine.sharing.hosts import make_sharing_backend

    t0 = time.perf_counter()
    pre: dict[str, Any] = {"note": "problem given by the caller"}
    if problem is None:
        problem, loaded_test, pre = load_regression(c)
        test = test if test is not None else loaded_test
    if c.eta == "auto":
        eta, eta_rule = auto_eta(problem, c.beta)
    else:
        eta, eta_rule = float(c.eta), "given"
    order = user_order(problem.users, c.runs, c.rounds, c.order, c.split_seed)
    reference_x, reference = problem.minimize()
    setup_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    edges = user_blocks(problem.users, c.clients)
    step_sensitivity = eta * problem.gradient_sensitivity(c.target_shift)  # ηΔ: one step's L2 sensitivity (public)
    specs = user_specs(problem.features, problem.targets, c.clients, eta=eta, beta=c.beta, ridge_in_f=problem.ridge_in_f,
                       sigma=c.sigma, seed=c.seed, sensitivity=step_sensitivity if step_sensitivity > 0 else None)
    backend = make_sharing_backend(c.backend, specs, c)
    try:
        x, lam, obj = iterate(problem, order, c.rounds, c.beta, edges, backend)
    finally:
        backend.close()
    wall = time.perf_counter() - t1
    if c.sigma > 0:
        ledger, every = ledger_entry(problem, order, eta=eta, beta=c.beta, sigma=c.sigma, iterations=c.rounds,
                                     target_shift=c.target_shift, delta=c.delta)
    else:
        ledger = AmplifiedGuarantee(zcdp=math.inf, source="none (σ = 0)", iterations=c.rounds, one_step_zcdp=math.inf,
                                    delta=c.delta, epsilon=math.inf, refused=["σ = 0: no noise, not private"])
        every = {"zcdp": math.inf, "epsilon": math.inf, "uses": None, "runs": c.runs, "note": "σ = 0: not private"}
    history = pd.DataFrame({"round": np.arange(obj.shape[1]), "objective": obj.mean(axis=0),
                            "objective_std": obj.std(axis=0), "gap": obj.mean(axis=0) - reference})
    test_loss = None
    if test is not None:
        A, b = test
        test_loss = float(np.mean((x @ A.T - b) ** 2))
    final = float(obj[:, -1].mean())
    amplified = ledger.source in ("Cor. 6.2", "Cor. 7.3")
    summary: dict[str, Any] = {
        "application": "learning",
        "dataset": c.dataset,
        "algorithm": c.algorithm,
        "engine_algorithm": "001 Algorithm 1 (noisy-gradient ADMM, powerdp.apps.learning.noisy_admm)",
        "model": "elastic net (1/N)Σ(⟨a_i, x⟩ − b_i)² + c₁‖x‖₁ + c₂‖x‖², split x − y = 0",
        "clients": c.clients,  # the holders of the users' samples (each user is one sample)
        "backend": c.backend,
        "train_samples": problem.users,
        "test_samples": None if test is None else int(len(test[1])),
        "features": problem.dim,
        "preprocessing": pre,
        "rounds": c.rounds,
        "iterations": c.rounds,
        "runs": c.runs,
        "order": c.order,
        "eta": eta,
        "eta_rule": eta_rule,
        "beta": c.beta,
        "sigma": c.sigma,
        "l1": c.l1,
        "l2": c.l2,
        "ridge_in_f": c.ridge_in_f,
        "stopped": "rounds",
        "final_objective": final,
        "final_objective_std": float(obj[:, -1].std()),
        "final_test_error": None,  # a regression: see final_test_loss
        "final_test_loss": test_loss,  # mean squared error of the released x̃_K on the test set
        "centralized_objective": reference,
        "relative_gap_to_centralized": (final - reference) / abs(reference),
        "released": RELEASE_NOTE,
        "private": c.sigma > 0,
        "noise_source": c.noise_source,
        "seed": c.seed,
        "adjacency": f"one user's target b moved by at most {c.target_shift:g} (features public); Δ = 2|shift|·max‖a_i‖",
        "gradient_sensitivity": problem.gradient_sensitivity(c.target_shift),
        # the headline: the dataset-level guarantee (every user) over the R published runs
        "epsilon_total": every["epsilon"],
        "delta_total": c.delta,
        "zcdp_total": every["zcdp"],
        "ledger_source": f"every user over {c.runs} published run(s): zCDP composition, no amplification",
        "amplified": False,  # the headline never rests on amplification; first_user does
        "refused_assumptions": ledger.refused,  # of the first user's amplified bound
        "ledger": ledger.to_dict(),  # the first user's entry in full (001's guarantee)
        "every_user": every,
        "first_user": {
            "epsilon": ledger.epsilon, "zcdp": ledger.zcdp, "delta": c.delta, "source": ledger.source,
            "amplified": amplified,
            "scope": "the user of iteration 1 of one run, in that run alone (001's amplified guarantee, against whoever "
                     "sees only the release; the coordinator sees every x̃_t): a figure for that user, not the dataset's "
                     "guarantee and not composed over the runs",
        },
        "wall_s": wall,
        "round_ms": 1e3 * wall / c.rounds,
        "setup_s": setup_s,
        "reference_x_norm": float(np.linalg.norm(reference_x)),
    }
    run = NoisyADMMRun(config=c, problem=problem, x=x, lam=lam, history=history, ledger=ledger, summary=summary)
    if out is not None:
        from ...runs.directory import DirectoryLock, ensure_dir, prepare_run_dir

        out_dir = ensure_dir(out)
        with DirectoryLock(out_dir):
            prepare_run_dir(out_dir, overwrite=overwrite)
            run.save(out_dir)
    return run
