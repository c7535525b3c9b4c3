"""The statistics of an empirical privacy audit (docs/privacy.md, "Empirical audit"): Clopper-Pearson intervals, the ε
lower bound they imply, the linear distinguisher and its threshold, the replay adversary of a seeded run, and the
checks of every other channel the coordinator holds."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DEFAULT_CONFIDENCE", "check_bound", "clopper_pearson", "epsilon_lower_bound", "linear_distinguisher", "best_threshold",
           "attack", "replay_attack"]


DEFAULT_CONFIDENCE = 0.95


def check_bound(res: dict[str, Any], delta: float, confidence: float) -> dict[str, Any]:
    """``res`` (a channel check's counts) with the ε lower bound its guesses prove at ``confidence``."""
    if "tp" in res:
        _, fpr_hi = clopper_pearson(res["fp"], res["negatives"], confidence)
        tpr_lo, _ = clopper_pearson(res["tp"], res["positives"], confidence)
        res["epsilon_lower_bound"] = float(epsilon_lower_bound(fpr_hi, 1 - tpr_lo, delta))
    res.setdefault("epsilon_lower_bound", 0.0)
    return res


def clopper_pearson(k, n, confidence: float = DEFAULT_CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """The two-sided Clopper–Pearson interval of a binomial rate with ``k`` successes in ``n`` trials.

    Exact: lower = Beta⁻¹(α/2; k, n−k+1), upper = Beta⁻¹(1−α/2; k+1, n−k), α = 1 − confidence,
    with lower = 0 at k = 0 and upper = 1 at k = n. Each end is a one-sided bound at 1 − α/2.
    Vectorized over ``k`` (and ``n``).
    """
    from scipy.stats import beta

    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    alpha = 1.0 - confidence
    with np.errstate(invalid="ignore"):
        lo = np.where(k > 0, beta.ppf(alpha / 2, np.maximum(k, 1e-300), n - k + 1), 0.0)
        hi = np.where(k < n, beta.ppf(1 - alpha / 2, k + 1, np.maximum(n - k, 1e-300)), 1.0)
    return lo, hi


def epsilon_lower_bound(fpr_hi, fnr_hi, delta: float = 0.0) -> np.ndarray:
    """The ε that an attack with these (upper bounds on its) error rates proves, at least 0.

    An (ε, δ)-DP mechanism forces every test to satisfy FPR + e^ε·FNR ≥ 1 − δ and
    FNR + e^ε·FPR ≥ 1 − δ (Kairouz et al. 2015), so
    ε ≥ max(ln((1 − δ − FNR)/FPR), ln((1 − δ − FPR)/FNR)) (Jagielski et al. 2020; Nasr et al. 2021).
    With upper confidence bounds on both rates the bound holds at that confidence.
    """
    fpr = np.asarray(fpr_hi, dtype=float)
    fnr = np.asarray(fnr_hi, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):  # x/0 = inf for x > 0; a numerator ≤ 0 proves nothing
        a = np.where(1 - delta - fnr > 0, np.log((1 - delta - fnr) / fpr), -np.inf)
        b = np.where(1 - delta - fpr > 0, np.log((1 - delta - fpr) / fnr), -np.inf)
    return np.maximum(np.maximum(a, b), 0.0)


def linear_distinguisher(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """Weights of a linear score s = x·w separating the rows of ``x1`` from those of ``x0``.

    The difference of the class means, each coordinate divided by the pooled variance (the
    likelihood-ratio direction of two Gaussians with a shared diagonal covariance). Coordinates
    that never vary (round 0, deterministic runs) keep the plain mean difference; a variance far
    below the largest one is floored at 1e-9 of it so a nearly constant coordinate cannot dominate.
    """
    diff = x1.mean(axis=0) - x0.mean(axis=0)
    var = 0.5 * (x0.var(axis=0) + x1.var(axis=0))
    var[(x0 == x0[0]).all(axis=0) & (x1 == x1[0]).all(axis=0)] = 0.0  # exactly constant (np.var may leave 1e-35)
    top = float(var.max()) if var.size else 0.0
    w = diff if top <= 0.0 else np.where(var > 0, diff / np.maximum(var, 1e-9 * top), diff / top)
    scale = float(np.abs(w).max()) if w.size else 0.0
    return w / scale if scale > 0 else w  # the test "score > τ" does not depend on the scale


def _rates(s0: np.ndarray, s1: np.ndarray, tau) -> tuple[np.ndarray, np.ndarray]:
    """False and true positives of the test "score > τ" (vectorized over τ)."""
    fp = len(s0) - np.searchsorted(np.sort(s0), tau, side="right")
    tp = len(s1) - np.searchsorted(np.sort(s1), tau, side="right")
    return fp, tp


def _bound(fp, tp, n0: int, n1: int, delta: float, confidence: float) -> np.ndarray:
    _, fpr_hi = clopper_pearson(fp, n0, confidence)
    _, fnr_hi = clopper_pearson(n1 - np.asarray(tp), n1, confidence)
    return epsilon_lower_bound(fpr_hi, fnr_hi, delta)


def best_threshold(s0: np.ndarray, s1: np.ndarray, delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The threshold τ of "score > τ" whose ε bound on these (training) scores is largest.

    Candidates are the 1st to 99th percentiles of the pooled scores: the far tails hold too few
    scores for a test there to carry over to new runs (an extreme threshold that wins on the training
    half by chance proves nothing on the test half). Each is moved to the middle of the gap between the
    scores around it. Ties go to the smallest τ; when no candidate gives a positive bound, the median.
    """
    pooled = np.sort(np.concatenate([s0, s1]))
    cand = np.unique(np.quantile(pooled, np.linspace(0.01, 0.99, 99)))
    # each candidate moved to the middle of its gap between scores: the same training counts, more margin
    i = np.searchsorted(pooled, cand, side="right")
    inside = i < len(pooled)
    cand[inside] = 0.5 * (pooled[i[inside] - 1] + pooled[i[inside]])
    fp, tp = _rates(s0, s1, cand)
    bounds = _bound(fp, tp, len(s0), len(s1), delta, confidence)
    if not bounds.max() > 0:  # no threshold shows anything: the neutral test at the median
        return float(np.median(pooled))
    return float(cand[int(np.argmax(bounds))])


def attack(x0: np.ndarray, x1: np.ndarray, delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE) -> dict[str, Any]:
    """Train the linear distinguisher and its threshold on the first half of each side's rows,
    test on the second half; the test's rates, their Clopper–Pearson intervals and the ε bound."""
    n0, n1 = len(x0) // 2, len(x1) // 2
    w = linear_distinguisher(x0[:n0], x1[:n1])
    tau = best_threshold(x0[:n0] @ w, x1[:n1] @ w, delta, confidence)
    s0, s1 = x0[n0:] @ w, x1[n1:] @ w
    m0, m1 = len(s0), len(s1)
    fp, tp = (int(v) for v in _rates(s0, s1, tau))
    fpr_lo, fpr_hi = (float(v) for v in clopper_pearson(fp, m0, confidence))
    tpr_lo, tpr_hi = (float(v) for v in clopper_pearson(tp, m1, confidence))
    eps = float(epsilon_lower_bound(fpr_hi, 1 - tpr_lo, delta))
    return {
        "epsilon_lower_bound": eps,
        "tpr": tp / m1,
        "fpr": fp / m0,
        "tpr_interval": [tpr_lo, tpr_hi],
        "fpr_interval": [fpr_lo, fpr_hi],
        "test_runs": [m0, m1],
        "train_runs": [n0, n1],
        "threshold": tau,
        "confidence": confidence,
    }


def replay_attack(x0: np.ndarray, x1: np.ndarray, replay0: np.ndarray, replay1: np.ndarray,
                  delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE) -> dict[str, Any]:
    """The replay adversary of a seeded run (it knows the seed): each transcript is compared with the replays of
    both hypotheses under its seed (``replay0[k]``, ``replay1[k]``: the runs on D and D' with transcript k's seed)
    and called D' when it lies closer to D''s replay. Rates and ε bound as :func:`attack` (no training needed)."""
    def says_d1(x, r0, r1):
        return np.linalg.norm(x - r1, axis=1) < np.linalg.norm(x - r0, axis=1)

    m0, m1 = len(x0), len(x1)
    fp, tp = int(says_d1(x0, replay0, replay1).sum()), int(says_d1(x1, replay0, replay1).sum())
    fpr_lo, fpr_hi = (float(v) for v in clopper_pearson(fp, m0, confidence))
    tpr_lo, tpr_hi = (float(v) for v in clopper_pearson(tp, m1, confidence))
    return {
        "epsilon_lower_bound": float(epsilon_lower_bound(fpr_hi, 1 - tpr_lo, delta)),
        "tpr": tp / m1, "fpr": fp / m0, "tpr_interval": [tpr_lo, tpr_hi], "fpr_interval": [fpr_lo, fpr_hi],
        "test_runs": [m0, m1], "confidence": confidence,
    }


def _channel_bounds(runs0: list[dict], runs1: list[dict], delta: float, confidence: float, seeded: bool, conf: float):
    """Per channel the coordinator holds (besides the allow-listed release, attacked by :func:`attack`): the
    linear attack's ε bound at ``conf``, the Bonferroni-corrected confidence of the whole family (release
    included) that keeps ``confidence``; for a seeded run also the replay adversary, which knows the seed (on
    the test half, at ``confidence``: it is reported, not part of the verdict). Returns (channels, the names of
    message fields outside the allow-list)."""
    names = sorted(set(runs0[0]) - {"released"})
    off_list = sorted(n.removeprefix("field:") for n in names if n.startswith("field:"))
    out: dict[str, Any] = {}
    for name in names:
        a = np.stack([r[name] for r in runs0])
        b = np.stack([r[name] for r in runs1])
        out[name] = {k: v for k, v in attack(a, b, delta=delta, confidence=conf).items() if k != "threshold"}
    if seeded:
        half = len(runs0) // 2
        x0 = np.stack([r["released"] for r in runs0])
        x1 = np.stack([r["released"] for r in runs1])
        # the adversary replays both hypotheses with the transcript's seed: the runs on D and D' with that seed
        out["replay"] = replay_attack(x0[half:], x1[half:], x0[half:], x1[half:], delta, confidence)
    return out, off_list
