"""The network backend's wire format: an explicit, versioned binary schema (no pickle), checked field by field.

Every message is a header and the fields its kind declares, in order::

    header   magic b"PDPN" | schema version u16 | kind u16          (little-endian)
    i64      8 bytes, signed little-endian
    f64      8 bytes, IEEE 754 binary64 little-endian
    str      u32 length | UTF-8 bytes            (a bounded length per field)
    i64[]    u32 count | count × i64
    f64[]    u32 count | count × f64             (raw little-endian float64: the values cross bit for bit)
    list     u32 count | count records, each the record's fields in order

:data:`SCHEMA` declares every kind: what the coordinator sends (SETUP … JOURNAL) and what a zone server answers (READY …
FAILED). It is the network's allow-list: a zone's answer to a round is the zones' :class:`ZoneUpdate` (round, zone,
the released values B_p z_p) and each zone's ε spent so far (its ledger's public figure); its final report adds the
ledger's report (a JSON object). Nothing else a zone computes has a field to cross in, and a failure crosses as a
code from :data:`FAILURE_CODES` (the zone's own log keeps the detail). :func:`decode` refuses anything the schema
does not describe exactly: another magic or version, an unknown kind, a short or overlong body, a count or length
above its bound, a non-finite float where one is not allowed; the callers then check each field's meaning (the
round expected, the zones of that server, the number of values of each zone).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..consensus.messages import ConsensusMessage, ZoneUpdate

__all__ = ["SCHEMA", "SCHEMA_VERSION", "MAGIC", "WireError", "encode", "decode", "FAILURE_CODES", "RemoteZoneReport",
           "MAX_JSON", "MAX_VALUES", "MAX_ZONES"]

MAGIC = b"PDPN"
SCHEMA_VERSION = 1
_HEADER = struct.Struct("<4sHH")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")

MAX_ZONES = 4096  # zones one server hosts
MAX_VALUES = 1 << 24  # values of one array
MAX_JSON = 1 << 16  # bytes of a JSON field (a run's settings, a ledger's report)
MAX_TEXT = 256  # bytes of a short text field (ids, digests, codes)


class WireError(ValueError):
    """A message the schema does not describe (the text names the kind and field, never a value)."""


#: (name, type) per field; a record type is ("list", ((name, type), ...))
def _list(*fields):
    return ("list", tuple(fields))


MESSAGE_RECORD = _list(("round", "i64"), ("zone", "i64"), ("w", "f64[]"), ("rho", "f64"))
UPDATE_RECORD = _list(("round", "i64"), ("zone", "i64"), ("released", "f64[]"))

#: kind number → (name, fields): every message that may cross, and nothing else
SCHEMA: dict[int, tuple[str, tuple]] = {
    # the coordinator's requests
    1: ("SETUP", (("session", "str"), ("zones", "i64[]"), ("config", "json"), ("run", "str"), ("public", "str"))),
    2: ("INIT", ()),
    3: ("STEP", (("messages", MESSAGE_RECORD),)),
    4: ("REPLAY", (("messages", MESSAGE_RECORD), ("released", _list(("zone", "i64"), ("values", "f64[]"))))),
    5: ("REPORT", ()),
    6: ("SAVE", (("round", "i64"), ("run", "str"))),
    7: ("RESTORE", (("round", "i64"), ("run", "str"))),
    8: ("PRUNE", (("round", "i64"), ("run", "str"))),
    9: ("SOLUTIONS", (("run", "str"),)),
    10: ("CLOSE", ()),
    11: ("JOURNAL", (("run", "str"),)),
    # a zone server's answers
    20: ("READY", (("zones", "i64[]"), ("shared", "i64[]"))),
    21: ("UPDATES", (("updates", UPDATE_RECORD), ("spent", _list(("zone", "i64"), ("epsilon", "f64"))))),
    22: ("REPORTS", (("reports", _list(("zone", "i64"), ("epsilon", "f64"), ("ledger", "json"))),)),
    23: ("ACK", ()),
    24: ("FAILED", (("zone", "i64"), ("status", "i64"), ("code", "str"), ("round", "i64"))),
}
KIND = {name: number for number, (name, _) in SCHEMA.items()}
REQUESTS = frozenset(n for n, (name, _) in SCHEMA.items() if n < 20)

#: what a zone's failure may say: code → the coordinator's text (the zone's own log keeps the detail)
FAILURE_CODES = {
    "failed": "failed (its own log keeps the details)",
    "bad-input": "refused its own input (its own log names the file and field)",
    "no-checkpoint": "has no checkpoint of that round in its private folder",
    "checkpoint": "cannot read its checkpoint (its own log names the file)",
    "public-mismatch": "holds other public files than the coordinator (network or partition differ)",
    "refused-settings": "refused the run's settings (its own log says why)",
    "refused-seeded": "refuses a seeded run (its noise would be known to whoever knows the seed; the zone's operator "
                      "allows one with --allow-seeded)",
    "replay-differs": "could not resume identically: its replayed release differs from the one it sent, and it keeps no "
                      "release journal that charges the difference (a run without checkpoints cannot be resumed)",
    "invalid-request": "received a request the protocol does not allow (its own log says which)",
    "busy": "is busy with another run",
    "no-session": "has no run set up (it was restarted)",
    "wrong-zone": "does not host the zone asked for",
}


@dataclass(frozen=True)
class RemoteZoneReport:
    """A zone's report as it crosses the network: its ledger's public figures only. The evaluation's fields of a
    simulation's :class:`~powerdp.apps.power_flow.agent.ZoneDiagnostics` do not cross (NaN / None here)."""

    zone: int
    epsilon_spent: float
    privacy: dict[str, Any] | None = None
    objective: float = math.nan
    max_violation: float = math.nan
    cost: float = math.nan
    shedding_mw: float = math.nan
    solution: None = None
    stats: None = None


