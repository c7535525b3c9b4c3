"""``powerdp run``: the private distributed solve from the command line."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from .admm.algorithms import compose
from .admm.config import ADJACENCIES, ALGORITHMS, NOISE_SUPPORTS, RunConfig
from .admm.perturbations import PERTURBATIONS
from .admm.updates import UPDATES
from .cli import add_verbosity
from .errors import ConfigError
from .opf.objectives import OBJECTIVES
from .privacy import MECHANISMS

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

    The bundled cases come with bundled partitions (case14 into 3 zones, case118
    into its 3 published areas): with a bundled case, --zones 3 and no --method,
    that partition is used; any other case, zone count or an explicit --method
    gives an automatic partition. config.json and partition.csv record the zones used.

    The run prints its setup stages, one line per round (or a progress bar) and a
    summary; --out DIR keeps the history, the final point, the privacy report and
    checkpoints. An existing run in DIR is not overwritten unless --overwrite is
    given; --resume DIR continues a run that stopped, and accepts only flags that
    cannot change its results (--rounds to extend it, --backend, --workers,
    --rank-timeout, --checkpoint-every, -q/-v, --json, --no-reference).

    Ctrl-C or SIGTERM stops after the round in progress, with a checkpoint (a
    second Ctrl-C stops at once): --resume DIR continues.

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
    add_verbosity(p)
    zones = p.add_mutually_exclusive_group()
    zones.add_argument("--zones", type=int, metavar="N", help="number of zones (default 3)")
    zones.add_argument("--partition", metavar="FILE", help="a bus,zone CSV file, or 'area' / 'zone' (bus columns)")
    p.add_argument("--allow-disconnected", action="store_true", help="accept given zones made of several islands (e.g. a case's native areas)")
    p.add_argument(
        "--method",
        default="auto",
        choices=["auto", "modularity", "kernighan_lin", "spectral"],
        help="partition method (default: auto, the bundled partition of a bundled case when there is one, else modularity)",
    )
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
    p.add_argument(
        "--rho",
        type=float,
        default=None,
        help="ADMM penalty (default: 100; for --algorithm exact --objective cost, 0.25 x the median marginal cost in $/h per p.u.)",
    )
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
    p.add_argument("--out", metavar="DIR", type=Path, help="write history, summary, solutions and checkpoints to DIR (refused if DIR holds a run)")
    p.add_argument("--overwrite", action="store_true", help="replace the run already in --out DIR")
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
    add_verbosity(ps)
    ps.add_argument("config", metavar="CONFIG", type=Path, help="sweep TOML file")
    ps.add_argument("--out", metavar="DIR", type=Path, required=True, help="output directory")
    ps.add_argument("--jobs", type=int, help="parallel runs (default: one per core)")
    ps.add_argument("--plot", action="store_true", help="draw the figures when done (as powerdp plot DIR)")
    ps.add_argument(
        "--overwrite",
        action="store_true",
        help="when DIR holds runs made with other settings than the file's, run them again (refused otherwise)",
    )
    ps.set_defaults(func=cmd_sweep)

    pl = sub.add_parser(
        "plot",
        help="draw the figures of a sweep (or run) directory",
        description="Draw trajectories, privacy-utility curves, partition sensitivity and network maps "
        "of a sweep directory, or of one run's --out directory, as PNG files (default: DIR/figures).",
    )
    add_verbosity(pl)
    pl.add_argument("directory", metavar="DIR", type=Path, help="a powerdp sweep output directory, or one run's directory")
    pl.add_argument("--out", metavar="FIGDIR", type=Path, help="where to write the PNG files")
    pl.set_defaults(func=cmd_plot)


FLAG_TO_FIELD = {
    "zones": "zones", "partition": "partition", "method": "partition_method", "algorithm": "algorithm",
    "objective": "objective", "epsilon": "epsilon", "delta": "delta", "beta": "beta", "sensitivity": "sensitivity",
    "adjacency": "adjacency", "noise_on": "noise_on",
    "rounds": "rounds", "local_updates": "local_updates", "rho": "rho", "rho_schedule": "rho_schedule", "eta": "eta",
    "seed": "seed", "backend": "backend", "workers": "workers", "rank_timeout": "rank_timeout", "flows": "flows", "convention": "convention",
    "checkpoint_every": "checkpoint_every", "case": "case", "allow_disconnected": "allow_disconnected",
    "update": "algorithm", "perturbation": "algorithm", "mechanism": "algorithm",
    "tol": ("tol_primal", "tol_dual"), "no_warm_start": "warm_start", "no_evaluation": "evaluate", "ipopt_option": "ipopt_options",
}
# flags that --resume accepts: they cannot change the results of the run
RESUME_FLAGS = {"rounds", "backend", "workers", "rank_timeout", "checkpoint_every", "resume", "json", "no_reference", "quiet", "verbose"}


def _flag(dest: str) -> str:
    return "CASE" if dest == "case" else "--" + dest.replace("_", "-")


def _field_values(args: argparse.Namespace, dest: str) -> dict:
    """The RunConfig field(s) and value(s) of one run flag."""
    if dest == "tol":
        return {"tol_primal": args.tol, "tol_dual": args.tol}
    if dest == "no_warm_start":
        return {"warm_start": not args.no_warm_start}
    if dest == "no_evaluation":
        return {"evaluate": not args.no_evaluation}
    if dest == "ipopt_option":
        return {"ipopt_options": _ipopt_options(args.ipopt_option)}
    if FLAG_TO_FIELD.get(dest) == "algorithm":
        return {"algorithm": _algorithm(args)}
    return {FLAG_TO_FIELD[dest]: getattr(args, dest)}


def _algorithm(args: argparse.Namespace) -> str:
    """--algorithm with --update / --perturbation / --mechanism applied (an alias where one exists)."""
    if args.update is None and args.perturbation is None and args.mechanism is None:
        return args.algorithm
    return compose(args.algorithm, update=args.update, perturbation=args.perturbation, mechanism=args.mechanism)


def _config(args: argparse.Namespace) -> RunConfig:
    explicit = getattr(args, "_explicit", set())
    if args.resume is not None:
        return _resume_config(args, explicit)
    if getattr(args, "config", None) is not None:
        from .admm.configfile import check_types
        from .sweep import load_toml

        data = load_toml(args.config)
        unknown = sorted(set(data) - {"run"})
        if unknown:
            raise ConfigError(f"{args.config}: unknown table(s) {', '.join(unknown)}; a run file has one [run] table")
        fields = dict(data.get("run", {}))
        check_types(fields, str(args.config), "run")
        for dest in sorted(explicit & set(FLAG_TO_FIELD)):  # flags given on the command line override the file
            fields.update(_field_values(args, dest))
        if explicit & {"update", "perturbation", "mechanism"}:  # replace choices of the file's algorithm
            base = args.algorithm if "algorithm" in explicit else fields.get("algorithm", "objl")
            fields["algorithm"] = compose(base, update=args.update, perturbation=args.perturbation, mechanism=args.mechanism)
        if args.zones is not None and "partition" not in explicit:
            fields["partition"] = None
        if args.partition is not None and "zones" not in explicit:
            fields["zones"] = None
        try:
            return RunConfig.from_dict(fields, source=str(args.config))
        except ConfigError as exc:
            raise ConfigError(f"{args.config}: {exc}" if str(args.config) not in str(exc) else str(exc)) from None
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


def _resume_config(args: argparse.Namespace, explicit: set[str]) -> RunConfig:
    """The saved run's configuration; only flags that cannot change its results may be given."""
    from .admm.runner import load_config

    cfg = load_config(args.resume)
    saved = cfg.to_dict()

    def changes_run(dest: str) -> bool:
        if dest not in FLAG_TO_FIELD:
            return True  # --config, --overwrite
        if dest == "method" and saved.get("partition") is not None:
            return args.method != "auto"  # the saved run's partition was given or bundled
        return any(saved.get(f) != v for f, v in _field_values(args, dest).items())

    refused = sorted(
        d for d in explicit - RESUME_FLAGS if (d in FLAG_TO_FIELD or d in ("config", "overwrite")) and changes_run(d)
    )
    if refused:
        parts = []
        for dest in refused:
            fields = [f for f in _field_values(args, dest)] if dest in FLAG_TO_FIELD else []
            was = ", ".join(f"{f} = {saved[f]!r}" for f in fields if f in saved)
            parts.append(_flag(dest) + (f" (saved: {was})" if was else ""))
        raise ConfigError(
            f"--resume {args.resume}: {'; '.join(parts)} would change the saved run; a resumed run accepts only "
            "--rounds (to extend it), --backend, --workers, --rank-timeout, --checkpoint-every, --json, --no-reference, -q, -v"
        )
    changes = {}
    for dest in ("rounds", "backend", "workers", "rank_timeout", "checkpoint_every"):
        if dest in explicit:
            changes.update(_field_values(args, dest))
    return cfg.replace(**changes) if changes else cfg


