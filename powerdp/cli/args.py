"""Command-line arguments checked where they are read: numeric option types and one-line parse errors.

Every numeric option of every ``powerdp`` command is declared with :func:`integer` or :func:`real` as its
argparse ``type=``, so a bad value is refused while the command line is parsed, before any file is read or
any work is done, with the option's name in the message (argparse adds ``argument --rounds:``).
:class:`Parser` turns argparse's errors (a usage block, then the message) into one line plus where to read
more, exit status 2 as the README documents.
"""

from __future__ import annotations

import argparse
import math
import sys

__all__ = ["EXIT_USAGE", "Parser", "integer", "real"]

EXIT_USAGE = 2  # bad input (README: exit status)


class Parser(argparse.ArgumentParser):
    """argparse's parser with one-line errors: ``powerdp: error: argument --rounds: ...; see 'powerdp run --help'``.

    Subparsers made by ``add_subparsers().add_parser`` are of the class of their parent, so the top-level
    parser being a :class:`Parser` makes every command's parser one."""

    def error(self, message: str):  # noqa: D102 (argparse's hook)
        text = " ".join(str(message).split())
        sys.stderr.write(f"powerdp: error: {text}; see '{self.prog} --help'\n")
        sys.stderr.flush()
        raise SystemExit(EXIT_USAGE)


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

