"""Command-line arguments checked where they are read: numeric option types and one-line parse errors.

Every numeric option of every ``powerdp`` command is declared with :func:`integer` or :func:`real` as its
argparse ``type=``, so a bad value is refused while the command line is parsed, before any file is read or
any work is done, with the option's name in the message (argparse adds ``argument --rounds:``).
:class:`Parser` turns argparse's errors (a usage block, then the message) into one line plus where to read
more, exit status 2 as docs/cli.md documents.
"""

from __future__ import annotations

import argparse
import math
import sys

__all__ = ["EXIT_USAGE", "FLAG_OF", "Parser", "flag_message", "flag_of", "integer", "real"]

EXIT_USAGE = 2  # bad input (docs/cli.md: exit status)


class Parser(argparse.ArgumentParser):
    """argparse's parser with one-line errors: ``powerdp: error: argument --rounds: ...; see 'powerdp run --help'``.

    Subparsers made by ``add_subparsers().add_parser`` are of the class of their parent, so the top-level
    parser being a :class:`Parser` makes every command's parser one. Arguments no parser knows are refused by the
    command's parser (``see 'powerdp run --help'``), not by the top-level one."""

    def error(self, message: str):  # noqa: D102 (argparse's hook)
        text = " ".join(str(message).split())
        sys.stderr.write(f"powerdp: error: {text}; see '{self.prog} --help'\n")
        sys.stderr.flush()
        raise SystemExit(EXIT_USAGE)

    def parse_args(self, args=None, namespace=None):  # noqa: D102 (argparse's)
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            self.command_parser(namespace).error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace

    def command_parser(self, namespace) -> argparse.ArgumentParser:
        """The parser of the (sub)command ``namespace`` was parsed for (itself when it has no subcommands)."""
        parser = self
        while True:
            sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            name = None if sub is None else getattr(namespace, sub.dest, None)
            if name is None or name not in sub.choices:
                return parser
            parser = sub.choices[name]
            parser = getattr(parser, "vertical_parser", None) if getattr(namespace, "vertical", False) and \
                getattr(parser, "vertical_parser", None) is not None else parser


#: a setting whose flag is not ``--`` + its name with dashes (the others are: ``target_delta`` is ``--target-delta``)
FLAG_OF = {
    "case": "CASE", "source": "SOURCE", "dataset": "DATASET", "partition_method": "--method", "evaluate": "--no-evaluation",
    "warm_start": "--no-warm-start", "tol_primal": "--tol", "tol_dual": "--tol", "ipopt_options": "--ipopt-option",
    "overwrite": "--force",
}


def flag_of(setting: str) -> str:
    """The command-line flag of a configuration setting (``extra.trust_radius`` is ``--trust-radius``)."""
    name = setting.removeprefix("extra.")
    return FLAG_OF.get(name, "--" + name.replace("_", "-"))


def flag_message(exc, parser: argparse.ArgumentParser | None) -> str | None:
    """An error about one setting (``ConfigError.for_setting``) in the words of the command line: the flag the user
    typed and its value (``--target-delta: objg needs ...``, ``--epsilon 5: ...``) instead of ``target_delta = None``.
    None when the error is about no one setting, or the command has no flag for it (a config file's key, a setting
    the command fixes itself): the message then stays as it is."""
    setting = getattr(exc, "setting", None)
    if setting is None or parser is None:
        return None
    flag = flag_of(setting)
    known = {o for a in parser._actions for o in a.option_strings} | {
        str(a.metavar) for a in parser._actions if not a.option_strings and a.metavar}
    if flag not in known:
        return None
    value = exc.value
    if value is None or isinstance(value, bool) or flag.startswith("--no-"):
        shown = flag
    elif isinstance(value, float):
        shown = f"{flag} {value:g}"
    elif isinstance(value, (int, str)):
        shown = f"{flag} {value}"
    else:  # a table (--ipopt-option NAME=VALUE...): the flag alone
        shown = flag
    return f"{shown}: {exc.detail}"


def _between(lo, hi, lo_open: bool, hi_open: bool, unit: str) -> str:
    """The accepted range in words: "a number > 0", "a whole number >= 1", "a number in (0, 1)"..."""
    if lo is not None and hi is not None:
        return f"{unit} in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{unit} {'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f"{unit} {'<' if hi_open else '<='} {hi:g}"
    return unit


def _inside(x, lo, hi, lo_open: bool, hi_open: bool) -> bool:
    if lo is not None and (x <= lo if lo_open else x < lo):
        return False
    return not (hi is not None and (x >= hi if hi_open else x > hi))


def integer(lo: int | None = None, hi: int | None = None, *, words: str | None = None):
    """An argparse ``type=`` for a whole number in [lo, hi] (either end optional).

    ``words`` replaces the generated description of the range, e.g. "at least 1, or -1 for one per core"."""
    want = words or _between(lo, hi, False, False, "a whole number")

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {want}") from None
        if not _inside(value, lo, hi, False, False):
            raise argparse.ArgumentTypeError(f"{value} is out of range: give {want}")
        return value

    parse.__name__ = "integer"
    return parse


def real(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False,
         words: str | None = None, keywords: tuple[str, ...] = ()):
    """An argparse ``type=`` for a finite number in the interval from ``lo`` to ``hi`` (open ends where asked).

    ``keywords`` are words accepted as themselves (e.g. ``"auto"``); nan and infinities are always refused."""
    want = words or _between(lo, hi, lo_open, hi_open, "a number")
    if keywords:
        want += " or " + " or ".join(keywords)

    def parse(text: str) -> float | str:
        if str(text).strip() in keywords:
            return str(text).strip()
        try:
            value = float(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {want}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not finite: give {want}")
        if not _inside(value, lo, hi, lo_open, hi_open):
            raise argparse.ArgumentTypeError(f"{value:g} is out of range: give {want}")
        return value

    parse.__name__ = "number"
    return parse

