"""``powerdp sweep`` (a grid of distributed runs from a TOML file) and ``powerdp plot`` (its figures)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from .args import integer
from .common import add_verbosity
from .streams import is_terminal


def add_study_parsers(sub) -> None:
    """The parsers of ``sweep`` and ``plot``."""
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
    ps.add_argument("--jobs", type=integer(1), help="parallel runs (default: one per core)")
    ps.add_argument("--plot", action="store_true", help="draw the figures when done (as powerdp plot DIR)")
    ps.add_argument(
        "--force", "--overwrite", dest="overwrite",
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


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..runs.directory import ensure_dir
    from ..studies.sweep import load_sweep, run_sweep
    from .learn import learning_sweep_file, run_learning_sweep_command

    if learning_sweep_file(args.config):  # a [learn] table: a sweep of federated-learning runs
        return run_learning_sweep_command(args)
    spec = load_sweep(args.config)
    ensure_dir(args.out)
    n = len(spec.configs())
    _warn_privacy(spec)
    if not args.quiet:
        print(f"sweep {args.config}: {n} runs -> {args.out}")
    bar = None
    if not args.quiet:
        try:
            from tqdm import tqdm

            bar = tqdm(total=n, desc="sweep", unit="run", file=sys.stderr, disable=not is_terminal(sys.stderr))
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
        from ..errors import Interrupted

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
        from ..studies.plots import plot_sweep

        for p in plot_sweep(args.out):
            if not args.quiet:
                print(f"figure {p}")
    return 1 if failed else 0


def _warn_privacy(spec) -> None:
    """What a single run says about its ε when it is no proven bound (privacy_warnings: a 'paper' sensitivity), said
    once for the whole sweep before it starts, with the number of runs it concerns. Seeded noise goes unsaid: every
    sweep is a seeded experiment (its ``seeds``)."""
    import logging

    from ..apps.power_flow.run_summary import privacy_labels

    counts: dict[str, int] = {}
    for _, config in spec.configs():
        for text in privacy_labels(config)["privacy_warnings"]:
            if text.startswith("seeded noise"):
                continue
            counts[text] = counts.get(text, 0) + 1
    for text, k in counts.items():
        logging.getLogger("powerdp").warning("%s (%d of the sweep's runs)", text, k)


def cmd_plot(args: argparse.Namespace) -> int:
    from ..runs.kinds import run_kind
    from ..studies.plots import plot_sweep

    if run_kind(args.directory) == "dispatch":  # a day of dispatch: cost, shedding and ε per period
        from ..studies.dispatch_plot import plot_dispatch

        paths = [plot_dispatch([args.directory], args.out)]
    else:
        paths = plot_sweep(args.directory, args.out)
    for p in paths:
        if not args.quiet:
            print(f"figure {p}")
    return 0
