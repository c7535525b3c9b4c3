"""Where each zone keeps its own files: never under the coordinator's views, never readable by anyone else.

A zone's host writes its checkpoints, its final solution, its per-round statistics (solver work and
the noise magnitude Σ|ξ|) and, in a deployment, its log, into a folder of its own, created 0700 with
files 0600 (:mod:`powerdp.files.private`)::

    simulation (one machine holds every zone):  OUT/zones.private/zone_P/
    deployment (powerdp run --deployment DEP):   DEP/zone_P.private/runs/RUN/    (RUN: the run's id)
        checkpoint/round_T.npz, .json            the zone's state after round T (what --resume needs)
        solution.csv                             its released solution z_p (variable, index, value)
        implemented.csv                          the set-points it applies (its implemented dispatch)
        stats.csv                                per round: solves, solver iterations, solver time, Σ|ξ| (with
                                                 --no-evaluation and in a deployment; a simulation's evaluation
                                                 history.csv has the same figures otherwise)
    DEP/zone_P.private/log.txt                   a deployment zone's log: what went wrong on its host

In a deployment nothing of a zone lands under the coordinator's ``--out``: the zone's folder is inside
the zone's own ``zone_P.private`` folder of the split, beside its loads, on its own host. ``RUN`` is a
random id the coordinator makes when the run starts and keeps in its checkpoint, so a resumed run finds
the same folders and two runs of one deployment never share one.

:class:`ZoneFolders` is what the coordinator hands to the hosts (public: paths only); each host resolves
its own zones' folders from it. ``layout="legacy-test-only"`` puts the files where versions before
this one did (``OUT/checkpoint/zone_P.private``, ``OUT/zones``, mode from the umask): only for the
tests that prove the file audit catches that layout (:mod:`powerdp.studies.file_audit`); no setting of a real
run selects it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checkpoint import load_state, save_state, state_exists, zone_state_dir

__all__ = ["ZoneFolders", "ZONES_PRIVATE", "simulation_folders", "deployment_folders", "new_run_id", "zone_log_path",
           "LEGACY_TEST_ONLY", "agent_private_dir", "agent_checkpoint_stem", "prune_agent_checkpoints"]

#: a simulation's folder of every zone's private files, inside its output directory
ZONES_PRIVATE = "zones.private"
#: the pre-0.x layout (zone files under the coordinator's --out, default permissions): tests of the audit only
LEGACY_TEST_ONLY = "legacy-test-only"


def new_run_id() -> str:
    """A fresh random id naming a deployment run's folder on every zone's host."""
    return secrets.token_hex(6)


def zone_log_path(deployment: str | Path, zone: int) -> Path:
    """A deployment zone's own log (what failed on its host, in full): inside its private folder of the split."""
    return Path(deployment) / f"zone_{int(zone)}.private" / "log.txt"


