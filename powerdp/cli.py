"""The ``powerdp`` command line.

Subcommands: ``solve`` (centralized SOC-relaxed OPF), ``partition`` (zones of a
network), ``run`` (the private distributed solve), ``cases`` (bundled cases).
``powerdp COMMAND --help`` describes each one.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from pathlib import Path

from ._version import __version__
from .errors import PowerDPError
from .objectives import OBJECTIVES

log = logging.getLogger("powerdp")

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

    exit status: 0 on success, 1 when the solve did not succeed, 2 on bad input.
    """
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
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    verbosity.add_argument("-v", "--verbose", action="store_true", help="print data-cleaning notes and progress details")
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
    src = pp.add_mutually_exclusive_group(required=True)
    src.add_argument("--zones", type=int, metavar="N", help="number of zones for an automatic partition")
    src.add_argument("--from", dest="from_", metavar="SOURCE", help="'area', 'zone', or a bus,zone CSV file")
    pp.add_argument(
        "--method",
        default="modularity",
        choices=["modularity", "kernighan_lin", "spectral"],
        help="automatic method (default: modularity)",
    )
    pp.add_argument("--seed", type=int, default=0, help="seed of randomized methods (default: 0)")
    pp.add_argument("--out", metavar="FILE", type=Path, help="write the partition as a bus,zone CSV")
    pp.set_defaults(func=cmd_partition)

    # ---- cases
    pc = sub.add_parser("cases", help="list the bundled cases and partitions")
    pc.set_defaults(func=cmd_cases)

    try:  # the distributed solve registers its own subcommand
        from .runcli import add_run_parser
    except ImportError:  # pragma: no cover - only while the module does not exist
        pass
    else:
        add_run_parser(sub)
    return parser


def cmd_solve(args: argparse.Namespace) -> int:
    from .opf import solve_opf

    res = solve_opf(args.case, objective=args.objective, convention=args.convention, flows=args.flows, profile=args.profile)
    unit = OBJECTIVES[args.objective].unit
    if not args.quiet:
        print(f"case        {res.case}  ({res.n_buses} buses, {res.n_branches} branches, {res.n_gens} generators)")
        print(f"model       SOC relaxation, {res.convention} convention, flows as {res.flows}")
        print(f"            {res.n_variables} variables, {res.n_constraints} constraints")
        print(f"objective   {res.objective_name} = {res.objective:.6f} {unit}")
        print(f"status      {res.status_name} ({res.iterations} Ipopt iterations)")
        print(f"max viol.   {res.max_violation:.2e}")
        print(
            f"time        build {res.build_time_s:.3f} s, compile {res.compile_time_s:.3f} s, "
            f"solve {res.solve_time_s:.3f} s (callbacks {res.callback_time_s:.3f} s)"
        )
    if args.json:
        data = res.to_dict()
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    if args.solution:
        args.solution.mkdir(parents=True, exist_ok=True)
        res.buses.to_csv(args.solution / "buses.csv", index=False)
        res.generators.to_csv(args.solution / "generators.csv", index=False)
        res.branches.to_csv(args.solution / "branches.csv", index=False)
    return 0 if res.success else 1


def cmd_partition(args: argparse.Namespace) -> int:
    from .network import load_case
    from .partition import partition

    net = load_case(args.case, convention=args.convention)
    if args.zones is not None:
        part = partition(net, zones=args.zones, method=args.method, seed=args.seed)
    else:
        part = partition(net, args.from_)
    if not args.quiet:
        print(part)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":  # the run's defaults, so a --config file can tell explicit flags apart
        args._defaults = {a.dest: a.default for a in _subparser(parser, "run")._actions}
    level = logging.ERROR if args.quiet else (logging.INFO if args.verbose else logging.WARNING)
    logging.basicConfig(level=level, format="%(levelname)s: %(message)s")
    logging.getLogger("pyomo").setLevel(logging.ERROR)
    try:
        return int(args.func(args) or 0)
    except PowerDPError as exc:
        print(f"powerdp: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("powerdp: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