def _ipopt_options(items: list[str]) -> dict:
    from .opf.solvers import _option_value

    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--ipopt-option {item!r}: expected NAME=VALUE")
        name, value = item.split("=", 1)
        out[name.strip()] = _option_value(value.strip())
    return out


ROUND_LEGEND = {
    "shedding": "objective Σ_p f_p = shedding Σ(p.u.²)",
    "cost": "objective Σ_p f_p = generation cost ($/h)",
}


def _round_legend(cfg: RunConfig) -> str:
    """What the columns of the per-round lines mean (printed once, before round 1)."""
    eps = ""
    if cfg.private:
        delta = f", δ {cfg.delta:g}" if cfg.mechanism == "gaussian" else ", δ 0"
        eps = f"; eps = total ε spent so far per zone, largest over zones (ε {cfg.epsilon:g} per local step{delta})"
    return (
        f"columns: {ROUND_LEGEND[cfg.objective]}; feasibility = consensus residual ‖w − Bz‖₂ (p.u.); "
        f"dual = dual residual ρ‖w − w_prev‖₂{eps}"
    )


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
    shown = []

    def line(row):
        t = row["round"]
        if not shown:
            print(_round_legend(cfg), flush=True)
            shown.append(True)
        if t == 1 or t % every == 0 or t == cfg.rounds:
            eps = f"  eps {row['epsilon_spent']:.4g}" if cfg.private else ""
            print(
                f"round {t:5d}  objective {row['objective']:.6g}  feasibility {row['feasibility']:.3e}  "
                f"dual {row['dual_residual']:.3e}{eps}  {row['wall_s'] * 1000:.0f} ms",
                flush=True,
            )

    return line, None


