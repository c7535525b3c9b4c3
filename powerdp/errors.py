"""Exceptions raised by powerdp.

Every error names what is wrong where: the file, the element (bus, branch,
generator, zone) and the field, so that a user can fix the input without
reading a traceback from deep inside numpy or Pyomo.
"""

from __future__ import annotations


class PowerDPError(Exception):
    """Base class of every error powerdp raises on purpose."""


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

    def __init__(self, message: str, status: int | None = None, context: str = ""):
        self.status = status
        self.context = context
        prefix = f"{context}: " if context else ""
        super().__init__(prefix + message)


class InfeasibleError(SolverError):
    """Ipopt reports the problem (or a zone's local problem) as locally infeasible."""


class ConfigError(PowerDPError, ValueError):
    """Bad run configuration (unknown option, out-of-range value)."""
