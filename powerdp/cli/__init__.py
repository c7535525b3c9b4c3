"""The ``powerdp`` command line.

Subcommands: ``solve`` (centralized SOC-relaxed OPF), ``partition`` (zones of a
network), ``run`` (the private distributed solve), ``sweep`` and ``plot`` (studies),
``audit`` (an empirical privacy audit), ``cases`` (bundled cases).
``powerdp COMMAND --help`` describes each one.

The commands live in modules of their own: ``solve.py`` (solve, export, partition, cases), ``run.py`` (run),
``study.py`` (sweep, plot), ``audit.py`` (audit); ``common.py`` holds what they share. This module builds the parser
and runs a command: logging, verbosity, and every error turned into its exit status.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap

from .._version import __version__
from ..errors import Interrupted, PowerDPError
from ..runs.inputs import forget_noted
from .args import Parser, flag_message
from .audit import AUDIT_DESCRIPTION, MIN_RUNS, add_audit_parser, cmd_audit
from .common import EXIT_AUDIT_FAILED, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, add_verbosity
from .output import STDOUT_NAME, NamedStdout, json_on_stdout, route_python_warnings
from .run import FLAG_TO_FIELD, RESUME_FLAGS, ROUND_LEGEND, RUN_DESCRIPTION, STOPPED, add_run_parser, cmd_run
from .solve import add_solve_parsers, cmd_cases, cmd_export, cmd_partition, cmd_solve, log
from .streams import open_closed_stderr, protect_streams
from .study import add_study_parsers, cmd_plot, cmd_sweep

__all__ = [  # the names powerdp.cli had before it became a package, and the parser builders
    "AUDIT_DESCRIPTION", "DESCRIPTION", "EPILOG", "EXIT_AUDIT_FAILED", "EXIT_BAD_INPUT", "EXIT_BROKEN_PIPE", "EXIT_FAILED",
    "EXIT_INTERRUPTED", "EXIT_OK", "FLAG_TO_FIELD", "MIN_RUNS", "RESUME_FLAGS", "ROUND_LEGEND", "RUN_DESCRIPTION", "STOPPED",
    "add_audit_parser", "add_run_parser", "add_solve_parsers", "add_study_parsers", "add_verbosity", "build_parser",
    "cmd_audit", "cmd_cases", "cmd_export", "cmd_partition", "cmd_plot", "cmd_run", "cmd_solve", "cmd_sweep",
    "explicit_options", "log", "main", "setup_logging",
]


DESCRIPTION = textwrap.dedent(
    """\
    powerdp - privacy-preserving distributed optimal power flow.

    A network case is split into zones. Each zone (an agent) solves its part of
    the second-order-cone (SOC) relaxation of AC optimal power flow with its own
    solver (by default the fastest certified one that applies: a compiled active set
    or Clarabel; Ipopt on request), and a coordinator drives the zones to agreement
    on the variables they share with a differentially private ADMM, so no zone
    reveals its loads.

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
      powerdp certs make certs --zones 3 && powerdp zone serve --deployment DEP --zone 0 --certs certs

    exit status: 0 success; 1 a solve or run failed; 2 bad input (arguments, files,
    output paths, an existing output file without --force, a closed standard output);
    3 a privacy audit failed (powerdp audit); 130 interrupted (Ctrl-C or SIGTERM).

    output files: an existing output file or run directory is never replaced unless
    --force (or --overwrite) is given; signs a terminal cannot encode are spelled in ASCII.
    """
)


# The commands whose parsers live outside this module's imports, each with the module and function that add it:
# ``powerdp run ...`` builds only its own parser (the other commands' modules import learning, pandas, grpc...).
_LAZY_COMMANDS = {
    "dispatch": ("dispatch", "add_dispatch_parser"),  # multi-period private dispatch (cli/dispatch.py)
    "learn": ("learn", "add_learn_parser"),  # federated learning on the same engine (cli/learn.py)
    "privacy": ("privacy", "add_privacy_parser"),  # powerdp privacy amplification (docs/amplification.md)
    "certs": ("net", "add_certs_parser"),  # certs make: a deployment's test CA and certificates (cli/net.py)
    "zone": ("net", "add_zone_parser"),  # zone serve: a zone's server in a deployment over the network
}


def command_of(argv: list[str]) -> str | None:
    """The command a command line names (its first word that is not an option), None when it names none."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``powerdp`` parser: every command's, or with ``command`` (a command's name) only that command's (a
    command line parsed by it is parsed as by the whole parser; ``powerdp --help`` and a mistyped command use the
    whole one)."""
    from importlib import import_module

    parser = Parser(
        prog="powerdp",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"powerdp {__version__}")
    add_verbosity(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    add_solve_parsers(sub)  # solve, export, partition, cases (cli/solve.py)

    add_run_parser(sub)  # run: the distributed solve (cli/run.py)
    add_study_parsers(sub)  # sweep, plot: its studies (cli/study.py)
    add_audit_parser(sub)
    known = command in sub.choices or command in _LAZY_COMMANDS
    for name, (module, adder) in _LAZY_COMMANDS.items():
        if known and name != command:
            continue
        add = getattr(import_module(f".{module}", __name__), adder)
        add(sub, add_verbosity) if name == "learn" else add(sub)
    from .sharing import register  # solve/run --model dc, learn --vertical (ADMM sharing)

    register(sub, learn=not known or command == "learn")
    return parser


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)


def explicit_options(argv: list[str]) -> set[str]:
    """The destinations of the options given on the command line (whatever their value)."""
    parser = build_parser(command_of(argv))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for parser_ in (sub, getattr(sub, "vertical_parser", None)):  # learn --vertical has a parser of its own
                    for a in getattr(parser_, "_actions", ()):
                        if a.dest != "help":
                            a.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv))) - {"command"}


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        level = {logging.WARNING: "warning", logging.ERROR: "error", logging.INFO: "note", logging.DEBUG: "debug"}
        return f"powerdp: {level.get(record.levelno, record.levelname.lower())}: {record.getMessage()}"


def _not_an_interruption(record: logging.LogRecord) -> bool:
    """A library's own report of a Ctrl-C it was interrupted by (Pyomo logs "Constructing component ... failed:
    KeyboardInterrupt") is dropped: powerdp says "interrupted" once, exit status 130."""
    if record.name.startswith("powerdp"):
        return True
    if record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt):
        return False
    return "KeyboardInterrupt" not in record.getMessage()