def _status_printer(args):
    """Setup stages (loading, partition, reference solve, agents) on stderr, unless -q."""
    if args.quiet:
        return None

    def say(msg: str) -> None:
        print(f"powerdp: {msg}...", file=sys.stderr, flush=True)

    return say


def cmd_sweep(args: argparse.Namespace) -> int:
    from .admm.outdir import ensure_dir
    from .sweep import load_sweep, run_sweep

    spec = load_sweep(args.config)
    ensure_dir(args.out)
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
        runs = run_sweep(spec, args.out, jobs=args.jobs, progress=progress, overwrite=args.overwrite)
    except KeyboardInterrupt:
        from .errors import Interrupted

        raise Interrupted(
            f"interrupted; finished runs are kept in {args.out}, and the same command resumes the others from their checkpoints"
        ) from None
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


def _check_json_path(args) -> None:
    if args.json is not None:
        from .cli import _check_output_file

        _check_output_file(args.json, "--json")


def cmd_run(args: argparse.Namespace) -> int:
    from .admm.runner import run_distributed

    cfg = _config(args)
    if cfg.backend == "mpi":
        from .admm.backends.mpi import rank

        if rank() != 0:
            run_distributed(cfg)  # serve this rank's agents until rank 0 closes the run
            return 0
    if args.resume is not None and args.out is not None and args.out != args.resume:
        raise ConfigError(f"--resume {args.resume} continues the run in its own directory; do not give --out {args.out}")
    _check_json_path(args)
    out = args.resume if args.resume is not None else args.out
    progress, bar = _progress_printer(args, cfg)
    try:
        reference = not args.no_reference and cfg.evaluate  # without evaluation there is no objective to compare
        result = run_distributed(
            cfg, out=out, resume=args.resume is not None, progress=progress, reference=reference,
            overwrite=args.overwrite, status=_status_printer(args),
        )
    finally:
        if bar is not None:
            bar.close()
    s = result.summary
    cfg = result.config
    if not args.quiet:
        resumed = s.get("resumed_from")
        if resumed is not None and resumed >= s["rounds"]:
            print(
                f"nothing to run: {out} already has {s['rounds']} rounds (of {cfg.rounds}); "
                f"--rounds N with N > {s['rounds']} extends it"
            )
        _print_summary(s, cfg, out, result.privacy)
    if args.json:
        result.to_json(args.json)
    return 0


