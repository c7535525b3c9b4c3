"""Where a partition's zone labels come from: a ``bus,zone`` CSV file (external bus ids), a dict ``{bus_id: zone}``, a
sequence of one label per bus, a bundled partition file; and how labels are normalized, ordered and printed."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PartitionError
from .network import Network

log = logging.getLogger(__name__)

_MAX_LISTED = 10


def _label_key(label: Any) -> tuple[bool, Any]:
    """Sort key for zone labels: integers first (numerically), then strings."""
    return (isinstance(label, str), label)


def _fmt_label(label: Any) -> str:
    return repr(label) if isinstance(label, str) else str(label)


def _fmt_ids(ids: Sequence[Any], limit: int = _MAX_LISTED) -> str:
    ids = list(ids)
    shown = ", ".join(str(i) for i in ids[:limit])
    more = f", ... ({len(ids) - limit} more)" if len(ids) > limit else ""
    return f"[{shown}{more}]"


def _normalize_label(value: Any, where: str) -> int | str:
    """A zone label as a Python int or a stripped string."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if math.isfinite(value) and float(value).is_integer():
            return int(value)
        raise PartitionError(f"{where} has zone label {value}, which is not a zone (zone numbers are whole numbers)")
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise PartitionError(f"{where} has an empty zone label")
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return text  # a zone name
        return _normalize_label(number, where)  # '2.0' is zone 2; '1.5', 'nan', 'inf' are refused
    raise PartitionError(f"{where} has zone label {value!r}; zone labels must be integers or strings")


def _parse_bus_id(text: Any) -> int | None:
    """An external bus id from a CSV field or dict key, or None when it is not an integer."""
    if isinstance(text, (bool, np.bool_)):
        return None
    if isinstance(text, (int, np.integer)):
        return int(text)
    if isinstance(text, (float, np.floating)):
        return int(text) if math.isfinite(text) and float(text).is_integer() else None
    if isinstance(text, str):
        s = text.strip()
        try:
            return int(s)
        except ValueError:
            try:
                f = float(s)
            except ValueError:
                return None
            return int(f) if math.isfinite(f) and f.is_integer() else None
    return None


def _from_bus_map(
    net: Network, entries: Iterable[tuple[Any, Any, str]], where: str
) -> tuple[np.ndarray, list]:
    """Zone labels per internal bus from (bus id, label, location) entries."""
    lookup = net._bus_lookup()
    labels_of_bus: list[Any] = [None] * net.n_bus
    seen_at: dict[int, str] = {}
    for bus_raw, label_raw, loc in entries:
        bus_id = _parse_bus_id(bus_raw)
        if bus_id is None:
            raise PartitionError(f"{loc}: bus {bus_raw!r} is not a bus number")
        idx = lookup.get(bus_id)
        if idx is None:
            raise PartitionError(f"{loc}: bus {bus_id} is not in network {net.name}")
        label = _normalize_label(label_raw, f"{loc}: bus {bus_id}")
        if idx in seen_at:
            raise PartitionError(f"{loc}: bus {bus_id} is listed again (first at {seen_at[idx]})")
        seen_at[idx] = loc.rsplit(", ", 1)[-1] if ", " in loc else loc
        labels_of_bus[idx] = label
    _warn_mixed_labels(labels_of_bus, seen_at, where, net)
    missing = [i for i, lab in enumerate(labels_of_bus) if lab is None]
    if missing:
        ids = net.bus_ids[missing].tolist()
        raise PartitionError(
            f"{where}: {len(ids)} bus{'es' if len(ids) != 1 else ''} of network {net.name} "
            f"{'have' if len(ids) != 1 else 'has'} no zone: {_fmt_ids(ids)}"
        )
    return _index_labels(labels_of_bus)


