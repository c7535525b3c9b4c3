"""Every figure type renders to PNG and shows what it claims: axes, labels, lines, legends."""

import matplotlib

matplotlib.use("Agg")

from pathlib import Path

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


# ---------------------------------------------------------------- issue 38: every figure powerdp plot makes, checked


def _drawn_ticklabels(axis):
    """The tick labels an axis draws: visible, non-empty, at a tick inside the view interval."""
    lo, hi = sorted(axis.get_view_interval())
    out = []
    for ticks in (axis.get_major_ticks(), axis.get_minor_ticks()):
        for tick in ticks:
            label = tick.label1
            if label.get_visible() and label.get_text() and lo - 1e-12 <= tick.get_loc() <= hi + 1e-12:
                out.append(label)
    return out


def check_figure(fig, name: str) -> list[str]:
    """What is wrong with a figure: an axes showing nothing, a text (title, label, tick label, legend entry, note)
    reaching outside the canvas, tick labels of one axis overlapping."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    problems = []
    for k, ax in enumerate(fig.axes):
        if not ax.axison:
            continue
        finite = [ln for ln in ax.get_lines() if np.isfinite(np.asarray(ln.get_ydata(), float)).any()]
        shapes = [c for c in ax.collections if len(c.get_offsets()) or len(c.get_paths())]
        if not (finite or shapes or ax.patches or ax.images):
            problems.append(f"{name}: axes {k} ({ax.get_title() or ax.get_ylabel()!r}) shows nothing")
        for axis in (ax.xaxis, ax.yaxis):
            boxes = [t.get_window_extent(renderer) for t in _drawn_ticklabels(axis)]
            for a, b in zip(boxes, boxes[1:]):
                if a.overlaps(b) and a.intersection(a, b).width > 1 and a.intersection(a, b).height > 1:
                    problems.append(f"{name}: axes {k}: tick labels overlap on its {axis.axis_name} axis")
                    break
    tick_labels, drawn = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks()):
                tick_labels.update((id(tick.label1), id(tick.label2)))
            drawn.update(id(t) for t in _drawn_ticklabels(axis))
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        if id(text) in tick_labels and id(text) not in drawn:  # a tick outside the view: never drawn
            continue
        box = text.get_window_extent(renderer)
        if box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1:
            problems.append(f"{name}: text {text.get_text()[:40]!r} reaches outside the canvas")
    return problems


def _every_kind_of_run(root: Path) -> list[Path]:
    """One small run (or sweep) of every kind powerdp plot draws."""
    from powerdp.cli import main

    repo = Path(__file__).resolve().parents[1]
    sweep = root / "sweep.toml"
    sweep.write_text('[sweep]\ncases = ["case14"]\npartitions = [{ zones = 2 }, { zones = 3 }]\nalgorithms = ["objl"]\n'
                     'epsilons = [0.1, 1.0]\nseeds = [0]\n\n[run]\nrounds = 3\n')
    learning = root / "learning.toml"
    learning.write_text('[sweep]\ndatasets = ["digits"]\nalgorithms = ["objg"]\nepsilons = [0.5]\nseeds = [0, 1]\n\n'
                        '[learn]\nrounds = 4\nclients = 2\nevaluate_every = 2\n')
    day = str(repo / "examples" / "case14_day.csv")
    commands = {
        "run": ["run", "case14", "--rounds", "3", "--no-reference"],
        "deployment": ["run", "--deployment", str(root / "split"), "--rounds", "3"],
        "sweep": ["sweep", str(sweep), "--jobs", "1"],
        "market": ["run", "case14", "--model", "dc", "--rounds", "300"],
        "market-private": ["run", "case14", "--model", "dc", "--algorithm", "outg", "--target-epsilon", "5",
                           "--target-delta", "1e-5", "--rounds", "50"],
        "learn": ["learn", "digits", "--clients", "2", "--rounds", "4", "--algorithm", "objg", "--epsilon", "0.5",
                  "--evaluate-every", "2", "--no-reference"],
        "learn-no-evaluation": ["learn", "digits", "--clients", "2", "--rounds", "4", "--no-evaluation"],
        "learning-sweep": ["sweep", str(learning)],
        "noisy-admm": ["learn", "elastic-net", "--algorithm", "noisy-admm", "--users", "50", "--dim", "4", "--rounds", "20"],
        "vertical": ["learn", "breast_cancer", "--vertical", "--rounds", "5"],
        "dispatch": ["dispatch", "case14", "--profiles", day, "--periods", "3", "--max-rounds", "3"],
        "dispatch-private": ["dispatch", "case14", "--profiles", day, "--periods", "3", "--max-rounds", "3", "--algorithm",
                             "objl", "--target-epsilon", "1", "--no-reference"],
    }
    assert main(["-q", "partition", "case14", "--zones", "3", "--split", str(root / "split")]) == 0
    dirs = []
    for name, argv in commands.items():
        d = root / name
        assert main(["-q", *argv, "--out", str(d)]) == 0, name
        dirs.append(d)
    return dirs


def test_every_figure_powerdp_plot_makes_is_finished(tmp_path, monkeypatch):
    """Issue 38: single-run titles were cut off, the deployment's figure had two empty panels, a DC market's history
    was every column on linear axes, a budget axis's labels overlapped, a dispatch's cost scale hid its reference, and
    the network map drew a zone in the tie-lines' red. Every figure of every kind of run is drawn here and checked:
    no empty panel, no text outside the canvas, no overlapping tick labels; and the fixes' own marks."""
    from matplotlib.figure import Figure

    from powerdp.cli import main
    from powerdp.studies.plots import TIE_LINE_COLOUR, ZONE_COLOURS

    problems, drawn = [], []
    save = Figure.savefig

    def checked(fig, path, *args, **kwargs):
        problems.extend(check_figure(fig, Path(str(path)).name))
        drawn.append((Path(str(path)).name, fig))
        return save(fig, path, *args, **kwargs)

    dirs = _every_kind_of_run(tmp_path)
    monkeypatch.setattr(Figure, "savefig", checked)
    for d in dirs:
        assert main(["-q", "plot", str(d)]) == 0, d
    assert not problems, problems
    names = {n for n, _ in drawn}
    assert {"trajectories_case14.png", "privacy_utility_case14.png", "privacy_budget_case14.png",
            "partition_sensitivity_case14.png", "history.png", "learning_digits.png", "dispatch_day.png"} <= names, names
    assert "network_split_3-modularity.png" in names and "network_case14_2-modularity.png" in names, names  # deployment
    import matplotlib.colors as mcolors

    for name, fig in drawn:
        if name.startswith("network_"):  # no zone in the tie-lines' colour, and no red at all
            from matplotlib.collections import PathCollection

            colours = {mcolors.to_hex(c.get_facecolor()[0]) for c in fig.axes[0].collections if isinstance(c, PathCollection)}
            assert colours <= set(ZONE_COLOURS) and mcolors.to_hex(TIE_LINE_COLOUR) not in colours, colours
            assert "#d62728" not in colours
        if name == "dispatch_day.png" and fig.axes[0].get_title().startswith("relative cost gap"):
            assert fig.axes[0].get_yscale() == "log"  # the gap to the reference, not two costs 1e5 apart on one scale
        if name == "history.png" and "DC market" in fig.get_suptitle():  # magnitudes on log axes, each panel named
            panels = [ax for ax in fig.axes if ax.axison]
            assert all(ax.get_title() for ax in panels)
            assert all(ax.get_yscale() == "log" for ax in panels if "ε" not in ax.get_title())


