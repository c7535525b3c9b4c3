"""Figures of runs and sweeps (matplotlib).

* :func:`plot_trajectories` — the paper's Figures 3–4: noise magnitude, objective and
  feasibility against rounds, one column per ε, one line per algorithm, the spread
  over seeds shaded;
* :func:`plot_privacy_utility` — final objective and feasibility against ε, per
  algorithm and E;
* :func:`plot_partition_sensitivity` — final objective, feasibility and wall time
  against the zone count, per partition method;
* :func:`plot_network` — the bus graph coloured by zone, tie-lines highlighted;
* :func:`plot_implemented` — the implemented dispatch an operator would apply (its AC cost gap to the centralized
  dispatch evaluated the same way, its shedding) against the total ε, beside the run's own dispatch.

Each returns a ``matplotlib.figure.Figure``; :func:`plot_sweep` draws every figure
that a sweep directory supports and saves them as PNG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["plot_trajectories", "plot_privacy_utility", "plot_partition_sensitivity", "plot_network", "plot_sweep",
           "plot_implemented"]

MAX_BUS_LABELS = 500  # beyond this many buses the numbers would cover the map

METRICS = [
    ("noise_magnitude", "noise magnitude Σ|ξ|"),
    ("objective", "objective Σ f_p (p.u.²)"),
    ("feasibility", "feasibility ‖w − Bz‖₂ (p.u.)"),
]


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        try:
            matplotlib.use("Agg")
        except Exception:  # pragma: no cover - an interactive backend already in use
            pass
    import matplotlib.pyplot as plt

    return plt


def _band(ax, frame: pd.DataFrame, x: str, metric: str, label: str, **style) -> None:
    """Mean of ``metric`` against ``x`` as a line, its min–max range shaded."""
    stats = frame.groupby(x)[metric].agg(["mean", "min", "max"])
    (line,) = ax.plot(stats.index, stats["mean"], label=label, **style)
    ax.fill_between(stats.index, stats["min"], stats["max"], color=line.get_color(), alpha=0.2)


def _label_axis(ax, values: pd.Series, xlabel: str, ylabel: str) -> None:
    """Axis labels and grid; a log y-scale when every value is positive."""
    if _positive(values):
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)


def _positive(values: pd.Series) -> bool:
    return bool((values > 0).all())


def plot_trajectories(rounds: pd.DataFrame, title: str = "") -> Any:
    """Metrics against rounds: rows = metrics, columns = ε, lines = algorithms (mean; min–max shaded)."""
    plt = _plt()
    eps_values = sorted(rounds["epsilon"].unique())
    fig, axes = plt.subplots(len(METRICS), len(eps_values), figsize=(3.8 * len(eps_values), 9), squeeze=False, sharex=True)
    for j, eps in enumerate(eps_values):
        sub = rounds[rounds["epsilon"] == eps]
        for i, (metric, label) in enumerate(METRICS):
            ax = axes[i, j]
            for (alg, E), g in sub.groupby(["algorithm", "local_updates"]):
                name = alg if sub["local_updates"].nunique() == 1 else f"{alg}, E={E}"
                _band(ax, g, "round", metric, name)
            if _positive(sub[metric]):
                ax.set_yscale("log")
            if i == 0:
                ax.set_title(f"ε = {eps:g}")
            if j == 0:
                ax.set_ylabel(label)
            if i == len(METRICS) - 1:
                ax.set_xlabel("round t")
            ax.grid(True, alpha=0.3)
    axes[0, -1].legend(title="algorithm", fontsize="small")
    fig.suptitle(title or "trajectories (mean over seeds, min–max shaded)")
    fig.tight_layout()
    return fig


def plot_privacy_utility(runs: pd.DataFrame, title: str = "") -> Any:
    """Final objective and feasibility against ε (log–log), one line per algorithm and E."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), squeeze=False)
    for ax, (metric, label) in zip(axes[0], [("final_objective", "final objective (p.u.²)"), ("final_feasibility", "final feasibility (p.u.)")]):
        for (alg, E), g in runs.groupby(["algorithm", "local_updates"]):
            name = alg if runs["local_updates"].nunique() == 1 else f"{alg}, E={E}"
            _band(ax, g, "epsilon", metric, name, marker="o")
        ax.set_xscale("log")
        _label_axis(ax, runs[metric], "ε per local step", label)
    axes[0, 1].legend(title="algorithm", fontsize="small")
    fig.suptitle(title or "privacy–utility (mean over seeds and partitions, min–max shaded)")
    fig.tight_layout()
    return fig


