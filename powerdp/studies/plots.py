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

from .figure_style import _plt, suptitle

__all__ = ["plot_trajectories", "plot_privacy_utility", "plot_partition_sensitivity", "plot_network", "plot_sweep",
           "plot_implemented"]

MAX_BUS_LABELS = 500  # beyond this many buses the numbers would cover the map

METRICS = [
    ("noise_magnitude", "noise magnitude Σ|ξ|"),
    ("objective", "objective Σ f_p (p.u.²)"),
    ("feasibility", "feasibility ‖w − Bz‖₂ (p.u.)"),
]


#: zone colours: tab10 without its red (red would read as a tie-line), then tab20's pale tones for many zones
ZONE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
                "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5")
TIE_LINE_COLOUR = "black"


def _has_data(values: pd.Series) -> bool:
    """Whether a column holds anything to draw (a deployment's objective is NaN throughout: its panel is dropped)."""
    return bool(values.notna().any())


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


def _privacy_panels(frame: pd.DataFrame) -> tuple[str, list]:
    """The column that says each run's privacy and its values in panel order: the ``privacy`` labels
    (:func:`powerdp.studies.sweep.privacy_label`: per-step ε ascending, then budgets ascending, then non-private), or the
    per-step ``epsilon`` of a table without them."""
    if "privacy" not in frame:
        return "epsilon", sorted(frame["epsilon"].unique())

    def order(label: str) -> tuple[int, float]:
        if label == "non-private":
            return 2, 0.0
        value = float(label.split("=", 1)[1].split()[0])
        return (1 if label.endswith("in total") else 0), value

    return "privacy", sorted(frame["privacy"].unique(), key=order)


def _panel_title(column: str, value) -> str:
    return str(value) if column == "privacy" else f"ε = {value:g}"


def plot_trajectories(rounds: pd.DataFrame, title: str = "") -> Any:
    """Metrics against rounds: rows = metrics, columns = the runs' privacy (ε per step, a budget, or none), lines =
    algorithms (mean; min–max shaded). A metric no run has (a deployment keeps its objective and noise in the zones)
    gets no row."""
    plt = _plt()
    column, eps_values = _privacy_panels(rounds)
    metrics = [(m, label) for m, label in METRICS if m in rounds and _has_data(rounds[m])] or METRICS[-1:]
    width = max(6.0, 3.8 * len(eps_values))
    fig, axes = plt.subplots(len(metrics), len(eps_values), figsize=(width, 1.0 + 2.8 * len(metrics)), squeeze=False,
                             sharex=True)
    for j, eps in enumerate(eps_values):
        sub = rounds[rounds[column] == eps]
        for i, (metric, label) in enumerate(metrics):
            ax = axes[i, j]
            for (alg, E), g in sub.groupby(["algorithm", "local_updates"]):
                name = alg if sub["local_updates"].nunique() == 1 else f"{alg}, E={E}"
                _band(ax, g, "round", metric, name)
            if _positive(sub[metric]):
                ax.set_yscale("log")
            if i == 0:
                ax.set_title(_panel_title(column, eps))
            if j == 0:
                ax.set_ylabel(label)
            if i == len(metrics) - 1:
                ax.set_xlabel("round t")
            ax.grid(True, alpha=0.3)
    axes[0, -1].legend(title="algorithm", fontsize="small")
    suptitle(fig, title or "trajectories (mean over seeds, min–max shaded)")
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
    suptitle(fig, title or "privacy–utility (mean over seeds and partitions, min–max shaded)")
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
        _budget_ticks(ax, runs["epsilon_total"])
        _label_axis(ax, runs[metric], "total ε per zone (whole run)", label)
    known = runs.dropna(subset=["load_values"]) if "load_values" in runs else runs.iloc[:0]
    if not known.empty:
        eps = np.geomspace(known["epsilon_total"].min(), known["epsilon_total"].max(), 50)
        floor = utility_floor(float(known["load_values"].iloc[0]), float(known["beta"].iloc[0]), eps)
        axes[0, 0].plot(eps, floor, "k--", lw=1, label="floor n·(β/ε)²")
        axes[0, 0].legend(fontsize="small")
    axes[0, 1].legend(title="algorithm", fontsize="small")
    suptitle(fig, title or "utility at a total budget (mean over seeds, min–max shaded)")
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


