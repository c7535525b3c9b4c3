"""Sweeps of federated-learning runs, and their figures (``powerdp sweep`` / ``powerdp plot`` on learning runs).

A learning sweep is a TOML file with a ``[learn]`` table (the :class:`~powerdp.apps.learning.LearnConfig` fields shared
by every run) and a ``[sweep]`` grid::

    [sweep]
    datasets = ["digits"]
    algorithms = ["objg", "outg"]
    epsilons = [0.1, 1.0]          # ε per local step; or target_epsilons = [1, 10] (total per client)
    local_updates = [1, 5]
    seeds = [0, 1, 2]

    [learn]
    rounds = 500
    box = 0.1

Each run saves to ``DIR/runs/RUN_ID/`` (a finished run is skipped, so an interrupted sweep resumes), and the tidy
tables ``DIR/rounds.csv`` (one row per run and evaluated round) and ``DIR/runs.csv`` (one per run) are written.
:func:`plot_learning` draws the papers' figure rows (noise magnitude, training objective, test error against rounds).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ..apps.learning.config import LearnConfig
from ..errors import ConfigError
from ..runs.views import read_history, read_summary, summary_path

__all__ = ["is_learning_sweep", "run_learning_sweep", "learning_tables", "plot_learning", "is_learning_dir"]

GRID = ("datasets", "algorithms", "epsilons", "target_epsilons", "local_updates", "seeds")


def is_learning_sweep(data: dict[str, Any]) -> bool:
    return "learn" in data


def _configs(data: dict[str, Any], source: str) -> list[tuple[str, LearnConfig]]:
    grid = dict(data.get("sweep", {}))
    unknown = sorted(set(grid) - set(GRID))
    if unknown:
        raise ConfigError(f"{source}: [sweep] has unknown key(s) {', '.join(unknown)}; known: {', '.join(GRID)}")
    if "epsilons" in grid and "target_epsilons" in grid:
        raise ConfigError(f"{source}: give [sweep] epsilons (per step) or target_epsilons (totals), not both")
    base = dict(data["learn"])
    budgets = [("target_epsilon", e) for e in grid.get("target_epsilons", [])] or [("epsilon", e) for e in grid.get("epsilons", [base.get("epsilon", 0.1)])]
    out = []
    for ds, alg, (key, eps), E, seed in itertools.product(
        grid.get("datasets", [base.get("dataset", "digits")]), grid.get("algorithms", [base.get("algorithm", "nonprivate")]),
        budgets, grid.get("local_updates", [base.get("local_updates", 1)]), grid.get("seeds", [base.get("seed", 0)]),
    ):
        fields = {**base, "dataset": ds, "algorithm": alg, "local_updates": E, "seed": seed}
        private = alg != "nonprivate"
        if private:
            fields[key] = eps
        budget = f"_{'T' if key == 'target_epsilon' else 'e'}{eps:g}" if private else ""
        run = f"{Path(str(ds)).stem}_{alg}{budget}_E{E}_s{seed}"
        out.append((run, LearnConfig.from_dict(fields, source=source)))
    seen: dict[str, LearnConfig] = {}
    for run, cfg in out:
        seen.setdefault(run, cfg)
    return list(seen.items())


def run_learning_sweep(data: dict[str, Any], out: str | Path, source: str = "sweep",
                       progress: Callable[[str, str | None, int, int], None] | None = None) -> list[str]:
    """Run every configuration of the grid (serially; each run is fast) into ``out/runs/RUN_ID``; returns the run ids."""
    from ..apps.learning.runner import run_federated

    out = Path(out)
    runs = _configs(data, source)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    for k, (run, cfg) in enumerate(runs, 1):
        d = out / "runs" / run
        err = None
        if not summary_path(d).is_file():
            try:
                run_federated(cfg, out=d, overwrite=True, reference=False)
            except ConfigError:
                raise
            except Exception as exc:  # noqa: BLE001 - one failed run does not stop the sweep
                err = str(exc)
        if progress is not None:
            progress(run, err, k, len(runs))
    learning_tables(out)
    return [r for r, _ in runs]


def is_learning_dir(directory: str | Path) -> bool:
    """Whether ``directory`` is a learning run or a sweep of learning runs."""
    d = Path(directory)
    for rd in [d, *_finished_runs(d)[:1]]:
        if summary_path(rd).is_file():
            try:
                return _read_summary(rd).get("application") == "learning"
            except ConfigError:
                return False
    return False


def _read_summary(rd: Path) -> dict[str, Any]:
    """A learning run's summary, both views joined; an earlier version's flat top-level summary.json too."""
    legacy = rd / "summary.json"
    if legacy.is_file():
        try:
            data = json.loads(legacy.read_text())
        except ValueError as exc:
            raise ConfigError(f"{legacy} is not readable ({exc})") from None
        if isinstance(data, dict) and "summary" not in data:
            return data
    return read_summary(rd)


def _finished_runs(d: Path) -> list[Path]:
    """The runs of a sweep directory that wrote their summary (the coordinator's view, or an earlier version's file)."""
    return sorted(p for p in (d / "runs").glob("*") if p.is_dir() and summary_path(p).is_file())


def learning_tables(directory: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rounds, runs): one row per run and round, one per run, of a learning run or sweep directory."""
    d = Path(directory)
    from ..apps.learning.runner import HISTORY_COLUMNS as LEARNING_HISTORY

    dirs = [d] if summary_path(d).is_file() else _finished_runs(d)
    rounds, runs = [], []
    for rd in dirs:
        s = _read_summary(rd)  # both views: the final figures are the simulation's evaluation
        cfg = json.loads((rd / "config.json").read_text())
        info = {"run": rd.name, "dataset": s["dataset"], "algorithm": s["algorithm"], "epsilon": cfg["epsilon"] if s["private"] else 0.0,
                "target_epsilon": cfg["target_epsilon"], "local_updates": cfg["local_updates"], "seed": cfg["seed"]}
        runs.append({**info, **{k: s[k] for k in ("final_objective", "final_test_error", "centralized_test_error", "rounds")},
                     "epsilon_total": max(s["epsilon_total"].values()) if s["epsilon_total"] else 0.0})
        h = read_history(rd, LEARNING_HISTORY)
        for k, v in info.items():
            h[k] = v
        rounds.append(h)
    if not runs:
        raise ConfigError(f"{d} holds no finished learning runs (no coordinator_view/summary.json in it or in runs/*/)")
    rounds_df, runs_df = pd.concat(rounds, ignore_index=True), pd.DataFrame(runs)
    if (d / "runs").is_dir():
        rounds_df.to_csv(d / "rounds.csv", index=False)
        runs_df.to_csv(d / "runs.csv", index=False)
    return rounds_df, runs_df


