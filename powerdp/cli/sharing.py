"""Command-line glue of the sharing applications: ``solve --model dc``, ``run --model dc``, ``learn --vertical``.

:func:`register` adds them to the parsers of :mod:`powerdp.cli` (one call in
``build_parser``). ``learn --vertical`` is written as :func:`add_vertical_arguments`
+ :func:`run_vertical` so that another ``learn`` command can host it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..runs.kinds import run_kind
from .args import Parser, integer, real
from .common import refuse_backend_flags, refuse_unused_flags
from .output import refuse_existing_output

__all__ = ["register", "add_vertical_arguments", "run_vertical", "cmd_solve_dc", "cmd_run_dc"]

DC_HELP = (
    "soc (default): the SOC relaxation of AC power flow; dc: the lossless DC model with line limits through "
    "PTDFs (docs/market.md). With run, --model dc clears a zonal DC market by ADMM sharing, which is how a DC "
    "market runs: each zone sends only its net injection and its contribution to every monitored line's flow, "
    "the coordinator projects their sum onto balance and line limits, and its dual holds the energy price and "
    "the congestion prices (locational prices per bus in $/MWh). --model dc runs 5000 rounds unless --rounds, "
    "with ρ = 0.03 x the median marginal cost unless --rho, and --algorithm nonprivate (its default) or outg (Gaussian output "
    "perturbation of the releases: --epsilon per round or --target-epsilon for the run, --delta, --beta)"
)
DC_DEFAULT_ROUNDS = 5000
#: the flags of a private DC market (--algorithm outg); refused with a non-private one, which would ignore them
DC_NOISE_FLAGS = ("epsilon", "delta", "target_epsilon", "target_delta", "beta", "private_costs")
#: the flags of private vertical learning (--algorithm gaussian), refused with the non-private one
VERTICAL_NOISE_FLAGS = ("epsilon", "delta", "target_epsilon", "target_delta", "neighbours", "clip", "margin_clip")
DC_TABLE_FILES = ("buses.csv", "generators.csv", "lines.csv")  # what solve --model dc writes (opf/dc.py: dc_tables)
DC_RHO_FACTOR = 0.03  # ρ = 0.03 × the median marginal cost ($/h per p.u.), measured on case118, PGLib case118 and case300


#: the flags each --model dc command reads; any other given with --model dc would be ignored, so it is refused
DC_READS = {
    "solve": {"case", "model", "convention", "json", "out", "solution", "overwrite", "quiet", "verbose"},
    "run": {"case", "model", "algorithm", "zones", "partition", "method", "allow_disconnected", "convention", "epsilon",
            "delta", "target_epsilon", "target_delta", "beta", "rounds", "rho", "rho_schedule", "tol", "seed", "backend",
            "workers", "rank_timeout", "checkpoint_every", "out", "overwrite", "resume", "json", "private_costs",
            "line_scale", "quiet", "verbose"},
}
#: flags only --model dc reads (refused with the SOC model, which would ignore them)
DC_ONLY = {"run": {"private_costs", "line_scale"}, "solve": set()}


def _flags(dests) -> str:
    return ", ".join("CASE" if d == "case" else "--" + d.replace("_", "-") for d in sorted(dests))


def refuse_unread_flags(command: str, args) -> None:
    """One line naming the flags given on the command line that the chosen model would ignore."""
    explicit = getattr(args, "_explicit", set()) - {"func"}
    if getattr(args, "model", "soc") == "dc":
        unread = explicit - DC_READS[command]
        if unread:
            raise ConfigError(f"{_flags(unread)}: not read by {command} --model dc (the DC model has no AC power flow, "
                              "objective, local solver or step size to set); drop them")
    elif explicit & DC_ONLY[command]:
        raise ConfigError(f"{_flags(explicit & DC_ONLY[command])}: read only by {command} --model dc; drop them or add --model dc")


def _wrap(parser: argparse.ArgumentParser, handler, command: str) -> None:
    original = parser.get_default("func")

    def dispatch(args):
        resume = getattr(args, "resume", None)
        if resume is not None and run_kind(resume) == "dc_market":  # `powerdp run --resume DIR` of a DC market run
            args.model = "dc"
        refuse_unread_flags(command, args)
        return handler(args) if getattr(args, "model", "soc") == "dc" else original(args)

    parser.set_defaults(func=dispatch)


def _write_json(path: Path, data) -> None:
    """--json PATH (atomically), or standard output for --json -: the CLI's one writer."""
    from .output import write_json

    write_json(path, data)


