"""``powerdp solve`` (centralized SOC-relaxed OPF), ``export`` (a dispatch into pandapower), ``partition`` (zones of
a network) and ``cases`` (bundled cases)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from pathlib import Path

from ..errors import ConfigError
from ..opf.local_solver import SOLVERS
from ..opf.objectives import OBJECTIVES
from .args import integer
from .common import EXIT_FAILED, EXIT_OK, _add_case_args, _check_output_file, _weight, add_verbosity, check_output_dir
from .output import write_json

log = logging.getLogger("powerdp")


def add_solve_parsers(sub) -> None:
    """The parsers of ``solve``, ``export``, ``partition`` and ``cases``."""
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
    ps.add_argument("--json", metavar="PATH", type=Path, help="also write the result summary as JSON (- : to standard output, alone; the report then goes to standard error; an existing PATH is refused unless --force)")
    ps.add_argument(
        "--out", metavar="DIR", type=Path,
        help="write result.json and the solution in physical units (generators.csv, buses.csv, branches.csv, zones.csv) "
        "to DIR, and inputs.json (the case file's absolute path and SHA-256); powerdp export DIR --pandapower FILE.json "
        "reads it. A DIR that already holds a solve is refused",
    )
    ps.add_argument("--force", "--overwrite", dest="overwrite", action="store_true",
                    help="replace an existing --json file and the solve already in --out DIR (refused without)")
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
    pe.add_argument("--force", "--overwrite", dest="force", action="store_true", help="replace FILE if it exists (refused without)")
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
    src.add_argument("--zones", type=integer(1), metavar="N", help="number of zones for an automatic partition")
    src.add_argument("--from", dest="from_", metavar="SOURCE", help="'area', 'zone', or a bus,zone CSV file")
    pp.add_argument(
        "--method",
        default="auto",
        choices=["auto", "modularity", "kernighan_lin", "spectral"],
        help="automatic method (default: auto, the bundled partition of a bundled case when there is one for N "
        "zones, else modularity; as powerdp run)",
    )
    pp.add_argument("--seed", type=integer(0), default=0, help="seed of randomized methods (default: 0)")
    pp.add_argument(
        "--allow-disconnected",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="accept given zones (--from) made of several islands, with a warning (default); "
        "--no-allow-disconnected makes them an error",
    )
    pp.add_argument("--out", metavar="FILE", type=Path, help="write the partition as a bus,zone CSV (an existing FILE is refused unless --force)")
    pp.add_argument("--force", "--overwrite", dest="force", action="store_true",
                    help="replace an existing --out FILE, and the deployment already in --split DIR (its public/ and every "
                    "zone_P.private/ folder are removed first, the zones' run files with them)")
    pp.add_argument(
        "--split",
        metavar="DIR",
        type=Path,
        help="write a deployment: DIR/public/ (the network without loads, and the partition: the coordinator's) and "
        "DIR/zone_P.private/loads.csv (zone P's loads: only zone P's operator gets it); run it with powerdp run --deployment DIR. "
        "Each zone_P.private folder is created 0700 and its file 0600 (only their owner can read them), and no per-zone "
        "load figure is printed",
    )
    pp.set_defaults(func=cmd_partition)

    # ---- cases
    pc = sub.add_parser("cases", help="list the bundled cases and partitions")
    add_verbosity(pc)
    pc.set_defaults(func=cmd_cases)


def cmd_solve(args: argparse.Namespace) -> int:
    from ..opf.centralized import SOLVE_FILES, TABLE_FILES, solve_opf

    _check_output_file(args.json, "--json", args.overwrite)
    for flag, path in (("--solution", args.solution), ("--out", args.out)):
        if path is not None and path.exists() and not path.is_dir():
            raise ConfigError(f"{flag} {path} is an existing file; it names a directory for the CSV tables")
    _check_solve_out(args.out)
    if args.shedding_weight is not None and not OBJECTIVES[args.objective].weighted:
        raise ConfigError(f"--shedding-weight: objective {args.objective!r} has no shedding penalty to weight; use --objective cost+shedding")
    if args.profile is not None and args.solver != "ipopt":
        raise ConfigError(f"--profile {args.profile} is an Ipopt option profile; it needs --solver ipopt (not {args.solver})")
    check_output_dir(args.solution, "--solution", TABLE_FILES, args.overwrite)  # before the solve, never after it
    check_output_dir(args.out, "--out", (*SOLVE_FILES, "inputs.json"), args.overwrite)
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
        res.save_tables(args.solution)
    if args.out:
        from ..runs.inputs import case_entry, record_inputs

        res.save(args.out)
        record_inputs(args.out, {"case": case_entry(args.case)})
    if not res.success:
        print(f"powerdp: the solve did not succeed: {label} status {res.status_name}", file=sys.stderr)
    return EXIT_OK if res.success else EXIT_FAILED


def _check_solve_out(out: Path | None) -> None:
    """``solve --out`` never writes into a run or a sweep (a solve's own files: :func:`check_output_dir`)."""
    if out is None or not out.is_dir():
        return
    from ..runs.directory import holds_run

    if holds_run(out) or (out / "sweep.json").is_file():
        raise ConfigError(f"--out {out} holds a run or a sweep; give the solve a directory of its own")


def _export_case(d: Path, fallback: str) -> str:
    """The case a run or solve directory was made from: its recorded file, checked unchanged (runs/inputs.py)."""
    from ..runs.inputs import case_source, verify_inputs

    source = case_source(verify_inputs(d, "export"), fallback)
    text = str(source)
    if text.startswith("pandapower network "):  # a solve saved before inputs.json: the network's name
        import pandapower.networks as pn

        name = text.removeprefix("pandapower network ")
        if callable(getattr(pn, name, None)):
            return f"pandapower:{name}"
    return source


#: why a run of another application has nothing to write into a pandapower network (export)
NOT_EXPORTED = {
    "deployment": "its coordinator holds only the public network, without loads, and each zone keeps its own solution, "
                  "so there is no dispatch to write into a pandapower network",
    "dc_market": "a DC dispatch has no voltages or reactive powers; its dispatch is in simulation_evaluation/generators.csv",
}


def cmd_export(args: argparse.Namespace) -> int:
    import pandapower as pp

    from ..grid.loading import load_case
    from ..opf.pandapower_io import ac_check, to_pandapower
    from ..opf.tables import ResultTables, dispatch_from_tables

    d, target = args.directory, args.pandapower
    if not d.is_dir():
        raise ConfigError(f"{d} is not a directory (give a powerdp run or solve output directory)")
    _check_output_file(target, "--pandapower", args.force)
    if (d / "config.json").is_file():  # a run
        from ..apps.power_flow.result import RunResult
        from ..runs.kinds import describe, run_kind

        kind = run_kind(d)
        if kind != "power_flow":
            raise ConfigError(f"cannot export {d}: it is {describe(kind)}; {NOT_EXPORTED.get(kind, 'only a power-flow run has an AC dispatch')}")
        run = RunResult.load(d)
        net = load_case(_export_case(d, run.config.case), convention=run.config.convention)
        if run.tables is not None:
            dispatch = dispatch_from_tables(net, run.tables, where=str(d))
        else:  # a run saved before the tables existed: assemble from the zones' solutions
            from ..grid.partition import partition
            from ..opf.tables import dispatch_from_zones

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
    from ..files.atomic import atomic_write_text

    atomic_write_text(target, pp.to_json(pp_net))  # whole or not at all: a full disk keeps the old file, names this one
    if not args.quiet:
        counts = ", ".join(f"{len(pp_net[e])} {e}" for e in ("bus", "ext_grid", "gen", "sgen", "load", "line", "trafo") if len(pp_net[e]))
        print(f"wrote {target} (pandapower network of {net.name}: {counts})")
    return EXIT_OK


def cmd_partition(args: argparse.Namespace) -> int:
    from ..apps.power_flow.plan import bundled_partition_name
    from ..grid.loading import load_case
    from ..grid.partition import partition

    _check_output_file(args.out, "--out", args.force)
    if args.split is not None:
        _check_split_dir(args.split, args.force)
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
        # a deployment's per-zone load totals are each zone's secret: a split prints the partition without them
        print(part.describe(loads=not args.split))
    if args.out:
        part.to_csv(args.out)
        if not args.quiet:
            print(f"wrote {args.out}")
    if args.split:
        from ..apps.power_flow.zone_data import remove_deployment, split_case
        from ..runs.directory import ensure_dir

        remove_deployment(args.split)  # only with --force (checked above): the old zones' folders go with it
        split_case(net, part, ensure_dir(args.split, "--split directory"))
        if not args.quiet:
            print(f"wrote {args.split}/public (network without loads, partition) and {part.n_zones} zone_P.private/loads.csv")
    return 0


def _check_split_dir(directory: Path, force: bool) -> None:
    """``--split DIR``, before any work: a directory that holds a deployment is replaced only with --force (its
    public/ and every zone_P.private/, with the zones' run files, are removed first)."""
    from ..apps.power_flow.zone_data import deployment_parts
    from ..runs.directory import ensure_dir, holds_run

    ensure_dir(directory, "--split directory")
    if directory.is_dir() and (holds_run(directory) or (directory / "sweep.json").is_file()):  # never mixed, even forced
        raise ConfigError(f"--split {directory} holds a run or a sweep; give the deployment a directory of its own")
    parts = deployment_parts(directory)
    if parts and not force:
        names = ", ".join(p.name + "/" for p in parts[:4]) + (f" and {len(parts) - 4} more" if len(parts) > 4 else "")
        raise ConfigError(f"--split {directory} already holds a deployment ({names}); give --force to replace it (its zone "
                          "folders, with the runs' zone files in them, are removed), or another --split")


def cmd_cases(args: argparse.Namespace) -> int:
    from importlib import resources

    root = resources.files("powerdp.cases")
    for p in sorted(root.iterdir(), key=lambda p: p.name):
        if p.name.endswith((".m", ".csv")):
            print(p.name)
    return 0