def test_trajectory_panels_say_each_runs_privacy(tmp_path):
    """A new user's report: `powerdp plot` titled a non-private run and a run at a budget "ε = 0.1" (the unused
    --epsilon default). The panels now follow the runs' own privacy: ε per step, a budget, or none."""
    rounds = fake_rounds()
    rounds["privacy"] = np.where(rounds["epsilon"] == 0.1, "ε = 0.1 per step", "ε = 1 in total")
    extra = rounds[rounds["epsilon"] == 0.1].assign(privacy="non-private", algorithm="nonprivate")
    fig = plot_trajectories(pd.concat([extra, rounds]), "t")
    assert [ax.get_title() for ax in fig.axes[:3]] == ["ε = 0.1 per step", "ε = 1 in total", "non-private"]
    runs = fake_runs().assign(privacy=lambda f: [f"ε = {e:g} per step" for e in f["epsilon"]])
    fig = plot_partition_sensitivity(runs, "p")
    assert [fig.axes[3 * i].get_title() for i in range(3)] == ["ε = 0.1 per step", "ε = 0.5 per step", "ε = 1 per step"]


def test_a_runs_table_labels_its_privacy(tmp_path):
    from powerdp.cli import main
    from powerdp.studies.sweep import sweep_tables

    for name, argv in {"np": ["--algorithm", "nonprivate"], "budget": ["--algorithm", "objl", "--target-epsilon", "1"],
                       "step": ["--algorithm", "objl", "--epsilon", "0.5"]}.items():
        assert main(["-q", "run", "case14", "--zones", "2", "--rounds", "3", *argv, "--out", str(tmp_path / "runs" / name)]) == 0
    rounds, runs = sweep_tables(tmp_path)
    assert dict(zip(runs["run"], runs["privacy"])) == {"np": "non-private", "budget": "ε = 1 in total",
                                                       "step": "ε = 0.5 per step"}
    assert set(rounds["privacy"]) == {"non-private", "ε = 1 in total", "ε = 0.5 per step"}
