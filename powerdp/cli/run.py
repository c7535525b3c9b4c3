"""``powerdp run``: its parser, the run configuration from the flags (a --config file, --resume), the progress
printers and the summary."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from ..apps.power_flow.config import (
    ACCELERATIONS,
    ADJACENCIES,
    ALGORITHMS,
    BUDGET_ALGORITHM,
    DEFAULT_TOLERANCE,
    LOCAL_SOLVERS,
    NOISE_SUPPORTS,
    RunConfig,
    default_algorithm,
)
from ..engine.consensus.algorithms import compose
from ..engine.consensus.penalties import PENALTY_RULES
from ..engine.consensus.perturbations import PERTURBATIONS
from ..engine.consensus.updates import UPDATES
from ..engine.consensus.updates.linearized import ETA_SCHEDULES
from ..errors import ConfigError
from ..opf.local_solver import AUTO
from ..opf.objectives import OBJECTIVES
from ..privacy import MECHANISMS
from .args import integer, real
from .common import _check_output_file, _status_printer, _weight, add_verbosity, refuse_backend_flags, refuse_unused_flags
from .net import NET_RUN_FIELDS, add_net_run_flags, net_run_values
from .output import write_json
from .run_report import ROUND_LEGEND, STOPPED, _print_summary, _progress_printer  # noqa: F401 - ROUND_LEGEND, STOPPED: powerdp.cli's names

RUN_DESCRIPTION = textwrap.dedent(
    """\
    Split CASE into zones and run the consensus ADMM of docs/algorithm.md: every zone
    (agent) solves its local SOC-relaxed problem (--local-solver: by default the fastest
    certified solver that applies, the compiled active set or Clarabel; or Ipopt) and releases only the
    values of the variables it shares with its neighbours; a coordinator averages
    them. Differentially private algorithms perturb each local step. "The paper" below is
    Ryu and Kim, "Differentially Private Distributed Convex Optimization"; "the inexact-ADMM
    paper" Ryu and Kim, "Differentially Private Federated Learning via Inexact ADMM".

    algorithms:
      objl, objg     objective perturbation, Laplace / Gaussian noise (the paper's method):
                     every released point is feasible for the zone
      outl, outg     output perturbation (baseline): noise added to each local solution
      inpl, inpg     input perturbation (baseline, load obfuscation): each zone perturbs its
                     loads once and runs the non-private update on them; the whole run
                     costs one release's epsilon, whatever --rounds and --local-updates
      inps           the same with staircase noise (--mechanism staircase: pure epsilon,
                     Geng and Viswanath's; at epsilon 10, 1/24 of Laplace's variance)
      totl, totg, tots   the zone's two load totals released once (Laplace, Gaussian,
                     staircase), then exact ADMM on loads built from them; with a
                     budget and no --algorithm, totl
      nonprivate     the same linearized update without noise
      exact          non-private ADMM with the exact local objective (reference)
      objt           the inexact-ADMM paper's trust-region update (no proximal term; a box
                     of radius a around the last iterate, a = 0.1, or a/t^2 with
                     extra.trust_schedule "inverse-square" in a config file), Laplace
                     objective perturbation

    An algorithm is three choices, update rule x perturbation x mechanism; the names
    above stand for the usual combinations. --update, --perturbation and --mechanism
    replace one choice of --algorithm (their choices are listed below), and any
    combination can be named UPDATE/PERTURBATION/MECHANISM in a config file.

    The bundled cases come with bundled partitions (case14 into 3 zones, case118
    into its 3 published areas): with a bundled case, --zones 3 and no --method,
    that partition is used; any other case, zone count or an explicit --method
    gives an automatic partition (its zones are connected). --partition area (or zone)
    uses the case's own bus area (zone) column, e.g. the native areas of a utility
    grid; given zones made of several islands, as real areas often are, are accepted
    with a warning naming them and their number of pieces (--no-allow-disconnected
    refuses them). Each zone is one agent on its own buses, whatever its shape.
    config.json and partition.csv record the zones used.

    HVDC lines (mpc.dcline) are modelled as PowerModels does; a line between two
    zones couples them like a tie-line (its active powers are shared).

    The run prints its setup stages, one line per round (or a progress bar) and a
    summary; --out DIR keeps the history, the final point, the privacy report and
    checkpoints. An existing run in DIR is not overwritten unless --overwrite is
    given; --resume DIR continues a run that stopped, and accepts only flags that
    cannot change its results (--rounds to extend it, --backend, --workers,
    --rank-timeout, --checkpoint-every, -q/-v, --json, --no-reference, and the
    net backend's flags).

    --backend net runs a split case (--deployment DIR) with every zone on a server
    of its own (powerdp zone serve, on the zone's host), reached over gRPC with
    mutual TLS (--certs DIR from powerdp certs make); docs/deployment.md.

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
        description=RUN_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("case", metavar="CASE", nargs="?", help="bundled case name, MATPOWER .m file, or pandapower:NAME")
    add_verbosity(p)
    zones = p.add_mutually_exclusive_group()
    zones.add_argument("--zones", type=integer(1), metavar="N", help="number of zones (default 3)")
    zones.add_argument("--partition", metavar="FILE", help="a bus,zone CSV file, or 'area' / 'zone' (bus columns)")
    p.add_argument(
        "--allow-disconnected",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="accept given zones (--partition) made of several islands, as a case's native areas often are, with a "
        "warning naming them and their pieces (default); --no-allow-disconnected makes them an error",
    )
    p.add_argument(
        "--method",
        default="auto",
        choices=["auto", "modularity", "kernighan_lin", "spectral"],
        help="partition method (default: auto, the bundled partition of a bundled case when there is one, else modularity)",
    )
    p.add_argument(
        "--algorithm", choices=ALGORITHMS, default=None,
        help=f"algorithm (default: with --target-epsilon, {BUDGET_ALGORITHM}, the mechanism that measured best at a total "
        "budget, docs/results/utility.md; without it, objl)",
    )
    p.add_argument("--update", choices=list(UPDATES), help="replace the algorithm's update rule (e.g. --algorithm objg --update trust-region)")
    p.add_argument("--perturbation", choices=list(PERTURBATIONS), help="replace the algorithm's perturbation")
    p.add_argument("--mechanism", choices=list(MECHANISMS), help="replace the algorithm's noise mechanism")
    p.add_argument(
        "--objective",
        choices=list(OBJECTIVES),
        default="shedding",
        help="local objective (default: shedding; cost only for non-private runs; cost+shedding for a private dispatch)",
    )
    p.add_argument("--shedding-weight", metavar="OMEGA", type=_weight, default=None, help="shedding weight ω of --objective cost+shedding, in $/h per p.u.^2, or auto (the default): n_bus x the median generator marginal cost / (2 x 1e-3 p.u.), so that the shedding at the optimum, where 2ω·s_i equals bus i's marginal price, totals about 1e-3 p.u. (docs/formulation.md) It must exceed the marginal costs: a smaller ω buys load shedding instead of generation. Refused with any other objective")
    p.add_argument(
        "--linearize",
        choices=["private", "all"],
        default="private",
        help="linearized and trust-region updates: linearize only the part of the objective that holds loads and keep "
        "its data-free part (the generation cost of cost+shedding) exact, with the proximal term on the balance "
        "variables only (private, the default), or linearize all of it as the paper does (all). Same for shedding",
    )
    p.add_argument(
        "--epsilon", type=real(0, lo_open=True), default=0.1, help="privacy budget per local step (inpl/inpg: of the one release of the loads) (default: 0.1)"
    )
    p.add_argument("--delta", type=real(0, 1, lo_open=True, hi_open=True), default=1e-2, help="delta of the Gaussian mechanism (default: 0.01)")
    p.add_argument(
        "--target-epsilon",
        type=real(0, lo_open=True),
        metavar="E",
        help="total privacy budget per zone for the whole run (rounds x local steps): the per-step noise is "
        "calibrated to it with a tight accountant, and --epsilon is not used",
    )
    p.add_argument(
        "--target-delta",
        type=real(0, 1, hi_open=True),
        metavar="D",
        help="total delta per zone with --target-epsilon (Gaussian: required, e.g. 1e-5; Laplace: unset or 0 for pure "
        "epsilon-DP, or a delta > 0 to calibrate with the exact privacy-loss distribution, objective and input perturbation only)",
    )
    p.add_argument("--beta", type=real(0, lo_open=True), default=0.01, help="adjacency: one load changes by at most beta p.u. (default: 0.01)")
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
    p.add_argument(
        "--shrink-loads",
        action="store_true",
        help="input perturbation (inpl, inpg, inps, exact/input/...): compute with the perturbed loads shrunk toward "
        "their zone's mean (James-Stein), p and q apart: post-processing of the one release, no privacy cost; lowers "
        "the rounds' error when the noise is large against the loads' spread (small epsilon; docs/privacy.md)",
    )
    p.add_argument("--rounds", type=integer(1), default=100, metavar="T",
                   help="the most ADMM rounds to run (default: 100); a run stops earlier once it meets --tol")
    p.add_argument("--local-updates", type=integer(1), default=1, metavar="E", help="local steps per round (default: 1)")
    p.add_argument(
        "--rho",
        type=real(0, lo_open=True),
        default=None,
        help="ADMM penalty (default: 100; for --algorithm exact --objective cost, 0.25 x the median marginal cost in $/h per p.u.)",
    )
    p.add_argument("--rho-schedule", choices=[AUTO, *PENALTY_RULES], default=AUTO,
                   help="how rho changes: auto (default: balanced for a non-private run, constant for a private one), "
                   "constant, adaptive (residual balancing), balanced (residual balancing per kind of shared variable), "
                   "spectral (per zone and kind, from curvature estimates) (docs/algorithm.md)")
    p.add_argument("--relaxation", type=real(0, 2, lo_open=True, hi_open=True, keywords=(AUTO,)), default=AUTO, metavar="ALPHA",
                   help="over-relaxation of the consensus step, in (0, 2); 1: none (default auto: 1.6 for a non-private "
                   "run, 1 for a private one)")
    p.add_argument("--acceleration", choices=[AUTO, *ACCELERATIONS], default=AUTO,
                   help="Anderson acceleration of the rounds: anderson, none, or auto (default: anderson for a non-private "
                   "run, none for a private one) (docs/algorithm.md)")
    p.add_argument("--proximal", type=real(0), default=0.0, metavar="TAU",
                   help="cost+shedding: a proximal term TAU x rho on the variables neither shared nor linearized, which "
                   "keeps each local problem strongly convex and its solve accurate at scale (default 0: none)")
    p.add_argument("--eta", default="capped", type=real(0, lo_open=True, keywords=ETA_SCHEDULES), help="step size: capped (default), sqrt, theorem, or a constant")
    p.add_argument("--flows", choices=["variables", "expressions"], default="variables", help="branch flows in the algorithm's variables (default, as the paper) or eliminated")
    p.add_argument("--convention", choices=["powermodels", "matpower"], default="powermodels", help="data convention (default: powermodels)")
    p.add_argument(
        "--seed",
        type=integer(0),
        default=None,
        help="make a seeded, reproducible experiment: the noise follows from SEED, so the run is private only against "
        "observers who do not know it (marked noise_source seeded). Default: each zone draws secret noise from OS entropy",
    )
    p.add_argument("--backend", choices=["serial", "process", "mpi", "net"], default="serial",
                   help="where the agents run (default: serial; net: zone servers on other hosts, with --deployment and --certs)")
    p.add_argument("--workers", type=integer(1), help="worker processes of the process backend (default: one per core, at most one per zone)")
    p.add_argument(
        "--rank-timeout",
        type=real(0, lo_open=True),
        default=60.0,
        metavar="SECONDS",
        help="mpi backend: report a rank as lost after this long without its heartbeat (default: 60)",
    )
    p.add_argument("--tol", type=real(0), default=DEFAULT_TOLERANCE, metavar="TOL",
                   help=f"stop once both relative residuals (primal |w - Bz|/max(|w|, |Bz|), dual |rho(w - w_prev)|/|lambda|) "
                   f"are at most TOL (default: {DEFAULT_TOLERANCE:g}; 0: run every round); --rounds is the cap")
    p.add_argument(
        "--local-solver",
        choices=list(LOCAL_SOLVERS),
        default=AUTO,
        help="the zones' solver: auto (default: active-set on every zone whose local problem it certifies, i.e. with a "
        "proximal term on all of its variables and at most 1000 of them, clarabel on the others), ipopt (Ipopt on each "
        "local problem with the flows eliminated, warm-started), clarabel (Clarabel on the conic form of the local "
        "problem, its solution polished to the certified minimiser by active-set's working sets on zones of up to 1000 "
        "variables) or active-set (working sets on the cached P⁻¹, each solved by Newton's method on its active rows and "
        "cones or a compiled dense cone QP, certified, Clarabel as its fallback; 4.6× faster than clarabel on case118: "
        "docs/results/performance.md). The first run compiles numba kernels (≈ 30 s of CPU), once per installation",
    )
    p.add_argument("--no-warm-start", action="store_true", help="start every local solve cold from the flat point (Ipopt; Clarabel always starts cold)")
    p.add_argument(
        "--ipopt-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra Ipopt option for every local solve (repeatable; --local-solver ipopt only); Ipopt is silent "
        "unless asked, e.g. --ipopt-option print_level=5",
    )
    p.add_argument("--checkpoint-every", type=integer(0), default=None, metavar="K",
                   help="checkpoint every K rounds into --out (0: never; default: by time, after the first round that ends 30 s "
                   "after the last checkpoint, and after the last round or when stopped: 5000 one-millisecond rounds of "
                   "--model dc do not spend their time writing checkpoints)")
    p.add_argument("--no-reference", action="store_true", help="skip the centralized solve used to report the gap")
    p.add_argument(
        "--no-evaluation",
        action="store_true",
        help="deployment mode: zones report only released values and their privacy spend (their solver statistics and "
        "noise magnitude stay with them); the history's objective and max_violation stay empty and each zone writes "
        "its own solution to DIR/zones.private/zone_P/ (--deployment implies it)",
    )
    p.add_argument(
        "--deployment",
        metavar="DIR",
        type=Path,
        help="run a split case (powerdp partition --split DIR): the coordinator reads only DIR/public (no loads), each "
        "zone's host only its own DIR/zone_P.private; implies --no-evaluation (nobody holds every zone's loads to evaluate "
        "with). With --backend mpi no process reads "
        "another zone's loads",
    )
    p.add_argument(
        "--out", metavar="DIR", type=Path,
        help="write the run to DIR (refused if DIR holds a run): DIR/coordinator_view/ (released consensus, residuals, "
        "the coordinator's times, the ledger: what a deployment publishes), DIR/simulation_evaluation/ (objective at "
        "the true loads, shedding, centralized reference, tables with loads, AC check: never published), the zones' "
        "own solutions in DIR/zones.private/ (a deployment's: on each zone's host) and the checkpoints in DIR/checkpoint/",
    )
    p.add_argument("--force", "--overwrite", dest="overwrite", action="store_true",
                   help="replace the run already in --out DIR and an existing --json file (refused without; with --resume: the --json file only)")
    p.add_argument("--resume", metavar="DIR", type=Path, help="continue the run saved in DIR from its last checkpoint")
    p.add_argument(
        "--json", metavar="PATH", type=Path,
        help="write the simulation's record as JSON: both views of the summary in one object (final_objective, "
        "total_shedding_mw, epsilon_total, noise_source, private, ...; it holds values computed from every zone's loads, "
        "so it is never published; - : to standard output, alone, the report then going to standard error; an existing PATH is "
        "refused unless --force)",
    )
    p.add_argument(
        "--ac-check", action="store_true",
        help="at the final point, run pandapower's AC power flow (generator P and voltage set-points √w, loads as in the "
        "case) and report convergence, the slack's mismatch (MW), voltage and loading violations (simulation_evaluation/summary.json "
        "and --json: ac_check)",
    )
    p.add_argument(
        "--no-ac-evaluation", action="store_true",
        help="skip the operator's evaluation of the implemented dispatch (each zone's set-points from its true loads, "
        "its tie-line flows held at the agreed values): pandapower's AC power flow on the true loads, restored when a "
        "limit breaks, beside the centralized dispatch evaluated the same way (--json: implemented, "
        "implemented_reference; about 1-5 s on case118; above 1000 buses the direct power flow only, without the "
        "restoration; runs with a cost+shedding objective)",
    )
    p.add_argument("--config", metavar="FILE", type=Path, help="read the run from a TOML file ([run] table of RunConfig keys); flags given explicitly override it")
    add_net_run_flags(p)
    p.set_defaults(func=cmd_run)


FLAG_TO_FIELD = {
    "zones": "zones", "partition": "partition", "method": "partition_method", "algorithm": "algorithm",
    "objective": "objective", "shedding_weight": "shedding_weight", "linearize": "linearize", "epsilon": "epsilon", "delta": "delta", "beta": "beta", "sensitivity": "sensitivity",
    "adjacency": "adjacency", "noise_on": "noise_on", "shrink_loads": "shrink_loads", "target_epsilon": "target_epsilon", "target_delta": "target_delta",
    "rounds": "rounds", "local_updates": "local_updates", "rho": "rho", "rho_schedule": "rho_schedule", "eta": "eta",
    "seed": "seed", "backend": "backend", "workers": "workers", "rank_timeout": "rank_timeout", "flows": "flows", "convention": "convention",
    "checkpoint_every": "checkpoint_every", "case": "case", "allow_disconnected": "allow_disconnected",
    "update": "algorithm", "perturbation": "algorithm", "mechanism": "algorithm",
    "tol": "tolerance", "relaxation": "relaxation", "acceleration": "acceleration", "proximal": "proximal", "no_warm_start": "warm_start", "no_evaluation": "evaluate", "ipopt_option": "ipopt_options",
    "local_solver": "local_solver", "deployment": "deployment", **NET_RUN_FIELDS,
}
# flags that --resume accepts: they cannot change the results of the run
RESUME_FLAGS = {
    "rounds", "backend", "workers", "rank_timeout", "checkpoint_every", "resume", "json", "no_reference", "quiet", "verbose", "ac_check",
    "no_ac_evaluation",
    "overwrite",  # with --resume it replaces only an existing --json file
    *NET_RUN_FIELDS,  # where the zone servers are and how long to wait for them
}


def _flag(dest: str) -> str:
    return "CASE" if dest == "case" else "--" + dest.replace("_", "-")


def _field_values(args: argparse.Namespace, dest: str) -> dict:
    """The RunConfig field(s) and value(s) of one run flag."""
    if dest == "no_warm_start":
        return {"warm_start": not args.no_warm_start}
    if dest == "no_evaluation":
        return {"evaluate": not args.no_evaluation}
    if dest == "ipopt_option":
        return {"ipopt_options": _ipopt_options(args.ipopt_option)}
    if FLAG_TO_FIELD.get(dest) == "algorithm":
        return {"algorithm": _algorithm(args)}
    if dest in NET_RUN_FIELDS:
        return {NET_RUN_FIELDS[dest]: net_run_values(args, dest)}
    return {FLAG_TO_FIELD[dest]: getattr(args, dest)}


def _algorithm(args: argparse.Namespace) -> str:
    """--algorithm with --update / --perturbation / --mechanism applied (an alias where one exists); without
    --algorithm the default of a run with or without a total budget (:func:`default_algorithm`)."""
    base = args.algorithm if args.algorithm is not None else default_algorithm(args.target_epsilon)
    if args.update is None and args.perturbation is None and args.mechanism is None:
        return base
    return compose(base, update=args.update, perturbation=args.perturbation, mechanism=args.mechanism)


def _refuse_unused_noise_flags(cfg: RunConfig, args: argparse.Namespace) -> RunConfig:
    """--epsilon / --delta given on the command line but not used by the run: a clear error, not silence."""
    explicit = getattr(args, "_explicit", set())
    if not cfg.private and explicit & {"epsilon", "delta"}:
        raise ConfigError(f"--epsilon / --delta given, but algorithm {cfg.algorithm!r} is not private (it adds no noise)")
    if not cfg.private:  # the neighbouring relation and the noise's shape mean nothing without noise (docs/cli.md)
        refuse_unused_flags(args, ("beta", "adjacency", "sensitivity", "noise_on"),
                            f"algorithm {cfg.algorithm!r} is not private (it adds no noise)")
    if "delta" in explicit and (cfg.mechanism != "gaussian" or cfg.target_epsilon is not None):
        why = "--target-delta goes with --target-epsilon" if cfg.target_epsilon is not None else f"{cfg.algorithm!r} uses no Gaussian noise"
        raise ConfigError(f"--delta {args.delta:g} is not used: {why}")
    return cfg


def _config(args: argparse.Namespace) -> RunConfig:
    cfg = _new_config(args)
    return cfg if args.resume is not None else _refuse_unused_noise_flags(cfg, args)


def _new_config(args: argparse.Namespace) -> RunConfig:
    explicit = getattr(args, "_explicit", set())
    if {"epsilon", "target_epsilon"} <= explicit:
        raise ConfigError("give --epsilon (per local step) or --target-epsilon (total for the run), not both")
    if args.resume is not None:
        return _resume_config(args, explicit)
    if getattr(args, "config", None) is not None:
        from ..apps.power_flow.config_file import check_types
        from ..runs.inputs import note_input
        from ..studies.sweep import load_toml

        data = load_toml(args.config)
        unknown = sorted(set(data) - {"run"})
        if unknown:
            raise ConfigError(f"{args.config}: unknown table(s) {', '.join(unknown)}; a run file has one [run] table")
        if not isinstance(data.get("run", {}), dict):
            raise ConfigError(f"{args.config}: run must be a table ([run]), not a {type(data['run']).__name__}")
        note_input("config", args.config, required=False)  # recorded in inputs.json; config.json holds the settings
        fields = dict(data.get("run", {}))
        check_types(fields, str(args.config), "run")
        for dest in sorted(explicit & set(FLAG_TO_FIELD)):  # flags given on the command line override the file
            fields.update(_field_values(args, dest))
        if explicit & {"update", "perturbation", "mechanism"}:  # replace choices of the file's algorithm
            base = args.algorithm if "algorithm" in explicit else fields.get("algorithm", default_algorithm(fields.get("target_epsilon")))
            fields["algorithm"] = compose(base, update=args.update, perturbation=args.perturbation, mechanism=args.mechanism)
        if "algorithm" not in fields:  # a file that names no algorithm: the default of a run with (or without) a budget
            fields["algorithm"] = default_algorithm(fields.get("target_epsilon"))
        if args.zones is not None and "partition" not in explicit:
            fields["partition"] = None
        if args.partition is not None and "zones" not in explicit:
            fields["zones"] = None
        if "deployment" in explicit and "no_evaluation" not in explicit:
            fields["evaluate"] = False  # --deployment implies --no-evaluation, over a config file too
        if "case" not in fields and fields.get("deployment") is None:  # no silent default case: say which is missing
            raise ConfigError(f"{args.config}: no case; give case = \"...\" in its [run] table, or CASE on the command line")
        try:
            return RunConfig.from_dict(fields, source=str(args.config))
        except ConfigError as exc:
            raise ConfigError(f"{args.config}: {exc}" if str(args.config) not in str(exc) else str(exc)) from None
    if args.case is None and getattr(args, "deployment", None) is None:
        raise ConfigError("give a CASE (or --resume DIR, or --deployment DIR)")
    if getattr(args, "deployment", None) is not None:
        unread = ([f"CASE {args.case}"] if args.case is not None else []) + [
            _flag(d) for d in ("zones", "partition", "method") if d in explicit]
        if unread:
            raise ConfigError(f"--deployment {args.deployment}: {', '.join(unread)} not read (the deployment's public "
                              "files hold the network and its zones); drop them")
    return RunConfig(
        case=args.case if args.case is not None else "deployment",
        deployment=None if args.deployment is None else str(Path(args.deployment).resolve()),
        zones=args.zones if args.zones is not None else (None if args.partition else 3),
        partition=args.partition,
        partition_method=args.method,
        allow_disconnected=args.allow_disconnected,
        algorithm=_algorithm(args),
        objective=args.objective,
        shedding_weight=args.shedding_weight,
        linearize=args.linearize,
        epsilon=args.epsilon,
        delta=args.delta,
        beta=args.beta,
        sensitivity=args.sensitivity,
        adjacency=args.adjacency,
        noise_on=args.noise_on,
        shrink_loads=args.shrink_loads,
        target_epsilon=args.target_epsilon,
        target_delta=args.target_delta,
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
        tolerance=args.tol,
        relaxation=args.relaxation,
        acceleration=args.acceleration,
        proximal=args.proximal,
        warm_start=not args.no_warm_start,
        evaluate=not args.no_evaluation and args.deployment is None,  # a deployment has nothing to evaluate: implied
        checkpoint_every=args.checkpoint_every,
        local_solver=args.local_solver,
        ipopt_options=_ipopt_options(args.ipopt_option),
        **{field: net_run_values(args, dest) for dest, field in NET_RUN_FIELDS.items()},
    )


def _resume_config(args: argparse.Namespace, explicit: set[str]) -> RunConfig:
    """The saved run's configuration; only flags that cannot change its results may be given."""
    from ..apps.power_flow.plan import load_config

    cfg = load_config(args.resume)
    saved = cfg.to_dict()

    def changes_run(dest: str) -> bool:
        if dest not in FLAG_TO_FIELD:
            return True  # --config
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
            "--rounds (to extend it), --backend, --workers, --rank-timeout, --checkpoint-every, --json, --force, --no-reference, -q, -v, "
            "and the net backend's --certs, --zones-at, --cert, --key, --ca, --round-timeout, --zone-timeout"
        )
    changes = {}
    for dest in ("rounds", "backend", "workers", "rank_timeout", "checkpoint_every", *NET_RUN_FIELDS):
        if dest in explicit:
            changes.update(_field_values(args, dest))
    return cfg.replace(**changes) if changes else cfg


def _ipopt_options(items: list[str]) -> dict:
    from ..opf.solvers import option_value

    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--ipopt-option {item!r}: expected NAME=VALUE")
        name, value = item.split("=", 1)
        if not name.strip() or not value.strip():
            raise ConfigError(f"--ipopt-option {item!r}: expected NAME=VALUE, both non-empty")
        out[name.strip()] = option_value(value.strip())
    return out


def _check_json_path(args) -> None:
    if args.json is not None:
        _check_output_file(args.json, "--json", args.overwrite)


def cmd_run(args: argparse.Namespace) -> int:
    from ..apps.power_flow.runner import run_distributed

    cfg = _config(args)
    refuse_backend_flags(args, cfg.backend)
    if cfg.backend == "mpi":
        from ..engine.backends.mpi import rank

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
            overwrite=args.overwrite and args.resume is None, status=_status_printer(args), ac_check=args.ac_check,
            ac_evaluation=not args.no_ac_evaluation,
        )
    finally:
        if bar is not None:
            bar.close()
    s = result.summary
    cfg = result.config
    try:
        if not args.quiet:
            resumed = s.get("resumed_from")
            if resumed is not None and resumed >= s["rounds"]:
                print(
                    f"nothing to run: {out} already has {s['rounds']} rounds (of {cfg.rounds}); "
                    f"--rounds N with N > {s['rounds']} extends it"
                )
            _print_summary(s, cfg, out, result.privacy)
            if result.ac_check is not None:
                print("\n".join(result.ac_check.lines()))
    finally:  # the summary's figures reach --json even if printing them fails
        if args.json:
            write_json(args.json, result.summary)
    return 0


