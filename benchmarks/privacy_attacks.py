"""The two attacks of the privacy review (issue 18), re-run on the current code through the public API.

Both attack what the coordinator holds: the zones' messages, seen through ``run_distributed``'s
``observe`` hook, and the run's public configuration (what ``config.json`` records). A secret bit
picks the dataset of every target run: D, or D' with one load of zone 0 moved by β. The adversary
guesses the bit; its true and false positive rates, with 95 % Clopper–Pearson intervals, give a
lower bound on ε (powerdp.studies.audit), to compare with the run's claim.

1. **Replay** (finding 1): the adversary re-runs both hypotheses with the run's public configuration
   (its seed, if it has one) and picks the one whose transcript lies closer. Against a seeded run the
   replay is exact; against a run without a seed the zones drew secret noise, and the replay cannot
   reproduce it.
2. **Noise magnitude** (finding 2), ``inpl``: input perturbation adds the same ξ to the linear term
   every round, c = 2d + ξ. The reviewer's adversary fitted c to the transcript; here it is handed the
   exact c of the target zone (an upper bound on any fit, taken from the zone: an oracle only this
   harness has), and both hypotheses' loads. With the noise magnitude M = Σ|ξ| it picks the hypothesis
   with Σ|c − 2d_j| = M. Without M (the current messages) the best test left is the Laplace likelihood
   ratio on c, which is the ε-DP mechanism itself. ``--leak`` turns on the test-only switch that puts M
   back into the messages, to show the attack still works when the channel is open.

    python benchmarks/privacy_attacks.py                  # both attacks, 100 secret bits each
    python benchmarks/privacy_attacks.py --bits 40 --json out.json
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import time
from contextlib import contextmanager
from typing import Any

import numpy as np

from powerdp.apps.power_flow.agent import ZoneAgent
from powerdp.apps.power_flow.config import RunConfig
from powerdp.apps.power_flow.plan import resolve_config, resolve_partition
from powerdp.apps.power_flow.runner import run_distributed
from powerdp.grid.loading import load_case
from powerdp.privacy.faults import InjectedFaults
from powerdp.studies.audit import clopper_pearson, epsilon_lower_bound, neighbouring_network

BUS = 4  # external id of the moved load (zone 0 of case14's 2-zone partition)


def bound(tp: int, pos: int, fp: int, neg: int, delta: float = 0.0) -> dict[str, Any]:
    """Rates and the ε lower bound of a guess with ``tp`` of ``pos`` positives and ``fp`` of ``neg`` negatives."""
    _, fpr_hi = clopper_pearson(fp, neg)
    tpr_lo, _ = clopper_pearson(tp, pos)
    return {"tp": tp, "positives": pos, "fp": fp, "negatives": neg, "tpr": tp / max(pos, 1), "fpr": fp / max(neg, 1),
            "epsilon_lower_bound": float(epsilon_lower_bound(fpr_hi, 1 - tpr_lo, delta))}


def _setting(config: RunConfig):
    net = load_case(config.case)
    config = resolve_config(config, net)
    part = resolve_partition(net, config)
    b = net.bus_index(BUS)
    net1 = neighbouring_network(net, b, config.beta)
    return config, (net, net1), (part, part.with_network(net1)), b


def _transcript(config: RunConfig, net, part) -> tuple[np.ndarray, list]:
    got: list = []
    run_distributed(config, network=net, partition=part, reference=False, observe=got.extend)
    return np.concatenate([u.released for u in got]), got


def replay_attack(bits: int, seed: int | None, target_epsilon: float = 0.5) -> dict[str, Any]:
    """Finding 1 against ``objl --target-epsilon 0.5`` on case14, 2 zones, 5 rounds (seed None: secret noise)."""
    cfg = RunConfig(case="case14", zones=2, algorithm="objl", target_epsilon=target_epsilon, rounds=5,
                    evaluate=False, checkpoint_every=0, seed=seed)
    cfg, nets, parts, _ = _setting(cfg)
    public = RunConfig.from_dict(cfg.to_dict())  # what the coordinator reads in config.json
    tp = fp = pos = neg = 0
    for _ in range(bits):
        h = secrets.randbits(1)
        x, _ = _transcript(cfg, nets[h], parts[h])
        r0, _ = _transcript(public, nets[0], parts[0])
        r1, _ = _transcript(public, nets[1], parts[1])
        guess = int(np.linalg.norm(x - r1) < np.linalg.norm(x - r0))
        pos, neg = pos + h, neg + (1 - h)
        tp, fp = tp + (guess and h), fp + (guess and not h)
    out = bound(tp, pos, fp, neg)
    out.update(attack="replay", noise_source=cfg.noise_source, claim=target_epsilon, bits=bits)
    return out


@contextmanager
def _zone_oracle():
    """Harness-only: keep every ZoneAgent built during the block (to read the true c = 2d + ξ of the target zone)."""
    agents: list[ZoneAgent] = []
    real = ZoneAgent.__init__

    def spy(self, *a, **k):
        real(self, *a, **k)
        agents.append(self)

    ZoneAgent.__init__ = spy
    try:
        yield agents
    finally:
        ZoneAgent.__init__ = real


def noise_magnitude_attack(bits: int, leak: bool, target_epsilon: float = 0.5) -> dict[str, Any]:
    """Finding 2 against ``inpl --target-epsilon 0.5`` on case14, 2 zones, 5 rounds, secret noise."""
    cfg = RunConfig(case="case14", zones=2, algorithm="inpl", target_epsilon=target_epsilon, rounds=5,
                    evaluate=False, checkpoint_every=0)
    cfg, nets, parts, b = _setting(cfg)
    if leak:  # the test-only side channel: Σ|ξ| back in every ZoneUpdate
        cfg = cfg.replace(faults=InjectedFaults(leak="noise_magnitude"))
    zone = int(parts[0].zone_of_bus[b])
    # both hypotheses' 2d on the zone's balance variables (public to the adversary: it knows D and D')
    grads = []
    for net, part in zip(nets, parts):
        keys = part.shared_by_zone(cfg.flows)[zone]
        agent = ZoneAgent(net, zone, part.own_buses(zone), keys, cfg.replace(algorithm="nonprivate", target_epsilon=None))
        grads.append(agent.gradient(np.zeros(agent.n))[agent.noise_cols])
    tp = fp = pos = neg = 0
    fields: set[str] = set()
    for _ in range(bits):
        h = secrets.randbits(1)
        with _zone_oracle() as agents:
            _, updates = _transcript(cfg, nets[h], parts[h])
        target = next(a for a in agents if a.zone == zone)
        c = grads[h] + target.perturbation.xi  # the exact fit of c = 2d + ξ (oracle)
        mine = [u for u in updates if u.zone == zone]
        fields |= {k for u in mine for k in vars(u)}
        m = getattr(mine[-1], "noise_magnitude", None)  # only if a message carries it
        implied = [np.abs(c - g).sum() for g in grads]  # Σ|ξ_j| under each hypothesis
        if m is not None:
            guess = int(abs(implied[1] - m) < abs(implied[0] - m))
        else:  # Laplace likelihood ratio: the smaller Σ|ξ_j| is the likelier hypothesis
            guess = int(implied[1] < implied[0])
        pos, neg = pos + h, neg + (1 - h)
        tp, fp = tp + (guess and h), fp + (guess and not h)
    out = bound(tp, pos, fp, neg)
    out.update(attack="noise magnitude", leak_switch=leak, message_fields=sorted(fields), claim=target_epsilon, bits=bits)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bits", type=int, default=100, help="secret bits (target runs) per attack (default: 100)")
    ap.add_argument("--contrast-bits", type=int, default=20, help="bits of the contrast runs (seeded replay, leak switch)")
    ap.add_argument("--json", help="write the numbers as JSON")
    args = ap.parse_args()
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    rows = []
    for name, fn in [
        ("replay, secret noise", lambda: replay_attack(args.bits, seed=None)),
        ("replay, --seed 3 (contrast)", lambda: replay_attack(args.contrast_bits, seed=3)),
        ("noise magnitude, current messages", lambda: noise_magnitude_attack(args.bits, leak=False)),
        ("noise magnitude, leak switch on (contrast)", lambda: noise_magnitude_attack(args.contrast_bits, leak=True)),
    ]:
        t0 = time.perf_counter()
        row = {"name": name, **fn(), "wall_s": round(time.perf_counter() - t0, 1)}
        rows.append(row)
        print(json.dumps(row))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
