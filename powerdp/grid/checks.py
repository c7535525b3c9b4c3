"""The passes a case's raw tables go through on their way to a :class:`~powerdp.grid.network.Network`: the checks
(bad data is an error naming the element and the field) and the corrections (PowerModels' conventions, noted with -v)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..errors import CaseDataError
from .matpower import MatpowerData
from .network import (
    BRANCH_COLUMNS,
    BUS_COLUMNS,
    DCLINE_COLUMNS,
    GEN_COLUMNS,
    NO_LIMIT_RATING,
    PM_ANGLE_PAD,
    TAP_RANGE,
    TINY_IMPEDANCE,
    TINY_RATING_MVA,
)

log = logging.getLogger(__name__)



def _check_finite(
    table: np.ndarray, table_name: str, columns: list[str], used: list[int], ids: np.ndarray, source: str
) -> None:
    """NaN/inf in a column powerdp uses is an error naming the element and the field."""
    used = [c for c in used if c < table.shape[1]]
    bad = np.zeros(table.shape, dtype=bool)
    bad[:, used] = ~np.isfinite(table[:, used])
    if bad.any():
        row, col = np.argwhere(bad)[0]
        colname = columns[col] if col < len(columns) else f"column {col + 1}"
        raise CaseDataError(
            f"{source}: {table_name} {ids[row]:g} (row {row + 1}) has {table[row, col]} in field {colname}"
        )


@dataclass


class _Tables:
    """The raw tables being turned into a :class:`Network`, and what the passes found so far."""

    data: MatpowerData
    convention: str
    src: str = ""
    S: float = 100.0
    bus_ids: np.ndarray | None = None  # every row's bus number
    btype: np.ndarray | None = None
    lookup: dict[int, int] = field(default_factory=dict)
    f_all: np.ndarray | None = None  # branch ends as bus rows
    t_all: np.ndarray | None = None
    angmin_deg: np.ndarray | None = None
    angmax_deg: np.ndarray | None = None
    gen_bus_all: np.ndarray | None = None
    tap: np.ndarray | None = None  # per active branch, after the correct passes
    rate_a: np.ndarray | None = None
    angmin: np.ndarray | None = None
    angmax: np.ndarray | None = None
    active_bus: np.ndarray | None = None
    active_branch: np.ndarray | None = None
    active_gen: np.ndarray | None = None
    dcline: np.ndarray | None = None  # mpc.dcline (0 rows when the case has none)
    dc_f_all: np.ndarray | None = None  # dcline ends as bus rows
    dc_t_all: np.ndarray | None = None
    active_dcline: np.ndarray | None = None
    dc_limits: dict[str, np.ndarray] = field(default_factory=dict)  # per active dcline, p.u.

    def bus_of(self, ids: np.ndarray, what: str, field_name: str) -> np.ndarray:
        out = np.empty(len(ids), dtype=np.int64)
        for k, b in enumerate(ids):
            idx = self.lookup.get(int(b)) if float(b) == int(b) else None
            if idx is None:
                raise CaseDataError(f"{self.src}: {what} {k + 1} has {field_name} {b:g}, which is not a bus in mpc.bus")
            out[k] = idx
        return out


def check_finite_values(t: _Tables) -> None:
    """No NaN or inf in the fields powerdp reads."""
    d, src = t.data, t.src
    _check_finite(d.bus, "bus", BUS_COLUMNS, [0, 1, 2, 3, 4, 5, 6, 10, 11, 12], d.bus[:, 0], src)
    _check_finite(d.gen, "generator", GEN_COLUMNS, [0, 3, 4, 7, 8, 9], np.arange(1, len(d.gen) + 1), src)
    _check_finite(d.branch, "branch", BRANCH_COLUMNS, [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12], np.arange(1, len(d.branch) + 1), src)


def check_bus_ids(t: _Tables) -> None:
    """Bus numbers are positive integers, each once."""
    ids, src = t.data.bus[:, 0], t.src
    if np.any(ids != np.round(ids)) or np.any(ids <= 0):
        k = int(np.flatnonzero((ids != np.round(ids)) | (ids <= 0))[0])
        raise CaseDataError(f"{src}: bus row {k + 1} has bus_i {ids[k]:g}; bus numbers must be positive integers")
    t.bus_ids = ids.astype(np.int64)
    uniq, counts = np.unique(t.bus_ids, return_counts=True)
    if np.any(counts > 1):
        raise CaseDataError(f"{src}: bus {uniq[counts > 1][0]} appears {counts[counts > 1][0]} times in mpc.bus")
    t.lookup = {int(b): i for i, b in enumerate(t.bus_ids)}


def check_bus_types(t: _Tables) -> None:
    """Bus types are MATPOWER's 1-4 (0 is accepted and corrected to PQ)."""
    bus = t.data.bus
    t.btype = bus[:, 1].astype(int)
    bad = ~np.isin(t.btype, [0, 1, 2, 3, 4])
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise CaseDataError(f"{t.src}: bus {t.bus_ids[k]} has type {bus[k, 1]:g}; MATPOWER bus types are 1-4")


