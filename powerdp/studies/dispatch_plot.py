"""The figure of a dispatch's day (``powerdp plot DIR`` on a ``powerdp dispatch`` run): per period, the dispatch's cost
against the centralized SOC OPF's (the non-private optimum), the load shed, and the ε spent over the horizon.

With the centralized reference the cost panel shows the relative gap |cost − reference| / |reference| on a log axis: a
private day's cost of 1e9 $/h on a linear axis flattened a reference of 1e4 $/h onto its zero line. A non-private day
has no ε panel."""

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
    from .figure_style import _plt

    plt = _plt()
    dirs = [Path(d) for d in directories]
    out = ensure_dir(Path(out) if out is not None else dirs[0] / "figures", "figure directory")
    runs = [read_dispatch(d) for d in dirs]
    reference = all(p["centralized_cost"].notna().any() for p, _ in runs)
    private = any(s.get("target_epsilon") for _, s in runs)
    fig, axes = plt.subplots(1, 3 if private else 2, figsize=(13.5 if private else 9.5, 3.8))
    for periods, summary in runs:
        label = f"{summary.get('algorithm')}" + (f" (ε = {summary['target_epsilon']:g}, {summary.get('relation')}-level)"
                                                  if summary.get("target_epsilon") else "")
        x = periods["period"]
        if reference:
            gap = ((periods["cost"] - periods["centralized_cost"]).abs() / periods["centralized_cost"].abs())
            axes[0].plot(x, gap.where(gap > 0), label=label)
        else:
            axes[0].plot(x, periods["cost"], label=label)
        axes[1].plot(x, periods["shedding_mw"], label=label)
        if private:
            axes[2].plot(x, periods["epsilon_spent"], label=label)
    if reference:
        axes[0].set_yscale("log")
        axes[0].set_ylabel("|cost − centralized| / |centralized|")
        titles = ["relative cost gap to the centralized SOC OPF"]
    else:
        axes[0].set_ylabel("cost ($/h)")
        titles = ["cost per period (no centralized reference)"]
    axes[1].set_ylabel("load shed (MW)")
    titles.append("shedding per period")
    if private:
        axes[2].set_ylabel("ε spent so far (largest over zones)")
        titles.append("privacy spent over the horizon")
    for ax, title in zip(axes, titles):
        ax.set_xlabel("period")
        ax.set_title(title, fontsize="small")
        ax.grid(True, alpha=0.3)
    axes[-1].legend(fontsize="x-small")
    fig.tight_layout()
    path = out / name
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