@dataclass(frozen=True)
class ZoneFolders:
    """Each zone's private folder: ``root`` and ``layout`` ("simulation", "deployment" or the test-only legacy one)."""

    root: str
    layout: str = "simulation"
    run: str = ""  # a deployment's run id

    @property
    def root_path(self) -> Path:
        return Path(self.root)

    @property
    def private(self) -> bool:
        return self.layout != LEGACY_TEST_ONLY

    def zone_dir(self, zone: int) -> Path:
        if self.layout == "deployment":
            return Path(self.root) / f"zone_{int(zone)}.private" / "runs" / self.run
        if self.layout == LEGACY_TEST_ONLY:
            return Path(self.root) / "zones"
        return Path(self.root) / f"zone_{int(zone)}"

    def checkpoint_dir(self, zone: int) -> Path:
        if self.layout == LEGACY_TEST_ONLY:
            return zone_state_dir(Path(self.root) / "checkpoint", zone)
        return self.zone_dir(zone) / "checkpoint"

    def checkpoint_stem(self, zone: int, round: int) -> Path:
        """The stem (``.npz`` + ``.json``) of zone ``zone``'s state after round ``round``."""
        return self.checkpoint_dir(zone) / f"round_{int(round)}"

    def solution_path(self, zone: int) -> Path:
        if self.layout == LEGACY_TEST_ONLY:
            return self.zone_dir(zone) / f"zone_{int(zone)}.csv"
        return self.zone_dir(zone) / "solution.csv"

    def implemented_path(self, zone: int) -> Path:
        """The zone's implemented dispatch (powerdp.apps.power_flow.implemented): variable, index, value."""
        if self.layout == LEGACY_TEST_ONLY:
            return self.zone_dir(zone) / f"implemented_zone_{int(zone)}.csv"
        return self.zone_dir(zone) / "implemented.csv"

    def stats_path(self, zone: int) -> Path:
        if self.layout == LEGACY_TEST_ONLY:
            return self.zone_dir(zone) / f"private_stats_zone_{int(zone)}.csv"
        return self.zone_dir(zone) / "stats.csv"

    # ------------------------------------------------------------------ writing
    def _close_zone_folder(self, path: Path) -> None:
        """In a deployment, the zone's ``zone_P.private`` folder of the split (perhaps made 0755 by an older
        version) is narrowed to 0700 before anything is written below it."""
        if self.layout != "deployment":
            return
        from .private import private_dir

        for p in path.parents:
            if p.parent == Path(self.root) and p.name.endswith(".private"):
                private_dir(p)
                return

    def save_state(self, zone: int, round: int, state: dict[str, Any]) -> Path:
        stem = self.checkpoint_stem(zone, round)
        self._close_zone_folder(stem)
        return save_state(stem, state, private=self.private)

    def load_state(self, zone: int, round: int) -> dict[str, Any]:
        return load_state(self.checkpoint_stem(zone, round))

    def has_state(self, zone: int, round: int) -> bool:
        return state_exists(self.checkpoint_stem(zone, round))

    def prune(self, zone: int, keep_round: int) -> None:
        """Delete zone ``zone``'s checkpoint files of rounds other than ``keep_round``."""
        keep = f"round_{int(keep_round)}"
        d = self.checkpoint_dir(zone)
        if d.is_dir():
            for old in d.glob("round_*"):
                if old.name.split(".")[0] != keep:
                    old.unlink(missing_ok=True)

    def write_csv(self, frame, path: Path) -> Path:
        if self.private:
            from .private import write_private_csv

            self._close_zone_folder(path)
            return write_private_csv(frame, path, index=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)
        return path


def simulation_folders(out: str | Path) -> ZoneFolders:
    """A simulation's zone folders: ``OUT/zones.private/zone_P``."""
    return ZoneFolders(str(Path(out) / ZONES_PRIVATE), "simulation")


def deployment_folders(deployment: str | Path, run: str) -> ZoneFolders:
    """A deployment's zone folders: ``DEP/zone_P.private/runs/RUN`` on each zone's own host."""
    if not run:
        raise ValueError("a deployment's zone folders need the run's id")
    return ZoneFolders(str(Path(deployment)), "deployment", run)


def agent_private_dir(out: str | Path, kind: str, index: int) -> Path:
    """The private folder of agent ``index`` of a run of another application: ``OUT/{kind}s.private/{kind}_{index}``
    (``agent``: a market's or a vertical learning's agent; ``client``: a federated learning client). Its checkpoints
    go to ``checkpoint/round_T`` inside it, 0700/0600, never beside the coordinator's state."""
    return Path(out) / f"{kind}s.private" / f"{kind}_{int(index)}"


def agent_checkpoint_stem(out: str | Path, kind: str, index: int, round: int) -> Path:
    return agent_private_dir(out, kind, index) / "checkpoint" / f"round_{int(round)}"


def prune_agent_checkpoints(out: str | Path, kind: str, index: int, keep_round: int) -> None:
    """Delete agent ``index``'s checkpoint files of rounds other than ``keep_round``."""
    d = agent_private_dir(out, kind, index) / "checkpoint"
    if d.is_dir():
        for old in d.glob("round_*"):
            if old.name.split(".")[0] != f"round_{int(keep_round)}":
                old.unlink(missing_ok=True)
