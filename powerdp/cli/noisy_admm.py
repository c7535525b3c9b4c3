"""``powerdp learn --algorithm noisy-admm``: the flags only noisy-admm reads, the command, its printed summary
(the run itself: :mod:`powerdp.apps.learning.amplified`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..apps.learning.amplified import ORDERS, SYNTHETIC, NoisyADMMConfig, run_noisy_admm
from ..errors import ConfigError
from .args import integer, real
from .output import refuse_existing_output, write_json

__all__ = ["add_arguments", "refuse_foreign_flags", "cmd_noisy_admm", "print_summary"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags only noisy-admm reads (``powerdp learn --algorithm noisy-admm``)."""
    g = p.add_argument_group("noisy-admm (Algorithm 1 of the amplification paper: one user per iteration, only the final "
                             "(x, λ) released)")
    d = NoisyADMMConfig.__dataclass_fields__
    g.add_argument("--penalty", type=real(0, lo_open=True), default=d["beta"].default, metavar="BETA",
                   help="ADMM penalty β (default: 0.9; as powerdp privacy amplification --penalty)")
    g.add_argument("--sigma", type=real(0), default=d["sigma"].default, metavar="S", help="noise N(0, S²I) on x each iteration (default: 0.1)")
    g.add_argument("--l1", type=real(0), default=d["l1"].default, metavar="C1", help="elastic net's c₁ (default: 0.01)")
    g.add_argument("--l2", type=real(0), default=d["l2"].default, metavar="C2", help="elastic net's c₂ (default: 0.1)")
    g.add_argument("--ridge-in-f", type=real(0), default=0.0, metavar="R",
                   help="move R of the ridge into every f_i: the amplification paper's Assumption 7.1 holds and its Corollary 7.3 "
                   "applies (default: 0, the paper's split)")
    g.add_argument("--mu", type=real(0, lo_open=True), default=d["mu"].default, metavar="MU", help=f"{SYNTHETIC}: ‖a_i‖² (the μ of the amplification paper's Table 1; default: 0.25)")
    g.add_argument("--users", type=integer(2), default=d["users"].default, metavar="N", help=f"{SYNTHETIC}: users N (default: 1000)")
    g.add_argument("--dim", type=integer(1), default=d["dim"].default, metavar="n", help=f"{SYNTHETIC}: dimension n (default: 64)")
    g.add_argument("--runs", type=integer(1), default=1, metavar="R", help="independent runs, batched (default: 1)")
    g.add_argument("--order", choices=ORDERS, default="permutation",
                   help="user sequence (public, from --split-seed): permutation (default; each user once per pass) or uniform (the "
                   "amplification paper's section 10)")
    g.add_argument("--target-shift", type=real(0, lo_open=True), default=d["target_shift"].default, metavar="D",
                   help="neighbours: one user's target moves by at most D (default: 1)")


#: flags of the consensus runs that noisy-admm does not read (refused when given); its δ is the total's, --target-delta
_NOT_READ = ("split", "clip_l1", "box", "reg", "epsilon", "target_epsilon", "delta", "sensitivity",
             "adjacency", "local_updates", "rho_schedule", "rho", "eta_scale", "trust_radius", "trust_schedule",
             "evaluate_every", "no_evaluation", "checkpoint_every", "resume", "audit", "audit_client", "tol", "bounds")
_ONLY_HERE = ("penalty", "sigma", "l1", "l2", "ridge_in_f", "mu", "users", "dim", "runs", "order", "target_shift")


def refuse_foreign_flags(args: argparse.Namespace, noisy: bool) -> None:
    """One-line error for a flag the chosen algorithm does not read (given explicitly)."""
    explicit = getattr(args, "_explicit", set())
    wrong = sorted(d for d in explicit if d in (_NOT_READ if noisy else _ONLY_HERE))
    if wrong:
        flags = ", ".join("--" + w.replace("_", "-") for w in wrong)
        raise ConfigError(f"{flags}: not read by --algorithm {args.algorithm}" +
                          (" (Algorithm 1 of the amplification paper; see powerdp learn --help, noisy-admm)" if noisy
                           else " (noisy-admm flags)"))