# ---------------------------------------------------------------------------------------------------- encoding


def _enc_field(out: list, ftype, value, where: str) -> None:
    if ftype == "i64":
        out.append(_I64.pack(int(value)))
    elif ftype == "f64":
        out.append(_F64.pack(float(value)))
    elif ftype in ("str", "json"):
        data = (json.dumps(value, allow_nan=True, separators=(",", ":")) if ftype == "json" else str(value)).encode("utf-8")
        out.append(_U32.pack(len(data)))
        out.append(data)
    elif ftype in ("i64[]", "f64[]"):
        arr = np.ascontiguousarray(value, dtype="<i8" if ftype == "i64[]" else "<f8").reshape(-1)
        out.append(_U32.pack(arr.size))
        out.append(arr.tobytes())
    elif isinstance(ftype, tuple) and ftype[0] == "list":
        items = list(value)
        out.append(_U32.pack(len(items)))
        for item in items:
            for name, sub in ftype[1]:
                _enc_field(out, sub, item[name] if isinstance(item, dict) else getattr(item, name), f"{where}.{name}")
    else:  # pragma: no cover - a schema mistake
        raise TypeError(f"{where}: unknown field type {ftype!r}")


def encode(kind: str, **fields) -> bytes:
    """The bytes of message ``kind`` with ``fields`` (each declared field, nothing else)."""
    number = KIND[kind]
    declared = SCHEMA[number][1]
    names = [n for n, _ in declared]
    if sorted(fields) != sorted(names):
        raise TypeError(f"{kind}: fields {sorted(fields)} are not the schema's {names}")
    out = [_HEADER.pack(MAGIC, SCHEMA_VERSION, number)]
    for name, ftype in declared:
        _enc_field(out, ftype, fields[name], f"{kind}.{name}")
    return b"".join(out)


# ---------------------------------------------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes, kind: str):
        self.view = memoryview(data)
        self.pos = 0
        self.kind = kind

    def take(self, n: int, where: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.view):
            raise WireError(f"{self.kind}: the message ends inside field {where}")
        chunk = self.view[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def count(self, where: str, bound: int) -> int:
        (n,) = _U32.unpack(self.take(4, where))
        if n > bound:
            raise WireError(f"{self.kind}: field {where} holds {n} items, more than the {bound} allowed")
        return n


def _dec_field(r: _Reader, ftype, where: str):
    if ftype == "i64":
        return _I64.unpack(r.take(8, where))[0]
    if ftype == "f64":
        return _F64.unpack(r.take(8, where))[0]
    if ftype in ("str", "json"):
        n = r.count(where, MAX_JSON if ftype == "json" else MAX_TEXT)
        try:
            text = bytes(r.take(n, where)).decode("utf-8")
        except UnicodeDecodeError:
            raise WireError(f"{r.kind}: field {where} is not UTF-8 text") from None
        if ftype == "str":
            return text
        try:
            return json.loads(text)
        except ValueError:
            raise WireError(f"{r.kind}: field {where} is not JSON") from None
    if ftype in ("i64[]", "f64[]"):
        n = r.count(where, MAX_VALUES)
        return np.frombuffer(r.take(8 * n, where), dtype="<i8" if ftype == "i64[]" else "<f8").astype(
            np.int64 if ftype == "i64[]" else np.float64)
    if isinstance(ftype, tuple) and ftype[0] == "list":
        n = r.count(where, MAX_ZONES)
        return [{name: _dec_field(r, sub, f"{where}.{name}") for name, sub in ftype[1]} for _ in range(n)]
    raise TypeError(f"{where}: unknown field type {ftype!r}")  # pragma: no cover


def decode(data: bytes, allowed: frozenset[int] | None = None) -> tuple[str, dict[str, Any]]:
    """(kind, fields) of a message, or :class:`WireError`; ``allowed``: the kind numbers this side accepts."""
    if len(data) < _HEADER.size:
        raise WireError("the message is shorter than its header")
    magic, version, number = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise WireError("the message is not a powerdp network message (wrong magic)")
    if version != SCHEMA_VERSION:
        raise WireError(f"the message has schema version {version}; this powerdp speaks version {SCHEMA_VERSION}")
    if number not in SCHEMA or (allowed is not None and number not in allowed):
        raise WireError(f"message kind {number} is not one this side accepts")
    kind, declared = SCHEMA[number]
    r = _Reader(data, kind)
    r.pos = _HEADER.size
    fields = {name: _dec_field(r, ftype, name) for name, ftype in declared}
    if r.pos != len(data):
        raise WireError(f"{kind}: {len(data) - r.pos} bytes follow the last field")
    return kind, fields


# ---------------------------------------------------------------------------------------------------- messages


def messages_of(records: list[dict]) -> list[ConsensusMessage]:
    return [ConsensusMessage(round=int(m["round"]), zone=int(m["zone"]), w=m["w"], rho=float(m["rho"])) for m in records]


def updates_of(records: list[dict]) -> list[ZoneUpdate]:
    return [ZoneUpdate(round=int(u["round"]), zone=int(u["zone"]), released=u["released"]) for u in records]


def finite(value: float) -> bool:
    return math.isfinite(value)
