"""``pyo``: ``pyomo.environ``, imported the first time a model is built or read (0.4 s of a command's start-up).

A run whose zones are compiled straight from the network's arrays (:mod:`powerdp.opf.direct`: every private run of the
power-flow application) never builds a Pyomo model, so it never pays for the import.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pyo", "generate_standard_repn"]


class _LazyPyomo:
    """``pyomo.environ`` on first attribute access."""

    def __getattr__(self, name: str) -> Any:
        import pyomo.environ

        return getattr(pyomo.environ, name)


pyo: Any = _LazyPyomo()


def generate_standard_repn(*args: Any, **kwargs: Any) -> Any:
    """``pyomo.repn.generate_standard_repn``, imported on first call."""
    import pyomo.environ  # noqa: F401 - registers the expression types the repn reads
    from pyomo.repn import generate_standard_repn as repn

    return repn(*args, **kwargs)
