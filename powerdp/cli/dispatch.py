"""``powerdp dispatch``: a day of private distributed dispatch over a grid's load and renewable profiles."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..apps.dispatch.config import DISPATCH_ALGORITHMS, GAUSSIAN_ALGORITHMS, TOLERANCE, default_algorithm
from ..apps.power_flow.config import ADJACENCIES
from .args import integer, real
from .common import _check_output_file, _status_printer, add_verbosity, refuse_backend_flags, refuse_unused_flags
from .streams import is_terminal

__all__ = ["add_dispatch_parser", "cmd_dispatch", "DISPATCH_DESCRIPTION"]

DISPATCH_DESCRIPTION = """\
Dispatch a grid over a horizon of periods (15 minutes each for SimBench): every period is the distributed
SOC OPF of that period's loads and renewable caps, solved by the zones without revealing their loads,
warm-started from the previous period (consensus, duals, each zone's iterate). The zones' models are
built once; a period only changes their data.

SOURCE is a SimBench grid code (simbench:1-HV-mixed--0-sw; needs pip install "powerdp[profiles]") with
its own profiles, or a case (bundled name, MATPOWER file) with --profiles FILE (CSV or parquet: one row
per period, one column per load's p and q, optionally per generator's available p). Costs are public
(--costs FILE overrides the defaults by generator type, import and curtailment; docs/profiles.md).

Privacy over time (docs/privacy.md, "Privacy over time"): --target-epsilon is the total epsilon per
zone over the whole horizon. --relation user (default): one load's whole profile moves by up to --beta
in every period, and the budget is split over every period's rounds. --relation event: one load value
in one period moves by --beta, and every period gets the whole budget (the claim covers one period's
value, not a profile). The relation is printed at the start.

Each period stops when both relative residuals are at most --tolerance (primal ||w - Bz|| over
max(||w||, ||Bz||); dual rho ||w - w_prev|| over ||lambda||: scale-free, whatever the per-unit base
and the costs' unit), or after --max-rounds rounds. "s per period" is the dispatch's own time; the
simulation's evaluation (centralized reference, --ac-check) is timed and reported apart.

--out DIR keeps the run: per-period checkpoints (Ctrl-C keeps every complete period; powerdp dispatch
--resume DIR continues at the period it stopped in, bit-identical for a seeded run, with the saved settings:
it takes only --backend, --workers, --no-reference, --ac-check, --json, --force, -q, -v),
the coordinator's view (coordinator_view/: history.csv, periods.csv, summary.json) and the simulation's
evaluation (simulation_evaluation/: the costs against the centralized SOC OPF of every period, shedding,
import, curtailment, res_gen/ res_sgen/ res_ext_grid/ p_mw.csv), the zones' own files in zones.private/.
"""

EPILOG = """\
examples:
  powerdp dispatch simbench:1-HV-mixed--0-sw --zones 4 --periods 96 --algorithm nonprivate --json day.json
  powerdp dispatch simbench:1-HV-mixed--0-sw --periods 96 --algorithm objl --target-epsilon 1 --out D
  powerdp dispatch --resume D
  powerdp plot D

exit status: 0 done, 1 a period failed (the complete periods are kept), 2 bad input, 130 interrupted."""

ALGORITHMS = DISPATCH_ALGORITHMS + GAUSSIAN_ALGORITHMS  # what DispatchConfig.validate accepts, in its order


def add_dispatch_parser(sub) -> None:
    p = sub.add_parser("dispatch", help="multi-period private dispatch over load and renewable profiles",
                       description=DISPATCH_DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", metavar="SOURCE", nargs="?", help="simbench:CODE, or a case with --profiles")
    p.add_argument("--periods", type=integer(1), help="periods in the horizon (96 = a day of quarter-hours)")
    p.add_argument("--start", type=integer(0), default=0, help="first period of the data (default 0)")
    p.add_argument("--profiles", type=Path, help="the user's own time series (CSV or parquet)")
    p.add_argument("--costs", type=Path, help="public costs overriding the defaults (CSV or JSON)")
    p.add_argument("--zones", type=integer(2), default=4, help="automatic zones (default 4)")
    p.add_argument("--algorithm", choices=ALGORITHMS, default=None,
                   help="nonprivate (linearized ADMM), exact (exact ADMM), or a private one: objl (objective perturbation), "
                   "inpl (input perturbation: noise once per period, linearized ADMM on the perturbed loads), "
                   "exact/input/laplace (the same under exact ADMM), outl, and their Gaussian forms objg, inpg, "
                   "exact/input/gaussian (need --target-delta), totl and totg (each zone's two load totals released "
                   "once a period, exact ADMM on equal shares of them; docs/privacy.md), inps and tots (inpl and totl "
                   "with the staircase's pure-epsilon noise). Default: nonprivate without --target-epsilon; with it "
                   "the mechanism that measured best (docs/results/dispatch.md): totl "
                   "(--relation event, or user without --target-delta), totg (--relation user with --target-delta)")
    p.add_argument("--target-epsilon", type=real(0, lo_open=True), help="total epsilon per zone over the horizon")
    p.add_argument("--target-delta", type=real(0, 1, lo_open=True, hi_open=True),
                   help="total delta per zone over the horizon: the Gaussian algorithms (objg, inpg, exact/input/gaussian, "
                   "totg) need one; a Laplace one (objl, inpl, exact/input/laplace, totl) is then calibrated with the exact "
                   "privacy-loss distribution instead of pure epsilon")
    p.add_argument("--clip-loads", action="store_true",
                   help="project each perturbed load onto [0, its bus's public rated load] (SimBench's load sn_mva): "
                   "post-processing, no privacy cost (docs/privacy.md)")
    p.add_argument("--relation", choices=("user", "event"), default="user",
                   help="neighbouring profiles: user (one load's whole profile; default) or event (one value, one period)")
    p.add_argument("--beta", type=real(0, lo_open=True), default=0.01, help="how far a neighbouring load moves (p.u.)")
    p.add_argument("--adjacency", choices=list(ADJACENCIES), default="value",
                   help="what one neighbouring change moves: one load value, pd or qd (default), or one bus's pd and qd "
                   "together, each by --beta (bus: a larger sensitivity, so more noise at the same budget; docs/privacy.md)")
    p.add_argument("--ramp", type=real(0, lo_open=True),
                   help="ramp limit: a conventional generator's p moves by at most this fraction of its pmax per period")
    p.add_argument("--max-rounds", type=integer(1), default=100, help="round cap of one period (default 100)")
    p.add_argument("--tolerance", type=real(0), default=TOLERANCE,
                   help=f"stop a period when both relative residuals (primal; dual) are at most this (default {TOLERANCE:g})")
    p.add_argument("--cold-start", action="store_true",
                   help="start every period from the flat start with zero duals (the baseline warm start is measured against)")
    p.add_argument("--rho", type=real(0, lo_open=True), help="ADMM penalty (default: scaled to the costs)")
    p.add_argument("--seed", type=integer(0), help="seeded noise (reproducible; not secret)")
    p.add_argument("--backend", choices=("serial", "process"), default="serial", help="where the zones run")
    p.add_argument("--workers", type=integer(1), help="processes of the process backend")
    p.add_argument("--local-solver", choices=("clarabel", "ipopt"), default="clarabel",
                   help="the zones' solver (default clarabel)")
    p.add_argument("--base-mva", type=real(0, lo_open=True),
                   help="per-unit base of a SimBench grid or pandapower net (MVA; default 100 for SimBench, whose own 1 MVA "
                   "makes the zones' conic solves fail); a MATPOWER case keeps its baseMVA")
    p.add_argument("--no-reference", action="store_true", help="skip the centralized reference of every period")
    p.add_argument("--ac-check", action="store_true",
                   help="run pandapower's AC power flow at every period's dispatch, as powerdp run --ac-check: per period "
                   "whether it converges, the slack's mismatch against the dispatch (MW), the worst voltage outside "
                   "[vmin, vmax] (p.u.), the most loaded branch (%%), the losses (MW); the simulation's evaluation "
                   "(ac_* columns of its periods.csv and --json)")
    p.add_argument("--out", type=Path, help="run directory (checkpoints, the two views, the tables)")
    p.add_argument("--resume", type=Path, metavar="DIR", help="continue the run in DIR at the period it stopped in")
    p.add_argument("--json", type=Path, help="write the run's two views as JSON ('-': standard output)")
    p.add_argument("--force", "--overwrite", dest="force", action="store_true",
                   help="replace the run already in --out and an existing --json file (refused without; with --resume: the "
                   "--json file only)")
    add_verbosity(p)
    p.set_defaults(func=cmd_dispatch)


#: the options a resumed dispatch takes (the rest of its settings are the saved run's)
RESUME_OPTIONS = frozenset({"resume", "backend", "workers", "no_reference", "ac_check", "json", "force", "quiet", "verbose",
                            "func", "out"})


def _config(args):
    from ..apps.dispatch.config import DispatchConfig
    from ..engine.consensus.algorithms import resolve
    from ..errors import ConfigError

    if args.resume is not None:
        from ..runs.record import read_config_file

        refused = sorted(d for d in getattr(args, "_explicit", set()) if d not in RESUME_OPTIONS)
        if refused:  # silently running the saved settings instead would be worse: say which flags cannot act
            raise ConfigError(
                f"--resume {args.resume}: {', '.join('--' + d.replace('_', '-') for d in refused)} would change the saved "
                "run (its config.json; a private day's budget is split over its periods and rounds); a resumed dispatch "
                "accepts only --backend, --workers, --no-reference, --ac-check, --json, --force, -q, -v"
            )
        saved = read_config_file(args.resume / "config.json")
        if saved.get("application") != "dispatch":
            raise ConfigError(f"{args.resume} does not hold a dispatch run")
        saved = {k: v for k, v in saved.items() if k not in ("shedding_weight", "rho_resolved")}
        cfg = DispatchConfig.from_dict(saved, str(args.resume / "config.json"))
        return cfg.replace(backend=args.backend, workers=args.workers).validate()
    if args.source is None:
        raise ConfigError("give a SOURCE (simbench:CODE, or a case with --profiles), or --resume DIR")
    if args.periods is None:
        raise ConfigError("--periods is required (96 = a day of quarter-hours)")
    if args.target_epsilon is None and (args.algorithm is None or not resolve(args.algorithm).private):
        refuse_unused_flags(args, ("beta", "adjacency", "relation"),
                            f"algorithm {args.algorithm or 'nonprivate'!r}{'' if args.algorithm else ' (the default without --target-epsilon)'} "
                            "is not private (it adds no noise)")
    return DispatchConfig(
        source=args.source, periods=args.periods, zones=args.zones, start=args.start,
        profiles=str(args.profiles) if args.profiles else None, costs=str(args.costs) if args.costs else None,
        algorithm=args.algorithm if args.algorithm is not None else default_algorithm(args.target_epsilon, args.target_delta,
                                                                                       args.relation),
        target_epsilon=args.target_epsilon, target_delta=args.target_delta,
        clip_loads=args.clip_loads, relation=args.relation, beta=args.beta, adjacency=args.adjacency,
        ramp=args.ramp, max_rounds=args.max_rounds, tolerance=args.tolerance, seed=args.seed, backend=args.backend,
        workers=args.workers, local_solver=args.local_solver, cold_start=args.cold_start, rho=args.rho,
        base_mva=args.base_mva,
    ).validate()


def _progress(config, quiet: bool):
    """A bar over periods with the current period's rounds (stderr, only on a terminal)."""
    if quiet or not is_terminal(sys.stderr):
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=config.periods, desc="periods", unit="period", file=sys.stderr)

    def progress(row):
        if "period_done" in row:
            bar.update(1)
            bar.set_postfix_str(f"period {row['period']}: {row['rounds']} rounds")
        else:
            bar.set_postfix_str(f"period {row['period']}: round {row['round']}, primal {row['feasibility']:.2e}")

    return progress, bar


def cmd_dispatch(args) -> int:
    from ..apps.dispatch.runner import run_dispatch
    from ..grid.profiles import load_horizon
    from .output import write_json

    if args.resume is not None and args.out is not None and args.out != args.resume:
        from ..errors import ConfigError

        raise ConfigError("--resume DIR continues the run in DIR; leave --out out")
    config = _config(args)
    refuse_backend_flags(args, config.backend)
    _check_output_file(args.json, "--json", args.force)
    say = _status_printer(args)
    if say is not None:
        say(f"loading {config.source} ({config.periods} periods from {config.start})")
    source, profiles, costs = config.source, config.profiles, config.costs
    if args.resume is not None:  # the files the run was made with, by their recorded absolute paths (as run --resume)
        from ..runs.inputs import case_source, read_inputs

        records = read_inputs(args.resume)
        source = source if source.startswith("simbench:") else case_source(records, source)
        profiles = records.get("profiles", {}).get("path", profiles) if profiles else None
        costs = records.get("costs", {}).get("path", costs) if costs else None
    horizon = load_horizon(source, periods=config.periods, start=config.start, profiles=profiles, costs=costs,
                           base_mva=config.base_mva)
    progress, bar = _progress(config, args.quiet)
    out = args.resume if args.resume is not None else args.out
    try:
        result = run_dispatch(config, horizon, out=out, resume=args.resume is not None,
                              overwrite=args.force and args.resume is None,
                              progress=progress, status=say, reference=not args.no_reference, ac_check=args.ac_check)
    finally:
        if bar is not None:
            bar.close()
    views = result.views()
    if args.json is not None:
        write_json(args.json, views)
    if not args.quiet and str(args.json) != "-":
        _report(result)
    return 0


def _report(result) -> None:
    s = result.summary
    lines = [f"{s['source']}: {s['n_periods']} periods, {s['n_zones']} zones, {s['algorithm']}; "
             f"{s['mean_rounds']:.1f} rounds per period, {s['wall_s_per_period']:.2f} s per period "
             f"({s['cpu_s_per_period']:.2f} s CPU in this process)"]
    if s.get("evaluation_s_per_period") is not None:
        parts = ["the evaluation of every round"] + (["the centralized reference"] if s.get("max_relative_cost_gap") is not None
                                                     else []) + (["the AC check"] if "ac_converged" in result.periods else [])
        lines.append(f"the simulation's evaluation ({', '.join(parts)}): {s['evaluation_s_per_period']:.2f} s per period more")
    if s.get("max_relative_cost_gap") is not None:
        lines.append(f"the run's own dispatch: largest relative cost gap to the centralized SOC OPF over the periods: "
                     f"{s['max_relative_cost_gap']:.2e}")
    if s.get("implemented_max_shedding_mw") is not None:
        lines.append(_implemented_line(s, len(result.periods)))
    if "ac_converged" in result.periods:
        lines.append(_ac_line(result.periods))
    if s["private"]:
        eps = ", ".join(f"zone {z}: {e:.4g}" for z, e in s["epsilon_total"].items())
        lines.append(f"{s['relation_text']}")
        lines.append(f"epsilon over the horizon per zone (the ledger): {eps}; the claim: {s['epsilon_claim']:.4g}")
    print("\n".join(lines))


def _implemented_line(s: dict, periods: int) -> str:
    """The zones' implemented dispatch over the periods (their true loads, their tie-line flows held at the agreed
    values), as the operator's AC evaluation sees it, in one line."""
    line = (f"the implemented dispatch (true loads, tie-line flows held at the agreed values): largest shed "
            f"{s['implemented_max_shedding_mw']:.2f} MW ({100 * (s.get('implemented_max_shedding_fraction') or 0):.2f} % of "
            "its period's load)")
    if s.get("implemented_max_relative_cost_gap") is not None:
        line += (f"; AC cost against the centralized dispatch evaluated the same way: largest gap "
                 f"{s['implemented_max_relative_cost_gap']:+.2e}, median {s['implemented_median_relative_cost_gap']:+.2e}; "
                 f"AC evaluation converged in {s['implemented_ac_converged_periods']} of {periods} periods")
    return line


def _ac_line(periods) -> str:
    """The AC check over the periods, in one line."""
    ok = periods["ac_converged"].astype(bool)
    line = f"AC check: the power flow converged in {int(ok.sum())} of {len(periods)} periods"
    if ok.any():
        conv = periods[ok]
        line += (f"; worst slack mismatch {conv['ac_slack_mismatch_mw'].abs().max():.3f} MW, worst voltage violation "
                 f"{conv['ac_max_voltage_violation_pu'].max():.4f} p.u.")
        loading = conv["ac_max_loading_percent"].dropna()
        if len(loading):
            line += f", most loaded branch {loading.max():.1f} %"
    return line
