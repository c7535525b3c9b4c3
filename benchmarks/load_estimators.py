"""How well can a zone estimate its loads from one ε-DP release of them? (issue 37, the shedding floor's bar)

The released point of input perturbation balances the zone's noisy loads, so its shedding objective F is about the
squared error of the loads the zone computes with. This script measures that error directly, against the floor
n(β/ε)², for the release used as drawn and for post-processings a zone could apply to its own release (each a
function of the release alone, so free of privacy cost):

* ``release``: the Laplace release as drawn (2× the floor in expectation);
* ``mean``: each zone's p block and q block shrunk toward the block's mean (positive-part James–Stein, the product's
  ``--shrink-loads``, :func:`powerdp.privacy.shrinkage.shrink_to_mean`);
* ``q_on_p``: the p block as ``mean``, the q block shrunk toward its least-squares fit on (1, the noisy p block):
  James–Stein toward a two-dimensional subspace, fixed given the p block's noise (power factors are alike);
* ``soft``: soft thresholding toward zero with the threshold that minimises Stein's unbiased risk estimate (buses
  without load are exact zeros);

and, for comparison, the staircase's variance (the least of any additive ε-DP noise, Geng & Viswanath) and that
variance with an oracle that knows which values are exactly zero. Case118, its three published zones, β = 0.01 p.u.
(docs/privacy.md), Laplace scale β/ε per value:

    python benchmarks/load_estimators.py --draws 400

prints one row per ε: the mean of Σ(estimate − load)² over the draws, divided by the floor.
"""

from __future__ import annotations

import argparse

import numpy as np

import powerdp
from powerdp.privacy.sampler import staircase_variance
from powerdp.privacy.shrinkage import shrink_to_mean

BETA = 0.01  # p.u.: the product's default adjacency bound (one load value moves by at most β)


def subspace_shrink(x: np.ndarray, basis: np.ndarray, variance: float) -> np.ndarray:
    """Positive-part James–Stein of each row of ``x`` (draws × k) toward the column space of ``basis`` (draws × k × r,
    one basis per draw): P + max(0, 1 − (k − r − 2)V/‖x − P‖²)(x − P), P the least-squares projection."""
    k, r = basis.shape[1], basis.shape[2]
    coef = np.linalg.solve(np.einsum("dki,dkj->dij", basis, basis), np.einsum("dki,dk->di", basis, x)[..., None])[..., 0]
    proj = np.einsum("dki,di->dk", basis, coef)
    res = x - proj
    spread = np.einsum("dk,dk->d", res, res)
    factor = np.clip(1.0 - (k - r - 2) * variance / np.where(spread > 0, spread, np.inf), 0.0, 1.0)
    return proj + factor[:, None] * res


def sure_soft(x: np.ndarray, variance: float, scale: float) -> np.ndarray:
    """Soft thresholding of each row of ``x`` toward 0, the threshold (of 51 in [0, 5·scale]) minimising SURE."""
    ts = np.linspace(0.0, 5.0 * scale, 51)
    ax = np.abs(x)[:, None, :]
    risk = (x.shape[1] * variance - 2.0 * variance * (ax <= ts[None, :, None]).sum(-1)
            + (np.minimum(ax, ts[None, :, None]) ** 2).sum(-1))
    t = ts[np.argmin(risk, axis=1)]
    return np.sign(x) * np.maximum(np.abs(x) - t[:, None], 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    net = powerdp.load_case("case118")
    part = powerdp.bundled_partition(net, 3)
    zones = [np.asarray(part.own_buses(z)) for z in range(part.n_zones)]
    loads = np.concatenate([net.pd, net.qd])
    n, zeros = loads.size, int(np.sum(loads == 0))
    rng = np.random.default_rng(args.seed)
    print(f"case118, {part.n_zones} zones, {n} load values ({zeros} exactly zero), {args.draws} draws")
    print("eps    release  mean    q_on_p  soft    staircase  staircase+zero-oracle")
    for eps in args.epsilons:
        scale = BETA / eps
        variance = 2.0 * scale * scale
        floor = n * (BETA / eps) ** 2
        err = dict.fromkeys(("release", "mean", "q_on_p", "soft"), 0.0)
        for own in zones:
            p, q = net.pd[own], net.qd[own]
            pn = p + rng.laplace(0.0, scale, (args.draws, p.size))
            qn = q + rng.laplace(0.0, scale, (args.draws, q.size))
            pm = np.array([shrink_to_mean(row, variance) for row in pn])
            qm = np.array([shrink_to_mean(row, variance) for row in qn])
            basis = np.stack([np.ones_like(pn), pn], axis=2)
            est = {"release": (pn, qn), "mean": (pm, qm), "q_on_p": (pm, subspace_shrink(qn, basis, variance)),
                   "soft": (sure_soft(pn, variance, scale), sure_soft(qn, variance, scale))}
            for name, (pe, qe) in est.items():
                err[name] += float(np.mean(((pe - p) ** 2).sum(1) + ((qe - q) ** 2).sum(1)))
        stair = staircase_variance(BETA, eps) / (BETA / eps) ** 2  # per value, over the floor's (β/ε)²
        print(f"{eps:<6g} " + "  ".join(f"{err[k] / floor:6.3f}" for k in err)
              + f"  {stair:9.3f}  {stair * (n - zeros) / n:9.3f}")


if __name__ == "__main__":
    main()
