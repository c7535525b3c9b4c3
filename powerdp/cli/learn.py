"""``powerdp learn``: federated learning from the command line (registered by :mod:`powerdp.cli`).

:func:`add_learn_parser` adds the subcommand; :func:`add_learn_arguments` adds its arguments to any parser,
so another mode (e.g. vertical learning) can extend the same command.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from ..apps.learning.config import (
    ALGORITHM_NAMES,
    BACKENDS,
    DEFAULT_ETA,
    DEFAULT_ROUNDS,
    NONPRIVATE_ROUNDS,
    NONPRIVATE_TOL,
    RUNNERS,
    LearnConfig,
)
from ..apps.learning.data import BUNDLED
from ..errors import ConfigError
from ..runs.kinds import run_kind
from .args import integer, real
from .common import refuse_backend_flags, refuse_unused_flags
from .output import refuse_existing_output
from .streams import is_terminal

__all__ = ["add_learn_parser", "add_learn_arguments", "config_from_args", "cmd_learn"]

#: the flags of a private run, refused with a non-private algorithm (which would ignore them)
LEARN_NOISE_FLAGS = ("epsilon", "delta", "target_epsilon", "target_delta", "sensitivity", "adjacency")
#: the command of each algorithm with its own runner (learning's config.RUNNERS), as "module:function" of this package
RUNNER_COMMANDS = {"noisy-admm": "noisy_admm:cmd_noisy_admm"}

LEARN_DESCRIPTION = textwrap.dedent(
    """\
    Train a multiclass logistic-regression model over P clients with the private ADMM
    of powerdp run (docs/learning.md): each client holds its own training samples and
    releases only its local model; a coordinator averages them. The update rules,
    perturbations, mechanisms and the privacy ledger are the ones power flow uses.

    DATASET is digits (scikit-learn's 8x8 digits, 1797 samples), mnist (a bundled
    5000-sample MNIST subset, 500 per class), a CSV file with a header row and a label
    column (label, or --label NAME; every other column a number), or an .npz with
    arrays X and y. A stratified test split (--test-fraction) is held out.

    Public preprocessing (stated in the summary): features scaled to [0, 1] with
    public bounds (the pixel range of a bundled set, --feature-range LO,HI for every
    column, or --bounds FILE per column: a CSV column,low,high), then every row
    clipped to ||x||_2 <= --clip; a warning names the columns whose raw values fall
    far outside their bounds. Never scale by the data's own mean or spread: that is
    not private (docs/learning.md). That bound makes the sensitivities hold
    whatever the data: one replaced sample moves a client's gradient by at most
    2*sqrt(2)*R/I in L2 and 4*R1/I in L1 (I = all training samples; add-remove
    neighbours: half).

    The papers: Ryu and Kim, "Differentially Private Distributed Convex Optimization"
    (the distributed-optimization paper below); Ryu and Kim, "Differentially Private
    Federated Learning via Inexact ADMM" (the inexact-ADMM paper); Huang et al.,
    "DP-ADMM: ADMM-Based Distributed Learning With Differential Privacy"; Chan, Xie and
    Zhao, "Privacy Amplification by Iteration for ADMM with (Strongly) Convex Objective
    Functions" (arXiv:2312.08685, the amplification paper).

    algorithms:
      nonprivate     linearized ADMM, no noise
      objl, objg     objective perturbation, Laplace / Gaussian, E local steps (the
                     distributed-optimization paper)
      outl, outg     output perturbation, Laplace / Gaussian, E local steps (the same paper)
      objp           ObjP of the inexact-ADMM paper: objl with E = 1, eta_t = 1/sqrt(t)
      objt           ObjT of the same paper: trust region ||z - z_t||_inf <= a (or a/t^2),
                     Laplace, E = 1
      outp           Huang et al.'s DP-ADMM: Gaussian output noise, eta_t shrinking as 1/sqrt(t)
      noisy-admm     Algorithm 1 of the amplification paper: an elastic net, one user's
                     gradient per iteration, N(0, sigma^2 I) on x, only the final (x, lambda)
                     released; DATASET elastic-net (the paper's section 10 synthetic data) or
                     a .csv/.npz with a numeric target; --rounds is the number of iterations,
                     --eta auto is the midpoint of the paper's step interval (its equation 23);
                     its ledger is the amplified bound of the user of iteration 1 when the
                     paper's assumptions hold, else the plain composition with the refused
                     assumption named (docs/amplification.md); --clients P deals the users to
                     P clients, which --backend places as below

    The penalty is rho_t = min(1e9, c1*1.2^floor(t/Tc) + c2/eps) (the distributed-
    optimization paper's equation 73) for a private run, with the public step 300/R^2
    and all --rounds (1000). A non-private
    run adapts rho by residual balancing, backtracks a diagonal curvature metric on
    each client's data, and stops when its relative residuals are below --tol (1e-5),
    at most after 10000 rounds; a run that reaches the cap first says so.

    --backend process or mpi runs the clients in worker processes or on MPI ranks
    (mpiexec -n K python -m powerdp learn ... --backend mpi); a seeded run is
    bit-identical on every backend.

    The run prints setup stages, one line per evaluation (or a progress bar) and a
    summary; --out DIR keeps the run's two views apart: DIR/coordinator_view/ (what a
    deployment publishes: residuals, epsilon spent, rho, timings, the global model,
    the ledger) and DIR/simulation_evaluation/ (objective, test error, noise
    magnitude, the centralized reference: computed from every client's data), with
    config.json and checkpoints (npz + JSON); --resume DIR continues it. Ctrl-C or
    SIGTERM stops after the round in progress, with a checkpoint.

    --audit N checks the privacy claim from the outside: N seeded runs on each of two
    data sets that differ in one training sample of --audit-client (a canary at the
    clipping bound replaces its first sample), a linear distinguisher on everything
    the client releases, and the lower bound on epsilon it proves against the
    ledger's claimed total (docs/learning.md).

    exit status: 0 ok (audit passed); 1 the run failed; 2 bad input; 3 the audit
    failed (lower bound above the claim); 130 interrupted.
    """
)


def _range(text: str) -> tuple[float, float]:
    number = real()
    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"{text!r}: give LO,HI (two numbers)")
    lo, hi = (number(v) for v in parts)
    if not hi > lo:
        raise argparse.ArgumentTypeError(f"{text!r}: give LO,HI with HI > LO")
    return lo, hi


def _box(text: str) -> float | None:
    if text.lower() in ("none", "inf"):
        return None
    return real(0, lo_open=True, words="a number > 0, or none for W = R^n")(text)


def add_learn_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``powerdp learn`` (a function, so another mode can add its own next to them)."""
    d = LearnConfig.__dataclass_fields__
    p.add_argument("dataset", metavar="DATASET", nargs="?", help=f"{', '.join(BUNDLED)}, a .csv or an .npz (omit with --resume)")
    p.add_argument("--label", default="label", metavar="NAME", help="the label column of a CSV (default: label)")
    p.add_argument("--clients", type=integer(2), default=d["clients"].default, metavar="P", help="number of clients (default: 10)")
    p.add_argument("--split", default="iid", metavar="S", help="iid (default), label-skew, or dirichlet:ALPHA (unequal sizes and label mixes)")
    p.add_argument("--split-seed", type=integer(0), default=0, metavar="N", help="public seed of the test split and the clients' shares (default: 0)")
    p.add_argument("--test-fraction", type=real(0, 1, lo_open=True, hi_open=True), default=0.2, metavar="F", help="held-out test fraction (default: 0.2)")
    p.add_argument("--feature-range", type=_range, metavar="LO,HI", help="public bounds of the features (a user's file; bundled sets have theirs)")
    p.add_argument("--bounds", metavar="FILE", help="public bounds per column: a CSV with header column,low,high, one row per "
                   "feature (instead of --feature-range); known in advance, never computed from the private data")
    p.add_argument("--clip", type=real(0, lo_open=True), default=1.0, metavar="R", help="clip every row to ||x||_2 <= R (default: 1)")
    p.add_argument("--clip-l1", type=real(0, lo_open=True), metavar="R1", help="also clip every row to ||x||_1 <= R1 (default: implied, sqrt(J)*R)")
    p.add_argument("--box", type=_box, default=1.0, metavar="U", help="the feasible set [-U, U]^n of the weights (default: 1; none: R^n)")
    p.add_argument("--reg", type=real(0), default=1e-6, metavar="BETA", help="the l2 term (BETA/P)||z||^2 of each client (default: 1e-6)")
    p.add_argument("--algorithm", default="nonprivate", choices=list(ALGORITHM_NAMES), metavar="A", help=f"{', '.join(ALGORITHM_NAMES)} (default: nonprivate)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--epsilon", type=real(0, lo_open=True), default=0.1, metavar="E", help="epsilon per local step (default: 0.1)")
    budget.add_argument("--target-epsilon", type=real(0, lo_open=True), metavar="E", help="total epsilon per client for the whole run; the per-step noise is calibrated to it")
    p.add_argument("--delta", type=real(0, 1, lo_open=True, hi_open=True), default=1e-6, metavar="D", help="delta per local step, Gaussian (default: 1e-6)")
    p.add_argument("--target-delta", type=real(0, 1, hi_open=True), metavar="D",
                   help="total delta with --target-epsilon (Gaussian: required); noisy-admm: the delta of its total (epsilon, "
                   "delta) (default: 1e-6). --delta is always per step, --target-delta always the total")
    p.add_argument("--sensitivity", choices=["sound", "paper"], default="sound", help="sound (default) or paper: the papers' data-dependent value, NOT private")
    p.add_argument("--adjacency", choices=["replace-one", "add-remove"], default="replace-one", help="neighbouring data sets (default: replace-one)")
    p.add_argument("--rounds", type=integer(1), metavar="T", help=f"ADMM rounds (default: {DEFAULT_ROUNDS} for a private run; a "
                   f"non-private one stops when its residuals are small, at most after {NONPRIVATE_ROUNDS})")
    p.add_argument("--local-updates", type=integer(1), default=1, metavar="E", help="local steps per round (default: 1)")
    p.add_argument("--rho-schedule", choices=["auto", "paper", "constant"], default="auto", help="auto (default): rho_t of the distributed-optimization paper's equation 73 "
                   "when private, a small constant otherwise")
    p.add_argument("--rho", type=real(0, lo_open=True), metavar="RHO", help="the constant penalty (with --rho-schedule constant)")
    p.add_argument("--eta", default="auto", metavar="ETA", help=f"proximal step: auto (default: private runs {DEFAULT_ETA:g}/R^2, "
                   "non-private runs backtracking on each client's curvature), a constant, or capped, sqrt, theorem")
    p.add_argument("--tol", type=real(0), metavar="TOL", help=f"stop when both relative residuals are <= TOL (default: {NONPRIVATE_TOL:g} "
                   "for nonprivate, off for private runs; 0: run every round)")
    p.add_argument("--eta-scale", type=real(0, lo_open=True), default=1.0, metavar="A", help="outp: the factor a of Huang et al.'s step size (default: 1)")
    p.add_argument("--trust-radius", type=real(0, lo_open=True), default=1.0, metavar="A", help="objt: the trust-region constant a (default: 1)")
    p.add_argument("--trust-schedule", choices=["constant", "inverse-square"], default="constant", help="objt: radius a (default) or a/t^2")
    p.add_argument("--seed", type=integer(0), metavar="N", help="seed the noise (a reproducible experiment: whoever knows N can replay it); "
                   "default: secret noise from OS entropy in each client")
    p.add_argument("--evaluate-every", type=integer(1), default=d["evaluate_every"].default, metavar="K", help="evaluate the model (and the ledger) every K rounds (default: 10)")
    p.add_argument("--no-evaluation", action="store_true", help="do not evaluate the model each round (no centralized reference)")
    p.add_argument("--no-reference", action="store_true", help="skip the centralized reference solve")
    p.add_argument("--backend", choices=list(BACKENDS), default="serial",
                   help="where the clients run: serial (default), process (worker processes), mpi (under mpiexec -n K: "
                   "rank 0 coordinates, ranks 1..K-1 host the clients); a seeded run is bit-identical on all three")
    p.add_argument("--workers", type=integer(1), metavar="N", help="process backend: worker processes (default: one per core)")
    p.add_argument("--checkpoint-every", type=integer(0), default=None, metavar="K",
                   help="checkpoint every K rounds into --out (0: never; default: by time, after the first round that ends 30 s "
                   "after the last checkpoint, and after the last round or when stopped)")
    p.add_argument("--out", metavar="DIR", type=Path, help="write history, summary, model and checkpoints to DIR (refused if DIR holds a run)")
    p.add_argument("--force", "--overwrite", dest="overwrite", action="store_true",
                   help="replace the run already in --out DIR and an existing --json file (refused without; with --resume: the --json file only)")
    p.add_argument("--resume", metavar="DIR", type=Path, help="continue the run saved in DIR (accepts --rounds to extend it)")
    p.add_argument("--json", metavar="PATH", type=Path, help="write the run summary as JSON")
    p.add_argument(
        "--audit", type=integer(1), metavar="N",
        help="instead of one run, audit the algorithm empirically (as powerdp audit, one training sample moved): "
        "N seeded runs on each of two neighbouring data sets; exit status 3 if the attack's lower bound on epsilon "
        "exceeds the ledger's claim (--json: the audit's result)",
    )
    p.add_argument("--audit-client", type=integer(0), default=0, metavar="P", help="the audited client (default: 0)")
    from .noisy_admm import add_arguments as add_noisy_admm_arguments

    add_noisy_admm_arguments(p)


def add_learn_parser(sub, add_common=None) -> argparse.ArgumentParser:
    """Register ``powerdp learn`` on the subparsers ``sub`` (``add_common(parser)`` adds the CLI's shared flags,
    e.g. -q/-v); returns its parser."""
    p = sub.add_parser(
        "learn", help="federated learning (logistic regression) with the same private ADMM",
        description=LEARN_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if add_common is not None:
        add_common(p)
    add_learn_arguments(p)
    p.set_defaults(func=cmd_learn)
    return p


def _write_json(path: Path, data) -> None:
    """--json PATH (atomically), or standard output for --json -: the CLI's one writer."""
    from .output import write_json

    write_json(path, data)


def config_from_args(args: argparse.Namespace) -> LearnConfig:
    if args.dataset is None:
        raise ConfigError("give a DATASET (or --resume DIR)")
    return LearnConfig(
        dataset=args.dataset, label=args.label, clients=args.clients, split=args.split, split_seed=args.split_seed,
        test_fraction=args.test_fraction, feature_range=args.feature_range, bounds=args.bounds, clip=args.clip, clip_l1=args.clip_l1,
        box=args.box, reg=args.reg, algorithm=args.algorithm, epsilon=args.epsilon, delta=args.delta,
        target_epsilon=args.target_epsilon, target_delta=args.target_delta, sensitivity=args.sensitivity,
        adjacency=args.adjacency, rounds=args.rounds, local_updates=args.local_updates, rho_schedule=args.rho_schedule,
        rho=args.rho, eta=args.eta, eta_scale=args.eta_scale, trust_radius=args.trust_radius, trust_schedule=args.trust_schedule, seed=args.seed,
        evaluate=not args.no_evaluation, evaluate_every=args.evaluate_every, checkpoint_every=args.checkpoint_every,
        tol=args.tol, backend=args.backend, workers=args.workers,
    )


def _resume_config(args: argparse.Namespace) -> LearnConfig:
    path = args.resume / "config.json"
    if not path.is_file():
        raise ConfigError(f"{args.resume} holds no run to resume ({path} is missing)")
    try:
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("algorithm") in RUNNERS:
            raise ConfigError(f"{args.resume} holds a {data['algorithm']} run, which keeps no checkpoint (it takes seconds): run it again")
        saved = LearnConfig.from_dict(data, source=str(path))
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    explicit = getattr(args, "_explicit", set())  # the destinations given on the command line
    allowed = ("rounds", "checkpoint_every", "evaluate_every", "quiet", "verbose", "json", "resume", "no_reference", "func",
               "backend", "workers", "overwrite")
    refused = sorted(d for d in explicit if d not in allowed)
    if refused:
        raise ConfigError(
            f"--resume {args.resume}: {', '.join('--' + d.replace('_', '-') for d in refused)} would change the saved run; "
            "a resumed run accepts only --rounds (to extend it), --checkpoint-every, --evaluate-every, --backend, --workers, "
            "--json, --force, --no-reference, -q, -v"
        )
    changes = {d: getattr(args, d) for d in ("rounds", "checkpoint_every", "evaluate_every", "backend", "workers") if d in explicit}
    return saved.replace(**changes) if changes else saved


def _legend(cfg: LearnConfig) -> str:
    """What the columns of the per-round lines mean: printed once, when the first round is done (after every input
    was read and checked, so an error never follows it)."""
    model = (f"objective = training objective Σ_p f_p at the global model (evaluation every {cfg.evaluate_every} rounds); "
             "test error = fraction misclassified; " if cfg.evaluate else "")
    return (f"columns: {model}feasibility = consensus residual ‖w − z‖₂"
            + ("; eps = total ε per client so far" if cfg.private else ""))


def _printer(args, cfg: LearnConfig):
    """A progress bar on a terminal (as powerdp run), else one line per evaluated round; None with -q. The legend
    of the columns comes first, with the first round."""
    if getattr(args, "quiet", False):
        return None
    shown = []

    def legend() -> None:
        if not shown:
            print(_legend(cfg), flush=True)
            shown.append(True)

    if is_terminal(sys.stderr) and not getattr(args, "verbose", False):
        from tqdm import tqdm

        bar = tqdm(total=cfg.rounds, desc=f"{cfg.algorithm} {cfg.dataset}", unit="round", file=sys.stderr)

        def update(row):
            legend()
            bar.update(1)
            if row["objective"] == row["objective"]:  # an evaluated round
                bar.set_postfix(obj=f"{row['objective']:.4g}", err=f"{row['test_error']:.3f}", eps=f"{row['epsilon_spent']:.3g}")
            if row["round"] >= cfg.rounds:
                bar.close()

        return update
    k = cfg.evaluate_every if cfg.evaluate else 1
    every = k if getattr(args, "verbose", False) else max(k, (cfg.rounds // 10) // k * k)  # rounds that are evaluated

    def line(row):
        t = row["round"]
        legend()
        if t == 1 or t % every == 0 or t == cfg.rounds:
            eps = f"  eps {row['epsilon_spent']:.4g}" if cfg.private else ""
            model = (f"  objective {row['objective']:.6g}  test error {row['test_error']:.4f}"
                     if row["objective"] == row["objective"] else "")  # --no-evaluation: not evaluated
            print(
                f"round {t:6d}{model}  feasibility {row['feasibility']:.3e}{eps}  {row['wall_s'] * 1000:.1f} ms",
                flush=True,
            )

    return line


def _refuse_label_of_bundled(args: argparse.Namespace) -> None:
    """--label names a column of the user's CSV; a bundled or generated data set has its own labels."""
    from ..apps.learning.amplified import SYNTHETIC

    if "label" in getattr(args, "_explicit", set()) and (args.dataset in BUNDLED or args.dataset == SYNTHETIC):
        raise ConfigError(f"--label {args.label}: not read for the bundled data set {args.dataset!r} (it names the label "
                          "column of a CSV file); drop it")


def cmd_learn(args: argparse.Namespace) -> int:
    from ..apps.learning.runner import run_federated

    if args.resume is not None and run_kind(args.resume) == "vertical":  # `learn --resume DIR` of a vertical run
        from .sharing import resume_vertical

        return resume_vertical(args)
    _refuse_label_of_bundled(args)
    if args.algorithm in RUNNERS:  # its own runner (not a per-round consensus): config.RUNNERS, its own command
        from importlib import import_module

        module, name = RUNNER_COMMANDS[args.algorithm].split(":")
        return getattr(import_module(f"{__package__}.{module}"), name)(args)
    if getattr(args, "_explicit", None):
        from .noisy_admm import refuse_foreign_flags

        refuse_foreign_flags(args, noisy=False)

    refuse_existing_output(args.json, "--json", args.overwrite)
    if args.resume is not None:
        if args.out is not None and args.out != args.resume:
            raise ConfigError("--resume DIR writes into DIR; drop --out")
        cfg = _resume_config(args)
        out = args.resume
    else:
        cfg = config_from_args(args)
        out = args.out
        if not cfg.private:
            refuse_unused_flags(args, LEARN_NOISE_FLAGS, f"--algorithm {cfg.algorithm}"
                                f"{'' if 'algorithm' in getattr(args, '_explicit', set()) else ' (the default)'} adds no noise")
    refuse_backend_flags(args, cfg.backend)
    quiet = getattr(args, "quiet", False)
    status = None if quiet else (lambda msg: print(f"powerdp: {msg}...", file=sys.stderr, flush=True))
    if args.audit is not None:
        if getattr(args, "_faults", None) is not None:  # test-only (powerdp.cli.main's faults argument)
            cfg = cfg.replace(faults=args._faults)
        return _audit(args, cfg, quiet)
    result = run_federated(
        cfg, out=out, resume=args.resume is not None, overwrite=args.overwrite and args.resume is None, progress=_printer(args, cfg), status=status,
        reference=not args.no_reference,
    )
    if result is None:  # an MPI rank that hosted clients: rank 0 reports
        return 0
    s = result.summary
    if args.json is not None:
        _write_json(args.json, s)
    if not quiet:
        _print_summary(s, cfg, out)
    return 0


#: ``powerdp audit`` flags and their ``powerdp learn`` names when the audited thing is a learning DATASET
AUDIT_FLAGS = {"--runs": "--audit", "--zone": "--audit-client", "--zones": "--clients"}
#: ``powerdp audit`` flags of a power-flow audit that a learning audit has no use for
AUDIT_ONLY = ("--bus", "--beta", "--jobs", "--force")
#: rounds of an audited learning run unless --rounds says otherwise (as powerdp audit's default)
AUDIT_ROUNDS = 5
AUDIT_RUNS = 50


def is_learning_dataset(name: str) -> bool:
    """Whether ``powerdp audit NAME`` audits learning: a bundled learning set or a .csv / .npz file."""
    return name in BUNDLED or Path(name).suffix.lower() in (".csv", ".npz")


def audit_as_learn(argv: list[str]) -> list[str]:
    """``powerdp audit DATASET ...`` as the ``powerdp learn DATASET ... --audit N`` it means, else ``argv`` unchanged.

    ``--runs N`` becomes ``--audit N`` (default 50), ``--zone P`` ``--audit-client P``, ``--zones P`` ``--clients P``;
    the rounds default to 5, as a power-flow audit's."""
    try:
        at = next(i for i, a in enumerate(argv) if not a.startswith("-"))
    except StopIteration:
        return argv
    rest = argv[at + 1:]
    if argv[at] != "audit" or not rest or rest[0].startswith("-") or not is_learning_dataset(rest[0]):
        return argv
    out = [*argv[:at], "learn"]
    for a in rest:
        flag, eq, value = a.partition("=")
        if flag in AUDIT_ONLY:
            raise ConfigError(f"{flag}: a power-flow audit flag; powerdp audit {rest[0]} audits learning (powerdp learn --audit)")
        out.append(AUDIT_FLAGS.get(flag, flag) + eq + value)
    if "--audit" not in out:
        out += ["--audit", str(AUDIT_RUNS)]
    if "--rounds" not in out and not any(a.startswith("--rounds=") for a in out):
        out += ["--rounds", str(AUDIT_ROUNDS)]
    return out


def _audit(args, cfg: LearnConfig, quiet: bool) -> int:
    from ..studies.learning_audit import run_learning_audit

    res = run_learning_audit(cfg, runs=args.audit, client=args.audit_client)
    if args.json is not None:
        _write_json(args.json, res)
    claim = res["epsilon_total"]
    line = (f"audit {res['verdict'].upper()}: lower bound ε ≥ {res['epsilon_lower_bound']:.3f} from {args.audit} + {args.audit} runs; "
            f"claimed total ε {claim:.4g}" if claim is not None else
            f"audit: not private; lower bound ε ≥ {res['epsilon_lower_bound']:.3f} (what a run reveals)")
    if res["faults"]:
        line += f" ({res['faults']})"
    print(("powerdp: " if res["verdict"] == "failed" else "") + line, file=sys.stderr if res["verdict"] == "failed" else sys.stdout)
    return 3 if res["verdict"] == "failed" else 0


def _print_summary(s: dict, cfg: LearnConfig, out) -> None:
    print(f"learned       {s['dataset']}: {s['train_samples']} samples over {s['clients']} clients ({s['split']}), "
          f"{s['features']} features, {s['classes']} classes, {s['rounds']} rounds, {cfg.algorithm}")
    print("── the coordinator's view (what a deployment publishes) ──")
    print(f"residual      {s['final_feasibility']:.3e} (consensus of the released models)" if s.get("final_feasibility") is not None
          else "residual      none (no round run)")
    if cfg.private:
        eps = max(s["epsilon_total"].values())
        label = " (papers' data-dependent sensitivity: NOT private)" if cfg.sensitivity == "paper" else ""
        print(f"privacy       total ε per client {eps:.4g} (ε̄ {s['epsilon_per_step_setting']:.4g} per step, {cfg.adjacency}){label}")
    print("── the simulation's evaluation (needs every client's data; a deployment cannot compute it) ──")
    if s["final_objective"] == s["final_objective"]:
        print(f"objective     {s['final_objective']:.6g} (training objective at the global model)")
        print(f"test error    {s['final_test_error']:.4f}")
    else:
        print("objective     not evaluated (--no-evaluation)")
    if s.get("centralized_objective") is not None:
        print(f"centralized   objective {s['centralized_objective']:.6g} (relative gap {s['relative_gap_to_centralized']:+.2e}), "
              f"test error {s['centralized_test_error']:.4f}")
    pre = s["preprocessing"]
    print(f"preprocessing {pre['feature_scaling']}; rows clipped to ||x||_2 <= {pre['R2']:g}")
    if out is not None:
        print(f"results       {out}  (coordinator_view/ is what a deployment publishes; simulation_evaluation/ is not)")


def learning_sweep_file(path: Path) -> bool:
    """Whether the sweep file ``path`` describes learning runs (it has a ``[learn]`` table)."""
    from ..studies.learning_sweep import is_learning_sweep
    from ..studies.sweep import load_toml

    return is_learning_sweep(load_toml(path))


def run_learning_sweep_command(args: argparse.Namespace) -> int:
    """``powerdp sweep FILE --out DIR`` for a learning sweep file (serial; every run is seconds)."""
    from ..studies.learning_sweep import run_learning_sweep
    from ..studies.sweep import load_toml

    quiet = getattr(args, "quiet", False)

    def progress(run, err, done, total):
        if not quiet:
            print(f"[{done}/{total}] {run}" + (f"  FAILED: {err}" if err else ""), flush=True)

    runs = run_learning_sweep(load_toml(args.config), args.out, source=str(args.config), progress=progress)
    if not quiet:
        print(f"{len(runs)} learning runs in {args.out} (runs.csv, rounds.csv); powerdp plot {args.out} draws them")
    return 0