def cmd_noisy_admm(args: argparse.Namespace) -> int:
    """``powerdp learn DATASET --algorithm noisy-admm ...``."""
    from .common import refuse_backend_flags

    refuse_foreign_flags(args, noisy=True)
    refuse_backend_flags(args, args.backend)
    if args.target_delta is not None and not 0 < args.target_delta < 1:
        raise ConfigError(f"--target-delta {args.target_delta:g}: the delta of the total (epsilon, delta) must lie in (0, 1)")
    refuse_existing_output(args.json, "--json", args.overwrite)
    cfg = NoisyADMMConfig(
        dataset=args.dataset or SYNTHETIC, label=args.label, test_fraction=args.test_fraction, split_seed=args.split_seed,
        feature_range=args.feature_range, clip=args.clip, mu=args.mu, users=args.users, dim=args.dim, l1=args.l1, l2=args.l2,
        ridge_in_f=args.ridge_in_f, beta=args.penalty, sigma=args.sigma, eta=args.eta,
        rounds=args.rounds if args.rounds is not None else NoisyADMMConfig.rounds, runs=args.runs,
        order=args.order, target_shift=args.target_shift,
        delta=args.target_delta if args.target_delta is not None else NoisyADMMConfig.delta, seed=args.seed,
        clients=args.clients, backend=args.backend, workers=args.workers,
    )
    run = run_noisy_admm(cfg, out=args.out, overwrite=args.overwrite)
    if run is None:  # an MPI rank that hosted clients: rank 0 reports
        return 0
    s = run.summary
    if args.json is not None:
        write_json(args.json, s)
    if not getattr(args, "quiet", False):
        print_summary(s, args.out)
    sys.stdout.flush()
    return 0


def print_summary(s: dict[str, Any], out=None) -> None:
    print(f"learned       {s['dataset']}: elastic net, {s['train_samples']} users, {s['features']} features, "
          f"{s['iterations']} iterations × {s['runs']} run(s), noisy-admm (Algorithm 1 of Chan, Xie and Zhao, {s['order']} order), "
          f"users on {s['clients']} clients ({s['backend']})")
    print(f"step          eta {s['eta']:.6g} ({s['eta_rule']}), beta {s['beta']:g}, sigma {s['sigma']:g}")
    print("── the coordinator's view (what a deployment publishes) ──")
    print(f"released      {s['released']}")
    if s["private"]:
        e, f = s["every_user"], s["first_user"]
        print(f"privacy       every user (the dataset), over the {e['runs']} published run(s): ε {s['epsilon_total']:.4g} "
              f"at δ {s['delta_total']:g} (zCDP {s['zcdp_total']:.4g}: the most-used user's {e['uses']} step(s), "
              f"no amplification); noise {s['noise_source']}")
        kind = "amplified" if f["amplified"] else "NOT amplified"
        print(f"first user    the user of iteration 1, one run alone: ε {f['epsilon']:.4g} (zCDP {f['zcdp']:.4g}, "
              f"{f['source']}, {kind}); not the dataset's guarantee")
        for r in s["refused_assumptions"]:
            print(f"  refused     {r}")
    else:
        print("privacy       none (sigma = 0)")
    print("── the simulation's evaluation (needs every user's data; a deployment cannot compute it) ──")
    print(f"objective     {s['final_objective']:.6g} (at the released x̃_K; centralized optimum {s['centralized_objective']:.6g}, "
          f"relative gap {s['relative_gap_to_centralized']:+.2e})")
    if s["final_test_loss"] is not None:
        print(f"test loss     {s['final_test_loss']:.6g} (mean squared error on {s['test_samples']} held-out samples)")
    if out is not None:
        print(f"results       {out}  (coordinator_view/: the release and the ledger, what a deployment publishes; "
              "simulation_evaluation/: the objective and the reference, never published)")