def setup_logging(quiet: bool, verbose: bool) -> None:
    """powerdp's messages at the asked level; other libraries' (cyipopt, pyomo, pandapower...) only when they are errors."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_powerdp", False):
            root.removeHandler(h)
    handler._powerdp = True
    handler.addFilter(_not_an_interruption)
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


def main(argv: list[str] | None = None, *, faults=None) -> int:
    """The ``powerdp`` command. ``faults`` is test-only (an :class:`~powerdp.privacy.faults.InjectedFaults`): the
    audits (``audit``, ``learn --audit``) then run a deliberately broken configuration, which they must fail (exit
    status 3). No flag, file or environment variable can set it."""
    from ..runs.stopping import stop_signals

    open_closed_stderr()  # `2>&-`: messages go nowhere, as with 2>/dev/null, and the run goes on
    protect_streams()  # a character the terminal cannot encode is spelled in ASCII, never a traceback
    argv = list(sys.argv[1:] if argv is None else argv)
    if command_of(argv) == "audit":
        from .learn import audit_as_learn

        try:
            argv = audit_as_learn(argv)  # powerdp audit DATASET: the learning audit (powerdp learn --audit)
        except PowerDPError as exc:
            print(f"powerdp: error: {exc}", file=sys.stderr)
            return exc.exit_status
    parser = build_parser(command_of(argv))  # argv may have become a learn command above
    args = parser.parse_args(argv)
    args._explicit = explicit_options(argv)
    args._faults = faults
    if getattr(args, "quiet", False) and getattr(args, "verbose", False):
        parser.error("-q/--quiet and -v/--verbose exclude each other")
    setup_logging(args.quiet, args.verbose)
    forget_noted()
    if sys.stdout is None:  # started with standard output closed (`>&-`): what it prints would vanish without a word
        print(f"powerdp: error: {STDOUT_NAME} is closed; redirect it (e.g. > FILE or > /dev/null)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if sys.stdout is not None and not isinstance(sys.stdout, NamedStdout):
        sys.stdout = NamedStdout(sys.stdout)
    try:
        with stop_signals(), json_on_stdout(getattr(args, "json", None)):
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
        print(f"powerdp: error: {flag_message(exc, parser.command_parser(args)) or exc}", file=sys.stderr)
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
