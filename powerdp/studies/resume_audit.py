"""The audit's resume channel: interrupt a run and resume it, and count what the coordinator received against the
ledger (docs/privacy.md, "Resume"; issue 36).

:func:`interrupted_run` runs an application in a child process with the command line's own stop handler
(:func:`powerdp.runs.stopping.stop_signals`: SIGINT ends the round in progress, writes the checkpoint and stops), records
every update the coordinator receives through the run's ``observe`` hook, and stops it as the plan says: ``("int", k)``
sends SIGINT once the coordinator has received the attempt's k-th round (what an operator's Ctrl-C does), ``("kill",
k)`` sends SIGKILL there (a crash: the last checkpoint may be rounds behind). The attempt signals itself from the hook,
so a stop lands on its round however fast the run. Each stop is followed by a resume, the last attempt runs to the end;
an attempt that fails or ends before its stop leaves the channel without a verdict (:func:`audit_resume` says so).

:func:`count_releases` then counts, per zone, the distinct releases of every round that crossed (a resumed zone that
repeats a round bit for bit sends the same release again: one; a fresh noisy copy: two), and
:func:`resume_channel` composes them with the ledger's own per-step mechanism and compares the result with what the
final ledger charged: the channel fails when the coordinator received more than the ledger counts.
"""

from __future__ import annotations

import hashlib
import math
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["interrupted_run", "count_releases", "steps_crossed", "crossed_epsilon", "resume_channel", "audit_resume", "stop_plan"]

#: an attempt that records no new round for this long is reported as stuck
_STALL_S = 600.0


def _sender(update) -> int:
    return int(update.zone if hasattr(update, "zone") else update.agent)


def _child(start: Callable[[bool, Callable], Any], resume: bool, records: str,
           stop: tuple[str, int] | None) -> None:  # pragma: no cover - a child
    """One attempt. ``stop`` = (kind, k): once the coordinator has received the k-th new round of this attempt, the
    attempt stops itself: SIGINT through the command line's handler ("int": the round ends, the checkpoint is written)
    or SIGKILL ("kill": the process dies there, between the release and any checkpoint). Signalled from inside, the
    stop lands on that round whatever the machine's speed (a parent polling the records raced a fast run's end)."""
    from ..errors import Interrupted
    from ..runs.stopping import stop_signals

    status = 0
    rounds_seen: set[int] = set()
    with open(records, "a", encoding="utf-8") as fh:
        def observe(updates) -> None:
            for u in updates:
                digest = hashlib.blake2b(np.ascontiguousarray(np.asarray(u.released, dtype=float)).tobytes(), digest_size=16)
                fh.write(f"{_sender(u)} {int(u.round)} {digest.hexdigest()}\n")
                if int(u.round) > 0:
                    rounds_seen.add(int(u.round))
            fh.flush()
            if stop is not None and len(rounds_seen) == stop[1]:
                os.fsync(fh.fileno())
                os.kill(os.getpid(), signal.SIGINT if stop[0] == "int" else signal.SIGKILL)

        with stop_signals():  # the command line's own handler: Ctrl-C finishes the round and checkpoints
            try:
                start(resume, observe)
            except Interrupted:
                status = 130
            except BaseException:  # noqa: BLE001 - reported by the exit status and in the records' error file
                import traceback

                with open(records + ".errors", "a", encoding="utf-8") as err:
                    err.write(traceback.format_exc())
                status = 1
    os._exit(status)


