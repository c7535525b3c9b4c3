"""Every figure type renders to PNG and shows what it claims: axes, labels, lines, legends."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd

from powerdp.grid.partition import bundled_partition
from powerdp.studies.plots import (
    plot_network,
    plot_partition_sensitivity,
    plot_privacy_budget,
    plot_privacy_utility,
    plot_trajectories,
    utility_floor,
)


def fake_rounds():
    rows = []
    rng = np.random.default_rng(0)
    for alg in ("objl", "outl"):
        for eps in (0.1, 1.0):
            for seed in (0, 1):
                for t in range(1, 11):
                    rows.append({"algorithm": alg, "epsilon": eps, "seed": seed, "local_updates": 1, "round": t,
                                 "noise_magnitude": 1 + rng.random(), "objective": 1 / t + rng.random() * 0.1,
                                 "feasibility": 0.1 / t + 0.01})
    return pd.DataFrame(rows)


def fake_runs():
    rows = []
    for alg in ("objl", "outl"):
        for eps in (0.1, 0.5, 1.0):
            for zones, method in ((2, "modularity"), (3, "modularity"), (4, "spectral")):
                rows.append({"algorithm": alg, "epsilon": eps, "local_updates": 1, "n_zones": zones, "partition_method": method,
                             "final_objective": eps * zones, "final_feasibility": 0.1 * eps, "wall_s": zones * 1.0})
    return pd.DataFrame(rows)


def test_trajectories_figure(tmp_path):
    fig = plot_trajectories(fake_rounds(), "t")
    fig.savefig(tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 10_000
    axes = fig.axes
    assert len(axes) == 3 * 2  # metrics x epsilons
    assert [ax.get_title() for ax in axes[:2]] == ["ε = 0.1", "ε = 1"]
    assert axes[0].get_ylabel().startswith("noise magnitude")
    assert axes[2].get_ylabel().startswith("objective")
    assert axes[4].get_ylabel().startswith("feasibility") and axes[4].get_xlabel() == "round t"
    for ax in axes:
        assert len(ax.get_lines()) == 2  # one mean line per algorithm
        assert len(ax.collections) == 2  # shaded spread per algorithm
    legend = axes[1].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["objl", "outl"]


def test_privacy_utility_figure(tmp_path):
    fig = plot_privacy_utility(fake_runs())
    fig.savefig(tmp_path / "p.png")
    a, b = fig.axes
    assert a.get_xscale() == "log" and a.get_xlabel() == "ε per local step"
    assert a.get_ylabel().startswith("final objective") and b.get_ylabel().startswith("final feasibility")
    assert len(a.get_lines()) == 2
    np.testing.assert_allclose(a.get_lines()[0].get_xdata(), [0.1, 0.5, 1.0])


def test_privacy_budget_figure_has_the_floor(tmp_path):
    rows = [{"algorithm": alg, "local_updates": 1, "seed": s, "epsilon_total": te, "final_objective": k * 10 / te,
             "final_feasibility": 0.01 / te, "load_values": 28, "beta": 0.01}
            for k, alg in enumerate(("objl", "inpl"), 1) for te in (0.1, 1.0, 10.0) for s in (0, 1)]
    fig = plot_privacy_budget(pd.DataFrame(rows))
    fig.savefig(tmp_path / "b.png")
    a, b = fig.axes
    assert a.get_xscale() == "log" and a.get_xlabel().startswith("total ε")
    floor = [ln for ln in a.get_lines() if ln.get_label().startswith("floor")]
    assert len(floor) == 1 and len(a.get_lines()) == 3
    x, y = floor[0].get_data()
    np.testing.assert_allclose(y, 28 * (0.01 / x) ** 2)
    assert utility_floor(236, 0.01, 1.0) == 236e-4  # case118 at ε = 1: the issue's ≈ 0.024


def test_partition_sensitivity_figure(tmp_path):
    runs = fake_runs()
    fig = plot_partition_sensitivity(runs)
    fig.savefig(tmp_path / "s.png")
    assert len(fig.axes) == 3 * 3  # one row of (objective, feasibility, time) per ε: never averaged over ε
    assert all(ax.get_xlabel() == "number of zones" for ax in fig.axes)
    assert fig.axes[2].get_ylabel() == "wall time (s)"
    assert [fig.axes[3 * i].get_title() for i in range(3)] == ["ε = 0.1", "ε = 0.5", "ε = 1"]
    # (method, algorithm) lines: modularity x 2 algorithms, spectral x 2
    assert len(fig.axes[0].get_lines()) == 4
    # each row shows its own ε's values: objective = ε * zones in fake_runs, no spread from other ε
    for i, eps in enumerate((0.1, 0.5, 1.0)):
        for line in fig.axes[3 * i].get_lines():
            np.testing.assert_allclose(line.get_ydata(), eps * np.asarray(line.get_xdata(), float))


def test_network_map(tmp_path, case118):
    part = bundled_partition(case118, 3)
    fig = plot_network(part)
    fig.savefig(tmp_path / "n.png")
    ax = fig.axes[0]
    assert "3 zones" in ax.get_title() and "8 tie-lines" in ax.get_title()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "tie-lines" in labels and sum(l.startswith("zone") for l in labels) == 3
    # node collections: one per zone, with every bus drawn once
    from matplotlib.collections import LineCollection, PathCollection

    nodes = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(nodes) == 3 and sum(len(c.get_offsets()) for c in nodes) == 118
    assert sorted(int(t.get_text()) for t in ax.texts) == sorted(case118.bus_ids.tolist())  # bus numbers on the map
    lines = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert sum(len(c.get_segments()) for c in lines) == case118.n_pair
    assert any(len(c.get_segments()) == len(part.tie_pairs()) for c in lines)
