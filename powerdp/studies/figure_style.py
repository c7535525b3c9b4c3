"""What every figure of powerdp shares: matplotlib without a display, and titles that fit their canvas.

Kept apart from :mod:`powerdp.studies.plots` so that every module drawing figures (plots, learning_sweep, dispatch_plot)
imports it without importing each other.
"""

from __future__ import annotations

__all__ = ["suptitle"]


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        try:
            matplotlib.use("Agg")
        except Exception:  # pragma: no cover - an interactive backend already in use
            pass
    import matplotlib.pyplot as plt

    return plt


def suptitle(fig, text: str, fontsize: float = 12.0) -> None:
    """A figure title that fits the canvas: wrapped to the figure's width (a long title on a one-column figure was cut
    off at both edges), with room made for it by ``fig.tight_layout``."""
    import textwrap

    chars = max(20, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))
    fig.suptitle(textwrap.fill(text, chars), fontsize=fontsize)
