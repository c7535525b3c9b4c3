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