def plot_learning(directory: str | Path, out: str | Path | None = None) -> list[Path]:
    """The papers' figure rows for a learning run or sweep: noise magnitude, training objective and test error
    against rounds, one column per ε (or total budget), one line per algorithm and E (mean over seeds, range shaded)."""
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def _band(ax, frame, x, metric, label):
        stats = frame.groupby(x)[metric].agg(["mean", "min", "max"])
        (line,) = ax.plot(stats.index, stats["mean"], label=label)
        ax.fill_between(stats.index, stats["min"], stats["max"], color=line.get_color(), alpha=0.2)

    d = Path(directory)
    rounds, _ = learning_tables(d)
    out = Path(out) if out is not None else d / "figures"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    from .figure_style import suptitle

    every_row = [("noise_magnitude", "noise magnitude Σ|ξ|"), ("objective", "training objective"), ("test_error", "test error")]
    for ds, g in rounds.groupby("dataset"):
        budget = "target_epsilon" if g["target_epsilon"].notna().any() else "epsilon"
        cols = sorted(g[budget].dropna().unique())
        # a row only for what some run has: no noise in a non-private run, no objective with --no-evaluation
        rows = [(m, lab) for m, lab in every_row if m in g and (pd.to_numeric(g[m], errors="coerce").fillna(0) != 0).any()]
        if not any(m in ("objective", "test_error") for m, _ in rows):  # nothing evaluated: the released models' residual
            rows.append(("feasibility", "consensus residual ‖w − z‖₂"))
        fig, axes = plt.subplots(len(rows), len(cols), figsize=(max(6.0, 4 * len(cols)), 0.9 + 2.5 * len(rows)), squeeze=False)
        for j, eps in enumerate(cols):
            sub = g[g[budget] == eps]
            for i, (metric, label) in enumerate(rows):
                ax = axes[i][j]
                for (alg, E), s in sub.groupby(["algorithm", "local_updates"]):
                    s = s.dropna(subset=[metric])
                    if len(s):
                        _band(ax, s, "round", metric, f"{alg} E={E}")
                ax.set_xlabel("round")
                ax.set_ylabel(label)
                if metric == "noise_magnitude" and (sub[metric] > 0).all():
                    ax.set_yscale("log")
            axes[0][j].set_title(f"{'total ε' if budget == 'target_epsilon' else 'ε̄'} = {eps:g}" if eps else "non-private")
        axes[0][0].legend(fontsize=8)
        spread = "one run" if g["run"].nunique() == 1 else "mean over seeds, min–max shaded"
        suptitle(fig, f"{ds}: {', '.join(lab for _, lab in rows)} against rounds ({spread})")
        fig.tight_layout()
        path = out / f"learning_{ds}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
