import numpy as np
import pytest

from powerdp.engine.consensus.coordinator import Coordinator
from powerdp.engine.consensus.messages import ZoneUpdate


def upd(zone, rnd, vals):
    return ZoneUpdate(round=rnd, zone=zone, released=np.asarray(vals, float))


def test_average_and_dual_update_match_loop_reference():
    rng = np.random.default_rng(3)
    # 3 zones over 5 shared variables; variable 4 is held by all three
    maps = [np.array([0, 1, 4]), np.array([1, 2, 3, 4]), np.array([0, 2, 3, 4])]
    coord = Coordinator(5, maps, rho=7.0)
    vals = [rng.normal(size=len(m)) for m in maps]
    coord.start([upd(p, 0, v) for p, v in enumerate(vals)])
    coord.lam = rng.normal(size=len(coord.gidx))
    lam0 = coord.lam.copy()
    msgs = coord.broadcast()
    # reference with explicit loops: w_k = mean over zones sharing k of (x - lam/rho)
    ref = np.zeros(5)
    cnt = np.zeros(5)
    off = 0
    for p, m in enumerate(maps):
        for j, k in enumerate(m):
            ref[k] += vals[p][j] - lam0[off + j] / 7.0
            cnt[k] += 1
        off += len(m)
    np.testing.assert_allclose(coord.w, ref / cnt)
    for p, msg in enumerate(msgs):
        assert msg.round == 1 and msg.zone == p and msg.rho == 7.0
        np.testing.assert_allclose(msg.w, coord.w[maps[p]])
    new_vals = [rng.normal(size=len(m)) for m in maps]
    res = coord.receive([upd(p, 1, v) for p, v in enumerate(new_vals)])
    stacked = np.concatenate(new_vals)
    gap = coord.w[coord.gidx] - stacked
    np.testing.assert_allclose(coord.lam, lam0 + 7.0 * gap)
    assert res.primal == pytest.approx(np.linalg.norm(gap))
    assert res.dual == pytest.approx(7.0 * np.linalg.norm(coord.w))  # w^0 = 0


def test_consensus_fixed_point():
    maps = [np.array([0, 1]), np.array([0, 1])]
    coord = Coordinator(2, maps, rho=1.0)
    coord.start([upd(0, 0, [1.0, 2.0]), upd(1, 0, [1.0, 2.0])])
    coord.broadcast()
    res = coord.receive([upd(0, 1, [1.0, 2.0]), upd(1, 1, [1.0, 2.0])])
    assert res.primal == 0.0
    np.testing.assert_allclose(coord.lam, 0.0)


def test_rejects_bad_updates():
    coord = Coordinator(2, [np.array([0, 1]), np.array([0, 1])], rho=1.0)
    with pytest.raises(ValueError, match="expected 2 zone updates"):
        coord.start([upd(0, 0, [1.0, 2.0])])
    with pytest.raises(ValueError, match="zone 1 released"):
        coord.start([upd(0, 0, [1.0, 2.0]), upd(1, 0, [1.0])])
    with pytest.raises(FloatingPointError, match="zone 0 released NaN"):
        coord.start([upd(0, 0, [np.nan, 2.0]), upd(1, 0, [1.0, 2.0])])
    with pytest.raises(ValueError, match="sent round 3"):
        coord.start([upd(0, 3, [1.0, 2.0]), upd(1, 0, [1.0, 2.0])])
    with pytest.raises(ValueError, match="held by 1 zone"):
        Coordinator(2, [np.array([0, 1]), np.array([0])], rho=1.0)


def test_adaptive_penalty_balances_residuals():
    coord = Coordinator(1, [np.array([0]), np.array([0])], rho=10.0, rho_schedule="adaptive")
    coord.start([upd(0, 0, [0.0]), upd(1, 0, [0.0])])
    coord.broadcast()
    coord.receive([upd(0, 1, [5.0]), upd(1, 1, [-5.0])])  # large primal, zero dual residual
    assert coord.rho == 20.0


def test_coordinator_state_round_trip():
    coord = Coordinator(2, [np.array([0, 1]), np.array([0, 1])], rho=3.0)
    coord.start([upd(0, 0, [1.0, 2.0]), upd(1, 0, [3.0, 4.0])])
    coord.broadcast()
    other = Coordinator(2, [np.array([0, 1]), np.array([0, 1])], rho=1.0)
    other.load_state_dict(coord.state_dict())
    np.testing.assert_array_equal(other.w, coord.w)
    assert other.rho == 3.0 and other.round == 1


def _run(coord, rounds, rng, scale=1.0):
    """Drive a coordinator with zones that release noisy copies of their targets (a contraction towards 1)."""
    res = None
    for _ in range(rounds):
        msgs = coord.broadcast()
        t = coord.round
        res = coord.receive([upd(m.zone, t, 0.5 * m.w + 0.5 + scale * rng.normal(size=len(m.w)) / t**2) for m in msgs])
    return res