def _noise_source(seed, noise_multiplier) -> str | None:
    """``secret`` or ``seeded`` for a private run (docs/privacy.md), None when nothing is noisy."""
    if noise_multiplier is None:
        return None
    from ..privacy import noise_source

    return noise_source(seed)


def register(sub, learn: bool = True) -> None:
    """Add ``--model`` to ``solve`` and ``run``, and (``learn``) ``--vertical`` to the ``learn`` command, or a ``learn``
    command with ``--vertical`` if there is none."""
    choices = sub.choices
    for name, handler in (("solve", cmd_solve_dc), ("run", cmd_run_dc)):
        if name in choices:
            choices[name].add_argument("--model", choices=["soc", "dc"], default="soc", help=DC_HELP)
            _wrap(choices[name], handler, name)
    if "run" in choices:
        choices["run"].add_argument("--private-costs", type=real(0, lo_open=True), metavar="GAMMA", default=None,
                                    help="--model dc --algorithm outg: also protect each generator's linear cost "
                                    "(neighbours: one c1 moves by GAMMA $/h per p.u.; docs/market.md)")
        choices["run"].add_argument("--line-scale", type=real(0, lo_open=True), default=1.0, help="--model dc: weight of the line rows "
                                    "against the balance row in the sharing penalty (default 1)")
    if not learn:
        return
    if "learn" not in choices:
        p = sub.add_parser("learn", help="train a model over parties that hold feature blocks (--vertical: ADMM sharing)",
                           description=VERTICAL_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_vertical_parser_arguments(p)
        return
    _host_vertical(choices["learn"])


def _add_vertical_parser_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", metavar="DATASET", help="breast_cancer or gisette_like (scikit-learn stand-ins, no download)")
    p.add_argument("--vertical", action="store_true", help="features split over parties (ADMM sharing)")
    add_vertical_arguments(p)
    p.set_defaults(func=run_vertical)


def _host_vertical(learn: argparse.ArgumentParser) -> None:
    """``powerdp learn DATASET --vertical ...``: the federated ``learn`` parser hands a command line that holds
    ``--vertical`` to the vertical-learning parser (its own flags: --parties, --blocks, --lam, --tau, ...)."""
    vertical = Parser(
        prog=learn.prog, description=VERTICAL_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for action in learn._actions:  # the CLI's shared flags (-q/-v) keep working after the subcommand
        if set(action.option_strings) & {"-q", "--quiet", "-v", "--verbose"}:
            vertical._add_action(action)
    _add_vertical_parser_arguments(vertical)
    learn.add_argument("--vertical", action="store_true",
                       help="vertical learning: the features (not the samples) are split over parties, by ADMM sharing; "
                       "see powerdp learn DATASET --vertical --help for its options")
    federated = learn.parse_known_args

    def parse_known_args(args=None, namespace=None):
        if args is not None and "--vertical" in args:
            return vertical.parse_known_args(args, namespace)
        return federated(args, namespace)

    learn.parse_known_args = parse_known_args
    learn.vertical_parser = vertical  # the parser a --vertical command line goes to (help, tests)


# --------------------------------------------------------------------------- DC solve


def cmd_solve_dc(args) -> int:
    from ..grid.loading import load_case
    from ..opf.dc import dc_model, dc_tables, solve_dc_opf
    from .common import check_output_dir

    refuse_existing_output(args.json, "--json", args.overwrite)
    dirs = [(flag, path) for flag, path in (("--out", getattr(args, "out", None)), ("--solution", getattr(args, "solution", None)))
            if path is not None]
    for flag, path in dirs:  # before the solve: an existing table is refused without --force, as the SOC solve's
        check_output_dir(path, flag, DC_TABLE_FILES, args.overwrite)
    net = load_case(args.case, convention=args.convention)
    model = dc_model(net)
    res = solve_dc_opf(model)
    summary = {"model": "dc", "case": net.name, **res.summary(model)}
    if not getattr(args, "quiet", False):
        print(f"{net.name}: DC-OPF {res.status}, objective {res.objective:.6f} $/h, energy price "
              f"{summary['energy_price_per_mwh']:.4f} $/MWh, LMP {res.lmp.min():.4f} … {res.lmp.max():.4f} $/MWh, "
              f"{summary['congested_lines']} congested line(s), {res.solve_s * 1e3:.1f} ms")
    for _, out in dirs:
        from ..files.atomic import atomic_to_csv

        for name, df in dc_tables(model, res.pg, res.lmp).items():
            atomic_to_csv(df, Path(out) / f"{name}.csv", index=False)
    if args.json is not None:
        doc = {**summary, "lmp_per_mwh": res.lmp, "pg_mw": res.pg * model.base_mva}
        _write_json(args.json, doc)
    return 0 if res.success else 1


# --------------------------------------------------------------------------- DC market run


def _partition(args, net):
    from ..apps.power_flow.config import RunConfig
    from ..apps.power_flow.plan import resolve_partition

    cfg = RunConfig(case=str(args.case), zones=args.zones if args.zones is not None else 3, partition=args.partition,
                    partition_method=args.method, allow_disconnected=args.allow_disconnected, seed=args.seed)
    return resolve_partition(net, cfg)


def _noise_multiplier(args, rounds: int) -> float | None:
    """None for nonprivate; else σ/Δ₂ per release: from --target-epsilon over the run, or --epsilon per round."""
    if args.algorithm in ("nonprivate", "exact"):
        return None
    if args.algorithm != "outg":
        raise ConfigError(f"--model dc: --algorithm {args.algorithm} is not available; the DC market runs nonprivate or "
                          "outg (Gaussian output perturbation of every release, docs/market.md)")
    from ..privacy.calibration import gaussian_noise_multiplier

    if args.target_epsilon is not None:
        return gaussian_noise_multiplier(float(args.target_epsilon), float(args.target_delta or args.delta), rounds)
    return float(np.sqrt(2.0 * np.log(1.25 / args.delta)) / args.epsilon)


def _saved_sharing(directory: Path, problem: str) -> tuple[dict, dict, dict]:
    """(problem config, settings, recorded inputs) of the sharing run saved in ``directory``, its input files checked."""
    from ..runs.inputs import verify_inputs
    from ..runs.record import RunRecord

    doc = RunRecord(directory, []).read_config()
    if doc.get("kind") != "sharing" or doc.get("problem") != problem or not isinstance(doc.get("config"), dict):
        raise ConfigError(f"{directory}/config.json: not a {problem} run")
    return doc["config"], dict(doc.get("settings") or {}), verify_inputs(directory, "resume")


def _resumed_settings(args, saved: dict):
    """The saved run's settings; only those that cannot change its results may be given again."""
    from ..runs.sharing_run import RESUME_MAY_CHANGE_SHARING, SharingSettings

    explicit = getattr(args, "_explicit", set())
    changes = {k: getattr(args, k) for k in RESUME_MAY_CHANGE_SHARING if k in explicit and getattr(args, k, None) is not None}
    fields = SharingSettings.__dataclass_fields__
    return SharingSettings(**{**{k: v for k, v in saved.items() if k in fields}, **changes})


def cmd_run_dc(args) -> int:
    from ..apps.market.dc_market import default_market_rho
    from ..grid.loading import load_case
    from ..opf.dc import dc_model
    from ..runs.sharing_run import SharingSettings

    if args.resume is not None and args.case is None:  # `powerdp run --resume DIR`: the case and settings it was made with
        return _resume_dc(args)

    explicit = getattr(args, "_explicit", set())
    rounds = args.rounds if "rounds" in explicit else DC_DEFAULT_ROUNDS
    if "algorithm" not in explicit:  # the consensus run's default (objl) has no DC counterpart
        args.algorithm = "nonprivate"
    if args.target_epsilon is not None:
        refuse_unused_flags(args, ("delta",), "--delta is the δ per round of --epsilon; the run's total is --target-delta")
    if args.algorithm in ("nonprivate", "exact"):
        refuse_unused_flags(args, DC_NOISE_FLAGS, f"--model dc --algorithm {args.algorithm}"
                            f"{'' if 'algorithm' in explicit else ' (its default)'} adds no noise; --algorithm outg makes the market private")
    if args.resume is not None and args.target_epsilon is not None and args.algorithm == "outg":
        try:
            saved = json.loads((Path(args.resume) / "config.json").read_text())["settings"]["rounds"]
        except (OSError, ValueError, KeyError):
            saved = rounds
        if saved != rounds:
            raise ConfigError(f"{args.resume}: the run's noise was calibrated to a total budget (ε = {args.target_epsilon:g}) "
                              f"over {saved} rounds; more rounds would spend more than the budget, so --rounds cannot change")
    if args.case is None:
        raise ConfigError("--model dc needs the CASE")
    refuse_existing_output(args.json, "--json", args.overwrite)
    net = load_case(args.case, convention=args.convention)
    part = _partition(args, net)
    model = dc_model(net)
    rho = float(args.rho) if args.rho is not None else DC_RHO_FACTOR * default_market_rho(model)
    # the SOC run's "auto" coordination and default tolerance are its own: the market keeps its constant ρ and runs
    # its rounds unless --rho-schedule / --tol are given
    schedule = "constant" if args.rho_schedule == "auto" else args.rho_schedule
    if schedule not in ("constant", "adaptive"):
        raise ConfigError(f"--rho-schedule {schedule}: the DC market's coordinator has 'constant' and 'adaptive' only")
    tol = float(args.tol) if "tol" in explicit else 0.0
    settings = SharingSettings(rounds=rounds, rho=rho, backend=args.backend, workers=args.workers,
                               checkpoint_every=args.checkpoint_every, rank_timeout=args.rank_timeout,
                               rho_schedule=schedule, noise_multiplier=_noise_multiplier(args, rounds),
                               delta=float(args.target_delta or args.delta), tol=tol)
    refuse_backend_flags(args, settings.backend)
    seed = args.seed if "seed" in explicit or settings.noise_multiplier is None else None
    return _run_dc(args, net, part.zone_of_bus, part.source, settings, seed, rho, args.algorithm, args.beta, args.line_scale,
                   args.private_costs)


def _resume_dc(args) -> int:
    """``powerdp run --resume DIR`` of a DC market run: the case by its recorded path (refused when it changed), the
    zones, prices' settings and noise of the saved run."""
    from ..grid.loading import load_case
    from ..runs.inputs import case_source

    config, saved, records = _saved_sharing(args.resume, "dc-market")
    refuse_existing_output(args.json, "--json", args.overwrite)
    net = load_case(case_source(records, config["case"]), convention=config.get("convention", "powermodels"))
    settings = _resumed_settings(args, saved)
    refuse_backend_flags(args, settings.backend)
    if settings.noise_multiplier is not None and settings.rounds != saved.get("rounds") and "rounds" in getattr(args, "_explicit", set()):
        raise ConfigError(f"{args.resume}: the run's noise was calibrated over {saved.get('rounds')} rounds; a private DC "
                          "run cannot change --rounds")
    algorithm = "outg" if config.get("noise_multiplier") else "nonprivate"
    return _run_dc(args, net, np.asarray(config["zone_of_bus"]), "the saved run's zones", settings, config.get("seed"),
                   settings.rho, algorithm, config.get("beta", 0.01), config.get("line_scale", 1.0), config.get("cost_gamma"))


def _run_dc(args, net, zone_of_bus, partition_source, settings, seed, rho, algorithm, beta, line_scale, cost_gamma) -> int:
    from ..apps.market.dc_market import run_market
    from ..opf.dc import dc_tables

    n_zones = int(np.max(zone_of_bus)) + 1
    out = args.resume if args.resume is not None else args.out
    t0 = time.perf_counter()
    ran = run_market(net, zone_of_bus, settings, beta=beta, seed=seed, out=out, resume=args.resume is not None,
                     overwrite=args.overwrite and args.resume is None, line_scale=line_scale, cost_gamma=cost_gamma)
    if ran is None:  # an MPI agent rank
        return 0
    result, model, central = ran
    ev = result.summary["evaluation"]
    y = result.y
    scale = line_scale
    lmp = model.lmp(-y[0], y[1:] * scale)
    summary = {
        "model": "dc", "case": net.name, "zones": n_zones, "partition": partition_source, "algorithm": algorithm,
        "rounds": result.summary["rounds"], "stopped": result.summary["stopped"], "rho": rho, "backend": args.backend,
        "final_cost": ev["cost"], "max_line_violation": ev["max_line_violation"], "imbalance_mw": ev["imbalance_mw"],
        "centralized_objective": central.objective if central else None, "cost_gap": ev.get("cost_gap"),
        "max_price_error": ev.get("max_price_error"), "energy_price_per_mwh": -y[0] / model.base_mva,
        "primal_residual": result.summary["coordinator_view"]["primal_residual"],
        "epsilon_per_zone": result.summary["coordinator_view"]["ledger"][0]["epsilon"],
        "delta": settings.delta if settings.noise_multiplier else 0.0, "seeded": seed is not None,
        "time_s": time.perf_counter() - t0, "lmp_per_mwh": lmp,
    }
    summary["noise_source"] = _noise_source(seed, settings.noise_multiplier)
    if not getattr(args, "quiet", False):
        print(f"{net.name}, {n_zones} zones, DC market by ADMM sharing, {summary['rounds']} rounds")
        print(f"  the coordinator's view: primal residual {summary['primal_residual']:.2e}, energy price "
              f"{summary['energy_price_per_mwh']:.4f} $/MWh"
              + (f", ε = {summary['epsilon_per_zone']:.3g} per zone (δ = {summary['delta']:g}), noise {summary['noise_source']}"
                 if settings.noise_multiplier else ", not private"))
        print(f"  the simulation's evaluation: cost {ev['cost']:.6f} $/h (centralized {summary['centralized_objective']:.6f}, "
              f"gap {summary['cost_gap']:.2e}), max line violation {ev['max_line_violation']:.2e} p.u., imbalance "
              f"{ev['imbalance_mw']:.2e} MW, max price error {summary['max_price_error']:.2e} $/MWh")
        if summary["noise_source"] == "seeded":
            print("WARNING: a seeded private run: the guarantee holds only against observers who do not know the seed")
    if out is not None:
        pg = np.concatenate([result.diagnostics[m]["pg"] for m in range(n_zones)])
        order = np.concatenate([np.flatnonzero(zone_of_bus[model.gen_bus] == m) for m in range(n_zones)])
        pg_full = np.zeros(model.n_gen)
        pg_full[order] = pg
        tables = dc_tables(model, pg_full, lmp, central.lmp if central else None)
        for name, df in tables.items():  # the dispatch in MW: the simulation's evaluation
            df.to_csv(Path(out) / "simulation_evaluation" / f"{name}.csv", index=False)
    if args.json is not None:
        _write_json(args.json, summary)
    return 0


# --------------------------------------------------------------------------- vertical learning

VERTICAL_DESCRIPTION = """\
Vertical (feature-split) learning by ADMM sharing (docs/vertical.md): parties hold blocks of
the features of the same samples; the coordinator holds the labels. Each round every party
sends one number per training sample (its block's contribution to the margins), the
coordinator does the logistic z-step and the dual step. ℓ2-regularized logistic regression.

Baselines in the same output: centralized logistic regression on all features, and each
party alone on its own features. --algorithm gaussian adds Gaussian noise to every release
with a sound sensitivity (neighbours: one feature column of a party, or --neighbours row: one
sample's features of a party); ε per party composes over the rounds in the ledger.
"""


def add_vertical_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--parties", type=integer(2), default=2, metavar="M", help="number of parties, at least 2 (default 2): "
                   "one party alone is not vertical learning")
    p.add_argument("--blocks", metavar="N1,N2,...", help="feature block sizes (default: as equal as possible, contiguous)")
    p.add_argument("--algorithm", choices=["nonprivate", "gaussian"], default="nonprivate",
                   help="nonprivate (default) or gaussian (noisy releases, sound sensitivity)")
    p.add_argument("--lam", type=real(0, lo_open=True), default=None, help="ℓ2 weight λ (default: 1e-3 breast_cancer, 1e-4 gisette_like)")
    p.add_argument("--rounds", type=integer(1), default=200, metavar="T", help="ADMM rounds (default 200)")
    p.add_argument("--rho", type=real(0, lo_open=True), default=None, help="penalty ρ (default 0.5/N, N training samples: ρ must be on the scale of 1/N)")
    p.add_argument("--tau", type=real(0), default=None, help="proximal weight τ (default (M−1)ρ; 0 is the plain Jacobi step of Hu et al., "
                   "\"Learning Privately over Distributed Features: An ADMM Sharing Approach\")")
    p.add_argument("--epsilon", type=real(0, lo_open=True), default=None, help="gaussian: ε per round (default 1)")
    p.add_argument("--delta", type=real(0, 1, lo_open=True, hi_open=True), default=1e-5,
                   help="gaussian: δ per round, with --epsilon (default 1e-5)")
    p.add_argument("--target-delta", type=real(0, 1, lo_open=True, hi_open=True), default=None, metavar="D",
                   help="gaussian: total δ of the run, with --target-epsilon (default 1e-5)")
    p.add_argument("--target-epsilon", type=real(0, lo_open=True), default=None, metavar="E", help="gaussian: total ε per party for the run (calibrated by the accountant)")
    p.add_argument("--neighbours", choices=["column", "row"], default="column", help="gaussian: neighbouring data sets differ in one feature column of a party (default) or one sample's features of a party")
    p.add_argument("--clip", type=real(0, lo_open=True), default=1.0, help="gaussian, column neighbours: feature columns clipped to this ℓ2 norm C (default 1)")
    p.add_argument("--margin-clip", type=real(0, lo_open=True), default=5.0, help="gaussian: the x-step's target margins clipped to [-B, B] (default 5)")
    p.add_argument("--seed", type=integer(0), default=None, help="seed of the data split and (named: a seeded private run) of the noise")
    p.add_argument("--backend", choices=["serial", "process", "mpi"], default="serial", help="where the parties run (default serial)")
    p.add_argument("--workers", type=integer(1), default=None, help="process backend: worker processes")
    p.add_argument("--out", type=Path, default=None, help="output directory (history, summary, checkpoints)")
    p.add_argument("--resume", type=Path, default=None, help="continue the run in DIR")
    p.add_argument("--force", "--overwrite", dest="overwrite", action="store_true",
                   help="replace the run in --out and an existing --json file (refused without)")
    p.add_argument("--checkpoint-every", type=integer(0), default=None, metavar="K",
                   help="checkpoint every K rounds (0: at the end only; default: by time, every 30 s of rounds, and at the end)")
    p.add_argument("--json", type=Path, default=None, help="write the summary as JSON (final_test_logloss, centralized_test_logloss, ...)")


def run_vertical(args) -> int:
    from ..apps.learning.vertical import DEFAULT_LAMBDA, load_dataset
    from ..runs.sharing_run import SharingSettings

    if not getattr(args, "vertical", True):
        raise ConfigError("learn: give --vertical (features split over parties)")
    if args.algorithm == "nonprivate":
        refuse_unused_flags(args, VERTICAL_NOISE_FLAGS, "--vertical --algorithm nonprivate (the default) adds no noise; "
                            "--algorithm gaussian makes the releases private")
    elif args.neighbours == "row":
        refuse_unused_flags(args, ("clip",), "--neighbours row bounds each sample's features of a party to norm 1; "
                            "--clip bounds the feature columns of --neighbours column")
    refuse_existing_output(args.json, "--json", args.overwrite)
    if args.epsilon is not None and args.target_epsilon is not None:
        raise ConfigError("--epsilon (per round) and --target-epsilon (for the run) exclude each other; give one")
    if args.target_epsilon is not None:
        refuse_unused_flags(args, ("delta",), "--delta is the δ per round of --epsilon; the run's total is --target-delta")
    else:
        refuse_unused_flags(args, ("target_delta",), "--target-delta is the total δ of --target-epsilon; per round it is --delta")
    epsilon = 1.0 if args.epsilon is None else args.epsilon
    sizes = None
    if args.blocks:
        try:
            sizes = [int(s) for s in args.blocks.split(",")]
        except ValueError:
            raise ConfigError(f"--blocks {args.blocks}: comma-separated integers needed") from None
    data = load_dataset(args.dataset, args.parties, sizes, seed=args.seed or 0)
    lam = args.lam if args.lam is not None else DEFAULT_LAMBDA[data.name]
    n = len(data.y_train)
    rho = args.rho if args.rho is not None else 0.5 / n
    from ..privacy.calibration import gaussian_noise_multiplier

    nm = None
    delta = float(args.target_delta if args.target_delta is not None else 1e-5) if args.target_epsilon else float(args.delta)
    if args.algorithm == "gaussian":
        nm = (gaussian_noise_multiplier(float(args.target_epsilon), delta, args.rounds) if args.target_epsilon
              else float(np.sqrt(2.0 * np.log(1.25 / delta)) / epsilon))
    settings = SharingSettings(rounds=args.rounds, rho=rho, tau=args.tau, backend=args.backend, workers=args.workers,
                               checkpoint_every=args.checkpoint_every, noise_multiplier=nm, delta=delta)
    refuse_backend_flags(args, settings.backend)
    seed = args.seed if args.seed is not None else (0 if nm is None else None)
    return _run_vertical(args, data, lam, settings, nm, seed, rho, args.neighbours, args.clip, args.margin_clip, args.algorithm)


def resume_vertical(args) -> int:
    """``powerdp learn --resume DIR`` of a vertical-learning run: its data set, parties and settings as saved."""
    from ..apps.learning.vertical import load_dataset

    config, saved, _ = _saved_sharing(args.resume, "vertical-logreg")
    refuse_existing_output(args.json, "--json", args.overwrite)
    data = load_dataset(config["dataset"], int(config["parties"]), list(config["blocks"]), seed=config.get("seed") or 0)
    settings = _resumed_settings(args, saved)
    refuse_backend_flags(args, settings.backend)
    nm = settings.noise_multiplier
    if nm is not None and "rounds" in getattr(args, "_explicit", set()) and settings.rounds != saved.get("rounds"):
        raise ConfigError(f"{args.resume}: the run's noise was calibrated over {saved.get('rounds')} rounds; a private "
                          "vertical run cannot change --rounds")
    args.out, args.overwrite = None, False
    return _run_vertical(args, data, float(config["lam"]), settings, nm, config.get("seed"), settings.rho, config["neighbours"],
                         float(config["clip"]), float(config["margin_clip"]), "gaussian" if nm else "nonprivate")


def _run_vertical(args, data, lam, settings, nm, seed, rho, neighbours, clip, margin_clip, algorithm) -> int:
    from ..apps.learning.vertical import run_vertical_learning

    n = len(data.y_train)
    out = args.resume if args.resume is not None else args.out
    t0 = time.perf_counter()
    ran = run_vertical_learning(data, lam, settings, neighbours=neighbours, clip=clip, seed=seed, out=out,
                                resume=args.resume is not None, overwrite=args.overwrite and args.resume is None, margin_clip=margin_clip)
    if ran is None:
        return 0
    result, base = ran
    ev = result.summary["evaluation"]
    h = result.history
    close = h.index[(h["eval_test_logloss"] - base["centralized_test_logloss"]).abs() <= 1e-3]
    summary = {
        "dataset": data.name, "parties": len(data.blocks), "blocks": [len(c) for c in data.blocks], "lam": lam, "rho": rho,
        "algorithm": algorithm, "rounds": result.summary["rounds"], "n_train": n, "n_test": len(data.y_test),
        "final_test_logloss": ev["test_logloss"], "final_test_error": ev["test_error"], "final_train_objective": ev["train_objective"],
        **base, "rounds_to_1e-3": int(h["round"].iloc[close[0]]) if len(close) else None,
        "time_s": time.perf_counter() - t0, "sharing_s": result.summary["run_s"],
        "epsilon_per_party": result.summary["coordinator_view"]["ledger"][0]["epsilon"], "delta": settings.delta if nm else 0.0,
        "neighbours": neighbours if nm else None, "noise_multiplier": nm, "seeded": seed is not None,
    }
    summary["noise_source"] = _noise_source(seed, nm)
    if not getattr(args, "quiet", False):
        print(f"{data.name}, {len(data.blocks)} parties, vertical learning by ADMM sharing, {summary['rounds']} rounds")
        if nm:
            print(f"  the coordinator's view: ε = {summary['epsilon_per_party']:.3g} per party, noise {summary['noise_source']}")
        print(f"  the simulation's evaluation: test log-loss {ev['test_logloss']:.4f} (centralized "
              f"{base['centralized_test_logloss']:.4f}; party alone {', '.join(f'{v:.4f}' for v in base['party_alone_test_logloss'])}), "
              f"test error {100 * ev['test_error']:.2f} %")
        if summary["noise_source"] == "seeded":
            print("WARNING: a seeded private run: the guarantee holds only against observers who do not know the seed")
    if args.json is not None:
        _write_json(args.json, summary)
    return 0

