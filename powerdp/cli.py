"""The ``powerdp`` command line.

Subcommands: ``solve`` (centralized SOC-relaxed OPF), ``partition`` (zones of a
network), ``run`` (the private distributed solve), ``cases`` (bundled cases).
``powerdp COMMAND --help`` describes each one.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import textwrap
from pathlib import Path

from ._version import __version__
from .errors import Interrupted, PowerDPError
from .opf.objectives import OBJECTIVES

log = logging.getLogger("powerdp")

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

DESCRIPTION = textwrap.dedent(
    """\
    powerdp - privacy-preserving distributed optimal power flow.

    A network case is split into zones. Each zone (an agent) solves its part of
    the second-order-cone (SOC) relaxation of AC optimal power flow with Ipopt,
    and a coordinator drives the zones to agreement on the variables they share
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

    exit status: 0 success; 1 a solve or run failed; 2 bad input (arguments, files,
    output paths); 130 interrupted (Ctrl-C or SIGTERM).
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
            Build the SOC relaxation of the whole network (SPEC section 3), compile it
            once and solve it with Ipopt. Prints the objective, Ipopt's status, its
            iteration count and the build, compile and solve times.

            objectives:
              cost      generation cost ($/h), power balance as constraints (reference OPF)
              shedding  sum over buses of squared active and reactive imbalance (p.u.^2);
                        0 at the optimum of a feasible case
            """
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_case_args(ps)
    add_verbosity(ps)
    ps.add_argument("--objective", choices=list(OBJECTIVES), default="cost", help="objective (default: cost)")
    ps.add_argument(
        "--flows",
        choices=["variables", "expressions"],
        default="variables",
        help="branch flows as variables (default, as PowerModels) or eliminated expressions",
    )
    ps.add_argument("--profile", default="default", help="Ipopt option profile: a bundled name or a .opt file")
    ps.add_argument("--json", metavar="PATH", type=Path, help="also write the result summary as JSON")
    ps.add_argument("--solution", metavar="DIR", type=Path, help="write bus, generator and branch tables as CSV")
    ps.set_defaults(func=cmd_solve)

    # ---- partition
    pp = sub.add_parser(
        "partition",
        help="split a case into zones and print the per-zone summary",
        description=textwrap.dedent(
            """\
            Split a network into connected zones and print, per zone: own buses, copied
            neighbour buses, generators, load, tie-lines and shared variables (SPEC
            section 4). Zones come from an automatic method on the network graph, from
            the bus area/zone column (--from area|zone), or from a bus,zone CSV file.
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
    pp.add_argument("--out", metavar="FILE", type=Path, help="write the partition as a bus,zone CSV")
    pp.set_defaults(func=cmd_partition)

    # ---- cases
    pc = sub.add_parser("cases", help="list the bundled cases and partitions")
    add_verbosity(pc)
    pc.set_defaults(func=cmd_cases)

    try:  # the distributed solve registers its own subcommand
        from .runcli import add_run_parser
    except ImportError:  # pragma: no cover - only while the module does not exist
        pass
    else:
        add_run_parser(sub)
    return parser


def cmd_solve(args: argparse.Namespace) -> int:
    from .admm.outdir import ensure_dir
    from .opf.centralized import solve_opf

    _check_output_file(args.json, "--json")
    if args.solution is not None and args.solution.exists() and not args.solution.is_dir():
        from .errors import ConfigError

        raise ConfigError(f"--solution {args.solution} is an existing file; it names a directory for the CSV tables")
    res = solve_opf(args.case, objective=args.objective, convention=args.convention, flows=args.flows, profile=args.profile)
    unit = OBJECTIVES[args.objective].unit
    if not args.quiet:
        print(f"case        {res.case}  ({res.n_buses} buses, {res.n_branches} branches, {res.n_gens} generators)")
        print(f"model       SOC relaxation, {res.convention} convention, flows as {res.flows}")
        print(f"            {res.n_variables} variables, {res.n_constraints} constraints")
        if res.success:
            print(f"objective   {res.objective_name} = {res.objective:.6f} {unit}")
        else:  # Ipopt's last iterate is no optimum: its objective means nothing
            print(f"objective   none: no solution ({res.objective_name} of the last iterate {res.objective:.6g} {unit})")
        print(f"status      {res.status_name} ({res.iterations} Ipopt iterations)")
        print(f"max viol.   {res.max_violation:.2e}")
        print(
            f"time        build {res.build_time_s:.3f} s, compile {res.compile_time_s:.3f} s, "
            f"solve {res.solve_time_s:.3f} s (callbacks {res.callback_time_s:.3f} s)"
        )
    if args.json:
        data = res.to_dict()
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    if args.solution:
        ensure_dir(args.solution, "--solution directory")
        res.buses.to_csv(args.solution / "buses.csv", index=False)
        res.generators.to_csv(args.solution / "generators.csv", index=False)
        res.branches.to_csv(args.solution / "branches.csv", index=False)
    if not res.success:
        print(f"powerdp: the solve did not succeed: Ipopt status {res.status_name}", file=sys.stderr)
    return EXIT_OK if res.success else EXIT_FAILED


def _check_output_file(path: Path | None, flag: str) -> None:
    """An output file's directory is created (and the path checked) before any work is done."""
    if path is None:
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
        part = partition(net, args.from_)
    if not args.quiet:
        print(part)
    if args.out:
        part.to_csv(args.out)
        if not args.quiet:
            print(f"wrote {args.out}")
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
    try:
        with stop_signals():
            return int(args.func(args) or 0)
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
        print(f"powerdp: error: {_os_error(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _broken_pipe()
        except (OSError, ValueError):
            pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