def _warn_mixed_labels(labels_of_bus: Sequence[Any], seen_at: dict, where: str, net: Network) -> None:
    """Numbered zones beside a named one ('a' among 1, 2, 3) are often a typo that makes a zone of its own: said."""
    ints = sum(isinstance(lab, int) for lab in labels_of_bus)
    named = [i for i, lab in enumerate(labels_of_bus) if isinstance(lab, str)]
    if ints and named:
        i = named[0]
        log.warning(
            "%s: %d bus(es) have a named zone (first: bus %d, %s) beside %d in numbered zones; each name is a zone of its "
            "own (a typo?)", where, len(named), net.bus_ids[i], seen_at.get(i, "?"), ints,
        )


def _index_labels(labels_of_bus: Sequence[Any]) -> tuple[np.ndarray, list]:
    """Zone indices 0..K-1 (in label order) and the sorted labels."""
    labels = sorted(set(labels_of_bus), key=_label_key)
    index = {lab: z for z, lab in enumerate(labels)}
    return np.fromiter((index[lab] for lab in labels_of_bus), dtype=np.int64, count=len(labels_of_bus)), labels


def _read_csv(net: Network, path: Path) -> tuple[np.ndarray, list]:
    where = f"partition file {path}"
    from ..files.text import NotUTF8, read_utf8

    try:
        text = read_utf8(path)
    except OSError as exc:
        raise PartitionError(f"{where}: cannot read it ({exc.strerror or exc})") from exc
    except NotUTF8 as exc:
        raise PartitionError(f"{where}: {exc}; a bus,zone CSV is expected") from None
    entries = []
    first = True
    bus_at, zone_at = 0, 1  # the columns, in this order unless a header names them
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        sep = "," if "," in line else ";" if ";" in line else None
        fields = [f.strip() for f in line.split(sep)]
        loc = f"{where}, line {lineno}"
        if first:
            first = False
            # optional header row: the first line when none of its fields is a number
            if all(_parse_bus_id(f) is None for f in fields):
                bus_at, zone_at = _header_columns(fields, loc)
                continue
        if len(fields) != 2:
            raise PartitionError(f"{loc}: expected 2 fields 'bus,zone', got {len(fields)}")
        if _parse_bus_id(fields[bus_at]) is None:
            raise PartitionError(f"{loc}: the bus field is not a bus number")  # never echoed (a file's content)
        entries.append((fields[bus_at], fields[zone_at], loc))
    if not entries:
        raise PartitionError(f"{where}: no 'bus,zone' lines")
    return _from_bus_map(net, entries, where)


def _header_columns(fields: list[str], loc: str) -> tuple[int, int]:
    """Which column holds the bus and which the zone, from a header row: ``bus,zone`` or ``zone,bus`` (any case; an
    ``area`` column stands for the zone), or two other names read as bus,zone in that order."""
    names = [f.strip().lower() for f in fields]
    if len(names) != 2:
        raise PartitionError(f"{loc}: a header of {len(names)} fields; a partition file has two columns, bus and zone")
    if "bus" in names:
        other = names[1 - names.index("bus")]
        if other not in ("zone", "area"):
            raise PartitionError(f"{loc}: header {','.join(fields)}: name the columns bus and zone")
        return names.index("bus"), 1 - names.index("bus")
    return 0, 1


def _from_sequence(net: Network, values: Any, where: str) -> tuple[np.ndarray, list]:
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.ndim != 1 or len(arr) != net.n_bus:
        raise PartitionError(
            f"{where} has {arr.shape[0] if arr.ndim else 0} entries (shape {arr.shape}); "
            f"network {net.name} has {net.n_bus} buses"
        )
    if arr.dtype.kind in "iu":
        labels_arr, inverse = np.unique(arr, return_inverse=True)
        return inverse.astype(np.int64).ravel(), [int(x) for x in labels_arr]
    ids = net.bus_ids
    labels_of_bus = [_normalize_label(v, f"{where}: bus {ids[i]}") for i, v in enumerate(arr.tolist())]
    return _index_labels(labels_of_bus)


def bundled_csv(name: str) -> Path | None:
    root = resources.files("powerdp.cases")
    candidate = root / f"{name}.csv"
    return Path(str(candidate)) if candidate.is_file() else None
