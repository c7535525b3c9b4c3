"""The ``powerdp`` command line.

Subcommands: ``solve`` (centralized SOC-relaxed OPF), ``partition`` (zones of a
network), ``run`` (the private distributed solve), ``sweep`` and ``plot`` (studies),
``audit`` (an empirical privacy audit), ``cases`` (bundled cases).
``powerdp COMMAND --help`` describes each one.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import textwrap
from pathlib import Path

from ._version import __version__
from .admm.algorithms import compose
from .admm.config import ADJACENCIES, ALGORITHMS, NOISE_SUPPORTS, RunConfig
from .admm.perturbations import PERTURBATIONS
from .admm.updates import UPDATES
from .cli_io import STDOUT_NAME, NamedStdout, route_python_warnings, write_json
from .errors import ConfigError, Interrupted, PowerDPError
from .opf.objectives import OBJECTIVES
from .opf.solver_base import SOLVERS
from .privacy import MECHANISMS
from .provenance import forget_noted

log = logging.getLogger("powerdp")

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_AUDIT_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

DESCRIPTION = textwrap.dedent(
    """\
    powerdp - privacy-preserving distributed optimal power flow.

    A network case is split into zones. Each zone (an agent) solves its part of
    the second-order-cone (SOC) relaxation of AC optimal power flow with Ipopt
    (or Clarabel), and a coordinator drives the zones to agreement on the variables they share
    with a differentially private ADMM, so no zone reveals its loads.

    CASES are bundled names (case14, case118), paths to MATPOWER .m files
    (format version 2), or pandapower:NAME for a network of pandapower.networks.
    All quantities are per unit on the case's baseMVA; costs are in $/h.
    """
)

EPILOG = textwrap.dedent(
    """\
    examples:
      powerdp solve case14                         centralized OPF, PowerModels conventions
      powerdp solve case118 --objective shedding   load-shedding objective (0 when feasible)
      powerdp partition case118 --zones 3 --out zones.csv
      powerdp run case118 --zones 3 --algorithm objl --epsilon 0.1 --rounds 100
      powerdp sweep examples/sweep_small.toml --out sweep_out && powerdp plot sweep_out
      powerdp audit case14 --algorithm objl --target-epsilon 1   empirical privacy audit
      powerdp privacy amplification --smooth 0.18 --strong 0.18 --strong-g 0.2 --penalty 0.5

    exit status: 0 success; 1 a solve or run failed; 2 bad input (arguments, files,
    output paths); 3 a privacy audit failed (powerdp audit); 130 interrupted (Ctrl-C or SIGTERM).
    """
)


def add_verbosity(p: argparse.ArgumentParser, top: bool = False) -> None:
    """-q / -v, accepted before and after the subcommand (a subcommand's copy only sets what is given)."""
    group = p.add_mutually_exclusive_group()
    kw = {} if top else {"default": argparse.SUPPRESS}
    group.add_argument("-q", "--quiet", action="store_true", help="print errors only", **kw)
    group.add_argument(
        "-v", "--verbose", action="store_true", help="print data-cleaning notes and progress details (powerdp's own; "
        "other libraries stay quiet)", **kw,
    )


def _add_case_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("case", metavar="CASE", help="bundled case name, MATPOWER .m file, or pandapower:NAME")
    p.add_argument(
        "--convention",
        choices=["powermodels", "matpower"],
        default="powermodels",
        help="data convention (default: powermodels, results match PowerModels.jl; "
        "matpower: angle limits and ratings as given)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="powerdp",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"powerdp {__version__}")
    add_verbosity(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    # ---- solve
    ps = sub.add_parser(
        "solve",
        help="solve the centralized SOC relaxation of a case",
        description=textwrap.dedent(
            """\
            Build the SOC relaxation of the whole network (docs/formulation.md), compile it
            once and solve it with Ipopt (default) or Clarabel (--solver clarabel, the conic
            form of the same model). Prints the objective, the solver's status, its
            iteration count and the build, compile and solve times.

            objectives:
              cost      generation cost ($/h), power balance as constraints (reference OPF)
              shedding  sum over buses of squared active and reactive imbalance (p.u.^2);
                        0 at the optimum of a feasible case
              cost+shedding
                        generation cost + ω x the shedding sum ($/h): a dispatch with soft
                        balance (--shedding-weight ω); prints the generation cost and the
                        active imbalance in MW too
            """
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_case_args(ps)
    add_verbosity(ps)
    ps.add_argument("--objective", choices=list(OBJECTIVES), default="cost", help="objective (default: cost)")
    ps.add_argument("--shedding-weight", metavar="OMEGA", type=_weight, default=None, help="shedding weight ω of --objective cost+shedding, in $/h per p.u.^2, or auto (the default): n_bus x the median generator marginal cost / (2 x 1e-3 p.u.), so that the shedding at the optimum, where 2ω·s_i equals bus i's marginal price, totals about 1e-3 p.u. (docs/formulation.md) It must exceed the marginal costs: a smaller ω buys load shedding instead of generation. Refused with any other objective")
    ps.add_argument(
        "--flows",
        choices=["variables", "expressions"],
        default="variables",
        help="branch flows as variables (default, as PowerModels) or eliminated expressions",
    )
    ps.add_argument(
        "--solver",
        choices=list(SOLVERS),
        default="ipopt",
        help="ipopt (default: the NLP through cyipopt) or clarabel (the same model as a conic program: "
        "second-order cones for the W cone and the thermal limits; several times faster)",
    )
    ps.add_argument("--profile", default=None, help="Ipopt option profile: a bundled name or a .opt file (--solver ipopt only; default: default)")
    ps.add_argument("--json", metavar="PATH", type=Path, help="also write the result summary as JSON (- : to standard output, after the report; with -q alone)")
    ps.add_argument(
        "--out", metavar="DIR", type=Path,
        help="write result.json and the solution in physical units (generators.csv, buses.csv, branches.csv, zones.csv) "
        "to DIR, and inputs.json (the case file's absolute path and SHA-256); powerdp export DIR --pandapower FILE.json "
        "reads it. A DIR that already holds a solve is refused",
    )
    ps.add_argument("--overwrite", action="store_true", help="replace the solve already in --out DIR")
    ps.add_argument("--solution", metavar="DIR", type=Path, help="write the four CSV tables only (as --out, without result.json; and dclines.csv for a case with HVDC lines)")
    ps.add_argument("--ac-check", action="store_true", help="run pandapower's AC power flow at the solution: generator P set-points and voltage set-points √w at generator buses, loads as in the case; reports convergence, the slack's mismatch against the dispatch (MW), voltages outside [vmin, vmax] and branches above 100 %% of their rating (also in --json as ac_check)")
    ps.set_defaults(func=cmd_solve)

    # ---- export
    pe = sub.add_parser(
        "export",
        help="write the dispatch of a run or solve directory into a pandapower network",
        description=textwrap.dedent(
            """\
            Read the final point of a run directory (powerdp run --out DIR) or of a solve
            directory (powerdp solve --out DIR) and write it into a pandapower network:
            generator active-power set-points and voltage set-points sqrt(w) at generator
            buses (docs/operating_point.md). A case read from MATPOWER is converted with
            pandapower's from_ppc (pandapower bus index = MATPOWER bus number, the first
            generator at the reference bus is the ext_grid); a case read from pandapower
            gives a copy of that network with the set-points written in. Load the file
            with pandapower.from_json.
            """
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_verbosity(pe)
    pe.add_argument("directory", metavar="DIR", type=Path, help="a run (--out of powerdp run) or solve (--out of powerdp solve) directory")
    pe.add_argument("--pandapower", metavar="FILE", type=Path, required=True, help="the pandapower JSON file to write")
    pe.add_argument("--force", action="store_true", help="replace FILE if it exists")
    pe.add_argument("--ac-check", action="store_true", help="also run the AC power flow (its results are saved in FILE)")
    pe.set_defaults(func=cmd_export)

    # ---- partition
    pp = sub.add_parser(
        "partition",
        help="split a case into zones and print the per-zone summary",
        description=textwrap.dedent(
            """\
            Split a network into zones and print, per zone: own buses, copied
            neighbour buses, generators, load, tie-lines and shared variables (docs/formulation.md). Zones come from an automatic method on the network graph
            (always connected), from the bus area/zone column (--from area|zone, e.g. a case's native areas), or from a
            bus,zone CSV file. Given zones made of several islands are accepted with a warning naming them and their
            number of pieces (--no-allow-disconnected makes them an error).
            """
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_case_args(pp)
    add_verbosity(pp)
    src = pp.add_mutually_exclusive_group(required=True)
    src.add_argument("--zones", type=int, metavar="N", help="number of zones for an automatic partition")
    src.add_argument("--from", dest="from_", metavar="SOURCE", help="'area', 'zone', or a bus,zone CSV file")
    pp.add_argument(
        "--method",
        default="auto",
        choices=["auto", "modularity", "kernighan_lin", "spectral"],
        help="automatic method (default: auto, the bundled partition of a bundled case when there is one for N "
        "zones, else modularity; as powerdp run)",
    )
    pp.add_argument("--seed", type=int, default=0, help="seed of randomized methods (default: 0)")
    pp.add_argument(
        "--allow-disconnected",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="accept given zones (--from) made of several islands, with a warning (default); "
        "--no-allow-disconnected makes them an error",
    )
    pp.add_argument("--out", metavar="FILE", type=Path, help="write the partition as a bus,zone CSV")
    pp.add_argument(
        "--split",
        metavar="DIR",
        type=Path,
        help="write a deployment: DIR/public/ (the network without loads, and the partition: the coordinator's) and "
        "DIR/zone_P.private/loads.csv (zone P's loads: only zone P's operator gets it); run it with powerdp run --deployment DIR",
    )
    pp.set_defaults(func=cmd_partition)

    # ---- cases
    pc = sub.add_parser("cases", help="list the bundled cases and partitions")
    add_verbosity(pc)
    pc.set_defaults(func=cmd_cases)

    add_run_parser(sub)  # run, sweep, plot: the distributed solve and its studies
    add_audit_parser(sub)
    from .cli_privacy import add_privacy_parser
    from .cli_sharing import register  # solve/run --model dc, learn --vertical (ADMM sharing)
    from .learning.cli import add_learn_parser

    add_learn_parser(sub, add_verbosity)  # learn: federated learning on the same engine (powerdp/learning/cli.py)
    add_privacy_parser(sub)  # powerdp privacy amplification (docs/amplification.md)
    register(sub)
    return parser


def cmd_solve(args: argparse.Namespace) -> int:
    from .admm.outdir import ensure_dir
    from .opf.centralized import solve_opf

    _check_output_file(args.json, "--json")
    for flag, path in (("--solution", args.solution), ("--out", args.out)):
        if path is not None and path.exists() and not path.is_dir():
            raise ConfigError(f"{flag} {path} is an existing file; it names a directory for the CSV tables")
    _check_solve_out(args.out, args.overwrite)
    if args.shedding_weight is not None and not OBJECTIVES[args.objective].weighted:
        raise ConfigError(f"--shedding-weight: objective {args.objective!r} has no shedding penalty to weight; use --objective cost+shedding")
    if args.profile is not None and args.solver != "ipopt":
        raise ConfigError(f"--profile {args.profile} is an Ipopt option profile; it needs --solver ipopt (not {args.solver})")
    res = solve_opf(
        args.case, objective=args.objective, convention=args.convention, flows=args.flows,
        profile=args.profile or "default", shedding_weight=args.shedding_weight, solver=args.solver,
    )
    label = SOLVERS[args.solver].label
    unit = OBJECTIVES[args.objective].unit
    if not args.quiet:
        hvdc = f", {len(res.dclines)} HVDC lines" if len(res.dclines) else ""
        print(f"case        {res.case}  ({res.n_buses} buses, {res.n_branches} branches, {res.n_gens} generators{hvdc})")
        print(f"model       SOC relaxation, {res.convention} convention, flows as {res.flows}")
        print(f"            {res.n_variables} variables, {res.n_constraints} constraints")
        if res.success:
            print(f"objective   {res.objective_name} = {res.objective:.6f} {unit}")
        else:  # the solver's last iterate is no optimum: its objective means nothing
            print(f"objective   none: no solution ({res.objective_name} of the last iterate {res.objective:.6g} {unit})")
        if OBJECTIVES[args.objective].weighted:
            print(f"dispatch    generation cost {res.generation_cost:.6f} $/h, shedding {res.total_shedding_mw:.4g} MW (ω {res.shedding_weight:.4g})")
        print(f"status      {res.status_name} ({res.iterations} {label} iterations)")
        print(f"max viol.   {res.max_violation:.2e}")
        print(
            f"time        build {res.build_time_s:.3f} s, compile {res.compile_time_s:.3f} s, "
            f"solve {res.solve_time_s:.3f} s (callbacks {res.callback_time_s:.3f} s)"
        )
    if args.ac_check:
        if res.success:
            res.check_ac()
            if not args.quiet:
                print("\n".join(res.ac_check.lines()))
        else:
            log.warning("no AC check: the solve did not succeed, so there is no solution to check")
    if args.json:
        write_json(args.json, res.to_dict())
    if args.solution:
        ensure_dir(args.solution, "--solution directory")
        res.save_tables(args.solution)
    if args.out:
        from .provenance import case_entry, record_inputs

        ensure_dir(args.out, "--out directory")
        res.save(args.out)
        record_inputs(args.out, {"case": case_entry(args.case)})
    if not res.success:
        print(f"powerdp: the solve did not succeed: {label} status {res.status_name}", file=sys.stderr)
    return EXIT_OK if res.success else EXIT_FAILED


def _check_solve_out(out: Path | None, overwrite: bool) -> None:
    """``solve --out`` never replaces a result, a run or a sweep silently (as ``run --out``)."""
    if out is None or not out.is_dir():
        return
    from .admm.outdir import holds_run

    if holds_run(out) or (out / "sweep.json").is_file():
        raise ConfigError(f"--out {out} holds a run or a sweep; give the solve a directory of its own")
    if (out / "result.json").is_file() and not overwrite:
        raise ConfigError(f"--out {out} already holds a solve (result.json); give another --out, or --overwrite to replace it")


def _export_case(d: Path, fallback: str) -> str:
    """The case a run or solve directory was made from: its recorded file, checked unchanged (provenance.py)."""
    from .provenance import case_source, verify_inputs

    source = case_source(verify_inputs(d, "export"), fallback)
    text = str(source)
    if text.startswith("pandapower network "):  # a solve saved before inputs.json: the network's name
        import pandapower.networks as pn

        name = text.removeprefix("pandapower network ")
        if callable(getattr(pn, name, None)):
            return f"pandapower:{name}"
    return source


def cmd_export(args: argparse.Namespace) -> int:
    import pandapower as pp

    from .grid.network import load_case
    from .opf.pandapower_io import ac_check, to_pandapower
    from .opf.tables import ResultTables, dispatch_from_tables

    d, target = args.directory, args.pandapower
    if not d.is_dir():
        raise ConfigError(f"{d} is not a directory (give a powerdp run or solve output directory)")
    if target.exists() and not args.force:
        raise ConfigError(f"--pandapower {target} exists; give --force to replace it")
    _check_output_file(target, "--pandapower")
    if (d / "config.json").is_file():  # a run
        from .admm.results import RunResult

        run = RunResult.load(d)
        net = load_case(_export_case(d, run.config.case), convention=run.config.convention)
        if run.tables is not None:
            dispatch = dispatch_from_tables(net, run.tables, where=str(d))
        else:  # a run saved before the tables existed: assemble from the zones' solutions
            from .grid.partition import partition
            from .opf.tables import dispatch_from_zones

            if not run.zone_solutions or not (d / "partition.csv").is_file():
                raise ConfigError(
                    f"{d} holds no final point (no simulation_evaluation/generators.csv ..., no zone solutions with partition.csv)"
                )
            part = partition(net, str(d / "partition.csv"), allow_disconnected=True)
            dispatch = dispatch_from_zones(net, part.zone_of_bus, run.zone_solutions)
    elif (d / "result.json").is_file():  # a solve
        try:
            info = json.loads((d / "result.json").read_text())
            source, convention = info["source"], info["convention"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{d / 'result.json'} is not a powerdp solve result ({type(exc).__name__}: {exc})") from None
        try:
            tables = ResultTables.load(d)
        except (OSError, ValueError) as exc:  # a damaged table (pandas' parser errors are ValueErrors)
            raise ConfigError(f"{d}: a solution table is not readable ({type(exc).__name__}); it is damaged") from None
        if tables is None:
            raise ConfigError(f"{d} has result.json but not all of generators.csv, buses.csv, branches.csv, zones.csv")
        net = load_case(_export_case(d, source), convention=convention)
        dispatch = dispatch_from_tables(net, tables, where=str(d))
        if net.dcline.n and (d / "dclines.csv").is_file():  # the HVDC lines' powers (p.u.), as OPFResult.save_tables writes them
            import pandas as pd

            lines = pd.read_csv(d / "dclines.csv").set_index("dcline").reindex(net.dcline.ids)
            dispatch.dc = {k: lines[k].to_numpy(dtype=float) for k in ("p_dc_fr", "p_dc_to", "q_dc_fr", "q_dc_to")}
    else:
        raise ConfigError(f"{d} is neither a run directory (config.json) nor a solve directory (result.json)")
    if args.ac_check:
        check = ac_check(net, dispatch)
        pp_net = check.pandapower.net
        if not args.quiet:
            print("\n".join(check.lines()))
    else:
        pp_net = to_pandapower(net, dispatch).net
    pp.to_json(pp_net, str(target))
    if not args.quiet:
        counts = ", ".join(f"{len(pp_net[e])} {e}" for e in ("bus", "ext_grid", "gen", "sgen", "load", "line", "trafo") if len(pp_net[e]))
        print(f"wrote {target} (pandapower network of {net.name}: {counts})")
    return EXIT_OK


def _check_output_file(path: Path | None, flag: str) -> None:
    """An output file's directory is created (and the path checked) before any work is done ("-": standard output)."""
    if path is None or str(path) == "-":
        return
    from .admm.outdir import ensure_dir
    from .errors import ConfigError

    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a directory; it names a file")
    ensure_dir(path.parent if str(path.parent) else Path("."), f"directory of {flag} {path}")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{flag} {path} is not writable")


def cmd_partition(args: argparse.Namespace) -> int:
    from .admm.runner import bundled_partition_name
    from .grid.network import load_case
    from .grid.partition import partition

    _check_output_file(args.out, "--out")
    net = load_case(args.case, convention=args.convention)
    if args.zones is not None:
        bundled = bundled_partition_name(args.case, args.zones) if args.method == "auto" else None
        if bundled is not None:  # as powerdp run: the bundled case's own partition
            part = partition(net, bundled)
        else:
            method = "modularity" if args.method == "auto" else args.method
            part = partition(net, zones=args.zones, method=method, seed=args.seed)
    else:
        part = partition(net, args.from_, allow_disconnected=args.allow_disconnected)
    if not args.quiet:
        print(part)
    if args.out:
        part.to_csv(args.out)
        if not args.quiet:
            print(f"wrote {args.out}")
    if args.split:
        from .admm.outdir import ensure_dir
        from .admm.zone_data import split_case

        split_case(net, part, ensure_dir(args.split, "--split directory"))
        if not args.quiet:
            print(f"wrote {args.split}/public (network without loads, partition) and {part.n_zones} zone_P.private/loads.csv")
    return 0


def cmd_cases(args: argparse.Namespace) -> int:
    from importlib import resources

    root = resources.files("powerdp.cases")
    for p in sorted(root.iterdir(), key=lambda p: p.name):
        if p.name.endswith((".m", ".csv")):
            print(p.name)
    return 0


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)


def explicit_options(argv: list[str]) -> set[str]:
    """The destinations of the options given on the command line (whatever their value)."""
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for a in sub._actions:
                    if a.dest != "help":
                        a.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv))) - {"command"}


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        level = {logging.WARNING: "warning", logging.ERROR: "error", logging.INFO: "note", logging.DEBUG: "debug"}
        return f"powerdp: {level.get(record.levelno, record.levelname.lower())}: {record.getMessage()}"


def setup_logging(quiet: bool, verbose: bool) -> None:
    """powerdp's messages at the asked level; other libraries' (cyipopt, pyomo, pandapower...) only when they are errors."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_powerdp", False):
            root.removeHandler(h)
    handler._powerdp = True
    root.addHandler(handler)
    root.setLevel(logging.ERROR)
    own = logging.ERROR if quiet else (logging.INFO if verbose else logging.WARNING)
    logging.getLogger("powerdp").setLevel(own)
    for name in ("pyomo", "cyipopt", "pandapower", "numba", "matplotlib"):
        logging.getLogger(name).setLevel(logging.ERROR)
    route_python_warnings(verbose)


def _broken_pipe() -> int:
    """The reader of our output went away (``powerdp partition ... | head``): stop quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a Unix tool killed by SIGPIPE


def _os_error(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"


def main(argv: list[str] | None = None) -> int:
    from .admm.stopping import stop_signals

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args._explicit = explicit_options(argv)
    if getattr(args, "quiet", False) and getattr(args, "verbose", False):
        parser.error("-q/--quiet and -v/--verbose exclude each other")
    setup_logging(args.quiet, args.verbose)
    forget_noted()
    if sys.stdout is not None and not isinstance(sys.stdout, NamedStdout):
        sys.stdout = NamedStdout(sys.stdout)
    try:
        with stop_signals():
            status = int(args.func(args) or 0)
        if sys.stdout is not None:  # a full standard output is an error of this command, not of Python's exit
            sys.stdout.flush()
        return status
    except Interrupted as exc:
        print(f"powerdp: {exc}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("powerdp: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except PowerDPError as exc:
        print(f"powerdp: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except BrokenPipeError:
        return _broken_pipe()
    except OSError as exc:  # an output path that cannot be written, a full disk...
        if exc.filename == STDOUT_NAME:  # `powerdp ... > /dev/full`: Python's flush at exit must not say it again
            _broken_pipe()
        print(f"powerdp: error: {_os_error(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        try:
            if sys.stdout is not None:  # None when started with stdout closed (`>&-`)
                sys.stdout.flush()
        except BrokenPipeError:
            _broken_pipe()
        except OSError as exc:
            _broken_pipe()
            print(f"powerdp: error: {_os_error(exc)}", file=sys.stderr)
        except ValueError:
            pass
        if isinstance(sys.stdout, NamedStdout):
            sys.stdout = sys.stdout.stream


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


# ----------------------------------------------------------------------------- run, sweep, plot

RUN_DESCRIPTION = textwrap.dedent(
    """\
    Split CASE into zones and run the consensus ADMM of docs/algorithm.md: every zone
    (agent) solves its local SOC-relaxed problem (with Ipopt, or Clarabel with
    --local-solver clarabel) and releases only the
    values of the variables it shares with its neighbours; a coordinator averages
    them. Differentially private algorithms perturb each local step.

    algorithms:
      objl, objg     objective perturbation, Laplace / Gaussian noise (the paper's method):
                     every released point is feasible for the zone
      outl, outg     output perturbation (baseline): noise added to each local solution
      inpl, inpg     input perturbation (baseline, load obfuscation): each zone perturbs its
                     loads once and runs the non-private update on them; the whole run
                     costs one release's epsilon, whatever --rounds and --local-updates
      nonprivate     the same linearized update without noise
      exact          non-private ADMM with the exact local objective (reference)
      objt           trust-region update (no proximal term; a box of radius a around the
                     last iterate, a = 0.1, or a/t^2 with extra.trust_schedule
                     "inverse-square"), Laplace objective perturbation

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


def _weight(text: str) -> float | str:
    """--shedding-weight: "auto" or a number (its sign is checked with the objective)."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number ($/h per p.u.^2) nor auto") from None


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
    zones.add_argument("--zones", type=int, metavar="N", help="number of zones (default 3)")
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
    p.add_argument("--algorithm", choices=ALGORITHMS, default="objl", help="algorithm (default: objl)")
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
        "--epsilon", type=float, default=0.1, help="privacy budget per local step (inpl/inpg: of the one release of the loads) (default: 0.1)"
    )
    p.add_argument("--delta", type=float, default=1e-2, help="delta of the Gaussian mechanism (default: 0.01)")
    p.add_argument(
        "--target-epsilon",
        type=float,
        metavar="E",
        help="total privacy budget per zone for the whole run (rounds x local steps): the per-step noise is "
        "calibrated to it with a tight accountant, and --epsilon is not used",
    )
    p.add_argument(
        "--target-delta",
        type=float,
        metavar="D",
        help="total delta per zone with --target-epsilon (Gaussian: required, e.g. 1e-5; Laplace: unset or 0 for pure "
        "epsilon-DP, or a delta > 0 to calibrate with the exact privacy-loss distribution, objective and input perturbation only)",
    )
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
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="make a seeded, reproducible experiment: the noise follows from SEED, so the run is private only against "
        "observers who do not know it (marked noise_source seeded). Default: each zone draws secret noise from OS entropy",
    )
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
    p.add_argument(
        "--local-solver",
        choices=list(SOLVERS),
        default="ipopt",
        help="the zones' solver: ipopt (default; Ipopt on each local problem with the flows eliminated, warm-started) "
        "or clarabel (Clarabel on the conic form of the local problem; several times faster, no warm start)",
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
    p.add_argument("--checkpoint-every", type=int, default=10, metavar="K", help="checkpoint every K rounds into --out (default: 10; 0: never)")
    p.add_argument("--no-reference", action="store_true", help="skip the centralized solve used to report the gap")
    p.add_argument(
        "--no-evaluation",
        action="store_true",
        help="deployment mode: zones report only released values and their privacy spend (their solver statistics and "
        "noise magnitude stay with them); the history's objective and max_violation stay empty and each zone writes "
        "its own solution to DIR/zones/",
    )
    p.add_argument(
        "--deployment",
        metavar="DIR",
        type=Path,
        help="run a split case (powerdp partition --split DIR): the coordinator reads only DIR/public (no loads), each "
        "zone's host only its own DIR/zone_P.private; needs --no-evaluation. With --backend mpi no process reads "
        "another zone's loads",
    )
    p.add_argument(
        "--out", metavar="DIR", type=Path,
        help="write the run to DIR (refused if DIR holds a run): DIR/coordinator_view/ (released consensus, residuals, "
        "the coordinator's times, the ledger: what a deployment publishes), DIR/simulation_evaluation/ (objective at "
        "the true loads, shedding, centralized reference, tables with loads, AC check: never published), the zones' "
        "own solutions in DIR/zones/ and the checkpoints in DIR/checkpoint/",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the run already in --out DIR")
    p.add_argument("--resume", metavar="DIR", type=Path, help="continue the run saved in DIR from its last checkpoint")
    p.add_argument(
        "--json", metavar="PATH", type=Path,
        help="write the simulation's record as JSON: both views of the summary in one object (final_objective, "
        "total_shedding_mw, epsilon_total, noise_source, private, ...; it holds values computed from every zone's loads, "
        "so it is never published; - : to standard output, after the report; with -q alone)",
    )
    p.add_argument(
        "--ac-check", action="store_true",
        help="at the final point, run pandapower's AC power flow (generator P and voltage set-points √w, loads as in the "
        "case) and report convergence, the slack's mismatch (MW), voltage and loading violations (simulation_evaluation/summary.json "
        "and --json: ac_check)",
    )
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
    "objective": "objective", "shedding_weight": "shedding_weight", "linearize": "linearize", "epsilon": "epsilon", "delta": "delta", "beta": "beta", "sensitivity": "sensitivity",
    "adjacency": "adjacency", "noise_on": "noise_on", "target_epsilon": "target_epsilon", "target_delta": "target_delta",
    "rounds": "rounds", "local_updates": "local_updates", "rho": "rho", "rho_schedule": "rho_schedule", "eta": "eta",
    "seed": "seed", "backend": "backend", "workers": "workers", "rank_timeout": "rank_timeout", "flows": "flows", "convention": "convention",
    "checkpoint_every": "checkpoint_every", "case": "case", "allow_disconnected": "allow_disconnected",
    "update": "algorithm", "perturbation": "algorithm", "mechanism": "algorithm",
    "tol": ("tol_primal", "tol_dual"), "no_warm_start": "warm_start", "no_evaluation": "evaluate", "ipopt_option": "ipopt_options",
    "local_solver": "local_solver", "deployment": "deployment",
}
# flags that --resume accepts: they cannot change the results of the run
RESUME_FLAGS = {
    "rounds", "backend", "workers", "rank_timeout", "checkpoint_every", "resume", "json", "no_reference", "quiet", "verbose", "ac_check",
}


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


def _refuse_unused_noise_flags(cfg: RunConfig, args: argparse.Namespace) -> RunConfig:
    """--epsilon / --delta given on the command line but not used by the run: a clear error, not silence."""
    explicit = getattr(args, "_explicit", set())
    if not cfg.private and explicit & {"epsilon", "delta"}:
        raise ConfigError(f"--epsilon / --delta given, but algorithm {cfg.algorithm!r} is not private (it adds no noise)")
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
        from .admm.configfile import check_types
        from .provenance import note_input
        from .sweep import load_toml

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
    if args.case is None and getattr(args, "deployment", None) is None:
        raise ConfigError("give a CASE (or --resume DIR, or --deployment DIR)")
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
        tol_primal=args.tol,
        tol_dual=args.tol,
        warm_start=not args.no_warm_start,
        evaluate=not args.no_evaluation,
        checkpoint_every=args.checkpoint_every,
        local_solver=args.local_solver,
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
    from .opf.solvers import option_value

    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--ipopt-option {item!r}: expected NAME=VALUE")
        name, value = item.split("=", 1)
        if not name.strip() or not value.strip():
            raise ConfigError(f"--ipopt-option {item!r}: expected NAME=VALUE, both non-empty")
        out[name.strip()] = option_value(value.strip())
    return out


ROUND_LEGEND = {
    "shedding": "objective Σ_p f_p = shedding Σ(p.u.²)",
    "cost+shedding": "objective Σ_p f_p = generation cost + ω·shedding ($/h)",
    "cost": "objective Σ_p f_p = generation cost ($/h)",
}


def _per_step_text(cfg: RunConfig) -> str:
    """The per-step ε (and δ) the run's zones use: the stated one, or the one calibrated to ``--target-epsilon``
    (the same figure the ledger reports as ``epsilon_per_step``)."""
    budget = cfg.per_step_noise()
    if budget is None:
        eps, delta = cfg.epsilon, (cfg.delta if cfg.mechanism == "gaussian" else 0.0)
    elif cfg.mechanism == "gaussian":
        from .privacy.mechanisms import GaussianMechanism

        eps, delta = GaussianMechanism.from_noise_multiplier(1.0, budget["noise_multiplier"], cfg.target_delta).per_step()
    else:
        eps, delta = budget["epsilon"], 0.0
    calibrated = "" if budget is None else f", calibrated to the budget ε {cfg.target_epsilon:g}"
    return f"ε {eps:.4g} per local step, δ {delta:g}{calibrated}"


def _round_legend(cfg: RunConfig) -> str:
    """What the columns of the per-round lines mean (printed once, before round 1)."""
    eps = ""
    if cfg.private:
        eps = f"; eps = total ε spent so far per zone, largest over zones ({_per_step_text(cfg)})"
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
    from .learning.cli import learning_sweep_file, run_learning_sweep_command
    from .sweep import load_sweep, run_sweep

    if learning_sweep_file(args.config):  # a [learn] table: a sweep of federated-learning runs
        return run_learning_sweep_command(args)
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
            overwrite=args.overwrite, status=_status_printer(args), ac_check=args.ac_check,
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
        if result.ac_check is not None:
            print("\n".join(result.ac_check.lines()))
    if args.json:
        write_json(args.json, result.summary)
    return 0


STOPPED = {  # summary["stopped"], in words
    "rounds": "all rounds run", "tolerance": "stopped: residuals below --tol", "interrupted": "interrupted", "failed": "failed",
}


def _print_summary(s: dict, cfg: RunConfig, out, privacy: dict) -> None:
    unit = "Σ(p.u.²)" if cfg.objective == "shedding" else "$/h"
    what = {"cost": "generation cost", "shedding": "shedding"}.get(cfg.objective, cfg.objective)
    print(f"case          {s['case']}  ({s['n_zones']} zones, {s['n_shared']} shared variables, backend {s['backend']})")
    print(f"algorithm     {cfg.algorithm}  objective {cfg.objective}  ρ {cfg.rho:g}  rounds {s['rounds']} ({STOPPED.get(s['stopped'], s['stopped'])})")
    print("── the coordinator's view (what a deployment publishes: releases, residuals, ledger) ──")
    if s["final_feasibility"] is not None:
        print(f"feasibility   consensus residual ‖w − Bz‖₂ = {s['final_feasibility']:.3e} p.u. (0 when the zones agree)")
        print(f"dual          dual residual ρ‖w − w_prev‖₂ = {s['final_dual_residual']:.3e}")
    if cfg.private:
        parts = []
        for z, e in s["epsilon_total"].items():
            head = (privacy.get(int(z)) or {}).get("headline") or {}
            d = head.get("delta")
            parts.append(f"zone {z}: ε {e:.4g}" + (f", δ {d:.3g}" if d is not None else ""))
        sources = sorted({str(((privacy.get(int(z)) or {}).get("headline") or {}).get("source")) for z in s["epsilon_total"]} - {"None"})
        how = f"; accountant: {', '.join(sources)}" if sources else ""
        steps = s.get("epsilon_per_step") or {}
        per_step = f"{next(iter(steps.values())):.4g}" if steps else f"{cfg.epsilon:g}"
        if cfg.target_epsilon is not None:
            target = f"budget ε {cfg.target_epsilon:g}" + (f", δ {cfg.target_delta:g}" if cfg.target_delta else "")
            per_step = f"{per_step} per local step, calibrated to the {target}"
        else:
            per_step = f"{per_step} per local step"
        flag = "" if s.get("private", True) else " [NOT A GUARANTEE]"
        print(f"privacy       total spent per zone over the whole run (ε {per_step}{how}){flag}: " + "; ".join(parts))
        print(f"noise         {s.get('noise_source', cfg.noise_source)}" + (
            " (OS entropy drawn by each zone; nobody else can replay it)" if cfg.noise_source == "secret" else ""))
        for warning in s.get("privacy_warnings") or []:
            print(f"WARNING       {warning}")
    print(f"time          coordinator's loop {s['wall_s']:.2f} s, setup {s['setup_s']:.2f} s")
    print("── the simulation's evaluation (needs every zone's data; a deployment cannot compute it) ──")
    if s["final_objective"] is not None and s["final_objective"] == s["final_objective"]:
        print(f"objective     {what} {s['final_objective']:.6g} {unit} (Σ over zones of the true local objective)")
    else:
        print("objective     not evaluated (--no-evaluation: each zone keeps its own)")
    mv = s.get("max_violation")
    if mv is not None and mv == mv:
        print(f"violation     largest violation of a zone's own constraints by its released point: {mv:.2e} p.u.")
    if s.get("centralized_objective") is not None:
        rel = s.get("relative_gap_to_centralized")
        rel_txt = f" ({rel:+.2e} relative)" if rel is not None else ""
        print(f"centralized   {s['centralized_objective']:.6g} {unit}  gap {s['gap_to_centralized']:+.4g} {unit} (absolute){rel_txt}")
    label = SOLVERS[cfg.local_solver].label
    if s.get("solves"):
        print(f"zone solves   {s['solver_s']:.2f} s in {label}, {s['solves']} local solves (zone-private statistics)")
    if out is not None:
        print(f"results       {out}  (coordinator_view/ is what a deployment publishes; simulation_evaluation/ is not)")


# ----------------------------------------------------------------------------- audit

AUDIT_DESCRIPTION = textwrap.dedent(
    """\
    Check from the outside that a run is as private as its ledger says: a
    distinguishing attack on exactly what the coordinator receives
    (docs/privacy.md, "Auditing").

    Two neighbouring load datasets D and D' differ in one load value of one zone
    by beta (--adjacency bus: both loads of the bus). The run is repeated N
    times on each, with secret noise as deployed (--seed S: seeds S, S+1, ...,
    S+N-1, and the replay adversary who knows the seed is reported on its own),
    and every message the audited zone releases
    (its shared values of every round, round 0 included) is recorded, and every
    other field of every message the coordinator receives, and the coordinator's
    view (its history file and its round times). A linear
    score (difference of the class means over the pooled variance) and its
    threshold are trained on the first half of the runs of each dataset and
    tested on the second half. Its true and false positive rates, with 95 %
    Clopper-Pearson intervals, give a lower bound on epsilon: no (eps, delta)-DP
    run can let a test reach these rates with a smaller eps (delta: the run's
    claimed total). The claimed total epsilon of the audited zone (the ledger's
    figure for the same run) is reported next to it.

    The bus is the most influential load by default: one noise-free run of the
    same update rule per loaded bus (of --zone, or of every zone) with its
    active load moved by beta, and the bus whose move changes its zone's
    released values the most. --bus names it instead.

    Every other channel is attacked the same way (Bonferroni-corrected), and
    a message field outside the protocol's allow-list fails the audit by itself.
    A run whose claim rests on an unsound sensitivity rule (--sensitivity paper
    with output perturbation) is never called passed ("no guarantee").

    A lower bound above the claim is a privacy bug: the audit fails (exit
    status 3). A bound at or below the claim passes, which does not prove the
    claim: the attack is one simple test. A non-private algorithm claims
    nothing; its bound shows how much a run reveals.

    The repeats run in parallel (--jobs) on the serial backend with evaluation
    off and no output directory; the result does not depend on --jobs. A
    progress bar goes to stderr (-q: none).

    exit status: 0 the audit passed (or the algorithm is not private); 1 a run
    failed; 2 bad input; 3 the audit failed: a lower bound exceeds the
    claimed epsilon, a message field outside the allow-list crossed, or the
    claim rests on an unsound sensitivity rule; 130 interrupted.
    """
)


MIN_RUNS = 20  # as powerdp.audit.MIN_RUNS (not imported here: the audit loads the solver stack)


def add_audit_parser(sub) -> None:
    p = sub.add_parser(
        "audit",
        help="empirical privacy audit: a distinguishing attack gives a lower bound on epsilon",
        description=AUDIT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("case", metavar="CASE", help="bundled case name, MATPOWER .m file, or pandapower:NAME")
    add_verbosity(p)
    p.add_argument(
        "--algorithm",
        default="objl",
        metavar="A",
        help=f"algorithm to audit: {', '.join(ALGORITHMS)}, or UPDATE/PERTURBATION/MECHANISM (default: objl)",
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--epsilon", type=float, default=0.1, metavar="E", help="privacy budget per local step (default: 0.1)")
    budget.add_argument(
        "--target-epsilon", type=float, metavar="E",
        help="total privacy budget per zone for the whole run; the per-step noise is calibrated to it",
    )
    p.add_argument("--delta", type=float, default=1e-2, metavar="D", help="delta per step of the Gaussian mechanism (default: 0.01)")
    p.add_argument("--target-delta", type=float, metavar="D", help="total delta with --target-epsilon (Gaussian: required)")
    p.add_argument("--rounds", type=int, default=5, metavar="T", help="ADMM rounds of each run (default: 5)")
    p.add_argument("--local-updates", type=int, default=1, metavar="E", help="local steps per round (default: 1)")
    p.add_argument("--zones", type=int, default=2, metavar="K", help="number of zones (default: 2)")
    p.add_argument("--zone", type=int, metavar="Z", help="the audited zone, 0..K-1 (default: that of the most influential load)")
    p.add_argument("--bus", type=int, metavar="BUS", help="the bus (MATPOWER id) whose load moves (default: the most influential load)")
    p.add_argument("--beta", type=float, default=0.01, help="how far the load moves, p.u. (default: 0.01, as the adjacency)")
    p.add_argument("--sensitivity", choices=["sound", "paper"], default="sound",
                   help="the audited run's sensitivity rule (default: sound); 'paper' with output perturbation is no guarantee")
    p.add_argument(
        "--adjacency", choices=list(ADJACENCIES), default="value",
        help="value: the bus's active load moves (default); bus: its active and reactive loads both move",
    )
    p.add_argument("--runs", type=int, default=200, metavar="N", help=f"runs per dataset, at least {MIN_RUNS} (default: 200; 2N runs in all)")
    p.add_argument("--jobs", type=int, metavar="J", help="parallel runs (default: one per core)")
    p.add_argument("--seed", type=int, default=None, metavar="S",
                   help="seeded runs S, S+1, ... and the replay adversary who knows the seed (default: secret noise, as deployed)")
    p.add_argument("--json", metavar="PATH", type=Path, help="write the result (bound, claim, rates, intervals, settings) as JSON")
    p.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    p.set_defaults(func=cmd_audit)


def _audit_config(args: argparse.Namespace) -> RunConfig:
    for flag, value, ok, what in (
        ("--runs", args.runs, args.runs >= MIN_RUNS, f"at least {MIN_RUNS} (runs per dataset: half train, half test)"),
        ("--jobs", args.jobs, args.jobs is None or args.jobs >= 1, "at least 1"),
        ("--zones", args.zones, args.zones >= 1, "at least 1"),
        ("--zone", args.zone, args.zone is None or 0 <= args.zone < args.zones, f"a zone index 0..{args.zones - 1}"),
        ("--seed", args.seed, args.seed is None or args.seed >= 0, "a non-negative integer"),
        ("--beta", args.beta, math.isfinite(args.beta) and args.beta > 0, "a positive number (p.u.)"),
    ):
        if not ok:
            raise ConfigError(f"{flag} {value}: must be {what}")
    try:
        cfg = RunConfig(
            case=args.case, zones=args.zones, algorithm=args.algorithm, epsilon=args.epsilon, delta=args.delta,
            target_epsilon=args.target_epsilon, target_delta=args.target_delta, beta=args.beta, adjacency=args.adjacency,
            rounds=args.rounds, local_updates=args.local_updates, seed=args.seed, evaluate=False, checkpoint_every=0,
            sensitivity=args.sensitivity,
        )
    except ConfigError as exc:  # name the flag, not the field
        text = str(exc)
        for field_name in ("target_epsilon", "target_delta", "local_updates", "algorithm", "epsilon", "delta", "beta", "rounds"):
            if text.startswith(f"{field_name} = "):
                text = "--" + field_name.replace("_", "-") + " " + text[len(field_name) + 3:]
                break
        raise ConfigError(text) from None
    return _refuse_unused_noise_flags(cfg, args)


def cmd_audit(args: argparse.Namespace) -> int:
    from .audit import run_audit

    cfg = _audit_config(args)
    if args.json is not None:
        _check_output_file(args.json, "--json")
        if str(args.json) != "-" and args.json.exists() and not args.force:
            raise ConfigError(f"--json {args.json} exists; give --force to overwrite it")
    total = 2 * args.runs
    bar = None
    progress = None
    if not args.quiet:
        try:
            from tqdm import tqdm
        except ImportError:  # pragma: no cover
            tqdm = None
        if tqdm is not None and sys.stderr.isatty():
            bar = tqdm(total=total, desc=f"audit {cfg.algorithm} {cfg.case}", unit="run", file=sys.stderr)

            def progress(done, _total):
                bar.update(done - bar.n)
        else:
            step = max(1, total // 10)

            def progress(done, _total):
                if done % step == 0 or done == _total:
                    print(f"powerdp: audit: {done}/{_total} runs", file=sys.stderr, flush=True)
    try:
        res = run_audit(cfg, runs=args.runs, bus=args.bus, zone=args.zone, jobs=args.jobs, progress=progress,
                        status=_status_printer(args))
    finally:
        if bar is not None:
            bar.close()
    if not args.quiet:
        _print_audit(res)
    if args.json is not None:
        write_json(args.json, res.to_dict())
    if res.failed:
        print(
            f"powerdp: audit FAILED: the empirical lower bound eps >= {res.epsilon_lower_bound:.3g} (worst channel "
            f"{max([res.epsilon_lower_bound] + [c['epsilon_lower_bound'] for n, c in res.channels.items() if n != 'replay']):.3g}) "
            f"against the claimed eps = {res.epsilon_total:.3g} of zone {res.settings['zone']}"
            + (f"; fields outside the allow-list: {', '.join(res.settings['fields_outside_allow_list'])}"
               if res.settings.get("fields_outside_allow_list") else ""),
            file=sys.stderr,
        )
        return EXIT_AUDIT_FAILED
    if res.verdict == "no guarantee":
        print("powerdp: audit NOT PASSED: the claimed epsilon rests on --sensitivity paper with output perturbation, "
              "which is not a proven bound (docs/privacy.md)", file=sys.stderr)
        return EXIT_AUDIT_FAILED
    return EXIT_OK


def _print_audit(res) -> None:
    s, a = res.settings, res.attack
    moved = "pd and qd" if s["adjacency"] == "bus" else "pd"
    print(f"audit         {s['algorithm']} on {s['case']} ({s['zones']} zones, {s['partition']}): zone {s['zone']}, "
          f"bus {s['bus']}, {moved} {s['load_value']:.4g} → {s['load_value'] + s['beta']:.4g} p.u. (β {s['beta']:g})")
    noise = f"seeds {s['seeds'][0]}..{s['seeds'][1]}" if s.get("seeds") else "secret noise"
    print(f"runs          {s['runs']} per dataset ({noise}), {s['rounds']} rounds × "
          f"{s['local_updates']} local step(s), {s['released_values_per_run']} released values per run")
    (tl, th), (fl, fh) = a["tpr_interval"], a["fpr_interval"]
    conf = f"{100 * a['confidence']:g} %"
    print(f"attack        linear score, trained on {a['train_runs'][0]} + {a['train_runs'][1]} runs, tested on "
          f"{a['test_runs'][0]} + {a['test_runs'][1]}: TPR {a['tpr']:.3f} [{tl:.3f}, {th:.3f}], FPR {a['fpr']:.3f} "
          f"[{fl:.3f}, {fh:.3f}] ({conf} Clopper–Pearson)")
    print(f"lower bound   ε ≥ {res.epsilon_lower_bound:.3f} (at δ {res.delta_total:g}, {conf} confidence)")
    if res.epsilon_total is None:
        print("claimed       nothing: the algorithm is not private")
    else:
        print(f"claimed       ε {res.epsilon_total:.4g}, δ {res.delta_total:g} for the run (ledger: {s['accountant']}); "
              f"ε {res.epsilon_per_step:.4g} per local step, basic composition {res.epsilon_basic:.4g}")
    for name, c in (res.channels or {}).items():
        what = "replay (knows the seed)" if name == "replay" else name
        print(f"channel       {what}: TPR {c['tpr']:.3f}, FPR {c['fpr']:.3f}, ε ≥ {c['epsilon_lower_bound']:.3f}")
    if s.get("fields_outside_allow_list"):
        print(f"LEAK          message field(s) outside the allow-list: {', '.join(s['fields_outside_allow_list'])}")
    verdict = {
        "passed": "passed: no channel's lower bound exceeds the claim",
        "failed": "FAILED: a lower bound exceeds the claim, or a field outside the allow-list crossed (a privacy bug)",
        "not private": "no claim to check",
        "no guarantee": "NO GUARANTEE: the claim rests on an unsound sensitivity rule (--sensitivity paper); never passed",
    }[res.verdict]
    print(f"verdict       {verdict}")
    print(f"time          {res.wall_s:.1f} s ({s['jobs']} job(s))")
