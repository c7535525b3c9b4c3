"""What every ``powerdp`` command shares: exit statuses, -q/-v, the CASE arguments, argument types, output-path
checks and the setup-stage printer."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .args import real

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_AUDIT_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


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


#: --shedding-weight: "auto" or a positive number ($/h per p.u.^2)
_weight = real(0, lo_open=True, words="a number > 0 ($/h per p.u.^2)", keywords=("auto",))


def _check_output_file(path: Path | None, flag: str, force: bool) -> None:
    """An output file's directory is created (and the path checked) before any work is done ("-": standard output);
    an existing file is refused unless ``force`` (--force: the overwrite rule of every command, cli_io.OVERWRITE_RULE)."""
    if path is None or str(path) == "-":
        return
    from ..errors import ConfigError
    from ..runs.directory import ensure_dir
    from .output import refuse_existing_output

    refuse_existing_output(path, flag, force)
    ensure_dir(path.parent if str(path.parent) else Path("."), f"directory of {flag} {path}")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{flag} {path} is not writable")


def check_output_dir(path: Path | None, flag: str, files, force: bool) -> None:
    """An output directory, before any work: created (or refused, naming it, when it cannot be), and the files
    ``files`` the command would write into it refused when they exist, unless ``force`` (the overwrite rule)."""
    if path is None:
        return
    from ..errors import ConfigError
    from ..runs.directory import ensure_dir

    d = ensure_dir(path, f"{flag} directory")
    existing = [name for name in files if (d / name).exists()]
    if existing and not force:
        raise ConfigError(f"{flag} {path} already holds {', '.join(existing)}; give --force to replace them, or another {flag}")


def refuse_unused_flags(args, dests, why: str) -> None:
    """The flags among ``dests`` given on the command line, refused in one line saying ``why`` they would do nothing
    (a privacy flag of a non-private run: silently ignored, it would let a user believe the run private)."""
    from ..errors import ConfigError
    from .args import flag_of

    given = sorted(d for d in dests if d in getattr(args, "_explicit", set()))
    if given:
        raise ConfigError(f"{', '.join(flag_of(d) for d in given)}: not used: {why}")


def refuse_backend_flags(args, backend: str) -> None:
    """--workers acts on the process backend only, --rank-timeout on MPI only, the certificate and timeout flags on net only: given with another backend they would
    do nothing, so they are refused (one line, before any work)."""
    if backend != "process":
        refuse_unused_flags(args, ("workers",), f"it sets the worker processes of --backend process; the backend is {backend}")
    if backend != "mpi":
        refuse_unused_flags(args, ("rank_timeout",), f"it bounds the silence of an MPI rank (--backend mpi); the backend is {backend}")
    if backend != "net":
        from .net import NET_RUN_FIELDS

        refuse_unused_flags(args, tuple(d for d in NET_RUN_FIELDS if hasattr(args, d)),
                            f"it sets up the zone servers of --backend net; the backend is {backend}")


def _status_printer(args):
    """Setup stages (loading, partition, reference solve, agents) on stderr, unless -q."""
    if args.quiet:
        return None

    def say(msg: str) -> None:
        print(f"powerdp: {msg}...", file=sys.stderr, flush=True)

    return say