def test_relaxation_sends_the_over_relaxed_target_and_moves_the_duals_by_it():
    maps = [np.array([0, 1]), np.array([0, 1])]
    coord = Coordinator(2, maps, rho=2.0, relaxation=1.5)
    coord.start([upd(0, 0, [1.0, 2.0]), upd(1, 0, [3.0, 0.0])])
    msgs = coord.broadcast()
    np.testing.assert_allclose(coord.w, [2.0, 1.0])
    np.testing.assert_allclose(msgs[0].w, 1.5 * np.array([2.0, 1.0]) - 0.5 * np.array([1.0, 2.0]))
    np.testing.assert_allclose(msgs[1].w, 1.5 * np.array([2.0, 1.0]) - 0.5 * np.array([3.0, 0.0]))
    res = coord.receive([upd(0, 1, [2.0, 1.0]), upd(1, 1, [2.0, 1.0])])
    np.testing.assert_allclose(coord.lam, 2.0 * (np.concatenate([msgs[0].w, msgs[1].w]) - np.array([2.0, 1.0, 2.0, 1.0])))
    assert res.primal == 0.0  # the residual is measured against w itself, not the relaxed target
    with pytest.raises(ValueError, match="over-relaxation"):
        Coordinator(2, maps, rho=1.0, relaxation=2.0)


def test_relative_residuals_are_boyds():
    maps = [np.array([0, 1]), np.array([0, 1])]
    coord = Coordinator(2, maps, rho=3.0)
    coord.start([upd(0, 0, [1.0, 2.0]), upd(1, 0, [3.0, 0.0])])
    coord.broadcast()
    res = coord.receive([upd(0, 1, [1.0, 1.0]), upd(1, 1, [3.0, 1.0])])
    stacked = np.tile(coord.w, 2)
    released = np.array([1.0, 1.0, 3.0, 1.0])
    assert res.primal_relative == pytest.approx(np.linalg.norm(stacked - released) / max(np.linalg.norm(stacked), np.linalg.norm(released)))
    assert res.dual_relative == pytest.approx(3.0 * np.linalg.norm(np.tile(coord.w - coord.w_prev, 2)) / np.linalg.norm(coord.lam))
    assert coord.relative_residuals() == pytest.approx((res.primal_relative, res.dual_relative))


def test_per_entry_penalties_weight_the_average():
    maps = [np.array([0]), np.array([0])]
    coord = Coordinator(1, maps, rho=1.0, rho_schedule="balanced")
    assert coord.rho.shape == (2,)
    coord.rho = np.array([1.0, 3.0])
    coord.start([upd(0, 0, [0.0]), upd(1, 0, [4.0])])
    coord.lam = np.array([1.0, -1.0])
    msgs = coord.broadcast()
    np.testing.assert_allclose(coord.w, [(1.0 * 0.0 - 1.0 + 3.0 * 4.0 + 1.0) / 4.0])  # Σ(ρx − λ)/Σρ
    assert msgs[1].rho == pytest.approx([3.0])


def test_balancing_per_kind_moves_each_kind_its_own_way():
    # kind 0 (variable 0): the zones disagree a lot (large primal); kind 1 (variable 1): they agree
    maps = [np.array([0, 1]), np.array([0, 1])]
    coord = Coordinator(2, maps, rho=10.0, rho_schedule="balanced", groups=np.array([0, 1]))
    coord.start([upd(0, 0, [0.0, 1.0]), upd(1, 0, [0.0, 1.0])])
    coord.broadcast()
    coord.receive([upd(0, 1, [5.0, 1.0]), upd(1, 1, [-5.0, 1.0])])
    np.testing.assert_allclose(coord.rho[coord.kinds == 0], 20.0)  # primal ≫ dual: ρ doubles
    np.testing.assert_allclose(coord.rho[coord.kinds == 1], 5.0)  # dual ≫ primal (w moved, the copies agree): ρ halves


@pytest.mark.parametrize("schedule, acceleration", [("balanced", "anderson"), ("spectral", None), ("adaptive", "anderson"),
                                                    ("constant", "anderson")])
def test_a_restored_coordinator_goes_on_bit_identically(schedule, acceleration):
    maps = [np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([0, 3])]
    kw = dict(rho=2.0, rho_schedule=schedule, groups=np.array([0, 0, 1, 1]), relaxation=1.6, acceleration=acceleration)
    a = Coordinator(4, maps, **kw)
    a.start([upd(p, 0, np.ones(len(m))) for p, m in enumerate(maps)])
    _run(a, 6, np.random.default_rng(0))
    b = Coordinator(4, maps, **kw)
    b.load_state_dict({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in a.state_dict().items()})
    ra, rb = _run(a, 6, np.random.default_rng(1)), _run(b, 6, np.random.default_rng(1))
    assert ra == rb
    for name in ("w", "lam", "released", "x"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(np.asarray(a.rho), np.asarray(b.rho))


def test_anderson_sends_the_duals_and_reaches_the_fixed_point_faster():
    maps = [np.array([0, 1]), np.array([0, 1]), np.array([1])]
    centres = [np.array([1.0, -1.0]), np.array([3.0, 2.0]), np.array([0.5])]
    residuals = {}
    for name, acceleration in (("plain", None), ("fast", "anderson")):
        c = Coordinator(2, maps, rho=1.0, acceleration=acceleration)
        c.start([upd(p, 0, np.zeros(len(m))) for p, m in enumerate(maps)])
        out = []
        for t in range(1, 40):
            msgs = c.broadcast()
            if acceleration is None:
                assert msgs[0].lam is None
                lam = [c.lam[c.offsets[p]:c.offsets[p + 1]] for p in range(3)]
            else:
                lam = [m.lam for m in msgs]
                np.testing.assert_array_equal(np.concatenate(lam), c.lam)
            # zones with objectives (x_p − c_p)², each message solved exactly as a zone would
            out.append(c.receive([upd(p, t, (2 * centres[p] + m.rho * m.w + lam[p]) / (2 + m.rho)) for p, m in enumerate(msgs)]).primal)
        residuals[name] = out
    assert residuals["fast"][25] < 1e-3 * residuals["plain"][25]