def utility_floor(load_values: float, beta: float, epsilon: np.ndarray) -> np.ndarray:
    """The rough floor n·(β/ε)² of the shedding objective at a total budget ε (docs/privacy.md): an ε-DP
    release estimates each of the n load values no better than about β/ε, and a balanced dispatch
    estimates them."""
    return load_values * (beta / np.asarray(epsilon, dtype=float)) ** 2


def plot_privacy_budget(runs: pd.DataFrame, title: str = "") -> Any:
    """Final objective and feasibility against the total ε per zone (log–log), one line per algorithm,
    with the floor n·(β/ε)² on the objective panel: algorithms compared at equal total budget."""
    plt = _plt()
    runs = runs[runs["epsilon_total"] > 0]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), squeeze=False)
    for ax, (metric, label) in zip(axes[0], [("final_objective", "final objective (p.u.²)"), ("final_feasibility", "final feasibility (p.u.)")]):
        for (alg, E), g in runs.groupby(["algorithm", "local_updates"]):
            g = g.assign(epsilon_total=g["epsilon_total"].round(6))
            name = alg if runs["local_updates"].nunique() == 1 else f"{alg}, E={E}"
            _band(ax, g, "epsilon_total", metric, name, marker="o")
        ax.set_xscale("log")
        _label_axis(ax, runs[metric], "total ε per zone (whole run)", label)
    known = runs.dropna(subset=["load_values"]) if "load_values" in runs else runs.iloc[:0]
    if not known.empty:
        eps = np.geomspace(known["epsilon_total"].min(), known["epsilon_total"].max(), 50)
        floor = utility_floor(float(known["load_values"].iloc[0]), float(known["beta"].iloc[0]), eps)
        axes[0, 0].plot(eps, floor, "k--", lw=1, label="floor n·(β/ε)²")
        axes[0, 0].legend(fontsize="small")
    axes[0, 1].legend(title="algorithm", fontsize="small")
    fig.suptitle(title or "utility at a total budget (mean over seeds, min–max shaded)")
    fig.tight_layout()
    return fig


def plot_implemented(runs: pd.DataFrame, title: str = "") -> Any:
    """The implemented dispatch (docs/privacy.md) against the total ε per zone, one line per algorithm: the |relative
    gap| of its AC operating point's cost to the centralized dispatch's evaluated the same way (log; the 1 % line),
    and the MW it sheds beside the MW the run's own dispatch sheds (dashed)."""
    plt = _plt()
    runs = runs[runs["epsilon_total"] > 0].assign(epsilon_total=lambda f: f["epsilon_total"].round(6))
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.2), squeeze=False)
    gap_ax, shed_ax = axes[0]
    for alg, g in runs.groupby("algorithm"):
        g = g.assign(abs_gap=g["implemented_relative_cost_gap"].astype(float).abs().clip(lower=1e-7))
        _band(gap_ax, g.dropna(subset=["abs_gap"]), "epsilon_total", "abs_gap", alg, marker="o")
        line = shed_ax.plot([], [])[0]
        color = line.get_color()
        stats = g.groupby("epsilon_total")["implemented_shedding_mw"].agg(["mean", "min", "max"])
        shed_ax.plot(stats.index, stats["mean"], marker="o", color=color, label=f"{alg}: implemented")
        own = g.groupby("epsilon_total")["total_shedding_mw"].mean()
        shed_ax.plot(own.index, own, ls="--", color=color, alpha=0.6, label=f"{alg}: the run's own")
    gap_ax.axhline(0.01, color="k", lw=1, ls="--", label="1 %")
    for ax in (gap_ax, shed_ax):
        ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
        ax.set_xlabel("total ε per zone (whole run)")
    gap_ax.set_yscale("log")
    gap_ax.set_ylabel("|AC cost gap| to the centralized dispatch")
    shed_ax.set_yscale("symlog", linthresh=1.0)
    shed_ax.set_ylabel("load shed (MW)")
    gap_ax.legend(title="algorithm", fontsize="x-small")
    shed_ax.legend(fontsize="x-small", ncol=2)
    fig.suptitle(title or "the implemented dispatch at a total budget (mean over seeds, min–max shaded)")
    fig.tight_layout()
    return fig


