"""Time to an answer: a distributed solve to its stopping rule, end to end, beside the centralized solves it replaces.

Every solve runs as a whole process, the way a user runs it, in one session (interleaved: the machine's load hits
them alike):

* ``powerdp solve CASE --solver clarabel`` and ``--solver ipopt`` (the centralized SOC relaxation);
* ``powerdp run CASE --zones Z ... --backend process --workers W`` and, with ``--backends process,mpi``,
  ``mpiexec -n W+1 powerdp run ... --backend mpi``, each until the stopping rule (both relative residuals ≤ ``--tol``)
  or the round cap.

For each: the wall time of the whole process (start-up, loading, set-up and rounds: what a user waits for), its CPU
time (user + system of the process and its children; under MPI of every rank), and for the distributed runs the
rounds, why they stopped, the final relative residuals, the largest disagreement of a tie-line flow in MW, and the
gap of the final objective to the optimum (``--optimum``, else the centralized Ipopt solve's when it solved, else
Clarabel's) and when the rounds' objective came, and stayed, within 1e-3 and 1e-4 of it. ``--figure FILE``
draws both relative residuals of every distributed run against wall time (set-up included), with the centralized
solves' wall times as vertical lines.

The distributed runs skip the simulation's evaluations (``--no-reference --no-ac-evaluation``: the centralized
reference, and pandapower's AC power flow and OPF of the implemented dispatch), which are not part of the answer.

    python benchmarks/time_to_answer.py --case ../shared/data/matpower/case13659pegase.m
    python benchmarks/time_to_answer.py --case case118 --zones 3 --algorithm objl --target-epsilon 1 --target-delta 1e-5
    python benchmarks/time_to_answer.py ... --backends process,mpi --figure docs/results/figures/time_to_answer.png

Prints one JSON line per solve and a summary line; ``--json FILE`` writes them all.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, CPU s of the process and its children, the completed process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


def _streamed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess, dict[int, float]]:
    """:func:`_timed`, reading the command's output as it comes: also the seconds since the start at which each
    ``round N ...`` progress line arrived (a round's end as the user sees it)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, arrived = [], {}
    for line in proc.stdout:
        lines.append(line)
        match = re.match(r"round\s+(\d+)\s", line)
        if match:
            arrived[int(match.group(1))] = time.perf_counter() - t0
    proc.wait()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, subprocess.CompletedProcess(cmd, proc.returncode, "".join(lines), "".join(lines)), arrived


def _powerdp() -> list[str]:
    exe = shutil.which("powerdp")
    return [exe] if exe else [sys.executable, "-m", "powerdp"]


def centralized(args, solver: str, tmp: Path) -> dict:
    out = tmp / f"solve_{solver}.json"
    cmd = [*_powerdp(), "solve", args.case, "--solver", solver, "--objective", args.objective, "--json", str(out), "-q"]
    wall, cpu, proc = _timed(cmd)
    row = {"solve": f"centralized {solver}", "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "exit": proc.returncode}
    if out.is_file():
        data = json.loads(out.read_text())
        row.update(objective=data.get("objective"), status=data.get("status_name"), success=data.get("success"))
    if proc.returncode:
        row["error"] = proc.stderr.strip().splitlines()[-1:] if proc.stderr else None
    return row


def distributed(args, backend: str, tmp: Path) -> tuple[dict, pd.DataFrame | None]:
    out_dir, out_json = tmp / f"run_{backend}", tmp / f"run_{backend}.json"
    flags = ["run", args.case, "--zones", str(args.zones), "--algorithm", args.algorithm, "--objective", args.objective,
             "--rounds", str(args.rounds), "--tol", str(args.tol), "--backend", backend, "--no-reference", "--no-ac-evaluation", "--out", str(out_dir),
             "--json", str(out_json), "--force", "-v", "--checkpoint-every", "0", *shlex.split(args.run_flags)]
    if args.local_solver:
        flags += ["--local-solver", args.local_solver]
    if args.target_epsilon is not None:
        flags += ["--target-epsilon", str(args.target_epsilon)]
        if args.target_delta is not None:
            flags += ["--target-delta", str(args.target_delta)]
    if args.seed is not None:
        flags += ["--seed", str(args.seed)]
    if backend == "mpi":
        cmd = ["mpiexec", "-n", str(args.workers + 1), *_powerdp(), *flags]
    else:
        cmd = [*_powerdp(), *flags, "--workers", str(args.workers)]
    wall, cpu, proc, arrived = _streamed(cmd)
    row = {"solve": f"distributed {backend}", "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "exit": proc.returncode}
    history = None
    if out_json.is_file():
        s = json.loads(out_json.read_text())
        row.update({k: s.get(k) for k in ("rounds", "stopped", "final_objective", "final_cost", "total_shedding_mw", "setup_s",
                                           "final_primal_relative", "final_dual_relative", "consensus_gap_mw",
                                           "consensus_gap_mvar", "host_peak_rss_mb")})
        row["loop_s"] = s.get("wall_s")
        eps = s.get("epsilon_total") or {}
        row["epsilon_spent"] = max(eps.values()) if eps else 0.0
        hist_path = out_dir / "coordinator_view" / "history.csv"
        if hist_path.is_file():
            history = pd.read_csv(hist_path)
            # when each round's progress line arrived (-v prints every round); else the rounds' wall times after the
            # set-up, the whole wall's rest counted before them (an upper bound: writing the results comes after)
            history["elapsed_s"] = (history["round"].map(arrived) if len(arrived) == len(history)
                                    else wall - float(history["wall_s"].sum()) + history["wall_s"].cumsum())
            row["first_round_s"] = round(float(history["elapsed_s"].iloc[0]), 2)
            row["after_last_round_s"] = round(wall - float(history["elapsed_s"].iloc[-1]), 2)
            evaluation = out_dir / "simulation_evaluation" / "history.csv"
            if evaluation.is_file():  # the rounds' objective (the simulation's evaluation: every zone's own data)
                history = history.merge(pd.read_csv(evaluation)[["round", "objective"]], on="round", how="left")
    if proc.returncode:
        row["error"] = proc.stderr.strip().splitlines()[-1:] if proc.stderr else None
    return row, history


#: the relative cost gaps at which the time to an answer is reported
GAPS = (1e-3, 1e-4)


def time_to_gap(history: pd.DataFrame, optimum: float) -> dict:
    """For each gap of :data:`GAPS`: the round and the seconds since the command started at which the rounds'
    objective first came within it of ``optimum`` (``first``), and from which it stayed within it to the end
    (``settled``); None when never."""
    out = {}
    if "objective" not in history:
        return out
    within = ((history["objective"] - optimum).abs() / abs(optimum)).to_numpy()
    for gap in GAPS:
        ok = within <= gap
        first = int(ok.argmax()) if ok.any() else None
        settled = None if not ok[-1] else (int(len(ok) - (~ok[::-1]).argmax()) if (~ok).any() else 0)
        for name, k in (("first", first), ("settled", settled)):
            out[f"gap_{gap:g}_{name}"] = None if k is None else {
                "round": int(history["round"].iloc[k]), "elapsed_s": round(float(history["elapsed_s"].iloc[k]), 2)}
    return out


def figure(path: Path, histories: dict[str, pd.DataFrame], central: list[dict], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = {"process": "tab:blue", "mpi": "tab:green"}
    for backend, h in histories.items():
        color = styles.get(backend, "tab:gray")
        ax.semilogy(h["elapsed_s"], h["primal_relative"], color=color, label=f"{backend}: primal")
        ax.semilogy(h["elapsed_s"], h["dual_relative"], color=color, linestyle="--", label=f"{backend}: dual")
    for row, color in zip(central, ("tab:red", "tab:purple")):
        if row.get("success"):
            ax.axvline(row["wall_s"], color=color, linestyle=":", label=f"{row['solve']} ({row['wall_s']:.1f} s)")
    ax.set_xlabel("wall time since the command started, s")
    ax.set_ylabel("relative residual")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--zones", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--algorithm", default="nonprivate")
    ap.add_argument("--objective", default="cost+shedding")
    ap.add_argument("--rounds", type=int, default=500, help="the round cap (default 500)")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--local-solver", default=None, help="default: the run's default")
    ap.add_argument("--target-epsilon", type=float, default=None)
    ap.add_argument("--target-delta", type=float, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--run-flags", default="", help="more flags of powerdp run, one string")
    ap.add_argument("--backends", default="process", help="comma list: process, mpi")
    ap.add_argument("--centralized", default="clarabel,ipopt", help="comma list of centralized solvers ('' for none)")
    ap.add_argument("--optimum", type=float, default=None,
                    help="the case's optimum to measure gaps against (default: the centralized Ipopt solve's, else Clarabel's)")
    ap.add_argument("--figure", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    rows, histories, central = [], {}, []
    with tempfile.TemporaryDirectory(prefix="time_to_answer_") as tmp_name:
        tmp = Path(tmp_name)
        for solver in [s for s in args.centralized.split(",") if s]:
            row = centralized(args, solver, tmp)
            row["loadavg_1min"] = round(os.getloadavg()[0], 2)
            if args.optimum is not None and row.get("objective") is not None:
                row["relative_gap"] = (row["objective"] - args.optimum) / abs(args.optimum)
            central.append(row)
            rows.append(row)
            print(json.dumps(row), flush=True)
        for backend in [b for b in args.backends.split(",") if b]:
            row, history = distributed(args, backend, tmp)
            row["loadavg_1min"] = round(os.getloadavg()[0], 2)
            reference = next((c for c in reversed(central) if c.get("success")), None)
            ipopt = next((c for c in central if c["solve"].endswith("ipopt") and c.get("success")), None)
            reference = ipopt or reference
            optimum = args.optimum if args.optimum is not None else (reference or {}).get("objective")
            if optimum is not None and row.get("final_objective") is not None:
                row["reference"] = "--optimum" if args.optimum is not None else reference["solve"]
                row["relative_gap"] = (row["final_objective"] - optimum) / abs(optimum)
                if reference is not None:
                    row["wall_vs_reference"] = round(row["wall_s"] / reference["wall_s"], 3)
                if history is not None:
                    row.update(time_to_gap(history, optimum))
            clarabel = next((c for c in central if c["solve"].endswith("clarabel")), None)
            if clarabel is not None:
                row["wall_vs_centralized_clarabel"] = round(row["wall_s"] / clarabel["wall_s"], 3)
            if history is not None:
                histories[backend] = history
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.figure and histories:
        figure(args.figure, histories, central,
               f"{Path(args.case).stem}, {args.zones} zones, {args.algorithm}, {args.objective}, {args.workers} workers")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
