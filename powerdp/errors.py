"""Exceptions raised by powerdp.

Every error names what is wrong where: the file, the element (bus, branch,
generator, zone) and the field, so that a user can fix the input without
reading a traceback from deep inside numpy or Pyomo.
"""

from __future__ import annotations


class PowerDPError(Exception):
    """Base class of every error powerdp raises on purpose.

    ``exit_status`` is the command line's exit status for it: 2 (bad input) unless
    a subclass says otherwise (1: a solve or a run failed; 130: interrupted).
    """

    exit_status = 2


class CaseDataError(PowerDPError, ValueError):
    """A network case is malformed or holds invalid values."""


class PartitionError(PowerDPError, ValueError):
    """A zone partition does not fit the network (unknown bus, empty or disconnected zone...)."""


class ModelError(PowerDPError, ValueError):
    """A model cannot be built or compiled from the given data."""


class SolverError(PowerDPError, RuntimeError):
    """Ipopt failed (numerical trouble, iteration limit, NaN in callbacks...).

    ``status`` is Ipopt's return code and ``message`` its text. ``context`` says
    which problem failed (e.g. ``"zone 2, round 17"``).
    """

    exit_status = 1

    def __init__(self, message: str, status: int | None = None, context: str = ""):
        self.status = status
        self.context = context
        prefix = f"{context}: " if context else ""
        super().__init__(prefix + message)


class InfeasibleError(SolverError):
    """Ipopt reports the problem (or a zone's local problem) as locally infeasible."""


class OutputError(PowerDPError, OSError):
    """An output file could not be written (full disk, file-size limit, permissions); the message names the file."""


class ConfigError(PowerDPError, ValueError):
    """Bad run configuration (unknown option, out-of-range value).

    An error about one setting (:meth:`for_setting`) keeps its ``setting``, ``value`` and ``detail`` apart, so that
    the command line can name the flag the user typed (``--target-delta``) where the API names the key
    (``target_delta = None``): powerdp.cli.args.flag_message."""

    def __init__(self, message: str, *, setting: str | None = None, value=None, detail: str | None = None):
        super().__init__(message)
        self.setting, self.value, self.detail = setting, value, detail

    @classmethod
    def for_setting(cls, setting: str, value, detail: str) -> ConfigError:
        """``setting = value: detail``, with the three parts kept for the command line."""
        return cls(f"{setting} = {value!r}: {detail}", setting=setting, value=value, detail=detail)


class Interrupted(PowerDPError):
    """A run was stopped by Ctrl-C or SIGTERM after a complete round; ``result`` holds what it did."""

    exit_status = 130

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result