def plot_partition_sensitivity(runs: pd.DataFrame, title: str = "") -> Any:
    """Final objective, feasibility and wall time against the number of zones, per method and algorithm.

    One row of panels per ε: runs at different privacy levels are never averaged together.
    """
    plt = _plt()
    eps_values = sorted(runs["epsilon"].unique()) if "epsilon" in runs else [None]
    fig, axes = plt.subplots(len(eps_values), 3, figsize=(14, 4.2 * len(eps_values)), squeeze=False)
    cols = [("final_objective", "final objective (p.u.²)"), ("final_feasibility", "final feasibility (p.u.)"), ("wall_s", "wall time (s)")]
    for i, eps in enumerate(eps_values):
        sub = runs if eps is None else runs[runs["epsilon"] == eps]
        for ax, (metric, label) in zip(axes[i], cols):
            for (method, alg), g in sub.groupby(["partition_method", "algorithm"]):
                _band(ax, g, "n_zones", metric, f"{method}, {alg}", marker="o")
            _label_axis(ax, sub[metric], "number of zones", label)
            ax.xaxis.get_major_locator().set_params(integer=True)
            if eps is not None:
                ax.set_title(f"ε = {eps:g}")
        axes[i, 0].legend(title="method, algorithm", fontsize="small")
    fig.suptitle(title or "partition sensitivity (one row per ε; mean over seeds, min–max shaded)")
    fig.tight_layout()
    return fig


def plot_network(partition, title: str = "", seed: int = 0) -> Any:
    """The bus graph coloured by zone (networkx spring layout), tie-lines drawn red and thick."""
    import networkx as nx

    plt = _plt()
    net = partition.network
    g = net.graph()
    pos = nx.spring_layout(g, seed=seed)
    fig, ax = plt.subplots(figsize=(8, 7))
    tie = set(map(int, partition.tie_pairs()))
    edges = list(zip(net.pair_f.tolist(), net.pair_t.tolist()))
    inner = [e for p, e in enumerate(edges) if p not in tie]
    ties = [e for p, e in enumerate(edges) if p in tie]
    nx.draw_networkx_edges(g, pos, edgelist=inner, ax=ax, edge_color="0.6", width=1.0)
    nx.draw_networkx_edges(g, pos, edgelist=ties, ax=ax, edge_color="red", width=2.5, label="tie-lines")
    cmap = plt.get_cmap("tab10" if partition.n_zones <= 10 else "tab20")
    for z in range(partition.n_zones):
        nodes = partition.own_buses(z).tolist()
        nx.draw_networkx_nodes(g, pos, nodelist=nodes, node_color=[cmap(z % cmap.N)], node_size=60, ax=ax, label=f"zone {partition.labels[z]}")
    if net.n_bus <= MAX_BUS_LABELS:  # bus numbers as the case file gives them
        nx.draw_networkx_labels(g, pos, labels={i: str(int(b)) for i, b in enumerate(net.bus_ids)}, font_size=6 if net.n_bus > 60 else 8, ax=ax)
    ax.set_title(title or f"{net.name}: {partition.n_zones} zones, {len(partition.tie_lines())} tie-lines")
    ax.legend(fontsize="small", loc="best")
    ax.set_axis_off()
    fig.tight_layout()
    return fig


