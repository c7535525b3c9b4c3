"""Public costs for a case whose data has none (docs/profiles.md).

SimBench's grids, and many pandapower networks made for power flow, carry no cost data. A dispatch
needs one, and it must be *public*: every zone and the coordinator know it, so it reveals nothing about a
zone's loads. :class:`PublicCosts` is a small table, by generator type, of polynomial costs
``c2·p² + c1·p + c0`` (p in MW: c2 in $/MW²h, c1 in $/MWh, c0 in $/h), a curtailment price for
renewables, the load-shedding weight, and per-element overrides. :data:`DEFAULT_COSTS` holds the
documented defaults; :func:`read_costs` reads a CSV or JSON file that overrides any of them.

Curtailment is priced by a negative linear cost on renewable output: a renewable with available
output ``a`` and own cost ``c(p)`` costs ``c(p) − π·p``, which equals ``c(p) + π·(a − p)`` (curtailing
``a − p`` costs ``π`` per MWh) minus the constant ``π·a``. The constant is data-free and the same for
every dispatch of a period, so the optimum does not change; :attr:`Horizon.curtailment_offset
<powerdp.grid.profiles.Horizon>` holds it per period, to be added to the cost when it is reported as
``generation + curtailment``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import CaseDataError
from ..files.text import NotUTF8, read_utf8

__all__ = ["PublicCosts", "DEFAULT_COSTS", "read_costs", "GEN_KINDS"]

#: generator kinds: what a generator is for a dispatch (results report import and curtailment by kind)
GEN_KINDS = ("conventional", "renewable", "import", "other")

#: type → (c2 $/MW²h, c1 $/MWh, c0 $/h); a generator takes the row of its type, else of its kind.
#: Indicative marginal costs of the German merit order of SimBench's year (2016: fuel + CO2,
#: in € but written $ as the rest of powerdp): docs/profiles.md gives the reasoning.
_DEFAULT_TABLE: dict[str, tuple[float, float, float]] = {
    # kinds (the fallback of every type not listed)
    "conventional": (0.005, 40.0, 0.0),
    "renewable": (0.0, 0.0, 0.0),
    "import": (0.002, 45.0, 0.0),
    "other": (0.005, 40.0, 0.0),
    # conventional plants by fuel (SimBench's gen.type)
    "nuclear": (0.001, 10.0, 0.0),
    "lignite": (0.002, 22.0, 0.0),
    "hard coal": (0.003, 32.0, 0.0),
    "gas": (0.005, 48.0, 0.0),
    "oil": (0.01, 80.0, 0.0),
    "waste": (0.002, 12.0, 0.0),
    # renewables with a fuel (SimBench's sgen.type); wind, pv and run of river cost nothing to run
    "biomass": (0.0, 25.0, 0.0),
}


@dataclass(frozen=True)
class PublicCosts:
    """A public cost table (docs/profiles.md): by type, curtailment, shedding, per-element overrides.

    ``by_type`` maps a generator type or kind to ``(c2, c1, c0)`` in $/MW²h, $/MWh, $/h;
    ``curtailment_price`` ($/MWh) is subtracted from the linear cost of every renewable;
    ``shedding_weight`` is the ω of ``cost+shedding`` ($/h per p.u.², or ``"auto"``: scaled to the
    costs, as ``--shedding-weight auto``); ``elements`` maps an element name (``"sgen.3"``,
    ``"gen.2"``, ``"ext_grid.0"``; MATPOWER: ``"gen.<row>"``) to its own ``(c2, c1, c0)``, which
    replaces the type's and is not reduced by the curtailment price.
    ``keep_case_costs``: a generator that has costs in the case keeps them unless an element entry names it.
    """

    by_type: dict[str, tuple[float, float, float]] = field(default_factory=lambda: dict(_DEFAULT_TABLE))
    curtailment_price: float = 60.0
    shedding_weight: float | str = "auto"
    elements: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    keep_case_costs: bool = True
    source: str = "powerdp defaults (docs/profiles.md)"

    def cost_of(self, name: str, kind: str, gen_type: str = "") -> tuple[float, float, float]:
        """(c2, c1, c0) in MW units of the generator ``name`` of ``kind`` and ``gen_type``, curtailment included."""
        if name in self.elements:
            return self.elements[name]
        key = gen_type.strip().lower()
        c2, c1, c0 = self.by_type.get(key, self.by_type.get(kind, self.by_type.get("other", (0.0, 0.0, 0.0))))
        if kind == "renewable":
            c1 -= self.curtailment_price
        return float(c2), float(c1), float(c0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form, the same layout :func:`read_costs` reads."""
        return {
            "types": {k: {"c2": v[0], "c1": v[1], "c0": v[2]} for k, v in self.by_type.items()},
            "curtailment_price": self.curtailment_price,
            "shedding_weight": self.shedding_weight,
            "elements": {k: {"c2": v[0], "c1": v[1], "c0": v[2]} for k, v in self.elements.items()},
            "keep_case_costs": self.keep_case_costs,
            "source": self.source,
        }

    def table(self) -> str:
        """The table as text: one line per type, then curtailment, shedding and the element overrides."""
        lines = [f"public costs ({self.source}); p in MW", f"{'type':<14}{'c2 $/MW²h':>11}{'c1 $/MWh':>10}{'c0 $/h':>8}"]
        for k, (c2, c1, c0) in self.by_type.items():
            lines.append(f"{k:<14}{c2:>11g}{c1:>10g}{c0:>8g}")
        lines.append(f"curtailment of renewables: {self.curtailment_price:g} $/MWh (a linear cost of −{self.curtailment_price:g} on their output)")
        lines.append(f"load shedding: ω = {self.shedding_weight} ($/h per p.u.², --shedding-weight)")
        for k, (c2, c1, c0) in self.elements.items():
            lines.append(f"{k:<14}{c2:>11g}{c1:>10g}{c0:>8g}  (element override)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


DEFAULT_COSTS = PublicCosts()


def read_costs(path: str | Path | None, base: PublicCosts = DEFAULT_COSTS) -> PublicCosts:
    """``base`` overridden by a CSV or JSON cost file (docs/profiles.md); ``None`` returns ``base``.

    JSON: ``{"types": {"gas": {"c1": 50}}, "curtailment_price": 80, "shedding_weight": 1e5,
    "elements": {"sgen.3": {"c1": 0}}, "keep_case_costs": false}`` (every key optional; a missing
    coefficient is 0 for a new entry and unchanged for an existing type).
    CSV: a header ``name,c2,c1,c0`` and one row per type or element (a name with a dot, ``sgen.3``, is
    an element), plus the rows ``curtailment`` (its c1 is the price) and ``shedding`` (its c1 is ω).
    """
    if path is None:
        return base
    p = Path(path)
    if not p.is_file():
        raise CaseDataError(f"cost file {p}: no such file")
    src = str(p)
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(read_utf8(p))
        except (OSError, ValueError) as exc:  # NotUTF8 is a ValueError: its byte, line and column
            raise CaseDataError(f"cost file {p}: not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise CaseDataError(f"cost file {p}: the top level must be an object with types, elements, curtailment_price, shedding_weight")
    elif p.suffix.lower() == ".csv":
        data = _csv_to_dict(p)
    else:
        raise CaseDataError(f"cost file {p}: give a .json or .csv file")
    unknown = set(data) - {"types", "elements", "curtailment_price", "shedding_weight", "keep_case_costs", "source"}
    if unknown:
        raise CaseDataError(f"cost file {p}: unknown key(s) {', '.join(sorted(unknown))}; "
                            "use types, elements, curtailment_price, shedding_weight, keep_case_costs")
    by_type = dict(base.by_type)
    for name, row in _entries(data.get("types", {}), src, "types").items():
        by_type[name.lower()] = _coeffs(row, src, f"type {name!r}", by_type.get(name.lower(), (0.0, 0.0, 0.0)))
    elements = dict(base.elements)
    for name, row in _entries(data.get("elements", {}), src, "elements").items():
        elements[name] = _coeffs(row, src, f"element {name!r}", (0.0, 0.0, 0.0))
    price = _number(data.get("curtailment_price", base.curtailment_price), src, "curtailment_price", allow_negative=False)
    weight = data.get("shedding_weight", base.shedding_weight)
    if weight != "auto":
        weight = _number(weight, src, "shedding_weight", allow_negative=False)
        if weight == 0:
            raise CaseDataError(f"cost file {p}: shedding_weight must be positive (or \"auto\")")
    keep = data.get("keep_case_costs", base.keep_case_costs)
    if not isinstance(keep, bool):
        raise CaseDataError(f"cost file {p}: keep_case_costs must be true or false, not {keep!r}")
    return replace(base, by_type=by_type, elements=elements, curtailment_price=price, shedding_weight=weight,
                   keep_case_costs=keep, source=src)


def _csv_to_dict(p: Path) -> dict[str, Any]:
    try:
        rows = list(csv.DictReader(io.StringIO(read_utf8(p), newline="")))
    except (OSError, csv.Error, NotUTF8) as exc:
        raise CaseDataError(f"cost file {p}: cannot read it as CSV ({exc})") from None
    if not rows or "name" not in rows[0]:
        raise CaseDataError(f"cost file {p}: needs a header name,c2,c1,c0 and at least one row")
    data: dict[str, Any] = {"types": {}, "elements": {}}
    for i, row in enumerate(rows, start=2):
        name = (row.get("name") or "").strip()
        values = {k: v for k, v in row.items() if k in ("c2", "c1", "c0") and v not in (None, "")}
        extra = set(row) - {"name", "c2", "c1", "c0"}
        if extra:
            raise CaseDataError(f"cost file {p}: unknown column(s) {', '.join(sorted(map(str, extra)))}; use name,c2,c1,c0")
        if not name:
            raise CaseDataError(f"cost file {p}, line {i}: empty name")
        if name.lower() in ("curtailment", "shedding"):
            if "c1" not in values:
                raise CaseDataError(f"cost file {p}, line {i}: the {name} row needs its value in column c1")
            key = "curtailment_price" if name.lower() == "curtailment" else "shedding_weight"
            v = values["c1"].strip()
            data[key] = v if v == "auto" else _number(v, str(p), f"line {i} ({name}) c1")
        else:
            data["elements" if "." in name else "types"][name] = values
    return data


def _entries(obj: Any, src: str, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise CaseDataError(f"cost file {src}: {what} must map names to {{c2, c1, c0}}")
    return obj


def _coeffs(row: Any, src: str, what: str, old: tuple[float, float, float]) -> tuple[float, float, float]:
    if isinstance(row, (list, tuple)) and len(row) == 3:
        row = dict(zip(("c2", "c1", "c0"), row))
    if not isinstance(row, dict):
        raise CaseDataError(f"cost file {src}: {what} must be {{\"c2\": .., \"c1\": .., \"c0\": ..}} or [c2, c1, c0]")
    bad = set(row) - {"c2", "c1", "c0"}
    if bad:
        raise CaseDataError(f"cost file {src}: {what} has unknown field(s) {', '.join(sorted(bad))}; use c2, c1, c0")
    out = list(old)
    for j, k in enumerate(("c2", "c1", "c0")):
        if k in row:
            out[j] = _number(row[k], src, f"{what} field {k}")
    if out[0] < 0:
        raise CaseDataError(f"cost file {src}: {what} field c2 is negative ({out[0]:g}); the cost would not be convex")
    return out[0], out[1], out[2]


def _number(v: Any, src: str, what: str, allow_negative: bool = True) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise CaseDataError(f"cost file {src}: {what} = {v!r} is not a number") from None
    if isinstance(v, bool) or not math.isfinite(x) or (x < 0 and not allow_negative):
        raise CaseDataError(f"cost file {src}: {what} = {v!r} must be a finite{' non-negative' if not allow_negative else ''} number")
    return x
