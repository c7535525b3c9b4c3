"""Types of RunConfig values read from files (TOML run and sweep files, a run's ``config.json``).

Python code gets the checks of :meth:`RunConfig.validate`; values read from a file
are first checked here against the field's declared type, so that
``rounds = "two"``, ``epsilon = "0.5"`` or ``rounds = true`` is an error naming the
file and the field instead of a traceback (or, for ``true``, a silent 1).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...runs.record import read_config_file
from .config import FIXED_COORDINATION, RunConfig

__all__ = ["check_types", "read_config_json"]

_TYPE_WORDS = {
    "str": ((str,), "a string"),
    "int": ((int,), "an integer"),
    "float": ((int, float), "a number"),
    "bool": ((bool,), "true or false"),
    "None": ((type(None),), "null"),
    "dict": ((dict,), "a table"),
}


def _allowed(annotation: str) -> tuple[tuple[type, ...], list[str]] | None:
    """(accepted Python types, words) for a field annotation such as ``"int | None"``; None when unknown."""
    types: list[type] = []
    words: list[str] = []
    for part in str(annotation).split("|"):
        name = part.strip().split("[", 1)[0]
        if name not in _TYPE_WORDS:
            return None
        t, w = _TYPE_WORDS[name]
        types.extend(t)
        words.append(w)
    return tuple(types), words


def _fits(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # a bool is an int to Python, not to a user
        return bool in types
    return isinstance(value, types)


def check_types(data: dict[str, Any], source: str, table: str = "") -> None:
    """Raise :class:`ConfigError` for the first value whose type does not fit its RunConfig field."""
    fields = {f.name: f.type for f in dataclasses.fields(RunConfig)}
    prefix = f"{table}." if table else ""
    for key, value in data.items():
        if key not in fields:
            continue  # unknown keys are reported by RunConfig.from_dict with the list of known ones
        allowed = _allowed(fields[key])
        if allowed is None:
            continue
        types, words = allowed
        if not _fits(value, types):
            raise ConfigError(f"{source}: {prefix}{key} = {json.dumps(value)}: must be {' or '.join(words)}")


def read_config_json(path: str | Path) -> RunConfig:
    """A run's saved ``config.json``, every problem an error naming the file."""
    path = Path(path)
    data = read_config_file(path)
    check_types(data, str(path))
    if "tolerance" not in data:  # written before the stopping rule and these settings: as the run went then
        data = {"local_solver": "ipopt", **FIXED_COORDINATION, **data, "tolerance": 0.0}
    return RunConfig.from_dict(data, source=str(path))