def _rounds_recorded(path: Path, offset: int) -> int:
    """How many rounds (≥ 1) the records written after ``offset`` bytes reach."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            rounds = {int(line.split()[1]) for line in fh.read().decode().splitlines() if line.strip()}
    except FileNotFoundError:
        return 0
    return len({r for r in rounds if r > 0})


def interrupted_run(start: Callable[[bool, Callable], Any], plan: list[tuple[str, int]], records: str | Path) -> list[int]:
    """Run ``start(resume, observe)`` in child processes (fork), stopped as ``plan`` says (module docstring) and resumed
    after each stop; every update the coordinator receives is appended to ``records`` as "zone round digest". Returns
    the exit status of each attempt (130 stopped, 0 finished, -9 killed)."""
    ctx = multiprocessing.get_context("fork")
    records = Path(records)
    statuses = []
    for i, step in enumerate([*plan, None]):
        offset = records.stat().st_size if records.exists() else 0
        child = ctx.Process(target=_child, args=(start, i > 0, str(records), step), daemon=True)
        child.start()
        t0, seen = time.monotonic(), 0
        while child.is_alive():  # the attempt stops itself (``_child``); one that records nothing for long is stuck
            now = _rounds_recorded(records, offset)
            if now > seen:
                seen, t0 = now, time.monotonic()
            if time.monotonic() - t0 > _STALL_S:
                os.kill(child.pid, signal.SIGKILL)
                break
            child.join(0.05)
        child.join()
        statuses.append(int(child.exitcode))
    return statuses


def count_releases(records: str | Path) -> dict[int, dict[int, int]]:
    """Per zone, per round (≥ 1), how many distinct releases crossed."""
    seen: dict[int, dict[int, set[str]]] = {}
    for line in Path(records).read_text().splitlines():
        if not line.strip():
            continue
        zone, rnd, digest = line.split()
        if int(rnd) > 0:
            seen.setdefault(int(zone), {}).setdefault(int(rnd), set()).add(digest)
    return {z: {r: len(v) for r, v in rounds.items()} for z, rounds in seen.items()}


def crossed_epsilon(unit: dict[str, Any], steps: float) -> float:
    """ε of ``steps`` releases of the unit's per-step mechanism (``unit``: its entry in the privacy receipt), at the
    ledger's δ, composed as the ledger composes them: pure ε summed (Laplace at δ = 0, the staircase); Laplace at δ > 0
    the smaller of that sum and dp-accounting's PLD of the steps when every release names its moved coordinates (the
    ledger's exact PLD, :func:`~powerdp.privacy.accounting.laplace_pld_epsilon`); or the analytic composition of the
    Gaussian steps (dp-accounting)."""
    import dp_accounting

    releases = unit.get("releases") or []
    if not releases or steps <= 0:
        return 0.0
    delta = float(unit["ledger"]["delta"])
    kinds = {r["mechanism"] for r in releases}
    if kinds <= {"discrete_laplace", "discrete_staircase"}:
        eps_step = max(float(r["epsilon"]) for r in releases)
        basic = steps * eps_step
        coordinates = {int(r.get("coordinates") or 0) for r in releases}
        if delta == 0.0 or kinds != {"discrete_laplace"} or len(coordinates) != 1 or 0 in coordinates:
            return basic
        from ..privacy.accounting import laplace_pld_epsilon

        # whole steps: a fraction of a step that crossed counts as one (the more pessimistic side)
        return min(basic, laplace_pld_epsilon(eps_step, math.ceil(steps - 1e-9), delta, coordinates.pop()))
    z = min(float(r["noise_multiplier"]) for r in releases)  # the largest per-step loss among the runs of steps
    return float(dp_accounting.get_epsilon_gaussian(z / math.sqrt(steps), delta)) if delta > 0 else math.inf


def steps_crossed(rounds: dict[int, int], honest: float, draw_of: Callable[[int], int] | None = None) -> float:
    """The ledger steps the releases that crossed stand for. ``rounds``: per round, how many distinct releases of it
    crossed; ``honest``: the ledger's steps for one copy of every round; ``draw_of(round)``: the draw a round's release
    post-processes (rounds of one group share their noise: a period of input or totals perturbation). Each group holds
    an equal share of the honest steps, and a round that crossed k distinct times stands for k draws of its group: a
    fresh copy of any round of a once-per-period release is the whole draw again, not a share of it. Without
    ``draw_of``: every round its own draw when the ledger charges at least a step a round (objective or output
    perturbation), else one draw for them all (a run's input perturbation; for a dispatch's periods, pessimistic)."""
    if not rounds:
        return 0.0
    if draw_of is None:
        draw_of = (lambda r: r) if honest >= len(rounds) else (lambda r: 0)
    most: dict[int, int] = {}
    for r, k in rounds.items():
        g = draw_of(r)
        most[g] = max(most.get(g, 0), k)
    return honest / len(most) * sum(most.values())


def resume_channel(records: str | Path, receipt: dict[str, Any], claim: float | None,
                   draw_of: Callable[[int], int] | None = None) -> dict[str, Any]:
    """The channel's verdict from the records and the run's privacy receipt: per unit the rounds, the releases that
    crossed, the steps they stand for (:func:`steps_crossed`; ``draw_of`` groups the rounds by the draw they share),
    their ε composed with the ledger's mechanism, the ledger's ε and its recharged steps; failed when, for some unit,
    what crossed composes to more than the ledger's ε, or the ledger's ε exceeds the claim."""
    counts = count_releases(records)
    units = {}
    failed = False
    for unit in receipt["units"]:
        z = int(unit["id"])
        rounds = counts.get(z, {})
        distinct_rounds, crossed = len(rounds), sum(rounds.values())
        ledger_steps = int(unit["ledger"]["steps"])
        recharged = int(unit.get("recharged_steps") or 0)
        honest = float(ledger_steps - recharged)  # one copy of every round's steps
        steps = steps_crossed(rounds, honest, draw_of)
        eps_crossed = crossed_epsilon(unit, steps)
        eps_ledger = float(unit["ledger"]["epsilon"])
        over = eps_crossed > eps_ledger * (1 + 1e-9) + 1e-12 or (claim is not None and eps_ledger > claim * (1 + 1e-9) + 1e-12)
        failed |= over
        units[z] = {"rounds": distinct_rounds, "releases_crossed": crossed, "repeated": crossed - distinct_rounds,
                    "steps_crossed": steps, "ledger_steps": ledger_steps, "recharged_steps": recharged,
                    "epsilon_crossed": eps_crossed, "epsilon_ledger": eps_ledger, "failed": bool(over)}
    return {"zones": units, "claim": claim, "failed": bool(failed),
            "method": "interrupted and resumed through the command line's stop handler; distinct releases per round "
                      "that crossed, counted per draw they share and composed with the ledger's per-step mechanism, "
                      "against the ledger's total"}


def stop_plan(interrupts: int, every: int = 1) -> list[tuple[str, int]]:
    """``interrupts`` stops alternating Ctrl-C and a crash, each after ``every`` more rounds (a crash lands between
    checkpoints: the run it audits checkpoints only when stopped or done)."""
    return [("int" if i % 2 == 0 else "kill", every + i % 2) for i in range(interrupts)]


def audit_resume(config, interrupts: int) -> dict[str, Any]:
    """``powerdp audit``'s resume channel on a power-flow ``config``: the run made in a temporary folder with its
    checkpoints only when stopped or done (plus the first), stopped ``interrupts`` times (:func:`stop_plan`) and
    resumed; :func:`resume_channel` on what crossed and the final ledger."""
    import json
    import tempfile

    from ..apps.power_flow.runner import run_distributed

    rounds = max(int(config.rounds), interrupts * 2 + 1)
    cfg = config.replace(rounds=rounds, checkpoint_every=rounds + 1, evaluate=False)
    with tempfile.TemporaryDirectory(prefix="powerdp-resume-audit-") as tmp:
        out, records = Path(tmp) / "run", Path(tmp) / "records.txt"

        def start(resume: bool, observe) -> None:
            run_distributed(cfg, out=out, resume=resume, observe=observe, reference=False)

        plan = stop_plan(interrupts)
        statuses = interrupted_run(start, plan, records)
        errors_file = Path(str(records) + ".errors")
        errors = errors_file.read_text() if errors_file.exists() else ""
        expected = [130 if kind == "int" else -signal.SIGKILL for kind, _ in plan] + [0]
        receipt_file = out / "coordinator_view" / "privacy_receipt.json"
        if statuses == expected and receipt_file.is_file():
            res = resume_channel(records, json.loads(receipt_file.read_text()), config.target_epsilon)
        else:  # an attempt that failed or did not stop where planned: the channel has no verdict, and says why
            last = errors.strip().splitlines()[-1] if errors.strip() else "no error recorded"
            res = {"zones": {}, "claim": config.target_epsilon, "failed": True,
                   "problem": f"the attempts ended with exit statuses {statuses}, not the planned {expected} ({last})"}
    res.update(statuses=statuses, rounds=rounds, interrupts=interrupts, errors=errors)
    return res
