"""A zone agent's own files: its released solution and statistics, and its checkpoint (state, journal, resume).

:class:`ZonePersistence` is the part of :class:`~powerdp.apps.power_flow.agent.ZoneAgent` that writes and reads the
zone's private folder (:mod:`powerdp.files.zone_folders`, 0600 files in a 0700 folder on the zone's own host): what the
zone released, its own per-round statistics, and everything a resumed zone needs to continue bit for bit (its iterate,
duals, ledger, noise stream and release journal; docs/privacy.md, "Resuming a run"). Nothing here is sent to the
coordinator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...engine.consensus.messages import SolverStats
from ...errors import ConfigError
from ...files.zone_folders import ZoneFolders
from ...privacy.faults import replays
from ...privacy.mechanisms import mechanism_from_dict

__all__ = ["ZonePersistence"]


class ZonePersistence:
    """The zone agent's private files (a mixin of :class:`~powerdp.apps.power_flow.agent.ZoneAgent`, whose state it
    reads and restores)."""

    def save_solution(self, folders: ZoneFolders) -> Path:
        """Write the zone's released solution z_p and its own per-round statistics into its private folder
        (:mod:`powerdp.files.zone_folders`), on its own host."""
        import pandas as pd

        keys = self.problem.var_keys
        frame = pd.DataFrame({"variable": [k[0] for k in keys], "index": [k[1] for k in keys], "value": self.z_released})
        path = folders.write_csv(frame, folders.solution_path(self.zone))
        # the zone's own solver statistics and noise magnitude per round: zone-private, never handed over
        columns = ["round", "solves", "solver_iterations", "solver_s", "noise_magnitude"]
        frame = pd.DataFrame([{"round": r, "solves": st.solves, "solver_iterations": st.iterations, "solver_s": st.solver_s,
                               "noise_magnitude": st.noise_magnitude} for r, st in self.stats_log], columns=columns)
        stats = folders.stats_path(self.zone)
        if stats.is_file() and len(frame):  # a resumed run: the rounds before it, as the zone logged them then
            try:
                earlier = pd.read_csv(stats, float_precision="round_trip")
                frame = pd.concat([earlier[earlier["round"] < frame["round"].min()][columns], frame], ignore_index=True)
            except (ValueError, KeyError, OSError):  # a damaged log of the zone's own: rewritten from this run
                pass
        folders.write_csv(frame, stats)
        if self.z_implemented is not None:  # the set-points the zone applies (implement): its own, never sent
            folders.write_csv(pd.DataFrame({"variable": [k[0] for k in keys], "index": [k[1] for k in keys],
                                            "value": self.z_implemented}), folders.implemented_path(self.zone))
        return path

    # ----------------------------------------------------------- checkpoint
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume this agent (kept on the zone's side, in its private folder): arrays and JSON values.

        The noise stream's state too, secret or seeded (a secret stream's AES key, counter and position), so that the
        resumed zone redraws the noise of the rounds it repeats and releases them bit for bit (privacy/journal.py).
        """
        state: dict[str, Any] = {
            "zone": self.zone,
            "round": self.round,
            "noise_source": self.config.noise_source,
            "z_last": self.z_last,
            "z_released": self.z_released,
            "lam": self.lam,
            "ledger_steps": self.ledger.steps if self.ledger is not None else 0,
            "ledger": self.ledger.state_dict() if self.ledger is not None else None,
            "warm": self._warm,
            "private_inputs": self.private_inputs,  # the zone's own input files and their hashes (a deployment's loads)
            # the noise stream (zone-private: with it the zone's noise can be replayed); the old resume kept a secret one's not
            "rng": self.rng.state if (self.rng.seeded or replays(self.config.faults)) else None,
            # its own solver statistics so far (stats.csv is written at the end of a run: a stopped run's resume
            # continues this log rather than starting one at the round it resumes from)
            "stats_log": [st.to_row(r) for r, st in self.stats_log],
        }
        state.update(self.perturbation.state_arrays())
        return state

    def save_checkpoint(self, folders: ZoneFolders) -> Path:
        """Write this zone's state after its current round to its own private folder (``checkpoint/round_T.npz`` +
        ``.json``, no pickle, 0600 in a 0700 folder): its iterate, duals and noise never pass through the coordinator."""
        return folders.save_state(self.zone, self.round, self.state_dict())

    def load_checkpoint(self, folders: ZoneFolders, round: int) -> None:
        """Restore the state this zone saved after round ``round`` (see :meth:`save_checkpoint`)."""
        if not folders.has_state(self.zone, round):
            path = folders.checkpoint_stem(self.zone, round)
            raise ConfigError(f"zone {self.zone} has no checkpoint for round {round} ({path}.json/.npz is missing)")
        self.load_state_dict(folders.load_state(self.zone, round))
        if self.journal is not None:  # what it released after that round: the replay (privacy/journal.py)
            self.journal.open(folders.checkpoint_dir(self.zone), round)

    def open_journal(self, folders: ZoneFolders) -> None:
        """A new run: start the release journal in the zone's private checkpoint folder (on its own host)."""
        if self.journal is not None:
            self.journal.open(folders.checkpoint_dir(self.zone))

    def _check_private_inputs(self, saved: dict[str, dict]) -> None:
        """The zone checks its own input files against the hashes in its own checkpoint: a resumed run on an edited
        private load file would mix the rounds of two data sets (the coordinator never sees these files)."""
        for role, entry in saved.items():
            now = self.private_inputs.get(role)
            if now is None or now.get("sha256") != entry.get("sha256"):
                raise ConfigError(
                    f"cannot resume zone {self.zone}: its {role} file {entry.get('path')} has changed since the run was "
                    "made (SHA-256 differs from the zone's checkpoint); restore the original file, or start a new run"
                )

    def prune_checkpoints(self, folders: ZoneFolders, keep_round: int) -> None:
        """Delete this zone's checkpoint files of rounds other than ``keep_round``, and the journal's entries up to it."""
        folders.prune(self.zone, keep_round)
        if self.journal is not None:
            self.journal.prune(keep_round)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["zone"]) != self.zone:
            raise ValueError(f"checkpoint of zone {state['zone']} loaded into zone {self.zone}")
        self._check_private_inputs(state.get("private_inputs") or {})
        self.round = int(state["round"])
        self.z_last = np.asarray(state["z_last"], dtype=float)
        self.z_released = np.asarray(state["z_released"], dtype=float)
        self.lam = np.asarray(state["lam"], dtype=float)
        if state.get("stats_log") is not None:  # a checkpoint of an earlier version has none (stats.csv merges then)
            self.stats_log = [SolverStats.from_row(row) for row in state["stats_log"]]
        if state.get("rng") is not None:  # the stream where it stood (a checkpoint of an older secret run has none)
            self.rng.state = state["rng"]
        if self.ledger is not None and state.get("ledger") is not None:
            self.ledger.load_state_dict(state["ledger"])
        elif self.ledger is not None:  # a checkpoint of an earlier version
            if self.ledger.steps == 0 and state.get("ledger_history"):
                for mechanism, steps in state["ledger_history"]:
                    self.ledger.record(int(steps), mechanism=mechanism_from_dict(mechanism))
            missing = int(state["ledger_steps"]) - self.ledger.steps
            if missing > 0:  # checkpoints written before the ledger kept its history
                self.ledger.record(missing)
        self.perturbation.load_state_arrays(state)
        if self.perturbation.from_loads:  # the zone computes with the release it drew, not the constructor's fresh one
            self._aim_rounds()
        elif self.perturbation.once and self.perturbation.term is not None:  # the zone computes with the term it drew
            self.use_input_term(self.perturbation.term)
        elif self.perturbation.once and state.get("input_noise") is not None:  # an earlier version kept ξ alone
            gamma = self.perturbation.mechanism.grid
            self.perturbation.term = np.round(self._f_lin_true.c[self.noise_cols] / gamma) * gamma + self.perturbation.xi
            self.use_input_term(self.perturbation.term)
        warm = state.get("warm")
        self._set_warm(tuple(np.asarray(a, dtype=float) for a in warm) if warm is not None else None)