def plot_sweep(directory: str | Path, out: str | Path | None = None) -> list[Path]:
    """Draw every figure a sweep directory (or one run's directory) supports; save PNGs (default: DIR/figures)."""
    from ..errors import ConfigError
    from ..runs.directory import ensure_dir
    from ..runs.kinds import describe, run_kind
    from .learning_sweep import is_learning_dir, plot_learning
    from .sweep import run_dirs, sweep_tables

    plt = _plt()
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"{directory} is not a directory (a sweep's --out or a run's --out)")
    kind = run_kind(directory)
    if kind in ("noisy_admm", "dc_market", "vertical"):  # one run of an application without sweeps: its history
        return [plot_run_history(directory, out, describe(kind))]
    if is_learning_dir(directory):  # a federated-learning run or sweep (powerdp learn)
        return plot_learning(directory, out)
    out = Path(out) if out is not None else directory / "figures"
    rounds, runs = sweep_tables(directory)
    if runs.empty:
        raise ConfigError(f"{directory} holds no finished runs (no coordinator_view/summary.json in it or in runs/*/)")
    ensure_dir(out, "figure directory")
    paths = []

    def save(fig, name):
        path = out / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    for case, g in rounds.groupby("case"):
        over = "seeds" if g["run"].str.replace(r"_s\d+$", "", regex=True).nunique() == g.groupby(["algorithm", "epsilon", "local_updates"]).ngroups else "seeds and partitions"
        save(plot_trajectories(g, f"{case}: trajectories (mean over {over}, min–max shaded)"), f"trajectories_{case}.png")
    for case, g in runs.groupby("case"):
        if g["epsilon"].nunique() > 1:
            save(plot_privacy_utility(g, f"{case}: privacy–utility"), f"privacy_utility_{case}.png")
        if g.loc[g["epsilon_total"] > 0, "epsilon_total"].round(6).nunique() > 1:
            save(plot_privacy_budget(g, f"{case}: utility at a total budget"), f"privacy_budget_{case}.png")
            if "implemented_relative_cost_gap" in g and g["implemented_relative_cost_gap"].notna().any():
                save(plot_implemented(g, f"{case}: the implemented dispatch at a total budget"), f"implemented_{case}.png")
        if g["n_zones"].nunique() > 1:
            save(plot_partition_sensitivity(g, f"{case}: partition sensitivity"), f"partition_sensitivity_{case}.png")
    from ..grid.loading import load_case
    from ..grid.partition import partition as make_partition

    for run_dir in run_dirs(directory):
        part_csv = run_dir / "partition.csv"
        if not part_csv.is_file():
            continue
        from ..apps.power_flow.plan import load_config

        cfg = load_config(run_dir)
        case = Path(str(cfg.deployment)).name if cfg.deployment is not None else Path(str(cfg.case)).stem
        name = f"network_{case}_{Path(str(cfg.partition)).stem if cfg.partition else f'{cfg.zones}-{cfg.partition_method}'}.png"
        if (out / name) in paths:
            continue
        if cfg.deployment is not None:  # the coordinator's public network: the topology is all a network figure needs
            from ..apps.power_flow.zone_data import load_public_network

            net = load_public_network(cfg.deployment)
        else:
            net = load_case(cfg.case, convention=cfg.convention)
        save(plot_network(make_partition(net, str(part_csv))), name)
    return paths


def plot_run_history(directory: str | Path, out: str | Path | None, what: str) -> Path:
    """One run's per-round (or per-iteration) history, both views joined: every numeric column against the rounds,
    on a log scale where the values are positive (a DC market, a vertical-learning or a noisy-admm run)."""
    from ..errors import ConfigError
    from ..runs.directory import ensure_dir
    from ..runs.views import COORDINATOR_VIEW, EVALUATION_VIEW, read_file, read_history

    plt = _plt()
    directory = Path(directory)
    try:
        if (directory / COORDINATOR_VIEW / "history.csv").is_file():
            history = read_history(directory)
        else:  # noisy-admm: nothing per iteration crosses, so only the evaluation has a history
            history = read_file(directory / EVALUATION_VIEW / "history.csv", pd.read_csv, ["round"])
    except ConfigError as exc:
        raise ConfigError(f"{directory} is {what}, but its history cannot be read: {exc}") from None
    x = "round"
    columns = [c for c in history.columns if c != x and pd.api.types.is_numeric_dtype(history[c]) and history[c].notna().any()]
    if x not in history.columns or not len(history) or not columns:
        raise ConfigError(f"{directory} is {what} with no per-round history to plot")
    out = ensure_dir(Path(out) if out is not None else directory / "figures", "figure directory")
    n = len(columns)
    fig, axes = plt.subplots((n + 2) // 3, min(n, 3), figsize=(4.2 * min(n, 3), 3.2 * ((n + 2) // 3)), squeeze=False)
    for ax, c in zip(axes.flat, columns):
        ax.plot(history[x], history[c])
        if _positive(history[c]):
            ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_title(c, fontsize="small")
    for ax in list(axes.flat)[n:]:
        ax.set_axis_off()
    fig.suptitle(f"{directory.name}: {what}", fontsize="small")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    path = out / "history.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