def check_voltage_limits(t: _Tables) -> None:
    """0 <= Vmin <= Vmax at every bus."""
    vmin, vmax = t.data.bus[:, 12], t.data.bus[:, 11]
    bad = (vmin > vmax) | (vmin < 0)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise CaseDataError(f"{t.src}: bus {t.bus_ids[k]} has Vmin {vmin[k]:g} and Vmax {vmax[k]:g}; need 0 <= Vmin <= Vmax")


def check_branches(t: _Tables) -> None:
    """Branch ends are known, distinct buses; impedance is not zero; ratings are not negative;
    angmin <= angmax."""
    branch, src = t.data.branch, t.src
    t.f_all = t.bus_of(branch[:, 0], "branch", "fbus")
    t.t_all = t.bus_of(branch[:, 1], "branch", "tbus")
    loops = t.f_all == t.t_all
    if loops.any():
        k = int(np.flatnonzero(loops)[0])
        raise CaseDataError(f"{src}: branch {k + 1} connects bus {t.bus_ids[t.f_all[k]]} to itself")
    zero_z = (branch[:, 2] == 0) & (branch[:, 3] == 0)
    if zero_z.any():
        k = int(np.flatnonzero(zero_z)[0])
        raise CaseDataError(f"{src}: branch {k + 1} has zero impedance (r = x = 0); its admittance is undefined")
    if np.any(branch[:, 5] < 0):
        k = int(np.flatnonzero(branch[:, 5] < 0)[0])
        raise CaseDataError(f"{src}: branch {k + 1} has a negative rateA ({branch[k, 5]:g})")
    if np.any(branch[:, 8] < 0):
        k = int(np.flatnonzero(branch[:, 8] < 0)[0])
        raise CaseDataError(f"{src}: branch {k + 1} has a negative tap ratio ({branch[k, 8]:g}); it must be positive (0 means 1)")
    odd_tap = (branch[:, 8] != 0) & ((branch[:, 8] < TAP_RANGE[0]) | (branch[:, 8] > TAP_RANGE[1]))
    if odd_tap.any():
        k = int(np.flatnonzero(odd_tap)[0])
        raise CaseDataError(
            f"{src}: branch {k + 1} has a tap ratio of {branch[k, 8]:g}, outside [{TAP_RANGE[0]:g}, {TAP_RANGE[1]:g}]; "
            "its admittance would be meaningless (0 means 1)"
        )
    z = np.hypot(branch[:, 2], branch[:, 3])
    if np.any(z < TINY_IMPEDANCE):
        k = int(np.flatnonzero(z < TINY_IMPEDANCE)[0])
        log.warning(
            "%s: branch %d has an impedance of %.3g p.u. (r = %g, x = %g), below %g: the model is ill-conditioned and "
            "solutions may violate its constraints; merge its buses or give it a realistic impedance",
            src, k + 1, z[k], branch[k, 2], branch[k, 3], TINY_IMPEDANCE,
        )
    ncols = branch.shape[1]
    t.angmin_deg = branch[:, 11] if ncols > 11 else np.full(len(branch), -360.0)
    t.angmax_deg = branch[:, 12] if ncols > 12 else np.full(len(branch), 360.0)
    bad = t.angmin_deg > t.angmax_deg
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise CaseDataError(f"{src}: branch {k + 1} has angmin {t.angmin_deg[k]:g} > angmax {t.angmax_deg[k]:g}")


