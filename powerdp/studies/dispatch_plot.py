"""The figure of a dispatch's day (``powerdp plot DIR`` on a ``powerdp dispatch`` run): per period, the dispatch's cost
against the centralized SOC OPF's (the non-private optimum), the load shed, and the ε spent over the horizon."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

__all__ = ["plot_dispatch", "read_dispatch"]


def read_dispatch(directory: str | Path) -> tuple[pd.DataFrame, dict]:
    """A dispatch run's per-period table (the simulation's evaluation, which holds the coordinator's columns too) and
    its coordinator summary; one line naming the file when it cannot be read."""
    from ..errors import ConfigError
    from ..runs.views import COORDINATOR_VIEW, EVALUATION_VIEW

    d = Path(directory)
    path = d / EVALUATION_VIEW / "periods.csv"
    try:
        periods = pd.read_csv(path)
        summary = json.loads((d / COORDINATOR_VIEW / "summary.json").read_text())["summary"]
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"{d} is a dispatch run, but its periods cannot be read ({path}: {exc})") from None
    return periods, summary


def plot_dispatch(directories: Sequence[str | Path], out: str | Path | None = None, name: str = "dispatch_day.png") -> Path:
    """One figure of one or more dispatch runs over the same horizon (their algorithms side by side): cost per period
    with the centralized reference, shedding per period, ε spent per zone over the horizon. Saved in ``out``
    (default: the first run's ``figures/``)."""
    from ..runs.directory import ensure_dir
    from .plots import _plt

    plt = _plt()
    dirs = [Path(d) for d in directories]
    out = ensure_dir(Path(out) if out is not None else dirs[0] / "figures", "figure directory")
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 3.6))
    reference_drawn = False
    for d in dirs:
        periods, summary = read_dispatch(d)
        label = f"{summary.get('algorithm')}" + (f" (ε = {summary['target_epsilon']:g}, {summary.get('relation')}-level)"
                                                  if summary.get("target_epsilon") else "")
        x = periods["period"]
        axes[0].plot(x, periods["cost"], label=label)
        if not reference_drawn and periods["centralized_cost"].notna().any():
            axes[0].plot(x, periods["centralized_cost"], "k--", lw=1, label="centralized SOC OPF")
            reference_drawn = True
        axes[1].plot(x, periods["shedding_mw"], label=label)
        axes[2].plot(x, periods["epsilon_spent"], label=label)
    axes[0].set_ylabel("cost ($/h)")
    axes[1].set_ylabel("load shed (MW)")
    axes[2].set_ylabel("ε spent so far (largest over zones)")
    for ax, title in zip(axes, ("cost per period", "shedding per period", "privacy spent over the horizon")):
        ax.set_xlabel("period")
        ax.set_title(title, fontsize="small")
        ax.legend(fontsize="x-small")
    fig.tight_layout()
    path = out / name
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