def _print_summary(s: dict, cfg: RunConfig, out, privacy: dict) -> None:
    unit = "$/h" if cfg.objective == "cost" else "Σ(p.u.²)"
    what = "generation cost" if cfg.objective == "cost" else "shedding"
    print(f"case          {s['case']}  ({s['n_zones']} zones, {s['n_shared']} shared variables, backend {s['backend']})")
    print(f"algorithm     {cfg.algorithm}  objective {cfg.objective}  ρ {cfg.rho:g}  rounds {s['rounds']} ({s['stopped']})")
    if s["final_objective"] is not None and s["final_objective"] == s["final_objective"]:
        print(f"objective     {what} {s['final_objective']:.6g} {unit} (Σ over zones of the true local objective)")
    else:
        print("objective     not evaluated (--no-evaluation: each zone keeps its own)")
    if s["final_feasibility"] is not None:
        print(f"feasibility   consensus residual ‖w − Bz‖₂ = {s['final_feasibility']:.3e} p.u. (0 when the zones agree)")
        print(f"dual          dual residual ρ‖w − w_prev‖₂ = {s['final_dual_residual']:.3e}")
    mv = s.get("max_violation")
    if mv is not None and mv == mv:
        print(f"violation     largest violation of a zone's own constraints by its released point: {mv:.2e} p.u.")
    if s.get("centralized_objective") is not None:
        rel = s.get("relative_gap_to_centralized")
        rel_txt = f" ({rel:+.2e} relative)" if rel is not None else ""
        print(f"centralized   {s['centralized_objective']:.6g} {unit}  gap {s['gap_to_centralized']:+.4g}{rel_txt}")
    if cfg.private:
        parts = []
        for z, e in s["epsilon_total"].items():
            head = (privacy.get(int(z)) or {}).get("headline") or {}
            d = head.get("delta")
            parts.append(f"zone {z}: ε {e:.4g}" + (f", δ {d:.3g}" if d is not None else ""))
        sources = sorted({str(((privacy.get(int(z)) or {}).get("headline") or {}).get("source")) for z in s["epsilon_total"]} - {"None"})
        how = f"; accountant: {', '.join(sources)}" if sources else ""
        print(
            f"privacy       total spent per zone over the whole run (ε {cfg.epsilon:g} per local step{how}): " + "; ".join(parts)
        )
    print(f"time          {s['wall_s']:.2f} s ({s['ipopt_s']:.2f} s in Ipopt, {s['solves']} local solves), setup {s['setup_s']:.2f} s")
    if out is not None:
        print(f"results       {out}")