def check_generators(t: _Tables) -> None:
    """Generators sit at known buses, with Pmin <= Pmax and Qmin <= Qmax."""
    gen = t.data.gen
    t.gen_bus_all = t.bus_of(gen[:, 0], "generator", "bus") if len(gen) else np.zeros(0, np.int64)
    for lo, hi, name in ((gen[:, 9], gen[:, 8], "Pmin/Pmax"), (gen[:, 4], gen[:, 3], "Qmin/Qmax")):
        bad = lo > hi
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise CaseDataError(f"{t.src}: generator {k + 1} has {name} = {lo[k]:g}/{hi[k]:g}; the minimum exceeds the maximum")


def check_dclines(t: _Tables) -> None:
    """HVDC lines: 17 columns, finite used fields, known and distinct end buses, status 0 or 1,
    PMIN <= PMAX, QMINF <= QMAXF, QMINT <= QMAXT."""
    src = t.src
    dc = t.data.extra.get("dcline")
    if dc is None or dc.size == 0:
        t.dcline = np.zeros((0, len(DCLINE_COLUMNS)))
        t.dc_f_all = t.dc_t_all = np.zeros(0, np.int64)
        return
    if dc.shape[1] < len(DCLINE_COLUMNS):
        raise CaseDataError(
            f"{src}: mpc.dcline has {dc.shape[1]} columns; MATPOWER needs at least {len(DCLINE_COLUMNS)} "
            f"({' '.join(DCLINE_COLUMNS)})"
        )
    ids = np.arange(1, len(dc) + 1)
    # PF..VT are solution/set-point fields powerdp does not read
    _check_finite(dc, "dcline", DCLINE_COLUMNS, [0, 1, 2, 9, 10, 11, 12, 13, 14, 15, 16], ids, src)
    t.dcline = dc
    t.dc_f_all = t.bus_of(dc[:, 0], "dcline", "F_BUS")
    t.dc_t_all = t.bus_of(dc[:, 1], "dcline", "T_BUS")
    loops = t.dc_f_all == t.dc_t_all
    if loops.any():
        k = int(np.flatnonzero(loops)[0])
        raise CaseDataError(f"{src}: dcline {k + 1} connects bus {t.bus_ids[t.dc_f_all[k]]} to itself")
    bad = ~np.isin(dc[:, 2], [0, 1])
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise CaseDataError(f"{src}: dcline {k + 1} has BR_STATUS {dc[k, 2]:g}; it must be 1 (in service) or 0 (out)")
    for lo, hi, name in ((9, 10, "PMIN/PMAX"), (11, 12, "QMINF/QMAXF"), (13, 14, "QMINT/QMAXT")):
        bad = dc[:, lo] > dc[:, hi]
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise CaseDataError(
                f"{src}: dcline {k + 1} has {name} = {dc[k, lo]:g}/{dc[k, hi]:g}; the minimum exceeds the maximum"
            )

CHECKS = (
    check_finite_values, check_bus_ids, check_bus_types, check_voltage_limits, check_branches, check_generators,
    check_dclines,
)


def correct_bus_types(t: _Tables) -> None:
    """Type-0 buses become PQ buses."""
    if np.any(t.btype == 0):
        log.info("%s: %d bus(es) of type 0 treated as PQ buses", t.src, int(np.sum(t.btype == 0)))
        t.btype = np.where(t.btype == 0, 1, t.btype)


