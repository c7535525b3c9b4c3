"""The deployment path: a public network without loads, and one private load file per zone.

``powerdp partition CASE --zones N --split DIR`` (:func:`split_case`) writes::

    DIR/public/network.npz, network.json   the network with every load removed (NaN): what the coordinator gets
    DIR/public/partition.csv               the zones (public)
    DIR/zone_P.private/loads.csv           zone P's own loads (bus, pd, qd in p.u.): only zone P's operator gets it
                                           (the folder created 0700, the file 0600: powerdp.files.private)

A run with ``RunConfig.deployment = DIR`` (``powerdp run --deployment DIR``) loads only the public part on
the coordinator's side (:func:`load_public_network`: its loads are NaN, so nothing can use them), and every
zone host builds its agents from the public network and its own zone's file (:func:`zone_network`), so
no process reads another zone's loads. Under MPI, rank 0 needs only ``DIR/public`` and each zone's rank
only ``DIR/public`` and its own ``DIR/zone_P.private``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ConfigError
from ...files.checkpoint import load_state, save_state, state_exists
from ...files.private import write_private_csv
from ...files.text import NotUTF8, read_csv_utf8
from ...grid.network import DCLines, Network

__all__ = ["split_case", "load_public_network", "zone_network", "zone_loads_path", "public_dir", "public_partition_path",
           "deployment_parts", "remove_deployment"]

_DCLINE = "dcline."


def public_dir(directory: str | Path) -> Path:
    return Path(directory) / "public"


def public_partition_path(directory: str | Path) -> Path:
    return public_dir(directory) / "partition.csv"


def zone_loads_path(directory: str | Path, zone: int) -> Path:
    return Path(directory) / f"zone_{int(zone)}.private" / "loads.csv"


def deployment_parts(directory: str | Path) -> list[Path]:
    """The folders of a deployment already in ``directory``: its ``public/`` and every ``zone_P.private/``."""
    d = Path(directory)
    if not d.is_dir():
        return []
    zones = sorted(p for p in d.glob("zone_*.private") if p.is_dir() or p.is_symlink())
    return ([public_dir(d)] if public_dir(d).exists() or public_dir(d).is_symlink() else []) + zones


def remove_deployment(directory: str | Path) -> None:
    """Remove the deployment in ``directory`` (:func:`deployment_parts`), zones' run files included: a new split
    must not leave an old zone's loads or runs beside the new zones. A symbolic link is removed, never followed."""
    import shutil

    for p in deployment_parts(directory):
        if p.is_symlink() or not p.is_dir():
            p.unlink()
        else:
            shutil.rmtree(p)


def split_case(net: Network, part, directory: str | Path) -> list[Path]:
    """Write the public network (loads removed), the partition, and one private load file per zone."""
    d = Path(directory)
    pub = public_dir(d)
    pub.mkdir(parents=True, exist_ok=True)
    state: dict = {}
    for f in dataclasses.fields(net):
        if not f.init or f.name in ("pandapower_net", "pandapower_gens", "dcline"):
            continue
        value = getattr(net, f.name)
        if f.name in ("pd", "qd"):
            value = np.full(net.n_bus, np.nan)  # the loads are the zones' secrets
        state[f.name] = value.item() if isinstance(value, np.generic) else value
    for f in dataclasses.fields(net.dcline):
        state[_DCLINE + f.name] = getattr(net.dcline, f.name)
    written = [save_state(pub / "network", state).with_suffix(".json")]
    written.append(part.to_csv(public_partition_path(d)))
    for z in range(part.n_zones):
        own = part.own_buses(z)
        frame = pd.DataFrame({"bus": net.bus_ids[own], "pd": net.pd[own], "qd": net.qd[own]})
        written.append(write_private_csv(frame, zone_loads_path(d, z), index=False))  # 0600 in a 0700 folder
    return written


def _check_own_buses(net: Network, zone: int, path: Path, idx: np.ndarray, own: np.ndarray) -> None:
    """A zone's load file lists each of the zone's own buses once, and nothing else."""
    values, counts = np.unique(idx, return_counts=True)
    if np.any(counts > 1):
        raise ConfigError(f"zone {zone}: {path} lists bus {int(net.bus_ids[values[counts > 1][0]])} twice; each own bus once")
    foreign = np.setdiff1d(idx, own)
    if foreign.size:
        raise ConfigError(f"zone {zone}: {path} lists bus {int(net.bus_ids[foreign[0]])}, which is not one of zone {zone}'s buses "
                          "in the public partition")
    missing = np.setdiff1d(own, idx)
    if missing.size:
        raise ConfigError(f"zone {zone}: {path} has no line for its bus {int(net.bus_ids[missing[0]])}"
                          + (f" (and {missing.size - 1} more)" if missing.size > 1 else "") + "; every own bus needs its load")


def load_public_network(directory: str | Path) -> Network:
    """The public network of a split case: every load NaN (the coordinator's view of the grid)."""
    stem = public_dir(directory) / "network"
    if not state_exists(stem):
        raise ConfigError(f"{directory} is not a split case (no {stem}.json/.npz; write one with powerdp partition --split)")
    state = load_state(stem)
    dc = {k[len(_DCLINE):]: v for k, v in state.items() if k.startswith(_DCLINE)}
    fields = {k: v for k, v in state.items() if not k.startswith(_DCLINE)}
    return Network(**fields, dcline=DCLines(**dc))


def zone_network(directory: str | Path, zone: int, public: Network | None = None, own_buses=None) -> Network:
    """What zone ``zone``'s host builds its agent from: the public network, its own loads from its own file,
    and zero for every other bus's load (as :func:`powerdp.engine.backends.private_view`).

    With ``own_buses`` (the zone's bus indices in the public partition) the file must list each of them exactly
    once and no other bus: a bus of another zone, a missing own bus (its load would silently be 0) or a bus
    listed twice (the last line would win) is refused, naming the bus."""
    net = public if public is not None else load_public_network(directory)
    path = zone_loads_path(directory, zone)
    try:
        frame = read_csv_utf8(path, float_precision="round_trip")
        idx = np.array([net.bus_index(b) for b in frame["bus"]], dtype=np.int64)
        pd_own, qd_own = frame["pd"].to_numpy(float), frame["qd"].to_numpy(float)
    except FileNotFoundError:
        raise ConfigError(f"zone {zone}: its load file {path} is missing") from None
    except NotUTF8 as exc:
        raise ConfigError(f"zone {zone}: {path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign file
        raise ConfigError(f"zone {zone}: {path} is not a zone load file ({type(exc).__name__}: {exc})") from None
    if not (np.all(np.isfinite(pd_own)) and np.all(np.isfinite(qd_own))):
        raise ConfigError(f"zone {zone}: {path} holds a load that is not a finite number")
    if own_buses is not None:
        _check_own_buses(net, zone, path, idx, np.asarray(own_buses, dtype=np.int64))
    p, q = np.zeros(net.n_bus), np.zeros(net.n_bus)
    p[idx], q[idx] = pd_own, qd_own
    return net.with_loads(p, q)