def _budget_ticks(ax, budgets: pd.Series) -> None:
    """The x ticks of a budget axis: the budgets themselves, labelled as plain numbers, and no minor labels (a log axis
    spanning less than a decade labelled its minor ticks 2×10⁰, 3×10⁰... over each other)."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator, StrMethodFormatter

    values = np.unique(np.round(budgets[budgets > 0].to_numpy(float), 6))
    keep: list[float] = []
    for v in values:  # at least a factor 1.5 apart on the log axis, so two labels never touch
        if not keep or v >= 1.5 * keep[-1]:
            keep.append(float(v))
    ax.xaxis.set_major_locator(FixedLocator(keep))
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_partition_sensitivity(runs: pd.DataFrame, title: str = "") -> Any:
    """Final objective, feasibility and wall time against the number of zones, per method and algorithm.

    One row of panels per privacy level (ε per step, a budget, or none): runs at different levels are never averaged
    together.
    """
    plt = _plt()
    column, eps_values = _privacy_panels(runs) if ("privacy" in runs or "epsilon" in runs) else (None, [None])
    fig, axes = plt.subplots(len(eps_values), 3, figsize=(14, 4.2 * len(eps_values)), squeeze=False)
    cols = [("final_objective", "final objective (p.u.²)"), ("final_feasibility", "final feasibility (p.u.)"), ("wall_s", "wall time (s)")]
    for i, eps in enumerate(eps_values):
        sub = runs if eps is None else runs[runs[column] == eps]
        for ax, (metric, label) in zip(axes[i], cols):
            for (method, alg), g in sub.groupby(["partition_method", "algorithm"]):
                _band(ax, g, "n_zones", metric, f"{method}, {alg}", marker="o")
            _label_axis(ax, sub[metric], "number of zones", label)
            ax.xaxis.get_major_locator().set_params(integer=True)
            if eps is not None:
                ax.set_title(_panel_title(column, eps))
        axes[i, 0].legend(title="method, algorithm", fontsize="small")
    suptitle(fig, title or "partition sensitivity (one row per ε; mean over seeds, min–max shaded)")
    fig.tight_layout()
    return fig


def plot_network(partition, title: str = "", seed: int = 0) -> Any:
    """The bus graph coloured by zone, tie-lines black, thick and dashed (no zone is drawn in a tie-line's colour).

    Up to 300 buses the Kamada–Kawai layout spreads the buses evenly (the spring layout bunched case118's two
    meshed areas together); the figure grows with the network, and the bus numbers sit inside their nodes."""
    import networkx as nx

    plt = _plt()
    net = partition.network
    g = net.graph()
    n = net.n_bus
    pos = nx.kamada_kawai_layout(g) if 2 < n <= 300 and nx.is_connected(g) else nx.spring_layout(g, seed=seed, k=1.5 / np.sqrt(max(n, 1)))
    side = float(np.clip(6.0 + n / 25.0, 7.0, 16.0))
    fig, ax = plt.subplots(figsize=(side, side * 0.85))
    tie = set(map(int, partition.tie_pairs()))
    edges = list(zip(net.pair_f.tolist(), net.pair_t.tolist()))
    inner = [e for p, e in enumerate(edges) if p not in tie]
    ties = [e for p, e in enumerate(edges) if p in tie]
    nx.draw_networkx_edges(g, pos, edgelist=inner, ax=ax, edge_color="0.7", width=0.8)
    nx.draw_networkx_edges(g, pos, edgelist=ties, ax=ax, edge_color=TIE_LINE_COLOUR, width=2.2, style="--", label="tie-lines")
    labelled = n <= MAX_BUS_LABELS
    node_size = 140 if labelled and n <= 150 else (60 if labelled else 20)
    for z in range(partition.n_zones):
        nodes = partition.own_buses(z).tolist()
        nx.draw_networkx_nodes(g, pos, nodelist=nodes, node_color=[ZONE_COLOURS[z % len(ZONE_COLOURS)]], node_size=node_size,
                               edgecolors="white", linewidths=0.5, ax=ax, label=f"zone {partition.labels[z]}")
    if labelled:  # bus numbers as the case file gives them
        nx.draw_networkx_labels(g, pos, labels={i: str(int(b)) for i, b in enumerate(net.bus_ids)},
                                font_size=8 if n <= 30 else (5.5 if n <= 150 else 4), font_color="white", ax=ax)
    ax.set_title(title or f"{net.name}: {partition.n_zones} zones, {len(partition.tie_lines())} tie-lines")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
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
        if g["run"].nunique() == 1:
            what = "one run"
        else:
            over = "seeds" if g["run"].str.replace(r"_s\d+$", "", regex=True).nunique() == g.groupby(["algorithm", "epsilon", "local_updates"]).ngroups else "seeds and partitions"
            what = f"mean over {over}, min–max shaded"
        save(plot_trajectories(g, f"{case}: trajectories ({what})"), f"trajectories_{case}.png")
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


#: the per-round columns of a DC market, vertical-learning or noisy-admm run worth a panel: column → (label, kind),
#: kind "log" (positive values, log axis), "abs" (a signed gap: its magnitude on a log axis) or "linear". Residuals share
#: one panel; bookkeeping (times, solve counts, a constant ρ) is left out.
HISTORY_PANELS = {
    "epsilon_spent": ("ε spent so far (per agent)", "linear"),
    "eval_cost_gap": ("|relative cost gap| to the centralized DC-OPF", "abs"),
    "eval_max_line_violation": ("largest line-limit violation (p.u.)", "log"),
    "eval_imbalance_mw": ("|power imbalance| (MW)", "abs"),
    "eval_max_price_error": ("largest price error ($/MWh)", "log"),
    "eval_train_objective": ("training objective", "log"),
    "eval_test_logloss": ("test log-loss", "log"),
    "eval_test_error": ("test error", "linear"),
    "objective": ("objective at the released x̃", "log"),
    "gap": ("|gap| to the centralized optimum", "abs"),
    "objective_std": ("objective's spread over the runs", "log"),
}
RESIDUALS = {"primal_residual": "primal residual", "dual_residual": "dual residual", "feasibility": "consensus residual"}


def plot_run_history(directory: str | Path, out: str | Path | None, what: str) -> Path:
    """One run's per-round (or per-iteration) history, both views joined (a DC market, a vertical-learning or a
    noisy-admm run): the residuals in one panel, then one labelled panel per quantity of :data:`HISTORY_PANELS`, each on
    a log axis where it is a positive magnitude; a quantity that is 0 (or constant) throughout gets no panel, and is
    named under the figure instead."""
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
    if x not in history.columns or not len(history):
        raise ConfigError(f"{directory} is {what} with no per-round history to plot")
    flat: list[str] = []

    def drawable(c: str) -> bool:
        values = pd.to_numeric(history[c], errors="coerce") if c in history else pd.Series(dtype=float)
        if not values.notna().any():
            return False
        if (values.abs() <= 0).all() or values.nunique() == 1:
            flat.append(f"{(HISTORY_PANELS.get(c) or (RESIDUALS.get(c, c), ''))[0]} {values.iloc[0]:g}")
            return False
        return True

    residuals = [c for c in RESIDUALS if c in history and drawable(c)]
    panels = [c for c in HISTORY_PANELS if c in history and drawable(c)]
    n = len(panels) + (1 if residuals else 0)
    if n == 0:
        raise ConfigError(f"{directory} is {what} with no per-round quantity that changes over its rounds")
    out = ensure_dir(Path(out) if out is not None else directory / "figures", "figure directory")
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(6.0, 4.4 * cols), 0.9 + 3.0 * rows), squeeze=False)
    flat_axes = list(axes.flat)
    k = 0
    if residuals:
        ax = flat_axes[k]
        k += 1
        for c in residuals:
            values = history[c].where(history[c] > 0)
            ax.plot(history[x], values, label=RESIDUALS[c])
        ax.set_yscale("log")
        ax.set_title("residuals", fontsize="small")
        ax.legend(fontsize="x-small")
    for c in panels:
        label, kind = HISTORY_PANELS[c]
        ax = flat_axes[k]
        k += 1
        values = history[c].abs() if kind == "abs" else history[c]
        if kind in ("abs", "log"):
            values = values.where(values > 0)
            ax.set_yscale("log")
        ax.plot(history[x], values)
        ax.set_title(label, fontsize="small")
    for ax in flat_axes[:k]:
        ax.set_xlabel("iteration" if "gap" in history and "primal_residual" not in history else x)
        ax.grid(True, alpha=0.3)
    for ax in flat_axes[k:]:
        ax.set_axis_off()
    suptitle(fig, f"{directory.name}: {what}", fontsize=10)
    if flat:
        import textwrap

        fig.text(0.5, 0.005, textwrap.fill("the same in every round: " + "; ".join(flat), int(fig.get_figwidth() * 13)),
                 ha="center", va="bottom", fontsize="x-small")
    fig.tight_layout(rect=(0, 0.04 if flat else 0, 1, 1))
    path = out / "history.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