def correct_out_of_service(t: _Tables) -> None:
    """Isolated buses (type 4), out-of-service branches and generators, and elements at dropped buses go."""
    src, branch, gen = t.src, t.data.branch, t.data.gen
    t.active_bus = t.btype != 4
    if not t.active_bus.any():
        raise CaseDataError(f"{src}: every bus is isolated (bus type 4); there is no network to solve")
    if not t.active_bus.all():
        log.info("%s: dropping %d isolated bus(es) (type 4)", src, int((~t.active_bus).sum()))
    t.active_branch = (branch[:, 10] != 0) & t.active_bus[t.f_all] & t.active_bus[t.t_all]
    if not t.active_branch.all():
        log.info("%s: dropping %d out-of-service branch(es)", src, int((~t.active_branch).sum()))
    t.active_gen = (gen[:, 7] > 0) & t.active_bus[t.gen_bus_all] if len(gen) else np.zeros(0, bool)
    if len(gen) and not t.active_gen.all():
        out = int((gen[:, 7] <= 0).sum())
        at_isolated = int(((gen[:, 7] > 0) & ~t.active_bus[t.gen_bus_all]).sum())
        if out:
            log.info("%s: dropping %d out-of-service generator(s)", src, out)
        if at_isolated:
            log.info("%s: dropping %d in-service generator(s) at isolated (type 4) buses", src, at_isolated)
    t.active_dcline = (t.dcline[:, 2] != 0) & t.active_bus[t.dc_f_all] & t.active_bus[t.dc_t_all]
    if not t.active_dcline.all():
        log.info("%s: dropping %d out-of-service dcline(s)", src, int((~t.active_dcline).sum()))


def correct_taps(t: _Tables) -> None:
    """A tap ratio of 0 means 1 (PowerModels resets non-positive taps too)."""
    raw = t.data.branch[t.active_branch, 8]
    t.tap = np.where(raw <= 0, 1.0, raw)
    if np.any(raw <= 0):
        log.info("%s: %d branch tap ratio(s) of 0 taken as 1", t.src, int(np.sum(raw <= 0)))


def correct_ratings(t: _Tables) -> None:
    """rateA = 0 means no thermal limit; any positive rateA, however small, is a limit."""
    rate = t.data.branch[t.active_branch, 5] / t.S
    # 0 is no limit; so is a rating whose square overflows (rateA 1e308: the thermal constraint squares it)
    t.rate_a = np.where((rate == 0.0) | (rate > NO_LIMIT_RATING), np.inf, rate)
    if np.any(rate > NO_LIMIT_RATING):
        log.info("%s: %d branch(es) with rateA above %g p.u. have no thermal limit", t.src, int(np.sum(rate > NO_LIMIT_RATING)), NO_LIMIT_RATING)
    if np.isinf(t.rate_a).any():
        log.info("%s: %d branch(es) with rateA = 0 have no thermal limit", t.src, int(np.isinf(t.rate_a).sum()))
    tiny = (rate > 0) & (rate * t.S < TINY_RATING_MVA)
    if tiny.any():
        k = int(np.flatnonzero(t.active_branch)[np.flatnonzero(tiny)[0]])
        log.warning(
            "%s: %d branch(es) have rateA below %g MVA (branch %d: %g MVA) and can carry almost no power; "
            "rateA = 0 means no limit", t.src, int(tiny.sum()), TINY_RATING_MVA, k + 1, t.data.branch[k, 5],
        )


def correct_angle_limits(t: _Tables) -> None:
    """PowerModels: limits of 90 degrees or more, or both 0, become ±60 degrees; MATPOWER: 0 or ±360 means none."""
    amin_deg, amax_deg = t.angmin_deg[t.active_branch], t.angmax_deg[t.active_branch]
    if t.convention == "powermodels":
        both_zero = (amin_deg == 0) & (amax_deg == 0)
        amin = np.where(amin_deg <= -90, -PM_ANGLE_PAD, np.deg2rad(amin_deg))
        amax = np.where(amax_deg >= 90, PM_ANGLE_PAD, np.deg2rad(amax_deg))
        amin[both_zero], amax[both_zero] = -PM_ANGLE_PAD, PM_ANGLE_PAD
        padded = both_zero | (amin_deg <= -90) | (amax_deg >= 90)
        if padded.any():
            log.info(
                "%s: %d branch angle-difference limit(s) of 90 degrees or more (or both 0) set to +-60 degrees (PowerModels)",
                t.src, int(padded.sum()),
            )
    else:
        none_min = (amin_deg == 0) | (amin_deg <= -360)
        none_max = (amax_deg == 0) | (amax_deg >= 360)
        amin = np.where(none_min, -np.inf, np.deg2rad(amin_deg))
        amax = np.where(none_max, np.inf, np.deg2rad(amax_deg))
    t.angmin, t.angmax = amin, amax


