"""Checkpoint files without pickle: numbers in ``.npz`` (read with ``allow_pickle=False``) plus JSON.

Loading a checkpoint never runs code, whoever wrote the file. One writer and one reader serve every
agent (zones, learning clients) and the coordinator:

* :func:`save_state` / :func:`load_state` store a flat dict: numpy arrays (and tuples of arrays, or
  None) go to ``STEM.npz``, everything else (ints, floats, strings, lists, dicts: JSON values, e.g. a
  generator's ``bit_generator.state``) to ``STEM.json``. Each file is written to a temporary name and
  renamed, the JSON last, so a crash leaves either the old pair or the new one.
* :func:`zone_checkpoint_path` is where zone P keeps its state after round T:
  ``DIR/zone_P.private/round_T`` — a zone-private folder (its λ, iterates, and, when the run is seeded,
  its noise generator), written and read on the zone's own host and never handed over.
* :func:`refuse_pickles` rejects a run directory written by older versions (pickled checkpoints)
  with one line, without opening the files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .atomic import atomic_write

__all__ = ["save_state", "load_state", "state_exists", "zone_state_dir", "zone_checkpoint_path", "prune_zone_states",
           "refuse_pickles", "PICKLE_SUFFIXES"]

PICKLE_SUFFIXES = (".pkl", ".pickle")
_TUPLE = "__array_tuples__"


def zone_state_dir(directory: str | Path, zone: int) -> Path:
    """Zone ``zone``'s private checkpoint folder inside ``directory``."""
    return Path(directory) / f"zone_{int(zone)}.private"


def zone_checkpoint_path(directory: str | Path, zone: int, round: int) -> Path:
    """The stem (``.npz`` + ``.json``) of zone ``zone``'s state after round ``round``."""
    return zone_state_dir(directory, zone) / f"round_{int(round)}"


def _write(path: Path, write) -> None:
    """Written whole or not at all; a failure (a full disk, a file-size limit) names ``path`` (files/atomic.py)."""
    atomic_write(path, write, binary=True)


def save_state(stem: str | Path, state: dict[str, Any], private: bool = False) -> Path:
    """Write ``state`` to ``STEM.npz`` (arrays) and ``STEM.json`` (the rest); returns the stem.

    ``private``: a zone's (or an agent's) own state: its folders are created 0700 and its files 0600
    (:mod:`powerdp.files.private`).
    """
    stem = Path(stem)
    if private:
        from .private import private_dir, write_private

        private_dir(stem.parent)
        write = lambda path, fn: write_private(path, fn, binary=True)  # noqa: E731
    else:
        stem.parent.mkdir(parents=True, exist_ok=True)
        write = _write
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {}
    tuples: dict[str, int | None] = {}
    for key, value in state.items():
        if isinstance(value, np.ndarray):
            arrays[key] = value
        elif isinstance(value, tuple) and value and all(isinstance(v, np.ndarray) for v in value):
            tuples[key] = len(value)
            for i, v in enumerate(value):
                arrays[f"{key}.{i}"] = v
        else:
            meta[key] = value
    if any(a.dtype == object for a in arrays.values()):
        raise TypeError("a checkpoint holds numeric arrays only")
    meta[_TUPLE] = tuples
    write(stem.with_suffix(".npz"), lambda fh: np.savez(fh, **arrays))
    text = json.dumps(meta).encode()
    write(stem.with_suffix(".json"), lambda fh: fh.write(text))
    return stem


def state_exists(stem: str | Path) -> bool:
    stem = Path(stem)
    return stem.with_suffix(".json").is_file() and stem.with_suffix(".npz").is_file()


def load_state(stem: str | Path) -> dict[str, Any]:
    """Read what :func:`save_state` wrote; a missing or damaged file is a :class:`ConfigError` naming it."""
    stem = Path(stem)
    for suffix in (".json", ".npz"):
        if not stem.with_suffix(suffix).is_file():
            raise ConfigError(f"{stem.with_suffix(suffix)} is missing")
    path = stem.with_suffix(".json")
    try:
        meta = json.loads(path.read_text())
        tuples = meta.pop(_TUPLE, {})
        path = stem.with_suffix(".npz")
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as exc:  # noqa: BLE001 - truncated, garbage, or an object array (pickle refused)
        raise ConfigError(f"{path} is not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    state: dict[str, Any] = dict(meta)
    for key, n in tuples.items():
        state[key] = tuple(arrays.pop(f"{key}.{i}") for i in range(int(n)))
    state.update(arrays)
    return state


def prune_zone_states(directory: str | Path, zone: int, keep_round: int) -> None:
    """Delete zone ``zone``'s checkpoint files of rounds other than ``keep_round``."""
    keep = zone_checkpoint_path(directory, zone, keep_round).name
    for old in zone_state_dir(directory, zone).glob("round_*"):
        if old.name.split(".")[0] != keep:
            old.unlink(missing_ok=True)


def refuse_pickles(directory: str | Path) -> None:
    """Refuse a checkpoint folder holding pickles (older versions) without opening any of them."""
    d = Path(directory)
    if not d.is_dir():
        return
    found = sorted(p for p in d.rglob("*") if p.suffix in PICKLE_SUFFIXES or p.name.endswith(".pkl.tmp"))
    if found:
        raise ConfigError(
            f"{d} holds pickled checkpoints ({found[0].name}{' and more' if len(found) > 1 else ''}) written by an older "
            "powerdp; loading a pickle can run any code, so they are not read: start the run again into a new directory"
        )
