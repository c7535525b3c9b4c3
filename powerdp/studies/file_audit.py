"""The audit of files: what each zone process of a deployment writes, where, and with which permissions.

``powerdp audit --deployment`` (:func:`audit_deployment_files`): the audited configuration is split into a
deployment in a temporary folder (``partition --split``), then run once as a deployment with every zone in
a process of its own (the process backend), checkpoints every round and the zones' final files. Every file
operation of every process is traced with a Python audit hook (:func:`sys.addaudithook`: ``open`` for
writing, ``os.mkdir``, ``os.rename``/``os.replace``, ``os.remove``, ``os.chmod``, ...), inherited by the
forked zone processes, so the trace names which process wrote which path. The audit fails when

* a zone process wrote anything under the coordinator's ``--out``, or anywhere but a ``zone_P.private``
  folder of the deployment;
* the coordinator wrote into a zone's private folder;
* a zone-private folder is not 0700 or a file in one is not 0600 (:func:`powerdp.files.private.private_tree_problems`);
* the trace saw no zone process at all (it cannot have traced them: e.g. a spawn start method).

The trace covers Python's own file calls (every writer in powerdp goes through them); a C library
writing on its own is outside it (Ipopt writes no file unless told to). Not counted (:func:`compiled_code_cache`):
the ``__pycache__`` folders inside the installed powerdp package, where Python keeps bytecode, and the folder of
numba's cache of powerdp's kernels (:func:`powerdp.files.kernel_cache.kernel_cache_dir`: the sampler's and the
active set's; numba probes it with an unnamed temporary file whenever a process loads them): compiled code, the same
for every run, never data.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..apps.power_flow.config import RunConfig
from ..files.kernel_cache import in_kernel_cache
from ..grid.network import Network
from ..grid.partition import Partition

__all__ = ["FileAuditResult", "audit_deployment_files", "compiled_code_cache", "trace_file_writes"]

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
#: audit events that change the file system: event → the indices of its path arguments
_PATH_EVENTS = {
    "os.mkdir": (0,), "os.rename": (0, 1), "os.remove": (0,), "os.rmdir": (0,), "os.chmod": (0,),
    "os.symlink": (1,), "os.link": (1,), "os.truncate": (0,), "os.utime": (0,), "shutil.rmtree": (0,),
}
_TRACE: dict[str, Any] = {"fd": None}
_PACKAGE = Path(__file__).resolve().parents[1]


def compiled_code_cache(path: str) -> bool:
    """Is ``path`` a ``__pycache__`` folder (or inside one) of the installed powerdp package, or inside the folder of
    numba's cache of its kernels? (bytecode, compiled kernels: not counted as a zone's write)"""
    p = Path(os.path.realpath(path))  # resolved: ".." or a symlink cannot smuggle another target past the check
    return ("__pycache__" in p.parts and p.is_relative_to(_PACKAGE)) or in_kernel_cache(p)


_HOOKED = False


def _hook(event: str, args) -> None:
    fd = _TRACE["fd"]
    if fd is None:
        return
    try:
        if event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS and not isinstance(mode, str))
            paths = [path]
            kind = "write" if writes else "read"
        elif event in _PATH_EVENTS:
            paths = [args[i] for i in _PATH_EVENTS[event]]
            kind = "write"
        else:
            return
        for p in paths:
            if isinstance(p, int) or p is None:
                continue
            p = os.fsdecode(p)
            full = p if os.path.isabs(p) else os.path.join(os.getcwd(), p)
            os.write(fd, f"{os.getpid()}\t{kind}\t{event}\t{os.path.normpath(full)}\n".encode("utf-8", "replace"))
    except Exception:  # noqa: BLE001 - a hook must never break the traced program
        pass


class trace_file_writes:
    """Context manager: record every file operation of this process and of the processes it forks into ``log``.

    ``records`` (after exit): (pid, "write" | "read", event, absolute path) tuples.
    """

    def __init__(self, log: str | Path):
        self.log = Path(log)
        self.records: list[tuple[int, str, str, str]] = []

    def __enter__(self) -> trace_file_writes:
        global _HOOKED
        if not _HOOKED:  # an audit hook cannot be removed: it stays, inactive, once the trace ends
            sys.addaudithook(_hook)
            _HOOKED = True
        self._fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
        _TRACE["fd"] = self._fd
        return self

    def __exit__(self, *exc) -> None:
        _TRACE["fd"] = None
        os.close(self._fd)
        for line in self.log.read_text(encoding="utf-8").splitlines():
            pid, kind, event, path = line.split("\t", 3)
            self.records.append((int(pid), kind, event, path))


@dataclass
class FileAuditResult:
    """What the file audit found (``to_dict``: the ``files`` entry of the audit's JSON)."""

    failed: bool
    problems: list[str]
    zone_processes: int
    zone_writes: list[str] = field(default_factory=list)  # every path a zone process wrote (relative to the tree)
    checked: int = 0  # files and folders whose permissions were checked

    def to_dict(self) -> dict[str, Any]:
        return {"failed": self.failed, "problems": self.problems, "zone_processes": self.zone_processes,
                "zone_writes": self.zone_writes, "checked": self.checked}


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def audit_deployment_files(
    config: RunConfig,
    network: Network,
    partition: Partition,
    workdir: str | Path | None = None,
    _zone_layout: str | None = None,
) -> FileAuditResult:
    """Run ``config`` once as a deployment of ``network`` split by ``partition`` (every zone in its own process)
    and check every file each zone process wrote, where, and its permissions (the module's docstring).

    ``workdir``: where the deployment and the coordinator's ``--out`` go (default: a temporary folder, removed).
    ``_zone_layout``: TEST-ONLY (``"legacy-test-only"``): the zones write where earlier versions did, which must fail.
    """
    from ..apps.power_flow.runner import run_distributed
    from ..apps.power_flow.zone_data import split_case
    from ..files.private import private_tree_problems

    with tempfile.TemporaryDirectory(prefix="powerdp-file-audit-") as tmp:
        root = Path(workdir) if workdir is not None else Path(tmp)
        root = root.resolve()
        dep, out = root / "deployment", root / "out"
        split_case(network, partition, dep)
        cfg = config.replace(
            deployment=str(dep), evaluate=False, backend="process", workers=partition.n_zones, checkpoint_every=1,
        )
        with trace_file_writes(Path(tmp) / "trace.log") as trace:
            run_distributed(cfg, out=out, reference=False, _zone_layout=_zone_layout)
        me = os.getpid()
        zone_pids = {pid for pid, *_ in trace.records if pid != me}
        private_roots = sorted(dep.glob("zone_*.private"))
        problems: list[str] = []
        if not zone_pids:
            problems.append("the trace saw no zone process (they were not forked from the audit: cannot check them)")
        zone_writes = sorted({path for pid, kind, _, path in trace.records if pid != me and kind == "write"
                              and not path.startswith(os.sep + "dev" + os.sep) and not compiled_code_cache(path)})
        for pid in sorted(zone_pids):  # one zone per process (workers = zones): its writes stay in its own folder
            mine = {r for who, kind, _, path in trace.records if who == pid and kind == "write"
                    for r in private_roots if _inside(Path(path), r)}
            if len(mine) > 1:
                problems.append(f"one zone process wrote into several zones' folders: {', '.join(sorted(r.name for r in mine))}")
        for path in zone_writes:
            p = Path(path)
            if _inside(p, out):
                problems.append(f"a zone process wrote {p.relative_to(root)} under the coordinator's --out")
            elif not any(_inside(p, r) for r in private_roots):
                problems.append(f"a zone process wrote {p} outside its zone_P.private folder")
        for pid, kind, _, path in trace.records:
            if pid == me and kind == "write" and any(_inside(Path(path), r) for r in private_roots):
                problems.append(f"the coordinator wrote into a zone's private folder: {Path(path).relative_to(root)}")
        checked = 0
        for r in private_roots:
            checked += 1 + sum(1 for _ in r.rglob("*"))
            problems.extend(str(line).replace(str(root) + os.sep, "") for line in private_tree_problems(r))
        for path in zone_writes:  # what a zone wrote and kept, wherever it is
            p = Path(path)
            if p.is_file() and not any(_inside(p, r) for r in private_roots):
                mode = p.stat().st_mode & 0o777
                if mode != 0o600:
                    problems.append(f"{p.relative_to(root) if _inside(p, root) else p} (written by a zone) has mode {mode:04o}")
        problems = list(dict.fromkeys(problems))
        return FileAuditResult(
            failed=bool(problems), problems=problems, zone_processes=len(zone_pids),
            zone_writes=[str(Path(p).relative_to(root)) if _inside(Path(p), root) else p for p in zone_writes],
            checked=checked,
        )
