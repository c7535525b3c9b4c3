"""``powerdp run``: the private distributed solve from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from .algorithms import compose
from .config import ADJACENCIES, ALGORITHMS, NOISE_SUPPORTS, RunConfig
from .objectives import OBJECTIVES
from .perturbations import PERTURBATIONS
from .privacy import MECHANISMS
from .updates import UPDATES
from .errors import ConfigError

DESCRIPTION = textwrap.dedent(
    """\
    Split CASE into zones and run the consensus ADMM of SPEC section 5: every zone
    (agent) solves its local SOC-relaxed problem with Ipopt and releases only the
    values of the variables it shares with its neighbours; a coordinator averages
    them. Differentially private algorithms perturb each local step.

    algorithms:
      objl, objg     objective perturbation, Laplace / Gaussian noise (the paper's method):
                     every released point is feasible for the zone
      outl, outg     output perturbation (baseline): noise added to each local solution
      nonprivate     the same linearized update without noise
      exact          non-private ADMM with the exact local objective (reference)
      objt           trust-region update (no proximal term; a box of radius a/t^2 around
                     the last iterate), Laplace objective perturbation

    An algorithm is three choices, update rule x perturbation x mechanism; the names
    above stand for the usual combinations. --update, --perturbation and --mechanism
    replace one choice of --algorithm (their choices are listed below), and any
    combination can be named UPDATE/PERTURBATION/MECHANISM in a config file.

    With a bundled case and --zones 3 the bundled 3-zone partition is used (for
    case118 the published 3-area partition). The run prints one line per round
    (or a progress bar) and a summary; --out DIR keeps the history, the final
    point, the privacy report and checkpoints, and --resume DIR continues a run
    that stopped.

    Every zone works in the paper's coordinates: its variables hold one balance
    variable per own bus and load kind, so its loads enter only the gradient
    entries of those variables, each with weight 2: one load value moving by
    beta moves the gradient by 2*beta (--adjacency bus: both loads of a bus).

    Defaults are the best measured settings (capped step size min(0.95, 1/sqrt(t)),
    sound sensitivities, warm-started local solves). The paper's experiment is
    --eta sqrt --rho 100 --rounds 100.
    """
)


def add_run_parser(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run the (private) distributed solve",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("case", metavar="CASE", nargs="?", help="bundled case name, MATPOWER .m file, or pandapower:NAME")
    zones = p.add_mutually_exclusive_group()
    zones.add_argument("--zones", type=int, metavar="N", help="number of zones (default 3)")
    zones.add_argument("--partition", metavar="FILE", help="a bus,zone CSV file, or 'area' / 'zone' (bus columns)")
    p.add_argument("--allow-disconnected", action="store_true", help="accept given zones made of several islands (e.g. a case's native areas)")
    p.add_argument("--method", default="modularity", choices=["modularity", "kernighan_lin", "spectral"], help="automatic partition method (default: modularity)")
    p.add_argument("--algorithm", choices=ALGORITHMS, default="objl", help="algorithm (default: objl)")
    p.add_argument("--update", choices=list(UPDATES), help="replace the algorithm's update rule (e.g. --algorithm objg --update trust-region)")
    p.add_argument("--perturbation", choices=list(PERTURBATIONS), help="replace the algorithm's perturbation")
    p.add_argument("--mechanism", choices=list(MECHANISMS), help="replace the algorithm's noise mechanism")
    p.add_argument("--objective", choices=list(OBJECTIVES), default="shedding", help="local objective (default: shedding; cost only for non-private runs)")
    p.add_argument("--epsilon", type=float, default=0.1, help="privacy budget per local step (default: 0.1)")
    p.add_argument("--delta", type=float, default=1e-2, help="delta of the Gaussian mechanism (default: 0.01)")
    p.add_argument("--beta", type=float, default=0.01, help="adjacency: one load changes by at most beta p.u. (default: 0.01)")
    p.add_argument("--sensitivity", choices=["sound", "paper"], default="sound", help="sound bounds (default) or the paper's values (reproduction only)")
    p.add_argument(
        "--adjacency",
        choices=list(ADJACENCIES),
        default="value",
        help="neighbouring load data: one load value moves by beta (default, the paper's), or one whole bus (pd and qd both)",
    )
    p.add_argument(
        "--noise-on",
        choices=list(NOISE_SUPPORTS),
        default=None,
        help="objective perturbation: noise on the balance variables only, the entries of the gradient that hold loads "
        "(data, the default), or on every variable as the paper draws it (all)",
    )
    p.add_argument("--rounds", type=int, default=100, metavar="T", help="ADMM rounds (default: 100)")
    p.add_argument("--local-updates", type=int, default=1, metavar="E", help="local steps per round (default: 1)")
    p.add_argument("--rho", type=float, default=100.0, help="ADMM penalty (default: 100)")
    p.add_argument("--rho-schedule", choices=["constant", "adaptive"], default="constant", help="constant or residual-balancing penalty (non-private runs)")
    p.add_argument("--eta", default="capped", help="step size: capped (default), sqrt, theorem, or a constant")
    p.add_argument("--flows", choices=["variables", "expressions"], default="variables", help="branch flows in the algorithm's variables (default, as the paper) or eliminated")
    p.add_argument("--convention", choices=["powermodels", "matpower"], default="powermodels", help="data convention (default: powermodels)")
    p.add_argument("--seed", type=int, default=0, help="seed of the noise (default: 0)")
    p.add_argument("--backend", choices=["serial", "process", "mpi"], default="serial", help="where the agents run (default: serial)")
    p.add_argument("--workers", type=int, help="worker processes of the process backend (default: one per core, at most one per zone)")
    p.add_argument(
        "--rank-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="mpi backend: report a rank as lost after this long without its heartbeat (default: 60)",
    )
    p.add_argument("--tol", type=float, default=0.0, help="stop when primal and dual residuals fall below TOL (default: run all rounds)")
    p.add_argument("--no-warm-start", action="store_true", help="start every local solve cold from the flat point")
    p.add_argument(
        "--ipopt-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra Ipopt option for every local solve (repeatable); Ipopt is silent unless asked, e.g. --ipopt-option print_level=5",
    )
    p.add_argument("--checkpoint-every", type=int, default=10, metavar="K", help="checkpoint every K rounds into --out (default: 10; 0: never)")
    p.add_argument("--no-reference", action="store_true", help="skip the centralized solve used to report the gap")
    p.add_argument(
        "--no-evaluation",
        action="store_true",
        help="deployment mode: zones report only released values, solver statistics and their privacy spend; the "
        "history's objective and max_violation stay empty and each zone writes its own solution to DIR/zones/",
    )
    p.add_argument("--out", metavar="DIR", type=Path, help="write history, summary, solutions and checkpoints to DIR")
    p.add_argument("--resume", metavar="DIR", type=Path, help="continue the run saved in DIR from its last checkpoint")
    p.add_argument("--json", metavar="PATH", type=Path, help="write the run summary as JSON")
    p.add_argument("--config", metavar="FILE", type=Path, help="read the run from a TOML file ([run] table of RunConfig keys); flags given explicitly override it")
    p.set_defaults(func=cmd_run)

    ps = sub.add_parser(
        "sweep",
        help="run a grid of distributed runs described by a TOML file",
        description=textwrap.dedent(
            """\
            Run every combination of cases x partitions x algorithms x epsilons x local
            updates x seeds of a sweep file ([sweep] lists, [run] shared settings; see
            examples/sweep_small.toml) in parallel. Each run is saved in DIR/runs/RUN_ID;
            finished runs are skipped, so an interrupted sweep resumes. DIR/rounds.csv has
            one row per run and round, DIR/runs.csv one row per run. The whole file is
            validated, and every case and partition loaded, before any solve starts.
            Under mpiexec (python -m mpi4py.futures -m powerdp sweep ...) the runs go to
            MPI ranks.
            """
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ps.add_argument("config", metavar="CONFIG", type=Path, help="sweep TOML file")
    ps.add_argument("--out", metavar="DIR", type=Path, required=True, help="output directory")
    ps.add_argument("--jobs", type=int, help="parallel runs (default: one per core)")
    ps.add_argument("--plot", action="store_true", help="draw the figures when done (as powerdp plot DIR)")
    ps.set_defaults(func=cmd_sweep)

    pl = sub.add_parser(
        "plot",
        help="draw the figures of a sweep (or run) directory",
        description="Draw trajectories, privacy-utility curves, partition sensitivity and network maps "
        "of a sweep directory as PNG files (default: DIR/figures).",
    )
    pl.add_argument("directory", metavar="DIR", type=Path, help="a powerdp sweep output directory")
    pl.add_argument("--out", metavar="FIGDIR", type=Path, help="where to write the PNG files")
    pl.set_defaults(func=cmd_plot)


def _explicit(args: argparse.Namespace, parser_defaults: dict) -> dict:
    return {k: v for k, v in vars(args).items() if k in parser_defaults and v != parser_defaults[k]}


FLAG_TO_FIELD = {
    "zones": "zones", "partition": "partition", "method": "partition_method", "algorithm": "algorithm",
    "objective": "objective", "epsilon": "epsilon", "delta": "delta", "beta": "beta", "sensitivity": "sensitivity",
    "adjacency": "adjacency", "noise_on": "noise_on",
    "rounds": "rounds", "local_updates": "local_updates", "rho": "rho", "rho_schedule": "rho_schedule", "eta": "eta",
    "seed": "seed", "backend": "backend", "workers": "workers", "rank_timeout": "rank_timeout", "flows": "flows", "convention": "convention",
    "checkpoint_every": "checkpoint_every", "case": "case", "allow_disconnected": "allow_disconnected",
}


def _algorithm(args: argparse.Namespace) -> str:
    """--algorithm with --update / --perturbation / --mechanism applied (an alias where one exists)."""
    if args.update is None and args.perturbation is None and args.mechanism is None:
        return args.algorithm
    return compose(args.algorithm, update=args.update, perturbation=args.perturbation, mechanism=args.mechanism)


def _config(args: argparse.Namespace) -> RunConfig:
    if getattr(args, "config", None) is not None:
        from .sweep import load_toml

        data = load_toml(args.config)
        unknown = sorted(set(data) - {"run"})
        if unknown:
            raise ConfigError(f"{args.config}: unknown table(s) {', '.join(unknown)}; a run file has one [run] table")
        fields = dict(data.get("run", {}))
        defaults = args._defaults
        for flag, value in vars(args).items():
            if flag in FLAG_TO_FIELD and flag in defaults and value != defaults[flag]:
                fields[FLAG_TO_FIELD[flag]] = value
        if args.case is not None:
            fields["case"] = args.case
        if args.update is not None or args.perturbation is not None or args.mechanism is not None:
            fields["algorithm"] = compose(
                fields.get("algorithm", "objl"), update=args.update, perturbation=args.perturbation, mechanism=args.mechanism
            )
        if args.no_warm_start:
            fields["warm_start"] = False
        if args.no_evaluation:
            fields["evaluate"] = False
        return RunConfig.from_dict(fields, source=str(args.config))
    if args.resume is not None:
        from .runner import load_config

        cfg = load_config(args.resume)
        if args.rounds != 100:  # allow extending a finished run
            cfg = cfg.replace(rounds=args.rounds)
        return cfg
    if args.case is None:
        raise ConfigError("give a CASE (or --resume DIR)")
    return RunConfig(
        case=args.case,
        zones=args.zones if args.zones is not None else (None if args.partition else 3),
        partition=args.partition,
        partition_method=args.method,
        allow_disconnected=args.allow_disconnected,
        algorithm=_algorithm(args),
        objective=args.objective,
        epsilon=args.epsilon,
        delta=args.delta,
        beta=args.beta,
        sensitivity=args.sensitivity,
        adjacency=args.adjacency,
        noise_on=args.noise_on,
        rounds=args.rounds,
        local_updates=args.local_updates,
        rho=args.rho,
        rho_schedule=args.rho_schedule,
        eta=args.eta,
        seed=args.seed,
        backend=args.backend,
        workers=args.workers,
        rank_timeout=args.rank_timeout,
        flows=args.flows,
        convention=args.convention,
        tol_primal=args.tol,
        tol_dual=args.tol,
        warm_start=not args.no_warm_start,
        evaluate=not args.no_evaluation,
        checkpoint_every=args.checkpoint_every,
        ipopt_options=_ipopt_options(args.ipopt_option),
    )


def _ipopt_options(items: list[str]) -> dict:
    from .solver import _option_value

    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--ipopt-option {item!r}: expected NAME=VALUE")
        name, value = item.split("=", 1)
        out[name.strip()] = _option_value(value.strip())
    return out


def _progress_printer(args, cfg: RunConfig):
    if args.quiet:
        return None, None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    if tqdm is not None and not args.verbose and sys.stderr.isatty():
        bar = tqdm(total=cfg.rounds, desc=f"{cfg.algorithm} {cfg.case}", unit="round", file=sys.stderr)

        def update(row):
            bar.update(1)
            bar.set_postfix(obj=f"{row['objective']:.3g}", feas=f"{row['feasibility']:.2g}", eps=f"{row['epsilon_spent']:.3g}")

        return update, bar
    every = 1 if args.verbose else max(1, cfg.rounds // 10)

    def line(row):
        t = row["round"]
        if t == 1 or t % every == 0 or t == cfg.rounds:
            print(
                f"round {t:5d}  objective {row['objective']:.6g}  feasibility {row['feasibility']:.3e}  "
                f"dual {row['dual_residual']:.3e}  eps {row['epsilon_spent']:.4g}  {row['wall_s'] * 1000:.0f} ms",
                flush=True,
            )

    return line, None


def cmd_sweep(args: argparse.Namespace) -> int:
    from .sweep import load_sweep, run_sweep

    spec = load_sweep(args.config)
    n = len(spec.configs())
    if not args.quiet:
        print(f"sweep {args.config}: {n} runs -> {args.out}")
    bar = None
    if not args.quiet:
        try:
            from tqdm import tqdm

            bar = tqdm(total=n, desc="sweep", unit="run", file=sys.stderr, disable=not sys.stderr.isatty())
        except ImportError:  # pragma: no cover
            bar = None

    def progress(run, err, done, total):
        if bar is not None and not bar.disable:
            bar.n = done
            bar.set_postfix_str(run)
            bar.refresh()
        elif not args.quiet:
            print(f"[{done}/{total}] {run}" + (f"  FAILED: {err}" if err else ""), flush=True)

    try:
        runs = run_sweep(spec, args.out, jobs=args.jobs, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    failed = (args.out / "errors.json").is_file()
    if not args.quiet:
        print(f"{len(runs)} runs finished; tables {args.out / 'rounds.csv'} and {args.out / 'runs.csv'}")
        if failed:
            print(f"some runs failed: see {args.out / 'errors.json'}")
    if args.plot:
        from .plots import plot_sweep

        for p in plot_sweep(args.out):
            if not args.quiet:
                print(f"figure {p}")
    return 1 if failed else 0


def cmd_plot(args: argparse.Namespace) -> int:
    from .plots import plot_sweep

    for p in plot_sweep(args.directory, args.out):
        if not args.quiet:
            print(f"figure {p}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .runner import run_distributed

    cfg = _config(args)
    if cfg.backend == "mpi":
        from .mpi import rank

        if rank() != 0:
            run_distributed(cfg)  # serve this rank's agents until rank 0 closes the run
            return 0
    out = args.resume if args.resume is not None else args.out
    progress, bar = _progress_printer(args, cfg)
    try:
        reference = not args.no_reference and cfg.evaluate  # without evaluation there is no objective to compare
        result = run_distributed(cfg, out=out, resume=args.resume is not None, progress=progress, reference=reference)
    finally:
        if bar is not None:
            bar.close()
    s = result.summary
    if not args.quiet:
        print(f"case          {s['case']}  ({s['n_zones']} zones, {s['n_shared']} shared variables, backend {s['backend']})")
        print(f"algorithm     {cfg.algorithm}  objective {cfg.objective}  rounds {s['rounds']} ({s['stopped']})")
        print(f"final         objective {s['final_objective']:.6g}  feasibility {s['final_feasibility']:.3e}  max violation {s['max_violation']:.2e}")
        if s.get("centralized_objective") is not None:
            rel = s.get("relative_gap_to_centralized")
            rel_txt = f" ({rel:+.2e} relative)" if rel is not None else ""
            print(f"centralized   {s['centralized_objective']:.6g}  gap {s['gap_to_centralized']:+.4g}{rel_txt}")
        if cfg.private:
            eps = s["epsilon_total"]
            print(f"privacy       epsilon spent per zone: " + ", ".join(f"{z}: {e:.4g}" for z, e in eps.items()))
        print(f"time          {s['wall_s']:.2f} s ({s['ipopt_s']:.2f} s in Ipopt, {s['solves']} local solves), setup {s['setup_s']:.2f} s")
        if out is not None:
            print(f"results       {out}")
    if args.json:
        result.to_json(args.json)
    return 0