def dcline_end_limits(pmin, pmax, loss0, loss1):
    """Active-power bounds at both ends from MATPOWER's PMIN/PMAX (PowerModels' ``_mp2pm_dcline!``).

    PMIN/PMAX bound the from-end flow when non-negative; a negative PMIN (PMAX) bounds the
    to-end flow by -PMIN (PMAX), and the other end's bound follows from the loss relation
    (1 - loss1) p_fr + p_to = loss0 (docs/formulation.md). Any consistent unit.
    """
    g = 1.0 - loss1
    with np.errstate(divide="ignore", invalid="ignore"):
        pminf = np.where(pmin >= 0, pmin, (pmin + loss0) / g)  # -pmaxt = pmin
        pmaxt = np.where(pmin >= 0, loss0 - pmin * g, -pmin)
        pmaxf = np.where(pmax >= 0, pmax, (-pmax + loss0) / g)  # pmint = pmax
        pmint = np.where(pmax >= 0, loss0 - pmax * g, pmax)
    return pminf, pmaxf, pmint, pmaxt


def correct_dclines(t: _Tables) -> None:
    """End limits of the active HVDC lines, then PowerModels' ``correct_dcline_limits!`` on the losses."""
    dc = t.dcline[t.active_dcline]
    S = t.S
    loss0, loss1 = dc[:, 15] / S, dc[:, 16].copy()
    # limits from the raw losses, as PowerModels' parser does before it corrects them
    pminf, pmaxf, pmint, pmaxt = dcline_end_limits(dc[:, 9] / S, dc[:, 10] / S, loss0, loss1)
    ids = np.flatnonzero(t.active_dcline) + 1
    undefined = ~np.all(np.isfinite(np.stack([pminf, pmaxf, pmint, pmaxt])), axis=0)
    if undefined.any():
        k = int(np.flatnonzero(undefined)[0])
        raise CaseDataError(
            f"{t.src}: dcline {ids[k]} has LOSS1 {loss1[k]:g} with a negative PMIN or PMAX; its end limits "
            "(PMIN/PMAX through the loss relation) are undefined: LOSS1 must be below 1"
        )

    def fix(mask, what, values, unit):
        for k in np.flatnonzero(mask):
            log.warning("%s: dcline %d: %s; changing it from %g%s to 0 (as PowerModels)", t.src, ids[k], what, values[k], unit)

    neg0 = loss0 < 0
    fix(neg0, "negative LOSS0", loss0 * S, " MW")
    loss0 = np.where(neg0, 0.0, loss0)
    big0 = loss0 >= pmaxf * (1 - loss1) + pmaxt
    fix(big0, "LOSS0 inconsistent with the flow limits", loss0 * S, " MW")
    loss0 = np.where(big0, 0.0, loss0)
    bad1 = (loss1 < 0) | (loss1 >= 1)
    fix(bad1, "LOSS1 outside [0, 1)", loss1, "")
    loss1 = np.where(bad1, 0.0, loss1)
    # PowerModels warns on pmint < 0, which every forward-flowing lossy line has; a line that can run
    # backwards (PMIN < 0) is what makes the losses loss0 + loss1 p_fr negative
    both_ways = (pminf < 0) & (loss1 > 0)
    if both_ways.any():
        log.warning(
            "%s: dcline(s) %s can flow both ways (PMIN < 0) with LOSS1 > 0: the loss model is meant for one "
            "direction, so losses can come out negative; set LOSS1 = 0 to avoid this", t.src, _list_ids(ids[both_ways]),
        )
    t.dc_limits = {
        "pminf": pminf, "pmaxf": pmaxf, "pmint": pmint, "pmaxt": pmaxt,
        "qminf": dc[:, 11] / S, "qmaxf": dc[:, 12] / S, "qmint": dc[:, 13] / S, "qmaxt": dc[:, 14] / S,
        "loss0": loss0, "loss1": loss1,
    }

CORRECTIONS = (
    correct_bus_types, correct_out_of_service, correct_taps, correct_ratings, correct_angle_limits, correct_dclines,
)


def _list_ids(ids, limit: int = 8) -> str:
    ids = [str(int(i)) for i in ids]
    return ", ".join(ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
