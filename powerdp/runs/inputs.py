"""Which input files a run or a solve was made from, and whether they are still the same.

An output directory records, in ``inputs.json``, the absolute path and the SHA-256 of every input
file it was made from (the case file, a partition file, the run's own ``partition.csv``). Resuming a
run or exporting a result reopens the case by that absolute path, never by the name as typed relative
to the current directory, and refuses with one line when a file is missing or has changed: mixing
the rounds of one case with another's loads would be a silent wrong answer.

A run's configuration file (``--config``) is recorded too, as ``config`` with ``"required": false``:
``config.json`` holds every setting and resuming reads only that, so a later edit of the TOML file
changes nothing and is not refused. Bundled cases are recorded by name and hash (a powerdp upgrade that
changed one is caught too); ``pandapower:NAME`` networks are recorded by name only.

The run's own ``config.json`` is recorded as well (``"run_file": "config.json"`` and its SHA-256, updated each
time the run writes it: :func:`record_run_file`): a resume continues the settings the run was made with, so an
edited ``config.json`` (ε changed to 5 in it) is refused like an edited case, never run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files.atomic import atomic_write_text

__all__ = ["INPUTS_FILE", "RUN_CONFIG", "sha256", "file_entry", "case_entry", "record_inputs", "record_run_file", "read_inputs",
           "run_file_entry", "verify_inputs"]

INPUTS_FILE = "inputs.json"
#: the run's own configuration, recorded with its inputs (role and file name)
RUN_CONFIG = "config.json"


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_entry(path: str | Path, given: Any = None) -> dict:
    p = Path(path).resolve()
    return {"path": str(p), "sha256": sha256(p), "given": str(given if given is not None else path)}


def case_entry(case: Any) -> dict | None:
    """The record of a case given as a file, a bundled name or ``pandapower:NAME``; None for an object."""
    from ..grid.loading import bundled_path

    if not isinstance(case, (str, Path)):
        return None
    text = str(case)
    if text.startswith("pandapower:"):
        return {"pandapower": text.split(":", 1)[1], "given": text}
    path = Path(text)
    if path.is_file():
        return file_entry(path, text)
    bundled = bundled_path(text) if path.suffix == "" else None
    if bundled is not None:
        return {"bundled": text, "sha256": sha256(bundled), "given": text}
    return None


def partition_entry(partition: Any) -> dict | None:
    """A partition given as a CSV file (not a bundled name, 'area', 'zone', or an object)."""
    if isinstance(partition, (str, Path)) and Path(str(partition)).is_file():
        return file_entry(partition, partition)
    return None


#: inputs the command line names for the next record (the ``--config`` file), role → entry
_NOTED: dict[str, dict] = {}


def note_input(role: str, path: str | Path, required: bool = True) -> None:
    """Have the next :func:`record_inputs` also record ``path`` (the CLI's ``--config`` file)."""
    _NOTED[role] = {**file_entry(path), **({} if required else {"required": False})}


def forget_noted() -> None:
    """Drop inputs noted for a run that never recorded them (the CLI calls it as each command starts)."""
    _NOTED.clear()


def record_inputs(directory: str | Path, entries: dict[str, dict | None]) -> None:
    """Write ``DIR/inputs.json`` with the given entries (roles ``case``, ``partition``, ``partition.csv``...),
    those noted by :func:`note_input`, and the run's own ``config.json`` when it is there (:func:`run_file_entry`)."""
    own = {RUN_CONFIG: run_file_entry(directory, RUN_CONFIG)} if (Path(directory) / RUN_CONFIG).is_file() else {}
    data = {role: e for role, e in {**_NOTED, **entries, **own}.items() if e is not None}
    _NOTED.clear()
    atomic_write_text(Path(directory) / INPUTS_FILE, json.dumps(data, indent=2) + "\n")


def run_file_entry(directory: str | Path, name: str) -> dict:
    """The record of one of the run's own files (``config.json``): its name in the run directory and its SHA-256."""
    return {"run_file": name, "sha256": sha256(Path(directory) / name)}


def record_run_file(directory: str | Path, name: str = RUN_CONFIG) -> None:
    """After the run wrote ``name`` (its ``config.json``): its SHA-256 into ``inputs.json`` (created if absent), so a
    resume can tell the run's own file from an edited one."""
    data = read_inputs(directory)
    data[name] = run_file_entry(directory, name)
    atomic_write_text(Path(directory) / INPUTS_FILE, json.dumps(data, indent=2) + "\n")


def read_inputs(directory: str | Path) -> dict[str, dict]:
    """The recorded inputs; {} for a directory made before they were recorded."""
    path = Path(directory) / INPUTS_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise ValueError("not a table of input files")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not a readable record of input files ({type(exc).__name__})") from None
    return data


def verify_inputs(directory: str | Path, action: str, roles: tuple[str, ...] | None = None) -> dict[str, dict]:
    """Check every recorded input file (or those of ``roles``) still exists, unchanged; one-line refusal otherwise.

    ``action`` says what the user is doing ("resume", "export"), for the message. Returns the records.
    """
    from ..grid.loading import bundled_path

    d = Path(directory)
    data = read_inputs(d)
    for role, e in data.items():
        if roles is not None and role not in roles:
            continue
        if "run_file" in e:  # the run's own config.json, as the run last wrote it
            p = d / str(e["run_file"])
            if not p.is_file():
                raise ConfigError(f"cannot {action} {d}: its {e['run_file']} is missing")
            if sha256(p) != e.get("sha256"):
                raise ConfigError(
                    f"cannot {action} {d}: its {e['run_file']} was edited after the run wrote it (SHA-256 differs from "
                    f"{INPUTS_FILE}); a run continues with the settings it was made with: restore the file, or start a "
                    "new run with the new settings"
                )
            continue
        if "bundled" in e:
            p = bundled_path(str(e["bundled"]))
            if p is None or ("sha256" in e and sha256(p) != e["sha256"]):
                raise ConfigError(
                    f"cannot {action} {d}: the bundled case {e['bundled']!r} it was made from has changed (another powerdp "
                    "version?); use the powerdp that made it, or start a new run"
                )
            continue
        if "path" not in e or e.get("required") is False:
            continue
        p = Path(str(e["path"]))
        if not p.is_file():
            raise ConfigError(
                f"cannot {action} {d}: its {role} file {p} is missing; put the same file back there "
                "(it is reopened by this absolute path, not as typed), or start a new run"
            )
        if sha256(p) != e.get("sha256"):
            raise ConfigError(
                f"cannot {action} {d}: its {role} file {p} has changed since the run was made (SHA-256 differs from "
                f"{INPUTS_FILE}); restore the original file, or start a new run with the new one"
            )
    return data


def case_source(records: dict[str, dict], fallback: Any) -> Any:
    """What to load the case from: the recorded absolute path (or pandapower/bundled name), else ``fallback``."""
    e = records.get("case")
    if not e:
        return fallback
    if "path" in e:
        return e["path"]
    if "pandapower" in e:
        return f"pandapower:{e['pandapower']}"
    if "bundled" in e:
        return e["bundled"]
    return fallback
