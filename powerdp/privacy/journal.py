"""A zone's release journal: what a resumed zone has already released, so that it never releases it again with fresh
noise (docs/privacy.md, "Resume").

The rule, for every application (power flow and dispatch zones, learning clients, market and vertical agents):

* **The noise stream is in the checkpoint.** A zone's :class:`~powerdp.privacy.sampler.NoiseSource` keeps its state
  (a secret run's AES key, counter and position; a seeded run's generator) in the zone's own private checkpoint
  (0700/0600, never under the coordinator's ``--out`` in a deployment). A zone resumed from its checkpoint at round T
  redraws, for every round after T it repeats, the noise it drew the first time: the local steps being deterministic,
  it computes the same releases bit for bit.
* **The journal is written before a release leaves.** Before a zone's host sends a round's release, the zone appends
  to ``releases.journal`` in its private checkpoint folder one line, fsynced: the round, a digest of every value its
  mechanisms released since its previous release (the sampler's outputs, which is what the ledger charges), a digest
  of the message, the charge and the whole ledger. A crash between the release and the next checkpoint therefore
  loses nothing of what crossed.
* **A resumed zone replays against it.** Resumed at T, the zone's ledger is the journal's last one (every release that
  ever crossed stays charged), and the journaled rounds after T drawn from the restored stream are the replay: each
  repeated round whose sampler outputs and message equal the journaled ones digest for digest is the same release
  again (the coordinator learns nothing new), and the ledger, which holds it already, records nothing for it; the
  same outputs with another message (a local solve warm-started otherwise) is a second release of that noise and is
  charged again. The first output that differs (another machine's arithmetic, a missing ``cryptography`` package, a
  test fault) is never used: the zone's stream is re-keyed from fresh OS entropy, that output is drawn again, the
  replay ends (the rounds it did not repeat stay charged) and everything drawn from then on is charged anew: one
  more charge for each round repeated, never a fresh noisy copy of a release counted once. The ledger keeps the count
  (``recharged_steps``) and the privacy receipt says so.

What a crash between a release and its checkpoint costs: nothing when the replay is bit-identical (the usual case: one
machine, the same library versions), one more charge per repeated round otherwise. A release journaled but lost on the
way (the host died before sending it) is charged all the same: the journal errs on the side of the budget.

The journal knows nothing of backends or applications: a host calls :meth:`ReleaseJournal.release` with each message
its agent returns (``engine/backends/base.py``, ``engine/sharing/hosts.py``), and the sampler calls
:meth:`ReleaseJournal.check` with each release it draws. A network backend (issue 40) reuses it as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ReleaseJournal", "JOURNAL_FILE", "digest", "read_journal", "privacy_report"]

#: the journal's file name, in the zone's (agent's) private checkpoint folder
JOURNAL_FILE = "releases.journal"


def digest(values: Any) -> str:
    """A 128-bit BLAKE2b digest of an array's bytes (float64, C order) and shape, as hex."""
    a = np.ascontiguousarray(np.asarray(values, dtype=np.float64))
    h = hashlib.blake2b(digest_size=16)
    h.update(repr(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()


def read_journal(path: str | Path) -> list[dict[str, Any]]:
    """The journal's entries, in the order they were written. A last line cut short (the process died while writing
    it, before its fsync returned: that release never left) is ignored; a damaged line elsewhere is refused."""
    from ..errors import ConfigError

    path = Path(path)
    try:
        lines = path.read_text().split("\n")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: the zone's release journal is not readable ({exc})") from None
    entries = []
    for i, line in enumerate(lines):
        if not line:
            continue
        try:
            entries.append(json.loads(line))
        except ValueError:
            if i == len(lines) - 1:  # no newline after it: written in part, never fsynced
                break
            raise ConfigError(f"{path}: line {i + 1} of the zone's release journal is damaged") from None
    return entries


class ReleaseJournal:
    """One zone's journal (module docstring). ``source`` is the zone's noise source (the journal sees its outputs) and
    ``ledger`` its :class:`~powerdp.privacy.accounting.PrivacyLedger`. Inactive until :meth:`open`."""

    def __init__(self, zone: int, source, ledger):
        self.zone = int(zone)
        self.source = source
        self.ledger = ledger
        self.path: Path | None = None
        self._fd: int | None = None
        self._pending: list[str] = []  # digests of the outputs drawn since the last release
        self._expected: deque[str] = deque()  # a resumed zone's replay: the outputs it drew the first time, in order
        self._replay: deque[dict[str, Any]] = deque()  # ... and the journal entries of the rounds it repeats
        self._last: list[list[Any]] = []  # the ledger's history at the last release (what the next charge is over)
        self._journaled: set[int] = set()  # rounds released before the resume
        self.replayed = 0  # rounds repeated bit for bit since the resume
        self.diverged = 0  # replays that diverged (the stream was re-keyed)
        self.differing_messages = 0  # repeated rounds whose outputs matched but whose message did not (charged again)

    @property
    def active(self) -> bool:
        return self.path is not None

    # ------------------------------------------------------------------ opening
    def open(self, directory: str | Path, resumed_round: int | None = None) -> None:
        """Journal into ``directory/releases.journal`` (the zone's private checkpoint folder). A new run
        (``resumed_round`` None) starts an empty journal; a zone restored from its checkpoint of round T reads the
        entries after T: its ledger becomes the last entry's, and the entries drawn from the restored stream are the
        replay (module docstring)."""
        from ..files.private import private_dir

        self.close()
        self.path = Path(directory) / JOURNAL_FILE
        private_dir(self.path.parent)
        if resumed_round is None:
            self.path.unlink(missing_ok=True)
            entries = []
        else:
            entries = [e for e in read_journal(self.path) if int(e["round"]) > int(resumed_round)]
        if entries and self.ledger is not None:
            self.ledger.replace_history(entries[-1]["ledger"])  # every release that ever crossed stays charged
        stream = self.source.stream_id
        replay = [e for e in entries if e.get("stream") == stream]
        self._replay = deque(replay)
        self._expected = deque(d for e in replay for d in e["outputs"])
        self._journaled = {int(e["round"]) for e in entries}  # a new entry for one of these is a second charge
        if self.ledger is not None:  # the rounds it repeats are charged already
            self.ledger.paused = bool(replay)
        self._pending = []
        self._last = self.ledger.history_state() if self.ledger is not None else []
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        if os.fstat(self._fd).st_mode & 0o077:
            os.fchmod(self._fd, 0o600)
        self.source.journal = self  # from now on the sampler shows it every release

    def covers(self, round: int) -> bool:
        """Whether this resumed zone released ``round`` before (the journal read its entry, so the ledger charges it):
        whatever the zone draws for it now is either the same release again or charged anew. A host that repeats a
        round without sending it (the network backend's replay) may then go on even when the repeat differs."""
        return self.active and int(round) in self._journaled

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if getattr(self.source, "journal", None) is self:
            self.source.journal = None

    def __del__(self) -> None:  # an agent dropped with its run (a long-lived process runs many): no descriptor left open
        fd, self._fd = getattr(self, "_fd", None), None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    # ------------------------------------------------------------------ the sampler's side
    def check(self, released: np.ndarray, source) -> bool:
        """Called by the sampler with each release it draws: True to use it. A resumed zone's output that differs from
        the one it drew the first time ends the replay: the stream is re-keyed from fresh entropy, the credit forfeited,
        and False asks the sampler to draw this release again."""
        d = digest(released)
        if self._expected:
            if self._expected[0] == d:
                self._expected.popleft()
            else:
                source.rekey()
                self.diverged += 1
                if self.ledger is not None:  # those rounds stay charged, and what the zone draws now is charged anew
                    self.ledger.paused = False
                self._expected.clear()
                self._replay.clear()
                return False
        self._pending.append(d)
        return True

    # ------------------------------------------------------------------ the host's side
    def release(self, round: int, message: Any) -> None:
        """Called by the zone's host with each round's message before it is sent: journaled and fsynced, unless it
        repeats a journaled round output for output."""
        if self.path is None:
            return
        msg = digest(message)
        head = self._replay[0] if self._replay else None
        if head is not None and int(head["round"]) == int(round) and head["outputs"] == self._pending:
            self._replay.popleft()  # the same release again: already journaled and charged
            self.replayed += 1
            if head["release"] != msg:  # the same noise, another message (e.g. a local solve warm-started otherwise):
                self.differing_messages += 1  # the coordinator now holds two releases of it, so it is charged again
                if self.ledger is not None:
                    self.ledger.add_recharged(head["charge"])
            self._pending = []
            if not self._replay and self.ledger is not None:  # the replay is over: the next rounds are charged
                self.ledger.paused = False
            return
        while self._replay and int(self._replay[0]["round"]) <= int(round):
            self._replay.popleft()  # superseded (a replay that diverged before this round)
        now = self.ledger.history_state() if self.ledger is not None else []
        entry = {"round": int(round), "stream": self.source.stream_id, "outputs": self._pending, "release": msg,
                 "charge": _difference(now, self._last), "ledger": now}
        if int(round) in self._journaled and self.ledger is not None:  # released before, now again with other noise
            self.ledger.add_recharged(entry["charge"])
        line = memoryview((json.dumps(entry, separators=(",", ":")) + "\n").encode())
        while line:
            line = line[os.write(self._fd, line):]
        os.fsync(self._fd)  # on disk before the release leaves the zone
        self._pending = []
        self._last = now

    def prune(self, round: int) -> None:
        """Drop the entries of rounds up to ``round`` (the zone's checkpoint of that round now covers them)."""
        if self.path is None:
            return
        from ..files.private import write_private

        entries = [e for e in read_journal(self.path) if int(e["round"]) > int(round)]
        text = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
        os.close(self._fd)
        write_private(self.path, lambda fh: fh.write(text))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0))

    def report(self) -> dict[str, Any]:
        """What the receipt says of the resumes (public: counts only)."""
        ledger = self.ledger
        return {"replayed": self.replayed, "diverged": self.diverged, "differing_messages": self.differing_messages,
                "recharged_steps": int(sum(n for _, n in ledger.recharged)) if ledger is not None else 0}


def privacy_report(ledger, journal: ReleaseJournal | None) -> dict[str, Any] | None:
    """An agent's ledger report (public: data-independent), with what its journal replayed after a resume (``resume``);
    None for an agent without a ledger (not private)."""
    if ledger is None:
        return None
    report = ledger.report()
    if journal is not None and journal.active:
        report["resume"] = journal.report()
    return report


def _difference(now: list[list[Any]], before: list[list[Any]]) -> list[list[Any]]:
    """The steps in the ledger history ``now`` beyond those in ``before`` (both [[mechanism dict, steps], ...]), by
    mechanism parameters."""
    def key(m: dict[str, Any]) -> str:
        return json.dumps(m, sort_keys=True)

    left: dict[str, int] = {}
    for m, n in before:
        left[key(m)] = left.get(key(m), 0) + int(n)
    out = []
    for m, n in now:
        k = key(m)
        take = min(left.get(k, 0), int(n))
        left[k] = left.get(k, 0) - take
        if int(n) - take:
            out.append([m, int(n) - take])
    return out
