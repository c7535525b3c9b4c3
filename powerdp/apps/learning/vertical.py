"""Vertical (feature-split) learning by ADMM sharing (002; docs/vertical.md).

N samples, the features split into blocks D = [D_1 … D_M], party m holding D_m
(and its test rows). ℓ2-regularized logistic regression

    min_x (1/N) Σ_i log(1 + exp(−b_i Σ_m D_{m,i} x_m)) + λ/2 Σ_m ‖x_m‖²

in sharing form: f_m = λ/2‖x_m‖², A_m = D_m, g(z) = the mean logistic loss of the
labels b, held by the coordinator (002's server). Each party sends one value per
sample per round: r_m = D_m x_m (plus noise when private).

The x-step (002 eq. 7 with the proximal term τ, docs/sharing.md) is a ridge
regression in closed form: x_m = (λI + κD_mᵀD_m)⁻¹ κ D_mᵀ w with κ = ρ + τ and
w = (−y − ρ(S − r_m − z) + τ r_m)/κ, a public vector; the Cholesky factor is
computed once per κ.

Privacy (docs/vertical.md for the derivations): Gaussian noise on the release,
σ_t = z·Δ_t with Δ_t a bound on ‖D_m x_m − D'_m x'_m‖₂ over neighbouring D_m, D'_m
given the public w_t:

The target w is clipped entrywise to [−B, B] (public B, ``margin_clip``) in private runs, so the
noise cannot feed back into ever larger sensitivities.

* ``"column"`` (002's neighbours: one feature column of the party, columns clipped to ‖c‖ ≤ C):
  Δ = 2‖w‖·κC²/(λ + κC²);
* ``"row"`` (one sample's features of the party, rows of norm ≤ 1):
  Δ = √((‖w‖_∞ + ‖w‖√(κ/λ)/2)² + ‖w‖²κ/λ).

002's own mechanism (x̃_m = x_m + N(0, σ²(D_mᵀD_m)⁻¹), release D_m x̃_m) puts all its noise
in the column space of D_m, which neighbouring datasets change: it is not DP for any σ
(docs/vertical.md). The released D_m x_m + N(0, σ²I) is 002's noise plus the complementary
noise in the orthogonal complement.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ...engine.sharing.coordinator import LogisticZStep, SharingAgent, SharingMessage
from ...engine.sharing.hosts import SharingAgentSpec
from ...errors import ConfigError
from ...runs.sharing_run import SharingProblem, SharingResult, SharingSettings, run_sharing

__all__ = ["VerticalData", "VerticalParty", "load_dataset", "DATASETS", "split_blocks", "centralized_logreg", "logloss",
           "vertical_problem", "run_vertical_learning", "gradient_baseline", "NEIGHBOURS", "release_sensitivity"]

NEIGHBOURS = ("column", "row")
DATASETS = ("breast_cancer", "gisette_like")
#: λ per data set (breast_cancer: the prototype's; gisette_like: unit rows of 5000 features need a weaker prior)
DEFAULT_LAMBDA = {"breast_cancer": 1e-3, "gisette_like": 1e-4}


@dataclass(frozen=True)
class VerticalData:
    name: str
    X_train: np.ndarray  # preprocessed: standardised on the training set, each party's rows scaled to norm 1/√M
    y_train: np.ndarray  # ±1
    X_test: np.ndarray
    y_test: np.ndarray
    blocks: tuple  # column index arrays, one per party


def split_blocks(n_features: int, parties: int, sizes: list[int] | None = None) -> tuple:
    """Contiguous feature blocks: the given sizes, else as equal as possible."""
    if sizes is None:
        if not 2 <= parties <= n_features:
            raise ConfigError(f"--parties {parties}: need between 2 and {n_features} parties (one feature each at least; "
                              "one party alone is not vertical learning)")
        return tuple(np.array_split(np.arange(n_features), parties))
    if len(sizes) != parties or any(s < 1 for s in sizes) or sum(sizes) != n_features:
        raise ConfigError(f"--blocks {','.join(map(str, sizes))}: {parties} positive sizes summing to {n_features} features needed")
    edges = np.cumsum([0, *sizes])
    return tuple(np.arange(edges[i], edges[i + 1]) for i in range(parties))


def load_dataset(name: str, parties: int, sizes: list[int] | None = None, seed: int = 0, test_size: float = 0.25) -> VerticalData:
    """The bundled stand-ins (scikit-learn, no download): ``breast_cancer`` (569 × 30) and
    ``gisette_like`` (``make_classification``: 3000 samples × 5000 features, 200 informative, 300 redundant,
    2 % flipped labels)."""
    from sklearn.datasets import load_breast_cancer, make_classification
    from sklearn.model_selection import train_test_split

    if name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
    elif name in ("gisette_like", "gisette"):
        X, y = make_classification(n_samples=3000, n_features=5000, n_informative=200, n_redundant=300, flip_y=0.02,
                                   class_sep=2.0, random_state=seed)
        name = "gisette_like"
    else:
        raise ConfigError(f"unknown data set {name!r}; choose one of {', '.join(DATASETS)}")
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=test_size, random_state=seed, stratify=y)
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd[sd == 0] = 1.0
    Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    blocks = split_blocks(X.shape[1], parties, sizes)
    for cols in blocks:  # each party scales its own rows: every full row has norm 1
        for M in (Xtr, Xte):
            norms = np.linalg.norm(M[:, cols], axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            M[:, cols] = M[:, cols] / norms / np.sqrt(len(blocks))
    return VerticalData(name, Xtr, 2.0 * ytr - 1.0, Xte, 2.0 * yte - 1.0, blocks)


def logloss(margin_labels: np.ndarray) -> float:
    """Mean log(1 + exp(−b u)) from the products b·u."""
    return float(np.mean(np.logaddexp(0.0, -margin_labels)))


def centralized_logreg(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """argmin (1/N)Σ log(1 + exp(−y_i x_iᵀw)) + λ/2‖w‖² by L-BFGS to gradient 1e-10 (the reference)."""
    from scipy.optimize import minimize

    n = len(y)

    def fg(w):
        m = y * (X @ w)
        s = 0.5 * (1.0 - np.tanh(0.5 * m))  # σ(−m), stable
        return float(np.mean(np.logaddexp(0.0, -m)) + 0.5 * lam * w @ w), -(X.T @ (y * s)) / n + lam * w

    res = minimize(fg, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 20000})
    return res.x


def release_sensitivity(w: np.ndarray, neighbours: str, lam: float, kappa: float, clip: float) -> float:
    """Δ₂ of D_m x_m given the public w (docs/vertical.md, "Sensitivity")."""
    nw = float(np.linalg.norm(w))
    if neighbours == "column":
        return 2.0 * nw * kappa * clip**2 / (lam + kappa * clip**2)
    r = float(np.max(np.abs(w))) + nw * np.sqrt(kappa / lam) / 2.0
    return float(np.sqrt(r**2 + nw**2 * kappa / lam))


class VerticalParty(SharingAgent):
    """A party holding one feature block: exact ridge x-step, optional Gaussian release noise."""

    def __init__(self, agent: int, D: np.ndarray, D_test: np.ndarray, lam: float, noise_multiplier: float | None = None,
                 neighbours: str = "column", clip: float = 1.0, seed: int | None = None, margin_clip: float = 5.0,
                 delta: float = 1e-5):
        super().__init__(agent)
        self.margin_clip = float(margin_clip)
        self.D = np.asarray(D, float)
        self.D_test = np.asarray(D_test, float)
        self.lam = float(lam)
        self.noise_multiplier = noise_multiplier
        self.neighbours = neighbours
        self.clip = float(clip)
        if noise_multiplier is not None:  # enforce the neighbouring relation's bounds on this party's data
            if neighbours == "column":
                norms = np.linalg.norm(self.D, axis=0)
                self.D = self.D * np.minimum(1.0, self.clip / np.maximum(norms, 1e-300))
            else:
                norms = np.linalg.norm(self.D, axis=1, keepdims=True)
                self.D = self.D / np.maximum(1.0, norms)
            self._private(seed, noise_multiplier, delta)  # its noise source, ledger and release journal
        self.x = np.zeros(self.D.shape[1])
        self._kappa = None
        self.noise_l1 = 0.0  # Σ|ξ| stays with the party (simulation's evaluation only)

    def initial_release(self) -> np.ndarray:
        return np.zeros(self.D.shape[0])  # x⁰ = 0 (002)

    def _factor(self, kappa: float) -> None:
        n, d = self.D.shape
        self.primal_form = d <= n
        M = self.lam / kappa * np.eye(d) + self.D.T @ self.D if self.primal_form else self.lam / kappa * np.eye(n) + self.D @ self.D.T
        self._chol = cho_factor(M)
        self._kappa = kappa

    def local_step(self, msg: SharingMessage) -> tuple[np.ndarray, int]:
        kappa = msg.rho + msg.tau
        if self._kappa != kappa:
            self._factor(kappa)
        w = (-msg.dual - msg.rho * self.others_minus_z(msg) + msg.tau * self.own) / kappa
        if self.rng is not None:  # private: the target margins are clipped to [−B, B] (public), so ‖w‖ ≤ B√N
            w = np.clip(w, -self.margin_clip, self.margin_clip)
        self._w = w
        if self.primal_form:  # x = (λ/κ I + DᵀD)⁻¹ Dᵀ w
            self.x = cho_solve(self._chol, self.D.T @ w)
        else:  # x = Dᵀ(λ/κ I + DDᵀ)⁻¹ w
            self.x = self.D.T @ cho_solve(self._chol, w)
        return self.D @ self.x, 1

    def perturb(self, contribution: np.ndarray, msg: SharingMessage) -> np.ndarray:
        if self.rng is None:
            return contribution
        sigma = self.noise_multiplier * release_sensitivity(self._w, self.neighbours, self.lam, msg.rho + msg.tau, self.clip)
        released, xi = self._release(contribution, sigma)
        self.noise_l1 += float(np.abs(xi).sum())
        return released

    def diagnostics(self) -> dict:
        return {"train_margin": self.D @ self.x, "test_margin": self.D_test @ self.x, "penalty": 0.5 * self.lam * float(self.x @ self.x),
                "noise_l1": self.noise_l1}

    def extra_state(self) -> dict:
        return {"arrays": {"x": self.x}, "meta": {"noise_l1": self.noise_l1}}

    def load_extra_state(self, state: dict) -> None:
        self.x = np.asarray(state["arrays"]["x"], float)
        self.noise_l1 = float(state["meta"].get("noise_l1", 0.0))


def vertical_problem(data: VerticalData, lam: float, noise_multiplier: float | None = None, neighbours: str = "column",
                     clip: float = 1.0, seed: int | None = None, margin_clip: float = 5.0, delta: float = 1e-5) -> SharingProblem:
    if neighbours not in NEIGHBOURS:
        raise ConfigError(f"neighbours must be one of {', '.join(NEIGHBOURS)}, got {neighbours!r}")
    specs = [
        SharingAgentSpec(agent=m, factory="powerdp.apps.learning.vertical:VerticalParty", weight=len(cols), kwargs=dict(
            D=data.X_train[:, cols], D_test=data.X_test[:, cols], lam=lam, noise_multiplier=noise_multiplier,
            neighbours=neighbours, clip=clip, seed=seed, margin_clip=margin_clip, delta=delta))
        for m, cols in enumerate(data.blocks)
    ]
    ytr, yte = data.y_train, data.y_test

    def evaluate(coordinator, diags: dict) -> dict:
        tr = sum(diags[m]["train_margin"] for m in sorted(diags))
        te = sum(diags[m]["test_margin"] for m in sorted(diags))
        return {"train_objective": logloss(ytr * tr) + sum(d["penalty"] for d in diags.values()),
                "test_logloss": logloss(yte * te), "test_error": error_rate(yte, te)}

    text = {"column": f"one feature column of the party moves (columns clipped to norm {clip:g})",
            "row": "one sample's features of the party move (rows of norm at most 1)"}[neighbours]
    return SharingProblem(
        name="vertical-logreg", zstep=LogisticZStep(ytr), specs=specs, evaluate=evaluate,
        relation={"name": neighbours, "text": text},
        config={"dataset": data.name, "parties": len(data.blocks), "blocks": [len(c) for c in data.blocks], "lam": lam,
                "noise_multiplier": noise_multiplier, "neighbours": neighbours, "clip": clip, "margin_clip": margin_clip,
                "seeded": seed is not None,
                "seed": seed},
        command="powerdp learn",
    )


def error_rate(y: np.ndarray, margin: np.ndarray) -> float:
    """The fraction of labels y in {-1, +1} the margins misclassify: predict +1 where the margin is positive, else -1
    (a zero margin is one prediction, right for one class: counting y * margin <= 0 called it wrong for both)."""
    return float(np.mean(np.where(np.asarray(margin) > 0, 1.0, -1.0) != np.asarray(y)))


def baselines(data: VerticalData, lam: float) -> dict:
    """Centralized logistic regression on all features and each party alone on its own (same objective)."""
    t0 = time.perf_counter()
    w = centralized_logreg(data.X_train, data.y_train, lam)
    out = {"centralized_test_logloss": logloss(data.y_test * (data.X_test @ w)),
           "centralized_test_error": error_rate(data.y_test, data.X_test @ w),
           "centralized_train_objective": logloss(data.y_train * (data.X_train @ w)) + 0.5 * lam * float(w @ w),
           "centralized_s": time.perf_counter() - t0, "party_alone_test_logloss": [], "party_alone_test_error": []}
    for cols in data.blocks:
        wm = centralized_logreg(data.X_train[:, cols], data.y_train, lam)
        u = data.X_test[:, cols] @ wm
        out["party_alone_test_logloss"].append(logloss(data.y_test * u))
        out["party_alone_test_error"].append(error_rate(data.y_test, u))
    return out


def gradient_baseline(data: VerticalData, lam: float, rounds: int, accelerated: bool = True) -> list[float]:
    """002's comparison: vertical (full-batch) gradient descent with the same messages per round.

    Each round every party sends D_m x_m (one number per sample), the label holder returns ∂loss/∂u (one number
    per sample) and each party steps x_m ← x_m − η(D_mᵀ g + λ x_m), η = 1/L with L = ‖D‖₂²/(4N) + λ (Nesterov's
    momentum when ``accelerated``). Returns the test log-loss after each round.
    """
    X, y, n = data.X_train, data.y_train, len(data.y_train)
    step = 1.0 / (np.linalg.norm(X, 2) ** 2 / (4 * n) + lam)
    x = v = np.zeros(X.shape[1])
    out = []
    for t in range(1, rounds + 1):
        m = y * (X @ v)
        g = -(X.T @ (y * 0.5 * (1.0 - np.tanh(0.5 * m)))) / n + lam * v
        x_new = v - step * g
        v = x_new + ((t - 1) / (t + 2) if accelerated else 0.0) * (x_new - x)
        x = x_new
        out.append(logloss(data.y_test * (data.X_test @ x)))
    return out


def run_vertical_learning(data: VerticalData, lam: float, settings: SharingSettings, neighbours: str = "column",
                          clip: float = 1.0, seed: int | None = None, out: str | Path | None = None, resume: bool = False,
                          overwrite: bool = False, progress: Callable[[dict], None] | None = None,
                          observe: Callable[[list], None] | None = None,
                          margin_clip: float = 5.0) -> tuple[SharingResult, dict] | None:
    """Train by sharing ADMM; returns (SharingResult, baselines) on rank 0 (None elsewhere under MPI)."""
    problem = vertical_problem(data, lam, settings.noise_multiplier, neighbours, clip, seed, margin_clip, delta=settings.delta)
    result = run_sharing(problem, settings, out=out, resume=resume, overwrite=overwrite, progress=progress, observe=observe)
    if result is None:
        return None
    return result, baselines(data, lam)
